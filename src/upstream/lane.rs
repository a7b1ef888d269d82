//! A client's lane: which of a node's connections carry its commands, in which RESP version.

use crate::protocol::Protocol;

/// Picks a client's connection to each node. The same lane always maps to the same connection,
/// so one client's commands to a node run in the order it sent them; different clients spread
/// over the connections (never LIFO). A RESP3 client's lane takes the node's RESP3 connections
/// (opened on first use), whose replies already have the types that client expects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Lane {
    /// The client's id: picks the connection among the node's, so one client always uses the same
    /// one.
    client: usize,
    /// The client's RESP version: RESP3 clients use the node's RESP3 connections.
    protocol: Protocol,
    /// The client has `CLIENT TRACKING` on: its commands take the node's tracked lane.
    tracked: bool,
    /// The near cache moved the client to the nodes' BCAST lanes (see `upstream::tracking`).
    near: bool,
    /// Per core, whose share of a node's connections the lane takes: 0 for the calling
    /// thread's worker (every client lane), `w + 1` for worker `w` whatever thread calls (a
    /// moved session's WAIT asking the connections that carried its earlier writes).
    worker: u16,
}

impl Lane {
    /// The lane of client `client` (its id) speaking `protocol`.
    pub(crate) const fn new(client: usize, protocol: Protocol) -> Lane {
        Lane {
            client,
            protocol,
            tracked: false,
            near: false,
            worker: 0,
        }
    }

    /// The same lane on the nodes' tracked connections (see `upstream::tracking`) when `on`.
    pub(crate) const fn tracked(self, on: bool) -> Lane {
        Lane {
            tracked: on,
            ..self
        }
    }

    /// The same lane on the nodes' near-cache BCAST connections when `on` (see
    /// `upstream::tracking`; a tracking client's lane stays on the tracked connections).
    pub(crate) const fn near(self, on: bool) -> Lane {
        Lane { near: on, ..self }
    }

    /// The same lane on worker `worker`'s connections to each node, whichever thread sends on
    /// it (per core; with one runtime every thread shares all connections and this changes
    /// nothing). Tracked lanes are one per node and ignore it.
    pub(crate) const fn on_worker(self, worker: usize) -> Lane {
        assert!(worker < u16::MAX as usize, "worker index out of range");
        Lane {
            worker: worker as u16 + 1,
            ..self
        }
    }

    /// The worker whose connections the lane takes, if set by [`on_worker`](Self::on_worker);
    /// `None`: the calling thread's.
    #[inline]
    pub(crate) fn worker(self) -> Option<usize> {
        self.worker.checked_sub(1).map(usize::from)
    }

    /// On a tracked connection (default tracking, or the near cache's BCAST lanes).
    pub(crate) fn is_tracked(self) -> bool {
        self.tracked || self.near
    }

    pub(crate) fn is_near(self) -> bool {
        self.near && !self.tracked
    }

    /// A RESP2 lane, for redcar's own commands (topology, health, fan-outs it merges itself).
    pub(crate) const fn resp2(client: usize) -> Lane {
        Lane::new(client, Protocol::Resp2)
    }

    /// Spreads clients over a node's connections.
    pub(crate) fn client(self) -> usize {
        self.client
    }

    pub(crate) fn protocol(self) -> Protocol {
        self.protocol
    }
}
