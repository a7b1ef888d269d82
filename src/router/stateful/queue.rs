//! A client's MULTI … EXEC as its session keeps it: commands are checked and queued here, each
//! answered `+QUEUED` like Redis does, and EXEC hands the whole unit to the router at once
//! (`transaction.rs` sends it).

use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use super::transaction::transaction_payload;
use super::WatchedConn;
use crate::commands::policy::Tx;
use crate::commands::Local;
use crate::router::{error_with_prefix, redcar_error, Plan, RouteTarget};

const OK: &[u8] = b"+OK\r\n";
const QUEUED: &[u8] = b"+QUEUED\r\n";
const EXECABORT: &[u8] = b"-EXECABORT Transaction discarded because of previous errors.\r\n";

/// Transaction state of one client connection.
#[derive(Default)]
pub(crate) struct Transaction {
    /// Set between MULTI and EXEC / DISCARD.
    /// Boxed: most clients never open one, and this is part of every session's lasting state.
    open: Option<Box<QueuedTx>>,
    /// The client's WATCH, if any (a dedicated connection held by the router); made the first
    /// time a command needs it, so a client that never watches holds none.
    watch: Option<WatchedConn>,
}

const CROSSSLOT: &[u8] = b"-CROSSSLOT Keys in request don't hash to the same slot (redcar: all keys of a transaction must be in one slot; use a {hash tag})\r\n";

#[derive(Default)]
struct QueuedTx {
    commands: BytesMut,
    count: u32,
    /// The slot every queued keyed command must share.
    slot: Option<u16>,
    /// The backend of that slot: a prefix route's (`routes:`), or `None` for the catch-all.
    backend: Option<Arc<RouteTarget>>,
    /// A command was refused while queueing: EXEC will abort, as in Redis.
    dirty: bool,
}

/// What the session does with a command, given the transaction state.
pub(crate) enum TxStep {
    /// Serve it as usual.
    Serve(Plan),
    /// Answer now.
    Reply(Bytes),
    /// EXEC without WATCH: the whole unit on the client's shared connection.
    Exec {
        payload: Bytes,
        frames: u32,
        slot: Option<u16>,
        /// A prefix route's backend (`None`: the catch-all backend).
        backend: Option<Arc<RouteTarget>>,
    },
    /// EXEC after WATCH: the whole unit on the watch's dedicated connection.
    ExecWatched {
        payload: Bytes,
        frames: u32,
        slot: Option<u16>,
        backend: Option<Arc<RouteTarget>>,
    },
    /// WATCH keys of `slot` (in a prefix route's backend; `payload`: the request as forwarded).
    Watch {
        slot: u16,
        backend: Option<Arc<RouteTarget>>,
        payload: Option<Bytes>,
    },
    /// End the watch (UNWATCH, DISCARD, RESET), then answer `reply`.
    Unwatch { reply: &'static [u8] },
}

impl QueuedTx {
    /// Takes `slot` as the transaction's slot; the refusal if it already has another.
    fn claim(&mut self, slot: u16) -> Option<Bytes> {
        self.claim_on(None, slot)
    }

    /// [`claim`](Self::claim) in `backend` (`None`: the catch-all): one transaction runs on
    /// one node, so all its keys share one backend and one slot.
    fn claim_on(&mut self, backend: Option<Arc<RouteTarget>>, slot: u16) -> Option<Bytes> {
        let same_backend = match (&self.backend, &backend) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        match self.slot {
            Some(_) if !same_backend => Some(error_with_prefix(
                "CROSSSLOT ",
                "Keys in request don't hash to the same slot (redcar: all keys of a \
                 transaction must belong to one backend of routes:)",
            )),
            // One node without cluster mode runs keys of any slots together.
            Some(first) if first != slot && !backend.as_ref().is_some_and(|b| b.single_node) => {
                Some(Bytes::from_static(CROSSSLOT))
            }
            _ => {
                self.slot.get_or_insert(slot);
                self.backend = backend;
                None
            }
        }
    }

    /// Inside MULTI, a command that does not act on the transaction itself: queued (answered
    /// `+QUEUED`), or refused, which makes EXEC abort as in Redis.
    fn queue(&mut self, plan: Plan, raw: &Bytes, max_bytes: usize) -> TxStep {
        // A command on a route's keys queues its forwarded form (prefix removed) and claims its
        // backend; not under WATCH, whose connection is the catch-all backend's.
        let routed = match &plan {
            Plan::Compound(compound) => compound.routed_for_tx(),
            _ => None,
        };
        if let Some(reply) = self.refusal(plan, routed.as_ref()) {
            self.dirty = true;
            return TxStep::Reply(reply);
        }
        if self.commands.len() + raw.len() > max_bytes {
            self.dirty = true;
            return TxStep::Reply(redcar_error(
                "transaction too large (client.max_request_bytes); it will be discarded",
            ));
        }
        let raw = routed.as_ref().and_then(|r| r.2.as_ref()).unwrap_or(raw);
        self.commands.extend_from_slice(raw);
        self.count += 1;
        TxStep::Reply(Bytes::from_static(QUEUED))
    }

    /// Why `plan` cannot be queued, if it cannot; else it has claimed its slot (and backend).
    /// `routed` is a routed command's backend, slot and forwarded request.
    fn refusal(
        &mut self,
        plan: Plan,
        routed: Option<&(Arc<RouteTarget>, Option<u16>, Option<Bytes>)>,
    ) -> Option<Bytes> {
        match plan {
            Plan::Slot { slot, .. } | Plan::Blocking { slot, .. } => self.claim(slot),
            // Scripts: queued like any command of their keys' slot (a NOSCRIPT inside EXEC is
            // the node's answer; it cannot be healed there).
            Plan::Compound(compound) if compound.script_slot().is_some() => {
                match compound.script_slot().flatten() {
                    Some(slot) => self.claim(slot),
                    None => None,
                }
            }
            Plan::Compound(compound) if compound.is_split() => Some(Bytes::from_static(CROSSSLOT)),
            // After WATCH, EXEC checks the watched backend and slot.
            Plan::Compound(compound) if compound.is_routed() => match routed {
                Some((backend, Some(slot), _)) => self.claim_on(Some(backend.clone()), *slot),
                _ => Some(redcar_error(
                    "this command on keys of a prefix route (routes:) cannot be queued in a \
                     transaction through redcar",
                )),
            },
            // Keyless commands with the same answer on any node run in the transaction's node;
            // WAIT there answers at once, as in Redis.
            Plan::AnyNode | Plan::Wait { .. } | Plan::Local(Local::Ping | Local::Echo) => None,
            Plan::Reply(reply) => Some(reply),
            Plan::Tx(Tx::Unwatch, _) => None,
            _ => Some(redcar_error(
                "this command cannot be queued in a transaction through redcar \
                 (it spans several slots or needs connection state)",
            )),
        }
    }
}

impl Transaction {
    /// True between MULTI and EXEC / DISCARD.
    pub(crate) fn is_open(&self) -> bool {
        self.open.is_some()
    }

    /// The slot a WATCH holds a connection to, if any.
    pub(crate) fn watched_slot(&self) -> Option<u16> {
        self.watch.as_ref().and_then(WatchedConn::slot)
    }

    /// The client's WATCH handle for the router (shared with the session's copy).
    pub(crate) fn watch_handle(&mut self) -> WatchedConn {
        self.watch.get_or_insert_with(WatchedConn::default).clone()
    }

    /// True when `plan` must run with nothing else in flight for this client: it uses (or
    /// takes) a dedicated connection, and commands sent before it on other connections must
    /// have run first. Asked before [`step`](Self::step), which it does not change. Inlined:
    /// every command asks, and a one-slot command (most of them) never runs alone.
    #[inline]
    pub(crate) fn is_exclusive(&self, plan: &Plan) -> bool {
        match plan {
            Plan::Slot { .. } => false,
            plan => self.is_exclusive_other(plan),
        }
    }

    /// [`is_exclusive`](Self::is_exclusive) for every plan but a one-slot command's.
    fn is_exclusive_other(&self, plan: &Plan) -> bool {
        // Plain commands decide on the plan alone: the watch is looked at only when it matters.
        match plan {
            Plan::Tx(Tx::Exec | Tx::Discard, _) => self.is_open() && self.watching(),
            Plan::Local(Local::Reset) => self.watching(),
            _ if self.is_open() => false,
            Plan::Blocking { .. } | Plan::Wait { .. } | Plan::Sub(_) | Plan::Tx(Tx::Watch, _) => {
                true
            }
            // Turning tracking on or off moves the client to other node connections: what it
            // sent before must have run first.
            Plan::Local(Local::ClientTracking) => true,
            Plan::Compound(compound) => compound.is_blocking() || compound.routed_watch().is_some(),
            Plan::Tx(Tx::Unwatch, _) => self.watching(),
            _ => false,
        }
    }

    fn watching(&self) -> bool {
        self.watched_slot().is_some()
    }

    /// Applies the transaction rules to one planned command. `raw` is its encoding, queued as
    /// is; `max_bytes` bounds what one transaction may queue.
    pub(crate) fn step(&mut self, plan: Plan, raw: &Bytes, max_bytes: usize) -> TxStep {
        let watching = match plan {
            Plan::Tx(..) | Plan::Local(Local::Reset) => self.watching(),
            _ => false,
        };
        let Some(queued) = self.open.as_mut() else {
            return self.outside_multi(plan, watching);
        };
        match plan {
            Plan::Tx(Tx::Multi, _) => {
                TxStep::Reply(error_with_prefix("ERR ", "MULTI calls can not be nested"))
            }
            Plan::Compound(ref compound) if compound.routed_watch().is_some() => TxStep::Reply(
                error_with_prefix("ERR ", "WATCH inside MULTI is not allowed"),
            ),
            Plan::Tx(Tx::Watch, _) => TxStep::Reply(error_with_prefix(
                "ERR ",
                "WATCH inside MULTI is not allowed",
            )),
            Plan::Tx(Tx::Exec, _) => self.exec(watching),
            Plan::Tx(Tx::Discard, _) => {
                self.open = None;
                match watching {
                    true => TxStep::Unwatch { reply: OK },
                    false => TxStep::Reply(Bytes::from_static(OK)),
                }
            }
            Plan::Local(Local::Reset) => {
                self.open = None;
                match watching {
                    true => TxStep::Unwatch {
                        reply: b"+RESET\r\n",
                    },
                    false => TxStep::Serve(Plan::Local(Local::Reset)),
                }
            }
            Plan::Local(Local::Quit) => TxStep::Serve(plan),
            plan => queued.queue(plan, raw, max_bytes),
        }
    }

    /// [`step`](Self::step) with no MULTI open: MULTI opens one, WATCH and UNWATCH act on the
    /// watch, a stray EXEC or DISCARD is an error, and everything else is served as usual.
    fn outside_multi(&mut self, plan: Plan, watching: bool) -> TxStep {
        match plan {
            Plan::Tx(Tx::Multi, _) => {
                self.open = Some(Box::default());
                TxStep::Reply(Bytes::from_static(OK))
            }
            Plan::Tx(Tx::Exec, _) => TxStep::Reply(error_with_prefix("ERR ", "EXEC without MULTI")),
            Plan::Tx(Tx::Discard, _) => {
                TxStep::Reply(error_with_prefix("ERR ", "DISCARD without MULTI"))
            }
            Plan::Tx(Tx::Watch, Some(slot)) => TxStep::Watch {
                slot,
                backend: None,
                payload: None,
            },
            Plan::Compound(compound) if compound.routed_watch().is_some() => {
                match compound.routed_watch() {
                    Some((backend, slot, payload)) => TxStep::Watch {
                        slot,
                        backend: Some(backend),
                        payload,
                    },
                    None => TxStep::Serve(Plan::Compound(compound)),
                }
            }
            Plan::Tx(Tx::Unwatch, _) if watching => TxStep::Unwatch { reply: OK },
            Plan::Tx(Tx::Unwatch, _) => TxStep::Reply(Bytes::from_static(OK)),
            Plan::Local(Local::Reset) if watching => TxStep::Unwatch {
                reply: b"+RESET\r\n",
            },
            other => TxStep::Serve(other),
        }
    }

    /// Forgets an open transaction (RESET, or the client leaving subscribe mode never had one).
    pub(crate) fn reset(&mut self) {
        self.open = None;
    }

    fn exec(&mut self, watching: bool) -> TxStep {
        let Some(queued) = self.open.take() else {
            return TxStep::Reply(error_with_prefix("ERR ", "EXEC without MULTI"));
        };
        if queued.dirty {
            // EXEC ends the watch even when it aborts.
            return match watching {
                true => TxStep::Unwatch { reply: EXECABORT },
                false => TxStep::Reply(Bytes::from_static(EXECABORT)),
            };
        }
        let (payload, frames) = transaction_payload(&queued.commands, queued.count);
        match watching {
            true => TxStep::ExecWatched {
                payload,
                frames,
                slot: queued.slot,
                backend: queued.backend,
            },
            false => TxStep::Exec {
                payload,
                frames,
                slot: queued.slot,
                backend: queued.backend,
            },
        }
    }
}

#[cfg(test)]
#[path = "queue_tests.rs"]
mod tests;
