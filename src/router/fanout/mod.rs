//! Keyless commands that concern the whole keyspace: sent to every primary (SCAN and RANDOMKEY:
//! one primary at a time) and the replies merged into one answer for the client. The [`Fanout`]
//! room, which also starts every plan of more than one request (`start`).
//!
//! Asking every node is `gather`; the merges are `merge` (DBSIZE, KEYS, FLUSH, SCRIPT,
//! FUNCTION), `pubsub_merge` (PUBSUB), `info` with `info_merge` (INFO) and `slowlog` (SLOWLOG);
//! SCAN walks the primaries with `scan_cursor`; allowed node administration goes to every node,
//! replicas too (`node_admin`).
//!
//! What holds for every fan-out: all parts are queued on the client's lane before the call returns,
//! so they keep their place among the client's other commands; a part that fails or times out (the
//! shared op timeout, one deadline for all parts) turns the whole reply into an error naming that
//! node, with a note when other primaries may already have applied a write (FLUSH, SCRIPT LOAD,
//! broadcasts). Nothing here retries: a fan-out is not idempotent in general, and the client sees
//! exactly what each node said.

mod gather;
mod info;
mod info_merge;
mod merge;
pub(super) mod node_admin;
mod pubsub_merge;
mod scan_cursor;
mod slowlog;
mod start;

pub(crate) use node_admin::validate as validate_node_admin;

use std::sync::Arc;

use bytes::Bytes;
use rand::seq::SliceRandom;
use tokio::time::Instant;

use self::gather::{await_reply, collect, failure, send_to_all, NodeReply};
use self::merge::{merge, scan_reply};
use self::scan_cursor::{fingerprint, ScanCursor, MAX_SHARDS};
use crate::commands::policy::FanOut;
use crate::protocol::{bulk_as_verbatim, Request};
use crate::router::replies::{bulk, display_name, encode_command, is_nil};
use crate::router::reply::{error_with_prefix, redcar_error};
use crate::router::{Call, Forwarder};
use crate::upstream::Lane;
use crate::upstream::Node;

/// The multi-request room: starts the plans that take more than one request (`Plan::Compound`)
/// and serves the fan-outs itself. Borrows the forwarder it sends through.
#[derive(Clone, Copy)]
pub(crate) struct Fanout<'r> {
    fwd: &'r Forwarder,
}

impl<'r> Fanout<'r> {
    /// Cheap (a borrow); made per command by the forwarder when a plan needs more than one request.
    pub(in crate::router) fn new(fwd: &'r Forwarder) -> Fanout<'r> {
        Fanout { fwd }
    }

    /// Starts a fan-out command. Every part is queued before this returns, like any command.
    ///
    /// The parts travel on the client's own lane, so they keep their order with the client's
    /// other commands; for a RESP3 client that means RESP3 parts, which the merges read too
    /// (verbatim text, `_`). The merged replies have the same types in both versions except
    /// INFO's, which a RESP3 client gets as verbatim text.
    pub(super) fn start_fan_out(self, kind: FanOut, request: &Request, lane: Lane) -> Call<'r> {
        if kind == FanOut::Info {
            let info = self.start_info(request, lane);
            return match lane.protocol().is_resp3() {
                true => Call::slow(async move { bulk_as_verbatim(info.await) }),
                false => info,
            };
        }
        let primaries = match self.primaries() {
            Ok(primaries) => primaries,
            Err(reply) => return Call::ready(reply),
        };
        match kind {
            FanOut::Scan => return self.start_scan(request, &primaries, lane),
            FanOut::RandomKey => return self.start_random_key(request, primaries, lane),
            FanOut::Slowlog => return self.start_slowlog(request, &primaries, lane),
            FanOut::ScriptLoad => {
                if let Some(body) = request.args().bytes(2) {
                    self.fwd.scripts.remember(&body);
                }
            }
            _ => {}
        }
        let words = if request.args().len() > 1 && is_container(kind) {
            2
        } else {
            1
        };
        let name = display_name(request.args(), words);
        let sent = send_to_all(primaries.iter(), request, lane);
        let op_timeout = self.fwd.core.op_timeout();
        Call::slow(async move { merge(kind, &name, &collect(sent, op_timeout).await) })
    }

    /// The primaries of the current map, sorted by address (the SCAN cursor's shard order).
    ///
    /// Deduplicated by address, so a node two shards name is asked once. Fails with a redcar
    /// error the client sees when no map has been adopted yet or it has no primary: a fan-out
    /// over no node would answer an empty merge that looks like a real, empty keyspace.
    pub(super) fn primaries(self) -> Result<Vec<Arc<Node>>, Bytes> {
        let topology = self.fwd.core.cluster.topology().ok_or_else(|| {
            redcar_error("no cluster topology known yet (are the seed nodes reachable?)")
        })?;
        let mut primaries: Vec<Arc<Node>> = topology
            .shards()
            .iter()
            .map(|s| s.primary.clone())
            .collect();
        primaries.sort_by(|a, b| a.addr().cmp(b.addr()));
        primaries.dedup_by(|a, b| a.addr() == b.addr());
        if primaries.is_empty() {
            return Err(redcar_error("no primary known yet"));
        }
        Ok(primaries)
    }

    /// SCAN: the cursor names the primary and its own cursor (see `scan_cursor`).
    ///
    /// A malformed cursor is the client's error (`ERR invalid cursor`, as Redis says). A cursor
    /// whose fingerprint does not match the current primaries is refused rather than guessed at:
    /// resuming on a different set of primaries could skip or repeat whole nodes. The node's reply
    /// is awaited within one op timeout.
    fn start_scan(self, request: &Request, primaries: &[Arc<Node>], lane: Lane) -> Call<'r> {
        let args = request.args();
        let Some(cursor) = args.get(1).and_then(parse_u64) else {
            return Call::ready(error_with_prefix("ERR ", "invalid cursor"));
        };
        if primaries.len() > MAX_SHARDS {
            return Call::ready(redcar_error(format_args!(
                "SCAN supports at most {MAX_SHARDS} primaries"
            )));
        }
        let check = fingerprint(primaries.iter().map(|n| n.addr().as_ref()));
        let at = ScanCursor::decode(cursor);
        if cursor != 0 && (at.check != check || at.shard >= primaries.len()) {
            return Call::ready(redcar_error(format_args!(
                "SCAN cursor {cursor} does not match the cluster's current primaries (they changed \
                 during the scan, or the cursor is not from redcar); start again from cursor 0"
            )));
        }
        let at = ScanCursor { check, ..at };
        let node = &primaries[at.shard];
        let node_cursor = at.node.to_string();
        let payload = encode_command(args.iter().enumerate().map(|(i, arg)| {
            if i == 1 {
                node_cursor.as_bytes()
            } else {
                arg
            }
        }));
        let reply = node.send(payload, false, lane);
        let (addr, shards) = (node.addr().clone(), primaries.len());
        let op_timeout = self.fwd.core.op_timeout();
        Call::slow(async move {
            let deadline = Instant::now() + op_timeout;
            let reply = await_reply(&addr, reply, deadline, op_timeout).await;
            scan_reply(at, shards, &NodeReply { addr, reply })
        })
    }

    /// RANDOMKEY: primaries in random order until one has a key.
    ///
    /// Keeps the first node's request in flight while shuffling, then asks the rest one at a time
    /// (not all at once: most keyspaces answer at the first node). A nil from every node is a nil
    /// for the client; an error is reported only if no node had a key, naming the first node that
    /// failed.
    fn start_random_key(
        self,
        request: &Request,
        mut order: Vec<Arc<Node>>,
        lane: Lane,
    ) -> Call<'r> {
        order.shuffle(&mut rand::rng());
        let payload = request.raw().clone();
        let first = order[0].send(payload.clone(), false, lane);
        let op_timeout = self.fwd.core.op_timeout();
        Call::slow(async move {
            let deadline = Instant::now() + op_timeout;
            let mut first = Some(first);
            let mut failed: Option<NodeReply> = None;
            for node in &order {
                let sent = first
                    .take()
                    .unwrap_or_else(|| node.send(payload.clone(), false, lane));
                let addr = node.addr().clone();
                let reply = await_reply(&addr, sent, deadline, op_timeout).await;
                match &reply {
                    Ok(bytes) if is_nil(bytes) => {}
                    Ok(bytes) if bulk(bytes).is_some() => return bytes.clone(),
                    _ => failed = failed.or(Some(NodeReply { addr, reply })),
                }
            }
            match failed {
                Some(failed) => failure("RANDOMKEY", &failed, ""),
                None => Bytes::from_static(b"$-1\r\n"),
            }
        })
    }
}

/// SCRIPT and FUNCTION subcommands are named with their subcommand in errors.
fn is_container(kind: FanOut) -> bool {
    matches!(
        kind,
        FanOut::ScriptLoad | FanOut::ScriptExists | FanOut::Broadcast | FanOut::PubSub
    )
}

/// A SCAN cursor as the client sent it: decimal digits only, no sign; anything else is refused.
fn parse_u64(text: &[u8]) -> Option<u64> {
    std::str::from_utf8(text).ok()?.parse().ok()
}
