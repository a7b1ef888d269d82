//! One client command as zero-copy views over its raw bytes, and parsing RESP multibulk requests.

use std::fmt;
use std::ops::Range;

use bytes::{Buf, Bytes, BytesMut};
use smallvec::SmallVec;

use super::args::{Args, Span};
use super::encode::{bulk_encoded_len, header_encoded_len, put_header};
use super::line::{payload_end, read_header};
use super::{Limits, ProtocolError};

/// One client command.
///
/// `raw` is the exact RESP multibulk encoding of the command, so the proxy can forward it
/// unchanged: for a RESP request it is the client's own bytes, split off the read buffer; for an
/// inline command it is freshly encoded. The arguments are spans of `raw` (read through
/// [`Request::args`]); the first is the command name as sent, not case-folded.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Request {
    /// The command as RESP multibulk; forwarded to a node as is.
    raw: Bytes,
    /// Each argument's place in `raw`, the name first; never pointing outside `raw`.
    spans: Spans,
}

/// Argument spans kept inline up to this many (a 3-pair `MSET`, `HSET key` with three fields),
/// so parsing the commands that make up most traffic allocates nothing; longer ones spill to
/// the heap, which a session's request slot then keeps for the next ones.
const INLINE_ARGS: usize = 8;

/// The arguments' spans, inline for most commands.
type Spans = SmallVec<[Span; INLINE_ARGS]>;

impl Request {
    /// The RESP multibulk encoding of the whole command.
    #[inline]
    pub fn raw(&self) -> &Bytes {
        &self.raw
    }

    /// All arguments, the command name first.
    #[inline]
    pub fn args(&self) -> Args<'_> {
        Args::new(&self.raw, &self.spans)
    }

    /// Build a request from its arguments, encoding `raw` as RESP multibulk.
    pub fn from_args<I, A>(args: I) -> Request
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

    /// The request whose whole encoding `raw` is (a forwarded command's payload, which is some
    /// request's [`raw`](Self::raw)): its arguments become spans of `raw` again, without
    /// copying it. `None` when `raw` is not exactly one multibulk command. For the rare paths
    /// that need a sent command's arguments back (what a reply to it means); allocates nothing
    /// for up to eight arguments.
    pub(crate) fn reparse(raw: &Bytes) -> Option<Request> {
        use ProtocolError::InvalidMultibulkLength;
        let limits = Limits::default();
        let header = read_header(
            raw,
            0,
            limits.max_inline_len,
            InvalidMultibulkLength,
            InvalidMultibulkLength,
        );
        let (count, first) = header.ok().flatten()?;
        let count = usize::try_from(count).ok().filter(|&n| n > 0)?;
        let mut spans = Spans::new();
        let end = scan_args(raw, &limits, count, first, |arg| {
            spans.push(Span::new(arg.start, arg.end).ok_or(ProtocolError::RequestTooBig)?);
            Ok(())
        });
        (end.ok().flatten()? == raw.len()).then(|| Request {
            raw: raw.clone(),
            spans,
        })
    }

    /// Spans that do not fit in 32 bits are dropped, which cannot happen for the small requests
    /// built here.
    fn from_ranges(raw: Bytes, ranges: Vec<Range<usize>>) -> Request {
        // Built requests are small (inline commands, tests): their spans fit in 32 bits.
        let spans = ranges
            .into_iter()
            .filter_map(|r| Span::new(r.start, r.end))
            .collect();
        Request { raw, spans }
    }
}

/// Shows arguments escaped and cut at 64 bytes, so logging a 512 MiB `SET` stays cheap.
impl fmt::Debug for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 64;
        f.write_str("Request ")?;
        let mut list = f.debug_list();
        for arg in self.args() {
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
pub(crate) enum ParseStep {
    /// Not enough bytes yet; the buffer is untouched.
    Incomplete,
    /// Something Redis ignores (an empty line, `*0`, `*-1`) was removed from the buffer.
    Skipped,
    /// A whole request, removed from the buffer and written to the caller's `Request`.
    Parsed,
}

/// Parse the multibulk request (`*<n>`) at the front of `buf` into `out`.
///
/// The spans go straight into `out` when it has room for `count` of them (always up to
/// [`INLINE_ARGS`], and a session's slot keeps the room of its longest request); a longer
/// request is measured first, so an incomplete one never allocates. On `Incomplete` or an
/// error `out` holds its earlier request whole or no arguments at all, never spans that point
/// into other bytes. Inlined into `parse_request_into`: the common request's whole parse.
#[inline]
pub(super) fn parse_multibulk(
    buf: &mut BytesMut,
    limits: &Limits,
    out: &mut Request,
) -> Result<ParseStep, ProtocolError> {
    use ProtocolError::{InvalidMultibulkLength, MultibulkCountTooBig};
    let header = read_header(
        buf,
        0,
        limits.max_inline_len,
        MultibulkCountTooBig,
        InvalidMultibulkLength,
    )?;
    let Some((count, first)) = header else {
        return Ok(ParseStep::Incomplete);
    };
    if count <= 0 {
        // A count of zero or less, which Redis skips.
        buf.advance(first);
        return Ok(ParseStep::Skipped);
    }
    let count = usize::try_from(count)
        .ok()
        .filter(|&n| n <= limits.max_array_len)
        .ok_or(InvalidMultibulkLength)?;
    out.spans.clear();
    if count > out.spans.capacity() {
        // Measure first; the count is then of arguments already in the buffer, so reserving
        // it is bounded.
        if scan_args(buf, limits, count, first, |_| Ok(()))?.is_none() {
            return Ok(ParseStep::Incomplete);
        }
        out.spans.reserve_exact(count);
    }
    let spans = &mut out.spans;
    let scanned = scan_args(buf, limits, count, first, |arg| {
        // Only an argument past 4 GiB does not fit, and `client.max_request_bytes` (below
        // 4 GiB) closes the client before one could arrive.
        spans.push(Span::new(arg.start, arg.end).ok_or(ProtocolError::RequestTooBig)?);
        Ok(())
    });
    let len = match scanned {
        Ok(Some(len)) => len,
        Ok(None) => {
            out.spans.clear();
            return Ok(ParseStep::Incomplete);
        }
        Err(e) => {
            out.spans.clear();
            return Err(e);
        }
    };
    out.raw = buf.split_to(len).freeze();
    Ok(ParseStep::Parsed)
}

/// Walks the `count` bulk strings from `pos`, calling `on_arg` with each payload's range;
/// `None` while incomplete, else the offset just past the last one.
fn scan_args(
    buf: &[u8],
    limits: &Limits,
    count: usize,
    mut pos: usize,
    mut on_arg: impl FnMut(Range<usize>) -> Result<(), ProtocolError>,
) -> Result<Option<usize>, ProtocolError> {
    for _ in 0..count {
        let Some((arg, next)) = scan_bulk(buf, pos, limits)? else {
            return Ok(None);
        };
        on_arg(arg)?;
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
