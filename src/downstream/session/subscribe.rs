//! A busy session handing its connection to subscribe mode, and taking it back.

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;

use super::super::pubsub;
use super::super::tracking;
use super::Client;
use crate::protocol::{Limits, Request};

impl<S> Client<'_, S>
where
    S: AsyncRead + AsyncWrite + Send + Unpin,
{
    /// Runs subscribe mode from `request` (a SUBSCRIBE-like command) until the client leaves
    /// it; the replies owed before it were written.
    pub(super) async fn subscribe_mode(
        &mut self,
        request: Request,
        limits: &Limits,
        max_reply_bytes: usize,
    ) -> pubsub::Left {
        let downstream = self.downstream;
        tracking::join_subscriber(downstream, &mut self.state);
        // Boxed: subscribe mode is rare, and its state would otherwise be part of every busy
        // session.
        let left = Box::pin(pubsub::serve(
            downstream,
            request,
            &mut self.stream.reader(),
            &mut self.stream.writer(),
            &mut self.input,
            &mut self.out,
            limits,
            max_reply_bytes,
            &mut self.drain,
            self.state.id as usize,
            &self.state,
        ))
        .await;
        self.last_activity = Instant::now();
        left
    }
}
