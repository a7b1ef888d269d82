//! What the accept loop accepts from: a TCP or Unix listening socket (TLS and the per-core gate
//! wrap these), each yielding a client stream and a name for its peer.

use std::sync::Arc;

use tokio::net::{TcpListener, UnixListener};

/// A listening socket: TCP or Unix. The accept loop is the same for both.
pub(crate) trait Accept {
    type Stream: tokio::io::AsyncRead
        + tokio::io::AsyncWrite
        + super::movable::Movable
        + Send
        + Unpin
        + 'static;
    /// The `listener` label of the connection metrics.
    const LABEL: &'static str;
    /// The next client and how to name it in `/clients` and the slow log.
    fn accept_client(
        &self,
    ) -> impl std::future::Future<Output = std::io::Result<(Self::Stream, Arc<str>)>> + Send;
    /// The address the client reached (what a cluster facade announces); none for a Unix socket.
    fn local_addr(_stream: &Self::Stream) -> Option<std::net::SocketAddr> {
        None
    }
}

impl Accept for TcpListener {
    type Stream = tokio::net::TcpStream;
    const LABEL: &'static str = "tcp";

    async fn accept_client(&self) -> std::io::Result<(Self::Stream, Arc<str>)> {
        let (stream, peer) = self.accept().await?;
        // Small replies must not wait for Nagle; the session batches its own writes.
        let _ = stream.set_nodelay(true);
        Ok((stream, peer.to_string().into()))
    }

    fn local_addr(stream: &Self::Stream) -> Option<std::net::SocketAddr> {
        stream.local_addr().ok()
    }
}

impl Accept for UnixListener {
    type Stream = tokio::net::UnixStream;
    const LABEL: &'static str = "unix";

    async fn accept_client(&self) -> std::io::Result<(Self::Stream, Arc<str>)> {
        let (stream, _peer) = self.accept().await?;
        Ok((stream, Arc::from("unix")))
    }
}
