//! Unit tests of the rule that nothing in the Envoy file is dropped without a word: every
//! setting becomes a redcar key or a comment naming it.

use std::time::Duration;

use super::tests::{base, cluster, config, error, has_warning, listener, run, yaml};
use redcar_envoy::Options;

#[test]
fn keepalive_interval_and_probes_become_config_keys() {
    let mut doc = base();
    cluster(&mut doc)["upstream_connection_options"] =
        yaml("{tcp_keepalive: {keepalive_time: 30, keepalive_interval: 5, keepalive_probes: 4}}");
    let out = run(&doc);
    let config = config(&out);
    assert_eq!(config.upstream.tcp_keepalive, Duration::from_secs(30));
    assert_eq!(
        config.upstream.tcp_keepalive_interval,
        Some(Duration::from_secs(5))
    );
    assert_eq!(config.upstream.tcp_keepalive_probes, Some(4));
    config.validate().expect("valid keepalive");
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
}

#[test]
fn keepalive_values_linux_refuses_are_noted_not_written() {
    let mut doc = base();
    cluster(&mut doc)["upstream_connection_options"] =
        yaml("{tcp_keepalive: {keepalive_interval: 0, keepalive_probes: 200}}");
    let out = run(&doc);
    let config = config(&out);
    assert_eq!(config.upstream.tcp_keepalive_interval, None);
    assert_eq!(config.upstream.tcp_keepalive_probes, None);
    assert!(has_warning(&out, "tcp_keepalive.keepalive_interval is 0"));
    assert!(has_warning(&out, "tcp_keepalive.keepalive_probes is 200"));
    config.validate().expect("still valid");
    cluster(&mut doc)["upstream_connection_options"] =
        yaml("{tcp_keepalive: {keepalive_probes: many}}");
    assert!(error(&doc, &Options::default()).contains("keepalive_probes"));
}

#[test]
fn unknown_fields_anywhere_get_a_comment() {
    let mut doc = base();
    let l = listener(&mut doc);
    l["per_connection_buffer_limit_bytes"] = 32768.into();
    l["filter_chains"][0]["filter_chain_match"] = yaml("{destination_port: 6380}");
    let filters = l["filter_chains"][0]["filters"]
        .as_sequence_mut()
        .expect("filters");
    filters.insert(0, yaml("{name: envoy.filters.network.rbac}"));
    let p = &mut l["filter_chains"][0]["filters"][1]["typed_config"];
    p["prefix_routes"]["future_option"] = true.into();
    p["prefix_routes"]["catch_all_route"]["some_route_option"] = 1.into();
    p["faults"] = yaml(
        "[{fault_type: ERROR, fault_enabled: {default_value: {numerator: 1}}, fault_filter: x}]",
    );
    let c = cluster(&mut doc);
    c["dns_lookup_family"] = "V4_ONLY".into();
    c["cluster_type"]["typed_config"] = yaml("{cluster_refresh_rate: 5s, future_knob: 1}");
    c["load_assignment"]["endpoints"][0]["priority"] = 1.into();
    c["upstream_connection_options"] = yaml("{happy_eyeballs_config: {}, tcp_keepalive: {x: 1}}");
    c["typed_extension_protocol_options"] =
        yaml("{envoy.extensions.upstreams.tcp.v3.TcpProtocolOptions: {}, envoy.filters.network.redis_proxy: {auth_password: {inline_string: pw}, max_retries: 2}}");
    let out = run(&doc);
    for needle in [
        "listener redis per_connection_buffer_limit_bytes: not converted",
        "listener redis filter chain filter_chain_match: not converted",
        "network filter envoy.filters.network.rbac next to redis_proxy",
        "prefix_routes.future_option: not converted",
        "catch_all_route some_route_option: not converted",
        "faults[0].fault_filter: not converted",
        "cluster rc dns_lookup_family: not converted",
        "cluster_type future_knob: not converted",
        "cluster rc load_assignment priority: not converted",
        "upstream_connection_options.happy_eyeballs_config: not converted",
        "upstream_connection_options.tcp_keepalive.x: not converted",
        "typed_extension_protocol_options envoy.extensions.upstreams.tcp.v3.TcpProtocolOptions",
        "RedisProtocolOptions max_retries: not converted",
    ] {
        assert!(has_warning(&out, needle), "{needle}:\n{}", out.yaml);
    }
    config(&out)
        .validate()
        .expect("notes do not break the config");
}

#[test]
fn a_listener_that_binds_no_port_listens_on_loopback() {
    let mut doc = base();
    let l = listener(&mut doc);
    l["address"]["socket_address"]["address"] = "10.96.4.2".into();
    l["bind_to_port"] = false.into();
    let out = run(&doc);
    assert_eq!(config(&out).listen.as_deref(), Some("127.0.0.1:6380"));
    assert!(has_warning(&out, "bind_to_port: false"));
}
