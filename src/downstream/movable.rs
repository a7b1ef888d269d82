//! Which client sockets can move between per-core workers (plain TCP and Unix sockets), and how
//! one leaves its worker's reactor (see `session/moving.rs`).

use std::os::fd::{AsFd, OwnedFd};

/// A client socket that can leave its worker's reactor and join another's: plain TCP and Unix
/// sockets. A TLS session keeps its worker (its stream holds the TLS state over the socket).
pub(crate) trait Movable: Sized {
    /// Whether sessions on this kind of socket may move.
    const MOVABLE: bool = false;

    /// The socket, out of this worker's reactor; `None` when it cannot leave.
    fn detach(self) -> Option<Detached> {
        None
    }

    /// A second descriptor of the socket, and its listener kind (`tcp`, `unix`): a subscribed
    /// client goes to the next process while this one still writes to it (an upgrade in
    /// place, `pubsub::handover`). `None` for a TLS session.
    fn duplicate(&self) -> Option<(&'static str, OwnedFd)> {
        None
    }
}

/// A socket between two workers.
pub(crate) enum Detached {
    Tcp(std::net::TcpStream),
    Unix(std::os::unix::net::UnixStream),
}

impl Movable for tokio::net::TcpStream {
    const MOVABLE: bool = true;

    fn detach(self) -> Option<Detached> {
        self.into_std().ok().map(Detached::Tcp)
    }

    fn duplicate(&self) -> Option<(&'static str, OwnedFd)> {
        self.as_fd().try_clone_to_owned().ok().map(|fd| ("tcp", fd))
    }
}

impl Movable for tokio::net::UnixStream {
    const MOVABLE: bool = true;

    fn detach(self) -> Option<Detached> {
        self.into_std().ok().map(Detached::Unix)
    }

    fn duplicate(&self) -> Option<(&'static str, OwnedFd)> {
        self.as_fd()
            .try_clone_to_owned()
            .ok()
            .map(|fd| ("unix", fd))
    }
}

impl<IO> Movable for tokio_rustls::server::TlsStream<IO> {}
