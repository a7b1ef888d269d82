//! A loop client's socket: TCP or Unix, non-blocking, registered with the loop's poll.

use std::io::{self, Read, Write};

use super::super::movable::Detached;

/// The client's end of the connection.
pub(super) enum ClientSocket {
    /// A TCP client, `TCP_NODELAY` set at accept.
    Tcp(mio::net::TcpStream),
    /// A Unix-socket client.
    Unix(mio::net::UnixStream),
}

impl ClientSocket {
    /// Registers the socket as `token` (readable and writable, edge-triggered).
    pub(super) fn register(&mut self, registry: &mio::Registry, token: u64) -> io::Result<()> {
        let (token, interest) = (
            mio::Token(token as usize),
            mio::Interest::READABLE | mio::Interest::WRITABLE,
        );
        match self {
            ClientSocket::Tcp(s) => registry.register(s, token, interest),
            ClientSocket::Unix(s) => registry.register(s, token, interest),
        }
    }

    /// Takes the socket off the loop's poll (before it moves elsewhere).
    pub(super) fn deregister(&mut self, registry: &mio::Registry) {
        let _ = match self {
            ClientSocket::Tcp(s) => registry.deregister(s),
            ClientSocket::Unix(s) => registry.deregister(s),
        };
    }

    /// The socket as a plain one, to hand to a session elsewhere.
    pub(super) fn detach(self) -> Detached {
        match self {
            ClientSocket::Tcp(s) => Detached::Tcp(s.into()),
            ClientSocket::Unix(s) => Detached::Unix(s.into()),
        }
    }

    /// A plain socket moved here (`Detached` back onto a loop).
    pub(super) fn attach(socket: Detached) -> ClientSocket {
        match socket {
            Detached::Tcp(s) => ClientSocket::Tcp(mio::net::TcpStream::from_std(s)),
            Detached::Unix(s) => ClientSocket::Unix(mio::net::UnixStream::from_std(s)),
        }
    }

    /// The address the client reached (what a cluster facade announces).
    pub(super) fn local_addr(&self) -> Option<std::net::SocketAddr> {
        match self {
            ClientSocket::Tcp(s) => s.local_addr().ok(),
            ClientSocket::Unix(_) => None,
        }
    }

    /// Shuts the writing side: the client sees the connection close once it read everything.
    pub(super) fn shutdown(&self) {
        let _ = match self {
            ClientSocket::Tcp(s) => s.shutdown(std::net::Shutdown::Write),
            ClientSocket::Unix(s) => s.shutdown(std::net::Shutdown::Write),
        };
    }
}

impl Read for ClientSocket {
    #[inline]
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            ClientSocket::Tcp(s) => s.read(buf),
            ClientSocket::Unix(s) => s.read(buf),
        }
    }
}

impl Write for ClientSocket {
    #[inline]
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            ClientSocket::Tcp(s) => s.write(buf),
            ClientSocket::Unix(s) => s.write(buf),
        }
    }

    /// Nothing to flush: writes go straight to the kernel, and the loop decides when to write.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
