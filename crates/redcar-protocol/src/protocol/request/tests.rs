//! Multibulk request parsing: every shape, every error, and each limit at its edge.

use bytes::{Bytes, BytesMut};

use crate::protocol::{parse_request, parse_request_into, Limits, ProtocolError, Request};

fn parse_with(input: &[u8], limits: &Limits) -> (Result<Option<Request>, ProtocolError>, Vec<u8>) {
    let mut buf = BytesMut::from(input);
    let result = parse_request(&mut buf, limits);
    (result, buf.to_vec())
}

fn parse(input: &[u8]) -> Result<Option<Request>, ProtocolError> {
    parse_with(input, &Limits::default()).0
}

fn args(request: &Request) -> Vec<&[u8]> {
    request.args().iter().collect()
}

/// The error, and that the buffer was left as it was.
fn error_of(input: &[u8], limits: &Limits) -> ProtocolError {
    let (result, rest) = parse_with(input, limits);
    assert_eq!(rest, input, "buffer changed on error");
    result.expect_err("expected an error")
}

fn parsed(input: &[u8]) -> Request {
    parse(input).expect("parse error").expect("incomplete")
}

#[test]
fn parses_a_multibulk_and_removes_only_its_bytes() {
    let mut buf = BytesMut::from(&b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPING\r\n"[..]);
    let first = parse_request(&mut buf, &Limits::default())
        .expect("ok")
        .expect("complete");
    assert_eq!(args(&first), [&b"GET"[..], b"k"]);
    assert_eq!(first.raw(), &b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"[..]);
    assert_eq!(first.args().len(), 2);
    assert_eq!(&buf[..], b"*1\r\n$4\r\nPING\r\n");
    let second = parse_request(&mut buf, &Limits::default())
        .expect("ok")
        .expect("complete");
    assert_eq!(args(&second), [b"PING"]);
    assert!(buf.is_empty());
}

#[test]
fn raw_and_args_are_zero_copy_views_of_the_read_buffer() {
    let mut buf = BytesMut::from(&b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n"[..]);
    let start = buf.as_ptr() as usize;
    let request = parse_request(&mut buf, &Limits::default())
        .expect("ok")
        .expect("complete");
    assert_eq!(request.raw().as_ptr() as usize, start);
    assert_eq!(request.args()[0].as_ptr() as usize, start + 8);
    assert_eq!(request.args()[1].as_ptr() as usize, start + 17);
}

#[test]
fn name_keeps_the_case_sent() {
    assert_eq!(&parsed(b"*1\r\n$4\r\npInG\r\n").args()[0], b"pInG");
}

#[test]
fn bulk_payload_is_binary_safe_and_may_be_empty() {
    let request = parsed(b"*3\r\n$3\r\nSET\r\n$0\r\n\r\n$7\r\n\r\n*1\r\n\0\r\n");
    assert_eq!(args(&request), [&b"SET"[..], b"", b"\r\n*1\r\n\0"]);
}

#[test]
fn every_proper_prefix_is_incomplete_and_untouched() {
    let input = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
    for len in 0..input.len() {
        let (result, rest) = parse_with(&input[..len], &Limits::default());
        assert_eq!(result, Ok(None), "prefix {len}");
        assert_eq!(rest, &input[..len]);
    }
}

#[test]
fn empty_and_null_multibulks_are_skipped_like_redis() {
    for input in [&b"*0\r\n"[..], b"*-1\r\n", b"*-5\r\n", b"*0\r\n*-1\r\n"] {
        let (result, rest) = parse_with(input, &Limits::default());
        assert_eq!(result, Ok(None));
        assert!(rest.is_empty(), "{input:?} not consumed");
    }
    assert_eq!(
        args(&parsed(b"*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n")),
        [b"PING"]
    );
}

#[test]
fn non_bulk_element_is_rejected_with_redis_wording() {
    let limits = Limits::default();
    assert_eq!(
        error_of(b"*1\r\n:1\r\n", &limits),
        ProtocolError::ExpectedBulk(b':')
    );
    assert_eq!(
        error_of(b"*1\r\n+OK\r\n", &limits).to_string(),
        "expected '$', got '+'"
    );
    // The message goes on a RESP error line, so control bytes must come out escaped.
    assert_eq!(
        error_of(b"*1\r\n\r\n", &limits).to_string(),
        "expected '$', got '\\r'"
    );
    assert_eq!(
        error_of(b"*2\r\n$1\r\na\r\n*1\r\n", &limits),
        ProtocolError::ExpectedBulk(b'*')
    );
}

#[test]
fn bad_counts_are_invalid_multibulk_length() {
    for input in [
        &b"*x\r\n"[..],
        b"*\r\n",
        b"*1x\r\n",
        b"* 1\r\n",
        b"*+1\r\n",
        b"*01\r\n",
        b"*1\rx",
    ] {
        assert_eq!(
            error_of(input, &Limits::default()),
            ProtocolError::InvalidMultibulkLength,
            "{input:?}"
        );
    }
    assert_eq!(
        ProtocolError::InvalidMultibulkLength.to_string(),
        "invalid multibulk length"
    );
}

#[test]
fn bad_bulk_lengths_are_invalid_bulk_length() {
    for input in [
        &b"*1\r\n$x\r\n"[..],
        b"*1\r\n$\r\n",
        b"*1\r\n$-1\r\n",
        b"*1\r\n$-5\r\n",
        b"*1\r\n$01\r\nab\r\n",
        b"*1\r\n$999999999999\r\n",
        b"*1\r\n$99999999999999999999999\r\n",
        b"*1\r\n$1\ra",
    ] {
        assert_eq!(
            error_of(input, &Limits::default()),
            ProtocolError::InvalidBulkLength,
            "{input:?}"
        );
    }
    assert_eq!(
        ProtocolError::InvalidBulkLength.to_string(),
        "invalid bulk length"
    );
}

#[test]
fn bulk_payload_must_end_in_crlf() {
    let limits = Limits::default();
    assert_eq!(
        error_of(b"*1\r\n$3\r\nGETxx", &limits),
        ProtocolError::ExpectedCrlf
    );
    assert_eq!(
        error_of(b"*1\r\n$3\r\nGET\n\r", &limits),
        ProtocolError::ExpectedCrlf
    );
    assert_eq!(
        error_of(b"*1\r\n$3\r\nGETX\r\n", &limits),
        ProtocolError::ExpectedCrlf
    );
    // One byte of the CRLF is not yet enough to decide.
    assert_eq!(parse(b"*1\r\n$3\r\nGETx"), Ok(None));
}

#[test]
fn bulk_length_limit_edge() {
    let limits = Limits {
        max_bulk_len: 5,
        ..Limits::default()
    };
    let (ok, _) = parse_with(b"*1\r\n$5\r\nhello\r\n", &limits);
    assert!(matches!(ok, Ok(Some(_))));
    assert_eq!(
        error_of(b"*1\r\n$6\r\n", &limits),
        ProtocolError::InvalidBulkLength
    );
}

#[test]
fn array_length_limit_edge() {
    let limits = Limits {
        max_array_len: 3,
        ..Limits::default()
    };
    let (ok, _) = parse_with(b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n", &limits);
    assert_eq!(ok.expect("ok").expect("complete").args().len(), 3);
    assert_eq!(
        error_of(b"*4\r\n", &limits),
        ProtocolError::InvalidMultibulkLength
    );
}

#[test]
fn header_line_limit_edge() {
    let limits = Limits {
        max_inline_len: 3,
        max_array_len: 1000,
        ..Limits::default()
    };
    let mut at_limit = b"*1\r\n$100\r\n".to_vec();
    at_limit.extend([b'x'; 100]);
    at_limit.extend(b"\r\n");
    assert_eq!(
        parse_with(&at_limit, &limits)
            .0
            .expect("ok")
            .expect("complete")
            .args()[0]
            .len(),
        100
    );
    assert_eq!(parse_with(b"*100\r\n", &limits).0, Ok(None));
    // Over the limit: rejected whether or not the line has ended yet.
    assert_eq!(
        error_of(b"*1\r\n$1000\r\n", &limits),
        ProtocolError::BulkCountTooBig
    );
    assert_eq!(
        error_of(b"*1\r\n$1000", &limits),
        ProtocolError::BulkCountTooBig
    );
    assert_eq!(parse_with(b"*1\r\n$100", &limits).0, Ok(None));
    assert_eq!(
        error_of(b"*1000\r\n", &limits),
        ProtocolError::MultibulkCountTooBig
    );
    assert_eq!(
        error_of(b"*1000", &limits),
        ProtocolError::MultibulkCountTooBig
    );
    assert_eq!(parse_with(b"*100", &limits).0, Ok(None));
    assert_eq!(
        ProtocolError::BulkCountTooBig.to_string(),
        "too big bulk count string"
    );
    assert_eq!(
        ProtocolError::MultibulkCountTooBig.to_string(),
        "too big mbulk count string"
    );
}

#[test]
fn huge_bulk_is_reported_incomplete_before_its_payload_arrives() {
    let mut input = b"*2\r\n$3\r\nSET\r\n$100000\r\n".to_vec();
    input.extend(vec![b'\n'; 50_000]);
    assert_eq!(parse(&input), Ok(None));
    input.extend(vec![b'\n'; 50_000]);
    input.extend(b"\r\n");
    assert_eq!(parsed(&input).args()[1].len(), 100_000);
}

#[test]
fn from_args_encodes_resp_multibulk() {
    let request = Request::from_args(["SET", "k", ""]);
    assert_eq!(
        request.raw(),
        &b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n"[..]
    );
    assert_eq!(args(&request), [&b"SET"[..], b"k", b""]);
    let long = vec![7u8; 1234];
    assert_eq!(
        Request::from_args([&long[..]]).raw().len(),
        1 + 1 + 2 + 1 + 4 + 2 + 1234 + 2
    );
}

#[test]
fn from_args_with_no_args_is_an_empty_request() {
    let request = Request::from_args(Vec::<Bytes>::new());
    assert!(request.args().is_empty());
    assert_eq!(request.raw(), &b"*0\r\n"[..]);
}

#[test]
fn debug_escapes_and_truncates_arguments() {
    let long = vec![b'x'; 100];
    let shown = format!(
        "{:?}",
        Request::from_args([&b"SET"[..], b"a\r\n\x01", &long])
    );
    assert_eq!(
        shown,
        format!(
            "Request [\"SET\", \"a\\r\\n\\x01\", \"{}\"...(100 bytes)]",
            "x".repeat(64)
        )
    );
}

#[test]
fn one_slot_parses_short_and_long_requests_in_turn_and_an_incomplete_one_leaves_no_arguments() {
    let limits = Limits::default();
    let mut slot = Request::default();
    let long: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
    let encoded = Request::from_args(std::iter::once("MGET").chain(long.iter().map(|s| &s[..])));
    for input in [
        &b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"[..],
        &encoded.raw()[..],
        b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\nb\r\n",
    ] {
        let mut buf = BytesMut::from(input);
        assert_eq!(parse_request_into(&mut buf, &limits, &mut slot), Ok(true));
        assert_eq!(slot.raw(), input);
        let again = parsed(input);
        assert_eq!(
            args(&slot),
            args(&again),
            "the slot holds what a fresh parse does"
        );
    }
    assert_eq!(slot.args().len(), 3);
    // Cut short (long enough to be measured first, and short enough to fit): no arguments
    // from the earlier request are left behind.
    for cut in [&encoded.raw()[..60], &b"*2\r\n$3\r\nGET\r\n$1"[..]] {
        let mut buf = BytesMut::from(cut);
        assert_eq!(parse_request_into(&mut buf, &limits, &mut slot), Ok(false));
        assert!(slot.args().is_empty());
        assert_eq!(&buf[..], cut, "the buffer is untouched");
    }
}

#[test]
fn a_request_is_its_raw_bytes_and_eight_inline_spans() {
    // 32 bytes of `Bytes` and 72 of spans: what a session's request slot and a parked request
    // hold (it was 168 with a `Bytes` per argument).
    assert_eq!(std::mem::size_of::<Request>(), 104);
}

#[test]
fn a_sent_payload_reparses_into_the_same_arguments_without_a_copy() {
    let sent = Request::from_args(["ZUNION", "2", "{t}a", "{t}b", "WITHSCORES"]);
    let again = Request::reparse(sent.raw()).expect("one whole command");
    assert_eq!(args(&again), args(&sent));
    assert_eq!(
        again.raw().as_ptr(),
        sent.raw().as_ptr(),
        "the same bytes, not a copy"
    );
    let long = Request::from_args((0..20).map(|i| format!("a{i}")));
    assert_eq!(
        args(&Request::reparse(long.raw()).expect("long")),
        args(&long)
    );
    // Not exactly one command: cut short, followed by more, or not a multibulk at all.
    let raw = sent.raw();
    assert!(Request::reparse(&raw.slice(..raw.len() - 1)).is_none());
    let mut two = raw.to_vec();
    two.extend_from_slice(raw);
    assert!(Request::reparse(&Bytes::from(two)).is_none());
    for other in [
        &b"GET k\r\n"[..],
        b"*0\r\n",
        b"*-1\r\n",
        b"",
        b"*1\r\n:1\r\n",
    ] {
        assert!(
            Request::reparse(&Bytes::copy_from_slice(other)).is_none(),
            "{other:?}"
        );
    }
}
