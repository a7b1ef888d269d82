//! The fuzz entry point: checks the parsers' invariants on arbitrary bytes, panicking on a violation.

use bytes::BytesMut;

use super::{parse_request, reply_frame_len, Frame, Limits, ProtocolError};

/// Run every parser over `data` and panic if an invariant breaks. A cargo-fuzz target calls
/// this; keeping the logic in the crate lets unit tests and proptests run it too.
///
/// Invariants: nothing panics; feeding the input in two chunks (split where `data[0]` says)
/// gives the same results as feeding it whole; `reply_frame_len` agrees with how much
/// `Frame::parse` consumes; a parsed frame re-encodes to bytes that parse back to it.
pub fn fuzz_logic(data: &[u8]) {
    // Small limits so the edges are reachable from short inputs.
    let limits = Limits {
        max_bulk_len: 64,
        max_array_len: 8,
        max_inline_len: 32,
        max_depth: 4,
    };
    let split = data
        .first()
        .map_or(0, |&b| usize::from(b) % (data.len() + 1));
    let (head, tail) = data.split_at(split);

    let whole = drain([data], |buf| parse_request(buf, &limits));
    let chunked = drain([head, tail], |buf| parse_request(buf, &limits));
    assert_eq!(whole, chunked, "requests depend on chunking");

    let whole = drain([data], |buf| Frame::parse(buf, &limits));
    let chunked = drain([head, tail], |buf| Frame::parse(buf, &limits));
    assert_eq!(whole, chunked, "frames depend on chunking");

    if let Ok(Some(len)) = reply_frame_len(data, &limits) {
        let mut buf = BytesMut::from(data);
        match Frame::parse(&mut buf, &limits) {
            Ok(Some(frame)) => {
                assert_eq!(
                    data.len() - buf.len(),
                    len,
                    "reply_frame_len disagrees with Frame::parse"
                );
                let again = Frame::from_bytes(frame.to_bytes(), &limits);
                assert_eq!(again.as_ref(), Ok(&frame), "frame does not round-trip");
            }
            Ok(None) => panic!("reply_frame_len found a frame that Frame::parse calls incomplete"),
            Err(err) => assert!(matches!(err, ProtocolError::Resp3Unsupported(_)), "{err}"),
        }
    }
}

/// Everything a parser yields from `chunks` fed one after another, as a connection would.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Drained<T> {
    pub(crate) items: Vec<T>,
    /// The error that stopped parsing; the input after it was never fed.
    pub(crate) error: Option<ProtocolError>,
    /// Bytes left unparsed when the input ran out (empty after an error).
    pub(crate) rest: Vec<u8>,
}

/// Feed `chunks` into one buffer, parsing all that can be parsed after each.
pub(crate) fn drain<'a, T>(
    chunks: impl IntoIterator<Item = &'a [u8]>,
    mut parse: impl FnMut(&mut BytesMut) -> Result<Option<T>, ProtocolError>,
) -> Drained<T> {
    let mut buf = BytesMut::new();
    let mut items = Vec::new();
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        loop {
            match parse(&mut buf) {
                Ok(Some(item)) => items.push(item),
                Ok(None) => break,
                Err(err) => {
                    return Drained {
                        items,
                        error: Some(err),
                        rest: Vec::new(),
                    }
                }
            }
        }
    }
    Drained {
        items,
        error: None,
        rest: buf.to_vec(),
    }
}
