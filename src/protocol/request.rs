//! One client command as zero-copy views over its raw bytes, and parsing RESP multibulk requests.

use std::fmt;
use std::ops::Range;

use bytes::{Buf, Bytes, BytesMut};
use smallvec::SmallVec;

use super::encode::{bulk_encoded_len, header_encoded_len, put_header};
use super::line::{payload_end, read_header};
use super::{Limits, ProtocolError};

/// One client command.
///
/// `raw` is the exact RESP multibulk encoding of the command, so the proxy can forward it
/// unchanged: for a RESP request it is the client's own bytes, split off the read buffer; for an
/// inline command it is freshly encoded. `args` are zero-copy slices of `raw`; `args[0]` is the
/// command name as sent, not case-folded.
#[derive(Clone, Default, PartialEq, Eq)]
pub(crate) struct Request {
    raw: Bytes,
    args: Args,
}

/// Arguments kept inline up to this many (`SET key value`, `HSET key field value`), so parsing
/// the commands that make up most traffic allocates nothing; longer ones spill to the heap.
const INLINE_ARGS: usize = 4;

type Args = SmallVec<[Bytes; INLINE_ARGS]>;

impl Request {
    /// The RESP multibulk encoding of the whole command.
    pub(crate) fn raw(&self) -> &Bytes {
        &self.raw
    }

    /// All arguments, the command name first.
    pub(crate) fn args(&self) -> &[Bytes] {
        &self.args
    }

    /// Build a request from its arguments, encoding `raw` as RESP multibulk.
    pub(crate) fn from_args<I, A>(args: I) -> Request
    where
        I: IntoIterator<Item = A>,
        A: AsRef<[u8]>,
    {
        // Collect first: the multibulk header needs the count, and reserving once needs the sizes.
        let args: Vec<A> = args.into_iter().collect();
        let len = header_encoded_len(args.len())
            + args
                .iter()
                .map(|a| bulk_encoded_len(a.as_ref().len()))
                .sum::<usize>();
        let mut out = BytesMut::with_capacity(len);
        put_header(&mut out, b'*', args.len());
        let mut ranges = Vec::with_capacity(args.len());
        for arg in &args {
            let arg = arg.as_ref();
            put_header(&mut out, b'$', arg.len());
            let start = out.len();
            out.extend_from_slice(arg);
            ranges.push(start..out.len());
            out.extend_from_slice(b"\r\n");
        }
        Request::from_ranges(out.freeze(), ranges)
    }

    fn from_ranges(raw: Bytes, ranges: Vec<Range<usize>>) -> Request {
        let args = ranges.into_iter().map(|r| raw.slice(r)).collect();
        Request { raw, args }
    }
}

/// Shows arguments escaped and cut at 64 bytes, so logging a 512 MiB `SET` stays cheap.
impl fmt::Debug for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 64;
        f.write_str("Request ")?;
        let mut list = f.debug_list();
        for arg in &self.args {
            let shown = &arg[..arg.len().min(SHOWN)];
            if arg.len() > SHOWN {
                list.entry(&format_args!(
                    "\"{}\"...({} bytes)",
                    shown.escape_ascii(),
                    arg.len()
                ));
            } else {
                list.entry(&format_args!("\"{}\"", shown.escape_ascii()));
            }
        }
        list.finish()
    }
}

/// What one parse attempt at the front of the buffer found.
pub(crate) enum Step {
    /// Not enough bytes yet; the buffer is untouched.
    Incomplete,
    /// Something Redis ignores (an empty line, `*0`, `*-1`) was removed from the buffer.
    Skipped,
    /// A whole request, removed from the buffer and written to the caller's `Request`.
    Parsed,
}

/// Commands with at most this many arguments (nearly all) are parsed in one pass, their argument
/// ranges kept in a small array on the stack.
const STACK_ARGS: usize = 8;

/// Multi-key commands (a 10-key MGET or MSET, say) are also parsed in one pass, with a larger
/// array; only longer ones are measured first and then parsed.
const STACK_ARGS_LARGE: usize = 32;

/// Parse the multibulk request (`*<n>`) at the front of `buf` into `out`.
pub(super) fn parse_multibulk(
    buf: &mut BytesMut,
    limits: &Limits,
    out: &mut Request,
) -> Result<Step, ProtocolError> {
    use ProtocolError::{InvalidMultibulkLength, MultibulkCountTooBig};
    let header = read_header(
        buf,
        0,
        limits.max_inline_len,
        MultibulkCountTooBig,
        InvalidMultibulkLength,
    )?;
    let Some((count, first)) = header else {
        return Ok(Step::Incomplete);
    };
    if count <= 0 {
        // A count of zero or less, which Redis skips.
        buf.advance(first);
        return Ok(Step::Skipped);
    }
    let count = usize::try_from(count)
        .ok()
        .filter(|&n| n <= limits.max_array_len)
        .ok_or(InvalidMultibulkLength)?;
    if count <= STACK_ARGS {
        parse_on_stack::<STACK_ARGS>(buf, limits, count, first, out)
    } else if count <= STACK_ARGS_LARGE {
        parse_on_stack::<STACK_ARGS_LARGE>(buf, limits, count, first, out)
    } else {
        // Measure first, so an incomplete request never allocates.
        let Some(len) = scan_args(buf, limits, count, first, |_| {})? else {
            return Ok(Step::Incomplete);
        };
        let raw = buf.split_to(len).freeze();
        // The count is of arguments already in the buffer, so reserving it is bounded.
        let mut args = Args::with_capacity(count);
        scan_args(&raw, limits, count, first, |arg| args.push(raw.slice(arg)))?;
        *out = Request { raw, args };
        Ok(Step::Parsed)
    }
}

/// One pass over the `count` (at most `N`) arguments from `first`, their ranges kept on the
/// stack until the request is known to be complete.
fn parse_on_stack<const N: usize>(
    buf: &mut BytesMut,
    limits: &Limits,
    count: usize,
    first: usize,
    out: &mut Request,
) -> Result<Step, ProtocolError> {
    let mut stack: [Range<usize>; N] = std::array::from_fn(|_| 0..0);
    let mut seen = 0;
    let scanned = scan_args(buf, limits, count, first, |arg| {
        if let Some(slot) = stack.get_mut(seen) {
            *slot = arg;
        }
        seen += 1;
    })?;
    let Some(len) = scanned else {
        return Ok(Step::Incomplete);
    };
    let raw = buf.split_to(len).freeze();
    // In place: the slot's argument vector is reused, nothing of the size of a `Request` moves.
    out.args.clear();
    out.args
        .extend(stack[..count.min(N)].iter().map(|r| raw.slice(r.clone())));
    out.raw = raw;
    Ok(Step::Parsed)
}

/// Walks the `count` bulk strings from `pos`, calling `on_arg` with each payload's range;
/// `None` while incomplete, else the offset just past the last one.
fn scan_args(
    buf: &[u8],
    limits: &Limits,
    count: usize,
    mut pos: usize,
    mut on_arg: impl FnMut(Range<usize>),
) -> Result<Option<usize>, ProtocolError> {
    for _ in 0..count {
        let Some((arg, next)) = scan_bulk(buf, pos, limits)? else {
            return Ok(None);
        };
        on_arg(arg);
        pos = next;
    }
    Ok(Some(pos))
}

/// The payload range of the bulk string at `pos` and the offset just past it.
fn scan_bulk(
    buf: &[u8],
    pos: usize,
    limits: &Limits,
) -> Result<Option<(Range<usize>, usize)>, ProtocolError> {
    use ProtocolError::{BulkCountTooBig, InvalidBulkLength};
    match buf.get(pos) {
        None => return Ok(None),
        Some(b'$') => {}
        Some(&other) => return Err(ProtocolError::ExpectedBulk(other)),
    }
    let Some((len, start)) = read_header(
        buf,
        pos,
        limits.max_inline_len,
        BulkCountTooBig,
        InvalidBulkLength,
    )?
    else {
        return Ok(None);
    };
    let len = usize::try_from(len)
        .ok()
        .filter(|&n| n <= limits.max_bulk_len)
        .ok_or(InvalidBulkLength)?;
    Ok(payload_end(buf, start, len)?.map(|next| (start..start + len, next)))
}

#[cfg(test)]
mod tests;
