//! A minimal async RESP2 client for diagnosis: one connection, one command at a time, every
//! step bounded by a timeout. Encoding and decoding reuse `redcar_protocol`, TLS reuses
//! `redcar_tls` (the proxy's own settings and handshake).

use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

use redcar_protocol::protocol::{Frame, Limits, ProtocolError, Request};
use redcar_tls::UpstreamTls;

/// Credentials for `AUTH` on every node (`--user`, `--password`).
#[derive(Clone)]
pub struct Credentials {
    /// Redis 6+ ACL user; `None` authenticates as the `default` user (`requirepass`).
    pub username: Option<String>,
    /// Never printed: `Debug` shows it redacted.
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

/// A connected node socket, plain TCP or TLS: the client only reads and writes it, one command
/// at a time, so the indirection costs nothing that matters.
trait NodeStream: AsyncRead + AsyncWrite + Unpin + Send {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send> NodeStream for T {}

/// How to reach a node.
#[derive(Clone, Debug)]
pub(crate) struct ConnectOptions {
    /// Bound on connecting, and on each command's round trip.
    pub(crate) timeout: Duration,
    /// Sent with `AUTH` right after connecting (`--user`, `--password`), as the proxy's
    /// `upstream.username`/`upstream.password`.
    pub(crate) credentials: Option<Credentials>,
    /// TLS towards the nodes (`--tls --cacert ...`), as the proxy's `upstream.tls`.
    pub(crate) tls: Option<UpstreamTls>,
}

/// Why talking to a node failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClientError {
    /// No answer within the limit, and what doctor was doing (connecting, reading...).
    #[error("timed out after {0:?} while {1}")]
    Timeout(Duration, &'static str),
    /// Connecting, reading or writing failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The TLS handshake failed (certificate, CA, server name).
    #[error("{0}")]
    Tls(String),
    /// The node closed the connection before answering.
    #[error("connection closed by the node")]
    Closed,
    /// The reply is not valid RESP.
    #[error("unreadable reply: {0}")]
    Protocol(#[from] ProtocolError),
    /// The node answered with an error reply, e.g. `-NOAUTH` or `-ERR unknown command`.
    #[error("{0}")]
    Reply(String),
}

/// One connection to one node.
pub(crate) struct NodeClient {
    /// Plain TCP or TLS, as `--tls` says.
    stream: Box<dyn NodeStream>,
    /// Bytes read but not yet parsed into a reply.
    buf: BytesMut,
    /// Bounds every read and write (`--timeout`).
    timeout: Duration,
    /// Parse limits for the node's replies.
    limits: Limits,
}

// === impl NodeClient ===

impl NodeClient {
    /// Connects (and authenticates, when credentials are given) within `options.timeout`.
    pub(crate) async fn connect(
        addr: &str,
        options: &ConnectOptions,
    ) -> Result<NodeClient, ClientError> {
        let stream = timeout(options.timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| ClientError::Timeout(options.timeout, "connecting"))??;
        // Commands are small and sent one at a time: don't let Nagle hold them back.
        stream.set_nodelay(true)?;
        let stream: Box<dyn NodeStream> = match &options.tls {
            None => Box::new(stream),
            Some(tls) => Box::new(
                tls.handshake(addr, stream, options.timeout)
                    .await
                    .map_err(ClientError::Tls)?,
            ),
        };
        let mut client = NodeClient {
            stream,
            buf: BytesMut::with_capacity(16 * 1024),
            timeout: options.timeout,
            limits: Limits::default(),
        };
        if let Some(credentials) = &options.credentials {
            client.authenticate(credentials).await?;
        }
        Ok(client)
    }

    async fn authenticate(&mut self, credentials: &Credentials) -> Result<(), ClientError> {
        let mut args = vec!["AUTH"];
        if let Some(user) = &credentials.username {
            args.push(user);
        }
        args.push(&credentials.password);
        self.call(&args).await.map(drop)
    }

    /// Sends one command and returns its reply; an error reply becomes [`ClientError::Reply`].
    pub(crate) async fn call(&mut self, args: &[&str]) -> Result<Frame, ClientError> {
        let request = Request::from_args(args);
        let limit = self.timeout;
        let frame = timeout(limit, async {
            self.stream.write_all(request.raw()).await?;
            self.stream.flush().await?;
            self.read_frame().await
        })
        .await
        .map_err(|_| ClientError::Timeout(limit, "waiting for a reply"))??;
        match frame {
            Frame::Error(message) => Err(ClientError::Reply(
                String::from_utf8_lossy(&message).into_owned(),
            )),
            frame => Ok(frame),
        }
    }

    /// Sends a command whose reply is text (`INFO`, `CLUSTER NODES`).
    pub(crate) async fn call_text(&mut self, args: &[&str]) -> Result<String, ClientError> {
        let frame = self.call(args).await?;
        match frame.as_bytes() {
            Some(bytes) => Ok(String::from_utf8_lossy(bytes).into_owned()),
            None => Err(ClientError::Reply(format!(
                "{} did not reply with text",
                args.join(" ")
            ))),
        }
    }

    async fn read_frame(&mut self) -> Result<Frame, ClientError> {
        loop {
            if let Some(frame) = Frame::parse(&mut self.buf, &self.limits)? {
                return Ok(frame);
            }
            if self.stream.read_buf(&mut self.buf).await? == 0 {
                return Err(ClientError::Closed);
            }
        }
    }
}
