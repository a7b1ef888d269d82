//! Unit tests of the Envoy → redcar mapping, one Envoy setting (or rule) at a time, each output
//! read back as the proxy reads a config.

use yaml_serde::Value;

use crate::config::Config;
use redcar_envoy::{convert, Conversion, ConvertError, Options};

// The documents the tests start from, shared with the converter's own tests.
pub(super) use redcar_envoy::testing::{base, cluster, error, listener, proxy, with_cluster, yaml};
use redcar_envoy::testing::{convert_doc, BASE};

/// Converts `doc`; a conversion whose output does not load as a config fails the test, as `run`
/// would refuse to print it.
fn run_with(doc: &Value, options: &Options) -> Result<Conversion, ConvertError> {
    let conversion = convert_doc(doc, options)?;
    if let Err(e) = super::loads(&conversion.yaml) {
        panic!("the output does not load: {e}\n{}", conversion.yaml);
    }
    Ok(conversion)
}

pub(super) fn run(doc: &Value) -> Conversion {
    run_with(doc, &Options::default()).unwrap_or_else(|e| panic!("conversion failed: {e}"))
}

/// The converted config, parsed back as redcar reads it.
pub(super) fn config(conversion: &Conversion) -> Config {
    Config::from_yaml(&conversion.yaml).expect("output parses")
}

pub(super) fn has_warning(conversion: &Conversion, needle: &str) -> bool {
    conversion.warnings.iter().any(|w| w.contains(needle))
        && conversion
            .yaml
            .lines()
            .any(|l| l.starts_with("# ") && l.contains(needle))
}

/// The converter keeps its own copies of what it shares with the config by value.
#[test]
fn the_values_shared_with_the_config_agree() {
    assert_eq!(
        redcar_envoy::DEFAULT_BACKEND,
        crate::backends::DEFAULT_BACKEND
    );
    assert_eq!(
        redcar_envoy::MAX_KEEPALIVE_PROBES,
        crate::upstream::MAX_KEEPALIVE_PROBES
    );
    assert_eq!(
        redcar_envoy::MAX_KEEPALIVE_SECONDS,
        crate::upstream::MAX_KEEPALIVE_SECONDS
    );
}

#[test]
fn a_minimal_sidecar_converts_and_validates() {
    let out = run(&base());
    let config = config(&out);
    assert_eq!(config.listen.as_deref(), Some("127.0.0.1:6380"));
    assert_eq!(config.cluster.seeds, ["127.0.0.1:7000"]);
    assert_eq!(config.router.op_timeout, std::time::Duration::from_secs(1));
    config
        .validate()
        .expect("a converted config passes validation");
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
}

#[test]
fn durations_accept_strings_and_protobuf_objects() {
    let mut doc = base();
    proxy(&mut doc)["settings"]["op_timeout"] = "0.25s".into();
    cluster(&mut doc)["connect_timeout"] = yaml("{seconds: 1, nanos: 500000000}");
    let config = config(&run(&doc));
    assert_eq!(config.router.op_timeout.as_millis(), 250);
    assert_eq!(config.upstream.connect_timeout.as_millis(), 1500);
    proxy(&mut doc)["settings"]["op_timeout"] = "soon".into();
    assert!(error(&doc, &Options::default()).contains("settings.op_timeout"));
}

#[test]
fn read_policies_map_by_name_and_number() {
    use crate::router::ReadPolicy;
    let cases: &[(&str, ReadPolicy)] = &[
        ("MASTER", ReadPolicy::Primary),
        ("PREFER_MASTER", ReadPolicy::PreferPrimary),
        ("REPLICA", ReadPolicy::Replica),
        ("PREFER_REPLICA", ReadPolicy::PreferReplica),
        ("ANY", ReadPolicy::Any),
        ("3", ReadPolicy::PreferReplica),
    ];
    for (envoy, redcar) in cases {
        let mut doc = base();
        proxy(&mut doc)["settings"]["read_policy"] = yaml(envoy);
        assert_eq!(config(&run(&doc)).router.read_policy, *redcar, "{envoy}");
    }
    let mut doc = base();
    proxy(&mut doc)["settings"]["read_policy"] = "AZ_AFFINITY".into();
    let out = run(&doc);
    assert_eq!(config(&out).router.read_policy, ReadPolicy::PreferReplica);
    assert!(has_warning(&out, "settings.read_policy AZ_AFFINITY"));
    proxy(&mut doc)["settings"]["read_policy"] = "NEAREST".into();
    assert!(error(&doc, &Options::default()).contains("read_policy"));
}

#[test]
fn batching_becomes_a_capped_flush_window() {
    let mut doc = base();
    proxy(&mut doc)["settings"]["max_buffer_size_before_flush"] = 1024.into();
    let out = run(&doc);
    // Envoy's default window when only the size is set.
    assert_eq!(config(&out).upstream.flush_interval.as_millis(), 3);
    assert!(has_warning(
        &out,
        "settings.max_buffer_size_before_flush 1024"
    ));
    proxy(&mut doc)["settings"]["buffer_flush_timeout"] = "0.02s".into();
    let out = run(&doc);
    assert_eq!(config(&out).upstream.flush_interval.as_millis(), 10);
    assert!(has_warning(&out, "above 10ms"));
    // A timeout alone does nothing in Envoy either.
    let mut doc = base();
    proxy(&mut doc)["settings"]["buffer_flush_timeout"] = "0.002s".into();
    let out = run(&doc);
    assert!(config(&out).upstream.flush_interval.is_zero());
    assert!(has_warning(&out, "settings.buffer_flush_timeout without"));
}

#[test]
fn settings_without_equivalent_become_notes() {
    let mut doc = base();
    let settings = &mut proxy(&mut doc)["settings"];
    settings["enable_redirection"] = false.into();
    settings["max_upstream_unknown_connections"] = 10.into();
    settings["dns_cache_config"] = yaml("{name: dns}");
    settings["some_future_setting"] = true.into();
    settings["enable_command_stats"] = false.into();
    settings["connection_rate_limit"] = yaml("{connection_rate_limit_per_sec: 20}");
    let out = run(&doc);
    for needle in [
        "settings.enable_redirection is off",
        "settings.max_upstream_unknown_connections",
        "settings.dns_cache_config",
        "settings.some_future_setting: not converted",
        "settings.connection_rate_limit: approximated",
    ] {
        assert!(has_warning(&out, needle), "{needle}:\n{}", out.yaml);
    }
    let config = config(&out);
    assert!(!config.metrics.command_stats);
    assert_eq!(config.upstream.max_connects_per_second, 20);
}

#[test]
fn an_inline_client_password_is_kept_as_its_digest_and_never_shown() {
    let mut doc = base();
    proxy(&mut doc)["downstream_auth_password"] = yaml("{inline_string: s3cret-pw}");
    let out = run(&doc);
    assert!(!out.yaml.contains("s3cret-pw"), "{}", out.yaml);
    assert!(!out.warnings.iter().any(|w| w.contains("s3cret-pw")));
    let config = config(&out);
    let digest = config.auth.requirepass.expect("requirepass").resolve("k");
    assert!(digest.expect("digest").matches(b"s3cret-pw"));
}

#[test]
fn a_username_makes_a_named_user_and_extra_passwords_are_noted() {
    let dir = tempfile::tempdir().expect("tmp");
    let name_file = dir.path().join("user");
    std::fs::write(&name_file, "app\n").expect("write");
    let mut doc = base();
    let p = proxy(&mut doc);
    p["downstream_auth_username"] = yaml(&format!("{{filename: {}}}", name_file.display()));
    p["downstream_auth_passwords"] =
        yaml("[{environment_variable: CLIENT_PW}, {filename: /run/pw2}]");
    let out = run(&doc);
    let config = config(&out);
    assert!(config.auth.requirepass.is_none());
    assert_eq!(config.auth.users.len(), 1);
    assert_eq!(config.auth.users[0].name, "app");
    assert!(out.yaml.contains("env: CLIENT_PW"), "{}", out.yaml);
    assert!(has_warning(&out, "only the first of 2 kept"));
    assert!(has_warning(
        &out,
        "downstream_auth_username: read from filename"
    ));
}

#[test]
fn node_credentials_come_from_the_protocol_options() {
    let mut doc = base();
    cluster(&mut doc)["typed_extension_protocol_options"] = yaml(
        r#"{envoy.filters.network.redis_proxy: {"@type": x, auth_username: {inline_string: px}, auth_password: {inline_string: node-pw}, credentials: []}}"#,
    );
    let out = run(&doc);
    let config = config(&out);
    assert_eq!(config.upstream.username.as_deref(), Some("px"));
    let password = config.upstream.password.expect("password").reveal("k");
    assert_eq!(password.as_deref(), Ok("node-pw"));
    assert!(!out.warnings.iter().any(|w| w.contains("node-pw")));
    assert!(has_warning(&out, "cluster auth_password: inline_string"));
    assert!(has_warning(&out, "credentials (per-node passwords)"));
}

#[test]
fn faults_keep_share_commands_delay_and_envoys_error_text() {
    let mut doc = base();
    proxy(&mut doc)["faults"] = yaml(
        r#"
- fault_type: ERROR
  fault_enabled: { default_value: { numerator: 10 }, runtime_key: k }
  commands: [GET, SET]
- fault_type: DELAY
  fault_enabled: { default_value: { numerator: 5000, denominator: MILLION } }
  delay: 0.1s
- fault_type: DELAY
  fault_enabled: { default_value: { numerator: 1 } }
"#,
    );
    let out = run(&doc);
    let faults = config(&out).router.faults;
    assert_eq!(faults.len(), 2, "the delay-less DELAY fault is dropped");
    assert_eq!(faults[0].commands, ["GET", "SET"]);
    assert_eq!(faults[0].percentage, 10.0);
    assert_eq!(faults[0].error.as_deref(), Some("Fault Injected: Error"));
    assert_eq!(faults[1].percentage, 0.5);
    assert_eq!(faults[1].delay.as_millis(), 100);
    assert!(has_warning(&out, "faults[0].fault_enabled.runtime_key"));
    assert!(has_warning(
        &out,
        "faults[2]: a DELAY fault without a delay"
    ));
    crate::router::validate_faults(&faults).expect("valid rules");
}

#[test]
fn cluster_flag_converts_one_cluster_of_several() {
    let mut doc = base();
    proxy(&mut doc)["prefix_routes"] =
        yaml("{routes: [{prefix: 'a:', cluster: other}], catch_all_route: {cluster: rc}}");
    let pick = |name: &str| Options {
        cluster: Some(name.to_owned()),
        ..Options::default()
    };
    let out = run_with(&doc, &pick("rc")).expect("rc chosen");
    assert_eq!(config(&out).cluster.seeds, ["127.0.0.1:7000"]);
    assert!(config(&out).routes.is_empty());
    assert!(has_warning(&out, "`a:` → other"));
    // `other` is routed to but not defined.
    assert!(error(&doc, &pick("other")).contains("not defined"));
    assert!(error(&doc, &pick("nope")).contains("no route"));
    // Without --cluster the routes are converted, and `other` must exist.
    assert!(error(&doc, &Options::default()).contains("`other`, which is not defined"));
}

#[test]
fn routes_that_rewrite_keys_by_template_are_refused() {
    let mut doc = base();
    proxy(&mut doc)["prefix_routes"] =
        yaml("{catch_all_route: {cluster: rc, key_formatter: 'x-%KEY%'}}");
    assert!(error(&doc, &Options::default()).contains("key_formatter"));
    // remove_prefix becomes strip_prefix, which --cluster cannot write.
    proxy(&mut doc)["prefix_routes"] =
        yaml("{routes: [{prefix: 'a:', cluster: rc, remove_prefix: true}]}");
    let only = Options {
        cluster: Some("rc".to_owned()),
        ..Options::default()
    };
    assert!(error(&doc, &only).contains("remove_prefix"));
    let out = run(&doc);
    assert!(config(&out).routes[0].strip_prefix);
}

#[test]
fn several_redis_listeners_need_listener_name() {
    let mut doc = base();
    let mut second = listener(&mut doc).clone();
    second["name"] = "other".into();
    second["address"]["socket_address"]["port_value"] = 6381.into();
    doc["static_resources"]["listeners"]
        .as_sequence_mut()
        .expect("listeners")
        .push(second);
    let message = error(&doc, &Options::default());
    assert!(
        message.contains("--listener NAME") && message.contains("other"),
        "{message}"
    );
    let options = Options {
        listener: Some("other".into()),
        ..Options::default()
    };
    let out = run_with(&doc, &options).expect("picked");
    assert_eq!(config(&out).listen.as_deref(), Some("127.0.0.1:6381"));
    let options = Options {
        listener: Some("missing".into()),
        ..Options::default()
    };
    assert!(error(&doc, &options).contains("no listener named `missing`"));
}

#[test]
fn yaml_merge_keys_are_applied() {
    let text = BASE.replace(
        "settings: { op_timeout: 1s, enable_redirection: true }",
        "settings: { <<: *pool, op_timeout: 2s }",
    );
    let text = format!("pool: &pool {{ enable_redirection: true, read_policy: ANY }}\n{text}");
    let out = convert(&text, "merge.yaml", &Options::default()).expect("converts");
    let config = config(&out);
    assert_eq!(config.router.read_policy, crate::router::ReadPolicy::Any);
    assert_eq!(config.router.op_timeout.as_secs(), 2);
    // The anchors' holder is a bootstrap key like any other: named, not silently skipped.
    assert_eq!(out.warnings.len(), 1, "{:?}", out.warnings);
    assert!(has_warning(&out, "bootstrap pool: not converted"));
}

#[test]
fn pipe_listeners_become_unix_sockets() {
    let mut doc = base();
    listener(&mut doc)["address"] = yaml("{pipe: {path: /run/r.sock, mode: 0o600}}");
    let config = config(&run(&doc));
    assert_eq!(
        config.unix.as_deref(),
        Some(std::path::Path::new("/run/r.sock"))
    );
    assert_eq!(config.unix_permissions, "600");
    assert!(config.listen.is_none());
}

#[test]
fn a_tls_filter_chain_becomes_the_tls_listener() {
    let mut doc = base();
    listener(&mut doc)["filter_chains"][0]["transport_socket"] = yaml(
        r#"
name: envoy.transport_sockets.tls
typed_config:
  "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
  require_client_certificate: true
  common_tls_context:
    tls_certificates: [{certificate_chain: {filename: /c.pem}, private_key: {filename: /k.pem}}]
    validation_context: {trusted_ca: {filename: /ca.pem}}
"#,
    );
    let config = config(&run(&doc));
    assert!(config.listen.is_none());
    assert_eq!(config.tls.listen.as_deref(), Some("127.0.0.1:6380"));
    assert_eq!(
        config.tls.client_ca.as_deref(),
        Some(std::path::Path::new("/ca.pem"))
    );
}

#[test]
fn refresh_and_ejection_settings_stay_consistent() {
    let mut doc = base();
    cluster(&mut doc)["cluster_type"]["typed_config"] = yaml(
        r#"{"@type": type.googleapis.com/google.protobuf.Struct, value: {cluster_refresh_rate: 2s, redirect_refresh_interval: 5s, redirect_refresh_threshold: 0}}"#,
    );
    cluster(&mut doc)["outlier_detection"] =
        yaml("{base_ejection_time: 60s, consecutive_gateway_failure: 3}");
    let out = run(&doc);
    let config = config(&out);
    assert_eq!(
        config.cluster.refresh_min_gap,
        config.cluster.refresh_interval
    );
    assert_eq!(config.cluster.redirect_refresh_threshold, 0);
    assert_eq!(config.upstream.outlier.max_ejection_time.as_secs(), 60);
    assert!(has_warning(
        &out,
        "outlier_detection.consecutive_gateway_failure"
    ));
    config.validate().expect("consistent");
    let mut doc = base();
    cluster(&mut doc)["outlier_detection"] = yaml("{enforcing_consecutive_5xx: 0}");
    assert_eq!(config_of(&doc).upstream.outlier.consecutive_failures, 0);
}

fn config_of(doc: &Value) -> Config {
    config(&run(doc))
}
