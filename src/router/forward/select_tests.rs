use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::upstream::Upstreams;

/// Nodes that never connect (nothing is sent to them here).
fn upstreams() -> Upstreams {
    Upstreams::for_tests(true).0
}

fn shard(up: &Upstreams, primary: &str, replicas: &[&str]) -> Shard {
    Shard {
        primary: up.node(primary),
        replicas: replicas.iter().map(|r| up.node(r)).collect(),
        epoch: 0,
    }
}

fn eject(node: &Node) {
    for _ in 0..node.health().config().consecutive_failures {
        node.health().record_failure("test");
    }
    assert!(node.is_ejected());
}

fn addr(node: Option<&Arc<Node>>) -> Option<&str> {
    node.map(|n| n.addr().as_ref())
}

#[tokio::test]
async fn writes_and_primary_policy_go_to_the_primary_or_nowhere() {
    let up = upstreams();
    let s = shard(&up, "p:1", &["r:1", "r:2"]);
    for policy in [
        ReadPolicy::Primary,
        ReadPolicy::PreferReplica,
        ReadPolicy::Any,
    ] {
        assert_eq!(addr(pick(&s, policy, true, &[])), Some("p:1"), "{policy:?}");
    }
    assert_eq!(addr(pick(&s, ReadPolicy::Primary, false, &[])), Some("p:1"));
    eject(&s.primary);
    assert_eq!(
        addr(pick(&s, ReadPolicy::Primary, true, &[])),
        None,
        "write: no fallback"
    );
    assert_eq!(addr(pick(&s, ReadPolicy::Primary, false, &[])), None);
}

#[tokio::test]
async fn prefer_replica_retries_another_replica_then_the_primary() {
    let up = upstreams();
    let s = shard(&up, "p:1", &["r:1", "r:2"]);
    let first = pick(&s, ReadPolicy::PreferReplica, false, &[]).cloned();
    let first = first.expect("a replica");
    assert!(first.addr().starts_with("r:"));
    let tried = vec![first.clone()];
    let second = pick(&s, ReadPolicy::PreferReplica, false, &tried).cloned();
    let second = second.expect("the other replica");
    assert!(second.addr().starts_with("r:") && second.addr() != first.addr());
    let tried = vec![first, second];
    assert_eq!(
        addr(pick(&s, ReadPolicy::PreferReplica, false, &tried)),
        Some("p:1")
    );
}

#[tokio::test]
async fn ejected_replicas_are_skipped_and_strict_replica_policy_fails_without_one() {
    let up = upstreams();
    let s = shard(&up, "p:1", &["r:1"]);
    eject(&s.replicas[0]);
    assert_eq!(
        addr(pick(&s, ReadPolicy::PreferReplica, false, &[])),
        Some("p:1")
    );
    assert_eq!(addr(pick(&s, ReadPolicy::Replica, false, &[])), None);
    assert_eq!(
        addr(pick(&s, ReadPolicy::PreferPrimary, false, &[])),
        Some("p:1")
    );
    eject(&s.primary);
    assert_eq!(addr(pick(&s, ReadPolicy::PreferReplica, false, &[])), None);
}

#[tokio::test]
async fn prefer_primary_falls_back_to_a_replica_when_the_primary_is_ejected() {
    let up = upstreams();
    let s = shard(&up, "p:1", &["r:1"]);
    eject(&s.primary);
    assert_eq!(
        addr(pick(&s, ReadPolicy::PreferPrimary, false, &[])),
        Some("r:1")
    );
}

#[tokio::test]
async fn strict_replica_policy_retries_a_tried_replica_rather_than_the_primary() {
    let up = upstreams();
    let s = shard(&up, "p:1", &["r:1"]);
    let tried = vec![s.replicas[0].clone()];
    assert_eq!(
        addr(pick(&s, ReadPolicy::Replica, false, &tried)),
        Some("r:1")
    );
}

#[tokio::test]
async fn power_of_two_choices_favours_the_less_loaded_replica() {
    let up = upstreams();
    let s = shard(&up, "fast:1", &["fast:2", "slow:2"]);
    s.replicas[0]
        .health()
        .observe_latency(Duration::from_micros(100));
    s.replicas[1]
        .health()
        .observe_latency(Duration::from_micros(5000));
    let picks = |n: usize| -> HashMap<String, usize> {
        let mut counts = HashMap::new();
        for _ in 0..n {
            let node = pick(&s, ReadPolicy::Replica, false, &[]).expect("a replica");
            *counts.entry(node.addr().to_string()).or_default() += 1;
        }
        counts
    };
    // With two candidates both are always compared, so the faster one always wins...
    assert_eq!(picks(200).get("fast:2"), Some(&200));
    // ...until its queue of outstanding requests makes it the slower choice (not sticky).
    s.replicas[0].metrics_now().in_flight.set(1000);
    assert_eq!(picks(200).get("slow:2"), Some(&200));
}

#[tokio::test]
async fn any_spreads_over_equally_loaded_nodes() {
    let up = upstreams();
    let s = shard(&up, "p:1", &["r:1", "r:2"]);
    let mut counts: HashMap<String, usize> = HashMap::new();
    for _ in 0..600 {
        let node = pick(&s, ReadPolicy::Any, false, &[]).expect("a node");
        *counts.entry(node.addr().to_string()).or_default() += 1;
    }
    assert_eq!(counts.len(), 3, "{counts:?}");
    assert!(
        counts.values().all(|&c| c > 100),
        "roughly even: {counts:?}"
    );
}

#[tokio::test]
async fn reads_of_a_migrating_slot_go_to_the_primary_under_every_policy() {
    let up = upstreams();
    let s = shard(&up, "p:1", &["r:1", "r:2"]);
    let migrating = MigratingSlots::new();
    migrating.note_ask(42);
    for policy in [
        ReadPolicy::PreferReplica,
        ReadPolicy::Replica,
        ReadPolicy::Any,
        ReadPolicy::PreferPrimary,
    ] {
        let moving = policy_for(policy, false, 42, &migrating);
        for _ in 0..20 {
            assert_eq!(
                addr(pick(&s, moving, false, &[])),
                Some("p:1"),
                "{policy:?}"
            );
        }
        assert_eq!(policy_for(policy, false, 43, &migrating), policy);
    }
    // The primary ejected: a replica rather than no answer.
    eject(&s.primary);
    let moving = policy_for(ReadPolicy::PreferReplica, false, 42, &migrating);
    assert!(addr(pick(&s, moving, false, &[])).is_some_and(|a| a.starts_with("r:")));
}
