//! Deciding, before any I/O, what to do with one command: which slot, local, or refuse.

use bytes::Bytes;

use super::reply::{error_with_prefix, redcar_error};
use super::Router;
use crate::cluster::key_slot;
use crate::commands::spec::flags;
use crate::commands::{self, CommandSpec, Local, Serve};
use crate::protocol::Request;

/// What to do with one command.
#[derive(Debug, PartialEq, Eq)]
pub enum Plan {
    /// Forward unchanged to the primary owning `slot`. `write` commands are never re-sent once
    /// they may have reached a node.
    Slot { slot: u16, write: bool },
    /// Forward to any one primary: the answer is the same everywhere (COMMAND, TIME).
    AnyNode,
    /// Answered by the session itself (it holds the per-connection state).
    Local(Local),
    /// Answer with this reply without contacting any node (refusals, arity errors).
    Reply(Bytes),
}

impl Router {
    /// Plans `request`. `scratch` is reused between calls so key extraction does not allocate.
    pub fn plan(&self, request: &Request, scratch: &mut Vec<usize>) -> Plan {
        let args = request.args();
        let Some(spec) = self.lookup(args) else {
            return Plan::Reply(unknown_command(args));
        };
        if !arity_ok(spec, args.len()) {
            return Plan::Reply(wrong_arity(spec));
        }
        match commands::serve(spec) {
            Serve::Keyed => plan_keyed(spec, args, scratch),
            Serve::Local(Local::Command | Local::CommandCount | Local::CommandInfo)
            | Serve::Local(Local::CommandDocs | Local::CommandList) => Plan::AnyNode,
            Serve::Local(local) => Plan::Local(local),
            Serve::AnyNode => Plan::AnyNode,
            Serve::Unsupported(reason) => Plan::Reply(redcar_error(format_args!(
                "{} is not supported ({reason})",
                display_name(spec)
            ))),
        }
    }
}

/// All keys must hash to one slot; a keyed command whose keys are missing (e.g. `EVAL s 0`) may
/// go to any node.
fn plan_keyed(spec: &CommandSpec, args: &[Bytes], keys: &mut Vec<usize>) -> Plan {
    keys.clear();
    if commands::routing_indices(spec, args, keys).is_err() {
        // The arguments don't fit the key spec; let a node produce Redis's own syntax error.
        return Plan::AnyNode;
    }
    let mut slots = keys.iter().map(|&i| key_slot(&args[i]));
    let Some(slot) = slots.next() else {
        return Plan::AnyNode;
    };
    if slots.any(|other| other != slot) {
        return Plan::Reply(error_with_prefix(
            "CROSSSLOT ",
            "Keys in request don't hash to the same slot (redcar: use a {hash tag} to keep related keys in one slot)",
        ));
    }
    let write = spec.flags & flags::WRITE != 0;
    Plan::Slot { slot, write }
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

fn unknown_command(args: &[Bytes]) -> Bytes {
    let name = args
        .first()
        .map(|n| String::from_utf8_lossy(n))
        .unwrap_or_default();
    let shown: String = name.chars().take(128).collect();
    redcar_error(format_args!(
        "unknown command '{shown}' (not a Redis command known to redcar or to the cluster)"
    ))
}
