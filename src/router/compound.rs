//! Plans that take more than one forward or a follow-up step (cross-slot splits, fan-outs,
//! scripts, commands on a route's keys); [`Fanout::start`](crate::router::Fanout::start) starts
//! them.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::split::Split;
use super::{Route, RouteTarget};
use crate::commands::policy::FanOut;

/// A single-slot command for a route's backend.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Routed {
    pub(crate) route: Arc<Route>,
    /// The request with the prefix removed from its keys; `None`: the client's bytes unchanged.
    pub(crate) payload: Option<Bytes>,
    /// `None`: any primary of the backend (a keyed command whose keys redcar could not read).
    pub(crate) slot: Option<u16>,
    pub(crate) write: bool,
    /// A blocking command (on a dedicated connection, never mirrored) and its own timeout
    /// (`Some(None)`: it may block forever).
    pub(crate) blocking: Option<Option<Duration>>,
    /// WATCH: the session pins a dedicated connection through [`Stateful::watch_on`](crate::router::Stateful::watch_on).
    pub(crate) watch: bool,
}

/// A command that needs more than one node request or a follow-up step; start it with
/// [`Fanout::start`](crate::router::Fanout::start).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Compound(pub(super) Job);

#[derive(Debug, PartialEq, Eq)]
pub(super) enum Job {
    /// Keys in several slots: one command per slot, replies merged.
    Split(Box<Split>),
    /// Keyless, to every primary (SCAN, RANDOMKEY: one at a time).
    FanOut(FanOut),
    /// Node administration listed in `router.allow_node_admin`: to every node.
    NodeAdmin,
    /// EVAL / EVAL_RO: remember the script for NOSCRIPT healing, then forward.
    Eval { slot: Option<u16>, write: bool },
    /// EVALSHA / EVALSHA_RO: forward; heal a NOSCRIPT reply once.
    EvalSha { slot: Option<u16>, write: bool },
    /// A command whose keys belong to one route: to that route's backend (and its mirror).
    Routed(Box<Routed>),
}

impl Compound {
    /// For a script (EVAL, EVALSHA and their `_RO` forms): the slot of its keys (`None`: no
    /// keys), so a transaction can queue it like any single-slot command.
    pub(crate) fn script_slot(&self) -> Option<Option<u16>> {
        match self.0 {
            Job::Eval { slot, .. } | Job::EvalSha { slot, .. } => Some(slot),
            _ => None,
        }
    }

    /// True for a multi-key command whose keys span slots (split per slot outside MULTI).
    pub(crate) fn is_split(&self) -> bool {
        matches!(self.0, Job::Split(_))
    }

    /// True for a command on the keys of a route (`routes:`), served by that route's backend.
    pub(crate) fn is_routed(&self) -> bool {
        matches!(self.0, Job::Routed(_))
    }

    /// For a command on a route's keys, what a transaction queues: the route's backend, the
    /// slot (`None`: keys redcar could not read) and the request as forwarded (`None`: the
    /// client's bytes).
    pub(crate) fn routed_for_tx(&self) -> Option<(Arc<RouteTarget>, Option<u16>, Option<Bytes>)> {
        match &self.0 {
            Job::Routed(routed) => Some((
                routed.route.target.clone(),
                routed.slot,
                routed.payload.clone(),
            )),
            _ => None,
        }
    }

    /// For WATCH on a route's keys: the backend, the slot and the request as forwarded.
    pub(crate) fn routed_watch(&self) -> Option<(Arc<RouteTarget>, u16, Option<Bytes>)> {
        match &self.0 {
            Job::Routed(routed) if routed.watch => Some((
                routed.route.target.clone(),
                routed.slot?,
                routed.payload.clone(),
            )),
            _ => None,
        }
    }

    /// True for a blocking command on a route's keys: like `Plan::Blocking`, it runs with
    /// nothing else of the client's in flight.
    pub(crate) fn is_blocking(&self) -> bool {
        matches!(&self.0, Job::Routed(routed) if routed.blocking.is_some())
    }
}
