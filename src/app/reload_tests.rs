//! Tests of the SIGHUP reload: which settings apply at once and which need a restart.

use std::time::Duration;

use super::*;
use crate::router::ReadPolicy;

fn running() -> Config {
    Config::from_yaml(
        "listen: 127.0.0.1:6380\ncluster:\n  seeds: [127.0.0.1:7000]\nauth:\n  requirepass: old\n",
    )
    .expect("valid")
}

#[test]
fn live_settings_are_taken_and_restart_only_ones_keep_their_running_values() {
    let running = running();
    let mut loaded = running.clone();
    loaded.listen = Some("127.0.0.1:6399".into());
    loaded.upstream.connections_per_node = 7;
    loaded.upstream.outlier.consecutive_failures = 9;
    loaded.router.op_timeout = Duration::from_millis(250);
    loaded.client.idle_timeout = Duration::from_secs(60);
    loaded.cluster.refresh_interval = Duration::from_secs(1);
    let (config, restart) = effective(&running, loaded);
    assert_eq!(
        restart,
        ["listen", "upstream.connections_per_node"],
        "only the restart-only keys the file changed"
    );
    assert_eq!(config.listen, running.listen);
    assert_eq!(
        config.upstream.connections_per_node,
        running.upstream.connections_per_node
    );
    assert_eq!(config.upstream.outlier.consecutive_failures, 9);
    assert_eq!(config.router.op_timeout, Duration::from_millis(250));
    assert_eq!(config.client.idle_timeout, Duration::from_secs(60));
    assert_eq!(config.cluster.refresh_interval, Duration::from_secs(1));
}

#[test]
fn a_read_policy_change_applies_unless_it_starts_or_stops_using_replicas() {
    let mut running = running();
    running.router.read_policy = ReadPolicy::Replica;
    let mut loaded = running.clone();
    loaded.router.read_policy = ReadPolicy::Any;
    let (config, restart) = effective(&running, loaded.clone());
    assert!(restart.is_empty());
    assert_eq!(config.router.read_policy, ReadPolicy::Any);
    loaded.router.read_policy = ReadPolicy::Primary;
    let (config, restart) = effective(&running, loaded);
    assert_eq!(restart, ["router.read_policy"]);
    assert_eq!(config.router.read_policy, ReadPolicy::Replica);
}

#[test]
fn changed_keys_name_each_leaf_and_notice_a_new_password() {
    let old = running();
    let mut new = old.clone();
    new.router.allow_flush = false;
    new.client.max_age = Duration::from_secs(5);
    assert_eq!(
        changed_keys(&old, &new),
        ["client.max_age", "router.allow_flush"]
    );
    let mut new = old.clone();
    new.auth.requirepass = Some(crate::auth::Secret::Plain("new".into()));
    assert!(
        changed_keys(&old, &new).is_empty(),
        "a secret serializes alike: reload::secrets names it by its digest"
    );
    assert!(changed_keys(&old, &old.clone()).is_empty());
}

#[test]
fn the_cluster_facade_needs_a_restart() {
    let running = running();
    let mut loaded = running.clone();
    loaded.cluster_facade.enabled = true;
    loaded.tls.cluster_facade.announce = Some("h:1".into());
    let (config, restart) = effective(&running, loaded);
    assert_eq!(
        restart,
        ["cluster_facade.enabled", "tls.cluster_facade.announce"]
    );
    assert!(!config.cluster_facade.enabled);
    assert_eq!(config.tls.cluster_facade.announce, None);
}

#[test]
fn routes_and_backends_change_live_but_the_catch_all_backend_stays() {
    let with =
        |yaml: &str| Config::from_yaml(&format!("listen: 127.0.0.1:6380\n{yaml}")).expect("valid");
    let running = with(
        "backends:\n  main: {kind: standalone, primary: \"127.0.0.1:1\"}\n  \
         side: {kind: standalone, primary: \"127.0.0.1:2\"}\ncatch_all: main\n",
    );
    let loaded = with(
        "backends:\n  main: {kind: standalone, primary: \"127.0.0.1:9\"}\n  \
         side: {kind: standalone, primary: \"127.0.0.1:3\"}\n  \
         new: {kind: cluster, seeds: [\"127.0.0.1:4\"]}\n\
         routes:\n  - {prefix: \"a:\", backend: new}\n  - {prefix: \"r:\", backend: side, read_policy: replica}\n\
         catch_all: side\n",
    );
    let (config, restart) = effective(&running, loaded.clone());
    assert_eq!(config.catch_all, "main");
    assert_eq!(config.backends.get("main"), running.backends.get("main"));
    assert_eq!(config.backends.get("side"), loaded.backends.get("side"));
    assert!(config.backends.contains_key("new"));
    // A route that starts reading replicas needs READONLY on new connections: all routes wait.
    assert_eq!(config.routes, running.routes);
    assert_eq!(
        restart,
        [
            "routes (a read_policy that starts or stops reading replicas)",
            "catch_all",
            "backends.main (the catch_all backend)"
        ]
    );
}
