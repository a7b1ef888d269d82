//! Error replies redcar writes itself, recognisable by their `redcar:` prefix.

use bytes::{BufMut, Bytes, BytesMut};

/// `-ERR redcar: <message>\r\n`, with line breaks in `message` flattened so the reply stays one
/// RESP line.
pub(crate) fn redcar_error(message: impl std::fmt::Display) -> Bytes {
    error_with_prefix("ERR redcar: ", message)
}

/// `-<prefix><message>\r\n` for standard prefixes clients depend on (`CROSSSLOT`, `CLUSTERDOWN`).
pub(crate) fn error_with_prefix(prefix: &str, message: impl std::fmt::Display) -> Bytes {
    let text = message.to_string().replace(['\r', '\n'], " ");
    let mut out = BytesMut::with_capacity(prefix.len() + text.len() + 3);
    out.put_u8(b'-');
    out.put_slice(prefix.as_bytes());
    out.put_slice(text.as_bytes());
    out.put_slice(b"\r\n");
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_one_resp_line_with_the_redcar_prefix() {
        assert_eq!(
            &redcar_error("node down\r\nX")[..],
            b"-ERR redcar: node down  X\r\n"
        );
        assert_eq!(
            &error_with_prefix("CROSSSLOT ", "Keys in request don't hash to the same slot")[..],
            b"-CROSSSLOT Keys in request don't hash to the same slot\r\n"
        );
    }
}
