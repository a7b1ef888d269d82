//! One client session's per-command series, added up locally and handed to the shared ones once
//! per write to the client instead of once per command.
//!
//! Every worker records into the same few series (a pipelined `GET` workload is all `GET`), so
//! recording a command in them directly costs a read lock and three atomic adds on cache lines
//! the other workers keep writing: 236 ns per command with two threads recording, against 17 ns
//! through a tally (`cargo run --release --example metrics_contention`; bench/README.md,
//! "Per-command metrics"). Each thread keeps the handles of the commands its sessions ran last
//! and counts in plain integers until a session flushes. The counts live per thread, not per
//! session, so an idle client holds none of them (see docs/architecture.md, "The cost of one
//! client").

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;

use super::command::CommandSeries;
use super::latency::LocalLatency;
use super::{LatencyHistogram, Metrics};

/// Distinct (registry, command) pairs a thread keeps handles for; past it, the thread flushes
/// and starts over.
const MAX_COMMANDS: usize = 32;

thread_local! {
    /// Every session on this thread counts here: an idle client holds no tally of its own, and
    /// sessions on one worker (usually running the same few commands) share the entries.
    static PENDING: RefCell<Vec<Pending>> = const { RefCell::new(Vec::new()) };
    /// The same for the users the sessions on this thread run as (see [`UserSeries`]).
    static USERS: RefCell<Vec<PendingUser>> = const { RefCell::new(Vec::new()) };
}

/// A user's calls, error replies and latency (`auth`'s per-user figures): a session's commands
/// count into them too while it runs as that user ([`CommandTally::follow`]), through the same
/// runs of records and the same flushes as the per-command series, so they cost nothing more
/// per command.
#[derive(Debug, Default)]
pub(crate) struct UserSeries {
    pub(crate) calls: Counter,
    pub(crate) errors: Counter,
    pub(crate) duration: LatencyHistogram,
}

/// One user's counts on this thread since the last flush.
struct PendingUser {
    series: Arc<UserSeries>,
    errors: u64,
    duration: LocalLatency,
}

/// A session's way into its thread's per-command counts. Flushed explicitly before a session
/// writes replies (so a client that has its reply also sees it counted: recording and flushing
/// happen in the same poll of the session, so on the same thread) and on drop.
pub struct CommandTally<'m> {
    metrics: &'m Metrics,
    /// Records of one command that took the same time, not yet in the thread's counts: the
    /// commands of one pipelined read are the same command (a `GET` workload) started and
    /// finished on the same clock readings, so a run of 16 costs one lookup of the thread's
    /// entry and one bucket search instead of 16 (each about 110 instructions; callgrind,
    /// 2026-11-27).
    run: Run,
    /// The user the session runs as, when its figures are kept.
    user: Option<Arc<UserSeries>>,
}

/// A run of identical records; `calls == 0`: none.
struct Run {
    command: &'static str,
    elapsed_ns: u64,
    calls: u64,
    errors: u64,
}

/// One command's counts since the last flush; its calls are its duration observations.
struct Pending {
    /// Which [`Metrics`] the series belong to (several may live in one process: tests).
    registry: u64,
    command: &'static str,
    series: CommandSeries,
    errors: u64,
    duration: LocalLatency,
}

impl<'m> CommandTally<'m> {
    /// An empty tally that flushes into `metrics`.
    pub fn new(metrics: &'m Metrics) -> CommandTally<'m> {
        CommandTally {
            metrics,
            run: Run {
                command: "",
                elapsed_ns: 0,
                calls: 0,
                errors: 0,
            },
            user: None,
        }
    }

    /// From now on, commands also count for `user` (`None`: for no user). Cheap when it is the
    /// user already followed: one pointer comparison.
    #[inline]
    pub(crate) fn follow(&mut self, user: Option<&Arc<UserSeries>>) {
        let same = match (&self.user, user) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        if !same {
            self.end_run();
            self.user = user.cloned();
        }
    }

    /// The metrics this tally adds to.
    pub(crate) fn metrics(&self) -> &'m Metrics {
        self.metrics
    }

    /// Counts one finished command that took `elapsed_ns` nanoseconds (`metrics::clock`) and
    /// returns whether it was slow (as [`Metrics::record_command`], which it replaces on the
    /// hot path).
    pub fn record(&mut self, command: &'static str, elapsed_ns: u64, error: bool) -> bool {
        if self.metrics.commands.enabled() || self.user.is_some() {
            let run = &mut self.run;
            // The name's pointer, as in `entry`: the table's `&'static str`s.
            if run.calls > 0 && std::ptr::eq(run.command, command) && run.elapsed_ns == elapsed_ns {
                run.calls += 1;
                run.errors += u64::from(error);
            } else {
                self.end_run();
                self.run = Run {
                    command,
                    elapsed_ns,
                    calls: 1,
                    errors: u64::from(error),
                };
            }
        }
        self.metrics.note_slow(Duration::from_nanos(elapsed_ns))
    }

    /// Adds the current run of records to the thread's counts.
    fn end_run(&mut self) {
        let run = &mut self.run;
        if run.calls == 0 {
            return;
        }
        if self.metrics.commands.enabled() {
            PENDING.with(|pending| {
                let mut pending = pending.borrow_mut();
                let entry = entry(&mut pending, self.metrics, run.command);
                entry.errors += run.errors;
                entry.duration.observe_ns_times(run.elapsed_ns, run.calls);
            });
        }
        if let Some(user) = &self.user {
            USERS.with(|users| {
                let mut users = users.borrow_mut();
                let entry = user_entry(&mut users, user);
                entry.errors += run.errors;
                entry.duration.observe_ns_times(run.elapsed_ns, run.calls);
            });
        }
        run.calls = 0;
    }

    /// Adds everything counted on this thread so far to the shared series.
    pub fn flush(&mut self) {
        self.end_run();
        PENDING.with(|pending| flush(&mut pending.borrow_mut()));
        USERS.with(|users| flush_users(&mut users.borrow_mut()));
    }
}

/// The thread's entry for `user`, made on first use (a handful of users per thread: a scan).
fn user_entry<'p>(users: &'p mut Vec<PendingUser>, user: &Arc<UserSeries>) -> &'p mut PendingUser {
    let at = match users.iter().position(|p| Arc::ptr_eq(&p.series, user)) {
        Some(at) => at,
        None => {
            if users.len() == MAX_COMMANDS {
                flush_users(users);
                users.clear();
            }
            users.push(PendingUser {
                series: user.clone(),
                errors: 0,
                duration: LocalLatency::default(),
            });
            users.len() - 1
        }
    };
    &mut users[at]
}

fn flush_users(users: &mut [PendingUser]) {
    for user in users {
        let calls = user.duration.count();
        if calls == 0 {
            continue;
        }
        user.series.calls.inc_by(calls);
        if user.errors > 0 {
            user.series.errors.inc_by(user.errors);
            user.errors = 0;
        }
        user.duration.flush_into(&user.series.duration);
    }
}

/// The entry of `command` in `metrics`, made on first use.
fn entry<'p>(
    pending: &'p mut Vec<Pending>,
    metrics: &Metrics,
    command: &'static str,
) -> &'p mut Pending {
    let registry = metrics.id;
    // Command names are the table's `&'static str`s, so the same name is nearly always the same
    // pointer: look for that first, and compare the text only when it is not found.
    let found = pending
        .iter()
        .position(|p| std::ptr::eq(p.command, command) && p.registry == registry)
        .or_else(|| {
            pending
                .iter()
                .position(|p| p.command == command && p.registry == registry)
        });
    let at = match found {
        Some(at) => at,
        None => {
            if pending.len() == MAX_COMMANDS {
                flush(pending);
                pending.clear();
            }
            pending.push(Pending {
                registry,
                command,
                series: metrics.commands.series_of(command),
                errors: 0,
                duration: LocalLatency::default(),
            });
            pending.len() - 1
        }
    };
    &mut pending[at]
}

fn flush(pending: &mut [Pending]) {
    for pending in pending {
        let calls = pending.duration.count();
        if calls == 0 {
            continue;
        }
        pending.series.calls.inc_by(calls);
        if pending.errors > 0 {
            pending.series.errors.inc_by(pending.errors);
            pending.errors = 0;
        }
        pending.duration.flush_into(&pending.series.duration);
    }
}

impl Drop for CommandTally<'_> {
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
mod tests {
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
}
