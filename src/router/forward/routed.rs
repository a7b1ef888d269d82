//! A command on the keys of one route (`routes:`): forwarded to the route's backend, with a
//! copy to the route's mirror when it wants one.
//!
//! What holds: the mirror copy never affects the client: it is sent after the command itself is
//! queued, its reply is read and dropped (only counted), its failures are counted as mirror errors
//! and never retried, and when the mirror is over its in-flight bound the copy is dropped rather
//! than queued. A blocking command is never mirrored (it would hold up the mirror's shared
//! connection); that case does not reach this file.

use bytes::Bytes;
use tokio::time::Instant;

use super::{Call, Forwarder};
use crate::router::Route;
use crate::upstream::Lane;

impl Forwarder {
    /// Queues a routed command (not a blocking one) on its backend now, and its mirror copy, if
    /// any; `payload` is the request as the backend gets it.
    pub(in crate::router) fn start_routed(
        &self,
        route: &Route,
        payload: Bytes,
        slot: Option<u16>,
        write: bool,
        lane: Lane,
    ) -> Call<'_> {
        let target = Some(route.target.clone());
        let call = self.forward_to(
            target,
            None,
            payload.clone(),
            slot,
            write,
            lane,
            Instant::now(),
        );
        self.mirror(route, payload, slot, write, lane);
        call
    }

    /// Sends a copy to the route's mirror when it wants this command.
    ///
    /// `write` decides whether a mirror that copies writes only wants it; the copy goes on the
    /// client's lane, so it keeps the client's order on the mirror backend too.
    pub(in crate::router) fn mirror(
        &self,
        route: &Route,
        payload: Bytes,
        slot: Option<u16>,
        write: bool,
        lane: Lane,
    ) {
        if let Some(mirror) = &route.mirror {
            if mirror.wants(write) {
                mirror.send(payload, slot, lane, self.core.op_timeout());
            }
        }
    }
}
