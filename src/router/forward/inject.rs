//! Serving a command a fault rule picked (fault.rs): the error instead of the node's reply, or
//! the node's reply held for the delay.

use std::sync::Arc;

use tokio::time::{sleep_until, Instant};

use super::call::Call;
use super::command::ForwardedCommand;
use super::fault::Picked;
use super::Forwarder;
use crate::upstream::Node;

impl Forwarder {
    /// Serves a command a fault rule picked: an error is final (the command never reaches a
    /// node, so it is not retried); a delay holds the reply, not the send, so the command keeps
    /// its place in the client's order on the node — like a slow node, not a reordering.
    pub(super) fn inject(
        &self,
        picked: Picked,
        command: ForwardedCommand,
        node: Arc<Node>,
    ) -> Call<'_> {
        let Picked { delay, error } = picked;
        let until = Instant::now() + delay;
        if let Some(error) = error {
            if delay.is_zero() {
                return Call::ready(error);
            }
            return Call::slow(async move {
                sleep_until(until).await;
                error
            });
        }
        let reply = node.queue(command.payload.clone(), false, command.lane, 1);
        let sent = Call::sent(self, node, false, reply, command);
        Call::slow(async move {
            let reply = sent.settle().await;
            sleep_until(until).await;
            reply
        })
    }
}
