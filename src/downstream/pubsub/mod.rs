//! Subscribe mode: after (P|S)SUBSCRIBE a RESP2 client may only (un)subscribe, PING, QUIT or
//! RESET, and receives what is published, until it has no subscription left (then back to
//! normal mode). A RESP3 client gets push frames and may send other commands too.
//!
//! Channels and patterns are cluster-wide — a message published on any node reaches every
//! node's subscribers — so one dedicated connection to one primary serves them all. Shard
//! channels live on the primary owning their slot: one dedicated connection per such node, and
//! when a slot moves (the node drops the subscription with an unasked-for `sunsubscribe`),
//! redcar subscribes again at the new owner without telling the client. A lost connection
//! does not end subscribe mode either: its subscriptions are made again on another node
//! (`lost`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::client_state::ClientState;
use crate::auth::{User, Users};
use crate::commands::policy::{Sub, SubKind};
use crate::commands::Local;
use crate::metrics::Metrics;
use crate::protocol::{resp3_null, Request};
use crate::router::{redcar_error, Plan, Router};
use conn::{Pushed, SubConn};
use echoes::{Delivered, Echoes};
use frames::{confirmation, is_message, unsubscribe_word, unsubscribed};
use waiting::{Lost, Orphan};

mod conn;
mod echoes;
mod event_loop;
mod frames;
mod handover;
mod lost;
mod metrics;
mod ping;
mod shards;
mod waiting;

pub(crate) use event_loop::{serve, Start};
pub(crate) use handover::Rejoin;
pub(crate) use metrics::PubsubMetrics;

/// How the client left subscribe mode.
pub(crate) enum Left {
    /// No subscription left: back to normal commands.
    Normal,
    /// RESET (already answered): back to normal, with the connection state reset.
    Reset,
    /// QUIT, a protocol error, a lost node connection or shutdown: close once `out` is written.
    Close,
    /// The client went away.
    Gone,
    /// An upgrade in place: the process taking over serves the client now; drop the
    /// connection without a word (the socket lives on there).
    Moved,
}

enum Control {
    Go,
    Quit,
    Reset,
}

/// The client's subscriptions and the node connections holding them.
struct SubscribeMode<'r> {
    router: &'r Router,
    /// Who the client is: every command here is checked against the user's rules, as outside.
    state: &'r ClientState,
    /// The user those rules are now: the client's, or what a reload renewed it to (see
    /// [`SubscribeMode::reloaded`]); and the users it comes from.
    user: Option<Arc<User>>,
    users: Arc<Users>,
    pick: usize,
    pushed: mpsc::Sender<Pushed>,
    /// Re-subscriptions and their gaps.
    metrics: Arc<PubsubMetrics>,
    /// The connection for channels and patterns, and its node.
    global: Option<(Arc<str>, SubConn)>,
    /// The channel-and-pattern connection was lost: its subscriptions wait to be made again.
    lost_global: Option<Lost>,
    /// Confirmations of redcar's own re-subscription still to come on the new connection, and
    /// since when the subscriptions were lost (the gap, put on record by the last one).
    global_swallow: usize,
    global_lost_since: Option<Instant>,
    /// The last messages the channel-and-pattern connection delivered, and after it was lost,
    /// those the next one may deliver again (`echoes.rs`).
    delivered: Delivered,
    echoes: Option<Echoes>,
    /// Shard-channel connections by node.
    shard_conns: HashMap<Arc<str>, SubConn>,
    channels: HashSet<Bytes>,
    patterns: HashSet<Bytes>,
    /// Shard channel → the node holding the subscription.
    shards: HashMap<Bytes, Arc<str>>,
    /// Confirmations still owed for the client's current command.
    awaiting: usize,
    /// The current command, for SSUBSCRIBE redirects and telling asked-for SUNSUBSCRIBE
    /// confirmations from a node dropping a moved slot's channels.
    current: Option<Current>,
    redirects: u32,
    /// A redirected SSUBSCRIBE to send again: the node named, and the command.
    redirect: Option<(Arc<str>, Bytes)>,
    /// Shard channels to subscribe again: dropped by a node whose slot moved away, or held on
    /// a connection that was lost.
    orphans: HashMap<Bytes, Orphan>,
    /// Re-subscriptions redcar made itself, with since when each was lost: their confirmations
    /// are not the client's.
    resubscribing: HashMap<Bytes, Instant>,
}

struct Current {
    raw: Bytes,
    sub: Sub,
    /// The channels named (empty: all).
    names: Vec<Bytes>,
}

impl<'r> SubscribeMode<'r> {
    fn new(
        router: &'r Router,
        pick: usize,
        pushed: mpsc::Sender<Pushed>,
        state: &'r ClientState,
        metrics: Arc<PubsubMetrics>,
    ) -> SubscribeMode<'r> {
        SubscribeMode {
            router,
            user: state.user().cloned(),
            users: state.users().clone(),
            state,
            pick,
            pushed,
            metrics,
            global: None,
            lost_global: None,
            global_swallow: 0,
            delivered: Delivered::default(),
            echoes: None,
            global_lost_since: None,
            shard_conns: HashMap::new(),
            channels: HashSet::new(),
            patterns: HashSet::new(),
            shards: HashMap::new(),
            awaiting: 0,
            current: None,
            redirects: 0,
            redirect: None,
            orphans: HashMap::new(),
            resubscribing: HashMap::new(),
        }
    }

    fn is_empty(&self) -> bool {
        // Channels and patterns waiting to be subscribed again are still in their sets.
        self.channels.is_empty()
            && self.patterns.is_empty()
            && self.shards.is_empty()
            && self.orphans.is_empty()
    }

    async fn command(
        &mut self,
        request: Request,
        out: &mut BytesMut,
        metrics: &Metrics,
    ) -> Control {
        let (plan, name) = self.router.planner().plan(&request, &mut Vec::new());
        let lookup = || self.router.planner().lookup(request.args());
        let plan = (self.state).gate_as(self.user.as_ref(), plan, lookup, request.args());
        metrics.record_command(name, Duration::ZERO, false);
        match plan {
            Plan::Sub(sub) => self.subscription(sub, request, out).await,
            Plan::Local(Local::Ping) => self.ping(&request, out),
            Plan::Local(Local::Quit) => {
                out.extend_from_slice(b"+OK\r\n");
                return Control::Quit;
            }
            Plan::Local(Local::Reset) => {
                out.extend_from_slice(b"+RESET\r\n");
                return Control::Reset;
            }
            Plan::Reply(reply) => out.extend_from_slice(&reply),
            plan if self.state.protocol.is_resp3() => {
                let reply = self.serve_resp3(plan, &request, name).await;
                out.extend_from_slice(resp3_null(&reply).unwrap_or(&reply));
            }
            _ => out.extend_from_slice(
                format!(
                    "-ERR Can't execute '{name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n"
                )
                .as_bytes(),
            ),
        }
        Control::Go
    }

    /// RESP3 allows any command while subscribed. Data commands are served one at a time, their
    /// reply placed among the pushes; what changes the connection's state (MULTI, WATCH,
    /// blocking commands, CLIENT, HELLO) is refused until the client leaves subscribe mode.
    async fn serve_resp3(&self, plan: Plan, request: &Request, name: &str) -> Bytes {
        let lane = self.state.lane();
        super::tracking::note_subscribed(self.router, self.state, request);
        let now = tokio::time::Instant::now();
        let raw = request.raw().clone();
        match plan {
            Plan::Slot { slot, write } => {
                (self.router)
                    .forwarder()
                    .forward(None, raw, Some(slot), write, lane, now)
                    .await
            }
            Plan::AnyNode => {
                self.router
                    .forwarder()
                    .forward(None, raw, None, true, lane, now)
                    .await
            }
            Plan::Compound(compound) => {
                let call = self.router.fanout().start(compound, request, lane);
                match self.user.as_ref().filter(|u| u.filter_keys) {
                    Some(user) => {
                        let call =
                            super::keyspace::filtered(self.router, user, name, call, request, lane);
                        call.await
                    }
                    None => call.await,
                }
            }
            _ => redcar_error(format_args!(
                "'{name}' cannot run in subscribe mode through redcar (it changes the \
                 connection's state); unsubscribe first"
            )),
        }
    }

    async fn subscription(&mut self, sub: Sub, request: Request, out: &mut BytesMut) {
        let names: Vec<Bytes> = request.args().skip(1).to_bytes();
        self.redirects = 0;
        let sent = match (sub.kind, sub.subscribe) {
            (SubKind::Channel | SubKind::Pattern, true) => match self.global_conn().await {
                Ok(conn) => conn.send(request.raw().clone()).then_some(names.len()),
                Err(reply) => {
                    out.extend_from_slice(&reply);
                    return;
                }
            },
            (kind @ (SubKind::Channel | SubKind::Pattern), false) => match &self.global {
                Some((_, conn)) if conn.send(request.raw().clone()) => {
                    let held = if kind == SubKind::Channel {
                        self.channels.len()
                    } else {
                        self.patterns.len()
                    };
                    Some(if names.is_empty() {
                        held.max(1)
                    } else {
                        names.len()
                    })
                }
                _ => {
                    let count = self.channels.len() + self.patterns.len();
                    unsubscribed(
                        out,
                        unsubscribe_word(kind),
                        &names,
                        count,
                        self.state.protocol,
                    );
                    return;
                }
            },
            (SubKind::Shard, true) => self.shard_subscribe(request.raw(), &names, out).await,
            (SubKind::Shard, false) => Some(self.shard_unsubscribe(&names, out)),
        };
        match sent {
            Some(awaiting) => {
                self.awaiting = awaiting;
                self.current = Some(Current {
                    raw: request.raw().clone(),
                    sub,
                    names,
                });
            }
            None if out.is_empty() => {
                out.extend_from_slice(&redcar_error("subscription connection lost"));
            }
            None => {}
        }
    }

    async fn global_conn(&mut self) -> Result<&SubConn, Bytes> {
        if self.global.is_none() {
            let addr = self
                .router
                .stateful()
                .primary_for(None, self.pick)
                .ok_or_else(|| redcar_error("no cluster topology known yet"))?;
            let conn = self
                .router
                .stateful()
                .lend(&addr, self.state.protocol)
                .await?;
            self.global = Some((addr, SubConn::start(conn, self.pushed.clone())));
        }
        match &self.global {
            Some((_, conn)) => Ok(conn),
            None => Err(redcar_error("no subscription connection")),
        }
    }

    /// One frame from a node: messages pass straight through; confirmations update the
    /// subscription sets (and shard counts are made the client's own total).
    fn pushed(&mut self, pushed: Pushed, out: &mut BytesMut) -> Control {
        let frame = match pushed.frame {
            Ok(frame) => frame,
            Err(why) => return self.lost(&pushed.addr, &why, out),
        };
        if is_message(&frame) {
            if self.repeated(&pushed.addr, &frame) {
                return Control::Go;
            }
            out.extend_from_slice(&frame);
            return Control::Go;
        }
        let Some((kind, name)) = confirmation(&frame) else {
            return self.other(frame, &pushed.addr, out);
        };
        if self.swallowed(&pushed.addr, &kind) {
            return Control::Go;
        }
        match (kind.as_slice(), name) {
            (b"subscribe", Some(name)) => {
                self.channels.insert(name);
            }
            (b"psubscribe", Some(name)) => {
                self.patterns.insert(name);
            }
            (b"unsubscribe", name) => {
                name.map(|n| self.channels.remove(&n));
            }
            (b"punsubscribe", name) => {
                name.map(|n| self.patterns.remove(&n));
            }
            (b"ssubscribe", Some(name)) => {
                if let Some(since) = self.resubscribing.remove(&name) {
                    self.metrics.resubscribed("shard", since.elapsed());
                    return Control::Go;
                }
                self.shards.insert(name.clone(), pushed.addr);
                self.owe_one();
                unsubscribed(
                    out,
                    b"ssubscribe",
                    &[name],
                    self.shard_count(),
                    self.state.protocol,
                );
                return Control::Go;
            }
            (b"sunsubscribe", Some(name)) => {
                if !self.asked_to_leave(&name) {
                    // The node dropped it: its slot moved. Subscribe again at the new owner.
                    if self.shards.remove(&name).is_some() {
                        let orphan = Orphan {
                            from: pushed.addr,
                            lost: false,
                            since: Instant::now(),
                        };
                        self.orphans.insert(name, orphan);
                        self.router.stateful().request_refresh();
                    }
                    return Control::Go;
                }
                self.shards.remove(&name);
                self.owe_one();
                unsubscribed(
                    out,
                    b"sunsubscribe",
                    &[name],
                    self.shard_count(),
                    self.state.protocol,
                );
                return Control::Go;
            }
            _ => {}
        }
        self.owe_one();
        out.extend_from_slice(&frame);
        Control::Go
    }

    /// A reload replaced the users: the client stays only if its login survived it and its user
    /// may still hear every channel and pattern it holds — Redis 7 disconnects a subscriber
    /// whose channel rights were taken away, at once. Later commands here follow the new rules.
    fn reloaded(&mut self, users: Arc<Users>) -> Control {
        let renewed = match &self.user {
            Some(user) => users.renewed(user),
            None => users.anonymous(),
        };
        let channels = (self.channels.iter())
            .chain(self.shards.keys())
            .chain(self.orphans.keys());
        let patterns = self.patterns.iter();
        let keeps = renewed.as_ref().is_some_and(|user| {
            user.keeps_subscriptions(channels.map(|c| &c[..]), patterns.map(|p| &p[..]))
        });
        self.users = users;
        if !keeps {
            tracing::info!(
                client = self.state.id,
                "subscriber disconnected by a config reload: its user lost the rights to one of \
                 its channels, or its login"
            );
            return Control::Quit;
        }
        self.user = renewed;
        Control::Go
    }

    fn owe_one(&mut self) {
        self.awaiting = self.awaiting.saturating_sub(1);
    }
}
