//! The [`Planner`]'s part for `routes:`: planning a command against the route table. Keys of one route: the ordinary plan, made on the
//! forwarded keys (prefix removed when the route says so) and tied to the route's backend. Keys
//! of several routes: split by (route, slot) when the command can be split, refused otherwise.
//!
//! Runs only when `routes:` are configured, after the ordinary plan was made as if for the
//! catch-all backend, so a deployment without routes pays nothing for them. What holds: every key
//! of a routed command goes to the backend its route names; keys that match no route stay with the
//! catch-all; a command whose keys span backends is split when its merge allows it and refused with
//! CROSSSLOT otherwise (never sent whole to one backend, which would read or write keys in the
//! wrong place). With `strip_prefix`, the backend sees the keys without the route's prefix, and a
//! key that is nothing but the prefix is refused.

use std::sync::Arc;

use bytes::Bytes;

use crate::cluster::key_slot;
use crate::commands::policy::{self, Tx};
use crate::commands::spec::flags;
use crate::commands::{self, CommandSpec, Serve};
use crate::protocol::{Args, Request};
use crate::router::compound::{Compound, Job, Routed};
use crate::router::reply::{error_with_prefix, redcar_error};
use crate::router::routes::forwarded_key_bytes;
use crate::router::{split, Plan, Planner, Route};

/// Whether two keys' routes are the same route (by identity: two routes with equal settings are
/// still two backends' worth of keys), or both no route (the catch-all).
fn same_route(a: Option<&Arc<Route>>, b: Option<&Arc<Route>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        (None, None) => true,
        _ => false,
    }
}

/// Plans that carry keys; the others (local answers, MULTI/EXEC, subscriptions) stay as they are.
/// Pub/sub commands stay on the catch-all backend even with shard channels (SPUBLISH), where
/// the subscriptions are.
fn has_keys(spec: &CommandSpec, plan: &Plan) -> bool {
    if spec.flags & flags::PUBSUB != 0 {
        return false;
    }
    matches!(
        plan,
        Plan::Slot { .. }
            | Plan::AnyNode
            | Plan::Blocking { .. }
            | Plan::Reply(_)
            | Plan::Compound(_)
            | Plan::Tx(Tx::Watch, _)
    )
}

impl Planner<'_> {
    /// `plan` (made for the catch-all backend) re-planned by the route table. Only called when
    /// routes are configured.
    pub(in crate::router) fn route(
        &self,
        spec: &'static CommandSpec,
        args: Args<'_>,
        scratch: &mut Vec<usize>,
        plan: Plan,
    ) -> Plan {
        if !has_keys(spec, &plan) {
            return plan;
        }
        let table = self.commands.routes.load();
        scratch.clear();
        if commands::routing_indices(spec, args, scratch).is_err() {
            return plan;
        }
        let Some(&first) = scratch.first() else {
            return plan;
        };
        let route = table.find(&args[first]);
        if !scratch[1..]
            .iter()
            .all(|&i| same_route(table.find(&args[i]), route))
        {
            let keys = std::mem::take(scratch);
            let planned = self.route_apart(spec, args, &keys, |key| table.find(key).cloned());
            *scratch = keys;
            return planned;
        }
        let Some(route) = route.cloned() else {
            return plan;
        };
        if !route.strip {
            let plan = one_node(spec, &route, plan, &args[first]);
            return wrap(spec, route, plan, None);
        }
        let mut stripped: Vec<&[u8]> = args.iter().collect();
        for &i in scratch.iter() {
            match forwarded_key_bytes(Some(&route), &args[i]) {
                Some(key) => stripped[i] = key,
                None => return Plan::Reply(empty_key(&route, &args[i])),
            }
        }
        // The command again, as RESP, with the keys rewritten.
        let stripped = Request::from_args(stripped);
        let args = stripped.args();
        let plan = self.plan_spec(spec, args, scratch);
        let plan = one_node(spec, &route, plan, &args[first]);
        wrap(spec, route, plan, Some(stripped.raw().clone()))
    }

    /// Keys of several routes: split by (route, slot) if the command splits, else refused.
    fn route_apart(
        &self,
        spec: &'static CommandSpec,
        args: Args<'_>,
        keys: &[usize],
        route_of: impl Fn(&[u8]) -> Option<Arc<Route>>,
    ) -> Plan {
        if let Some(merge) = policy::split_merge(spec) {
            return match split::plan_routed(spec, merge, args, keys, route_of) {
                Ok(split) => Plan::Compound(Compound(Job::Split(Box::new(split)))),
                Err(reply) => Plan::Reply(reply),
            };
        }
        let shown: Vec<String> = keys
            .iter()
            .take(4)
            .map(|&i| {
                let backend = match route_of(&args[i]) {
                    Some(route) => route.target.backend.to_string(),
                    None => "catch_all".to_string(),
                };
                format!("'{}' -> {backend}", String::from_utf8_lossy(&args[i]))
            })
            .collect();
        Plan::Reply(error_with_prefix(
            "CROSSSLOT ",
            format_args!(
                "Keys in request don't map to the same backend (redcar: {}; {} cannot be split across backends)",
                shown.join(", "),
                spec.name.to_ascii_uppercase()
            ),
        ))
    }
}

/// On a single node (standalone, Sentinel) keys in different slots may go together: a split or a
/// CROSSSLOT refusal becomes one command, unchanged. Not for blocking commands or WATCH, which
/// need a dedicated connection.
fn one_node(spec: &CommandSpec, route: &Route, plan: Plan, first_key: &[u8]) -> Plan {
    let cross_slot = match &plan {
        Plan::Reply(reply) => reply.starts_with(b"-CROSSSLOT"),
        Plan::Compound(compound) => compound.is_split(),
        _ => false,
    };
    let plain = spec.flags & flags::BLOCKING == 0 && matches!(commands::serve(spec), Serve::Keyed);
    if !(route.target.single_node && cross_slot && plain) {
        return plan;
    }
    Plan::Slot {
        slot: key_slot(first_key),
        // Scripts carry neither flag and may write: never re-send one that may have run.
        write: !spec.has_flag(flags::READONLY),
    }
}

/// Ties a plan made for the forwarded keys to the route's backend.
fn wrap(spec: &CommandSpec, route: Arc<Route>, plan: Plan, payload: Option<Bytes>) -> Plan {
    let routed = |slot, write, blocking, watch| {
        Plan::Compound(Compound(Job::Routed(Box::new(Routed {
            route: route.clone(),
            payload: payload.clone(),
            slot,
            write,
            blocking,
            watch,
        }))))
    };
    match plan {
        Plan::Slot { slot, write } => routed(Some(slot), write, None, false),
        Plan::AnyNode => routed(None, true, None, false),
        Plan::Blocking {
            slot,
            write,
            timeout,
        } => routed(Some(slot), write, Some(timeout), false),
        Plan::Tx(Tx::Watch, Some(slot)) => routed(Some(slot), false, None, true),
        Plan::Compound(Compound(Job::Split(mut split))) => {
            split.route_all(&route);
            Plan::Compound(Compound(Job::Split(split)))
        }
        // Scripts go like any command of their keys' slot (NOSCRIPT is not healed here).
        Plan::Compound(Compound(Job::Eval { slot, write } | Job::EvalSha { slot, write })) => {
            routed(slot, write, None, false)
        }
        Plan::Reply(reply) => Plan::Reply(reply),
        _ => Plan::Reply(redcar_error(format_args!(
            "{} on keys of route {} is not supported",
            spec.name.to_ascii_uppercase(),
            route.describe()
        ))),
    }
}

/// The refusal for a key equal to its route's prefix: stripping it would send an empty key, which
/// would be a different key on the backend than the client meant.
fn empty_key(route: &Route, key: &[u8]) -> Bytes {
    redcar_error(format_args!(
        "key '{}' is only the prefix of route {} (strip_prefix would leave an empty key)",
        String::from_utf8_lossy(key),
        route.describe()
    ))
}

#[cfg(test)]
#[path = "routed_tests.rs"]
mod tests;
