//! What a new node connection says before it carries commands: `AUTH` with the upstream
//! credentials and, on connections that may read from replicas, `READONLY` — pipelined in one
//! write, each reply must be `+OK`.

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

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
    /// What the commands are, for error messages (never the password).
    names: &'static str,
}

impl Handshake {
    pub fn new(credentials: Option<&Credentials>, readonly: bool) -> Handshake {
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
        let names = match (credentials.is_some(), readonly) {
            (true, true) => "AUTH and READONLY",
            (true, false) => "AUTH",
            (false, true) => "READONLY",
            (false, false) => "",
        };
        Handshake {
            payload: payload.freeze(),
            replies,
            names,
        }
    }

    /// Sends the commands on a fresh connection and checks every reply is `+OK`.
    pub async fn run(&self, mut stream: TcpStream, limits: &Limits) -> Result<TcpStream, String> {
        if self.replies == 0 {
            return Ok(stream);
        }
        let names = self.names;
        stream
            .write_all(&self.payload)
            .await
            .map_err(|e| format!("{names}: write failed: {e}"))?;
        let mut input = BytesMut::with_capacity(256);
        loop {
            if let Some(len) = frames_len(&input, self.replies, limits)? {
                return match first_refusal(&input[..len], self.replies, limits)? {
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

/// The first reply among `count` that is not `+OK`, as text.
fn first_refusal(replies: &[u8], count: u32, limits: &Limits) -> Result<Option<String>, String> {
    let mut rest = replies;
    for _ in 0..count {
        let Some(len) = frames_len(rest, 1, limits)? else {
            return Err("incomplete handshake reply".to_string());
        };
        if &rest[..len] != b"+OK\r\n" {
            return Ok(Some(
                String::from_utf8_lossy(&rest[..len]).trim_end().to_string(),
            ));
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
        let both = Handshake::new(Some(&credentials), true);
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
            &Handshake::new(Some(&legacy), false).payload[..],
            b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n"
        );
        assert_eq!(Handshake::new(None, false).replies, 0);
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
            first_refusal(replies, 2, &limits),
            Ok(Some(
                "-WRONGPASS invalid username-password pair".to_string()
            ))
        );
        assert_eq!(first_refusal(b"+OK\r\n+OK\r\n", 2, &limits), Ok(None));
    }
}
