//! Plans that take more than one forward or a follow-up step (cross-slot splits, fan-outs,
//! scripts), and starting them.

use std::sync::Arc;

use bytes::Bytes;

use super::forward::Call;
use super::routes::Routed;
use super::split::Split;
use super::{RouteTarget, Router};
use crate::commands::policy::FanOut;
use crate::protocol::Request;
use crate::upstream::Lane;

/// A command that needs more than one node request or a follow-up step; start it with
/// [`Router::start`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Multi(pub(super) Job);

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

impl Multi {
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

impl Router {
    /// Starts a [`Multi`] plan: like [`Router::forward`], every first request is queued on its
    /// node before this returns, so the client's order is kept.
    pub(crate) fn start(&self, multi: Multi, request: &Request, lane: Lane) -> Call<'_> {
        match multi.0 {
            Job::Split(split) => self.start_split(split, request, lane),
            Job::FanOut(kind) => self.start_fan_out(kind, request, lane),
            Job::NodeAdmin => self.start_node_admin(request, lane),
            Job::Eval { slot, write } => self.start_eval(request, slot, write, lane),
            Job::EvalSha { slot, write } => self.start_evalsha(request, slot, write, lane),
            Job::Routed(routed) => self.start_routed(*routed, request, lane),
        }
    }
}
