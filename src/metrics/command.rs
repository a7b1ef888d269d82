//! Per-command series (calls, error replies, dispatch-to-reply time) and the slow-command count,
//! produced by the client sessions (directly, or through a thread's [`super::CommandTally`]).
//!
//! Why the handles are cached by name: a `Family` look-up hashes the label and takes the family's
//! lock on every call, which on the command path would be contended by every worker. `known` maps
//! the command table's `&'static str` names to handles taken once, so recording costs a read lock
//! and a short FNV hash, or nothing here at all through a thread's tally. The label's values come
//! only from the command table (never from what a client sends), so the number of series is bounded
//! by the commands redcar knows.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::RwLock;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::LatencyHistogram;

/// The one label of the per-command series: the command's name as the command table spells it
/// (`get`, `config|get`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CommandLabel {
    command: &'static str,
}

/// The per-command families, and the handles of every command seen so far.
pub(crate) struct CommandMetrics {
    /// `metrics.command_stats`: whether the per-command series are kept at all.
    enabled: bool,
    /// `commands`: commands received, by command.
    calls: Family<CommandLabel, Counter>,
    /// `command_errors`: error replies sent, by command.
    errors: Family<CommandLabel, Counter>,
    /// Per command on the hot path: the lock-free kind (no mutex shared by every worker).
    duration: Family<CommandLabel, LatencyHistogram>,
    /// Commands over the slow-log threshold (counted even with command stats off).
    slow: Counter,
    /// Per-command handles by name, so recording a command costs one lookup.
    /// Keyed by command name with FNV rather than SipHash: looked up on every command, and the
    /// names are the command table's, not chosen by clients.
    known: RwLock<HashMap<&'static str, CommandSeries, BuildHasherDefault<NameHasher>>>,
}

/// One command's handles.
#[derive(Clone)]
pub(super) struct CommandSeries {
    /// `commands` for this command.
    pub(super) calls: Counter,
    /// `command_errors` for this command.
    pub(super) errors: Counter,
    /// `command_duration_seconds` for this command.
    pub(super) duration: LatencyHistogram,
}

impl CommandSeries {
    /// One command, straight into the shared series (the path without a tally).
    fn record(&self, elapsed: Duration, error: bool) {
        self.calls.inc();
        if error {
            self.errors.inc();
        }
        self.duration.observe(elapsed.as_secs_f64());
    }
}

impl CommandMetrics {
    /// `enabled` is `metrics.command_stats`.
    pub(super) fn new(enabled: bool) -> CommandMetrics {
        CommandMetrics {
            enabled,
            calls: Family::default(),
            errors: Family::default(),
            duration: Family::default(),
            slow: Counter::default(),
            known: RwLock::new(HashMap::default()),
        }
    }

    /// Called once when the hub's registry is built; the names are part of what users see.
    pub(super) fn register(&self, r: &mut Registry) {
        r.register(
            "commands",
            "Commands received, by command",
            self.calls.clone(),
        );
        r.register(
            "command_errors",
            "Error replies sent, by command",
            self.errors.clone(),
        );
        r.register(
            "command_duration_seconds",
            "Dispatch to reply, by command",
            self.duration.clone(),
        );
        r.register(
            "slow_commands",
            "Commands slower than the slow-log threshold",
            self.slow.clone(),
        );
    }

    /// Whether per-command series are kept (`metrics.command_stats`).
    pub(crate) fn enabled(&self) -> bool {
        self.enabled
    }

    /// Records one finished command, if command stats are on.
    ///
    /// The path without a tally (pub/sub commands of a subscribed client, tests); the command path
    /// goes through [`super::CommandTally`].
    pub(super) fn record(&self, command: &'static str, elapsed: Duration, error: bool) {
        if self.enabled {
            self.series_of(command).record(elapsed, error);
        }
    }

    /// Counts one command over the slow-log threshold.
    pub(super) fn slow(&self) {
        self.slow.inc();
    }

    /// A command's series, made on its first use.
    ///
    /// The read lock is taken for the look-up and released before creating, so a first use never
    /// deadlocks against itself; two threads creating the same command's series at once both end
    /// with the same handles (`create` keeps the first).
    pub(super) fn series_of(&self, command: &'static str) -> CommandSeries {
        let known = self.known.read().unwrap_or_else(|e| e.into_inner());
        match known.get(command) {
            Some(series) => series.clone(),
            None => {
                drop(known);
                self.create(command)
            }
        }
    }

    /// Creates (once) the series of a command seen for the first time.
    ///
    /// The family hands out the same series for the same label, so a lost race creates nothing
    /// twice.
    fn create(&self, command: &'static str) -> CommandSeries {
        let label = CommandLabel { command };
        let series = CommandSeries {
            calls: self.calls.get_or_create_owned(&label),
            errors: self.errors.get_or_create_owned(&label),
            duration: self.duration.get_or_create_owned(&label),
        };
        let mut known = self.known.write().unwrap_or_else(|e| e.into_inner());
        known.entry(command).or_insert(series).clone()
    }

    /// Calls so far per command seen (status page rates); empty when command stats are off.
    pub(crate) fn calls(&self) -> Vec<(&'static str, u64)> {
        let known = self.known.read().unwrap_or_else(|e| e.into_inner());
        known
            .iter()
            .map(|(name, series)| (*name, series.calls.get()))
            .collect()
    }
}

/// FNV-1a over the bytes of a command name (see `CommandMetrics::known`).
///
/// Starts at FNV's 64-bit offset basis.
struct NameHasher(u64);

impl Default for NameHasher {
    fn default() -> Self {
        NameHasher(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for NameHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}
