//! Parsing one request from the front of a client's buffer: a RESP multibulk (`*`) or, for any
//! other first byte, an inline command.

use bytes::BytesMut;

use super::inline::parse_inline;
use super::request::{parse_multibulk, ParseStep, Request};
use super::{Limits, ProtocolError};

/// Parse one request from the front of `buf`, removing its bytes.
///
/// `Ok(None)` means more bytes are needed; things Redis silently ignores (empty inline lines,
/// `*0`, `*-1`) are removed along the way. Any first byte other than `*` starts an inline
/// command. On error the buffer is left as it was and the connection should be closed after
/// replying `-ERR Protocol error: <error>`.
#[inline]
pub fn parse_request(
    buf: &mut BytesMut,
    limits: &Limits,
) -> Result<Option<Request>, ProtocolError> {
    let mut request = Request::default();
    Ok(parse_request_into(buf, limits, &mut request)?.then_some(request))
}

/// [`parse_request`] into a `Request` the caller keeps, replacing what it held: whether a
/// request was parsed (on `false` or an error, `out` is unspecified). A session parses every
/// command into one slot and lends it by reference, instead of moving a 168-byte `Request`
/// through the parser's and the session's returns (about a dozen `memcpy` calls per command, a
/// visible share of a pipelined command's cost).
#[inline]
pub fn parse_request_into(
    buf: &mut BytesMut,
    limits: &Limits,
    out: &mut Request,
) -> Result<bool, ProtocolError> {
    loop {
        let step = match buf.first() {
            None => return Ok(false),
            Some(b'*') => parse_multibulk(buf, limits, out)?,
            Some(_) => parse_inline(buf, limits, out)?,
        };
        match step {
            ParseStep::Incomplete => return Ok(false),
            ParseStep::Skipped => continue,
            ParseStep::Parsed => return Ok(true),
        }
    }
}
