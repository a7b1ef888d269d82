//! A busy session handing its connection to subscribe mode, and taking it back; and, in an
//! upgrade in place, sending a subscribed client to the next process (`pubsub::handover`).

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;

use super::super::handover::HandedOver;
use super::super::movable::Movable;
use super::super::pubsub::{self, Rejoin, Start};
use super::super::tracking;
use super::Client;
use crate::protocol::{Limits, Request};

impl<S> Client<'_, S>
where
    S: AsyncRead + AsyncWrite + Send + Unpin + Movable,
{
    /// Runs subscribe mode from `request` (a SUBSCRIBE-like command) until the client leaves
    /// it; the replies owed before it were written.
    pub(super) async fn subscribe_mode(
        &mut self,
        request: Request,
        limits: &Limits,
        max_reply_bytes: usize,
    ) -> pubsub::Left {
        self.subscribed(Start::Command(request), limits, max_reply_bytes)
            .await
    }

    /// Subscribe mode for a subscribed client the previous process handed over, with its
    /// subscriptions (see `pubsub::handover`), until it leaves it.
    pub(super) async fn rejoin(
        &mut self,
        rejoin: Rejoin,
        limits: &Limits,
        max_reply_bytes: usize,
    ) -> pubsub::Left {
        self.subscribed(Start::Rejoin(rejoin), limits, max_reply_bytes)
            .await
    }

    async fn subscribed(
        &mut self,
        start: Start,
        limits: &Limits,
        max_reply_bytes: usize,
    ) -> pubsub::Left {
        let downstream = self.downstream;
        tracking::join_subscriber(downstream, &mut self.state);
        let (stream, state, facade, peer) = (&self.stream, &self.state, &self.facade, self.peer);
        let times = (self.connected_at, self.last_activity);
        // In an upgrade: the client's record, with its subscriptions and unparsed input, and a
        // second descriptor of its socket (this process writes to it until the new one is
        // subscribed); a TLS session cannot go.
        let mut leave = |subscriptions, input: &[u8]| {
            let Some((listener, socket)) = stream.duplicate() else {
                downstream.exits.handover.closed("tls");
                return None;
            };
            let times = (times.0.elapsed(), times.1.elapsed());
            let mut record =
                HandedOver::from_parts(state, facade.as_deref(), input, peer, listener, times);
            record.subscriptions = subscriptions;
            downstream.exits.handover.send_subscriber(&record, socket)
        };
        // Boxed: subscribe mode is rare, and its state would otherwise be part of every busy
        // session.
        let left = Box::pin(pubsub::serve(
            downstream,
            start,
            &mut stream.reader(),
            &mut stream.writer(),
            &mut self.input,
            &mut self.out,
            limits,
            max_reply_bytes,
            &mut self.drain,
            state.id as usize,
            state,
            &mut leave,
        ))
        .await;
        self.last_activity = Instant::now();
        left
    }
}
