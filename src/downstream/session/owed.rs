//! The replies a busy session owes its client, in order, and when it may go idle.

use std::collections::VecDeque;
use std::time::Duration;

use futures_util::FutureExt;
use tokio::time::Instant;

use super::super::reply_batch::ReplyBatches;
use super::super::slow::LatencyWatch;
use super::buffers::Buffer;
use super::record::{CommandRecord, HotKeySink};
use super::Client;
use crate::metrics::clock::ElapsedClock;
use crate::metrics::CommandTally;
use crate::protocol::Request;
use crate::router::Call;
use crate::upstream::Inbox;

/// Whether a busy session with nothing owed may go idle: nothing buffered either ways, nothing
/// half-read or waiting to run, nothing to finish. It gives back its inbox on the way.
pub(super) fn goes_idle<S>(
    c: &mut Client<'_, S>,
    parked: &Option<Request>,
    closing: bool,
    budget_paused: bool,
    partial_since: Option<Instant>,
) -> bool {
    let idle = parked.is_none()
        && !closing
        && !budget_paused
        && partial_since.is_none()
        && c.input.is_empty()
        && c.out.is_empty();
    if idle && c.inbox.as_deref().is_some_and(Inbox::is_empty) {
        // No number is outstanding: a late reply cannot reach a new inbox.
        c.inbox = None;
    }
    idle
}

/// The replies owed to the client, and where finished ones go.
pub(super) struct OwedReplies<'a, 'r> {
    pub(super) calls: &'a mut VecDeque<(Call<'r>, CommandRecord)>,
    pub(super) batches: &'a mut ReplyBatches,
    pub(super) out: &'a mut Buffer,
    pub(super) tally: &'a mut CommandTally<'r>,
    pub(super) hot: HotKeySink<'r>,
    pub(super) peer: &'a str,
}

impl<'r> OwedReplies<'_, 'r> {
    /// Queues a reply that is not to a command (protocol errors) behind the owed ones.
    #[inline]
    pub(super) fn push(&mut self, call: Call<'r>, record: CommandRecord, now: Instant) {
        if self.calls.is_empty() {
            let reply = call.now_or_never().unwrap_or_default();
            let now = &mut ElapsedClock::new(now);
            self.out
                .append(record.finish(self.tally, self.hot, &reply, now, None, self.peer));
        } else {
            self.calls.push_back((call, record));
            self.batches.queued();
        }
    }

    /// Moves finished replies to the output buffer in order: `first` (already taken from the
    /// front call), then each following one that `next` yields. Returns how many of them ran
    /// alone.
    pub(super) fn take_replies(
        &mut self,
        mut first: Option<bytes::Bytes>,
        mut inbox: Option<&mut Inbox>,
        latency: Option<&LatencyWatch>,
        now: Instant,
        mut next: impl FnMut(&mut Call<'r>, Option<&mut Inbox>) -> Option<bytes::Bytes>,
    ) -> usize {
        let mut alone = 0;
        // The commands of one read started at the same clock reading: their time is measured
        // once (see `ElapsedClock`).
        let mut since = ElapsedClock::new(now);
        while let Some(bytes) = first.take().or_else(|| {
            let (call, _) = self.calls.front_mut()?;
            next(call, inbox.as_deref_mut())
        }) {
            let sent = match self.calls.pop_front() {
                Some((call, record)) => {
                    alone += usize::from(record.alone);
                    if let Some(watch) = latency {
                        // Feeds `client.close_idle_when_slow` (one atomic add) when it is on.
                        watch.record(Duration::from_nanos(since.nanos(record.started)));
                    }
                    let node = call.node();
                    record.finish(self.tally, self.hot, &bytes, &mut since, node, self.peer)
                }
                None => &bytes[..],
            };
            self.out.append(sent);
        }
        alone
    }
}
