//! Failed logins on a connection: counted, logged with the client's address and the user named
//! (at most one line a second; the next one says how many were left out), and the connection
//! closed once it reaches `auth.max_failures`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use super::super::ClientMetrics;
use crate::protocol::{Args, Request};

/// The second of the last line logged, and the failures not logged since.
static LAST_LOGGED: AtomicU64 = AtomicU64::new(0);
static NOT_LOGGED: AtomicU64 = AtomicU64::new(0);

/// A user name is the client's input: at most this much of it is logged.
const NAME_SHOWN: usize = 64;

/// Records one refused `AUTH` / `HELLO … AUTH` (`failures`: the connection's count so far);
/// returns true when the connection must close (`auth.max_failures` reached).
pub(in crate::downstream) fn failed_login(
    metrics: &ClientMetrics,
    peer: &str,
    request: &Request,
    failures: u16,
    limit_reached: bool,
) -> bool {
    metrics.auth_failures.inc();
    if limit_reached {
        metrics.auth_closed.inc();
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let last = LAST_LOGGED.load(Ordering::Relaxed);
    let first_this_second = now > last
        && LAST_LOGGED
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok();
    if !first_this_second && !limit_reached {
        NOT_LOGGED.fetch_add(1, Ordering::Relaxed);
        return false;
    }
    let not_logged = NOT_LOGGED.swap(0, Ordering::Relaxed);
    let user = shown(&user_named(request.args()));
    if limit_reached {
        tracing::warn!(
            client = peer,
            %user,
            failures,
            not_logged,
            "authentication failed; closing the connection (auth.max_failures reached)"
        );
    } else {
        tracing::warn!(client = peer, %user, failures, not_logged, "authentication failed");
    }
    limit_reached
}

/// The user an `AUTH [user] password` or `HELLO v AUTH user password` named (`default` when
/// none was).
fn user_named(args: Args<'_>) -> Bytes {
    let default = || Bytes::from_static(b"default");
    let Some(command) = args.first() else {
        return default();
    };
    if command.eq_ignore_ascii_case(b"AUTH") {
        return match args.len() {
            3 => args.bytes(1).unwrap_or_else(default),
            _ => default(),
        };
    }
    args.iter()
        .position(|a| a.eq_ignore_ascii_case(b"AUTH"))
        .filter(|&at| at >= 2)
        .and_then(|at| args.bytes(at + 1))
        .unwrap_or_else(default)
}

/// Printable, bounded: control characters and non-ASCII bytes escaped.
fn shown(name: &[u8]) -> String {
    let mut text: String = name
        .iter()
        .take(NAME_SHOWN)
        .flat_map(|b| b.escape_ascii())
        .map(char::from)
        .collect();
    if name.len() > NAME_SHOWN {
        text.push('…');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(parts: &[&str]) -> Request {
        Request::from_args::<Vec<Bytes>, Bytes>({
            parts
                .iter()
                .map(|p| Bytes::copy_from_slice(p.as_bytes()))
                .collect()
        })
    }

    #[test]
    fn the_user_named_by_auth_or_hello() {
        assert_eq!(&user_named(args(&["AUTH", "pw"]).args())[..], b"default");
        assert_eq!(&user_named(args(&["auth", "web", "pw"]).args())[..], b"web");
        let hello = args(&["HELLO", "3", "SETNAME", "x", "AUTH", "app", "pw"]);
        assert_eq!(&user_named(hello.args())[..], b"app");
        assert_eq!(&user_named(args(&["HELLO", "3"]).args())[..], b"default");
    }

    #[test]
    fn names_are_escaped_and_bounded_in_the_log() {
        assert_eq!(shown(b"a\r\nb"), "a\\r\\nb");
        let long = vec![b'x'; 100];
        let text = shown(&long);
        assert!(text.starts_with(&"x".repeat(64)) && text.ends_with('…'));
        assert_eq!(text.chars().count(), 65);
    }
}
