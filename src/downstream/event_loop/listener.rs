//! A loop's copy of a listening socket (TCP or Unix), with what its clients get from it (the
//! cluster facade, the listener's gauges).
//!
//! Every loop holds its own copy (a duplicated descriptor) of each listening socket and registers
//! it with its own poll: the kernel wakes the loops, and the placement (`spread`) decides which of
//! them actually accepts, so no thread hands accepted sockets to another.

use std::io;
use std::sync::Arc;

use super::super::facade::Facade;
use super::super::ListenerMetrics;
use super::socket::ClientSocket;

/// Mail that gives a loop its copies of the listening sockets.
pub(crate) struct LoopListen(pub(crate) Vec<LoopListener>);

/// A listening socket on a loop.
pub(crate) struct LoopListener {
    /// The non-blocking listening socket.
    socket: ListenSocket,
    /// The listener's cluster facade, if it opts in (TCP only: a facade announces an IP and port).
    pub(super) facade: Option<Arc<Facade>>,
    /// The listener's connection gauges, shared by every loop's copy.
    pub(super) gauges: ListenerMetrics,
}

/// The two kinds of listening socket a loop serves; TLS listeners are served by session tasks, not
/// loops.
enum ListenSocket {
    Tcp(mio::net::TcpListener),
    Unix(mio::net::UnixListener),
}

impl LoopListener {
    /// A TCP listener (one loop's copy of it), with its cluster facade if any.
    pub(crate) fn tcp(
        socket: std::net::TcpListener,
        facade: Option<Arc<Facade>>,
        gauges: ListenerMetrics,
    ) -> io::Result<LoopListener> {
        socket.set_nonblocking(true)?;
        Ok(LoopListener {
            socket: ListenSocket::Tcp(mio::net::TcpListener::from_std(socket)),
            facade,
            gauges,
        })
    }

    /// A Unix-socket listener (one loop's copy of it).
    pub(crate) fn unix(
        socket: std::os::unix::net::UnixListener,
        gauges: ListenerMetrics,
    ) -> io::Result<LoopListener> {
        socket.set_nonblocking(true)?;
        Ok(LoopListener {
            socket: ListenSocket::Unix(mio::net::UnixListener::from_std(socket)),
            facade: None,
            gauges,
        })
    }

    /// Readable only: a listening socket is never written.
    pub(super) fn register(&mut self, registry: &mio::Registry, token: u64) -> io::Result<()> {
        let token = mio::Token(token as usize);
        match &mut self.socket {
            ListenSocket::Tcp(s) => registry.register(s, token, mio::Interest::READABLE),
            ListenSocket::Unix(s) => registry.register(s, token, mio::Interest::READABLE),
        }
    }

    /// Errors are ignored: the socket is being dropped from this loop either way.
    pub(super) fn deregister(&mut self, registry: &mio::Registry) {
        let _ = match &mut self.socket {
            ListenSocket::Tcp(s) => registry.deregister(s),
            ListenSocket::Unix(s) => registry.deregister(s),
        };
    }

    /// The listener's label in the metrics and `/clients`: `tcp` or `unix`.
    pub(super) fn label(&self) -> &'static str {
        match self.socket {
            ListenSocket::Tcp(_) => "tcp",
            ListenSocket::Unix(_) => "unix",
        }
    }

    /// `WouldBlock` when no client is waiting (another loop may have taken it). TCP clients get
    /// `TCP_NODELAY`; a Unix client's peer name is `unix` (Unix sockets have no peer address worth
    /// showing).
    pub(super) fn accept(&self) -> io::Result<(ClientSocket, Arc<str>)> {
        match &self.socket {
            ListenSocket::Tcp(listener) => {
                let (stream, peer) = listener.accept()?;
                // Small replies must not wait for Nagle; the loop batches its own writes.
                let _ = stream.set_nodelay(true);
                Ok((ClientSocket::Tcp(stream), peer.to_string().into()))
            }
            ListenSocket::Unix(listener) => {
                let (stream, _) = listener.accept()?;
                Ok((ClientSocket::Unix(stream), Arc::from("unix")))
            }
        }
    }
}
