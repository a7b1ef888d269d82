//! A connection to a node, plain TCP or TLS, as one type for the code that is not on the hot path
//! (handshake, dedicated connections). The pipelined connections split it into
//! halves of the concrete type instead (`conn.rs`), so plain TCP pays for no `match` there.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

/// A connected node socket. TLS is boxed: its session state is large and most deployments
/// use plain TCP.
pub(crate) enum NodeStream {
    /// Plain TCP, the common case.
    Tcp(TcpStream),
    /// TLS over TCP (`upstream.tls`), already past its handshake.
    Tls(Box<TlsStream<TcpStream>>),
}

/// A write half whose empty write means "flush": the pipelined connection loop can then flush
/// TLS through the same `write` call it uses for data (one borrow of the writer per `select!`),
/// and plain TCP, which never needs it, keeps the plain `write`.
pub(crate) struct FlushOnEmpty<W>(pub W);

// === impl NodeStream ===

impl NodeStream {
    /// The TCP socket underneath (for probing whether the node closed an idle connection).
    ///
    /// Both variants have one underneath; for TLS, reading or writing it directly would corrupt the
    /// session, so it is only for socket options and peeking at its state.
    pub(crate) fn tcp(&self) -> &TcpStream {
        match self {
            NodeStream::Tcp(tcp) => tcp,
            NodeStream::Tls(tls) => tls.get_ref().0,
        }
    }
}

impl AsyncRead for NodeStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            NodeStream::Tcp(tcp) => Pin::new(tcp).poll_read(cx, buf),
            NodeStream::Tls(tls) => Pin::new(tls.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for NodeStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            NodeStream::Tcp(tcp) => Pin::new(tcp).poll_write(cx, buf),
            NodeStream::Tls(tls) => Pin::new(tls.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            NodeStream::Tcp(tcp) => Pin::new(tcp).poll_flush(cx),
            NodeStream::Tls(tls) => Pin::new(tls.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            NodeStream::Tcp(tcp) => Pin::new(tcp).poll_shutdown(cx),
            NodeStream::Tls(tls) => Pin::new(tls.as_mut()).poll_shutdown(cx),
        }
    }
}

// === impl FlushOnEmpty ===

impl<W: AsyncWrite + Unpin> AsyncWrite for FlushOnEmpty<W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let inner = Pin::new(&mut self.get_mut().0);
        if buf.is_empty() {
            return inner.poll_flush(cx).map_ok(|()| 0);
        }
        inner.poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}
