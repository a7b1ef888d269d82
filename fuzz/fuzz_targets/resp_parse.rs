//! RESP request and reply parsing on arbitrary bytes: no panic, chunking-independent results,
//! `reply_frame_len` agreeing with `Frame::parse`, frames that round-trip.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| redcar::protocol::fuzz_logic(data));
