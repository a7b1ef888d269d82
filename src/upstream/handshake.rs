//! What a new node connection says before it carries commands: `AUTH` with the upstream
//! credentials and, on connections that may read from replicas, `READONLY` — pipelined in one
//! write, each reply must be `+OK`. Over TLS with neither, a `PING` (`+PONG`) confirms the
//! session: a node that refuses the client certificate says so only after a TLS 1.3 client
//! thinks the handshake is done, and that must fail the connect, not the first command.
//! A node without cluster support (a Sentinel-managed replica) refuses `READONLY`; it serves
//! reads anyway, so that refusal is accepted. After `READONLY` comes `INFO replication`: a
//! replica not in sync with its primary yet fails the connect (see `replica_sync`), so its queued
//! reads go elsewhere, and is ejected at once: the health check's `PING` connects through this
//! handshake too, so it comes back only once it has synced.

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::health::Health;
use super::pending::frames_len;
use super::replica_sync::{not_in_sync, NOT_IN_SYNC};
use crate::protocol::{encode_command, Limits, Protocol};

/// A non-cluster node's answer to `READONLY`. Such a replica serves reads without it
/// (`replica-read-only` is about writes), so this is not a refusal.
const CLUSTER_DISABLED: &[u8] = b"-ERR This instance has cluster support disabled\r\n";

/// Credentials redcar presents to every node (`upstream.username`, `upstream.password`).
#[derive(Clone)]
pub(crate) struct Credentials {
    /// Redis 6+ ACL user; `None` authenticates as the `default` user (`requirepass`).
    pub(crate) username: Option<String>,
    /// The password as read from the config or its file; never logged (see the `Debug` impl).
    pub(crate) password: String,
}

/// Redacts the password, so a config dumped at debug level cannot leak it.
impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &"(redacted)")
            .finish()
    }
}

/// The commands one kind of connection sends first, encoded once.
#[derive(Clone, Debug, Default)]
pub(crate) struct Handshake {
    /// Every handshake command, encoded once and written in one go on each new connection.
    payload: Bytes,
    /// What each command's reply must be, in order.
    expected: Vec<Expect>,
    /// What the commands are, for error messages (never the password).
    names: String,
    /// A tracked lane's last step, `CLIENT TRACKING on REDIRECT <id>` (see `tracking`).
    tracking: Option<std::sync::Arc<super::tracked_lane::LaneRedirect>>,
}

/// The reply one handshake command must get.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// `AUTH`.
    Ok,
    /// `PING` (TLS confirmation).
    Pong,
    /// `HELLO 3`: a map describing the node.
    Hello,
    /// `READONLY`: `+OK`, or [`CLUSTER_DISABLED`] from a node without cluster support.
    Readonly,
    /// `INFO replication`: any reply; one from a replica not in sync fails the connect.
    Replication,
}

impl Expect {
    /// Whether `reply` is what this step needs; a reply that is not fails the connect with the
    /// step's name.
    fn accepts(self, reply: &[u8]) -> bool {
        match self {
            Expect::Ok => reply == b"+OK\r\n",
            Expect::Pong => reply == b"+PONG\r\n",
            Expect::Hello => reply.first() == Some(&b'%'),
            Expect::Readonly => reply == b"+OK\r\n" || reply == CLUSTER_DISABLED,
            Expect::Replication => true,
        }
    }
}

impl Handshake {
    /// `confirm`: when nothing else is sent, send `PING`, so a session the node refuses after
    /// the TLS handshake (a missing client certificate) fails here. `protocol`: RESP3
    /// connections say `HELLO 3` (after `AUTH`), so every reply on them has RESP3's types.
    pub(crate) fn new(
        credentials: Option<&Credentials>,
        readonly: bool,
        confirm: bool,
        protocol: Protocol,
    ) -> Handshake {
        let mut payload = BytesMut::new();
        let mut expected = Vec::new();
        let mut names = Vec::new();
        if let Some(credentials) = credentials {
            let mut args: Vec<&[u8]> = vec![b"AUTH"];
            if let Some(user) = &credentials.username {
                args.push(user.as_bytes());
            }
            args.push(credentials.password.as_bytes());
            payload.extend_from_slice(&encode_command(args.iter().copied()));
            expected.push(Expect::Ok);
            names.push("AUTH");
        }
        if protocol.is_resp3() {
            payload.extend_from_slice(b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n");
            expected.push(Expect::Hello);
            names.push("HELLO 3");
        }
        if readonly {
            payload.extend_from_slice(b"*1\r\n$8\r\nREADONLY\r\n");
            expected.push(Expect::Readonly);
            names.push("READONLY");
            // Only connections that may carry replica reads ask; a primary answers in a line.
            payload.extend_from_slice(b"*2\r\n$4\r\nINFO\r\n$11\r\nreplication\r\n");
            expected.push(Expect::Replication);
            names.push("INFO replication");
        }
        if confirm && expected.is_empty() {
            payload.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
            expected.push(Expect::Pong);
            names.push("PING");
        }
        Handshake {
            payload: payload.freeze(),
            expected,
            names: names.join(" and "),
            tracking: None,
        }
    }

    /// The same handshake, then `CLIENT TRACKING on REDIRECT` (a tracked lane's connections).
    pub(super) fn with_tracking(
        mut self,
        redirect: std::sync::Arc<super::tracked_lane::LaneRedirect>,
    ) -> Handshake {
        self.tracking = Some(redirect);
        self
    }

    /// A connection this handshake opened ended: for a tracked lane, the node forgot what it
    /// tracked for it (see `tracking`).
    pub(super) fn ended(&self) {
        if let Some(redirect) = &self.tracking {
            redirect.lost();
        }
    }

    /// Sends the commands on a fresh connection and checks every reply. `health`: the node's, for
    /// its pipelined connections, ejected at once when it is a replica not in sync.
    ///
    /// Every error is a sentence naming the step (`AUTH and READONLY refused by the node:
    /// -WRONGPASS ...`) for the log and the client; the password never appears in it. The whole
    /// handshake's replies must fit in 64 KiB: a node that sends more is not one redcar should
    /// trust with commands.
    pub(crate) async fn run<S>(
        &self,
        stream: S,
        limits: &Limits,
        health: Option<&Health>,
    ) -> Result<S, String>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let stream = self.run_fixed(stream, limits, health).await?;
        match &self.tracking {
            Some(redirect) => redirect.enable(stream, limits).await,
            None => Ok(stream),
        }
    }

    /// The commands encoded in `payload`, and their replies checked.
    ///
    /// All the replies are awaited before any is checked, so the connection is left clean (nothing
    /// unread) whether the handshake passes or fails.
    async fn run_fixed<S>(
        &self,
        mut stream: S,
        limits: &Limits,
        health: Option<&Health>,
    ) -> Result<S, String>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        if self.expected.is_empty() {
            return Ok(stream);
        }
        let names = &self.names;
        stream
            .write_all(&self.payload)
            .await
            .map_err(|e| format!("{names}: write failed: {e}"))?;
        // TLS holds the records until flushed; for TCP this does nothing.
        stream
            .flush()
            .await
            .map_err(|e| format!("{names}: write failed: {e}"))?;
        let mut input = BytesMut::with_capacity(256);
        let count = self.expected.len() as u32;
        loop {
            if let Some(len) = frames_len(&input, count, limits)? {
                let checked = first_refusal(&input[..len], &self.expected, limits);
                if let (Err(why), Some(health)) = (&checked, health) {
                    if why.starts_with(NOT_IN_SYNC) {
                        health.eject_now(why);
                    }
                }
                return match checked? {
                    None => Ok(stream),
                    Some(reply) => Err(format!("{names} refused by the node: {reply}")),
                };
            }
            match stream.read_buf(&mut input).await {
                Ok(0) => return Err(format!("node closed the connection during {names}")),
                // `INFO replication` of a primary lists its replicas: room for hundreds.
                Ok(_) if input.len() > 65536 => return Err(format!("oversized reply to {names}")),
                Ok(_) => {}
                Err(e) => return Err(format!("{names}: read failed: {e}")),
            }
        }
    }
}

/// The first reply that is not what its command expects, as text; `Err` for replies that cannot
/// be read, and for a replica not in sync with its primary (why, as the connect's error).
fn first_refusal(
    replies: &[u8],
    expected: &[Expect],
    limits: &Limits,
) -> Result<Option<String>, String> {
    let mut rest = replies;
    for expect in expected {
        let Some(len) = frames_len(rest, 1, limits)? else {
            return Err("incomplete handshake reply".to_string());
        };
        let reply = &rest[..len];
        if *expect == Expect::Replication {
            if let Some(why) = not_in_sync(reply) {
                return Err(why);
            }
        }
        if !expect.accepts(reply) {
            // A refusal is an error line; any other reply is shown by its first line only.
            let line = reply.split(|&b| b == b'\r').next().unwrap_or_default();
            return Ok(Some(String::from_utf8_lossy(line).to_string()));
        }
        rest = &rest[len..];
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_payload_holds_auth_then_readonly() {
        let credentials = Credentials {
            username: Some("redcar".into()),
            password: "pw".into(),
        };
        let both = Handshake::new(Some(&credentials), true, true, Protocol::Resp2);
        assert_eq!(
            &both.payload[..],
            &b"*3\r\n$4\r\nAUTH\r\n$6\r\nredcar\r\n$2\r\npw\r\n*1\r\n$8\r\nREADONLY\r\n\
               *2\r\n$4\r\nINFO\r\n$11\r\nreplication\r\n"[..]
        );
        assert_eq!(
            both.expected,
            [Expect::Ok, Expect::Readonly, Expect::Replication]
        );
        let legacy = Credentials {
            username: None,
            password: "pw".into(),
        };
        assert_eq!(
            &Handshake::new(Some(&legacy), false, true, Protocol::Resp2).payload[..],
            b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n"
        );
        assert_eq!(
            Handshake::new(None, false, false, Protocol::Resp2)
                .expected
                .len(),
            0
        );
        let ping = Handshake::new(None, false, true, Protocol::Resp2);
        assert_eq!(&ping.payload[..], b"*1\r\n$4\r\nPING\r\n");
        assert_eq!(ping.expected, [Expect::Pong]);
        assert!(
            !format!("{credentials:?}").contains("pw\""),
            "password never in Debug"
        );
    }

    #[test]
    fn a_refusal_is_named_without_the_password() {
        let limits = Limits::default();
        let replies = b"-WRONGPASS invalid username-password pair\r\n+OK\r\n";
        assert_eq!(
            first_refusal(replies, &[Expect::Ok, Expect::Ok], &limits),
            Ok(Some(
                "-WRONGPASS invalid username-password pair".to_string()
            ))
        );
        assert_eq!(
            first_refusal(b"+OK\r\n+OK\r\n", &[Expect::Ok, Expect::Ok], &limits),
            Ok(None)
        );
        assert_eq!(
            first_refusal(b"+PONG\r\n", &[Expect::Pong], &limits),
            Ok(None)
        );
    }

    #[test]
    fn a_non_cluster_replica_may_refuse_readonly_but_not_auth() {
        let limits = Limits::default();
        let disabled = b"+OK\r\n-ERR This instance has cluster support disabled\r\n";
        assert_eq!(
            first_refusal(disabled, &[Expect::Ok, Expect::Readonly], &limits),
            Ok(None),
            "READONLY refused by a non-cluster node is fine"
        );
        assert!(
            first_refusal(disabled, &[Expect::Ok, Expect::Ok], &limits)
                .expect("parses")
                .is_some(),
            "without READONLY sent, the same reply is a refusal"
        );
        let auth_refused = b"-ERR This instance has cluster support disabled\r\n+OK\r\n";
        assert!(
            first_refusal(auth_refused, &[Expect::Ok, Expect::Readonly], &limits)
                .expect("parses")
                .is_some(),
            "only the last reply (READONLY's) is tolerated"
        );
    }

    #[test]
    fn a_resp3_connection_says_hello_3_after_auth_and_wants_a_map_back() {
        let credentials = Credentials {
            username: None,
            password: "pw".into(),
        };
        let three = Handshake::new(Some(&credentials), true, true, Protocol::Resp3);
        assert_eq!(
            &three.payload[..],
            &b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n*1\r\n$8\r\nREADONLY\r\n\
               *2\r\n$4\r\nINFO\r\n$11\r\nreplication\r\n"[..]
        );
        assert_eq!(
            three.names,
            "AUTH and HELLO 3 and READONLY and INFO replication"
        );
        let limits = Limits::default();
        let hello = b"+OK\r\n%1\r\n+proto\r\n:3\r\n+OK\r\n=15\r\ntxt:role:master\r\n";
        assert_eq!(first_refusal(hello, &three.expected, &limits), Ok(None));
        let old = b"+OK\r\n-ERR unknown command 'HELLO'\r\n+OK\r\n=15\r\ntxt:role:master\r\n";
        assert_eq!(
            first_refusal(old, &three.expected, &limits),
            Ok(Some("-ERR unknown command 'HELLO'".to_string()))
        );
        let tls_only = Handshake::new(None, false, true, Protocol::Resp3);
        assert_eq!(tls_only.expected, [Expect::Hello], "HELLO confirms TLS too");
    }

    #[test]
    fn a_replica_not_in_sync_fails_the_handshake_with_the_reason() {
        let limits = Limits::default();
        let expected = [Expect::Readonly, Expect::Replication];
        let body = "role:slave\r\nmaster_link_status:down\r\nmaster_sync_in_progress:1\r\n";
        let syncing = format!("+OK\r\n${}\r\n{body}\r\n", body.len());
        let refused = first_refusal(syncing.as_bytes(), &expected, &limits);
        assert!(
            refused
                .as_ref()
                .is_err_and(|why| why.contains("not in sync")),
            "{refused:?}"
        );
        let body = "role:slave\r\nmaster_link_status:up\r\n";
        let synced = format!("+OK\r\n${}\r\n{body}\r\n", body.len());
        assert_eq!(
            first_refusal(synced.as_bytes(), &expected, &limits),
            Ok(None)
        );
        let denied = b"+OK\r\n-NOPERM no permissions to run the 'info' command\r\n";
        assert_eq!(
            first_refusal(denied, &expected, &limits),
            Ok(None),
            "a node that may not be asked is not refused for it"
        );
    }
}
