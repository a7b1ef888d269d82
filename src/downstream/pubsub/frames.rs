//! The frames of subscribe mode: recognising messages, reading confirmations, and writing the
//! confirmations redcar answers itself, in RESP2 arrays or RESP3 push frames.

use bytes::{Bytes, BytesMut};

use crate::commands::policy::SubKind;
use crate::protocol::{header_value, reply_frame_len, write_bulk, write_integer, Limits, Protocol};

/// `message`, `pmessage` and `smessage` pushes (RESP2 arrays or RESP3 push frames): passed on
/// untouched, without parsing.
pub(super) fn is_message(frame: &[u8]) -> bool {
    let body = match frame.first() {
        Some(b'*' | b'>') => &frame[1..],
        _ => return false,
    };
    body.starts_with(b"3\r\n$7\r\nmessage\r\n")
        || body.starts_with(b"4\r\n$8\r\npmessage\r\n")
        || body.starts_with(b"3\r\n$8\r\nsmessage\r\n")
}

/// A node's confirmation (`[kind, name, count]`, array or push): the kind in lower case and the
/// name (`None` for a nil name, which Redis sends when there was nothing to unsubscribe from).
/// `None` for any other frame (an error, a `pong`, a plain reply).
pub(super) fn confirmation(frame: &Bytes) -> Option<(Vec<u8>, Option<Bytes>)> {
    let kind_byte = *frame.first()?;
    if !matches!(kind_byte, b'*' | b'>') {
        return None;
    }
    let (count, mut at) = header_value(frame, kind_byte)?;
    if count < 2 {
        return None;
    }
    let limits = Limits::default();
    let mut item = || {
        let len = reply_frame_len(frame.get(at..)?, &limits).ok()??;
        let slice = frame.slice(at..at + len);
        at += len;
        Some(slice)
    };
    let kind = bulk_payload(&item()?)?;
    let name = item()?;
    let name = match &name[..] {
        b"$-1\r\n" | b"_\r\n" => None,
        _ => Some(bulk_payload(&name)?),
    };
    Some((kind.to_ascii_lowercase(), name))
}

/// The payload of a bulk string frame.
fn bulk_payload(frame: &Bytes) -> Option<Bytes> {
    let (len, start) = header_value(frame, b'$')?;
    let end = start.checked_add(usize::try_from(len).ok()?)?;
    (frame.get(end..) == Some(&b"\r\n"[..])).then(|| frame.slice(start..end))
}

pub(super) fn unsubscribe_word(kind: SubKind) -> &'static [u8] {
    match kind {
        SubKind::Pattern => b"punsubscribe",
        SubKind::Shard => b"sunsubscribe",
        SubKind::Channel => b"unsubscribe",
    }
}

/// Confirmations in Redis's form: `[kind, name, count]` per name, or one with a nil name; push
/// frames with RESP3's null for a RESP3 client.
pub(super) fn unsubscribed(
    out: &mut BytesMut,
    kind: &[u8],
    names: &[Bytes],
    count: usize,
    protocol: Protocol,
) {
    let count = i64::try_from(count).unwrap_or(i64::MAX);
    let (header, nil): (&[u8], &[u8]) = match protocol {
        Protocol::Resp2 => (b"*3\r\n", b"$-1\r\n"),
        Protocol::Resp3 => (b">3\r\n", b"_\r\n"),
    };
    if names.is_empty() {
        out.extend_from_slice(header);
        write_bulk(out, kind);
        out.extend_from_slice(nil);
        write_integer(out, count);
    }
    for name in names {
        out.extend_from_slice(header);
        write_bulk(out, kind);
        write_bulk(out, name);
        write_integer(out, count);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_recognised_without_parsing_in_both_protocols() {
        assert!(is_message(b"*3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\nm\r\n"));
        assert!(is_message(b">3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\nm\r\n"));
        assert!(is_message(
            b"*4\r\n$8\r\npmessage\r\n$2\r\nc*\r\n$1\r\nc\r\n$1\r\nm\r\n"
        ));
        assert!(is_message(
            b">3\r\n$8\r\nsmessage\r\n$1\r\nc\r\n$1\r\nm\r\n"
        ));
        assert!(!is_message(b"*3\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n:1\r\n"));
        assert!(!is_message(b"$7\r\nmessage\r\n"));
    }

    #[test]
    fn confirmations_are_read_from_arrays_and_pushes() {
        let sub = Bytes::from_static(b">3\r\n$9\r\nSUBSCRIBE\r\n$1\r\nc\r\n:1\r\n");
        assert_eq!(
            confirmation(&sub),
            Some((b"subscribe".to_vec(), Some(Bytes::from_static(b"c"))))
        );
        let none = Bytes::from_static(b"*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n");
        assert_eq!(confirmation(&none), Some((b"unsubscribe".to_vec(), None)));
        let none3 = Bytes::from_static(b">3\r\n$11\r\nunsubscribe\r\n_\r\n:0\r\n");
        assert_eq!(confirmation(&none3), Some((b"unsubscribe".to_vec(), None)));
        assert_eq!(confirmation(&Bytes::from_static(b"+PONG\r\n")), None);
        assert_eq!(confirmation(&Bytes::from_static(b"-ERR x\r\n")), None);
    }

    #[test]
    fn confirmations_have_redis_form_in_each_protocol() {
        let mut out = BytesMut::new();
        unsubscribed(&mut out, b"unsubscribe", &[], 0, Protocol::Resp2);
        assert_eq!(&out[..], b"*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n");
        out.clear();
        let s = [Bytes::from_static(b"s")];
        unsubscribed(&mut out, b"ssubscribe", &s, 2, Protocol::Resp2);
        assert_eq!(&out[..], b"*3\r\n$10\r\nssubscribe\r\n$1\r\ns\r\n:2\r\n");
        out.clear();
        unsubscribed(&mut out, b"unsubscribe", &[], 0, Protocol::Resp3);
        assert_eq!(&out[..], b">3\r\n$11\r\nunsubscribe\r\n_\r\n:0\r\n");
    }
}
