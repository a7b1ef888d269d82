//! Feeding input one byte at a time, or split at any position, gives the same result as whole.

use super::{frame_lens, frames, requests};
use crate::protocol::{Limits, ProtocolError};

/// Every way of delivering `input` we check: whole, byte by byte, and in two at each position.
fn deliveries(input: &[u8]) -> Vec<Vec<&[u8]>> {
    let mut ways = vec![vec![input], input.chunks(1).collect()];
    ways.extend((0..=input.len()).map(|at| {
        let (head, tail) = input.split_at(at);
        vec![head, tail]
    }));
    ways
}

fn limits() -> Limits {
    Limits {
        max_bulk_len: 16,
        max_array_len: 4,
        max_inline_len: 12,
        max_depth: 3,
    }
}

/// Requests, and how many each input yields when whole (so the comparison is not vacuous).
const REQUESTS: &[(&[u8], usize, Option<ProtocolError>)] = &[
    (
        b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\n*0\r\n\r\n*-1\r\nPING\n",
        3,
        None,
    ),
    (
        b"S \"a b\\x41\"\r\n'x\\'y' z\n\n*1\r\n$16\r\n0123456789abcdef\r\n",
        3,
        None,
    ),
    (
        b"*1\r\n$0\r\n\r\n*1\r\n$2\r\n\r\n\r\n*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n",
        3,
        None,
    ),
    (
        b"PING\r\n*1\r\n:1\r\n",
        1,
        Some(ProtocolError::ExpectedBulk(b':')),
    ),
    (
        b"PING\r\n*5\r\n",
        1,
        Some(ProtocolError::InvalidMultibulkLength),
    ),
    (b"*1\r\n$17\r\n", 0, Some(ProtocolError::InvalidBulkLength)),
    (b"*1\r\n$3\r\nabc\n\n", 0, Some(ProtocolError::ExpectedCrlf)),
    (
        b"*1\r\n$1234567890123",
        0,
        Some(ProtocolError::BulkCountTooBig),
    ),
    (
        b"*1234567890123\r\n",
        0,
        Some(ProtocolError::MultibulkCountTooBig),
    ),
    (b"GET 123456789\r\n", 0, Some(ProtocolError::InlineTooBig)),
    (
        b"GET 12345678\r\nGET \"a\r\n",
        1,
        Some(ProtocolError::UnbalancedQuotes),
    ),
    (b"*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPI", 1, None),
];

const REPLIES: &[(&[u8], usize, Option<ProtocolError>)] = &[
    (
        b"+OK\r\n-ERR x\r\n:-2\r\n$3\r\na\r\n\r\n$-1\r\n*-1\r\n*0\r\n",
        7,
        None,
    ),
    (b"*3\r\n*2\r\n:1\r\n$0\r\n\r\n+\r\n*1\r\n*-1\r\n", 1, None),
    (
        b":1\r\n*1\r\n*1\r\n*1\r\n*1\r\n",
        1,
        Some(ProtocolError::NestingTooDeep),
    ),
    (b":1\r\n$17\r\n", 1, Some(ProtocolError::InvalidBulkLength)),
    (b":1\r\n$1\r\nabc", 1, Some(ProtocolError::ExpectedCrlf)),
    (b":1\r\n:x\r\n", 1, Some(ProtocolError::InvalidInteger)),
    (
        b":1\r\n@\r\n",
        1,
        Some(ProtocolError::InvalidReplyType(b'@')),
    ),
    (b":1\r\n$3\r\nab", 1, None),
];

#[test]
fn requests_do_not_depend_on_chunking() {
    for &(input, count, ref error) in REQUESTS {
        let whole = requests([input], &limits());
        assert_eq!(
            (whole.items.len(), &whole.error),
            (count, error),
            "{:?}",
            input.escape_ascii().to_string()
        );
        for chunks in deliveries(input) {
            assert_eq!(
                requests(chunks.iter().copied(), &limits()),
                whole,
                "{chunks:?}"
            );
        }
    }
}

#[test]
fn replies_do_not_depend_on_chunking() {
    for &(input, count, ref error) in REPLIES {
        let whole = frames([input], &limits());
        assert_eq!(
            (whole.items.len(), &whole.error),
            (count, error),
            "{:?}",
            input.escape_ascii().to_string()
        );
        let whole_lens = frame_lens([input], &limits());
        assert_eq!((whole_lens.items.len(), &whole_lens.error), (count, error));
        for chunks in deliveries(input) {
            assert_eq!(
                frames(chunks.iter().copied(), &limits()),
                whole,
                "{chunks:?}"
            );
            assert_eq!(
                frame_lens(chunks.iter().copied(), &limits()),
                whole_lens,
                "{chunks:?}"
            );
        }
    }
}
