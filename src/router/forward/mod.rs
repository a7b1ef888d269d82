//! Sending a planned command to a node and getting the client its final reply: follows MOVED and
//! ASK, waits for a slot owner, and retries what is safe to retry, all within `op_timeout`.
//!
//! The single-command path, [`Forwarder`], and what every other room sends through: the
//! [`Call`] a session holds (`call`), which node an attempt goes to (`resolve`), reading node
//! errors (`redirect`), the redirects and retries after the first attempt (`finish`), when and
//! how long to retry (`retry`, `retry_budget`), hedged reads (`hedge`), NOSCRIPT healing
//! (`scripts`), fault injection (`fault`) and a route's backend and its mirror (`routed`).

mod absent;
mod call;
mod command;
mod direct;
pub(in crate::router) mod fault;
mod finish;
mod hedge;
mod inject;
mod quick;
mod redirect;
mod resolve;
mod retry;
pub(in crate::router) mod retry_budget;
mod routed;
mod scripts;

pub(crate) use call::Call;
pub(in crate::router) use command::{AttemptTarget, ForwardedCommand, Outcome};
pub(crate) use direct::FirstHop;
pub(crate) use fault::validate as validate_faults;
pub(crate) use redirect::{classify, Verdict};
pub(in crate::router) use resolve::{pick, policy_for, was_tried};
pub(in crate::router) use retry::{lost_write, pause_before_retry};
pub(in crate::router) use retry_budget::RetryBudget;
pub(in crate::router) use scripts::ScriptCache;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use bytes::Bytes;
use tokio::time::Instant;

use self::command::Candidate;
use self::quick::QuickSettings;
use crate::cluster::ClusterState;
use crate::metrics::Metrics;
use crate::router::core::{Core, Live};
use crate::router::reply::redcar_error;
use crate::router::{RouteTarget, RouterConfig};
use crate::upstream::Lane;
use crate::upstream::{Inbox, Node, Upstreams};

/// The single-command path: sends one command to one node and follows it to its final reply.
/// It owns the state every room shares ([`Core`]) and the state of forwarding itself.
pub(crate) struct Forwarder {
    pub(in crate::router) core: Core,
    /// Scripts seen in EVAL and SCRIPT LOAD, to heal NOSCRIPT replies to EVALSHA.
    pub(in crate::router) scripts: ScriptCache,
    /// Caps retries to a share of the traffic.
    retry_budget: RetryBudget,
    /// `live.config.replica_miss_check`, read with one load by every nil reply to a read (most
    /// replies to GETs of absent keys) instead of a snapshot of `live`.
    replica_miss_check: AtomicBool,
    /// `live`'s `op_timeout` and `read_policy` in one word, when nothing else of it matters.
    quick: QuickSettings,
}

impl Forwarder {
    pub(in crate::router) fn new(
        cluster: Arc<ClusterState>,
        upstreams: Arc<Upstreams>,
        metrics: Arc<Metrics>,
        config: RouterConfig,
    ) -> Forwarder {
        let replica_miss_check = AtomicBool::new(config.replica_miss_check);
        let retry_budget = RetryBudget::new(config.retry_budget.clone());
        let live = Live::new(config, &metrics);
        let quick = QuickSettings::new(&live, Forwarder::hedges_reads(&live.config));
        let live = ArcSwap::from_pointee(live);
        Forwarder {
            core: Core {
                cluster,
                upstreams,
                counts: metrics.group(),
                redirects: metrics.group(),
                nodes: metrics.group(),
                metrics,
                live,
            },
            scripts: ScriptCache::default(),
            retry_budget,
            replica_miss_check,
            quick,
        }
    }

    /// Applies reloaded `router:` settings (for `Router::reconfigure`).
    pub(in crate::router) fn reconfigure(&self, config: RouterConfig) {
        self.retry_budget.set_config(config.retry_budget.clone());
        self.replica_miss_check
            .store(config.replica_miss_check, Ordering::Relaxed);
        let live = Arc::new(Live::new(config, &self.core.metrics));
        self.core.live.store(live.clone());
        self.quick.set(&live, Forwarder::hedges_reads(&live.config));
    }
}

impl Forwarder {
    /// Forwards `payload` (one encoded command) to the owner of `slot` (`None`: any primary);
    /// reads go where `router.read_policy` says. `now` is when the command arrived (its deadline
    /// counts from it): a session starts a whole read's commands on one clock read.
    ///
    /// The first attempt is queued on the node connection *now*, before this returns, so a
    /// client's commands reach each node in the order the client sent them. The returned [`Call`]
    /// yields the reply frame for the client; it never yields MOVED or ASK. `lane` keeps one
    /// client's commands on one connection per node (see [`Node::send`]).
    ///
    /// A client session passes its `inbox`: the first attempt's reply goes there, and the call
    /// must be polled with it ([`Call::poll_in`]); other callers pass `None`.
    pub(crate) fn forward(
        &self,
        inbox: Option<&mut Inbox>,
        payload: Bytes,
        slot: Option<u16>,
        write: bool,
        lane: Lane,
        now: Instant,
    ) -> Call<'_> {
        self.forward_to(None, inbox, payload, slot, write, lane, now)
    }

    /// [`forward`](Self::forward) to a route's backend (`None`: the catch-all backend), with the
    /// reply to a session's inbox when given one.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn forward_to(
        &self,
        target: Option<Arc<RouteTarget>>,
        inbox: Option<&mut Inbox>,
        payload: Bytes,
        slot: Option<u16>,
        write: bool,
        lane: Lane,
        now: Instant,
    ) -> Call<'_> {
        // One snapshot of the reloadable settings for the whole dispatch: one word, or all of
        // `live` when fault injection or hedged reads are on.
        let quick = self.quick.get();
        let live = quick.is_none().then(|| self.core.live.load());
        let (read_policy, op_timeout) = match (quick, &live) {
            (Some(quick), _) => (quick.read_policy, quick.op_timeout),
            (None, Some(live)) => (live.config.read_policy, live.config.op_timeout),
            (None, None) => (self.core.read_policy(), self.core.op_timeout()),
        };
        let read_policy = match target.as_deref() {
            Some(RouteTarget {
                read_policy: Some(policy),
                ..
            }) => *policy,
            _ => read_policy,
        };
        let (candidate, primary) =
            self.candidate_by(read_policy, self.core.state(&target), slot, write, &[]);
        let command = ForwardedCommand {
            payload,
            slot,
            write,
            lane,
            deadline: now + op_timeout,
            target,
        };
        match candidate {
            Candidate::Node(node) => {
                let live = live.as_deref();
                if let Some(faults) = live.and_then(|live| live.faults.as_ref()) {
                    if let Some(picked) = faults.pick(&command.payload, node.addr()) {
                        return self.inject(picked, command, node);
                    }
                }
                let hedged = live.is_some_and(|live| Forwarder::hedges(&live.config, &command));
                if let (Some(inbox), false) = (inbox, hedged) {
                    return match node.queue_into(inbox, command.payload.clone(), lane) {
                        Ok(seq) => Call::inboxed(self, node, primary, seq, command),
                        Err(never) => {
                            Call::slow(self.finish(command, Some((node, Err(never))), Vec::new()))
                        }
                    };
                }
                let reply = node.queue(command.payload.clone(), false, lane, 1);
                if hedged {
                    let reply = reply.into_reply(&node);
                    return Call::slow(self.hedged(command, node, reply));
                }
                Call::sent(self, node, primary, reply, command)
            }
            Candidate::Unusable(reply) => Call::ready(reply),
            Candidate::NoOwner => Call::slow(self.finish(command, None, Vec::new())),
        }
    }

    /// The slot's primary when `reply`, `node`'s answer to `command`, is a replica's "no such
    /// key" (nil, empty, 0, … as `commands::absent` knows per command) for a read that the
    /// primary should confirm (`router.replica_miss_check`), unless that primary is ejected.
    pub(in crate::router) fn replica_miss(
        &self,
        command: &ForwardedCommand,
        node: &Arc<Node>,
        reply: &[u8],
    ) -> Option<Arc<Node>> {
        let ForwardedCommand {
            target,
            slot,
            write,
            payload,
            ..
        } = command;
        self.absent_on_replica(target, *slot, *write, node, payload, reply) // hook: absent.rs
    }

    /// A command gave up waiting for `node` at its deadline: the node's health counts the
    /// failure, and the client gets [`Forwarder::timed_out`].
    pub(super) fn node_timed_out(&self, node: &Node) -> Bytes {
        node.health().record_failure("command timed out");
        self.timed_out(node)
    }

    pub(super) fn timed_out(&self, node: &Node) -> Bytes {
        redcar_error(format_args!(
            "timed out after {:?} waiting for {}",
            self.core.op_timeout(),
            node.addr()
        ))
    }
}

#[cfg(test)]
mod readonly_tests;
