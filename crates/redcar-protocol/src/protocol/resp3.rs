//! Writers for RESP3's own types, each with the form Redis 7 gives a RESP2 client instead, so
//! one piece of code answers both versions.

use bytes::{BufMut, Bytes, BytesMut};

use super::encode::{put_header, write_array_len, write_bulk, write_null};
use super::Protocol;

/// A map of `pairs` key/value pairs follows: `%n` in RESP3, a flat `*2n` array in RESP2.
pub fn write_map_len(out: &mut BytesMut, pairs: usize, protocol: Protocol) {
    match protocol {
        Protocol::Resp3 => {
            out.reserve(24);
            put_header(out, b'%', pairs);
        }
        Protocol::Resp2 => write_array_len(out, pairs * 2),
    }
}

/// Text meant for people (`INFO`, `CLUSTER NODES`): a verbatim string of format `txt` in
/// RESP3, a bulk string in RESP2.
pub fn write_verbatim(out: &mut BytesMut, text: &[u8], protocol: Protocol) {
    match protocol {
        Protocol::Resp3 => {
            out.reserve(24 + 4 + text.len() + 2);
            put_header(out, b'=', text.len() + 4);
            out.put_slice(b"txt:");
            out.put_slice(text);
            out.put_slice(b"\r\n");
        }
        Protocol::Resp2 => write_bulk(out, text),
    }
}

/// "No value": `_` in RESP3, the null bulk string in RESP2.
pub fn write_null_in(out: &mut BytesMut, protocol: Protocol) {
    match protocol {
        Protocol::Resp3 => out.put_slice(b"_\r\n"),
        Protocol::Resp2 => write_null(out),
    }
}

/// RESP3's null, for a whole reply that is a RESP2 null (`$-1` or `*-1`): Redis 7 sends `_`
/// for both to a RESP3 client. `None` for any other reply.
pub fn resp3_null(reply: &[u8]) -> Option<&'static [u8]> {
    (reply == b"$-1\r\n" || reply == b"*-1\r\n").then_some(b"_\r\n")
}

/// A bulk string reply re-framed as verbatim text (a merged `INFO` for a RESP3 client); any
/// other reply (an error) unchanged.
pub fn bulk_as_verbatim(reply: Bytes) -> Bytes {
    let Some((len, start)) = super::header_value(&reply, b'$') else {
        return reply;
    };
    let Some(text) = usize::try_from(len)
        .ok()
        .and_then(|len| reply.get(start..start.checked_add(len)?))
    else {
        return reply;
    };
    let mut out = BytesMut::with_capacity(text.len() + 32);
    write_verbatim(&mut out, text, Protocol::Resp3);
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(write: impl FnOnce(&mut BytesMut)) -> Vec<u8> {
        let mut out = BytesMut::new();
        write(&mut out);
        out.to_vec()
    }

    #[test]
    fn each_type_has_its_resp2_form() {
        assert_eq!(written(|o| write_map_len(o, 3, Protocol::Resp3)), b"%3\r\n");
        assert_eq!(written(|o| write_map_len(o, 3, Protocol::Resp2)), b"*6\r\n");
        assert_eq!(
            written(|o| write_verbatim(o, b"a:1", Protocol::Resp3)),
            b"=7\r\ntxt:a:1\r\n"
        );
        assert_eq!(
            written(|o| write_verbatim(o, b"a:1", Protocol::Resp2)),
            b"$3\r\na:1\r\n"
        );
        assert_eq!(written(|o| write_null_in(o, Protocol::Resp3)), b"_\r\n");
        assert_eq!(written(|o| write_null_in(o, Protocol::Resp2)), b"$-1\r\n");
    }

    #[test]
    fn only_whole_null_replies_become_resp3_nulls() {
        assert_eq!(resp3_null(b"$-1\r\n"), Some(&b"_\r\n"[..]));
        assert_eq!(resp3_null(b"*-1\r\n"), Some(&b"_\r\n"[..]));
        assert_eq!(resp3_null(b"*1\r\n$-1\r\n"), None);
        assert_eq!(resp3_null(b"$0\r\n\r\n"), None);
    }

    #[test]
    fn a_bulk_becomes_verbatim_text_and_an_error_stays() {
        let info = bulk_as_verbatim(Bytes::from_static(b"$8\r\n# Server\r\n"));
        assert_eq!(&info[..], b"=12\r\ntxt:# Server\r\n");
        let error = bulk_as_verbatim(Bytes::from_static(b"-ERR no\r\n"));
        assert_eq!(&error[..], b"-ERR no\r\n");
    }
}
