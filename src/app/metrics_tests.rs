//! Every producer's series, with every group added as at start-up: the names, labels and
//! values dashboards rely on, and the series docs/observability.md promises.

use std::time::Duration;

use super::*;

/// The hub as the process has it: every group added.
fn all_groups() -> Metrics {
    let metrics = Metrics::default();
    add_groups(&metrics);
    metrics
}

fn node(metrics: &Metrics, addr: &str) -> crate::upstream::NodeMetrics {
    metrics
        .group::<UpstreamMetrics>()
        .node(addr, &metrics.events)
}

#[test]
fn recorded_series_appear_in_the_exposition() {
    let metrics = all_groups();
    let node = node(&metrics, "127.0.0.1:7000");
    node.requests.inc();
    node.in_flight.set(3);
    metrics
        .group::<ClientMetrics>()
        .listener("tcp")
        .connected
        .inc();
    let topology = metrics.group::<TopologyMetrics>();
    topology.redirect("moved", "127.0.0.1:7001");
    topology.refresh(true);
    topology.check("digest", "unchanged");
    topology.rejected("stale");
    topology.rejected("stale");
    topology.rejected("unconfirmed");
    let text = metrics.encode();
    for expected in [
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

/// Every series docs/observability.md promises is registered (its `# TYPE` line is there even
/// before anything is recorded), so a documented metric cannot silently be missing.
#[test]
fn every_documented_series_is_exported() {
    let docs = include_str!("../../docs/observability.md");
    let section = docs
        .split("\n## ")
        .find(|s| s.starts_with("Metrics"))
        .unwrap_or_default();
    let metrics = all_groups();
    // Labelled families print nothing until they have a child: give each one.
    metrics.record_command("get", Duration::from_micros(1), true);
    node(&metrics, "127.0.0.1:7000");
    let clients = metrics.group::<ClientMetrics>();
    clients.listener("tcp");
    clients.set_workers("per-core", 2);
    clients.worker_clients(0);
    clients.worker_busy(0);
    clients.worker_pipelining(0);
    clients.upgrade_clients.count("moved", "upgrade");
    let topology = metrics.group::<TopologyMetrics>();
    topology.redirect("moved", "127.0.0.1:7001");
    topology.refresh(true);
    topology.check("digest", "unchanged");
    topology.rejected("stale");
    metrics.group::<RouterMetrics>().faults("delay");
    metrics.group::<ProcessMetrics>().config_reload(true);
    metrics
        .group::<ReadinessGauges>()
        .set_backends([("default", 16384, true)]);
    metrics.group::<crate::auth::TenantMetrics>().user("app");
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
    let metrics = all_groups();
    let readiness = metrics.group::<ReadinessGauges>();
    readiness.set_backends([("default", 16384, true), ("sessions", 12000, false)]);
    readiness.set_client_max_connections(20_000);
    let text = metrics.encode();
    assert!(text.contains("redcar_cluster_slots_owned{backend=\"default\"} 16384"));
    assert!(text.contains("redcar_cluster_slots_owned{backend=\"sessions\"} 12000"));
    assert!(text.contains("redcar_cluster_ready{backend=\"sessions\"} 0"));
    assert!(text.contains("redcar_client_max_connections 20000"));
    readiness.set_backends([("default", 16000, false)]);
    let text = metrics.encode();
    assert!(text.contains("redcar_cluster_slots_owned{backend=\"default\"} 16000"));
    assert!(text.contains("redcar_cluster_ready{backend=\"default\"} 0"));
    assert!(!text.contains("backend=\"sessions\""), "{text}");
}

/// The INFO totals add up over the groups and read no series into existence.
#[test]
fn totals_read_the_groups_without_creating_series() {
    let metrics = all_groups();
    assert_eq!(metrics.totals().clients, 0);
    assert!(
        !metrics.encode().contains("listener="),
        "totals made a series"
    );
    let clients = metrics.group::<ClientMetrics>();
    let tcp = clients.listener("tcp");
    tcp.connected.inc();
    tcp.accepted.inc_by(3);
    clients.listener("unix").connected.inc();
    metrics.group::<RouterMetrics>().retry();
    let topology = metrics.group::<TopologyMetrics>();
    topology.refresh(true);
    topology.refresh(false);
    topology.refresh(false);
    let totals = metrics.totals();
    assert_eq!((totals.clients, totals.accepted, totals.retries), (2, 3, 1));
    assert_eq!((totals.refreshes_ok, totals.refreshes_failed), (1, 2));
}

/// A forgotten node loses every per-node series; the shared request count stays.
#[test]
fn a_forgotten_node_loses_its_series() {
    let metrics = all_groups();
    let gone = node(&metrics, "127.0.0.1:7000");
    gone.requests.inc();
    gone.all_requests.inc();
    node(&metrics, "127.0.0.1:7001").ejection.ejected.set(1);
    let upstream = metrics.group::<UpstreamMetrics>();
    upstream.forget_node("127.0.0.1:7000");
    let text = metrics.encode();
    assert!(!text.contains("node=\"127.0.0.1:7000\""), "{text}");
    assert!(text.contains("redcar_node_ejected{node=\"127.0.0.1:7001\"} 1"));
    assert_eq!(upstream.requests_sent(), 1);
}

/// The labelled families the dashboard and the alerting rules query have their known label
/// values at 0 before anything happened (tests/it/first_scrape.rs checks the same against a
/// real redcar and the shipped files).
#[test]
fn labelled_families_start_at_zero_for_their_known_label_values() {
    let text = all_groups().encode();
    for expected in [
        "redcar_topology_refreshes_total{result=\"ok\"} 0",
        "redcar_topology_refreshes_total{result=\"failed\"} 0",
        "redcar_topology_checks_total{probe=\"digest\",result=\"unchanged\"} 0",
        "redcar_topology_checks_total{probe=\"info\",result=\"failed\"} 0",
        "redcar_topology_rejected_total{reason=\"stale\"} 0",
        "redcar_topology_rejected_total{reason=\"unconfirmed\"} 0",
        "redcar_topology_rejected_total{reason=\"partial\"} 0",
        "redcar_faults_injected_total{kind=\"delay\"} 0",
        "redcar_faults_injected_total{kind=\"error\"} 0",
        "redcar_config_reloads_total{result=\"ok\"} 0",
        "redcar_config_reloads_total{result=\"error\"} 0",
    ] {
        assert!(text.contains(expected), "missing {expected} in:\n{text}");
    }
}

/// An adopted map gives each node both redirect series at 0; a node that left the map loses
/// them unless they counted something.
#[test]
fn redirect_series_follow_the_adopted_maps_nodes() {
    let metrics = all_groups();
    let topology = metrics.group::<TopologyMetrics>();
    topology.redirect_targets(["127.0.0.1:7000", "127.0.0.1:7001"], []);
    let text = metrics.encode();
    for node in ["127.0.0.1:7000", "127.0.0.1:7001"] {
        for kind in ["moved", "ask"] {
            let series = format!("redcar_redirects_total{{kind=\"{kind}\",node=\"{node}\"}} 0");
            assert!(text.contains(&series), "missing {series} in:\n{text}");
        }
    }
    topology.redirect("moved", "127.0.0.1:7001");
    topology.redirect_targets(["127.0.0.1:7002"], ["127.0.0.1:7000", "127.0.0.1:7001"]);
    let text = metrics.encode();
    assert!(!text.contains("node=\"127.0.0.1:7000\""), "{text}");
    assert!(text.contains("redcar_redirects_total{kind=\"moved\",node=\"127.0.0.1:7001\"} 1"));
    assert!(
        !text.contains("kind=\"ask\",node=\"127.0.0.1:7001\""),
        "{text}"
    );
    assert!(text.contains("redcar_redirects_total{kind=\"ask\",node=\"127.0.0.1:7002\"} 0"));
}
