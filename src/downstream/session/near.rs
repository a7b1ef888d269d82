//! The near cache on a session's path: reads it may answer are answered from memory or filled
//! on a miss, writes hold their keys while they are sent, and a plain `SET` of a key tracked in
//! BCAST mode stores its value with its reply (see `near_cache`).

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use smallvec::SmallVec;
use tokio::time::Instant;

use super::super::client_state::ClientState;
use crate::commands::spec::flags;
use crate::near_cache::{cacheable, Admitted, Filling, NearCache, Through, Writing};
use crate::protocol::{encode_command, write_array_len, Args, Protocol, Request};
use crate::router::{Call, Plan, Router};

/// What a session passes for one command when the near cache is on.
pub(in crate::downstream) struct NearCacheRequest<'a> {
    pub(super) cache: &'a Arc<NearCache>,
    /// The command's table name.
    pub(super) command: &'static str,
    /// The positions of its keys in its arguments (as planning found them).
    pub(super) keys: &'a [usize],
    /// Nothing of the client's is in flight: its commands may change connection now.
    pub(super) idle: bool,
    /// The write-through `note_writes` started, which `serve` sends.
    through: Option<Through>,
}

impl<'a> NearCacheRequest<'a> {
    pub(super) fn new(
        cache: &'a Arc<NearCache>,
        command: &'static str,
        keys: &'a [usize],
        idle: bool,
    ) -> NearCacheRequest<'a> {
        NearCacheRequest {
            cache,
            command,
            keys,
            idle,
            through: None,
        }
    }

    /// Before a command is served or queued in a transaction (MULTI open): if it may write, its
    /// admitted keys are dropped from the cache and kept out of it until the returned guard
    /// goes (with the command's reply), or for `max_silence` when queued in MULTI.
    pub(super) fn note_writes(
        &mut self,
        plan: &Plan,
        request: &Request,
        router: &Router,
        state: &ClientState,
    ) -> Option<Box<Writing>> {
        let write = match plan {
            Plan::Slot { write, .. } | Plan::Blocking { write, .. } => *write,
            // Splits, scripts and routed commands: whatever is not read-only may write.
            Plan::Compound(_) => router
                .planner()
                .lookup(request.args())
                .is_some_and(|spec| !spec.has_flag(flags::READONLY)),
            _ => false,
        };
        if !write {
            return None;
        }
        let args = request.args();
        let keys: SmallVec<[Bytes; 2]> = self
            .keys
            .iter()
            .filter_map(|&i| args.bytes(i))
            .filter(|key| self.cache.admits(key, false))
            .collect();
        if keys.is_empty() {
            return None;
        }
        if state.tx.is_open() {
            keys.iter()
                .for_each(|key| self.cache.written_in_transaction(key));
            return None;
        }
        // A write-through moves the client to the near lanes (see `serve`): only if it may.
        let tracking = state.tracking.as_ref().is_some_and(|t| t.is_on());
        let may_move = self.idle || state.near_lanes == Some(Admitted::Bcast);
        if self.command == "set" && !tracking && may_move {
            self.through = self.cache.through(args, state.protocol);
        }
        Some(Box::new(
            self.cache.begin_write(keys, self.through.as_ref()),
        ))
    }

    /// The call for a read the cache answers or fills; `None`: serve it as usual.
    ///
    /// A fill is read on the node's tracked lane, another connection than the client's: so the
    /// client's commands all move to the tracked lanes with its first fill (`near_lanes`), and
    /// only when nothing of the client's is in flight, the only time they may move back too.
    /// Otherwise a pipelined `SET k` behind a filling `GET k`, or a `GET k` behind a `SET k`
    /// still on the other connection, could reach the node first.
    pub(super) fn serve<'r>(
        &mut self,
        router: &'r Router,
        plan: &Plan,
        request: &Request,
        state: &mut ClientState,
        now: Instant,
    ) -> Option<Call<'r>> {
        if self.idle {
            state.near_lanes = None;
        }
        if let Some(through) = self.through.take() {
            return self.write_through(through, router, plan, request, state, now);
        }
        // A tracking client's reads must reach the nodes, which remember them for it.
        if state.tracking.as_ref().is_some_and(|t| t.is_on()) {
            return None;
        }
        let args = request.args();
        if self.command == "mget" {
            return self.mget(args, state.protocol).map(Call::ready);
        }
        let Plan::Slot { slot, write: false } = *plan else {
            return None;
        };
        if !cacheable(self.command, args) {
            return None;
        }
        let admitted = self.cache.admission(&args[1], true)?;
        let protocol = state.protocol;
        // Kept as `Bytes` by the cache's entries (for most reads, none: no allocation).
        let rest: SmallVec<[Bytes; 2]> = (2..args.len()).filter_map(|i| args.bytes(i)).collect();
        let hit = self
            .cache
            .get(self.command, protocol, &args[1], &rest, self.idle);
        self.cache.count(hit.is_some());
        if let Some(reply) = hit {
            return Some(Call::ready(reply));
        }
        // Both a fill and a wait move the client to the key's lanes (see above): its next
        // commands must reach the node after the read it counts on.
        if !self.idle && state.near_lanes != Some(admitted) {
            return None;
        }
        let filling = self
            .cache
            .begin_fill(self.command, protocol, &args.bytes(1)?, &rest)?;
        state.near_lanes = Some(admitted);
        let (tracked, forwarder) = (state.lane(), router.forwarder());
        let fill = match filling {
            Filling::Fill(fill) => fill,
            Filling::Join(joined) => {
                let payload = request.raw().clone();
                return Some(Call::slow(async move {
                    match joined.reply().await {
                        Some(reply) => reply,
                        // Its client left: go alone.
                        None => {
                            let call =
                                forwarder.forward(None, payload, Some(slot), false, tracked, now);
                            call.settle_first().await.0
                        }
                    }
                }));
            }
        };
        // On the tracked lane (to the node the read policy picks), so that node invalidates what
        // it read; the key's TTL right after.
        let read = forwarder.forward(None, request.raw().clone(), Some(slot), false, tracked, now);
        let ttl = encode_command([&b"PTTL"[..], &args[1]].into_iter());
        let ttl = forwarder.forward(None, ttl, Some(slot), false, tracked, now);
        let command = self.command;
        let args = args.to_bytes();
        Some(Call::slow(async move {
            let (reply, node) = read.settle_first().await;
            let (ttl, _) = ttl.settle_first().await;
            fill.finish((command, protocol, &args), &reply, &ttl, node);
            reply
        }))
    }

    /// The `SET` of a write-through, on the client's near lane (it moves there: it was idle or
    /// there already, see `note_writes`); its value is stored with its `+OK`.
    fn write_through<'r>(
        &self,
        through: Through,
        router: &'r Router,
        plan: &Plan,
        request: &Request,
        state: &mut ClientState,
        now: Instant,
    ) -> Option<Call<'r>> {
        let Plan::Slot { slot, write: true } = *plan else {
            return None;
        };
        state.near_lanes = Some(Admitted::Bcast);
        state.written.note(slot);
        let (mut through, lane, forwarder) = (through, state.lane(), router.forwarder());
        // Queued now, in order with the key's other write-throughs (see `near_cache::through`).
        let call = through.send(
            || forwarder.forward(None, request.raw().clone(), Some(slot), true, lane, now),
            Call::node,
        );
        Some(Call::slow(async move {
            let (reply, node) = call.settle_first().await;
            through.finish(&reply, node);
            reply
        }))
    }

    /// MGET answered from memory when every key is cached (as GET); otherwise not at all.
    fn mget(&self, args: Args<'_>, protocol: Protocol) -> Option<Bytes> {
        let mut replies: SmallVec<[Bytes; 16]> = SmallVec::new();
        for key in args.skip(1) {
            let reply = self
                .cache
                .admits(key, true)
                .then(|| self.cache.get("get", protocol, key, &[], self.idle))
                .flatten();
            match reply {
                Some(reply) => replies.push(reply),
                None => {
                    self.cache.count(false);
                    return None;
                }
            }
        }
        if replies.is_empty() {
            return None;
        }
        self.cache.count(true);
        let len = replies.iter().map(Bytes::len).sum::<usize>() + 16;
        let mut out = BytesMut::with_capacity(len);
        write_array_len(&mut out, replies.len());
        for reply in &replies {
            out.extend_from_slice(reply);
        }
        Some(out.freeze())
    }
}
