//! Measuring one complete reply frame (RESP2 and RESP3) without allocating, for pass-through.
//!
//! Who calls it: every node connection, for every reply, to cut the reply off its read buffer and
//! hand it on as a slice (no parse into a tree, no copy). What holds: a length is returned only for
//! a frame that is complete and well-formed as far as its framing goes (headers parse, integers are
//! integers, bulks end in CRLF), so what is handed on can always be parsed later by `Frame`; an
//! incomplete frame is `None` however it was split across reads; nesting is bounded by
//! `limits.max_depth` and bulk sizes by `limits.max_bulk_len`, so a corrupt or hostile stream fails
//! the connection instead of exhausting the stack or memory.

use super::line::{find_crlf, parse_i64, payload_end, read_header, LineEnd};
use super::{Limits, ProtocolError};

/// Length in bytes of the complete reply frame at the front of `buf`, or `None` if incomplete.
///
/// Allocates nothing, so the upstream reader can cut replies off its buffer and forward them
/// untouched. Understands RESP2 (`+ - : $ *`, with null `$-1` and `*-1`) and RESP3 (`_ , # ( ! =
/// ~ > %`, and `|` attributes, which are counted as part of the frame they precede), so a
/// client that switched to RESP3 with `HELLO 3` still works. Streamed RESP3 aggregates (`*?`)
/// are rejected. Bulks are jumped over by their length; only header lines are scanned.
#[inline]
pub fn reply_frame_len(buf: &[u8], limits: &Limits) -> Result<Option<usize>, ProtocolError> {
    frame_end(buf, 0, limits, 0)
}

/// The integer on the header line that starts `buf` when it is a `kind` header (`*3\r\n`,
/// `$5\r\n`), and the offset just past the line; `None` for another kind or a line that is
/// incomplete or not a number. For looking into replies already framed.
#[inline]
pub fn header_value(buf: &[u8], kind: u8) -> Option<(i64, usize)> {
    if buf.first() != Some(&kind) {
        return None;
    }
    use ProtocolError::InvalidBulkLength;
    read_header(buf, 0, usize::MAX, InvalidBulkLength, InvalidBulkLength)
        .ok()
        .flatten()
}

/// End of the frame starting at `pos`, which is inside `depth` aggregates.
///
/// `depth` is how many aggregates enclose `pos`; past `limits.max_depth` the frame is refused.
pub(crate) fn frame_end(
    buf: &[u8],
    mut pos: usize,
    limits: &Limits,
    depth: usize,
) -> Result<Option<usize>, ProtocolError> {
    // Attributes are skipped in a loop, not by recursion, so a chain of them cannot blow the stack.
    while buf.get(pos) == Some(&b'|') {
        match aggregate_end(buf, pos, limits, depth, 2)? {
            Some(next) => pos = next,
            None => return Ok(None),
        }
    }
    let Some(&ty) = buf.get(pos) else {
        return Ok(None);
    };
    match ty {
        b'+' | b'-' | b'_' | b',' | b'#' | b'(' => line_end(buf, pos),
        b':' => integer_end(buf, pos),
        b'$' | b'!' | b'=' => blob_end(buf, pos, limits),
        b'*' | b'~' | b'>' => aggregate_end(buf, pos, limits, depth, 1),
        b'%' => aggregate_end(buf, pos, limits, depth, 2),
        other => Err(ProtocolError::InvalidReplyType(other)),
    }
}

/// End of a simple line frame; reply lines have no length limit because Redis sends short ones.
fn line_end(buf: &[u8], pos: usize) -> Result<Option<usize>, ProtocolError> {
    match find_crlf(buf, pos + 1, usize::MAX) {
        LineEnd::Found(cr) => Ok(Some(cr + 2)),
        LineEnd::Incomplete | LineEnd::TooLong => Ok(None),
        LineEnd::BareCr => Err(ProtocolError::ExpectedCrlf),
    }
}

/// Integers are validated here too, so every frame this accepts `Frame` can also parse.
fn integer_end(buf: &[u8], pos: usize) -> Result<Option<usize>, ProtocolError> {
    let Some(end) = line_end(buf, pos)? else {
        return Ok(None);
    };
    match buf.get(pos + 1..end - 2).and_then(parse_i64) {
        Some(_) => Ok(Some(end)),
        None => Err(ProtocolError::InvalidInteger),
    }
}

/// A bulk, verbatim or blob error: the header's length, then that many bytes and CRLF. `$-1`
/// (RESP2's null) is a whole frame by itself; a length above `limits.max_bulk_len` is refused
/// before waiting for the bytes.
fn blob_end(buf: &[u8], pos: usize, limits: &Limits) -> Result<Option<usize>, ProtocolError> {
    use ProtocolError::InvalidBulkLength;
    let Some((len, start)) =
        read_header(buf, pos, usize::MAX, InvalidBulkLength, InvalidBulkLength)?
    else {
        return Ok(None);
    };
    if len == -1 && buf.get(pos) == Some(&b'$') {
        return Ok(Some(start));
    }
    let len = usize::try_from(len)
        .ok()
        .filter(|&n| n <= limits.max_bulk_len)
        .ok_or(InvalidBulkLength)?;
    payload_end(buf, start, len)
}

/// End of an aggregate of `count * per_entry` frames (maps and attributes hold pairs).
fn aggregate_end(
    buf: &[u8],
    pos: usize,
    limits: &Limits,
    depth: usize,
    per_entry: u64,
) -> Result<Option<usize>, ProtocolError> {
    use ProtocolError::InvalidMultibulkLength;
    let Some((count, mut next)) = read_header(
        buf,
        pos,
        usize::MAX,
        InvalidMultibulkLength,
        InvalidMultibulkLength,
    )?
    else {
        return Ok(None);
    };
    if count == -1 && buf.get(pos) == Some(&b'*') {
        return Ok(Some(next));
    }
    if depth >= limits.max_depth {
        return Err(ProtocolError::NestingTooDeep);
    }
    // No element-count limit: every element needs at least 3 bytes, so a huge count only makes
    // us report "incomplete" once the bytes run out.
    let count = u64::try_from(count).map_err(|_| InvalidMultibulkLength)?;
    for _ in 0..count.saturating_mul(per_entry) {
        match frame_end(buf, next, limits, depth + 1)? {
            Some(end) => next = end,
            None => return Ok(None),
        }
    }
    Ok(Some(next))
}

#[cfg(test)]
mod tests;
