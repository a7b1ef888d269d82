//! Commands bound to the client's connection rather than to one request: transactions (MULTI …
//! EXEC, queued by the session (`queue`) and sent as one unit on the client's shared
//! connection), WATCH and blocking commands (on a
//! dedicated connection), and WAIT (over the writes the client's connection carried). The
//! [`Stateful`] room.

mod dedicated;
mod queue;
mod transaction;
mod wait;

pub(crate) use dedicated::WatchedConn;
pub(crate) use queue::{Transaction, TxStep};
pub(crate) use wait::{Written, MOVED_FROM_WORKERS};

use crate::router::Forwarder;

/// The connection-bound room: transactions (`transaction`), WATCH, blocking commands and
/// lending a dedicated connection (`dedicated`), WAIT (`wait`). The state it serves lives with
/// the session ([`WatchedConn`], [`Written`]); it borrows the forwarder it resolves nodes through.
#[derive(Clone, Copy)]
pub(crate) struct Stateful<'r> {
    fwd: &'r Forwarder,
}

impl<'r> Stateful<'r> {
    pub(in crate::router) fn new(fwd: &'r Forwarder) -> Stateful<'r> {
        Stateful { fwd }
    }
}
