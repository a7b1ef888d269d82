//! The hub: who gets which invalidation.

use std::sync::Arc;

use bytes::Bytes;

use super::*;

fn key(k: &str) -> Bytes {
    Bytes::copy_from_slice(k.as_bytes())
}

fn tracking(hub: &Tracking, id: u64, tracks: Tracks) -> Arc<Mailbox> {
    let mailbox = hub.join(id);
    hub.set_tracks(id, Some(tracks));
    mailbox
}

#[test]
fn an_invalidation_reaches_each_reader_once_then_the_key_is_forgotten() {
    let hub = Tracking::new(100);
    let one = tracking(&hub, 1, Tracks::default());
    let two = tracking(&hub, 2, Tracks::default());
    hub.read(1, [key("a"), key("b")].into_iter());
    hub.read(2, [key("a")].into_iter());
    hub.invalidated("n:1", Some(vec![key("a"), key("b"), key("zz")]));
    assert_eq!(
        one.take(),
        vec![TrackingEvent::Keys(vec![key("a"), key("b")])]
    );
    assert_eq!(two.take(), vec![TrackingEvent::Keys(vec![key("a")])]);
    hub.invalidated("n:1", Some(vec![key("a")]));
    assert!(one.take().is_empty(), "not tracked until read again");
    assert_eq!(hub.tracked_keys(), 0);
}

#[test]
fn redirected_invalidations_go_to_the_target() {
    let hub = Tracking::new(100);
    let target = hub.join(9); // subscribed, not tracking
    let tracker = tracking(
        &hub,
        1,
        Tracks {
            redirect: 9,
            prefixes: None,
            broken: false,
        },
    );
    hub.read(1, [key("k")].into_iter());
    hub.invalidated("n:1", Some(vec![key("k")]));
    assert!(tracker.take().is_empty());
    assert_eq!(target.take(), vec![TrackingEvent::Keys(vec![key("k")])]);
}

#[test]
fn noloop_writers_and_gone_sessions_are_not_told() {
    let hub = Tracking::new(100);
    let one = tracking(&hub, 1, Tracks::default());
    let two = tracking(&hub, 2, Tracks::default());
    hub.read(1, [key("k")].into_iter());
    hub.read(2, [key("k")].into_iter());
    hub.wrote(1, [key("k")].into_iter());
    hub.leave(2);
    hub.invalidated("n:1", Some(vec![key("k")]));
    assert!(one.take().is_empty());
    assert!(two.take().is_empty());
}

#[test]
fn bcast_sessions_get_the_keys_under_their_prefixes() {
    let hub = Tracking::new(100);
    let user = tracking(
        &hub,
        1,
        Tracks {
            redirect: 0,
            prefixes: Some(vec![key("user:")]),
            broken: false,
        },
    );
    let all = tracking(
        &hub,
        2,
        Tracks {
            redirect: 0,
            prefixes: Some(vec![key("")]),
            broken: false,
        },
    );
    hub.invalidated("n:1", Some(vec![key("user:1"), key("post:1")]));
    assert_eq!(user.take(), vec![TrackingEvent::Keys(vec![key("user:1")])]);
    assert_eq!(
        all.take(),
        vec![TrackingEvent::Keys(vec![key("user:1"), key("post:1")])]
    );
}

#[test]
fn a_flush_tells_every_tracking_session_once() {
    let hub = Tracking::new(100);
    let one = tracking(&hub, 1, Tracks::default());
    let target = hub.join(9);
    let _two = tracking(
        &hub,
        2,
        Tracks {
            redirect: 9,
            prefixes: None,
            broken: false,
        },
    );
    let _three = tracking(
        &hub,
        3,
        Tracks {
            redirect: 9,
            prefixes: None,
            broken: false,
        },
    );
    let idle = hub.join(4); // subscribed, nobody redirects to it
    hub.read(1, [key("k")].into_iter());
    hub.invalidated("n:1", None);
    assert_eq!(one.take(), vec![TrackingEvent::Flush]);
    assert_eq!(target.take(), vec![TrackingEvent::Flush]);
    assert!(idle.take().is_empty());
    assert_eq!(hub.tracked_keys(), 0);
}

#[test]
fn the_bound_evicts_the_oldest_key_with_an_invalidation() {
    let hub = Tracking::new(2);
    let one = tracking(&hub, 1, Tracks::default());
    hub.read(1, [key("a"), key("b"), key("c")].into_iter());
    assert_eq!(one.take(), vec![TrackingEvent::Keys(vec![key("a")])]);
    assert_eq!(hub.tracked_keys(), 2);
}

#[test]
fn a_session_whose_target_left_is_told_once() {
    let hub = Tracking::new(100);
    let target = hub.join(9);
    let tracker = tracking(
        &hub,
        1,
        Tracks {
            redirect: 9,
            ..Tracks::default()
        },
    );
    drop(target);
    hub.leave(9);
    hub.read(1, [key("a"), key("b")].into_iter());
    hub.invalidated("n:1", Some(vec![key("a")]));
    hub.invalidated("n:1", Some(vec![key("b")]));
    assert_eq!(tracker.take(), vec![TrackingEvent::RedirectBroken(9)]);
    assert!(hub.is_broken(1));
}

#[test]
fn a_mailbox_that_is_not_read_collapses_into_a_flush() {
    let hub = Tracking::new(10_000);
    let one = tracking(&hub, 1, Tracks::default());
    for i in 0..MAILBOX_MAX + 5 {
        let k = key(&format!("k{i}"));
        hub.read(1, [k.clone()].into_iter());
        hub.invalidated("n:1", Some(vec![k]));
    }
    let events = one.take();
    assert_eq!(events.len(), 6, "one flush and what came after it");
    assert_eq!(events[0], TrackingEvent::Flush);
}

#[test]
fn the_metrics_follow_clients_keys_and_deliveries() {
    let registry = crate::metrics::Metrics::new(&crate::metrics::MetricsConfig::default());
    let metrics = TrackingMetrics::clone(&registry.group());
    let hub = Tracking::new(2).with_metrics(metrics.clone());
    let _one = tracking(&hub, 1, Tracks::default());
    let _two = tracking(
        &hub,
        2,
        Tracks {
            redirect: 77, // not connected: broken
            prefixes: None,
            broken: false,
        },
    );
    assert_eq!(metrics.clients.get(), 2);
    hub.read(1, [key("a"), key("b"), key("c")].into_iter());
    assert_eq!(metrics.keys.get(), 2);
    assert_eq!(metrics.evicted.get(), 1);
    hub.read(2, [key("b")].into_iter());
    hub.invalidated("n:1", Some(vec![key("b")]));
    assert_eq!(metrics.redirects_broken.get(), 1);
    hub.lost("n:1");
    assert_eq!(metrics.keys.get(), 0);
    let text = registry.encode();
    // "a" evicted, then "b": two keys to client 1; the flush to client 1 (2's target is gone).
    assert!(
        text.contains("tracking_invalidations_total{kind=\"key\"} 2"),
        "{text}"
    );
    assert!(
        text.contains("tracking_invalidations_total{kind=\"flush\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("tracking_flushes_total{cause=\"connection_lost\"} 1"),
        "{text}"
    );
    hub.set_tracks(1, None);
    hub.leave(2);
    assert_eq!(metrics.clients.get(), 0);
}

#[test]
fn bcast_noloop_sessions_are_not_told_of_their_own_writes() {
    let hub = Tracking::new(100);
    let bcast = Tracks {
        redirect: 0,
        prefixes: Some(vec![key("u:")]),
        broken: false,
    };
    let me = tracking(&hub, 1, bcast.clone());
    let other = tracking(&hub, 2, bcast);
    hub.wrote(1, [key("u:1"), key("x:1")].into_iter());
    hub.invalidated("n:1", Some(vec![key("u:1")]));
    assert!(me.take().is_empty(), "its own write");
    assert_eq!(other.take(), vec![TrackingEvent::Keys(vec![key("u:1")])]);
    hub.invalidated("n:1", Some(vec![key("u:1")]));
    assert_eq!(
        me.take(),
        vec![TrackingEvent::Keys(vec![key("u:1")])],
        "the next write is someone else's"
    );
}
