//! One plain TCP connection to a sentinel: connect within a timeout, `AUTH` with the sentinel
//! credentials, send pipelined commands and read whole reply frames.

use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::protocol::{encode_command, Frame, Limits};

/// `AUTH [username] password` for the sentinels (never the data nodes' credentials).
/// Cloned into the follower and the watcher; it never reaches a log.
#[derive(Clone)]
pub(crate) struct SentinelAuth {
    /// `None` sends the one-argument `AUTH password` (the sentinel's `requirepass`).
    pub(crate) username: Option<String>,
    /// Read from its `Secret` when the follower starts; held in clear because it is sent.
    pub(crate) password: String,
}

/// A connected (and authenticated) sentinel.
/// One per query or subscription, dropped (closed) when it is done.
pub(crate) struct SentinelConn {
    /// Plain TCP: redcar does not speak TLS to sentinels.
    stream: TcpStream,
    /// Bytes read but not yet parsed into a frame.
    input: BytesMut,
    /// The default reply limits, so a misbehaving peer cannot make redcar buffer without bound.
    limits: Limits,
}

// === impl SentinelConn ===

impl SentinelConn {
    /// Connects to `addr` and authenticates; `timeout` bounds the connect and the AUTH reply.
    /// Fails on connect errors, the timeout, or an `AUTH` error reply; the message says which.
    pub(crate) async fn open(
        addr: &str,
        auth: Option<&SentinelAuth>,
        timeout: Duration,
    ) -> Result<SentinelConn, String> {
        let stream = match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) => return Err(format!("connect failed: {e}")),
            Err(_) => return Err(format!("connect timed out after {timeout:?}")),
        };
        // Small requests and replies: send each at once.
        let _ = stream.set_nodelay(true);
        let mut conn = SentinelConn {
            stream,
            input: BytesMut::with_capacity(4096),
            limits: Limits::default(),
        };
        if let Some(auth) = auth {
            let mut args: Vec<&[u8]> = vec![b"AUTH"];
            if let Some(user) = &auth.username {
                args.push(user.as_bytes());
            }
            args.push(auth.password.as_bytes());
            let reply = conn.request(&[args], timeout).await?;
            if let Some(Frame::Error(e)) = reply.first() {
                return Err(format!(
                    "AUTH refused (sentinel_username/sentinel_password): {}",
                    String::from_utf8_lossy(e)
                ));
            }
        }
        Ok(conn)
    }

    /// Sends `commands` in one write and reads one reply per command, all within `timeout`.
    /// Fails on a write or read error, a malformed reply, or the timeout; an error reply from the
    /// sentinel is returned as a frame, for the caller to judge.
    pub(crate) async fn request(
        &mut self,
        commands: &[Vec<&[u8]>],
        timeout: Duration,
    ) -> Result<Vec<Frame>, String> {
        let mut payload = BytesMut::new();
        for command in commands {
            payload.extend_from_slice(&encode_command(command.iter().copied()));
        }
        let exchange = async {
            self.stream
                .write_all(&payload)
                .await
                .map_err(|e| format!("write failed: {e}"))?;
            let mut replies = Vec::with_capacity(commands.len());
            while replies.len() < commands.len() {
                replies.push(self.next_frame().await?);
            }
            Ok(replies)
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(format!("no reply within {timeout:?}")),
        }
    }

    /// The next whole frame the sentinel sends (a reply, or a pub/sub message); no timeout.
    /// Used directly by the `+switch-master` subscription, which waits for as long as the
    /// connection lasts.
    pub(crate) async fn next_frame(&mut self) -> Result<Frame, String> {
        loop {
            if let Some(frame) =
                Frame::parse(&mut self.input, &self.limits).map_err(|e| e.to_string())?
            {
                return Ok(frame);
            }
            match self.stream.read_buf(&mut self.input).await {
                Ok(0) => return Err("the sentinel closed the connection".to_string()),
                Ok(_) => {}
                Err(e) => return Err(format!("read failed: {e}")),
            }
        }
    }
}
