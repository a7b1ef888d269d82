//! Property tests: round trips, chunked delivery, and the fuzz invariants on random input.

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;

use super::{frame_lens, frames, requests};
use crate::protocol::{fuzz_logic, parse_request, Frame, Limits, Request};

/// A line payload: any bytes but CR and LF.
fn line() -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(
        any::<u8>().prop_filter("no CR/LF", |b| *b != b'\r' && *b != b'\n'),
        0..16,
    )
    .prop_map(Bytes::from)
}

fn binary(max: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..max)
}

/// Arbitrary frames, nested at most 4 aggregates deep.
fn frame() -> impl Strategy<Value = Frame> {
    let leaf = prop_oneof![
        line().prop_map(Frame::Simple),
        line().prop_map(Frame::Error),
        any::<i64>().prop_map(Frame::Integer),
        binary(48).prop_map(|b| Frame::Bulk(Bytes::from(b))),
        Just(Frame::Null),
        Just(Frame::NullArray),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        proptest::collection::vec(inner, 0..8).prop_map(Frame::Array)
    })
}

fn args() -> impl Strategy<Value = Vec<Vec<u8>>> {
    proptest::collection::vec(binary(40), 1..8)
}

/// Cut `input` into pieces whose sizes cycle through `sizes`.
fn chunk<'a>(input: &'a [u8], sizes: &[usize]) -> Vec<&'a [u8]> {
    let mut pieces = Vec::new();
    let mut rest = input;
    for &size in sizes.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (piece, tail) = rest.split_at(size.min(rest.len()));
        pieces.push(piece);
        rest = tail;
    }
    pieces
}

/// Write `args` as an inline command that quotes every byte as `\xHH`.
fn inline_command(args: &[Vec<u8>]) -> Vec<u8> {
    let mut line = Vec::new();
    for arg in args {
        line.extend(b" \"");
        arg.iter()
            .for_each(|b| line.extend(format!("\\x{b:02x}").into_bytes()));
        line.extend(b"\" ");
    }
    line.extend(b"\r\n");
    line
}

/// Bytes made of RESP fragments, so random input often gets past the first byte.
fn resp_soup() -> impl Strategy<Value = Vec<u8>> {
    let token = prop::sample::select(vec![
        &b"*"[..],
        b"$",
        b"+",
        b"-",
        b":",
        b"%",
        b"|",
        b"_",
        b"0",
        b"1",
        b"2",
        b"3",
        b"-1",
        b"x",
        b"\r\n",
        b"\r",
        b"\n",
        b" ",
        b"\"",
        b"'",
        b"\\",
        b"\\x4",
        b"\0",
    ]);
    proptest::collection::vec(token, 0..40).prop_map(|tokens| tokens.concat())
}

proptest! {
    #[test]
    fn frame_round_trips(frame in frame()) {
        let wire = frame.to_bytes();
        prop_assert_eq!(wire.len(), frame.encoded_len());
        let mut buf = BytesMut::from(&wire[..]);
        prop_assert_eq!(Frame::parse(&mut buf, &Limits::default()), Ok(Some(frame.clone())));
        prop_assert!(buf.is_empty());
        prop_assert_eq!(Frame::from_bytes(wire, &Limits::default()), Ok(frame));
    }

    #[test]
    fn request_round_trips(args in args()) {
        let built = Request::from_args(&args);
        let mut buf = BytesMut::from(&built.raw()[..]);
        let parsed = parse_request(&mut buf, &Limits::default());
        prop_assert_eq!(parsed, Ok(Some(built)));
        prop_assert!(buf.is_empty());
    }

    #[test]
    fn inline_hex_escapes_carry_any_bytes(args in args()) {
        let mut buf = BytesMut::from(&inline_command(&args)[..]);
        let parsed = parse_request(&mut buf, &Limits::default());
        prop_assert_eq!(parsed, Ok(Some(Request::from_args(&args))));
    }

    #[test]
    fn chunked_frames_parse_as_whole(
        sent in proptest::collection::vec(frame(), 1..8),
        sizes in proptest::collection::vec(1..24usize, 1..8),
    ) {
        let mut wire = BytesMut::new();
        sent.iter().for_each(|f| f.encode(&mut wire));
        let whole = frames([&wire[..]], &Limits::default());
        prop_assert_eq!(&whole.items, &sent);
        prop_assert_eq!(frames(chunk(&wire, &sizes), &Limits::default()), whole);
        // reply_frame_len cuts exactly what Frame::parse consumes.
        let lens: Vec<usize> = sent.iter().map(Frame::encoded_len).collect();
        prop_assert_eq!(frame_lens(chunk(&wire, &sizes), &Limits::default()).items, lens);
    }

    #[test]
    fn chunked_requests_parse_as_whole(
        sent in proptest::collection::vec(args(), 1..6),
        sizes in proptest::collection::vec(1..24usize, 1..8),
    ) {
        let expected: Vec<Request> = sent.iter().map(Request::from_args).collect();
        let wire: Vec<u8> = expected.iter().flat_map(|r| r.raw().to_vec()).collect();
        let whole = requests([&wire[..]], &Limits::default());
        prop_assert_eq!(&whole.items, &expected);
        prop_assert_eq!(requests(chunk(&wire, &sizes), &Limits::default()), whole);
    }

    #[test]
    fn fuzz_invariants_hold_on_random_bytes(data in binary(64)) {
        fuzz_logic(&data);
    }

    #[test]
    fn fuzz_invariants_hold_on_resp_soup(data in resp_soup()) {
        fuzz_logic(&data);
    }
}
