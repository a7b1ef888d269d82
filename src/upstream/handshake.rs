//! What a new node connection says before it carries commands: `AUTH` with the upstream
//! credentials and, on connections that may read from replicas, `READONLY` — pipelined in one
//! write, each reply must be `+OK`. Over TLS with neither, a `PING` (`+PONG`) confirms the
//! session: a node that refuses the client certificate says so only after a TLS 1.3 client
//! thinks the handshake is done, and that must fail the connect, not the first command.

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::conn::frames_len;
use crate::protocol::{encode_command, Limits};

/// Credentials redcar presents to every node (`upstream.username`, `upstream.password`).
#[derive(Clone)]
pub struct Credentials {
    /// Redis 6+ ACL user; `None` authenticates as the `default` user (`requirepass`).
    pub username: Option<String>,
    pub password: String,
}

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
pub struct Handshake {
    payload: Bytes,
    replies: u32,
    /// The one command is `PING` (TLS confirmation): its reply must be `+PONG`.
    ping: bool,
    /// What the commands are, for error messages (never the password).
    names: &'static str,
}

impl Handshake {
    /// `confirm`: when nothing else is sent, send `PING`, so a session the node refuses after
    /// the TLS handshake (a missing client certificate) fails here.
    pub fn new(credentials: Option<&Credentials>, readonly: bool, confirm: bool) -> Handshake {
        let mut payload = BytesMut::new();
        let mut replies = 0;
        if let Some(credentials) = credentials {
            let mut args: Vec<&[u8]> = vec![b"AUTH"];
            if let Some(user) = &credentials.username {
                args.push(user.as_bytes());
            }
            args.push(credentials.password.as_bytes());
            payload.extend_from_slice(&encode_command(args.iter().copied()));
            replies += 1;
        }
        if readonly {
            payload.extend_from_slice(b"*1\r\n$8\r\nREADONLY\r\n");
            replies += 1;
        }
        let ping = confirm && replies == 0;
        if ping {
            payload.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
            replies = 1;
        }
        let names = match (credentials.is_some(), readonly) {
            (true, true) => "AUTH and READONLY",
            (true, false) => "AUTH",
            (false, true) => "READONLY",
            (false, false) if ping => "PING",
            (false, false) => "",
        };
        Handshake {
            payload: payload.freeze(),
            replies,
            ping,
            names,
        }
    }

    /// Sends the commands on a fresh connection and checks every reply is `+OK` (`+PONG`).
    pub async fn run<S>(&self, mut stream: S, limits: &Limits) -> Result<S, String>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        if self.replies == 0 {
            return Ok(stream);
        }
        let names = self.names;
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
        loop {
            if let Some(len) = frames_len(&input, self.replies, limits)? {
                let expected: &[u8] = if self.ping { b"+PONG\r\n" } else { b"+OK\r\n" };
                return match first_refusal(&input[..len], self.replies, expected, limits)? {
                    None => Ok(stream),
                    Some(reply) => Err(format!("{names} refused by the node: {reply}")),
                };
            }
            match stream.read_buf(&mut input).await {
                Ok(0) => return Err(format!("node closed the connection during {names}")),
                Ok(_) if input.len() > 4096 => return Err(format!("oversized reply to {names}")),
                Ok(_) => {}
                Err(e) => return Err(format!("{names}: read failed: {e}")),
            }
        }
    }
}

/// The first reply among `count` that is not `expected`, as text.
fn first_refusal(
    replies: &[u8],
    count: u32,
    expected: &[u8],
    limits: &Limits,
) -> Result<Option<String>, String> {
    let mut rest = replies;
    for _ in 0..count {
        let Some(len) = frames_len(rest, 1, limits)? else {
            return Err("incomplete handshake reply".to_string());
        };
        if &rest[..len] != expected && !non_cluster_readonly(&rest[..len]) {
            return Ok(Some(
                String::from_utf8_lossy(&rest[..len]).trim_end().to_string(),
            ));
        }
        rest = &rest[len..];
    }
    Ok(None)
}

/// A node without cluster mode (a standalone or Sentinel-managed replica) answers READONLY with
/// this error; it serves reads anyway, so the connection is fine. Only READONLY can get it.
fn non_cluster_readonly(reply: &[u8]) -> bool {
    reply.starts_with(b"-ERR") && reply.windows(24).any(|w| w == b"cluster support disabled")
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
        let both = Handshake::new(Some(&credentials), true, true);
        assert_eq!(
            &both.payload[..],
            &b"*3\r\n$4\r\nAUTH\r\n$6\r\nredcar\r\n$2\r\npw\r\n*1\r\n$8\r\nREADONLY\r\n"[..]
        );
        assert_eq!(both.replies, 2);
        let legacy = Credentials {
            username: None,
            password: "pw".into(),
        };
        assert_eq!(
            &Handshake::new(Some(&legacy), false, true).payload[..],
            b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n"
        );
        assert_eq!(Handshake::new(None, false, false).replies, 0);
        let ping = Handshake::new(None, false, true);
        assert_eq!(&ping.payload[..], b"*1\r\n$4\r\nPING\r\n");
        assert_eq!((ping.replies, ping.ping), (1, true));
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
            first_refusal(replies, 2, b"+OK\r\n", &limits),
            Ok(Some(
                "-WRONGPASS invalid username-password pair".to_string()
            ))
        );
        assert_eq!(
            first_refusal(b"+OK\r\n+OK\r\n", 2, b"+OK\r\n", &limits),
            Ok(None)
        );
        assert_eq!(
            first_refusal(b"+PONG\r\n", 1, b"+PONG\r\n", &limits),
            Ok(None)
        );
        // READONLY to a node without cluster mode (a standalone replica) is not a refusal.
        let standalone = b"+OK\r\n-ERR This instance has cluster support disabled\r\n";
        assert_eq!(first_refusal(standalone, 2, b"+OK\r\n", &limits), Ok(None));
    }
}
