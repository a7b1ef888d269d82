//! The fuzz entry point for command classification and key extraction: arbitrary arguments for
//! real commands must never panic, and a single-slot plan must name every key's slot.

use bytes::Bytes;

use super::plan::{plan_command, plan_node_admin, Plan};
use crate::cluster::key_slot;
use crate::commands::{self, COMMANDS};
use crate::protocol::Request;

/// Builds a command line from `data` — `data[0]` picks a command of the built-in table,
/// `data[1]` one of its subcommands, the rest split at NUL bytes are the arguments — and checks:
/// planning and key extraction do not panic; key indices are inside the arguments; a
/// `Slot`/`Blocking` plan's slot is the slot of every key it was routed by; the lookup finds the
/// command it was built from.
pub fn fuzz_plan(data: &[u8]) {
    let (Some(&pick), Some(&sub)) = (data.first(), data.get(1)) else {
        return;
    };
    let spec = &COMMANDS[usize::from(pick) % COMMANDS.len()];
    let mut args: Vec<Bytes> = vec![Bytes::from_static(spec.name.as_bytes())];
    let spec = match spec.subcommands.len() {
        0 => spec,
        n => {
            let chosen = &spec.subcommands[usize::from(sub) % n];
            let name = chosen.name.split('|').nth(1).unwrap_or(chosen.name);
            args.push(Bytes::from(name.to_string()));
            chosen
        }
    };
    args.extend(data[2..].split(|&b| b == 0).map(Bytes::copy_from_slice));
    let request = Request::from_args(&args);
    let args = request.args();
    let found = commands::lookup(args).map(|s| s.name);
    assert_eq!(found, Some(spec.name), "lookup of {:?}", args);

    let mut keys = Vec::new();
    if commands::key_indices(spec, args, &mut keys).is_ok() {
        assert!(
            keys.iter().all(|&i| i < args.len()),
            "{keys:?} for {args:?}"
        );
    }
    let mut scratch = Vec::new();
    let plan = plan_command(
        spec,
        args,
        &mut scratch,
        || pick % 2 == 0,
        |spec| plan_node_admin(spec, &[]),
    );
    let slot = match plan {
        Plan::Slot { slot, .. } | Plan::Blocking { slot, .. } => slot,
        _ => return,
    };
    let mut routing = Vec::new();
    if commands::routing_indices(spec, args, &mut routing).is_ok() {
        for &i in &routing {
            assert!(i < args.len(), "{routing:?} for {args:?}");
            assert_eq!(key_slot(&args[i]), slot, "key {i} of {args:?}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixed_sample_of_inputs_keeps_the_invariants() {
        // Deterministic pseudo-random inputs: every command of the table with short and odd
        // argument lists (the cargo-fuzz target explores far more; this keeps the entry point
        // exercised by `cargo test`).
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let len = (state % 40) as usize;
            let data: Vec<u8> = (0..len)
                .map(|i| {
                    let b = (state >> ((i % 8) * 8)) as u8;
                    // Plenty of separators and digits so numeric arguments appear.
                    match b % 5 {
                        0 => 0,
                        1 => b'0' + b % 10,
                        _ => b,
                    }
                })
                .collect();
            fuzz_plan(&data);
        }
    }
}
