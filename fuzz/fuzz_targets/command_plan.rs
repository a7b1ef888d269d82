//! Command classification and key extraction for real commands with arbitrary arguments: no
//! panic, key indices inside the arguments, a single-slot plan naming every key's slot.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| redcar::router::fuzz_plan(data));
