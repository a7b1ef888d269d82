//! Client-side caching in `/metrics`: tracking clients and keys, invalidations delivered by
//! kind, flushes by cause, evictions at the table's bound and broken redirects.

use std::time::{Duration, Instant};

use crate::redirects::write_config;
use crate::support::{Redcar, RedisCluster};
use crate::tracking::{expect_push, flush, invalidate, next_within, tracker};
use crate::tracking_topology::connection_named;

/// The value of the series `series` (name and labels, exactly as exported).
fn metric(redcar: &Redcar, series: &str) -> f64 {
    redcar.metric_sum(&format!("{series} "))
}

/// Waits until `series` reaches `want` (gauges follow the sessions' disconnects).
fn wait_metric(redcar: &Redcar, series: &str, want: f64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while metric(redcar, series) != want {
        assert!(
            Instant::now() < deadline,
            "{series}: {} (want {want})",
            metric(redcar, series)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn tracking_is_counted_in_metrics() {
    let cluster = RedisCluster::start(3, 0);
    let config = write_config("client:\n  tracking_table_max_keys: 2\n");
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let mut c = tracker(&redcar, &[]);
    let mut writer = redcar.client();
    assert_eq!(metric(&redcar, "redcar_tracking_clients"), 1.0);

    // Three reads into a table of two: the oldest is evicted, and invalidated.
    for key in ["ct:m:1", "ct:m:2"] {
        assert!(c.q(&["GET", key]).is_nil());
    }
    // The push may come before or after the reply.
    c.send(&["GET", "ct:m:3"]).expect("send");
    let mut frames = vec![c.read_reply().expect("a frame")];
    if frames[0] == invalidate(&["ct:m:1"]) {
        frames.push(c.read_reply().expect("the reply"));
    } else {
        expect_push(&mut c, invalidate(&["ct:m:1"]), "evicted at the bound");
    }
    assert!(frames.last().is_some_and(|f| f.is_nil()), "{frames:?}");
    assert_eq!(metric(&redcar, "redcar_tracking_keys"), 2.0);
    assert_eq!(metric(&redcar, "redcar_tracking_keys_evicted_total"), 1.0);
    writer.q(&["SET", "ct:m:2", "v"]);
    expect_push(&mut c, invalidate(&["ct:m:2"]), "a write");
    assert_eq!(metric(&redcar, "redcar_tracking_keys"), 1.0);
    let key_kind = "redcar_tracking_invalidations_total{kind=\"key\"}";
    assert_eq!(metric(&redcar, key_kind), 2.0);

    // A FLUSHALL on a node, then a lost invalidation connection: a flush each.
    cluster.primary_for_key("ct:m:3").cmd(&["FLUSHALL"]);
    expect_push(&mut c, flush(), "FLUSHALL");
    // One null invalidation per tracked lane of the node.
    while next_within(&mut c, Duration::from_millis(300)).is_some() {}
    let cause = |cause: &str| format!("redcar_tracking_flushes_total{{cause=\"{cause}\"}}");
    assert!(metric(&redcar, &cause("node_flush")) >= 1.0);
    assert_eq!(metric(&redcar, "redcar_tracking_keys"), 0.0);
    let node = cluster.primary_for_key("ct:m:3");
    let id = connection_named(node, "redcar-invalidations");
    node.cmd(&["CLIENT", "KILL", "ID", &id]);
    expect_push(&mut c, flush(), "invalidation connection lost");
    // One flush when it is lost, one more once it is back and the lanes point at it.
    let deadline = Instant::now() + Duration::from_secs(5);
    while metric(&redcar, &cause("connection_lost")) < 1.0 {
        assert!(
            Instant::now() < deadline,
            "no connection_lost flush counted"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(metric(&redcar, &cause("connection_lost")) <= 2.0);
    let flush_kind = "redcar_tracking_invalidations_total{kind=\"flush\"}";
    assert!(metric(&redcar, flush_kind) >= 2.0);
    assert_eq!(metric(&redcar, &cause("topology")), 0.0);

    // A client whose redirect target left is told once.
    let mut target = redcar.client();
    let target_id = target.q(&["CLIENT", "ID"]).as_int().expect("an id");
    let mut redirected = tracker(&redcar, &["REDIRECT", &target_id.to_string()]);
    drop(target);
    wait_metric(&redcar, "redcar_tracking_clients", 2.0);
    while next_within(&mut c, Duration::from_millis(200)).is_some() {}
    std::thread::sleep(Duration::from_millis(300));
    redirected.q(&["GET", "ct:m:r"]);
    writer.q(&["SET", "ct:m:r", "v"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    while metric(&redcar, "redcar_tracking_redirects_broken_total") != 1.0 {
        assert!(Instant::now() < deadline, "no broken redirect counted");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(redirected);
    drop(c);
    wait_metric(&redcar, "redcar_tracking_clients", 0.0);
}
