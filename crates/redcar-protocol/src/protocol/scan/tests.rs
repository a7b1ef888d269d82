//! Reply framing: every RESP2 and RESP3 type, nulls, errors, and the nesting limit at its edge.

use crate::protocol::{reply_frame_len, Limits, ProtocolError};

fn len_of(input: &[u8]) -> Result<Option<usize>, ProtocolError> {
    reply_frame_len(input, &Limits::default())
}

/// `n` arrays nested inside each other around one integer.
fn nested(n: usize) -> Vec<u8> {
    let mut out = b"*1\r\n".repeat(n);
    out.extend(b":1\r\n");
    out
}

const RESP2: &[&[u8]] = &[
    b"+OK\r\n",
    b"+\r\n",
    b"-ERR unknown command\r\n",
    b":0\r\n",
    b":-2\r\n",
    b":9223372036854775807\r\n",
    b"$3\r\nabc\r\n",
    b"$0\r\n\r\n",
    b"$4\r\n\r\n\r\n\r\n",
    b"$-1\r\n",
    b"*-1\r\n",
    b"*0\r\n",
    b"*3\r\n:1\r\n$-1\r\n*2\r\n+a\r\n-b\r\n",
];

const RESP3: &[&[u8]] = &[
    b"_\r\n",
    b",3.14\r\n",
    b",inf\r\n",
    b"#t\r\n",
    b"(3492890328409238509324850943850943825024385\r\n",
    b"!21\r\nSYNTAX invalid syntax\r\n",
    b"=15\r\ntxt:Some string\r\n",
    b"~2\r\n:1\r\n:2\r\n",
    b">3\r\n+message\r\n+chan\r\n$2\r\nhi\r\n",
    b"%2\r\n+a\r\n:1\r\n+b\r\n%0\r\n",
    b"|1\r\n+ttl\r\n:3600\r\n$1\r\nv\r\n",
    b"*2\r\n|1\r\n+k\r\n+v\r\n:1\r\n_\r\n",
];

#[test]
fn measures_each_type_and_ignores_what_follows() {
    for frame in RESP2.iter().chain(RESP3) {
        assert_eq!(
            len_of(frame),
            Ok(Some(frame.len())),
            "{:?}",
            frame.escape_ascii().to_string()
        );
        let mut followed = frame.to_vec();
        followed.extend(b"+NEXT\r\n");
        assert_eq!(len_of(&followed), Ok(Some(frame.len())));
    }
}

#[test]
fn every_proper_prefix_is_incomplete() {
    for frame in RESP2.iter().chain(RESP3) {
        for len in 0..frame.len() {
            assert_eq!(
                len_of(&frame[..len]),
                Ok(None),
                "{:?}",
                frame[..len].escape_ascii().to_string()
            );
        }
    }
}

#[test]
fn unknown_type_byte_is_rejected() {
    assert_eq!(len_of(b"x\r\n"), Err(ProtocolError::InvalidReplyType(b'x')));
    assert_eq!(len_of(b"*1\r\n\0"), Err(ProtocolError::InvalidReplyType(0)));
    assert_eq!(
        ProtocolError::InvalidReplyType(b'x').to_string(),
        "invalid reply type byte 0x78"
    );
}

#[test]
fn bad_lengths_and_integers_are_rejected() {
    for (input, err) in [
        (&b"$x\r\n"[..], ProtocolError::InvalidBulkLength),
        (b"$-2\r\n", ProtocolError::InvalidBulkLength),
        (b"!-1\r\n", ProtocolError::InvalidBulkLength),
        (b"$?\r\n", ProtocolError::InvalidBulkLength),
        (b"$999999999999\r\n", ProtocolError::InvalidBulkLength),
        (b"*x\r\n", ProtocolError::InvalidMultibulkLength),
        (b"*-2\r\n", ProtocolError::InvalidMultibulkLength),
        (b"~-1\r\n", ProtocolError::InvalidMultibulkLength),
        (b"*?\r\n", ProtocolError::InvalidMultibulkLength),
        (b":x\r\n", ProtocolError::InvalidInteger),
        (b":\r\n", ProtocolError::InvalidInteger),
        (b":9223372036854775808\r\n", ProtocolError::InvalidInteger),
        (b"$3\r\nabcxx", ProtocolError::ExpectedCrlf),
        (b"+OK\rx", ProtocolError::ExpectedCrlf),
    ] {
        assert_eq!(
            len_of(input),
            Err(err),
            "{:?}",
            input.escape_ascii().to_string()
        );
    }
}

#[test]
fn bulk_length_limit_edge() {
    let limits = Limits {
        max_bulk_len: 3,
        ..Limits::default()
    };
    assert_eq!(reply_frame_len(b"$3\r\nabc\r\n", &limits), Ok(Some(9)));
    assert_eq!(
        reply_frame_len(b"$4\r\n", &limits),
        Err(ProtocolError::InvalidBulkLength)
    );
    assert_eq!(
        reply_frame_len(b"!4\r\n", &limits),
        Err(ProtocolError::InvalidBulkLength)
    );
}

#[test]
fn nesting_limit_edge() {
    let limits = Limits {
        max_depth: 2,
        ..Limits::default()
    };
    assert_eq!(
        reply_frame_len(&nested(2), &limits),
        Ok(Some(nested(2).len()))
    );
    assert_eq!(
        reply_frame_len(&nested(3), &limits),
        Err(ProtocolError::NestingTooDeep)
    );
    // Null arrays are leaves, and maps count as aggregates.
    assert_eq!(
        reply_frame_len(b"*1\r\n*1\r\n*-1\r\n", &limits),
        Ok(Some(13))
    );
    assert_eq!(
        reply_frame_len(b"*1\r\n%1\r\n~0\r\n:1\r\n", &limits),
        Err(ProtocolError::NestingTooDeep)
    );
    let default = Limits::default();
    assert_eq!(
        reply_frame_len(&nested(64), &default),
        Ok(Some(nested(64).len()))
    );
    assert_eq!(
        reply_frame_len(&nested(65), &default),
        Err(ProtocolError::NestingTooDeep)
    );
    assert_eq!(
        ProtocolError::NestingTooDeep.to_string(),
        "nesting too deep"
    );
}

#[test]
fn nesting_is_rejected_before_the_frame_is_complete() {
    let limits = Limits {
        max_depth: 2,
        ..Limits::default()
    };
    assert_eq!(
        reply_frame_len(b"*1\r\n*1\r\n*1\r\n", &limits),
        Err(ProtocolError::NestingTooDeep)
    );
}

#[test]
fn long_attribute_chain_does_not_recurse() {
    let mut input = b"|0\r\n".repeat(200_000);
    input.extend(b":1\r\n");
    assert_eq!(len_of(&input), Ok(Some(input.len())));
}

#[test]
fn huge_count_with_few_bytes_is_just_incomplete() {
    assert_eq!(len_of(b"*999999999999\r\n:1\r\n:2\r\n"), Ok(None));
    assert_eq!(len_of(b"%9223372036854775807\r\n:1\r\n"), Ok(None));
}

#[test]
fn bulk_payload_is_jumped_over_not_scanned() {
    // The payload looks like an invalid frame; only its length matters.
    let mut input = b"$100\r\n".to_vec();
    input.extend(b"x\r\n".repeat(33));
    input.extend(b"y\r\n");
    assert_eq!(len_of(&input), Ok(Some(input.len())));
}
