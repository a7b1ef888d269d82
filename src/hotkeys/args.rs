//! Finding one argument in a request's raw RESP bytes without parsing (or allocating) the rest:
//! only sampled and big commands look for their key this way.

/// The `n`th argument (0 is the command name) of a RESP multibulk request, or `None` when the
/// bytes are not one or it has fewer arguments.
pub(crate) fn nth_arg(raw: &[u8], n: usize) -> Option<&[u8]> {
    let (count, mut at) = header(raw, 0, b'*')?;
    if n >= count {
        return None;
    }
    for i in 0..=n {
        let (len, start) = header(raw, at, b'$')?;
        let end = start.checked_add(len)?;
        if i == n {
            return raw.get(start..end);
        }
        at = end.checked_add(2)?;
    }
    None
}

/// Reads `<kind><digits>\r\n` at `at`: the number and where the next byte is.
/// `None` when the byte at `at` is not `kind`, a non-digit comes before `\r`, the number
/// overflows, or the line is cut short: a request cut short gives no key rather than a wrong one.
fn header(raw: &[u8], at: usize, kind: u8) -> Option<(usize, usize)> {
    if *raw.get(at)? != kind {
        return None;
    }
    let mut value = 0usize;
    let mut i = at + 1;
    while let Some(&b) = raw.get(i) {
        match b {
            b'0'..=b'9' => {
                value = value.checked_mul(10)?.checked_add(usize::from(b - b'0'))?;
                i += 1;
            }
            b'\r' => return (raw.get(i + 1) == Some(&b'\n')).then_some((value, i + 2)),
            _ => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_each_argument_and_refuses_what_is_not_there() {
        let raw = b"*3\r\n$3\r\nSET\r\n$5\r\nuser1\r\n$0\r\n\r\n";
        assert_eq!(nth_arg(raw, 0), Some(&b"SET"[..]));
        assert_eq!(nth_arg(raw, 1), Some(&b"user1"[..]));
        assert_eq!(nth_arg(raw, 2), Some(&b""[..]));
        assert_eq!(nth_arg(raw, 3), None);
        assert_eq!(nth_arg(b"*2\r\n$3\r\nGET\r\n$9\r\nshort\r\n", 1), None);
        assert_eq!(nth_arg(b"GET key\r\n", 1), None);
        assert_eq!(nth_arg(b"*1\r\n$99999999999999999999999\r\n", 0), None);
    }
}
