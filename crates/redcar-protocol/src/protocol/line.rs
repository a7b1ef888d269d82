//! Finding CRLF-terminated header lines and parsing their integers exactly as Redis does.

use memchr::memchr;

use super::ProtocolError;

/// Where the line that starts at some offset ends.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum LineEnd {
    /// Index of the `\r` of the terminating `\r\n`.
    Found(usize),
    /// No complete `\r\n` yet, and the line is still within its limit.
    Incomplete,
    /// The line already exceeds its limit, terminated or not.
    TooLong,
    /// A `\r` followed by something other than `\n`.
    BareCr,
}

/// Find the `\r\n` ending the line that starts at `from`; the line may be at most `max` bytes.
///
/// Like Redis we stop at the first `\r`. The limit is checked on what has arrived so far, and
/// that only ever grows, so the outcome does not depend on how the input was chunked.
pub(crate) fn find_crlf(buf: &[u8], from: usize, max: usize) -> LineEnd {
    let rest = buf.get(from..).unwrap_or_default();
    match first_cr(rest) {
        Some(len) if len > max => LineEnd::TooLong,
        Some(len) => match rest.get(len + 1) {
            None => LineEnd::Incomplete,
            Some(b'\n') => LineEnd::Found(from + len),
            Some(_) => LineEnd::BareCr,
        },
        None if rest.len() > max => LineEnd::TooLong,
        None => LineEnd::Incomplete,
    }
}

/// Header lines are short (`$3`, `*2`, at most 20 digits and a sign): look at this many bytes
/// one by one before handing the rest to `memchr`, whose set-up costs more than such a line.
const SHORT_LINE: usize = 24;

/// Index of the first `\r` in `bytes`, exactly as `memchr` would find it.
#[inline]
fn first_cr(bytes: &[u8]) -> Option<usize> {
    let (head, tail) = bytes.split_at(bytes.len().min(SHORT_LINE));
    head.iter()
        .position(|&b| b == b'\r')
        .or_else(|| memchr(b'\r', tail).map(|i| i + head.len()))
}

/// Parse a decimal `i64` with Redis's `string2ll` rules: optional `-`, no `+`, no leading zeros,
/// no `-0`, no spaces, no overflow. Being as strict as Redis keeps us from accepting a request
/// that the server behind us would reject differently.
pub(crate) fn parse_i64(s: &[u8]) -> Option<i64> {
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    match digits {
        [b'0'] if !negative => return Some(0),
        [b'1'..=b'9', ..] => {}
        _ => return None,
    }
    let mut value: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        let d = i64::from(d - b'0');
        // Accumulate negatives downwards so i64::MIN is representable.
        value = if negative {
            value.checked_mul(10)?.checked_sub(d)?
        } else {
            value.checked_mul(10)?.checked_add(d)?
        };
    }
    Some(value)
}

/// Parse the integer on the header line whose type byte is at `pos`; the line may be at most
/// `max` bytes, else `too_long`; a line that is not a number is `invalid`.
/// `Ok(None)` if incomplete, else the value and the offset just past the CRLF.
///
/// Inlined: every request pays it once per argument, and the shortcut is a few compares; the
/// general path stays out of line.
#[inline]
pub(crate) fn read_header(
    buf: &[u8],
    pos: usize,
    max: usize,
    too_long: ProtocolError,
    invalid: ProtocolError,
) -> Result<Option<(i64, usize)>, ProtocolError> {
    // Nearly every header is one or two digits (`*3`, `$16`) or `-1`: read those without the line
    // search. Anything else (more digits, a sign, an incomplete or malformed line) takes the
    // general path below, which gives the same answer for these (`max` below 2 included).
    let line = if max >= 2 { buf.get(pos + 1..) } else { None };
    match line.unwrap_or_default() {
        [d @ b'0'..=b'9', b'\r', b'\n', ..] => return Ok(Some((i64::from(d - b'0'), pos + 4))),
        [d1 @ b'1'..=b'9', d2 @ b'0'..=b'9', b'\r', b'\n', ..] => {
            let n = i64::from(d1 - b'0') * 10 + i64::from(d2 - b'0');
            return Ok(Some((n, pos + 5)));
        }
        // The null bulk string, the reply to every GET of a missing key.
        [b'-', b'1', b'\r', b'\n', ..] => return Ok(Some((-1, pos + 5))),
        _ => {}
    }
    read_any_header(buf, pos, max, too_long, invalid)
}

/// [`read_header`] without its shortcut: finds the line's end, then parses it.
#[inline(never)]
fn read_any_header(
    buf: &[u8],
    pos: usize,
    max: usize,
    too_long: ProtocolError,
    invalid: ProtocolError,
) -> Result<Option<(i64, usize)>, ProtocolError> {
    match find_crlf(buf, pos + 1, max) {
        LineEnd::Incomplete => Ok(None),
        LineEnd::TooLong => Err(too_long),
        LineEnd::BareCr => Err(invalid),
        LineEnd::Found(cr) => buf
            .get(pos + 1..cr)
            .and_then(parse_i64)
            .map(|n| Some((n, cr + 2)))
            .ok_or(invalid),
    }
}

/// Check that `len` bytes of payload starting at `start` are followed by CRLF.
/// `Ok(None)` if incomplete, else the offset just past the CRLF.
pub(crate) fn payload_end(
    buf: &[u8],
    start: usize,
    len: usize,
) -> Result<Option<usize>, ProtocolError> {
    // Jump over the payload by its length: a big bulk arriving in many reads is never scanned.
    let end = start
        .checked_add(len)
        .ok_or(ProtocolError::InvalidBulkLength)?;
    match buf.get(end..end.saturating_add(2)) {
        Some(b"\r\n") => Ok(Some(end + 2)),
        Some(_) => Err(ProtocolError::ExpectedCrlf),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_i64_follows_string2ll() {
        for (s, want) in [
            (&b"0"[..], Some(0)),
            (b"1", Some(1)),
            (b"-1", Some(-1)),
            (b"9223372036854775807", Some(i64::MAX)),
            (b"-9223372036854775808", Some(i64::MIN)),
            (b"9223372036854775808", None),
            (b"-9223372036854775809", None),
            (b"", None),
            (b"-", None),
            (b"-0", None),
            (b"01", None),
            (b"+1", None),
            (b" 1", None),
            (b"1 ", None),
            (b"1a", None),
        ] {
            assert_eq!(parse_i64(s), want, "{:?}", s.escape_ascii().to_string());
        }
    }

    #[test]
    fn first_cr_agrees_with_memchr_on_both_sides_of_the_short_window() {
        for len in [0, 1, SHORT_LINE - 1, SHORT_LINE, SHORT_LINE + 1, 100] {
            for at in 0..=len {
                let mut bytes = vec![b'7'; len];
                if at < len {
                    bytes[at] = b'\r';
                }
                assert_eq!(first_cr(&bytes), memchr(b'\r', &bytes), "len {len} at {at}");
            }
        }
    }

    #[test]
    fn short_headers_read_as_the_general_path_reads_them() {
        // Every line of up to five bytes from these (digits, signs, CR, LF, junk), cut at
        // every length, at two offsets, with limits around the shortcut's two digits.
        let alphabet = b"0159-\r\nx";
        let mut lines: Vec<Vec<u8>> = vec![Vec::new()];
        let mut shorter = lines.clone();
        for _ in 0..5 {
            shorter = shorter
                .iter()
                .flat_map(|l| alphabet.iter().map(move |&b| [&l[..], &[b]].concat()))
                .collect();
            lines.extend(shorter.iter().cloned());
        }
        for line in &lines {
            for pad in [0, 3] {
                let mut buf = vec![b'*'; pad + 1];
                buf.extend_from_slice(line);
                for max in [0, 1, 2, 3, 64] {
                    let fast = read_header(
                        &buf,
                        pad,
                        max,
                        ProtocolError::BulkCountTooBig,
                        ProtocolError::InvalidBulkLength,
                    );
                    let slow = read_any_header(
                        &buf,
                        pad,
                        max,
                        ProtocolError::BulkCountTooBig,
                        ProtocolError::InvalidBulkLength,
                    );
                    assert_eq!(
                        format!("{fast:?}"),
                        format!("{slow:?}"),
                        "{:?} at {pad}, max {max}",
                        buf.escape_ascii().to_string()
                    );
                }
            }
        }
    }

    #[test]
    fn find_crlf_limits_line_length_at_the_edge() {
        assert_eq!(find_crlf(b"*abc\r\n", 1, 3), LineEnd::Found(4));
        assert_eq!(find_crlf(b"*abcd\r\n", 1, 3), LineEnd::TooLong);
        assert_eq!(find_crlf(b"*abc", 1, 3), LineEnd::Incomplete);
        assert_eq!(find_crlf(b"*abc\r", 1, 3), LineEnd::Incomplete);
        assert_eq!(find_crlf(b"*abcd", 1, 3), LineEnd::TooLong);
        assert_eq!(find_crlf(b"*ab\rc", 1, 3), LineEnd::BareCr);
    }
}
