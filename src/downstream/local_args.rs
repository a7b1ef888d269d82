//! The argument checks of the connection commands redcar answers itself (HELLO's version and
//! options, CLIENT SETINFO, SELECT), each with Redis's own error words.
//!
//! Every check here runs before the command has any effect, and a refused command changes nothing:
//! a HELLO with a bad option neither switches the protocol nor logs in, as in Redis. The error
//! lines are Redis's own so that client libraries, which match some of them (`NOPROTO` makes
//! clients fall back to RESP2), behave the same through redcar.

use bytes::{Bytes, BytesMut};

use crate::protocol::{write_error, write_simple, Args, Protocol};
use crate::router::redcar_error;

/// `CLIENT SETINFO LIB-NAME|LIB-VER value`, checked as Redis 7.2 checks it. Accepted and not
/// kept: a field per idle client would cost memory for a label nothing here reads.
pub(super) fn set_info(args: Args<'_>) -> Bytes {
    let mut out = BytesMut::with_capacity(96);
    let (Some(attribute), Some(value), None) = (args.get(2), args.get(3), args.get(4)) else {
        write_error(
            &mut out,
            b"ERR wrong number of arguments for 'client|setinfo' command",
        );
        return out.freeze();
    };
    let name = if attribute.eq_ignore_ascii_case(b"lib-name") {
        "lib-name"
    } else if attribute.eq_ignore_ascii_case(b"lib-ver") {
        "lib-ver"
    } else {
        let message = format!(
            "ERR Unrecognized option '{}'",
            String::from_utf8_lossy(attribute)
        );
        write_error(&mut out, message.as_bytes());
        return out.freeze();
    };
    // Redis's rule, as for client names: printable ASCII without spaces.
    if value.iter().any(|&b| !(b'!'..=b'~').contains(&b)) {
        let message = format!("ERR {name} cannot contain spaces, newlines or special characters.");
        write_error(&mut out, message.as_bytes());
        return out.freeze();
    }
    write_simple(&mut out, b"OK");
    out.freeze()
}

/// HELLO's `protover`: the protocol asked for, or `None` with the error written to `out`.
///
/// `NOPROTO` for a version that parses but is not 2 or 3, so a client can fall back; anything that
/// is not a number is a plain `ERR`.
pub(super) fn hello_version(version: &[u8], out: &mut BytesMut) -> Option<Protocol> {
    match Protocol::from_hello(version) {
        Ok(asked) => Some(asked),
        Err(false) => {
            write_error(
                out,
                b"ERR Protocol version is not an integer or out of range",
            );
            None
        }
        Err(true) => {
            write_error(out, b"NOPROTO unsupported protocol version");
            None
        }
    }
}

/// What HELLO's options ask for: a login (`AUTH user password`) and a name (`SETNAME name`).
pub(super) struct HelloOptions<'a> {
    /// `AUTH username password`, checked by the caller against the configured users.
    pub(super) login: Option<(&'a [u8], &'a [u8])>,
    /// `SETNAME name`, applied only if the whole HELLO succeeds.
    pub(super) name: Option<&'a [u8]>,
}

/// HELLO's options after the version, or `None` with the syntax error written to `out`.
///
/// A later option of the same kind replaces an earlier one. CR and LF are dropped from the option
/// echoed in the error, so a client cannot break the reply's framing.
pub(super) fn hello_options<'a>(args: Args<'a>, out: &mut BytesMut) -> Option<HelloOptions<'a>> {
    let (mut login, mut name) = (None, None);
    let mut rest = args.iter().skip(2);
    while let Some(option) = rest.next() {
        let more = rest.len();
        if option.eq_ignore_ascii_case(b"AUTH") && more >= 2 {
            login = rest.next().zip(rest.next());
        } else if option.eq_ignore_ascii_case(b"SETNAME") && more >= 1 {
            name = rest.next();
        } else {
            let mut message = b"ERR Syntax error in HELLO option '".to_vec();
            message.extend(option.iter().filter(|b| !matches!(b, b'\r' | b'\n')));
            message.push(b'\'');
            write_error(out, &message);
            return None;
        }
    }
    Some(HelloOptions { login, name })
}

/// One value of HELLO's reply map: the fields redcar reports about itself and the connection.
pub(super) enum Field {
    /// A fixed string (`server`, `version`, `mode`, `role`).
    Text(&'static [u8]),
    /// A number (`proto`, `id`).
    Int(i64),
    /// `modules`: redcar reports none.
    EmptyArray,
}

/// Only database 0 exists in Redis Cluster, so only `SELECT 0` can succeed.
///
/// Anything else, `SELECT 1` included, is refused rather than ignored: a client that thinks it
/// switched databases would read and write the wrong keys.
pub(super) fn select(args: Args<'_>) -> Bytes {
    let mut out = BytesMut::with_capacity(96);
    match args.get(1) {
        Some(b"0") => write_simple(&mut out, b"OK"),
        _ => return redcar_error("SELECT: Redis Cluster has only database 0"),
    }
    out.freeze()
}
