//! Starting a plan of more than one request: each kind goes to the room that serves it.

use crate::protocol::Request;
use crate::router::compound::Routed;
use crate::router::compound::{Compound, Job};
use crate::router::split::Splitter;
use crate::router::{Call, Fanout, Stateful};
use crate::upstream::Lane;

impl<'r> Fanout<'r> {
    /// Starts a [`Compound`] plan: like [`Forwarder::forward`](crate::router::Forwarder::forward),
    /// every first request is queued on its node before this returns, so the client's order is
    /// kept.
    pub(crate) fn start(self, compound: Compound, request: &Request, lane: Lane) -> Call<'r> {
        match compound.0 {
            Job::Split(split) => Splitter::new(self.fwd).start(split, request, lane),
            Job::FanOut(kind) => self.start_fan_out(kind, request, lane),
            Job::NodeAdmin => self.start_node_admin(request, lane),
            Job::Eval { slot, write } => self.fwd.start_eval(request, slot, write, lane),
            Job::EvalSha { slot, write } => self.fwd.start_evalsha(request, slot, write, lane),
            Job::Routed(routed) => self.start_routed(*routed, request, lane),
        }
    }

    /// A command on one route's keys, queued on the route's backend now: a blocking one on a
    /// dedicated connection, the others with their mirror copy.
    fn start_routed(self, routed: Routed, request: &Request, lane: Lane) -> Call<'r> {
        let Routed {
            route,
            payload,
            slot,
            write,
            blocking,
            ..
        } = routed;
        let payload = payload.unwrap_or_else(|| request.raw().clone());
        if let (Some(timeout), Some(slot)) = (blocking, slot) {
            // A copy that blocks would hold up the mirror's shared connection: never mirrored.
            let target = Some(route.target.clone());
            let protocol = lane.protocol();
            return Stateful::new(self.fwd)
                .blocking_on(target, payload, slot, write, timeout, protocol);
        }
        self.fwd.start_routed(&route, payload, slot, write, lane)
    }
}
