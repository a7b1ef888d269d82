//! Unit tests of `prefix_routes` → `routes:`, `backends:`, `catch_all` and
//! `routes_ignore_case`, and of the per-cluster settings a backend cannot carry.

use super::tests::{base, config, has_warning, proxy, run, with_cluster, yaml};
use crate::backends::BackendConfig;

fn seeds(backend: &BackendConfig) -> Vec<String> {
    match backend {
        BackendConfig::Cluster(c) => c.seeds.clone(),
        other => panic!("not a cluster backend: {other:?}"),
    }
}

#[test]
fn prefix_routes_become_routes_to_named_backends() {
    let mut doc = base();
    with_cluster(&mut doc, "sessions", 7100);
    with_cluster(&mut doc, "shadow", 7200);
    proxy(&mut doc)["prefix_routes"] = yaml(
        r#"
case_insensitive: true
routes:
  - {prefix: "sess:", cluster: sessions, remove_prefix: true}
  - prefix: "user:"
    cluster: rc
    request_mirror_policy:
      - cluster: shadow
        exclude_read_commands: true
        runtime_fraction: {default_value: {numerator: 25}}
  - prefix: "user:vip:"
    cluster: sessions
    request_mirror_policy: [{cluster: shadow}]
catch_all_route: {cluster: rc}
"#,
    );
    let out = run(&doc);
    let c = config(&out);
    c.validate().expect("converted routes validate");
    assert_eq!(c.cluster.seeds, ["127.0.0.1:7000"]);
    assert_eq!(c.catch_all, "default");
    assert!(c.routes_ignore_case);
    assert_eq!(seeds(&c.backends["sessions"]), ["127.0.0.1:7100"]);
    assert_eq!(seeds(&c.backends["shadow"]), ["127.0.0.1:7200"]);
    assert_eq!(c.backends.len(), 2);
    let [sess, user, vip] = c.routes.as_slice() else {
        panic!("three routes: {:?}", c.routes);
    };
    assert_eq!(
        (sess.prefix.as_str(), sess.backend.as_str()),
        ("sess:", "sessions")
    );
    assert!(sess.strip_prefix && sess.mirror.is_none());
    assert_eq!(
        (user.backend.as_str(), user.strip_prefix),
        ("default", false)
    );
    let mirror = user.mirror.as_ref().expect("user: mirrored");
    assert_eq!((mirror.backend.as_str(), mirror.percent), ("shadow", 25));
    assert!(!mirror.reads, "exclude_read_commands: true");
    // Envoy mirrors reads unless told not to; no runtime_fraction is every command.
    let mirror = vip.mirror.as_ref().expect("user:vip: mirrored");
    assert_eq!((mirror.percent, mirror.reads), (100, true));
    // Everything converts: the one note only says which cluster is `default`.
    assert_eq!(
        out.warnings,
        ["cluster: Envoy's catch-all cluster rc, redcar's backend `default` (catch_all)"]
    );
}

#[test]
fn what_a_route_cannot_carry_gets_a_comment() {
    let mut doc = base();
    with_cluster(&mut doc, "sessions", 7100);
    with_cluster(&mut doc, "replicas", 7200);
    with_cluster(&mut doc, "shadow", 7300);
    proxy(&mut doc)["prefix_routes"] = yaml(
        r#"
routes:
  - prefix: "a:"
    cluster: sessions
    read_command_policy: {cluster: replicas, runtime_fraction: {default_value: {numerator: 50}}}
    request_mirror_policy:
      - cluster: shadow
        runtime_fraction: {default_value: {numerator: 333, denominator: TEN_THOUSAND}, runtime_key: m.a}
      - cluster: rc
  - {prefix: "b:", cluster: sessions, request_mirror_policy: [{cluster: sessions}], future: 1}
catch_all_route:
  cluster: rc
  request_mirror_policy: [{cluster: shadow}]
"#,
    );
    let out = run(&doc);
    for needle in [
        "read_command_policy (reads to cluster replicas, a runtime_fraction of them) not converted",
        "request_mirror_policy[0].runtime_fraction.runtime_key: ignored",
        "333/10000 rounded to 3%",
        "request_mirror_policy[1] (cluster rc): not converted; a redcar route has one mirror",
        "route for prefix `b:` request_mirror_policy[0]: mirrors to the route's own cluster",
        "route for prefix `b:` future: not converted",
        "catch_all_route: request_mirror_policy (cluster shadow) not converted",
    ] {
        assert!(has_warning(&out, needle), "{needle}:\n{}", out.yaml);
    }
    let c = config(&out);
    c.validate().expect("valid");
    assert_eq!(c.routes[0].mirror.as_ref().map(|m| m.percent), Some(3));
    assert!(c.routes[1].mirror.is_none());
    // A cluster only read_command_policy names is not a backend.
    assert!(!c.backends.contains_key("replicas"), "{:?}", c.backends);
}

#[test]
fn without_a_catch_all_route_the_first_cluster_serves_the_rest() {
    let mut doc = base();
    with_cluster(&mut doc, "sessions", 7100);
    proxy(&mut doc)["prefix_routes"] =
        yaml("{routes: [{prefix: 'a:', cluster: sessions}, {prefix: 'b:', cluster: rc}]}");
    let out = run(&doc);
    let c = config(&out);
    c.validate().expect("valid");
    assert_eq!(c.cluster.seeds, ["127.0.0.1:7100"]);
    assert_eq!(c.routes[1].backend, "rc");
    assert!(has_warning(&out, "prefix_routes has no catch_all_route"));
}

#[test]
fn one_cluster_needs_no_routes_and_default_is_renamed() {
    let mut doc = base();
    proxy(&mut doc)["prefix_routes"] =
        yaml("{routes: [{prefix: 'a:', cluster: rc}], catch_all_route: {cluster: rc}}");
    let out = run(&doc);
    assert!(config(&out).routes.is_empty(), "{}", out.yaml);
    with_cluster(&mut doc, "default", 7100);
    proxy(&mut doc)["prefix_routes"] =
        yaml("{routes: [{prefix: 'a:', cluster: default}], catch_all_route: {cluster: rc}}");
    let out = run(&doc);
    let c = config(&out);
    c.validate().expect("valid");
    assert_eq!(c.routes[0].backend, "envoy-default");
    assert!(has_warning(
        &out,
        "cluster default is the backend envoy-default"
    ));
}

#[test]
fn settings_of_other_clusters_that_differ_are_named_without_values() {
    let mut doc = base();
    let other = with_cluster(&mut doc, "sessions", 7100);
    other["connect_timeout"] = "2s".into();
    other["typed_extension_protocol_options"] = yaml(
        "{envoy.filters.network.redis_proxy: {\"@type\": type.googleapis.com/envoy.extensions.filters.network.redis_proxy.v3.RedisProtocolOptions, auth_password: {inline_string: s3cret-pw}}}",
    );
    other["health_checks"] = yaml("[{timeout: 1s}]");
    proxy(&mut doc)["prefix_routes"] =
        yaml("{routes: [{prefix: 'a:', cluster: sessions}], catch_all_route: {cluster: rc}}");
    let out = run(&doc);
    assert!(
        has_warning(
            &out,
            "cluster sessions upstream.connect_timeout, upstream.password: not converted"
        ),
        "{}",
        out.yaml
    );
    assert!(has_warning(&out, "cluster health_checks: not converted"));
    assert!(!out.yaml.contains("s3cret-pw"), "{}", out.yaml);
    assert!(!out.warnings.iter().any(|w| w.contains("s3cret-pw")));
    assert!(config(&out).upstream.password.is_none());
}

#[test]
fn an_empty_prefix_is_the_catch_all_unless_there_is_one() {
    let mut doc = base();
    with_cluster(&mut doc, "sessions", 7100);
    proxy(&mut doc)["prefix_routes"] =
        yaml("{routes: [{prefix: '', cluster: sessions}, {prefix: 'a:', cluster: rc}]}");
    let out = run(&doc);
    let c = config(&out);
    c.validate().expect("valid");
    assert_eq!(c.cluster.seeds, ["127.0.0.1:7100"]);
    assert_eq!(c.routes.len(), 1);
    proxy(&mut doc)["prefix_routes"]["catch_all_route"] = yaml("{cluster: rc}");
    let out = run(&doc);
    assert_eq!(config(&out).cluster.seeds, ["127.0.0.1:7000"]);
    assert!(has_warning(&out, "an empty prefix is not converted"));
}
