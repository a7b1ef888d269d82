//! Each check on canned INFO / CONFIG text, as Redis 7 prints it.

use super::fixtures::node;
use super::*;
use crate::model::{ClusterNode, LatencyEvent, NodeSlowEntry, Role, SlotOwner};

fn severity(finding: Option<Finding>) -> Option<Severity> {
    finding.map(|f| f.severity)
}

fn cfg(config: &[(&str, &str)]) -> NodeData {
    node("127.0.0.1:7000", "", config)
}

fn topo(id: &str, role: Role, primary: Option<&str>, slots: u32, failed: bool) -> ClusterNode {
    ClusterNode {
        id: id.into(),
        addr: format!("127.0.0.1:{id}"),
        role,
        primary_id: primary.map(str::to_string),
        failed,
        slots,
    }
}

#[test]
fn appendfsync_always_with_aof_is_critical_and_everysec_is_fine() {
    let always = cfg(&[("appendonly", "yes"), ("appendfsync", "always")]);
    let finding = persistence::appendfsync(&always).expect("a finding");
    assert_eq!(finding.severity, Severity::Critical);
    assert_eq!(finding.nodes, vec!["127.0.0.1:7000"]);
    assert!(finding.summary.contains("appendfsync always"));
    let everysec = cfg(&[("appendonly", "yes"), ("appendfsync", "everysec")]);
    assert_eq!(persistence::appendfsync(&everysec), None);
    let no_aof = cfg(&[("appendonly", "no"), ("appendfsync", "always")]);
    assert_eq!(persistence::appendfsync(&no_aof), None);
    assert_eq!(
        persistence::appendfsync(&cfg(&[])),
        None,
        "CONFIG unreadable"
    );
}

#[test]
fn rdb_save_rules_matter_only_on_busy_nodes() {
    let save = [("save", "3600 1 300 100 60 10000")];
    let busy_writes = "rdb_changes_since_last_save:600000\r\nrdb_last_save_time:1700000000\r\nserver_time_usec:1700000100000000\r\ninstantaneous_ops_per_sec:9000\r\n";
    let n = node("a:1", busy_writes, &save);
    assert_eq!(severity(persistence::rdb_save(&n)), Some(Severity::Warn));
    let busy_reads = "rdb_changes_since_last_save:10\r\nrdb_last_save_time:1700000000\r\nserver_time_usec:1700000100000000\r\ninstantaneous_ops_per_sec:5000\r\n";
    let n = node("a:1", busy_reads, &save);
    assert_eq!(severity(persistence::rdb_save(&n)), Some(Severity::Info));
    let idle = "rdb_changes_since_last_save:10\r\ninstantaneous_ops_per_sec:3\r\n";
    assert_eq!(persistence::rdb_save(&node("a:1", idle, &save)), None);
    assert_eq!(
        persistence::rdb_save(&node("a:1", busy_writes, &[("save", "")])),
        None
    );
}

#[test]
fn a_failed_bgsave_is_critical() {
    let n = node("a:1", "rdb_last_bgsave_status:err\r\n", &[]);
    assert_eq!(
        severity(persistence::bgsave_status(&n)),
        Some(Severity::Critical)
    );
    let n = node("a:1", "rdb_last_bgsave_status:ok\r\n", &[]);
    assert_eq!(persistence::bgsave_status(&n), None);
}

#[test]
fn no_maxmemory_warns_and_noeviction_with_a_limit_informs() {
    assert_eq!(
        severity(memory::maxmemory(&cfg(&[("maxmemory", "0")]))),
        Some(Severity::Warn)
    );
    assert_eq!(
        memory::maxmemory(&cfg(&[("maxmemory", "1073741824")])),
        None
    );
    let store = cfg(&[
        ("maxmemory", "1073741824"),
        ("maxmemory-policy", "noeviction"),
    ]);
    assert_eq!(
        severity(memory::eviction_policy(&store)),
        Some(Severity::Info)
    );
    let cache = cfg(&[
        ("maxmemory", "1073741824"),
        ("maxmemory-policy", "allkeys-lru"),
    ]);
    assert_eq!(memory::eviction_policy(&cache), None);
    let unlimited = cfg(&[("maxmemory", "0"), ("maxmemory-policy", "noeviction")]);
    assert_eq!(
        memory::eviction_policy(&unlimited),
        None,
        "maxmemory check covers it"
    );
}

#[test]
fn fragmentation_warns_when_high_on_big_nodes_and_when_swapping() {
    let frag = |ratio: &str, used: u64| {
        node(
            "a:1",
            &format!("used_memory:{used}\r\nmem_fragmentation_ratio:{ratio}\r\n"),
            &[],
        )
    };
    let gib = 1 << 30;
    assert_eq!(
        severity(memory::fragmentation(&frag("1.80", gib))),
        Some(Severity::Warn)
    );
    assert_eq!(
        memory::fragmentation(&frag("6.50", 2 << 20)),
        None,
        "small dataset"
    );
    assert_eq!(
        severity(memory::fragmentation(&frag("0.70", gib))),
        Some(Severity::Warn)
    );
    assert!(
        memory::fragmentation(&frag("0.70", gib)).is_some_and(|f| f.summary.contains("swapped"))
    );
    assert_eq!(memory::fragmentation(&frag("1.10", gib)), None);
}

#[test]
fn short_idle_timeout_informs_and_keepalive_off_warns() {
    assert_eq!(
        severity(clients::idle_timeout(&cfg(&[("timeout", "60")]))),
        Some(Severity::Info)
    );
    assert_eq!(clients::idle_timeout(&cfg(&[("timeout", "0")])), None);
    assert_eq!(clients::idle_timeout(&cfg(&[("timeout", "600")])), None);
    assert_eq!(
        severity(clients::tcp_keepalive(&cfg(&[("tcp-keepalive", "0")]))),
        Some(Severity::Warn)
    );
    assert_eq!(
        clients::tcp_keepalive(&cfg(&[("tcp-keepalive", "300")])),
        None
    );
}

#[test]
fn clients_above_80_percent_of_maxclients_warn() {
    let n = node(
        "a:1",
        "connected_clients:850\r\n",
        &[("maxclients", "1000")],
    );
    assert_eq!(severity(clients::maxclients(&n)), Some(Severity::Warn));
    let n = node(
        "a:1",
        "connected_clients:12\r\n",
        &[("maxclients", "10000")],
    );
    assert_eq!(clients::maxclients(&n), None);
}

#[test]
fn replica_with_link_down_is_critical() {
    let info = "role:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:7000\r\nmaster_link_status:down\r\nmaster_link_down_since_seconds:42\r\n";
    let finding = replication::replica_link(&node("b:2", info, &[])).expect("a finding");
    assert_eq!(finding.severity, Severity::Critical);
    assert!(finding.summary.contains("127.0.0.1:7000"));
    let up = "role:slave\r\nmaster_link_status:up\r\n";
    assert_eq!(replication::replica_link(&node("b:2", up, &[])), None);
}

#[test]
fn replication_lag_from_the_primarys_info() {
    let info = "role:master\r\nconnected_slaves:3\r\n\
slave0:ip=127.0.0.1,port=7003,state=online,offset=98000000,lag=0\r\n\
slave1:ip=127.0.0.1,port=7004,state=online,offset=100000000,lag=30\r\n\
slave2:ip=127.0.0.1,port=7005,state=wait_bgsave,offset=0,lag=0\r\n\
master_repl_offset:100000000\r\n";
    let findings = replication::replication_lag(&node("a:1", info, &[]));
    let got: Vec<_> = findings
        .iter()
        .map(|f| (f.severity, f.nodes[1].as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            (Severity::Warn, "127.0.0.1:7003"),
            (Severity::Warn, "127.0.0.1:7004"),
            (Severity::Info, "127.0.0.1:7005"),
        ]
    );
    let close = "master_repl_offset:1000\r\nslave0:ip=h,port=1,state=online,offset=990,lag=1\r\n";
    assert!(replication::replication_lag(&node("a:1", close, &[])).is_empty());
}

#[test]
fn cluster_state_fail_and_missing_slots_are_critical() {
    let mut n = cfg(&[]);
    n.cluster_info = crate::parse::parse_info("cluster_state:fail\r\n");
    assert_eq!(
        severity(topology::cluster_state(&n)),
        Some(Severity::Critical)
    );
    n.cluster_info = crate::parse::parse_info("cluster_state:ok\r\n");
    assert_eq!(topology::cluster_state(&n), None);

    let owner = |start, end| SlotOwner {
        start,
        end,
        primary: "a:1".into(),
    };
    n.slots = Some(vec![owner(0, 8000), owner(8001, 16383)]);
    assert_eq!(topology::slot_coverage(&n), None);
    n.slots = Some(vec![owner(0, 8000), owner(8101, 16383)]);
    let finding = topology::slot_coverage(&n).expect("a finding");
    assert!(
        finding.summary.starts_with("100 of 16384"),
        "{}",
        finding.summary
    );
}

#[test]
fn nodes_disagreeing_on_the_slot_map_are_named() {
    let owner = |primary: &str| {
        vec![SlotOwner {
            start: 0,
            end: 16383,
            primary: primary.into(),
        }]
    };
    let mut snapshot = ClusterSnapshot::default();
    for (addr, primary) in [("a:1", "a:1"), ("b:2", "a:1"), ("c:3", "b:2")] {
        let mut n = node(addr, "", &[]);
        n.slots = Some(owner(primary));
        snapshot.nodes.push(n);
    }
    let findings = topology::slot_map_agreement(&snapshot);
    assert_eq!(findings.len(), 1);
    assert_eq!(findings[0].nodes, vec!["c:3"]);
    snapshot.nodes.pop();
    assert!(topology::slot_map_agreement(&snapshot).is_empty());
}

#[test]
fn shards_without_a_healthy_replica_warn() {
    let snapshot = ClusterSnapshot {
        topology: vec![
            topo("1", Role::Primary, None, 8192, false),
            topo("2", Role::Replica, Some("1"), 0, false),
            topo("3", Role::Primary, None, 8192, false),
            topo("4", Role::Replica, Some("3"), 0, true),
            topo("5", Role::Primary, None, 0, false),
        ],
        ..ClusterSnapshot::default()
    };
    let findings = topology::replicas(&snapshot);
    let nodes: Vec<_> = findings.iter().map(|f| f.nodes[0].as_str()).collect();
    assert_eq!(
        nodes,
        vec!["127.0.0.1:3"],
        "the empty primary 5 owns nothing to lose"
    );
}

#[test]
fn unreachable_and_failed_nodes_are_critical() {
    let snapshot = ClusterSnapshot {
        topology: vec![topo("1", Role::Primary, None, 16384, true)],
        unreachable: vec![("127.0.0.1:9".into(), "connection refused".into())],
        ..ClusterSnapshot::default()
    };
    let findings = topology::reachability(&snapshot);
    assert_eq!(findings.len(), 2);
    assert!(findings.iter().all(|f| f.severity == Severity::Critical));
    let gone = ClusterSnapshot {
        unreachable: vec![("127.0.0.1:1".into(), "connection refused".into())],
        ..snapshot
    };
    assert_eq!(
        topology::reachability(&gone).len(),
        1,
        "one finding per dead node"
    );
}

#[test]
fn slowlog_lists_the_most_frequent_commands() {
    let mut n = cfg(&[]);
    let entry = |command: &str, micros| NodeSlowEntry {
        command: command.into(),
        micros,
    };
    n.slowlog = vec![
        entry("KEYS", 25_000),
        entry("HGETALL", 12_000),
        entry("KEYS", 30_000),
    ];
    let finding = workload::slowlog(&n).expect("a finding");
    assert_eq!(finding.severity, Severity::Info);
    assert!(
        finding
            .summary
            .contains("KEYS x2 (max 30.0 ms), HGETALL x1"),
        "{}",
        finding.summary
    );
    assert_eq!(workload::slowlog(&cfg(&[])), None);
}

#[test]
fn latency_events_inform_and_warn_from_100_ms() {
    let mut n = cfg(&[]);
    let event = |max_ms| LatencyEvent {
        event: "aof-fsync-always".into(),
        latest_ms: 7,
        max_ms,
    };
    n.latency = vec![event(12)];
    assert_eq!(severity(workload::latency_events(&n)), Some(Severity::Info));
    n.latency = vec![event(250)];
    assert_eq!(severity(workload::latency_events(&n)), Some(Severity::Warn));
}

#[test]
fn keys_calls_warn() {
    let n = node(
        "a:1",
        "cmdstat_keys:calls=4,usec=4000,usec_per_call=1000.00\r\n",
        &[],
    );
    assert_eq!(severity(workload::keys_command(&n)), Some(Severity::Warn));
    assert_eq!(
        workload::keys_command(&node("a:1", "cmdstat_get:calls=4\r\n", &[])),
        None
    );
}

#[test]
fn command_mix_counts_only_data_commands_and_the_write_share() {
    let info = "cmdstat_get:calls=60,usec=1\r\ncmdstat_set:calls=30,usec=1\r\ncmdstat_del:calls=10,usec=1\r\ncmdstat_info:calls=500,usec=1\r\ncmdstat_cluster|slots:calls=99,usec=1\r\n";
    let replica = node(
        "b:2",
        "role:slave\r\ncmdstat_set:calls=30\r\ncmdstat_get:calls=0\r\n",
        &[],
    );
    let snapshot = ClusterSnapshot {
        nodes: vec![node("a:1", info, &[]), replica],
        ..ClusterSnapshot::default()
    };
    let findings = workload::command_mix(&snapshot);
    assert_eq!(findings.len(), 1);
    assert_eq!(
        findings[0].summary,
        "100 data commands since start: get 60%, set 30%, del 10%; writes are 40%"
    );
    assert!(workload::command_mix(&ClusterSnapshot::default()).is_empty());
}

#[test]
fn run_all_merges_identical_findings_and_reports_passed_checks() {
    let config = [
        ("appendonly", "yes"),
        ("appendfsync", "always"),
        ("maxmemory", "0"),
    ];
    let snapshot = ClusterSnapshot {
        nodes: vec![node("a:1", "", &config), node("b:2", "", &config)],
        ..ClusterSnapshot::default()
    };
    let report = run_all(&snapshot);
    assert_eq!(report.len(), CHECKS.len(), "one line per check here");
    assert_eq!(report[0].check, "appendfsync");
    assert_eq!(report[0].severity, Severity::Critical);
    assert_eq!(report[0].nodes, vec!["a:1", "b:2"]);
    assert_eq!(report[1].check, "maxmemory");
    assert!(report[2..].iter().all(|f| f.severity == Severity::Ok));
}

#[test]
fn check_ids_are_unique() {
    let mut ids: Vec<_> = CHECKS.iter().map(|c| c.id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), CHECKS.len());
}

#[test]
fn every_check_is_documented_in_docs_doctor_md() {
    let docs = include_str!("../../../../docs/doctor.md");
    for check in CHECKS {
        let row = format!("| `{}` |", check.id);
        assert!(
            docs.contains(&row),
            "docs/doctor.md has no row for `{}`",
            check.id
        );
    }
}
