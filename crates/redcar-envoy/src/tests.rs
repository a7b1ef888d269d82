//! The converter's refusals, which need no redcar config to check: input that cannot be converted
//! without changing what clients get stops the conversion with a message naming the setting. The
//! mapping's other tests read the output back as a config, in the `redcar` package
//! (src/app/convert_envoy/).

use yaml_serde::Value;

use crate::testing::{base, cluster, error, proxy, with_cluster, yaml};
use crate::{convert, Options};

#[test]
fn client_auth_that_cannot_be_carried_over_stops_the_conversion() {
    let cases = [
        (
            "external_auth_provider",
            "{grpc_service: {}}",
            "external_auth_provider",
        ),
        (
            "downstream_auth_password",
            "{inline_bytes: czNjcmV0}",
            "inline_bytes",
        ),
        (
            "downstream_auth_username",
            "{inline_string: app}",
            "without a downstream_auth_password",
        ),
    ];
    for (key, value, expected) in cases {
        let mut doc = base();
        proxy(&mut doc)[key] = yaml(value);
        let message = error(&doc, &Options::default());
        assert!(message.contains(expected), "{key}: {message}");
        assert!(!message.contains("czNjcmV0"), "{message}");
    }
}

#[test]
fn unusable_input_is_refused_with_a_reason() {
    let none = yaml("static_resources: {listeners: [], clusters: []}");
    assert!(error(&none, &Options::default()).contains("no listener with"));
    let mut doc = base();
    cluster(&mut doc)["cluster_type"] = Value::Null;
    cluster(&mut doc)["type"] = "STRICT_DNS".into();
    assert!(error(&doc, &Options::default()).contains("STRICT_DNS"));
    let mut doc = base();
    cluster(&mut doc)["load_assignment"] = Value::Null;
    assert!(error(&doc, &Options::default()).contains("no endpoints"));
    let broken = convert("listeners: [", "x.yaml", &Options::default());
    assert!(broken.expect_err("bad yaml").0.contains("not valid YAML"));
}

#[test]
fn duplicate_prefixes_and_missing_clusters_are_refused() {
    let mut doc = base();
    with_cluster(&mut doc, "sessions", 7100);
    proxy(&mut doc)["prefix_routes"] = yaml(
        "{case_insensitive: true, routes: [{prefix: 'A:', cluster: rc}, {prefix: 'a:', cluster: sessions}]}",
    );
    assert!(error(&doc, &Options::default()).contains("prefix `a:` twice"));
    proxy(&mut doc)["prefix_routes"] = yaml(
        "{routes: [{prefix: 'a:', cluster: sessions, request_mirror_policy: [{cluster: gone}]}]}",
    );
    assert!(error(&doc, &Options::default()).contains("`gone`, which is not defined"));
}
