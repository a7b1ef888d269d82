//! Unit tests of `health.rs`: ejection, its growth, restoration and the load score.

use super::*;
use crate::metrics::EventLog;

fn health(threshold: u32) -> (Health, watch::Receiver<u64>) {
    let (tx, rx) = watch::channel(0);
    let config = OutlierConfig {
        consecutive_failures: threshold,
        base_ejection_time: Duration::from_millis(100),
        max_ejection_time: Duration::from_millis(1000),
        health_check_interval: Duration::from_millis(10),
    };
    let metrics = Arc::new(NodeSeries::new(
        Arc::from("n:1"),
        Arc::default(),
        Arc::new(EventLog::new()),
    ));
    (
        Health::new(
            Arc::from("n:1"),
            Arc::new(ArcSwap::from_pointee(config)),
            metrics,
            Arc::new(tx),
        ),
        rx,
    )
}

#[test]
fn ejection_time_doubles_up_to_the_cap() {
    let config = OutlierConfig {
        base_ejection_time: Duration::from_secs(1),
        max_ejection_time: Duration::from_secs(5),
        ..OutlierConfig::default()
    };
    let times: Vec<u64> = (1..=5)
        .map(|n| ejection_time(&config, n).as_secs())
        .collect();
    assert_eq!(times, vec![1, 2, 4, 5, 5]);
    assert_eq!(ejection_time(&config, 1000), Duration::from_secs(5));
}

#[test]
fn consecutive_failures_eject_once_and_successes_reset_the_streak() {
    let (h, rx) = health(3);
    assert!(!h.record_failure("x"));
    assert!(!h.record_failure("x"));
    h.record_success();
    assert!(!h.record_failure("x"));
    assert!(!h.record_failure("x"));
    assert!(!h.is_ejected());
    assert!(h.record_failure("x"), "third in a row ejects");
    assert!(h.is_ejected());
    assert!(!h.record_failure("x"), "already ejected: not again");
    assert_eq!(*rx.borrow(), 1, "one ejection event");
    assert_eq!(h.series.get().ejection.ejected.get(), 1);
    assert_eq!(h.series.get().ejection.ejections.get(), 1);
    let events = h.series.get().ejection.events.entries();
    assert_eq!(events.len(), 1, "one event log entry: {events:?}");
    assert_eq!(events[0].kind, EventKind::NodeEjected);
    assert_eq!(events[0].node, "n:1");
    h.restore();
    h.restore();
    let events = h.series.get().ejection.events.entries();
    assert_eq!(events.len(), 2, "one restoration, not two: {events:?}");
    assert_eq!(events[0].kind, EventKind::NodeRestored);
}

#[test]
fn eject_now_ejects_without_a_streak_even_with_ejection_off() {
    let (h, rx) = health(0);
    assert!(h.eject_now("replica not in sync"));
    assert!(h.is_ejected());
    assert!(!h.eject_now("again"), "already ejected: not again");
    assert_eq!(*rx.borrow(), 1, "one ejection event");
    assert!(h.series.get().ejection.events.entries()[0]
        .detail
        .contains("not in sync"));
    h.restore();
    assert!(!h.is_ejected());
}

#[test]
fn a_primary_of_the_map_that_says_it_is_a_replica_is_not_ejected_at_once() {
    let (h, rx) = health(5);
    h.set_primary(true);
    assert!(
        !h.eject_now("replica not in sync"),
        "the map is stale, not the node"
    );
    assert!(!h.is_ejected());
    assert_eq!(*rx.borrow(), 0);
    h.set_primary(false);
    assert!(h.eject_now("replica not in sync"), "as a replica it is");
}

#[test]
fn zero_threshold_never_ejects() {
    let (h, _rx) = health(0);
    for _ in 0..100 {
        assert!(!h.record_failure("x"));
    }
    assert!(!h.is_ejected());
}

#[tokio::test(start_paused = true)]
async fn a_health_check_is_due_only_after_the_ejection_time_and_restore_ends_it() {
    let (h, _rx) = health(1);
    assert!(h.record_failure("x"));
    assert!(!h.due_for_check(false));
    assert!(h.ejected_for() > Duration::ZERO);
    tokio::time::advance(Duration::from_millis(101)).await;
    assert!(h.due_for_check(false));
    h.restore();
    assert!(!h.is_ejected());
    assert_eq!(h.series.get().ejection.ejected.get(), 0);
    // Ejected again soon after: the second ejection lasts twice as long.
    assert!(h.record_failure("x"));
    tokio::time::advance(Duration::from_millis(150)).await;
    assert!(!h.due_for_check(false), "second ejection lasts 200ms");
    tokio::time::advance(Duration::from_millis(60)).await;
    assert!(h.due_for_check(false));
    h.restore();
    // Healthy for longer than max_ejection_time: back to the base time.
    tokio::time::advance(Duration::from_millis(1100)).await;
    assert!(h.record_failure("x"));
    tokio::time::advance(Duration::from_millis(101)).await;
    assert!(h.due_for_check(false), "streak forgotten: base time again");
}

#[tokio::test(start_paused = true)]
async fn a_primarys_ejection_does_not_grow() {
    let (h, _rx) = health(1);
    h.set_primary(true);
    for _ in 0..4 {
        assert!(h.record_failure("x"));
        tokio::time::advance(Duration::from_millis(101)).await;
        assert!(
            h.due_for_check(false),
            "every ejection of a primary lasts the base time"
        );
        h.restore();
    }
    assert_eq!(h.snapshot().ejections, 4, "still counted");
    assert!(h.series.get().ejection.events.entries()[1]
        .detail
        .contains("not doubled"));
    // Demoted to a replica: the count it has makes the next ejection long again.
    h.set_primary(false);
    assert!(h.record_failure("x"));
    tokio::time::advance(Duration::from_millis(101)).await;
    assert!(
        !h.due_for_check(false),
        "a replica's fifth ejection lasts the cap (1 s)"
    );
}

/// A replica ejected a few times lately is out for long; while its shard's primary is down it
/// is checked at once, and its first good answer brings it back whatever those ejections were.
#[tokio::test(start_paused = true)]
async fn a_replica_is_checked_at_once_while_its_primary_is_down() {
    let (replica, _rx) = health(1);
    let (primary, _rx2) = health(2);
    let addr: Arc<str> = Arc::from("p:1");
    replica.set_shard_primary(Some(&addr));
    assert_eq!(replica.shard_primary(), Some(addr.clone()));
    for _ in 0..3 {
        assert!(replica.record_failure("x"));
        tokio::time::advance(Duration::from_millis(1001)).await;
        replica.restore();
    }
    assert!(replica.record_failure("x"));
    tokio::time::advance(Duration::from_millis(150)).await;
    assert!(
        !replica.due_for_check(false),
        "its fourth ejection lasts 800 ms"
    );
    assert!(!primary.is_down());
    assert!(
        !primary.record_failure("timed out"),
        "one failure does not eject it"
    );
    assert!(primary.is_down(), "but it is failing");
    assert!(
        replica.due_for_check(true),
        "checked while its primary is down"
    );
    replica.restore();
    assert!(
        !replica.due_for_check(true),
        "nothing to check once it is back"
    );
    primary.record_success();
    assert!(!primary.is_down());
    // A primary has no shard primary to wait for.
    replica.set_shard_primary(None);
    assert_eq!(replica.shard_primary(), None);
}

#[test]
fn load_score_prefers_idle_fast_nodes() {
    let (fast, _a) = health(1);
    let (slow, _b) = health(1);
    fast.observe_latency(Duration::from_micros(100));
    slow.observe_latency(Duration::from_micros(2000));
    assert!(fast.load_score() < slow.load_score());
    fast.series.get().in_flight.set(100);
    assert!(
        fast.load_score() > slow.load_score(),
        "a queue outweighs speed"
    );
}

#[test]
fn ewma_moves_an_eighth_towards_each_sample() {
    let (h, _rx) = health(1);
    h.observe_latency(Duration::from_micros(800));
    assert_eq!(h.snapshot().latency_ewma_us, 800);
    h.observe_latency(Duration::from_micros(1600));
    assert_eq!(h.snapshot().latency_ewma_us, 900);
}
