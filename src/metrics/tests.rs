//! The exposition names the series `redcar top` and dashboards rely on.

use std::time::Duration;

use super::*;

#[test]
fn recorded_commands_appear_in_the_exposition() {
    let metrics = Metrics::default();
    metrics.record_command("get", Duration::from_micros(80), false);
    metrics.record_command("get", Duration::from_micros(120), true);
    let node = metrics.node("127.0.0.1:7000");
    node.requests.inc();
    node.in_flight.set(3);
    metrics.listener("tcp").connected.inc();
    metrics.redirect("moved", "127.0.0.1:7001");
    metrics.refresh(true);
    metrics.topology_rejected("stale");
    metrics.topology_rejected("stale");
    metrics.topology_rejected("unconfirmed");
    let text = metrics.encode();
    for expected in [
        "redcar_commands_total{command=\"get\"} 2",
        "redcar_command_errors_total{command=\"get\"} 1",
        "redcar_command_duration_seconds_count{command=\"get\"} 2",
        "redcar_command_duration_seconds_bucket{le=\"0.00008\",command=\"get\"} 1",
        "redcar_command_duration_seconds_bucket{le=\"0.00016\",command=\"get\"} 2",
        "redcar_node_requests_total{node=\"127.0.0.1:7000\"} 1",
        "redcar_node_in_flight{node=\"127.0.0.1:7000\"} 3",
        "redcar_client_connections{listener=\"tcp\"} 1",
        "redcar_redirects_total{kind=\"moved\",node=\"127.0.0.1:7001\"} 1",
        "redcar_topology_refreshes_total{result=\"ok\"} 1",
        "redcar_topology_rejected_total{reason=\"stale\"} 2",
        "redcar_topology_rejected_total{reason=\"unconfirmed\"} 1",
        "redcar_uptime_seconds",
    ] {
        assert!(text.contains(expected), "missing {expected} in:\n{text}");
    }
}

#[test]
fn command_stats_can_be_switched_off() {
    let config = MetricsConfig {
        command_stats: false,
        ..MetricsConfig::default()
    };
    let metrics = Metrics::new(&config);
    metrics.record_command("set", Duration::from_micros(80), false);
    assert!(!metrics.encode().contains("command=\"set\""));
}

#[test]
fn the_slow_log_keeps_the_newest_entries_over_the_threshold() {
    let log = SlowLog::new(Duration::from_millis(10), 2);
    assert!(!log.is_slow(Duration::from_millis(9)));
    assert!(log.is_slow(Duration::from_millis(10)));
    let long_key = vec![b'k'; 100];
    for (i, command) in ["get", "set", "hgetall"].iter().enumerate() {
        log.push(
            Duration::from_millis(11 + i as u64),
            command,
            &long_key,
            "n:1",
            "c:2",
        );
    }
    let entries = log.entries();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0].command, "hgetall", "newest first");
    assert_eq!(entries[1].command, "set");
    assert_eq!(
        entries[0].key.chars().count(),
        65,
        "cut to 64 bytes plus a marker"
    );
    let disabled = SlowLog::new(Duration::ZERO, 10);
    assert!(!disabled.is_slow(Duration::from_secs(5)));
}

/// Every series docs/observability.md promises is registered (its `# TYPE` line is there even
/// before anything is recorded), so a documented metric cannot silently be missing.
#[test]
fn every_documented_series_is_exported() {
    let docs = include_str!("../../docs/observability.md");
    let section = docs
        .split("\n## ")
        .find(|s| s.starts_with("Metrics"))
        .unwrap_or_default();
    let metrics = Metrics::default();
    // Labelled families print nothing until they have a child: give each one.
    metrics.record_command("get", Duration::from_micros(1), true);
    metrics.node("127.0.0.1:7000");
    metrics.listener("tcp");
    metrics.redirect("moved", "127.0.0.1:7001");
    metrics.refresh(true);
    metrics.topology_rejected("stale");
    metrics.faults("delay");
    metrics.config_reload(true);
    metrics.set_workers("per-core", 2);
    metrics.worker_clients(0);
    metrics.worker_busy(0);
    metrics.readiness.set_backends([("default", 16384, true)]);
    let text = metrics.encode();
    let mut documented = 0;
    for line in section.lines().filter(|l| l.starts_with("| `redcar_")) {
        let cell = line.split('|').nth(1).unwrap_or_default();
        for name in cell.split('`').filter(|s| s.starts_with("redcar_")) {
            documented += 1;
            // Counters are declared without `_total` in the `# TYPE` line.
            let family = name.strip_suffix("_total").unwrap_or(name);
            assert!(
                text.contains(&format!("# TYPE {family} ")),
                "{name} is documented in docs/observability.md but not registered:\n{text}"
            );
        }
    }
    assert!(documented > 20, "found only {documented} documented series");
}

/// A backend a reload removed loses its readiness series; the ones left keep theirs.
#[test]
fn readiness_gauges_follow_the_backends() {
    let metrics = Metrics::default();
    metrics
        .readiness
        .set_backends([("default", 16384, true), ("sessions", 12000, false)]);
    metrics.readiness.set_client_max_connections(20_000);
    let text = metrics.encode();
    assert!(text.contains("redcar_cluster_slots_owned{backend=\"default\"} 16384"));
    assert!(text.contains("redcar_cluster_slots_owned{backend=\"sessions\"} 12000"));
    assert!(text.contains("redcar_cluster_ready{backend=\"sessions\"} 0"));
    assert!(text.contains("redcar_client_max_connections 20000"));
    metrics.readiness.set_backends([("default", 16000, false)]);
    let text = metrics.encode();
    assert!(text.contains("redcar_cluster_slots_owned{backend=\"default\"} 16000"));
    assert!(text.contains("redcar_cluster_ready{backend=\"default\"} 0"));
    assert!(!text.contains("backend=\"sessions\""), "{text}");
}

/// The INFO totals add up over the groups and read no series into existence.
#[test]
fn totals_read_the_groups_without_creating_series() {
    let metrics = Metrics::default();
    assert_eq!(metrics.totals().clients, 0);
    assert!(
        !metrics.encode().contains("listener="),
        "totals made a series"
    );
    let tcp = metrics.listener("tcp");
    tcp.connected.inc();
    tcp.accepted.inc_by(3);
    metrics.listener("unix").connected.inc();
    metrics.retry();
    metrics.refresh(true);
    metrics.refresh(false);
    metrics.refresh(false);
    let totals = metrics.totals();
    assert_eq!((totals.clients, totals.accepted, totals.retries), (2, 3, 1));
    assert_eq!((totals.refreshes_ok, totals.refreshes_failed), (1, 2));
}

/// A forgotten node loses every per-node series; the shared request count stays.
#[test]
fn a_forgotten_node_loses_its_series() {
    let metrics = Metrics::default();
    let gone = metrics.node("127.0.0.1:7000");
    gone.requests.inc();
    gone.all_requests.inc();
    metrics.node("127.0.0.1:7001").ejected.set(1);
    metrics.forget_node("127.0.0.1:7000");
    let text = metrics.encode();
    assert!(!text.contains("node=\"127.0.0.1:7000\""), "{text}");
    assert!(text.contains("redcar_node_ejected{node=\"127.0.0.1:7001\"} 1"));
    assert_eq!(metrics.requests_sent(), 1);
}
