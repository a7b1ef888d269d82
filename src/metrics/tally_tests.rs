//! The tally's tests: counts reach the shared series only when flushed, runs count each call.

use super::*;
use crate::metrics::MetricsConfig;

fn count_of(metrics: &Metrics, series: &str) -> Option<u64> {
    metrics
        .encode()
        .lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
}

#[test]
fn counts_reach_the_shared_series_only_when_flushed() {
    let metrics = Metrics::default();
    let mut tally = CommandTally::new(&metrics);
    tally.record("get", 80_000, false);
    tally.record("get", 90_000, true);
    tally.record("set", 70_000, false);
    let get = "redcar_commands_total{command=\"get\"}";
    assert_eq!(count_of(&metrics, get), Some(0), "made, not yet counted");
    tally.flush();
    assert_eq!(count_of(&metrics, get), Some(2));
    assert_eq!(
        count_of(&metrics, "redcar_command_errors_total{command=\"get\"}"),
        Some(1)
    );
    assert_eq!(
        count_of(
            &metrics,
            "redcar_command_duration_seconds_count{command=\"set\"}"
        ),
        Some(1)
    );
    // Counted once: a second flush adds nothing, a later command adds itself.
    tally.flush();
    tally.record("get", 80_000, false);
    tally.flush();
    assert_eq!(count_of(&metrics, get), Some(3));
}

#[test]
fn a_run_of_the_same_command_and_time_counts_each_call() {
    let metrics = Metrics::default();
    let mut tally = CommandTally::new(&metrics);
    for i in 0..16 {
        tally.record("get", 20_000, i == 7);
    }
    tally.record("get", 40_000, false);
    tally.record("set", 40_000, true);
    tally.record("get", 40_000, false);
    tally.flush();
    let get = |series: &str| count_of(&metrics, &format!("{series}{{command=\"get\"}}"));
    assert_eq!(get("redcar_commands_total"), Some(18));
    assert_eq!(get("redcar_command_errors_total"), Some(1));
    assert_eq!(get("redcar_command_duration_seconds_count"), Some(18));
    let sum = metrics
        .encode()
        .lines()
        .find_map(|l| {
            l.strip_prefix("redcar_command_duration_seconds_sum{command=\"get\"}")?
                .trim()
                .parse::<f64>()
                .ok()
        })
        .expect("a sum");
    assert!(
        (sum - 0.0004).abs() < 1e-9,
        "16 × 20 µs + 2 × 40 µs, got {sum}"
    );
    assert_eq!(
        count_of(&metrics, "redcar_command_errors_total{command=\"set\"}"),
        Some(1)
    );
}

#[test]
fn a_dropped_tally_flushes_and_many_commands_are_all_counted() {
    let metrics = Metrics::default();
    {
        let mut tally = CommandTally::new(&metrics);
        let names: Vec<&'static str> = (0..MAX_COMMANDS + 3)
            .map(|i| &*Box::leak(format!("c{i}").into_boxed_str()))
            .collect();
        for command in names.iter().chain(&names[..1]) {
            tally.record(command, 10_000, false);
        }
        PENDING.with(|p| assert!(p.borrow().len() <= MAX_COMMANDS));
    }
    assert_eq!(
        count_of(&metrics, "redcar_commands_total{command=\"c0\"}"),
        Some(2)
    );
    assert_eq!(
        count_of(&metrics, "redcar_commands_total{command=\"c34\"}"),
        Some(1)
    );
}

#[test]
fn one_name_at_two_addresses_is_one_command() {
    let metrics = Metrics::default();
    let mut tally = CommandTally::new(&metrics);
    let copy: &'static str = Box::leak(String::from("get").into_boxed_str());
    tally.record("get", 10_000, false);
    tally.record(copy, 10_000, false);
    let entries = PENDING.with(|p| {
        p.borrow()
            .iter()
            .filter(|p| p.registry == metrics.id && p.command == "get")
            .count()
    });
    assert_eq!(entries, 1);
    tally.flush();
    assert_eq!(
        count_of(&metrics, "redcar_commands_total{command=\"get\"}"),
        Some(2)
    );
}

#[test]
fn two_registries_on_one_thread_keep_their_own_counts() {
    let (one, two) = (Metrics::default(), Metrics::default());
    let mut first = CommandTally::new(&one);
    let mut second = CommandTally::new(&two);
    first.record("get", 10_000, false);
    second.record("get", 10_000, false);
    second.record("get", 10_000, false);
    // A tally's flush empties the thread's counts into their own registries; each tally's
    // current run of records goes with its own flush.
    first.flush();
    let get = "redcar_commands_total{command=\"get\"}";
    assert_eq!(count_of(&one, get), Some(1));
    assert_eq!(count_of(&two, get).unwrap_or(0), 0);
    second.record("set", 10_000, false);
    first.flush();
    assert_eq!(
        count_of(&two, get),
        Some(2),
        "the run ended in the thread's counts"
    );
    second.flush();
    let set = "redcar_commands_total{command=\"set\"}";
    assert_eq!(count_of(&two, set), Some(1));
}

#[test]
fn a_followed_user_counts_its_commands_even_with_command_stats_off() {
    let config = MetricsConfig {
        command_stats: false,
        ..MetricsConfig::default()
    };
    let metrics = Metrics::new(&config);
    let (alice, bob) = (
        Arc::new(UserSeries::default()),
        Arc::new(UserSeries::default()),
    );
    let mut tally = CommandTally::new(&metrics);
    tally.record("get", 10_000, false);
    tally.follow(Some(&alice));
    tally.record("get", 10_000, false);
    tally.record("get", 10_000, true);
    tally.follow(Some(&alice));
    tally.record("set", 20_000, false);
    tally.follow(Some(&bob));
    tally.record("get", 10_000, false);
    assert_eq!(alice.calls.get(), 0, "counted at the flush");
    tally.flush();
    assert_eq!((alice.calls.get(), alice.errors.get()), (3, 1));
    assert_eq!((bob.calls.get(), bob.errors.get()), (1, 0));
    assert_eq!(alice.duration.buckets().iter().sum::<u64>(), 3);
    tally.follow(None);
    tally.record("get", 10_000, false);
    tally.flush();
    assert_eq!(bob.calls.get(), 1);
}

#[test]
fn slow_commands_are_reported_even_with_command_stats_off() {
    let config = MetricsConfig {
        command_stats: false,
        slowlog_threshold: Duration::from_millis(10),
        ..MetricsConfig::default()
    };
    let metrics = Metrics::new(&config);
    let mut tally = CommandTally::new(&metrics);
    assert!(tally.record("get", 11_000_000, false));
    assert!(!tally.record("get", 9_000_000, false));
    drop(tally);
    assert!(!metrics.encode().contains("command=\"get\""));
}
