//! Inline commands (`PING\r\n` typed into telnet), split with Redis's `sdssplitargs` quoting rules.
//!
//! Why match Redis byte for byte: a client that works against redis-server with inline commands
//! (health checks, `redis-cli` piping, people typing into telnet) must get the same arguments
//! through redcar, or the same line could mean two different commands. What holds: a line longer
//! than `limits.max_inline_len` is refused whether or not its end has arrived yet, so a client
//! cannot make redcar buffer an endless line; the outcome never depends on how the input was split
//! across reads.

use bytes::{Buf, BytesMut};
use memchr::memchr;

use super::request::ParseStep;
use super::{Limits, ProtocolError, Request};

/// Parse the inline command line at the front of `buf`.
///
/// The line ends at `\n`, with an optional `\r` before it. A line that splits into no
/// arguments (empty or blank) is skipped, as Redis does.
///
/// Consumes the line (and its line ending) from `buf` only when it is complete; an incomplete line
/// is left untouched for the next read. Unbalanced quotes are a protocol error, which closes the
/// connection as in Redis.
pub(crate) fn parse_inline(
    buf: &mut BytesMut,
    limits: &Limits,
    out: &mut Request,
) -> Result<ParseStep, ProtocolError> {
    let Some(newline) = memchr(b'\n', buf) else {
        // A trailing `\r` may be the start of the line ending, so don't count it yet; this keeps
        // the outcome independent of how the input was chunked.
        let pending = buf.len() - usize::from(buf.last() == Some(&b'\r'));
        if pending > limits.max_inline_len {
            return Err(ProtocolError::InlineTooBig);
        }
        return Ok(ParseStep::Incomplete);
    };
    let line_len = match newline.checked_sub(1) {
        Some(cr) if buf[cr] == b'\r' => cr,
        _ => newline,
    };
    if line_len > limits.max_inline_len {
        return Err(ProtocolError::InlineTooBig);
    }
    let args = split_args(&buf[..line_len])?;
    buf.advance(newline + 1);
    if args.is_empty() {
        Ok(ParseStep::Skipped)
    } else {
        *out = Request::from_args(args);
        Ok(ParseStep::Parsed)
    }
}

/// Split a line into arguments like Redis's `sdssplitargs`.
///
/// Arguments are separated by whitespace. `"double quotes"` understand `\n \r \t \b \a \\ \"`
/// and `\xHH`, and any other `\c` is `c`; `'single quotes'` understand only `\'`. A closing quote
/// must be followed by whitespace or the end of the line. sdssplitargs reads a C string, so a
/// NUL byte ends the line there; we copy that so redcar splits exactly as Redis would.
pub(crate) fn split_args(line: &[u8]) -> Result<Vec<Vec<u8>>, ProtocolError> {
    let line = memchr(0, line).map_or(line, |nul| &line[..nul]);
    let mut args = Vec::new();
    let mut pos = 0;
    loop {
        // Between arguments sdssplitargs skips C `isspace`, which includes \v and \f.
        while line.get(pos).is_some_and(|&b| is_space(b)) {
            pos += 1;
        }
        if pos == line.len() {
            return Ok(args);
        }
        let (arg, next) = read_arg(line, pos)?;
        args.push(arg);
        pos = next;
    }
}

/// C's `isspace` in the "C" locale: space, `\t`, `\n`, `\v`, `\f`, `\r`.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// Read the argument starting at `pos`; returns it and the offset just past it.
fn read_arg(line: &[u8], mut pos: usize) -> Result<(Vec<u8>, usize), ProtocolError> {
    let mut arg = Vec::new();
    loop {
        // Unlike the skip between arguments, only these end an unquoted argument (not \v, \f).
        match line.get(pos) {
            None | Some(b' ' | b'\n' | b'\r' | b'\t') => return Ok((arg, pos)),
            Some(b'"') => {
                let next = read_double_quoted(line, pos + 1, &mut arg)?;
                return Ok((arg, next));
            }
            Some(b'\'') => {
                let next = read_single_quoted(line, pos + 1, &mut arg)?;
                return Ok((arg, next));
            }
            Some(&b) => arg.push(b),
        }
        pos += 1;
    }
}

/// Append the double-quoted text starting at `pos` (just past the opening quote) to `arg`;
/// returns the offset just past the closing quote.
fn read_double_quoted(
    line: &[u8],
    mut pos: usize,
    arg: &mut Vec<u8>,
) -> Result<usize, ProtocolError> {
    loop {
        match line.get(pos..).unwrap_or_default() {
            [] => return Err(ProtocolError::UnbalancedQuotes),
            [b'\\', b'x', hi, lo, ..] if hi.is_ascii_hexdigit() && lo.is_ascii_hexdigit() => {
                arg.push(hex_value(*hi) << 4 | hex_value(*lo));
                pos += 4;
            }
            [b'\\', c, ..] => {
                arg.push(unescape(*c));
                pos += 2;
            }
            [b'"', rest @ ..] => return closing_quote(rest, pos + 1),
            [b, ..] => {
                arg.push(*b);
                pos += 1;
            }
        }
    }
}

/// Like [`read_double_quoted`] for single quotes, where only `\'` is an escape.
fn read_single_quoted(
    line: &[u8],
    mut pos: usize,
    arg: &mut Vec<u8>,
) -> Result<usize, ProtocolError> {
    loop {
        match line.get(pos..).unwrap_or_default() {
            [] => return Err(ProtocolError::UnbalancedQuotes),
            [b'\\', b'\'', ..] => {
                arg.push(b'\'');
                pos += 2;
            }
            [b'\'', rest @ ..] => return closing_quote(rest, pos + 1),
            [b, ..] => {
                arg.push(*b);
                pos += 1;
            }
        }
    }
}

/// A closing quote must be followed by whitespace or the end: `"a"b` is an error in Redis.
fn closing_quote(rest: &[u8], next: usize) -> Result<usize, ProtocolError> {
    match rest.first() {
        Some(&b) if !is_space(b) => Err(ProtocolError::UnbalancedQuotes),
        _ => Ok(next),
    }
}

/// The character a backslash escape inside double quotes stands for; anything not listed stands for
/// itself.
fn unescape(c: u8) -> u8 {
    match c {
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'b' => 0x08,
        b'a' => 0x07,
        other => other,
    }
}

/// The value of one hexadecimal digit (the caller checked that it is one).
fn hex_value(digit: u8) -> u8 {
    match digit {
        b'0'..=b'9' => digit - b'0',
        b'a'..=b'f' => digit - b'a' + 10,
        b'A'..=b'F' => digit - b'A' + 10,
        _ => 0,
    }
}

#[cfg(test)]
mod tests;
