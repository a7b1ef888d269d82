//! Minimal RESP frame splitters: they find where complete frames end, nothing more.
//!
//! `Ok(Some(end))`: a complete frame is `buf[start..end]`; `Ok(None)`: incomplete, wait for more
//! bytes; `Err(())`: not RESP this probe understands.

type Frame = Result<Option<usize>, ()>;

/// Parses the integer of a `<type>N\r\n` line starting at `buf[pos]` (just after the type byte).
/// Returns the value and the position after `\n`.
fn line_int(buf: &[u8], mut pos: usize) -> Result<Option<(i64, usize)>, ()> {
    let mut neg = false;
    let mut v: i64 = 0;
    let mut digits = 0;
    if buf.get(pos) == Some(&b'-') {
        neg = true;
        pos += 1;
    }
    loop {
        match buf.get(pos) {
            None => return Ok(None),
            Some(&c @ b'0'..=b'9') => {
                v = v.checked_mul(10).and_then(|v| v.checked_add(i64::from(c - b'0'))).ok_or(())?;
                digits += 1;
                pos += 1;
            }
            Some(b'\r') => break,
            Some(_) => return Err(()),
        }
    }
    match buf.get(pos + 1) {
        None => Ok(None),
        Some(b'\n') if digits > 0 => Ok(Some((if neg { -v } else { v }, pos + 2))),
        Some(_) => Err(()),
    }
}

/// `$len\r\n<len bytes>\r\n` (or `$-1\r\n` when `null_ok`) at `buf[pos]`.
fn bulk(buf: &[u8], pos: usize, null_ok: bool) -> Frame {
    let Some((len, p)) = line_int(buf, pos + 1)? else { return Ok(None) };
    if len < 0 {
        return if null_ok && len == -1 { Ok(Some(p)) } else { Err(()) };
    }
    let end = p + len as usize + 2;
    if end > buf.len() {
        return Ok(None);
    }
    if &buf[end - 2..end] != b"\r\n" {
        return Err(());
    }
    Ok(Some(end))
}

/// A request: an array of bulk strings (what redis-benchmark and redis-cli send).
pub fn request(buf: &[u8], start: usize) -> Frame {
    match buf.get(start) {
        None => return Ok(None),
        Some(b'*') => {}
        Some(_) => return Err(()), // inline commands: not needed by the probe
    }
    let Some((n, mut pos)) = line_int(buf, start + 1)? else { return Ok(None) };
    if n <= 0 {
        return Err(());
    }
    for _ in 0..n {
        match buf.get(pos) {
            None => return Ok(None),
            Some(b'$') => {}
            Some(_) => return Err(()),
        }
        let Some(end) = bulk(buf, pos, false)? else { return Ok(None) };
        pos = end;
    }
    Ok(Some(pos))
}

/// A RESP2 reply: simple string, error, integer, bulk (incl. null), array (incl. null, nested).
pub fn reply(buf: &[u8], start: usize) -> Frame {
    match buf.get(start) {
        None => Ok(None),
        Some(b'+' | b'-' | b':') => {
            let mut i = start + 1;
            while i + 1 < buf.len() {
                if buf[i] == b'\r' {
                    return if buf[i + 1] == b'\n' { Ok(Some(i + 2)) } else { Err(()) };
                }
                i += 1;
            }
            Ok(None)
        }
        Some(b'$') => bulk(buf, start, true),
        Some(b'*') => {
            let Some((n, mut pos)) = line_int(buf, start + 1)? else { return Ok(None) };
            if n < -1 {
                return Err(());
            }
            for _ in 0..n.max(0) {
                let Some(end) = reply(buf, pos)? else { return Ok(None) };
                pos = end;
            }
            Ok(Some(pos))
        }
        Some(_) => Err(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests() {
        let f = b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n";
        assert_eq!(request(f, 0), Ok(Some(f.len())));
        for cut in 0..f.len() {
            assert_eq!(request(&f[..cut], 0), Ok(None), "cut {cut}");
        }
        assert_eq!(request(b"PING\r\n", 0), Err(()));
    }

    #[test]
    fn replies() {
        for f in [
            &b"+OK\r\n"[..],
            b"-ERR x\r\n",
            b":12\r\n",
            b"$-1\r\n",
            b"$3\r\nabc\r\n",
            b"$0\r\n\r\n",
            b"*-1\r\n",
            b"*0\r\n",
            b"*2\r\n$1\r\na\r\n*2\r\n:1\r\n$-1\r\n",
        ] {
            assert_eq!(reply(f, 0), Ok(Some(f.len())), "{f:?}");
            for cut in 0..f.len() {
                assert_eq!(reply(&f[..cut], 0), Ok(None), "{f:?} cut {cut}");
            }
        }
        assert_eq!(reply(b"?x\r\n", 0), Err(()));
    }
}
