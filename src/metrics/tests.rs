//! The exposition names the per-command series `redcar top` and dashboards rely on, and groups
//! are added once (the producers' own series are tested in `app/metrics_tests.rs`).

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;

use super::*;

/// A producer's group, as a module above `metrics` would define one.
#[derive(Default)]
struct Probe {
    calls: Counter,
    scraped: Gauge,
}

impl MetricGroup for Probe {
    fn register(&self, registry: &mut Registry) {
        registry.register("probe_calls", "Calls", self.calls.clone());
        registry.register("probe_scraped", "Expositions", self.scraped.clone());
    }

    fn before_encode(&self) {
        self.scraped.inc();
    }

    fn add_totals(&self, totals: &mut Totals) {
        totals.retries = self.calls.get();
    }
}

#[test]
fn a_group_added_twice_registers_once() {
    let metrics = Metrics::default();
    metrics.add::<Probe>();
    metrics.add::<Probe>();
    assert!(Arc::ptr_eq(&metrics.group::<Probe>(), &metrics.group()));
    metrics.group::<Probe>().calls.inc();
    let text = metrics.encode();
    assert_eq!(
        text.matches("# TYPE redcar_probe_calls counter").count(),
        1,
        "{text}"
    );
    assert!(text.contains("redcar_probe_calls_total 1"), "{text}");
}

#[test]
fn a_group_not_added_at_start_is_made_on_first_use() {
    let metrics = Metrics::default();
    assert!(!metrics.encode().contains("probe"));
    assert_eq!(metrics.totals(), Totals::default(), "no group, no totals");
    metrics.group::<Probe>().calls.inc_by(2);
    let text = metrics.encode();
    assert!(text.contains("redcar_probe_calls_total 2"), "{text}");
    assert!(
        text.contains("redcar_probe_scraped 1"),
        "set before the exposition: {text}"
    );
    assert_eq!(metrics.totals().retries, 2, "each group adds its totals");
}

#[test]
fn recorded_commands_appear_in_the_exposition() {
    let metrics = Metrics::default();
    metrics.record_command("get", Duration::from_micros(80), false);
    metrics.record_command("get", Duration::from_micros(120), true);
    let text = metrics.encode();
    for expected in [
        "redcar_commands_total{command=\"get\"} 2",
        "redcar_command_errors_total{command=\"get\"} 1",
        "redcar_command_duration_seconds_count{command=\"get\"} 2",
        "redcar_command_duration_seconds_bucket{le=\"0.00008\",command=\"get\"} 1",
        "redcar_command_duration_seconds_bucket{le=\"0.00016\",command=\"get\"} 2",
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
