//! Subscribe mode's shard channels: each on a dedicated connection to its slot's primary, the
//! node's redirects followed (and other errors passed on), and channels a moved slot dropped
//! subscribed again at the new owner.
//!
//! Why a connection per node rather than one for all: a shard channel lives on its slot's primary
//! only (Redis 7 does not broadcast shard messages across the cluster), so a client subscribed to
//! channels in several slots needs a subscription on each owner. What holds: every shard channel is
//! recorded with the node that holds its subscription, so SUNSUBSCRIBE goes to exactly that node; a
//! channel whose node lost it (slot moved, connection lost) becomes an orphan, reported to the
//! client as still subscribed, and is subscribed again at the new owner as soon as one is known.
//! Redirects of an SSUBSCRIBE are followed at most five times per command, asking for a fresh map
//! each time.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use super::conn::SubConn;
use super::frames::unsubscribed;
use super::waiting::Orphan;
use super::{Control, SubscribeMode};
use crate::cluster::key_slot;
use crate::commands::policy::SubKind;
use crate::protocol::encode_command;
use crate::router::{classify, redcar_error, Verdict};

impl SubscribeMode<'_> {
    /// SSUBSCRIBE: every channel must hash to one slot, as in Redis Cluster.
    ///
    /// Returns how many confirmations the node owes (one per channel), or `None` when the command
    /// was answered here (an error, written to `out`).
    pub(super) async fn shard_subscribe(
        &mut self,
        raw: &Bytes,
        names: &[Bytes],
        out: &mut BytesMut,
    ) -> Option<usize> {
        let mut slots = names.iter().map(|n| key_slot(n));
        let slot = slots.next()?;
        if slots.any(|other| other != slot) {
            out.extend_from_slice(
                b"-CROSSSLOT Keys in request don't hash to the same slot (redcar: use a {hash tag} in shard channel names)\r\n",
            );
            return None;
        }
        let Some(addr) = self.router.stateful().primary_for(Some(slot), 0) else {
            out.extend_from_slice(&redcar_error(format_args!("no node owns slot {slot}")));
            return None;
        };
        match self.shard_conn(&addr).await {
            Ok(conn) => conn.send(raw.clone()).then_some(names.len()),
            Err(reply) => {
                out.extend_from_slice(&reply);
                None
            }
        }
    }

    /// SUNSUBSCRIBE: each named channel to the node holding it; names not subscribed are
    /// answered here. Returns the confirmations owed by nodes.
    pub(super) fn shard_unsubscribe(&mut self, names: &[Bytes], out: &mut BytesMut) -> usize {
        let mut by_node: HashMap<Arc<str>, Vec<Bytes>> = HashMap::new();
        if names.is_empty() {
            for (name, addr) in &self.shards {
                by_node.entry(addr.clone()).or_default().push(name.clone());
            }
            if by_node.is_empty() && self.orphans.is_empty() {
                unsubscribed(out, b"sunsubscribe", &[], 0, self.state.protocol);
            }
        }
        for name in names {
            match self.shards.get(name) {
                Some(addr) => by_node.entry(addr.clone()).or_default().push(name.clone()),
                None => {
                    // Unsubscribing from an orphan needs no node: it is subscribed nowhere.
                    self.orphans.remove(name);
                    unsubscribed(
                        out,
                        b"sunsubscribe",
                        std::slice::from_ref(name),
                        self.shard_count(),
                        self.state.protocol,
                    );
                }
            }
        }
        if names.is_empty() {
            for name in std::mem::take(&mut self.orphans).into_keys() {
                unsubscribed(
                    out,
                    b"sunsubscribe",
                    &[name],
                    self.shard_count(),
                    self.state.protocol,
                );
            }
        }
        // One command per channel: a node refuses channels of several slots in one SUNSUBSCRIBE.
        let mut owed = 0;
        for (addr, names) in by_node {
            let Some(conn) = self.shard_conns.get(&addr) else {
                continue;
            };
            for name in names {
                if conn.send(encode_command([&b"SUNSUBSCRIBE"[..], &name].into_iter())) {
                    owed += 1;
                }
            }
        }
        owed
    }

    /// The client's shard channels, orphans included: the count Redis reports in (un)subscribe
    /// replies.
    pub(super) fn shard_count(&self) -> usize {
        self.shards.len() + self.orphans.len()
    }

    /// The subscription connection to `addr`, borrowed from the dedicated pool on first use; fails
    /// with the pool's error as the client's reply.
    pub(super) async fn shard_conn(&mut self, addr: &Arc<str>) -> Result<&SubConn, Bytes> {
        if !self.shard_conns.contains_key(addr) {
            let conn = self
                .router
                .stateful()
                .lend(addr, self.state.protocol)
                .await?;
            self.shard_conns
                .insert(addr.clone(), SubConn::start(conn, self.pushed.clone()));
        }
        self.shard_conns
            .get(addr)
            .ok_or_else(|| redcar_error("no subscription connection"))
    }

    /// Sends a redirected SSUBSCRIBE to the node named by the redirect.
    ///
    /// If the connection cannot be had, the client gets the error and the command owes nothing
    /// more.
    pub(super) async fn follow_redirect(&mut self, out: &mut BytesMut) {
        let Some((target, raw)) = self.redirect.take() else {
            return;
        };
        let sent = match self.shard_conn(&target).await {
            Ok(conn) => conn.send(raw),
            Err(reply) => {
                out.extend_from_slice(&reply);
                false
            }
        };
        if !sent {
            self.awaiting = 0;
        }
    }

    /// True when the client's current command asked to leave shard channel `name`.
    pub(super) fn asked_to_leave(&self, name: &Bytes) -> bool {
        self.current.as_ref().is_some_and(|c| {
            c.sub.kind == SubKind::Shard
                && !c.sub.subscribe
                && (c.names.is_empty() || c.names.contains(name))
        }) && self.awaiting > 0
    }

    /// Subscribes orphaned shard channels again: a channel whose slot moved once the map names
    /// a new owner, one whose connection was lost at the slot's primary as soon as it answers
    /// (the same node back, or the replica promoted in its place). A node that cannot be
    /// reached is tried once per round.
    pub(super) async fn adopt_orphans(&mut self) {
        let orphans: Vec<(Bytes, Orphan)> = self.orphans.drain().collect();
        let mut unreachable: Vec<Arc<str>> = Vec::new();
        for (name, orphan) in orphans {
            let owner = self.router.stateful().primary_for(Some(key_slot(&name)), 0);
            let owner = owner.filter(|owner| orphan.lost || *owner != orphan.from);
            let Some(owner) = owner.filter(|owner| !unreachable.contains(owner)) else {
                self.orphans.insert(name, orphan);
                continue;
            };
            let sent = match self.shard_conn(&owner).await {
                Ok(conn) => conn.send(encode_command([&b"SSUBSCRIBE"[..], &name].into_iter())),
                Err(_) => false,
            };
            if sent {
                self.resubscribing.insert(name.clone(), orphan.since);
                self.shards.insert(name, owner);
            } else {
                unreachable.push(owner);
                self.orphans.insert(name, orphan);
            }
        }
    }

    /// Errors and other replies. A redirected SSUBSCRIBE is sent where the node says.
    pub(super) fn other(&mut self, frame: Bytes, addr: &Arc<str>, out: &mut BytesMut) -> Control {
        let redirect = match classify(&frame) {
            Verdict::Moved(addr) | Verdict::Ask(addr) => Some(addr.to_string()),
            _ => None,
        };
        let shard_subscribe = self
            .current
            .as_ref()
            .filter(|c| c.sub.kind == SubKind::Shard && c.sub.subscribe);
        if let (Some(target), Some(current)) = (redirect, shard_subscribe) {
            if self.redirects < 5 && target != **addr {
                self.redirects += 1;
                self.router.stateful().request_refresh();
                self.redirect = Some((Arc::from(target.as_str()), current.raw.clone()));
                return Control::Go;
            }
        }
        out.extend_from_slice(&frame);
        if frame.starts_with(b"-") {
            // An error answers the whole command.
            self.awaiting = 0;
        } else {
            self.owe_one();
        }
        Control::Go
    }
}
