//! One client session's per-command series, added up locally and handed to the shared ones once
//! per write to the client instead of once per command.
//!
//! Every worker records into the same few series (a pipelined `GET` workload is all `GET`), so
//! recording a command in them directly costs a read lock and three atomic adds on cache lines
//! the other workers keep writing: 236 ns per command with two threads recording, against 17 ns
//! through a tally (`cargo run --release --example metrics_contention`; bench/README.md,
//! "Per-command metrics"). A session's tally keeps the handles of the commands it saw last and
//! counts in plain integers until it flushes.

use std::time::Duration;

use super::latency::LocalLatency;
use super::{CommandSeries, Metrics};

/// Distinct commands a tally keeps handles for; a session using more flushes and starts over.
const MAX_COMMANDS: usize = 8;

/// Per-command counts not yet added to the shared series. Flushed explicitly before a
/// session writes replies (so a client that has its reply also sees it counted) and on drop.
pub struct CommandTally<'m> {
    metrics: &'m Metrics,
    commands: Vec<Pending>,
}

/// One command's counts since the last flush; its calls are its duration observations.
struct Pending {
    command: &'static str,
    series: CommandSeries,
    errors: u64,
    duration: LocalLatency,
}

impl<'m> CommandTally<'m> {
    pub fn new(metrics: &'m Metrics) -> CommandTally<'m> {
        CommandTally {
            metrics,
            commands: Vec::new(),
        }
    }

    /// The metrics this tally adds to.
    pub fn metrics(&self) -> &'m Metrics {
        self.metrics
    }

    /// Counts one finished command and returns whether it was slow (as
    /// [`Metrics::record_command`], which it replaces on the hot path).
    pub fn record(&mut self, command: &'static str, elapsed: Duration, error: bool) -> bool {
        if self.metrics.command_stats {
            let pending = self.pending(command);
            pending.errors += u64::from(error);
            pending.duration.observe(elapsed.as_secs_f64());
        }
        self.metrics.note_slow(elapsed)
    }

    fn pending(&mut self, command: &'static str) -> &mut Pending {
        let found = self.commands.iter().position(|p| p.command == command);
        let at = match found {
            Some(at) => at,
            None => {
                if self.commands.len() == MAX_COMMANDS {
                    self.flush();
                    self.commands.clear();
                }
                self.commands.push(Pending {
                    command,
                    series: self.metrics.series_of(command),
                    errors: 0,
                    duration: LocalLatency::default(),
                });
                self.commands.len() - 1
            }
        };
        &mut self.commands[at]
    }

    /// Adds everything counted so far to the shared series.
    pub fn flush(&mut self) {
        for pending in &mut self.commands {
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
        tally.record("get", Duration::from_micros(80), false);
        tally.record("get", Duration::from_micros(90), true);
        tally.record("set", Duration::from_micros(70), false);
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
        tally.record("get", Duration::from_micros(80), false);
        tally.flush();
        assert_eq!(count_of(&metrics, get), Some(3));
    }

    #[test]
    fn a_dropped_tally_flushes_and_many_commands_are_all_counted() {
        let metrics = Metrics::default();
        {
            let mut tally = CommandTally::new(&metrics);
            for command in [
                "c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9", "c0",
            ] {
                tally.record(command, Duration::from_micros(10), false);
            }
            assert!(tally.commands.len() <= MAX_COMMANDS);
        }
        assert_eq!(
            count_of(&metrics, "redcar_commands_total{command=\"c0\"}"),
            Some(2)
        );
        assert_eq!(
            count_of(&metrics, "redcar_commands_total{command=\"c9\"}"),
            Some(1)
        );
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
        assert!(tally.record("get", Duration::from_millis(11), false));
        assert!(!tally.record("get", Duration::from_millis(9), false));
        drop(tally);
        assert!(!metrics.encode().contains("command=\"get\""));
    }
}
