//! One client session's per-command series, added up locally and handed to the shared ones once
//! per write to the client instead of once per command.
//!
//! Every worker records into the same few series (a pipelined `GET` workload is all `GET`), so
//! recording a command in them directly costs a read lock and three atomic adds on cache lines
//! the other workers keep writing: 236 ns per command with two threads recording, against 17 ns
//! through a tally (`cargo run --release --example metrics_contention`; bench/README.md,
//! "Per-command metrics"). Each thread keeps the handles of the commands its sessions ran last
//! and counts in plain integers until a session flushes. The counts live per thread, not per
//! session, so an idle client holds none of them (see
//! docs/decisions/0007-the-cost-of-an-idle-client.md).

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
    static PENDING: RefCell<Vec<UnflushedCommand>> = const { RefCell::new(Vec::new()) };
    /// The same for the users the sessions on this thread run as (see [`UserSeries`]).
    static USERS: RefCell<Vec<PendingUser>> = const { RefCell::new(Vec::new()) };
}

/// A user's calls, error replies and latency (`auth`'s per-user figures): a session's commands
/// count into them too while it runs as that user ([`CommandTally::follow`]), through the same
/// runs of records and the same flushes as the per-command series, so they cost nothing more
/// per command.
#[derive(Debug, Default)]
pub(crate) struct UserSeries {
    /// `user_commands`: the user's commands.
    pub(crate) calls: Counter,
    /// `user_command_errors`: the user's error replies.
    pub(crate) errors: Counter,
    /// `user_command_duration_seconds`: dispatch to reply, per command of the user.
    pub(crate) duration: LatencyHistogram,
}

/// One user's counts on this thread since the last flush.
struct PendingUser {
    /// The user's shared series, also the key of the entry (by pointer: one per configured user).
    series: Arc<UserSeries>,
    /// What this thread counted for the user since its last flush.
    counts: Unflushed,
}

/// A session's way into its thread's per-command counts. Flushed explicitly before a session
/// writes replies (so a client that has its reply also sees it counted: recording and flushing
/// happen in the same poll of the session, so on the same thread) and on drop.
pub struct CommandTally<'m> {
    /// The hub to flush into; also where the slow-log threshold is read from.
    metrics: &'m Metrics,
    /// Records of one command that took the same time, not yet in the thread's counts: the
    /// commands of one pipelined read are the same command (a `GET` workload) started and
    /// finished on the same clock readings, so a run of 16 costs one lookup of the thread's
    /// entry and one bucket search instead of 16, each of which costs about as much as the rest
    /// of recording the command.
    run: IdenticalRun,
    /// The user the session runs as, when its figures are kept.
    user: Option<Arc<UserSeries>>,
}

/// A run of identical records; `calls == 0`: none.
struct IdenticalRun {
    /// The command's name from the command table; compared by pointer first.
    command: &'static str,
    /// The time every record of the run took, in nanoseconds: a run only ever holds equal
    /// durations.
    elapsed_ns: u64,
    /// Records in the run.
    calls: u64,
    /// Of them, how many replied with an error.
    errors: u64,
}

/// One command's counts since the last flush.
struct UnflushedCommand {
    /// Which [`Metrics`] the series belong to (several may live in one process: tests).
    ///
    /// The hub's id, not its address: an id is never reused, so a thread's entry cannot be mistaken
    /// for one of a newer hub at a recycled address.
    registry: u64,
    /// The command's name, compared by pointer first.
    command: &'static str,
    /// The command's shared handles, taken once when the entry was made.
    series: CommandSeries,
    /// What was counted since the last flush.
    counts: Unflushed,
}

/// Calls, error replies and latency not yet in their shared series (a command's or a user's);
/// the calls are the duration observations.
#[derive(Default)]
struct Unflushed {
    /// Error replies counted.
    errors: u64,
    /// One observation per call: its count is the number of calls.
    duration: LocalLatency,
}

impl Unflushed {
    /// Adds a run of records: its calls as that many observations of one duration.
    #[inline]
    fn add(&mut self, run: &IdenticalRun) {
        self.errors += run.errors;
        self.duration.observe_ns_times(run.elapsed_ns, run.calls);
    }

    /// Adds what was counted to the shared series and starts again from nothing.
    #[inline]
    fn flush_into(&mut self, calls: &Counter, errors: &Counter, duration: &LatencyHistogram) {
        let count = self.duration.count();
        if count == 0 {
            return;
        }
        calls.inc_by(count);
        if self.errors > 0 {
            errors.inc_by(std::mem::take(&mut self.errors));
        }
        self.duration.flush_into(duration);
    }
}

impl<'m> CommandTally<'m> {
    /// An empty tally that flushes into `metrics`.
    ///
    /// Cheap: no series are touched until the first flush. Made once per event-loop worker and
    /// per busy session, which record every command through it.
    pub fn new(metrics: &'m Metrics) -> CommandTally<'m> {
        CommandTally {
            metrics,
            run: IdenticalRun {
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
                self.run = IdenticalRun {
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
    ///
    /// Called when the next record differs (another command or duration), when the followed user
    /// changes (the run's records belong to the old user) and at every flush.
    fn end_run(&mut self) {
        let run = &mut self.run;
        if run.calls == 0 {
            return;
        }
        if self.metrics.commands.enabled() {
            PENDING.with(|pending| {
                let mut pending = pending.borrow_mut();
                entry(&mut pending, self.metrics, run.command)
                    .counts
                    .add(run);
            });
        }
        if let Some(user) = &self.user {
            USERS.with(|users| {
                let mut users = users.borrow_mut();
                user_entry(&mut users, user).counts.add(run);
            });
        }
        run.calls = 0;
    }

    /// Adds everything counted on this thread so far to the shared series.
    ///
    /// Called by the session before it writes replies and when the tally is dropped. Flushes every
    /// session's counts on this thread, not only this tally's: that is what lets sessions share the
    /// entries, and it costs the same.
    pub fn flush(&mut self) {
        self.end_run();
        PENDING.with(|pending| flush(&mut pending.borrow_mut()));
        USERS.with(|users| flush_users(&mut users.borrow_mut()));
    }
}

/// The thread's entry for `user`, made on first use (a handful of users per thread: a scan).
///
/// Past [`MAX_COMMANDS`] users, the thread's user counts are flushed and the list starts over, so
/// it never grows with the number of users.
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
                counts: Unflushed::default(),
            });
            users.len() - 1
        }
    };
    &mut users[at]
}

/// Adds every user's counts on this thread to their shared series.
fn flush_users(users: &mut [PendingUser]) {
    for user in users {
        let series = &user.series;
        user.counts
            .flush_into(&series.calls, &series.errors, &series.duration);
    }
}

/// The entry of `command` in `metrics`, made on first use.
///
/// `metrics.id` tells hubs apart (tests run several in one process). Past [`MAX_COMMANDS`] entries
/// the thread flushes and starts over: the list stays short enough that a linear scan beats a hash.
fn entry<'p>(
    pending: &'p mut Vec<UnflushedCommand>,
    metrics: &Metrics,
    command: &'static str,
) -> &'p mut UnflushedCommand {
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
            pending.push(UnflushedCommand {
                registry,
                command,
                series: metrics.commands.series_of(command),
                counts: Unflushed::default(),
            });
            pending.len() - 1
        }
    };
    &mut pending[at]
}

/// Adds every command's counts on this thread to their shared series.
fn flush(pending: &mut [UnflushedCommand]) {
    for pending in pending {
        let series = &pending.series;
        pending
            .counts
            .flush_into(&series.calls, &series.errors, &series.duration);
    }
}

impl Drop for CommandTally<'_> {
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
#[path = "tally_tests.rs"]
mod tests;
