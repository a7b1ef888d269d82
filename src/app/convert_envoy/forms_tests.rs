//! Unit tests of the forms an Envoy config is read from: Istio EnvoyFilter manifests, an admin
//! config_dump, and the errors for a file in none of them.

use super::tests::config;
use crate::router::ReadPolicy;
use redcar_envoy::{convert, Conversion, Options};

/// The redis_proxy filter the EnvoyFilter tests patch in (indented for a patch's `value`).
const FILTER: &str = r#"
          name: envoy.filters.network.redis_proxy
          typed_config:
            "@type": type.googleapis.com/envoy.extensions.filters.network.redis_proxy.v3.RedisProxy
            stat_prefix: redis
            settings: { op_timeout: 2s, enable_redirection: true, read_policy: PREFER_REPLICA }
            prefix_routes: { catch_all_route: { cluster: redis-cluster } }"#;

/// A CLUSTER patch carrying the envoy.clusters.redis cluster.
const CLUSTER_PATCH: &str = r#"
    - applyTo: CLUSTER
      patch:
        operation: INSERT_FIRST
        value:
          name: redis-cluster
          connect_timeout: 0.5s
          lb_policy: CLUSTER_PROVIDED
          cluster_type: { name: envoy.clusters.redis }
          load_assignment:
            cluster_name: redis-cluster
            endpoints:
              - lb_endpoints:
                  - endpoint: { address: { socket_address: { address: 10.1.0.5, port_value: 6379 } } }"#;

fn envoy_filter(name: &str, patches: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1alpha3\nkind: EnvoyFilter\nmetadata:\n  name: {name}\n\
         spec:\n  configPatches:{patches}\n"
    )
}

/// A NETWORK_FILTER patch into the sidecar's listener on port 6379.
fn network_filter_patch() -> String {
    format!(
        r#"
    - applyTo: NETWORK_FILTER
      match:
        context: SIDECAR_OUTBOUND
        listener:
          portNumber: 6379
          filterChain: {{ filter: {{ name: envoy.filters.network.tcp_proxy }} }}
      patch:
        operation: REPLACE
        value:{FILTER}"#
    )
}

fn convert_ok(text: &str) -> Conversion {
    convert(text, "envoy.yaml", &Options::default()).unwrap_or_else(|e| panic!("{e}"))
}

fn convert_err(text: &str) -> String {
    match convert(text, "envoy.yaml", &Options::default()) {
        Ok(c) => panic!("expected an error, got:\n{}", c.yaml),
        Err(e) => e.0,
    }
}

fn noted(conversion: &Conversion, needle: &str) -> bool {
    super::tests::has_warning(conversion, needle)
}

#[test]
fn a_listener_patch_and_a_cluster_patch_in_two_documents_convert() {
    // The filter's lines, indented to sit in the listener's filter list.
    let filter = FILTER.replace("\n          ", "\n                  ");
    let listener = format!(
        r#"
    - applyTo: LISTENER
      match: {{ context: SIDECAR_OUTBOUND }}
      patch:
        operation: ADD
        value:
          name: redis-sidecar
          address: {{ socket_address: {{ address: 127.0.0.1, port_value: 6380 }} }}
          filter_chains:
            - filters:
                - {}"#,
        filter.trim_start()
    );
    let text = format!(
        "{}---\n{}",
        envoy_filter("redis-listener", &listener),
        envoy_filter("redis-cluster", CLUSTER_PATCH)
    );
    let out = convert_ok(&text);
    assert!(out
        .yaml
        .starts_with("# redcar config converted from envoy.yaml (Istio EnvoyFilter) by"));
    let config = config(&out);
    assert_eq!(config.listen.as_deref(), Some("127.0.0.1:6380"));
    assert_eq!(config.cluster.seeds, ["10.1.0.5:6379"]);
    assert_eq!(config.router.read_policy, ReadPolicy::PreferReplica);
    assert_eq!(config.router.op_timeout.as_secs(), 2);
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
}

#[test]
fn one_envoyfilter_document_with_a_filter_patch_listens_on_the_matched_port() {
    let text = envoy_filter(
        "redis",
        &format!("{}{CLUSTER_PATCH}", network_filter_patch()),
    );
    let out = convert_ok(&text);
    let config = config(&out);
    assert_eq!(config.listen.as_deref(), Some("127.0.0.1:6379"));
    assert_eq!(config.upstream.connect_timeout.as_millis(), 500);
    assert!(noted(&out, "redcar listens on 127.0.0.1:6379"));
}

#[test]
fn other_documents_and_patches_are_ignored_with_a_note() {
    let service =
        "apiVersion: v1\nkind: Service\nmetadata: {name: redis}\nspec: {ports: [{port: 6379}]}\n";
    let others = r#"
    - applyTo: HTTP_FILTER
      patch: { operation: INSERT_BEFORE, value: { name: envoy.filters.http.lua } }
    - applyTo: NETWORK_FILTER
      match: { listener: { portNumber: 6379 } }
      patch: { operation: REMOVE }
    - applyTo: NETWORK_FILTER
      match: { listener: { portNumber: 6379 } }
      patch: { operation: INSERT_FIRST, value: { name: envoy.filters.network.rbac } }"#;
    let patches = format!("{others}{}{CLUSTER_PATCH}", network_filter_patch());
    let text = format!("{service}---\n{}---\n", envoy_filter("redis", &patches));
    let out = convert_ok(&text);
    for needle in [
        "manifest 1 (kind: Service, name: redis): ignored",
        "configPatches[0] (applyTo: HTTP_FILTER): ignored",
        "configPatches[1] (applyTo: NETWORK_FILTER): ignored; it removes",
        "configPatches[2] (applyTo: NETWORK_FILTER): ignored; it holds no redis_proxy filter",
    ] {
        assert!(noted(&out, needle), "{needle}:\n{}", out.yaml);
    }
}

#[test]
fn a_filter_patch_without_a_port_is_refused() {
    let patch = network_filter_patch().replace("portNumber: 6379", "name: virtualOutbound");
    let message = convert_err(&envoy_filter("redis", &format!("{patch}{CLUSTER_PATCH}")));
    assert!(message.contains("match.listener.portNumber"), "{message}");
}

#[test]
fn kubectl_lists_and_camel_case_fields_are_read() {
    let patches = format!("{}{CLUSTER_PATCH}", network_filter_patch())
        .replace("typed_config", "typedConfig")
        .replace("op_timeout", "opTimeout")
        .replace("port_value", "portValue");
    let filter = envoy_filter("redis", &patches);
    let item = filter.replace('\n', "\n    ");
    let text = format!("apiVersion: v1\nkind: List\nitems:\n  - {item}");
    let out = convert_ok(&text);
    let config = config(&out);
    assert_eq!(config.router.op_timeout.as_secs(), 2);
    assert_eq!(config.cluster.seeds, ["10.1.0.5:6379"]);
}

/// An admin /config_dump trimmed to what matters, as Envoy prints it.
const DUMP: &str = r#"{
 "configs": [
  {"@type": "type.googleapis.com/envoy.admin.v3.BootstrapConfigDump",
   "bootstrap": {"node": {"id": "php-7f9c"}, "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 15000}}}}},
  {"@type": "type.googleapis.com/envoy.admin.v3.ListenersConfigDump",
   "dynamic_listeners": [{"name": "redis", "active_state": {"version_info": "3", "listener": {
     "@type": "type.googleapis.com/envoy.config.listener.v3.Listener",
     "name": "redis",
     "address": {"socket_address": {"address": "127.0.0.1", "port_value": 6390}},
     "filter_chains": [{"filters": [{"name": "envoy.filters.network.redis_proxy", "typed_config": {
       "@type": "type.googleapis.com/envoy.extensions.filters.network.redis_proxy.v3.RedisProxy",
       "stat_prefix": "redis",
       "settings": {"op_timeout": "0.750s", "enable_redirection": true, "read_policy": "PREFER_REPLICA"},
       "prefix_routes": {"catch_all_route": {"cluster": "redis"}}}}]}]}}}]},
  {"@type": "type.googleapis.com/envoy.admin.v3.ClustersConfigDump",
   "dynamic_active_clusters": [{"version_info": "3", "cluster": {
     "@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster",
     "name": "redis",
     "connect_timeout": "1s",
     "lb_policy": "CLUSTER_PROVIDED",
     "cluster_type": {"name": "envoy.clusters.redis", "typed_config": {
       "@type": "type.googleapis.com/envoy.extensions.clusters.redis.v3.RedisClusterConfig",
       "cluster_refresh_rate": "3s"}},
     "load_assignment": {"cluster_name": "redis", "endpoints": [{"lb_endpoints": [
       {"endpoint": {"address": {"socket_address": {"address": "10.2.0.7", "port_value": 6379}}}}]}]}}}]},
  {"@type": "type.googleapis.com/envoy.admin.v3.RoutesConfigDump"}
 ]
}"#;

#[test]
fn an_admin_config_dump_converts() {
    let out = convert_ok(DUMP);
    assert!(out.yaml.contains("(Envoy admin config_dump)"));
    let config = config(&out);
    assert_eq!(config.listen.as_deref(), Some("127.0.0.1:6390"));
    assert_eq!(config.cluster.seeds, ["10.2.0.7:6379"]);
    assert_eq!(config.cluster.refresh_interval.as_secs(), 3);
    assert_eq!(config.router.op_timeout.as_millis(), 750);
    assert_eq!(config.router.read_policy, ReadPolicy::PreferReplica);
    assert!(noted(&out, "config_dump RoutesConfigDump: not read"));
    assert!(noted(&out, "bootstrap node: not converted"));
    assert!(noted(
        &out,
        "admin: Envoy's admin interface is not converted"
    ));
}

#[test]
fn per_resource_config_dump_entries_are_read() {
    // `/config_dump?resource=...` prints the resources themselves as entries.
    let dump: serde_json::Value = serde_json::from_str(DUMP).expect("sample parses");
    let mut listener = dump["configs"][1]["dynamic_listeners"][0].clone();
    listener["@type"] =
        "type.googleapis.com/envoy.admin.v3.ListenersConfigDump.DynamicListener".into();
    let mut cluster = dump["configs"][2]["dynamic_active_clusters"][0].clone();
    cluster["@type"] =
        "type.googleapis.com/envoy.admin.v3.ClustersConfigDump.DynamicCluster".into();
    let text = serde_json::json!({ "configs": [listener, cluster] }).to_string();
    let out = convert_ok(&text);
    assert_eq!(config(&out).cluster.seeds, ["10.2.0.7:6379"]);
    assert_eq!(config(&out).listen.as_deref(), Some("127.0.0.1:6390"));
}

#[test]
fn a_file_in_no_known_form_gets_an_error_naming_the_forms() {
    let forms = "an Envoy bootstrap (static_resources";
    for (text, expected) in [
        ("replicas: 3\n", "none of the forms"),
        (
            "a: 1\n---\nb: 2\n",
            "holds 2 YAML documents and none is an Istio EnvoyFilter",
        ),
        (
            "apiVersion: v1\nkind: Service\nmetadata: {name: r}\n",
            "but no EnvoyFilter",
        ),
        ("", "none of the forms"),
    ] {
        let message = convert_err(text);
        assert!(message.contains(expected), "{text:?}: {message}");
        assert!(message.contains(forms), "{text:?}: {message}");
    }
    let xds = "dynamic_resources: {lds_config: {ads: {}}}\n";
    assert!(convert_err(xds).contains("convert Envoy's admin config_dump instead"));
    let empty_filter = envoy_filter("redis", " []");
    let message = convert_err(&empty_filter);
    assert!(message.contains("in the EnvoyFilter patches"), "{message}");
}
