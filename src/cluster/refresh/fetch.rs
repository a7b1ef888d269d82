//! Talking to one node: the map fetched whole (`CLUSTER SHARDS`, or `CLUSTER SLOTS` where the
//! node lacks it, with `CLUSTER NODES` for the config epochs and `CLUSTER INFO` for the
//! fingerprint, pipelined in one write so all three describe the same moment), and the check
//! that asks only for a fingerprint (`change_check`).
//!
//! What holds: the three replies of a fetch come from one pipelined write to one node, so the map,
//! the epochs and the fingerprint it is later checked against describe the same moment of that
//! node's view. A node that answers `CLUSTER SHARDS` with "unknown subcommand" is asked again with
//! `CLUSTER SLOTS`, and the dialect remembers it so the next fetch does not pay twice. A `CLUSTER
//! NODES` that cannot be read or joined does not lose the map: the map is kept without epochs, and
//! only the stale-map check is skipped for it. All of this goes through the node's ordinary
//! pipelined connection (the default lane), so a fetch costs no extra connection.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use super::dialect::Checked;
use super::Refresher;
use crate::cluster::change_check::{local_digest, Answer, Print, Probe};
use crate::cluster::nodes::{check_join, parse_cluster_nodes_reply, NodeStates};
use crate::cluster::parse::{parse_cluster_slots, SlotRange};
use crate::cluster::shards::parse_cluster_shards;
use crate::cluster::Topology;
use crate::protocol::{reply_frame_len, Frame, Limits};
use crate::upstream::Lane;

/// How long a check may go unanswered: a node answers one in well under a millisecond (the
/// digest of a 1,000-node cluster's view takes it about 3 ms), so this means a frozen,
/// overloaded or unreachable node, and the map is fetched from another instead.
const CHECK_TIMEOUT: Duration = Duration::from_millis(250);

/// The map, its epochs and the fingerprint, from a Redis 7 node.
const SHARDS_NODES_INFO: &[u8] = b"*2\r\n$7\r\nCLUSTER\r\n$6\r\nSHARDS\r\n\
*2\r\n$7\r\nCLUSTER\r\n$5\r\nNODES\r\n*2\r\n$7\r\nCLUSTER\r\n$4\r\nINFO\r\n";

/// The same from a node without `CLUSTER SHARDS` (before Redis 7).
const SLOTS_NODES_INFO: &[u8] = b"*2\r\n$7\r\nCLUSTER\r\n$5\r\nSLOTS\r\n\
*2\r\n$7\r\nCLUSTER\r\n$5\r\nNODES\r\n*2\r\n$7\r\nCLUSTER\r\n$4\r\nINFO\r\n";

/// Why a fetch gave no map: the reason (logged), and whether the node was only slow.
#[derive(Debug)]
pub(super) struct FetchError {
    /// Why, as a sentence for the log and the status page's last refresh error.
    pub(super) reason: String,
    /// No reply within `refresh_timeout` (a slow or frozen node), as opposed to a node that
    /// failed at once: refused the connection, closed it, or answered something unreadable.
    pub(super) late: bool,
}

impl From<String> for FetchError {
    fn from(reason: String) -> FetchError {
        FetchError {
            reason,
            late: false,
        }
    }
}

impl From<&str> for FetchError {
    fn from(reason: &str) -> FetchError {
        FetchError::from(reason.to_string())
    }
}

impl Refresher {
    /// The map of the node at `addr`, with the fingerprint of its view.
    ///
    /// Fails with `late` set when the node did not answer within `cluster.refresh_timeout`, so the
    /// caller can tell a slow node (ask another soon) from a broken one. Frees the parse's garbage
    /// before returning, on this thread, because a big map's replies are megabytes of small blocks.
    pub(super) async fn fetch(&self, addr: &str) -> Result<Topology, FetchError> {
        let mut shards = self.dialect.shards();
        let mut replies = self.fetch_replies(addr, shards).await?;
        if shards && is_unknown_subcommand(&replies[0]) {
            if self.dialect.shards_refused() {
                tracing::info!(node = %addr, "the node has no CLUSTER SHARDS (before Redis 7): reading CLUSTER SLOTS instead");
            }
            shards = false;
            replies = self.fetch_replies(addr, false).await?;
        }
        let map = self.read_map(replies, shards, addr);
        // The replies and what was parsed from them are freed by now, on this thread: a 1,000-node
        // map's are megabytes of small blocks, whose emptied pages the allocator would otherwise
        // keep in this thread's heap until it next allocates through its slow path. A fetch is
        // rare (a change, an event), so the collection costs nothing that shows.
        crate::memory::collect_now();
        map
    }

    /// The map in the three replies of a fetch from `addr`.
    ///
    /// Also records the answering node's own migration markers from `CLUSTER NODES`, before and
    /// whatever the map's fate: they are true of that node even if its map is rejected.
    fn read_map(
        &self,
        replies: [Frame; 3],
        shards: bool,
        addr: &str,
    ) -> Result<Topology, FetchError> {
        let [map, nodes, info] = replies;
        // The answering node's own migration markers, whatever becomes of its map.
        self.state.migrating().note_cluster_nodes(&nodes);
        let ranges = if shards {
            parse_cluster_shards(&map, addr, self.upstreams.tls())?
        } else {
            parse_cluster_slots(&map, addr)?
        };
        let states = joined_states(&ranges, &nodes)
            .inspect_err(|reason| {
                tracing::warn!(node = %addr, %reason, "cannot read CLUSTER NODES: this map's config epochs are unknown, so the stale-map check is skipped for it")
            })
            .ok();
        let print = Print {
            digest: nodes.as_bytes().map(|text| local_digest(text)),
            info: match Probe::Info.answer(&info) {
                Answer::Print(print) => Some(print),
                _ => None,
            },
        };
        let map = Topology::build(&ranges, states.as_ref(), &self.upstreams, Arc::from(addr));
        Ok(map.with_print(print))
    }

    /// The three replies of one pipelined fetch.
    ///
    /// Fails if the node's reply is not exactly three well-formed frames.
    async fn fetch_replies(&self, addr: &str, shards: bool) -> Result<[Frame; 3], FetchError> {
        let payload = if shards {
            SHARDS_NODES_INFO
        } else {
            SLOTS_NODES_INFO
        };
        let timeout = self.state.config().refresh_timeout;
        let reply = self
            .ask(addr, Bytes::from_static(payload), 3, timeout)
            .await?;
        let mut frames = split_replies(reply, 3, &self.limits)?.into_iter();
        let mut next = || frames.next().ok_or("a reply is missing");
        Ok([next()?, next()?, next()?])
    }

    /// Asks the node the current map came from whether its view is still the one in `map`,
    /// with `probe` (see [`Dialect::probe`](super::dialect::Dialect::probe)).
    ///
    /// Called by a refresh round when a check is due and a map is adopted: a `Changed` or `Failed` answer leads to
    /// a full fetch, `Unchanged` spares it. A digest script the node has not cached (`NOSCRIPT`) is
    /// retried once with the whole script; if the node refuses the script outright, the dialect
    /// falls back to `CLUSTER INFO` and says once, in the log, what that check cannot see.
    pub(super) async fn check(&self, map: &Topology, probe: Probe) -> Checked {
        let Some(expected) = probe.of(map.print()) else {
            return Checked::Failed(format!("no {} fingerprint with the map", probe.name()));
        };
        let started = Instant::now();
        let mut answer = self.probe(map.source(), probe, false).await;
        if matches!(answer, Ok(Answer::NoScript)) {
            answer = self.probe(map.source(), probe, true).await;
        }
        let elapsed_us = started.elapsed().as_micros() as u64;
        tracing::debug!(node = map.source(), probe = probe.name(), elapsed_us, answer = ?answer, "topology check done");
        match answer {
            Ok(Answer::Print(print)) if print == expected => Checked::Unchanged,
            Ok(Answer::Print(_)) => Checked::Changed,
            Ok(Answer::NoScript) => Checked::Failed("NOSCRIPT right after EVAL".to_string()),
            Ok(Answer::Refused(reason)) => {
                if probe == Probe::Digest && self.dialect.digest_refused() {
                    tracing::warn!(node = map.source(), %reason, "the node refused the digest script (EVALSHA/EVAL); checking with CLUSTER INFO instead, which misses a slot moved to the newest primary, a replica moved to another primary and a changed address until a MOVED reply or a failure shows them; allow EVAL and EVALSHA to the user, or set cluster.change_check: info to say this is what you want");
                }
                Checked::Failed(format!("{} refused: {reason}", probe.name()))
            }
            Err(reason) => Checked::Failed(reason),
        }
    }

    /// One check command, within [`CHECK_TIMEOUT`]: a node that takes longer is passed over
    /// (the map is fetched from another), as a fetch asks the next node after that long.
    ///
    /// `whole`: send the script itself (`EVAL`) rather than its hash (`EVALSHA`), after a
    /// `NOSCRIPT`.
    async fn probe(&self, addr: &str, probe: Probe, whole: bool) -> Result<Answer, String> {
        let timeout = CHECK_TIMEOUT.min(self.state.config().refresh_timeout);
        let reply =
            (self.ask(addr, probe.request(whole), 1, timeout).await).map_err(|e| e.reason)?;
        let frame = Frame::from_bytes(reply, &self.limits).map_err(|e| e.to_string())?;
        Ok(probe.answer(&frame))
    }

    /// `frames` pipelined commands to `addr`, within `timeout`.
    ///
    /// A failed send or a reply error from the connection is a `FetchError` with `late` false; only
    /// the timeout sets it.
    async fn ask(
        &self,
        addr: &str,
        payload: Bytes,
        frames: u32,
        timeout: Duration,
    ) -> Result<Bytes, FetchError> {
        let node = self.upstreams.node(addr);
        let call = node.send_frames(payload, false, Lane::default(), frames);
        match tokio::time::timeout(timeout, call).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(e)) => Err(FetchError::from(e.to_string())),
            Err(_) => Err(FetchError {
                reason: format!("no reply within {timeout:?}"),
                late: true,
            }),
        }
    }
}

/// `CLUSTER SHARDS` on a server that does not have it.
///
/// Matches both wordings Redis has used for a subcommand it does not know.
fn is_unknown_subcommand(reply: &Frame) -> bool {
    match reply {
        Frame::Error(message) => {
            let message = String::from_utf8_lossy(message).to_ascii_lowercase();
            message.contains("unknown subcommand") || message.contains("unknown command")
        }
        _ => false,
    }
}

/// Cuts pipelined replies apart (one contiguous slice from the node connection).
///
/// `count` frames are expected, no more checked: the caller asked for exactly that many. An
/// incomplete frame is an error (the connection delivered the whole reply before this runs).
pub(super) fn split_replies(
    mut reply: Bytes,
    count: usize,
    limits: &Limits,
) -> Result<Vec<Frame>, String> {
    let mut frames = Vec::with_capacity(count);
    for i in 0..count {
        let len = reply_frame_len(&reply, limits)
            .map_err(|e| format!("reply {i}: {e}"))?
            .ok_or_else(|| format!("reply {i} of {count} is incomplete"))?;
        let frame = Frame::from_bytes(reply.split_to(len), limits)
            .map_err(|e| format!("reply {i}: {e}"))?;
        frames.push(frame);
    }
    Ok(frames)
}

/// `CLUSTER NODES` parsed and checked to cover every node of the map.
///
/// An error here means the map's epochs are unknown, not that the map is wrong.
fn joined_states(ranges: &[SlotRange], nodes: &Frame) -> Result<NodeStates, String> {
    let states = parse_cluster_nodes_reply(nodes)?;
    check_join(ranges, &states)?;
    Ok(states)
}
