//! A loop's copy of a listening socket (TCP or Unix), with what its clients get from it (the
//! cluster facade, the listener's gauges).

use std::io;
use std::sync::Arc;

use super::super::facade::Facade;
use super::super::ListenerMetrics;
use super::socket::ClientSocket;

/// Mail that gives a loop its copies of the listening sockets.
pub(crate) struct LoopListen(pub(crate) Vec<LoopListener>);

/// A listening socket on a loop.
pub(crate) struct LoopListener {
    socket: ListenSocket,
    pub(super) facade: Option<Arc<Facade>>,
    pub(super) gauges: ListenerMetrics,
}

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

    pub(super) fn register(&mut self, registry: &mio::Registry, token: u64) -> io::Result<()> {
        let token = mio::Token(token as usize);
        match &mut self.socket {
            ListenSocket::Tcp(s) => registry.register(s, token, mio::Interest::READABLE),
            ListenSocket::Unix(s) => registry.register(s, token, mio::Interest::READABLE),
        }
    }

    pub(super) fn deregister(&mut self, registry: &mio::Registry) {
        let _ = match &mut self.socket {
            ListenSocket::Tcp(s) => registry.deregister(s),
            ListenSocket::Unix(s) => registry.deregister(s),
        };
    }

    pub(super) fn label(&self) -> &'static str {
        match self.socket {
            ListenSocket::Tcp(_) => "tcp",
            ListenSocket::Unix(_) => "unix",
        }
    }

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
