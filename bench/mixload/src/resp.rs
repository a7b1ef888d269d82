//! Just enough RESP2 for a load generator: commands out, replies in (blocking and async).

use std::io::{self, BufRead};

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// One reply, as far as the load generator cares.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

/// `*N\r\n$len\r\narg\r\n...` into `out` (appended).
pub fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

fn bad(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

fn trim_line(line: &[u8]) -> io::Result<&[u8]> {
    line.strip_suffix(b"\r\n")
        .ok_or_else(|| bad("connection closed in the middle of a reply"))
}

fn parse_int(b: &[u8]) -> io::Result<i64> {
    std::str::from_utf8(b)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad(format!("not a number: {:?}", String::from_utf8_lossy(b))))
}

/// Blocking: one whole reply from `r`.
pub fn read_reply(r: &mut impl BufRead) -> io::Result<Reply> {
    let mut line = Vec::with_capacity(64);
    if r.read_until(b'\n', &mut line)? == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "connection closed",
        ));
    }
    let body = trim_line(&line)?;
    let (kind, rest) = body.split_first().ok_or_else(|| bad("empty line"))?;
    match kind {
        b'+' => Ok(Reply::Simple(String::from_utf8_lossy(rest).into_owned())),
        b'-' => Ok(Reply::Error(String::from_utf8_lossy(rest).into_owned())),
        b':' => Ok(Reply::Int(parse_int(rest)?)),
        b'$' => {
            let n = parse_int(rest)?;
            if n < 0 {
                return Ok(Reply::Bulk(None));
            }
            let mut data = vec![0u8; n as usize + 2];
            r.read_exact(&mut data)?;
            data.truncate(n as usize);
            Ok(Reply::Bulk(Some(data)))
        }
        b'*' => {
            let n = parse_int(rest)?;
            if n < 0 {
                return Ok(Reply::Array(None));
            }
            let mut items = Vec::with_capacity(n as usize);
            for _ in 0..n {
                items.push(read_reply(r)?);
            }
            Ok(Reply::Array(Some(items)))
        }
        other => Err(bad(format!("unexpected reply type {:?}", *other as char))),
    }
}

/// Async: one whole reply from `r`; only errors are kept (the load generator does not look at
/// values), nested arrays are read through. Returns `Some(message)` for an error reply.
pub async fn skip_reply<R: AsyncBufRead + Unpin>(
    r: &mut R,
    line: &mut Vec<u8>,
) -> io::Result<Option<String>> {
    let mut pending: u64 = 1;
    let mut error = None;
    while pending > 0 {
        pending -= 1;
        line.clear();
        if r.read_until(b'\n', line).await? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed",
            ));
        }
        let body = trim_line(line)?;
        let (kind, rest) = body.split_first().ok_or_else(|| bad("empty line"))?;
        match kind {
            b'+' | b':' => {}
            b'-' => {
                error.get_or_insert_with(|| String::from_utf8_lossy(rest).into_owned());
            }
            b'$' => {
                let n = parse_int(rest)?;
                if n >= 0 {
                    let mut left = n as u64 + 2;
                    while left > 0 {
                        let buf = r.fill_buf().await?;
                        if buf.is_empty() {
                            return Err(bad("connection closed in a bulk string"));
                        }
                        let take = buf.len().min(left as usize);
                        r.consume(take);
                        left -= take as u64;
                    }
                }
            }
            b'*' => {
                let n = parse_int(rest)?;
                if n > 0 {
                    pending += n as u64;
                }
            }
            other => return Err(bad(format!("unexpected reply type {:?}", *other as char))),
        }
    }
    Ok(error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_kind() {
        let mut c = io::Cursor::new(
            b"+OK\r\n-ERR x\r\n:5\r\n$3\r\nabc\r\n$-1\r\n*2\r\n:1\r\n$1\r\nz\r\n".to_vec(),
        );
        assert_eq!(read_reply(&mut c).ok(), Some(Reply::Simple("OK".into())));
        assert_eq!(read_reply(&mut c).ok(), Some(Reply::Error("ERR x".into())));
        assert_eq!(read_reply(&mut c).ok(), Some(Reply::Int(5)));
        assert_eq!(
            read_reply(&mut c).ok(),
            Some(Reply::Bulk(Some(b"abc".to_vec())))
        );
        assert_eq!(read_reply(&mut c).ok(), Some(Reply::Bulk(None)));
        assert_eq!(
            read_reply(&mut c).ok(),
            Some(Reply::Array(Some(vec![
                Reply::Int(1),
                Reply::Bulk(Some(b"z".to_vec()))
            ])))
        );
    }

    #[test]
    fn encodes_a_command() {
        let mut out = Vec::new();
        encode(&mut out, &[b"GET", b"k"]);
        assert_eq!(out, b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
    }
}
