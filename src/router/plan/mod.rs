//! Deciding, before any I/O, what to do with one command: which slot, local, or refuse. The
//! [`Planner`] room: it knows the commands (built in, declared, learned from the cluster:
//! `learn`) and the route table (`routed` plans against it).

mod learn;
mod routed;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::{ArcSwap, ArcSwapOption};
use bytes::Bytes;

use crate::cluster::key_slot;
use crate::commands::policy::{self, FanOut, Sub, Tx};
use crate::commands::spec::flags;
use crate::commands::{self, CommandSpec, CommandTable, Local, Serve};
use crate::protocol::{Args, Request};
use crate::router::compound::{Compound, Job};
use crate::router::core::Core;
use crate::router::fanout::node_admin;
use crate::router::reply::{error_with_prefix, redcar_error};
use crate::router::{split, RouteTable};

/// What to do with one command.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Forward unchanged to the primary owning `slot`. `write` commands are never re-sent once
    /// they may have reached a node.
    Slot { slot: u16, write: bool },
    /// Forward to any one primary: the answer is the same everywhere (COMMAND, TIME).
    AnyNode,
    /// Answered by the session itself (it holds the per-connection state).
    Local(Local),
    /// Answer with this reply without contacting any node (refusals, arity errors).
    Reply(Bytes),
    /// A command that blocks on the node (BLPOP, XREAD BLOCK …): sent to the owner of `slot` on a
    /// dedicated connection. `timeout` is the command's own (`None`: it may block forever).
    Blocking {
        slot: u16,
        write: bool,
        timeout: Option<Duration>,
    },
    /// WAIT numreplicas timeout (timeout `None`: forever).
    Wait {
        replicas: i64,
        timeout: Option<Duration>,
    },
    /// A transaction command; the session keeps the transaction. `slot` is WATCH's keys' slot.
    Tx(Tx, Option<u16>),
    /// A subscription command; the session enters (or stays in) subscribe mode.
    Sub(Sub),
    /// Several node requests or a follow-up step (keys in several slots, fan-out to every
    /// primary, scripts): start it with [`Fanout::start`](crate::router::Fanout::start).
    Compound(Compound),
}

/// The planner's own state, which the [`Router`](crate::router::Router) keeps.
#[derive(Default)]
pub(in crate::router) struct Commands {
    /// Commands learned from the cluster that the built-in table lacks (module commands);
    /// consulted only when the built-in lookup misses, so the common path does not touch it.
    learned: ArcSwapOption<CommandTable>,
    /// `routes:` over the named backends; the core's `cluster` is the catch-all backend.
    /// Swapped whole on reload.
    pub(in crate::router) routes: ArcSwap<RouteTable>,
    /// True when `routes` has entries: the one branch a config without routes pays per command.
    routed: AtomicBool,
}

/// Planning: what to do with one command, the commands known and the route table. Borrows the
/// shared core (reloadable settings, the slot map to learn from) and its own [`Commands`].
#[derive(Clone, Copy)]
pub(crate) struct Planner<'r> {
    core: &'r Core,
    pub(in crate::router) commands: &'r Commands,
}

impl<'r> Planner<'r> {
    pub(in crate::router) fn new(core: &'r Core, commands: &'r Commands) -> Planner<'r> {
        Planner { core, commands }
    }

    /// Installs a route table (start-up and reload): commands planned from now on use it.
    pub(crate) fn set_routes(self, table: RouteTable) {
        let routed = !table.is_empty();
        self.commands.routes.store(Arc::new(table));
        self.commands.routed.store(routed, Ordering::Relaxed);
    }

    /// The spec for a command line: built-in table first, then commands learned from the cluster.
    pub(crate) fn lookup(self, args: Args<'_>) -> Option<&'static CommandSpec> {
        commands::lookup(args).or_else(|| self.commands.learned.load().as_ref()?.lookup(args))
    }

    /// Plans `request`, and names its command (`"unknown"` when the table lacks it) for the
    /// metrics. `scratch` is reused between calls so key extraction does not allocate.
    pub(crate) fn plan(self, request: &Request, scratch: &mut Vec<usize>) -> (Plan, &'static str) {
        let args = request.args();
        let Some(spec) = self.lookup(args) else {
            return (Plan::Reply(unknown_command(args)), "unknown");
        };
        let plan = self.plan_spec(spec, args, scratch);
        if !self.commands.routed.load(Ordering::Relaxed) {
            return (plan, spec.name);
        }
        (self.route(spec, args, scratch, plan), spec.name)
    }

    pub(in crate::router) fn plan_spec(
        self,
        spec: &'static CommandSpec,
        args: Args<'_>,
        scratch: &mut Vec<usize>,
    ) -> Plan {
        plan_command(
            spec,
            args,
            scratch,
            || self.core.allow_flush(),
            |spec| plan_node_admin(spec, &self.core.live.load().config.allow_node_admin),
        )
    }
}

/// The plan for a known command; `allow_flush` reads `router.allow_flush` (only for FLUSHALL and
/// FLUSHDB) and `node_admin` plans a command `router.allow_node_admin` may allow (only for node
/// administration), so other commands do not load the reloadable settings here.
pub(super) fn plan_command(
    spec: &'static CommandSpec,
    args: Args<'_>,
    scratch: &mut Vec<usize>,
    allow_flush: impl Fn() -> bool,
    node_admin: impl Fn(&'static CommandSpec) -> Plan,
) -> Plan {
    {
        if !arity_ok(spec, args.len()) {
            return Plan::Reply(wrong_arity(spec));
        }
        match commands::serve(spec) {
            Serve::Keyed => {
                let plan = plan_keyed(spec, args, scratch);
                // One bit test keeps the common path as it was: only scripts and the BLOCK-able
                // stream reads need a second look.
                if spec.flags & (flags::NOSCRIPT | flags::BLOCKING) == 0 {
                    plan
                } else {
                    keyed_special(spec, args, plan)
                }
            }
            Serve::FanOut(FanOut::Flush) if !allow_flush() => {
                Plan::Reply(redcar_error(format_args!(
                    "{} is disabled (router.allow_flush: false)",
                    display_name(spec)
                )))
            }
            Serve::FanOut(kind) => Plan::Compound(Compound(Job::FanOut(kind))),
            Serve::Local(Local::Command | Local::CommandCount | Local::CommandInfo)
            | Serve::Local(Local::CommandDocs | Local::CommandList) => Plan::AnyNode,
            Serve::Local(local) => Plan::Local(local),
            Serve::AnyNode => Plan::AnyNode,
            Serve::Blocking => match plan_keyed(spec, args, scratch) {
                Plan::Slot { slot, write } => Plan::Blocking {
                    slot,
                    write,
                    timeout: blocking_timeout(spec.name, args),
                },
                other => other,
            },
            Serve::Wait => match (parse_int(&args[1]), parse_int(&args[2])) {
                (Some(replicas), Some(ms)) if ms >= 0 => Plan::Wait {
                    replicas,
                    timeout: (ms > 0).then(|| Duration::from_millis(ms.unsigned_abs())),
                },
                (Some(_), Some(_)) => Plan::Reply(error_with_prefix("ERR ", "timeout is negative")),
                _ => Plan::Reply(error_with_prefix(
                    "ERR ",
                    "value is not an integer or out of range",
                )),
            },
            Serve::Transaction(Tx::Watch) => match plan_keyed(spec, args, scratch) {
                Plan::Slot { slot, .. } => Plan::Tx(Tx::Watch, Some(slot)),
                other => other,
            },
            Serve::Transaction(tx) => Plan::Tx(tx, None),
            Serve::Subscription(sub) => Plan::Sub(sub),
            Serve::Unsupported(commands::policy::NODE_ADMIN) => node_admin(spec),
            Serve::Unsupported(reason) => Plan::Reply(redcar_error(format_args!(
                "{} is not supported ({reason})",
                display_name(spec)
            ))),
        }
    }
}

/// The plan for a node-administration command: to every node when `allowed` lists it, else a
/// refusal that says which setting would allow it (when one could).
pub(super) fn plan_node_admin(spec: &CommandSpec, allowed: &[String]) -> Plan {
    if allowed.iter().any(|a| a.eq_ignore_ascii_case(spec.name)) {
        return Plan::Compound(Compound(Job::NodeAdmin));
    }
    let shown = spec.name.replace('|', " ").to_ascii_uppercase();
    Plan::Reply(match node_admin::never(spec) {
        Some(why) => redcar_error(format_args!(
            "{shown} is not supported (node administration through the proxy: {why})"
        )),
        None => redcar_error(format_args!(
            "{shown} is not supported (node administration is refused unless listed in \
             router.allow_node_admin, e.g. allow_node_admin: [\"{}\"]; it then goes to every node)",
            spec.name
        )),
    })
}

/// All keys must hash to one slot; a keyed command whose keys are missing (e.g. `EVAL s 0`) may
/// go to any node.
fn plan_keyed(spec: &CommandSpec, args: Args<'_>, keys: &mut Vec<usize>) -> Plan {
    keys.clear();
    if commands::routing_indices(spec, args, keys).is_err() {
        // The arguments don't fit the key spec; let a node produce Redis's own syntax error.
        return Plan::AnyNode;
    }
    let Some((&first, rest)) = keys.split_first() else {
        return Plan::AnyNode;
    };
    let slot = key_slot(&args[first]);
    for (n, &i) in rest.iter().enumerate() {
        let next = key_slot(&args[i]);
        if next != slot {
            // The split takes the slots hashed so far from here.
            let hashed = split::Hashed {
                same: n + 1,
                first: slot,
                next,
            };
            return cross_slot(spec, args, keys, hashed);
        }
    }
    let write = spec.flags & flags::WRITE != 0;
    Plan::Slot { slot, write }
}

/// Keys in more than one slot: split if the command splits, else Redis's CROSSSLOT refusal.
fn cross_slot(spec: &CommandSpec, args: Args<'_>, keys: &[usize], hashed: split::Hashed) -> Plan {
    if let Some(merge) = policy::split_merge(spec) {
        return match split::plan(spec, merge, args, keys, Some(hashed)) {
            Ok(split) => Plan::Compound(Compound(Job::Split(Box::new(split)))),
            Err(reply) => Plan::Reply(reply),
        };
    }
    Plan::Reply(error_with_prefix(
        "CROSSSLOT ",
        "Keys in request don't hash to the same slot (redcar: use a {hash tag} to keep related keys in one slot)",
    ))
}

/// Scripts (remembered for NOSCRIPT healing; writes unless `_RO`) and XREAD/XREADGROUP (on a
/// dedicated connection with BLOCK).
fn keyed_special(spec: &CommandSpec, args: Args<'_>, plan: Plan) -> Plan {
    if policy::blocks_with_option(spec) {
        if let (Some(timeout), Plan::Slot { slot, .. }) = (block_option(args), &plan) {
            return Plan::Blocking {
                slot: *slot,
                write: spec.name == "xreadgroup",
                timeout,
            };
        }
    }
    // Scripts carry no WRITE flag but may write: never re-send one that may have run.
    let write = !spec.has_flag(flags::READONLY);
    let slot = match plan {
        Plan::Slot { slot, .. } => Some(slot),
        Plan::AnyNode => None,
        other => return other,
    };
    match spec.name {
        "eval" | "eval_ro" => Plan::Compound(Compound(Job::Eval { slot, write })),
        "evalsha" | "evalsha_ro" => Plan::Compound(Compound(Job::EvalSha { slot, write })),
        "fcall" | "fcall_ro" => match slot {
            Some(slot) => Plan::Slot { slot, write },
            None => Plan::AnyNode,
        },
        _ => match slot {
            Some(slot) => Plan::Slot {
                slot,
                write: spec.flags & flags::WRITE != 0,
            },
            None => Plan::AnyNode,
        },
    }
}

/// XREAD / XREADGROUP options before `STREAMS`: `BLOCK ms` gives `Some(timeout)` (`Some(None)`
/// for `BLOCK 0`, forever); no BLOCK gives `None`.
fn block_option(args: Args<'_>) -> Option<Option<Duration>> {
    let mut i = 1;
    while let Some(arg) = args.get(i) {
        let step = match arg.to_ascii_uppercase().as_slice() {
            b"BLOCK" => {
                let ms = args.get(i + 1).and_then(parse_number).unwrap_or(0.0);
                return Some(seconds(ms / 1000.0));
            }
            b"STREAMS" => return None,
            b"GROUP" => 3,
            b"COUNT" => 2,
            _ => 1,
        };
        i += step;
    }
    None
}

/// A blocking command's own timeout: where it sits depends on the command. `None` means it may
/// block forever (timeout 0, or a form redcar cannot read — the node will judge it).
fn blocking_timeout(name: &str, args: Args<'_>) -> Option<Duration> {
    let arg = match name {
        "blmpop" | "bzmpop" => args.get(1),
        _ => args.last(),
    }?;
    seconds(parse_number(arg)?)
}

fn parse_int(arg: &[u8]) -> Option<i64> {
    std::str::from_utf8(arg).ok()?.parse::<i64>().ok()
}

fn parse_number(arg: &[u8]) -> Option<f64> {
    std::str::from_utf8(arg).ok()?.parse::<f64>().ok()
}

/// Positive, finite seconds; 0 (block forever) and nonsense give `None`.
fn seconds(value: f64) -> Option<Duration> {
    (value.is_finite() && value > 0.0).then(|| Duration::from_secs_f64(value.min(1e9)))
}

fn arity_ok(spec: &CommandSpec, given: usize) -> bool {
    let arity = spec.arity;
    let given = i64::try_from(given).unwrap_or(i64::MAX);
    if arity >= 0 {
        given == i64::from(arity)
    } else {
        given >= -i64::from(arity)
    }
}

fn display_name(spec: &CommandSpec) -> String {
    spec.name.replace('|', " ").to_ascii_uppercase()
}

/// Same wording as Redis, so client libraries recognise it.
fn wrong_arity(spec: &CommandSpec) -> Bytes {
    error_with_prefix(
        "ERR ",
        format_args!("wrong number of arguments for '{}' command", spec.name),
    )
}

fn unknown_command(args: Args<'_>) -> Bytes {
    let name = args
        .first()
        .map(|n| String::from_utf8_lossy(n))
        .unwrap_or_default();
    let shown: String = name.chars().take(128).collect();
    redcar_error(format_args!(
        "unknown command '{shown}' (not a Redis command known to redcar or to the cluster)"
    ))
}

#[cfg(test)]
mod tests;
