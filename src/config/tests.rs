//! Config parsing, defaults, CLI overrides and start-up validation messages.

use std::time::Duration;

use clap::Parser;

use super::{Cli, Config};

fn cli(args: &[&str]) -> Cli {
    let mut argv = vec!["redcar"];
    argv.extend_from_slice(args);
    Cli::try_parse_from(argv).expect("valid flags")
}

fn error_of(yaml: &str) -> String {
    let config = Config::from_yaml(yaml).expect("parses");
    config.validate().expect_err("must be rejected").to_string()
}

const MINIMAL: &str = "listen: 127.0.0.1:6380\ncluster:\n  seeds: [127.0.0.1:7000]\n";

#[test]
fn cli_alone_is_enough() {
    let config = Config::load(&cli(&[
        "--listen",
        "127.0.0.1:6380",
        "--cluster",
        "127.0.0.1:7001,127.0.0.1:7002",
    ]))
    .expect("valid");
    assert_eq!(config.listen.as_deref(), Some("127.0.0.1:6380"));
    assert_eq!(
        config.cluster.seeds,
        vec!["127.0.0.1:7001", "127.0.0.1:7002"]
    );
    assert_eq!(config.router.op_timeout, Duration::from_secs(1));
    assert_eq!(config.upstream.connections_per_node, 2);
}

#[test]
fn yaml_values_and_units_are_read() {
    let yaml = format!(
        "{MINIMAL}router:\n  op_timeout: 250ms\nclient:\n  max_bulk_len: 1mb\n  idle_timeout: 30s\nupstream:\n  connections_per_node: 4\n"
    );
    let config = Config::from_yaml(&yaml).expect("parses");
    config.validate().expect("valid");
    assert_eq!(config.router.op_timeout, Duration::from_millis(250));
    assert_eq!(config.client.max_bulk_len, 1 << 20);
    assert_eq!(config.client.idle_timeout, Duration::from_secs(30));
    assert_eq!(config.upstream.connections_per_node, 4);
}

#[test]
fn cli_overrides_the_file() {
    let mut config = Config::from_yaml(MINIMAL).expect("parses");
    cli(&["--listen", "127.0.0.1:7777", "--op-timeout", "2s"])
        .apply(&mut config)
        .expect("applies");
    assert_eq!(config.listen.as_deref(), Some("127.0.0.1:7777"));
    assert_eq!(config.router.op_timeout, Duration::from_secs(2));
    assert_eq!(config.cluster.seeds, vec!["127.0.0.1:7000"]);
}

#[test]
fn unknown_keys_are_rejected_with_their_name() {
    let error = Config::from_yaml(&format!("{MINIMAL}op_timout: 1s\n")).expect_err("typo");
    assert!(error.to_string().contains("op_timout"), "{error}");
    let nested = Config::from_yaml(&format!("{MINIMAL}upstream:\n  conections_per_node: 3\n"))
        .expect_err("typo");
    assert!(
        nested.to_string().contains("conections_per_node"),
        "{nested}"
    );
}

#[test]
fn bad_values_name_the_key() {
    assert!(error_of("cluster:\n  seeds: [127.0.0.1:7000]\n").contains("no listener"));
    assert!(error_of("listen: 127.0.0.1:6380\n").contains("cluster.seeds"));
    assert!(error_of("listen: nowhere\ncluster:\n  seeds: [a:1]\n").contains("`listen`"));
    assert!(
        error_of("listen: 127.0.0.1:1\ncluster:\n  seeds: [nohost]\n").contains("cluster.seeds")
    );
    let zero = format!("{MINIMAL}upstream:\n  connections_per_node: 0\n");
    assert!(error_of(&zero).contains("upstream.connections_per_node"));
    let no_wait = format!("{MINIMAL}upstream:\n  dedicated:\n    wait_timeout: 0s\n");
    assert!(error_of(&no_wait).contains("upstream.dedicated.wait_timeout"));
    let fail_fast =
        format!("{MINIMAL}upstream:\n  dedicated:\n    exhausted: fail\n    wait_timeout: 0s\n");
    assert!(Config::from_yaml(&fail_fast)
        .expect("parses")
        .validate()
        .is_ok());
    let policy = format!("{MINIMAL}upstream:\n  dedicated:\n    exhausted: maybe\n");
    let error = Config::from_yaml(&policy)
        .expect_err("unknown policy")
        .to_string();
    assert!(error.contains("expected `wait` or `fail`"), "{error}");
    let clients = format!("{MINIMAL}client:\n  max_connections: 0\n");
    assert!(error_of(&clients).contains("client.max_connections"));
    let budget = format!("{MINIMAL}client:\n  max_buffered_bytes_total: 64kb\n");
    assert!(error_of(&budget).contains("client.max_buffered_bytes_total"));
    let huge = format!("{MINIMAL}client:\n  max_request_bytes: 4gb\n");
    assert!(error_of(&huge).contains("client.max_request_bytes"));
    let big = format!("{MINIMAL}client:\n  max_request_bytes: 3gb\n");
    assert!(Config::from_yaml(&big).expect("parses").validate().is_ok());
    let off = format!("{MINIMAL}client:\n  max_buffered_bytes_total: 0\n");
    assert!(Config::from_yaml(&off).expect("parses").validate().is_ok());
    let timeout = format!("{MINIMAL}router:\n  op_timeout: 0s\n");
    assert!(error_of(&timeout).contains("router.op_timeout"));
    let same = format!("{MINIMAL}admin: 127.0.0.1:6380\n");
    assert!(error_of(&same).contains("different ports"));
    let perms = format!("{MINIMAL}unix_permissions: \"999\"\n");
    assert!(error_of(&perms).contains("unix_permissions"));
    let level = format!("{MINIMAL}log_level: loud\n");
    assert!(error_of(&level).contains("log_level"));
    let format = format!("{MINIMAL}log_format: xml\n");
    assert!(error_of(&format).contains("log_format"));
}

#[test]
fn unparseable_units_are_parse_errors() {
    let error = Config::from_yaml(&format!("{MINIMAL}router:\n  op_timeout: soon\n"))
        .expect_err("bad unit");
    assert!(error.to_string().contains("duration"), "{error}");
}

#[test]
fn defaults_round_trip_through_yaml() {
    let config = Config::default();
    let yaml = yaml_serde::to_string(&config).expect("serialises");
    assert_eq!(Config::from_yaml(&yaml).expect("parses back"), config);
}

/// Every key of the config tree must appear in docs/configuration.md.
#[test]
fn every_key_is_documented() {
    let docs = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/configuration.md"
    ))
    .expect("docs/configuration.md exists");
    let value = yaml_serde::to_value(Config::default()).expect("serialises");
    let mut missing = Vec::new();
    collect_keys(&value, "", &mut |key| {
        if !docs.contains(&format!("`{key}`")) {
            missing.push(key.to_string());
        }
    });
    assert!(missing.is_empty(), "undocumented config keys: {missing:?}");
}

fn collect_keys(value: &yaml_serde::Value, prefix: &str, found: &mut dyn FnMut(&str)) {
    if let yaml_serde::Value::Mapping(map) = value {
        for (key, child) in map {
            let name = key.as_str().unwrap_or_default();
            let full = if prefix.is_empty() {
                name.to_string()
            } else {
                format!("{prefix}.{name}")
            };
            found(&full);
            collect_keys(child, &full, found);
        }
    }
}

#[test]
fn custom_commands_are_read_and_checked_by_key() {
    let yaml = format!(
        "{MINIMAL}custom_commands:\n  - name: mymod.get\n    first_key: 1\n    write: false\n  - {{name: mymod.mset, first_key: 1, last_key: -1, key_step: 2}}\n"
    );
    let config = Config::from_yaml(&yaml).expect("parses");
    config.validate().expect("valid");
    assert_eq!(config.custom_commands.len(), 2);
    assert!(!config.custom_commands[0].write);
    assert_eq!(config.custom_commands[1].key_step, 2);
    let typo = Config::from_yaml(&format!(
        "{MINIMAL}custom_commands:\n  - {{name: x, first_key: 1, keystep: 2}}\n"
    ))
    .expect_err("unknown field");
    assert!(typo.to_string().contains("keystep"), "{typo}");
    let clash = format!("{MINIMAL}custom_commands:\n  - {{name: SET, first_key: 1}}\n");
    assert!(error_of(&clash).contains("custom_commands[0].name"));
}

#[test]
fn refresh_thresholds_default_to_today_and_accept_zero() {
    let config = Config::from_yaml(MINIMAL).expect("parses");
    assert_eq!(config.cluster.redirect_refresh_threshold, 1);
    assert_eq!(config.cluster.failure_refresh_threshold, 3);
    let yaml =
        format!("{MINIMAL}  redirect_refresh_threshold: 0\n  failure_refresh_threshold: 10\n");
    let config = Config::from_yaml(&yaml).expect("parses");
    config.validate().expect("0 is valid");
    assert_eq!(config.cluster.redirect_refresh_threshold, 0);
    assert_eq!(config.cluster.failure_refresh_threshold, 10);
    let negative = format!("{MINIMAL}  failure_refresh_threshold: -1\n");
    assert!(Config::from_yaml(&negative).is_err());
}

#[test]
fn read_policy_from_flag_and_file() {
    let config = Config::load(&cli(&[
        "--listen",
        "127.0.0.1:6380",
        "--cluster",
        "127.0.0.1:7001",
        "--read-policy",
        "prefer-replica",
    ]))
    .expect("valid");
    assert_eq!(
        config.router.read_policy,
        crate::router::ReadPolicy::PreferReplica
    );
    let yaml = format!("{MINIMAL}router:\n  read_policy: any\n  hedge_after: 5ms\n");
    let config = Config::from_yaml(&yaml).expect("parses");
    config.validate().expect("valid");
    assert_eq!(config.router.read_policy, crate::router::ReadPolicy::Any);
    assert!(Config::from_yaml(&format!("{MINIMAL}router:\n  read_policy: replicas\n")).is_err());
    assert!(
        Cli::try_parse_from(["redcar", "--read-policy", "secondary"]).is_err(),
        "unknown policy refused by the flag parser"
    );
}

#[test]
fn resilience_settings_that_cannot_work_are_refused() {
    let cases = [
        (
            "router:\n  hedge_after: 5ms\n",
            "`router.hedge_after` is 5ms but `router.read_policy` is primary",
        ),
        (
            "router:\n  read_policy: replica\n  hedge_after: 2s\n",
            "is not shorter than `router.op_timeout`",
        ),
        (
            "router:\n  retry_budget:\n    ratio: -1\n",
            "`router.retry_budget.ratio` is -1",
        ),
        (
            "upstream:\n  outlier:\n    base_ejection_time: 0s\n",
            "`upstream.outlier.base_ejection_time` must be greater than zero",
        ),
        (
            "upstream:\n  outlier:\n    health_check_interval: 0s\n",
            "`upstream.outlier.health_check_interval` must be greater than zero",
        ),
        (
            "upstream:\n  outlier:\n    base_ejection_time: 10s\n    max_ejection_time: 1s\n",
            "`upstream.outlier.max_ejection_time` (1s) is shorter",
        ),
    ];
    for (extra, expected) in cases {
        let message = error_of(&format!("{MINIMAL}{extra}"));
        assert!(message.contains(expected), "{extra}: {message}");
    }
    // Ejection off: its timings do not matter.
    let off = format!(
        "{MINIMAL}upstream:\n  outlier:\n    consecutive_failures: 0\n    base_ejection_time: 0s\n"
    );
    Config::from_yaml(&off)
        .expect("parses")
        .validate()
        .expect("valid");
}

#[test]
fn connection_economy_settings_default_to_today_and_are_bounded() {
    let config = Config::from_yaml(MINIMAL).expect("parses");
    assert_eq!(config.upstream.max_in_flight_per_connection, 4096);
    assert_eq!(config.upstream.flush_interval, Duration::ZERO);
    assert!(config.router.faults.is_empty());
    assert!(!config.client.close_idle_when_slow);
    let set = format!(
        "{MINIMAL}upstream:\n  max_in_flight_per_connection: 1\n  flush_interval: 10ms\nclient:\n  close_idle_when_slow: true\n"
    );
    Config::from_yaml(&set)
        .expect("parses")
        .validate()
        .expect("the bounds themselves are valid");
    let zero = format!("{MINIMAL}upstream:\n  max_in_flight_per_connection: 0\n");
    assert!(error_of(&zero).contains("upstream.max_in_flight_per_connection"));
    let huge = format!("{MINIMAL}upstream:\n  max_in_flight_per_connection: 2000000\n");
    assert!(error_of(&huge).contains("upstream.max_in_flight_per_connection"));
    let window = format!("{MINIMAL}upstream:\n  flush_interval: 11ms\n");
    let error = error_of(&window);
    assert!(error.contains("upstream.flush_interval"), "{error}");
}

#[test]
fn fault_rules_are_checked_at_start_up() {
    let faults = |rule: &str| format!("{MINIMAL}router:\n  faults:\n    - {rule}\n");
    let valid =
        faults("{node: \"127.0.0.1:7000\", commands: [GET], percentage: 100, error: ERR x}");
    Config::from_yaml(&valid)
        .expect("parses")
        .validate()
        .expect("valid rule");
    let cases = [
        (
            "{percentage: 101, delay: 1ms}",
            "router.faults[0].percentage",
        ),
        (
            "{node: \"7000\", percentage: 1, delay: 1ms}",
            "router.faults[0].node",
        ),
        (
            "{percentage: 1, error: \"ERR a\\nb\"}",
            "router.faults[0].error",
        ),
        ("{percentage: 1}", "router.faults[0]"),
    ];
    for (rule, key) in cases {
        let error = error_of(&faults(rule));
        assert!(error.contains(key), "{rule}: {error}");
    }
    let typo = Config::from_yaml(&faults("{percent: 1, delay: 1ms}")).expect_err("unknown key");
    assert!(typo.to_string().contains("percent"), "{typo}");
}

#[test]
fn cluster_facade_flags_turn_it_on_for_the_listen_listener() {
    let config = Config::load(&cli(&[
        "--listen",
        "0.0.0.0:6380",
        "--cluster",
        "127.0.0.1:7000",
        "--cluster-facade",
        "--cluster-facade-announce",
        "redcar.svc:6380",
    ]))
    .expect("valid");
    assert!(config.cluster_facade.enabled);
    assert_eq!(
        config.cluster_facade.announce.as_deref(),
        Some("redcar.svc:6380")
    );
    assert!(!config.tls.cluster_facade.enabled, "each listener opts in");
    let unix_only = "unix: /tmp/r.sock\ncluster:\n  seeds: [127.0.0.1:7000]\ncluster_facade:\n  enabled: true\n";
    assert!(error_of(unix_only).contains("`cluster_facade.enabled` needs `listen`"));
}

#[test]
fn sentinel_flags_replace_the_cluster() {
    let config = Config::load(&cli(&[
        "--listen",
        "127.0.0.1:6380",
        "--sentinel",
        "127.0.0.1:26379, 127.0.0.1:26380",
        "--sentinel-master",
        "mymaster",
    ]))
    .expect("valid");
    let sentinel = config.sentinel.expect("sentinel set");
    assert_eq!(sentinel.sentinels, ["127.0.0.1:26379", "127.0.0.1:26380"]);
    assert_eq!(sentinel.master, "mymaster");
    assert_eq!(sentinel.query_interval, Duration::from_secs(1));
    assert!(config.cluster.seeds.is_empty());
}

#[test]
fn sentinel_from_the_file_is_checked_by_key() {
    let base = "listen: 127.0.0.1:6380\n";
    let yaml = format!(
        "{base}sentinel:\n  sentinels: [127.0.0.1:26379]\n  master: m\n  query_interval: 250ms\n  sentinel_password: pw\n"
    );
    let config = Config::from_yaml(&yaml).expect("parses");
    config.validate().expect("valid");
    let sentinel = config.sentinel.expect("set");
    assert_eq!(sentinel.query_interval, Duration::from_millis(250));
    let both = format!("{MINIMAL}sentinel:\n  sentinels: [127.0.0.1:26379]\n  master: m\n");
    assert!(error_of(&both).contains("`cluster.seeds`"));
    let empty = format!("{base}sentinel:\n  sentinels: []\n  master: m\n");
    assert!(error_of(&empty).contains("`sentinel.sentinels` is empty"));
    let unnamed = format!("{base}sentinel:\n  sentinels: [h:1]\n  master: \"\"\n");
    assert!(error_of(&unnamed).contains("`sentinel.master`"));
    let typo = format!("{base}sentinel:\n  sentinels: [h:1]\n  master: m\n  mastr: x\n");
    assert!(
        Config::from_yaml(&typo).is_err(),
        "unknown keys are refused"
    );
    let neither = error_of(base);
    assert!(neither.contains("--sentinel"), "{neither}");
}

#[test]
fn keepalive_interval_and_probes_default_to_today_and_are_checked() {
    let config = Config::from_yaml(MINIMAL).expect("parses");
    assert_eq!(
        config.upstream.keepalive_interval(),
        Duration::from_secs(10)
    );
    assert_eq!(config.upstream.tcp_keepalive_probes, None);
    let short = Config::from_yaml(&format!("{MINIMAL}upstream: {{tcp_keepalive: 4s}}\n"));
    let short = short.expect("parses").upstream.keepalive_interval();
    assert_eq!(
        short,
        Duration::from_secs(4),
        "never longer than the idle time"
    );
    let set = "upstream: {tcp_keepalive_interval: 30s, tcp_keepalive_probes: 3}\n";
    let config = Config::from_yaml(&format!("{MINIMAL}{set}")).expect("parses");
    config.validate().expect("valid");
    assert_eq!(
        config.upstream.keepalive_interval(),
        Duration::from_secs(30)
    );
    assert_eq!(config.upstream.tcp_keepalive_probes, Some(3));
    for (bad, key) in [
        (
            "tcp_keepalive_interval: 0s",
            "upstream.tcp_keepalive_interval",
        ),
        (
            "tcp_keepalive_interval: 500ms",
            "upstream.tcp_keepalive_interval",
        ),
        ("tcp_keepalive_probes: 0", "upstream.tcp_keepalive_probes"),
        ("tcp_keepalive_probes: 128", "upstream.tcp_keepalive_probes"),
        ("tcp_keepalive: 500ms", "upstream.tcp_keepalive"),
    ] {
        let message = error_of(&format!("{MINIMAL}upstream: {{{bad}}}\n"));
        assert!(message.contains(&format!("`{key}`")), "{bad}: {message}");
    }
    // Off: the probe settings do not matter.
    let off = "upstream: {tcp_keepalive: 0s, tcp_keepalive_interval: 0s}\n";
    let config = Config::from_yaml(&format!("{MINIMAL}{off}")).expect("parses");
    config.validate().expect("keepalive off");
}

#[test]
fn hotkeys_settings_are_checked_at_start_up() {
    let config = Config::from_yaml(MINIMAL).expect("parses");
    assert!(config.hotkeys.enabled, "on by default");
    let yaml = format!("{MINIMAL}hotkeys:\n  sample_rate: 0\n");
    assert!(error_of(&yaml).contains("hotkeys.sample_rate"));
    let yaml = format!("{MINIMAL}hotkeys:\n  window: 100ms\n");
    assert!(error_of(&yaml).contains("hotkeys.window"));
}
