//! Tests for percentiles, deltas, rates and frame building.

use super::*;
use crate::scrape::parse_exposition;

fn snap(text: &str) -> Snapshot {
    Snapshot::new(parse_exposition(text))
}

fn close(actual: Option<f64>, expected: f64) {
    let actual = actual.expect("a value");
    assert!(
        (actual - expected).abs() < 1e-9,
        "expected {expected}, got {actual}"
    );
}

const INF: f64 = f64::INFINITY;

#[test]
fn percentile_is_the_geometric_middle_of_its_bucket() {
    let buckets = [(0.001, 50.0), (0.002, 90.0), (0.005, 100.0), (INF, 100.0)];
    close(percentile(&buckets, 0.50), 0.001);
    close(percentile(&buckets, 0.25), 0.001);
    close(percentile(&buckets, 0.70), (0.001_f64 * 0.002).sqrt());
    close(percentile(&buckets, 0.90), (0.001_f64 * 0.002).sqrt());
    close(percentile(&buckets, 0.99), (0.002_f64 * 0.005).sqrt());
}

#[test]
fn percentile_in_the_inf_bucket_is_the_largest_finite_bound() {
    let buckets = [(0.001, 10.0), (0.01, 20.0), (INF, 100.0)];
    close(percentile(&buckets, 0.99), 0.01);
    assert_eq!(percentile(&[(INF, 5.0)], 0.5), None);
}

#[test]
fn percentile_skips_empty_leading_buckets() {
    let buckets = [(0.001, 0.0), (0.002, 0.0), (0.004, 10.0), (INF, 10.0)];
    close(percentile(&buckets, 0.5), (0.002_f64 * 0.004).sqrt());
    close(percentile(&buckets, 0.0), (0.002_f64 * 0.004).sqrt());
}

#[test]
fn percentile_without_observations_is_none() {
    assert_eq!(percentile(&[], 0.5), None);
    assert_eq!(percentile(&[(0.001, 0.0), (INF, 0.0)], 0.5), None);
}

#[test]
fn bucket_and_counter_deltas_handle_resets() {
    let prev = vec![(0.001, 10.0), (INF, 20.0)];
    let cur = [(0.001, 15.0), (INF, 40.0)];
    assert_eq!(
        bucket_delta(&cur, Some(&prev)),
        vec![(0.001, 5.0), (INF, 20.0)]
    );
    let after_restart = [(0.001, 2.0), (INF, 3.0)];
    assert_eq!(
        bucket_delta(&after_restart, Some(&prev)),
        after_restart.to_vec()
    );
    assert_eq!(bucket_delta(&cur, None), cur.to_vec());
    assert_eq!(counter_delta(30.0, Some(10.0)), 20.0);
    assert_eq!(counter_delta(4.0, Some(10.0)), 4.0);
    assert_eq!(counter_delta(4.0, None), 4.0);
}

#[test]
fn histograms_group_by_label_whatever_the_label_order() {
    let s = snap(
        "h_bucket{le=\"0.1\",command=\"get\"} 1\n\
         h_bucket{command=\"get\",le=\"+Inf\"} 3\n\
         h_bucket{le=\"0.1\",command=\"set\"} 2\n\
         h_bucket{le=\"+Inf\",command=\"set\"} 2\n\
         h_bucket{command=\"del\"} 9\n",
    );
    let h = s.histograms("h", "command");
    assert_eq!(h["get"], vec![(0.1, 1.0), (INF, 3.0)]);
    assert_eq!(h["set"], vec![(0.1, 2.0), (INF, 2.0)]);
    assert!(!h.contains_key("del"));
}

const FIRST: &str = "\
redcar_uptime_seconds 100
redcar_commands_total{command=\"get\"} 1000
redcar_commands_total{command=\"set\"} 500
redcar_command_errors_total{command=\"set\"} 10
redcar_command_duration_seconds_bucket{le=\"0.001\",command=\"get\"} 900
redcar_command_duration_seconds_bucket{le=\"0.01\",command=\"get\"} 1000
redcar_command_duration_seconds_bucket{le=\"+Inf\",command=\"get\"} 1000
redcar_client_bytes_received_total 10000
redcar_node_requests_total{node=\"127.0.0.1:7000\"} 1500
redcar_node_in_flight{node=\"127.0.0.1:7000\"} 3
";

const SECOND: &str = "\
redcar_uptime_seconds 102
redcar_commands_total{command=\"get\"} 1200
redcar_commands_total{command=\"set\"} 900
redcar_command_errors_total{command=\"set\"} 14
redcar_command_duration_seconds_bucket{le=\"0.001\",command=\"get\"} 900
redcar_command_duration_seconds_bucket{le=\"0.01\",command=\"get\"} 1200
redcar_command_duration_seconds_bucket{le=\"+Inf\",command=\"get\"} 1200
redcar_client_bytes_received_total 14096
redcar_node_requests_total{node=\"127.0.0.1:7000\"} 2100
redcar_node_in_flight{node=\"127.0.0.1:7000\"} 1
";

#[test]
fn rates_come_from_the_delta_between_two_scrapes() {
    let (a, b) = (snap(FIRST), snap(SECOND));
    let f = Frame::build("127.0.0.1:9190", &b, Some((&a, Duration::from_secs(2))));
    assert_eq!(f.window_secs, Some(2.0));
    close(f.commands_per_sec, 300.0);
    close(f.errors_per_sec, 2.0);
    close(f.bytes_in_per_sec, 2048.0);
    assert_eq!(f.bytes_out_per_sec, None, "missing metric stays missing");
    assert_eq!(f.client_connections, None);
    assert_eq!(
        f.moved_per_sec,
        Some(0.0),
        "no redirect series yet, traffic known: 0"
    );
    assert_eq!(
        f.refresh_failures, None,
        "no refresh series at all: unknown"
    );
    let names: Vec<&str> = f.commands.iter().map(|r| r.command.as_str()).collect();
    assert_eq!(names, ["set", "get"], "sorted by calls/s");
    close(f.commands[0].calls_per_sec, 200.0);
    close(f.commands[0].errors_per_sec, 2.0);
    close(f.commands[1].calls_per_sec, 100.0);
    assert_eq!(
        f.commands[1].errors_per_sec,
        Some(0.0),
        "no series yet: none"
    );
    // All 200 new `get`s landed in (1ms, 10ms]: p50 and p99 are that bucket's geometric middle.
    close(f.commands[1].latency.p50_ms, 10f64.sqrt());
    close(f.commands[1].latency.p99_ms, 10f64.sqrt());
    assert_eq!(f.commands[0].latency, Latency::default());
    assert_eq!(f.nodes.len(), 1);
    close(f.nodes[0].requests_per_sec, 300.0);
    assert_eq!(f.nodes[0].in_flight, Some(1.0));
    assert_eq!(f.nodes[0].connections, None);
    assert_eq!(f.nodes[0].errors_per_sec, Some(0.0));
}

#[test]
fn first_frame_is_cumulative_since_start() {
    let f = Frame::build("a", &snap(FIRST), None);
    assert_eq!(f.window_secs, None);
    assert_eq!(f.uptime_secs, Some(100.0));
    close(f.commands_per_sec, 15.0);
    // 900 of 1000 `get`s at or under 1ms: p50 is that first bucket's bound, 1ms; p99 falls in
    // (1ms, 10ms], whose geometric middle is √10 ms.
    assert_eq!(f.commands[0].command, "get", "10/s, before set's 5/s");
    close(f.commands[0].latency.p50_ms, 1.0);
    close(f.commands[0].latency.p99_ms, 10f64.sqrt());
    let no_uptime = Frame::build(
        "a",
        &snap("redcar_commands_total{command=\"get\"} 5\n"),
        None,
    );
    assert_eq!(no_uptime.commands_per_sec, None, "no uptime: no rate");
    assert_eq!(no_uptime.commands.len(), 1);
    assert_eq!(
        no_uptime.commands[0].errors_per_sec, None,
        "no rate: no error rate either"
    );
}

#[test]
fn a_restart_between_scrapes_falls_back_to_since_start() {
    let restarted = "redcar_uptime_seconds 4\nredcar_commands_total{command=\"get\"} 40\n";
    let (a, b) = (snap(FIRST), snap(restarted));
    let f = Frame::build("a", &b, Some((&a, Duration::from_secs(2))));
    assert_eq!(f.window_secs, None);
    close(f.commands_per_sec, 10.0);
}

#[test]
fn header_counters_by_label() {
    let text = "\
redcar_uptime_seconds 10
redcar_redirects_total{kind=\"moved\"} 20
redcar_redirects_total{kind=\"ask\"} 5
redcar_topology_refreshes_total{result=\"ok\"} 7
redcar_topology_refreshes_total{result=\"failed\"} 2
redcar_client_connections{listener=\"tcp\"} 30
redcar_client_connections{listener=\"unix\"} 12
redcar_client_connections_total{listener=\"tcp\"} 999
";
    let f = Frame::build("a", &snap(text), None);
    close(f.moved_per_sec, 2.0);
    close(f.ask_per_sec, 0.5);
    assert_eq!(f.refresh_failures, Some(2.0));
    assert_eq!(
        f.client_connections,
        Some(42.0),
        "the gauge, not the _total counter"
    );
    assert_eq!(f.slow_per_sec, None);
}

#[test]
fn the_near_cache_line_is_the_hit_share_of_the_window_and_absent_while_unused() {
    let off = snap("redcar_near_cache_hits_total 0\nredcar_near_cache_misses_total 0\n");
    assert_eq!(Frame::build("a", &off, None).near_cache, None);
    let before = snap("redcar_near_cache_hits_total 100\nredcar_near_cache_misses_total 100\n");
    let after = snap(
        "redcar_near_cache_hits_total 1000\nredcar_near_cache_misses_total 200\nredcar_near_cache_bytes 4096\n",
    );
    let frame = Frame::build("a", &after, Some((&before, Duration::from_secs(1))));
    let line = frame.near_cache.expect("the cache was used");
    close(line.hits_per_sec, 900.0);
    close(line.hit_ratio, 0.9);
    close(line.bytes, 4096.0);
}

#[test]
fn the_workers_line_lists_every_worker_and_is_absent_with_the_shared_runtime() {
    let shared =
        snap("redcar_client_connections{listener=\"tcp\"} 3\nredcar_placement_packing 0\n");
    assert_eq!(Frame::build("a", &shared, None).workers, None);
    let per_core = snap(
        "redcar_worker_clients{worker=\"0\"} 10\nredcar_worker_clients{worker=\"1\"} 4\n\
         redcar_worker_busy_ratio{worker=\"0\"} 0.5\nredcar_worker_busy_ratio{worker=\"1\"} 0.25\n\
         redcar_placement_packing 0\n",
    );
    let line = Frame::build("a", &per_core, None)
        .workers
        .expect("per-core workers");
    assert_eq!(
        line.workers,
        vec![(Some(10.0), Some(0.5)), (Some(4.0), Some(0.25))]
    );
    assert_eq!(line.packing, Some(false));
}
