//! Hot-path writers that append RESP to a `BytesMut` with no intermediate allocation.

use bytes::{BufMut, Bytes, BytesMut};

/// A command encoded as a RESP multibulk from its arguments.
pub fn encode_command<'a>(args: impl ExactSizeIterator<Item = &'a [u8]>) -> Bytes {
    let mut out = BytesMut::new();
    write_array_len(&mut out, args.len());
    for arg in args {
        write_bulk(&mut out, arg);
    }
    out.freeze()
}

/// Longest decimal form of a `u64` or `i64` (including the sign).
const MAX_DECIMAL: usize = 20;

/// `+s\r\n`. `s` must not contain CR or LF.
#[inline]
pub fn write_simple(out: &mut BytesMut, s: &[u8]) {
    write_line(out, b'+', s);
}

/// `-msg\r\n`. `msg` carries its own prefix, e.g. `b"ERR redcar: no route"`, and must not
/// contain CR or LF.
#[inline]
pub fn write_error(out: &mut BytesMut, msg: &[u8]) {
    write_line(out, b'-', msg);
}

/// `:n\r\n`.
#[inline]
pub fn write_integer(out: &mut BytesMut, n: i64) {
    out.reserve(1 + MAX_DECIMAL + 2);
    out.put_u8(b':');
    put_i64(out, n);
    out.put_slice(b"\r\n");
}

/// `$len\r\nb\r\n`.
#[inline]
pub fn write_bulk(out: &mut BytesMut, b: &[u8]) {
    out.reserve(1 + MAX_DECIMAL + 2 + b.len() + 2);
    put_header(out, b'$', b.len());
    out.put_slice(b);
    out.put_slice(b"\r\n");
}

/// The null bulk string, `$-1\r\n`.
pub(crate) fn write_null(out: &mut BytesMut) {
    out.put_slice(b"$-1\r\n");
}

/// The null array, `*-1\r\n`.
pub(crate) fn write_null_array(out: &mut BytesMut) {
    out.put_slice(b"*-1\r\n");
}

/// `*n\r\n`; the caller then writes the `n` elements.
#[inline]
pub fn write_array_len(out: &mut BytesMut, n: usize) {
    out.reserve(1 + MAX_DECIMAL + 2);
    put_header(out, b'*', n);
}

/// Bytes that `write_bulk` writes for a payload of `len` bytes; lets callers reserve once.
pub(crate) fn bulk_encoded_len(len: usize) -> usize {
    header_encoded_len(len) + len + 2
}

/// Bytes of a `*n\r\n` or `$n\r\n` header.
pub(crate) fn header_encoded_len(n: usize) -> usize {
    1 + decimal_len(n as u64) + 2
}

/// Bytes of a `:n\r\n` integer.
pub(crate) fn integer_encoded_len(n: i64) -> usize {
    1 + usize::from(n < 0) + decimal_len(n.unsigned_abs()) + 2
}

fn write_line(out: &mut BytesMut, ty: u8, s: &[u8]) {
    out.reserve(1 + s.len() + 2);
    out.put_u8(ty);
    out.put_slice(s);
    out.put_slice(b"\r\n");
}

/// `<ty><n>\r\n` for a non-negative length or count. Built right to left on the stack and
/// appended with one copy: a split MSET writes four of these per key, and three small appends
/// each cost more than the digits.
pub(crate) fn put_header(out: &mut BytesMut, ty: u8, n: usize) {
    let mut line = [0u8; 1 + MAX_DECIMAL + 2];
    let crlf = line.len() - 2;
    line[crlf..].copy_from_slice(b"\r\n");
    let start = digits_before(&mut line, crlf, n as u64) - 1;
    line[start] = ty;
    out.put_slice(&line[start..]);
}

fn put_i64(out: &mut BytesMut, n: i64) {
    if n < 0 {
        out.put_u8(b'-');
    }
    put_u64(out, n.unsigned_abs());
}

/// Format by hand into a stack buffer: `write!` through `fmt` is several times slower here.
fn put_u64(out: &mut BytesMut, n: u64) {
    let mut digits = [0u8; MAX_DECIMAL];
    let start = digits_before(&mut digits, MAX_DECIMAL, n);
    out.put_slice(&digits[start..]);
}

/// Writes `n` in decimal into `buf` so that it ends just before `end`; returns where it starts.
/// `buf[..end]` must have room for [`MAX_DECIMAL`] digits.
fn digits_before(buf: &mut [u8], end: usize, mut n: u64) -> usize {
    let mut start = end;
    loop {
        start -= 1;
        buf[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return start;
        }
    }
}

fn decimal_len(mut n: u64) -> usize {
    let mut len = 1;
    while n >= 10 {
        n /= 10;
        len += 1;
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(f: impl FnOnce(&mut BytesMut)) -> Vec<u8> {
        let mut out = BytesMut::new();
        f(&mut out);
        out.to_vec()
    }

    #[test]
    fn writers_produce_resp() {
        assert_eq!(written(|o| write_simple(o, b"OK")), b"+OK\r\n");
        assert_eq!(written(|o| write_error(o, b"ERR x")), b"-ERR x\r\n");
        assert_eq!(written(|o| write_bulk(o, b"")), b"$0\r\n\r\n");
        assert_eq!(written(|o| write_bulk(o, b"a\r\nb")), b"$4\r\na\r\nb\r\n");
        assert_eq!(written(write_null), b"$-1\r\n");
        assert_eq!(written(write_null_array), b"*-1\r\n");
        assert_eq!(written(|o| write_array_len(o, 0)), b"*0\r\n");
        assert_eq!(written(|o| write_array_len(o, 1234)), b"*1234\r\n");
    }

    #[test]
    fn integers_cover_sign_and_extremes() {
        for n in [0, 7, -1, -2, 10, 99, 100, i64::MAX, i64::MIN] {
            let out = written(|o| write_integer(o, n));
            assert_eq!(out, format!(":{n}\r\n").into_bytes());
            assert_eq!(out.len(), integer_encoded_len(n));
        }
    }

    #[test]
    fn encoded_lengths_match_writers() {
        for len in [0, 9, 10, 99, 100, 12345] {
            let payload = vec![b'x'; len];
            assert_eq!(
                written(|o| write_bulk(o, &payload)).len(),
                bulk_encoded_len(len)
            );
            assert_eq!(
                written(|o| write_array_len(o, len)).len(),
                header_encoded_len(len)
            );
        }
    }
}
