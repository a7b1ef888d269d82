//! A subscription connection lost (its node was killed, restarted, or cut off): the client keeps
//! its connection and its subscriptions. Channels and patterns hear the whole cluster from any
//! node, so they are subscribed again at once on another primary; shard channels on their slot's
//! primary as soon as it answers (the same node back, or the replica the cluster promoted).
//! What was published in between is not delivered, as after any pub/sub reconnect; the gap is
//! measured (`redcar_pubsub_resubscribe_gap_seconds`). What the next node delivers again of the
//! lost one's last messages is dropped (`echoes.rs`).
//!
//! A command whose confirmations the lost connection still owed is answered by redcar: the
//! subscriptions it asked for are made on the new connection with the others.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::time::Instant;

use super::conn::SubConn;
use super::frames::{unsubscribe_word, unsubscribed};
use super::waiting::{Lost, Orphan};
use super::{Control, SubscribeMode};
use crate::commands::policy::SubKind;
use crate::protocol::encode_command;

/// How soon a failed attempt to subscribe again is retried.
const RETRY: Duration = Duration::from_millis(100);

impl SubscribeMode<'_> {
    /// The connection to `addr` ended (`why`): the client keeps its subscriptions, which are
    /// made again elsewhere (see the module's doc).
    pub(super) fn lost(&mut self, addr: &Arc<str>, why: &str, out: &mut BytesMut) -> Control {
        let now = Instant::now();
        tracing::info!(node = %addr, reason = why, "subscription connection lost; subscribing again elsewhere");
        if self.global.as_ref().is_some_and(|(node, _)| node == addr) {
            self.global = None;
            self.global_swallow = 0;
            self.watch_for_echoes(now);
            self.answer_owed_global(out);
            if !self.channels.is_empty() || !self.patterns.is_empty() {
                let since = self.lost_global.as_ref().map_or(now, |lost| lost.since);
                self.lost_global = Some(Lost {
                    since,
                    node: addr.clone(),
                    next_try: now,
                });
            }
        }
        if self.shard_conns.remove(addr).is_some() {
            self.answer_owed_shard(addr, out);
            let held: Vec<Bytes> = (self.shards.iter())
                .filter(|(_, node)| *node == addr)
                .map(|(name, _)| name.clone())
                .collect();
            for name in held {
                self.shards.remove(&name);
                let orphan = Orphan {
                    from: addr.clone(),
                    lost: true,
                    since: now,
                };
                self.orphans.insert(name, orphan);
            }
        }
        Control::Go
    }

    /// True when the channels and patterns wait to be subscribed again and it is time to try.
    pub(super) fn global_due(&self) -> bool {
        self.lost_global
            .as_ref()
            .is_some_and(|lost| lost.next_try <= Instant::now())
    }

    /// True while the channels and patterns wait to be subscribed again.
    pub(super) fn global_lost(&self) -> bool {
        self.lost_global.is_some()
    }

    /// Subscribes the client's channels and patterns again on a primary other than the one lost
    /// (the confirmations are redcar's, not shown to the client); tried again after [`RETRY`]
    /// when no connection can be had.
    pub(super) async fn resubscribe_global(&mut self) {
        let Some(lost) = self.lost_global.take() else {
            return;
        };
        if self.channels.is_empty() && self.patterns.is_empty() {
            return;
        }
        let stateful = self.router.stateful();
        let candidates = (0..16).filter_map(|i| stateful.primary_for(None, self.pick + i));
        let mut first = None;
        let mut other = None;
        for addr in candidates {
            first.get_or_insert_with(|| addr.clone());
            if addr != lost.node {
                other = Some(addr);
                break;
            }
        }
        let Some(addr) = other.or(first) else {
            self.lost_global = Some(Lost {
                next_try: Instant::now() + RETRY,
                ..lost
            });
            return;
        };
        let conn = match stateful.lend(&addr, self.state.protocol).await {
            Ok(conn) => SubConn::start(conn, self.pushed.clone()),
            Err(_) => {
                self.lost_global = Some(Lost {
                    next_try: Instant::now() + RETRY,
                    ..lost
                });
                return;
            }
        };
        let channels: Vec<&Bytes> = self.channels.iter().collect();
        let patterns: Vec<&Bytes> = self.patterns.iter().collect();
        let mut sent = true;
        for (word, names) in [(&b"SUBSCRIBE"[..], channels), (b"PSUBSCRIBE", patterns)] {
            if !names.is_empty() {
                let mut command: Vec<&[u8]> = Vec::with_capacity(names.len() + 1);
                command.push(word);
                command.extend(names.iter().map(|n| &n[..]));
                sent &= conn.send(encode_command(command.into_iter()));
            }
        }
        self.global_swallow = self.channels.len() + self.patterns.len();
        self.global_lost_since = Some(lost.since);
        self.global = Some((addr, conn));
        if !sent {
            self.global_swallow = 0;
        }
    }

    /// A confirmation from the channel-and-pattern connection: true when it is one of redcar's
    /// own re-subscriptions (not the client's), which is then counted off; the last one puts the
    /// gap on record.
    pub(super) fn swallowed(&mut self, addr: &Arc<str>, kind: &[u8]) -> bool {
        let from_global = self.global.as_ref().is_some_and(|(node, _)| node == addr);
        if self.global_swallow == 0 || !from_global || !matches!(kind, b"subscribe" | b"psubscribe")
        {
            return false;
        }
        self.global_swallow -= 1;
        if self.global_swallow == 0 {
            if let Some(since) = self.global_lost_since.take() {
                self.metrics.resubscribed("channel", since.elapsed());
            }
            if let Some(echoes) = self.echoes.as_mut() {
                echoes.subscribed(Instant::now());
            }
        }
        true
    }

    /// The client's channel or pattern command (or PING) whose confirmations the lost
    /// connection still owed: answered here, its subscriptions noted, so they are made again
    /// with the others.
    fn answer_owed_global(&mut self, out: &mut BytesMut) {
        if self.awaiting == 0 {
            return;
        }
        let Some(current) = self.current.take() else {
            // A PING: its pong.
            self.pong(out);
            self.awaiting = 0;
            return;
        };
        let kind = current.sub.kind;
        if kind == SubKind::Shard {
            self.current = Some(current);
            return;
        }
        let remaining = self.remaining(&current.names, kind);
        if remaining.is_empty() && !current.sub.subscribe {
            let count = self.channels.len() + self.patterns.len();
            unsubscribed(out, unsubscribe_word(kind), &[], count, self.state.protocol);
        }
        for name in remaining {
            let set = match kind {
                SubKind::Pattern => &mut self.patterns,
                _ => &mut self.channels,
            };
            let word: &[u8] = if current.sub.subscribe {
                set.insert(name.clone());
                if kind == SubKind::Pattern {
                    b"psubscribe"
                } else {
                    b"subscribe"
                }
            } else {
                set.remove(&name);
                unsubscribe_word(kind)
            };
            let count = self.channels.len() + self.patterns.len();
            unsubscribed(out, word, &[name], count, self.state.protocol);
        }
        self.awaiting = 0;
    }

    /// The client's shard-channel command whose confirmations the lost connection to `addr`
    /// still owed: the channels it subscribes wait for their slot's primary like the others;
    /// those it leaves were held there and are gone.
    fn answer_owed_shard(&mut self, addr: &Arc<str>, out: &mut BytesMut) {
        let Some(current) = self.current.take() else {
            return;
        };
        if current.sub.kind != SubKind::Shard || self.awaiting == 0 {
            self.current = Some(current);
            return;
        }
        if current.sub.subscribe {
            for name in self.remaining(&current.names, SubKind::Shard) {
                let orphan = Orphan {
                    from: addr.clone(),
                    lost: true,
                    since: Instant::now(),
                };
                self.orphans.insert(name.clone(), orphan);
                let count = self.shard_count();
                unsubscribed(out, b"ssubscribe", &[name], count, self.state.protocol);
                self.owe_one();
            }
        } else {
            let held: Vec<Bytes> = (self.shards.iter())
                .filter(|(name, node)| {
                    *node == addr && (current.names.is_empty() || current.names.contains(name))
                })
                .map(|(name, _)| name.clone())
                .collect();
            for name in held {
                self.shards.remove(&name);
                let count = self.shard_count();
                unsubscribed(out, b"sunsubscribe", &[name], count, self.state.protocol);
                self.owe_one();
            }
        }
        if self.awaiting > 0 {
            self.current = Some(current);
        }
    }

    /// The names of the client's current command whose confirmations are still owed: the last
    /// `awaiting` of them (a node confirms them in order), or for a command that named none
    /// (unsubscribe from all) every subscription of that kind.
    fn remaining(&self, names: &[Bytes], kind: SubKind) -> Vec<Bytes> {
        if names.is_empty() {
            return match kind {
                SubKind::Channel => self.channels.iter().cloned().collect(),
                SubKind::Pattern => self.patterns.iter().cloned().collect(),
                SubKind::Shard => self.shards.keys().cloned().collect(),
            };
        }
        let owed = self.awaiting.min(names.len());
        names[names.len() - owed..].to_vec()
    }

    /// True when `frame`, a message from the node at `addr`, is an echo to drop; a message
    /// from the channel-and-pattern connection that passes is remembered.
    pub(super) fn repeated(&mut self, addr: &str, frame: &[u8]) -> bool {
        let from_global = self.global.as_ref().map(|(node, _)| &**node);
        if from_global != Some(addr) {
            return false; // a shard channel's message
        }
        if let Some(echoes) = self.echoes.as_mut() {
            let now = Instant::now();
            let repeats = echoes.repeats(frame, now);
            if echoes.spent(now) {
                self.echoes = None;
            }
            if repeats {
                self.metrics.echo_dropped();
                return true;
            }
        }
        self.delivered.note(frame);
        false
    }

    /// The channel-and-pattern connection was lost at `now`: the next one's echoes are
    /// watched for.
    pub(super) fn watch_for_echoes(&mut self, now: Instant) {
        self.echoes = self.delivered.lost(now);
    }
}
