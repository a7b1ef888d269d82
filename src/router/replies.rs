//! Reading node reply frames for merging (integers, array elements, error text) and encoding the
//! merged reply, without building a full `Frame` tree.

use bytes::{Bytes, BytesMut};

pub(super) use crate::protocol::encode_command;
use crate::protocol::{reply_frame_len, write_array_len, write_bulk, Limits};

/// The text of an error reply (`-ERR x\r\n` → `ERR x`), or `None` for any other reply.
pub(super) fn error_text(reply: &[u8]) -> Option<String> {
    let line = reply.strip_prefix(b"-")?;
    let line = line.strip_suffix(b"\r\n").unwrap_or(line);
    Some(String::from_utf8_lossy(line).into_owned())
}

/// The value of an integer reply (`:12\r\n`).
pub(super) fn integer(reply: &[u8]) -> Option<i64> {
    let line = reply.strip_prefix(b":")?.strip_suffix(b"\r\n")?;
    std::str::from_utf8(line).ok()?.parse().ok()
}

/// The payload of a bulk string reply, or the text of a RESP3 verbatim string (without its
/// `txt:` format); `None` for nil or any other reply.
pub(super) fn bulk(reply: &Bytes) -> Option<Bytes> {
    let (mut start, end) = match split_header(reply, b'$') {
        Some((len, start)) => (start, start.checked_add(len)?),
        None => {
            let (len, start) = split_header(reply, b'=')?;
            (start.checked_add(4)?, start.checked_add(len)?)
        }
    };
    start = start.min(end);
    (reply.get(end..) == Some(&b"\r\n"[..])).then(|| reply.slice(start..end))
}

/// True for the nil bulk string or nil array, or RESP3's null.
pub(super) fn is_nil(reply: &[u8]) -> bool {
    reply == b"$-1\r\n" || reply == b"*-1\r\n" || reply == b"_\r\n"
}

/// The raw frames of an array reply, each a zero-copy slice; `None` if `reply` is not exactly one
/// (non-nil) array.
pub(super) fn array_items(reply: &Bytes) -> Option<Vec<Bytes>> {
    let (count, mut at) = split_header(reply, b'*')?;
    let limits = Limits::default();
    let mut items = Vec::with_capacity(count.min(1024));
    for _ in 0..count {
        let len = reply_frame_len(&reply[at..], &limits).ok()??;
        items.push(reply.slice(at..at + len));
        at += len;
    }
    (at == reply.len()).then_some(items)
}

/// `*n\r\n` or `$n\r\n` at the start of `reply` → (n, offset after the header). Negative n
/// (nil) is `None`.
pub(super) fn split_header(reply: &[u8], kind: u8) -> Option<(usize, usize)> {
    let (n, next) = crate::protocol::header_value(reply, kind)?;
    Some((usize::try_from(n).ok()?, next))
}

/// An array of already-encoded frames.
pub(super) fn encode_array<'a>(items: impl ExactSizeIterator<Item = &'a [u8]>) -> Bytes {
    let mut out = BytesMut::new();
    write_array_len(&mut out, items.len());
    for item in items {
        out.extend_from_slice(item);
    }
    out.freeze()
}

/// A bulk string reply.
pub(super) fn encode_bulk(payload: &[u8]) -> Bytes {
    let mut out = BytesMut::new();
    write_bulk(&mut out, payload);
    out.freeze()
}

/// The command name(s) as a client would read them in an error: `MGET`, `SCRIPT LOAD`.
pub(super) fn display_name<'a>(args: impl IntoIterator<Item = &'a [u8]>, words: usize) -> String {
    let shown: Vec<String> = args
        .into_iter()
        .take(words)
        .map(|a| String::from_utf8_lossy(a).chars().take(32).collect())
        .collect();
    shown.join(" ").to_ascii_uppercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_integers_errors_bulks_and_nils() {
        assert_eq!(integer(b":42\r\n"), Some(42));
        assert_eq!(integer(b":-2\r\n"), Some(-2));
        assert_eq!(integer(b"+OK\r\n"), None);
        assert_eq!(error_text(b"-ERR no\r\n").as_deref(), Some("ERR no"));
        assert_eq!(error_text(b":1\r\n"), None);
        assert_eq!(
            bulk(&Bytes::from_static(b"$3\r\nabc\r\n")),
            Some(Bytes::from_static(b"abc"))
        );
        assert_eq!(bulk(&Bytes::from_static(b"$-1\r\n")), None);
        let verbatim = Bytes::from_static(b"=12\r\ntxt:# Server\r\n");
        assert_eq!(bulk(&verbatim).as_deref(), Some(&b"# Server"[..]));
        assert_eq!(bulk(&Bytes::from_static(b"$5\r\nabc\r\n")), None);
        assert!(is_nil(b"$-1\r\n") && is_nil(b"*-1\r\n") && !is_nil(b"$0\r\n\r\n"));
        assert!(is_nil(b"_\r\n"));
    }

    #[test]
    fn splits_arrays_into_raw_items() {
        let reply = Bytes::from_static(b"*3\r\n$1\r\na\r\n$-1\r\n*1\r\n:1\r\n");
        let items = array_items(&reply).expect("an array");
        assert_eq!(items.len(), 3);
        assert_eq!(&items[1][..], b"$-1\r\n");
        assert_eq!(&items[2][..], b"*1\r\n:1\r\n");
        assert_eq!(array_items(&Bytes::from_static(b"*2\r\n:1\r\n")), None);
        assert_eq!(array_items(&Bytes::from_static(b"-ERR x\r\n")), None);
        assert_eq!(array_items(&Bytes::from_static(b"*-1\r\n")), None);
        let merged = encode_array(items.iter().map(|i| &i[..]));
        assert_eq!(merged, reply);
    }

    #[test]
    fn encodes_commands_and_names() {
        use crate::protocol::Request;
        let cmd = encode_command([&b"GET"[..], b"k"].into_iter());
        assert_eq!(&cmd[..], b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
        let args = Request::from_args([Bytes::from_static(b"script"), Bytes::from_static(b"load")]);
        assert_eq!(display_name(args.args(), 2), "SCRIPT LOAD");
        assert_eq!(display_name(args.args(), 1), "SCRIPT");
    }
}
