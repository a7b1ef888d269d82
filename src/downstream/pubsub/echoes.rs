//! Messages a new node delivers again after redcar moved a client's channels and patterns to
//! it (`lost.rs`). The cluster bus carries a PUBLISH to every node asynchronously, so the node
//! subscribed next may still be working through messages the lost node had already delivered;
//! passed on, the client would get them twice on what is, to it, one subscription. Redis never
//! delivers a message twice on one connection, and pub/sub is at most once: such an echo is
//! dropped.
//!
//! An echo is recognised by its frame: the lost connection's last [`REMEMBERED`] messages are
//! kept as hashes, and until [`ECHO_SPAN`] after the new node confirmed the subscriptions a
//! message from it equal to one of them is dropped (each remembered message once). The price:
//! a message published again with the very same channel and payload in that moment reaches the
//! client once.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;
use twox_hash::XxHash3_64;

/// How many of the last messages of the channel-and-pattern connection are remembered.
const REMEMBERED: usize = 256;

/// How long after the new node's confirmation its messages are checked: far longer than the
/// bus takes from one node to another, even on a busy host (tens of milliseconds were seen).
pub(super) const ECHO_SPAN: Duration = Duration::from_secs(1);

/// The hashes of the last messages one connection delivered, oldest first.
#[derive(Default)]
pub(super) struct Delivered(VecDeque<u64>);

impl Delivered {
    /// `frame` was passed on to the client.
    pub(super) fn note(&mut self, frame: &[u8]) {
        if self.0.len() == REMEMBERED {
            self.0.pop_front();
        }
        self.0.push_back(XxHash3_64::oneshot(frame));
    }

    /// The connection was lost at `now`: what its echoes would look like (checked until
    /// [`ECHO_SPAN`] after the loss, or after the new node's confirmation when that comes).
    pub(super) fn lost(&mut self, now: Instant) -> Option<Echoes> {
        if self.0.is_empty() {
            return None;
        }
        Some(Echoes {
            expected: std::mem::take(&mut self.0),
            until: now + ECHO_SPAN,
        })
    }
}

/// Messages the lost connection delivered, which the new one may deliver again.
pub(super) struct Echoes {
    expected: VecDeque<u64>,
    until: Instant,
}

impl Echoes {
    /// True when `frame` repeats a message already delivered (and so is to be dropped); each
    /// remembered message matches once.
    pub(super) fn repeats(&mut self, frame: &[u8], now: Instant) -> bool {
        if now > self.until {
            return false;
        }
        let hash = XxHash3_64::oneshot(frame);
        match self.expected.iter().position(|&h| h == hash) {
            Some(at) => {
                self.expected.remove(at);
                true
            }
            None => false,
        }
    }

    /// The new node confirmed the subscriptions at `now`: its echoes can come from now on.
    pub(super) fn subscribed(&mut self, now: Instant) {
        self.until = now + ECHO_SPAN;
    }

    /// Whether nothing more can match: the span is over or every message was seen again.
    pub(super) fn spent(&self, now: Instant) -> bool {
        now > self.until || self.expected.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(payload: &str) -> Vec<u8> {
        format!(
            "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n${}\r\n{payload}\r\n",
            payload.len()
        )
        .into_bytes()
    }

    #[test]
    fn a_message_the_lost_connection_delivered_is_dropped_once_from_the_new_one() {
        let mut delivered = Delivered::default();
        for m in ["a", "b", "c"] {
            delivered.note(&message(m));
        }
        let now = Instant::now();
        let mut echoes = delivered.lost(now).expect("messages were delivered");
        assert!(echoes.repeats(&message("b"), now));
        assert!(!echoes.repeats(&message("b"), now), "each message once");
        assert!(!echoes.repeats(&message("d"), now), "a new message passes");
        assert!(echoes.repeats(&message("c"), now));
        assert!(!echoes.spent(now), "a is still expected");
        assert!(echoes.repeats(&message("a"), now));
        assert!(echoes.spent(now));
    }

    #[test]
    fn nothing_is_dropped_after_the_span_which_the_confirmation_starts_again() {
        let mut delivered = Delivered::default();
        delivered.note(&message("a"));
        let now = Instant::now();
        let mut echoes = delivered.lost(now).expect("one message");
        let later = now + ECHO_SPAN + Duration::from_millis(1);
        assert!(echoes.spent(later));
        assert!(!echoes.repeats(&message("a"), later));
        echoes.subscribed(later);
        assert!(
            !echoes.spent(later),
            "checked again once the new node confirmed"
        );
        assert!(echoes.repeats(&message("a"), later));
    }

    #[test]
    fn only_the_last_messages_are_remembered_and_a_quiet_connection_leaves_nothing() {
        assert!(Delivered::default().lost(Instant::now()).is_none());
        let mut delivered = Delivered::default();
        for i in 0..REMEMBERED + 10 {
            delivered.note(&message(&i.to_string()));
        }
        let now = Instant::now();
        let mut echoes = delivered.lost(now).expect("messages");
        assert!(!echoes.repeats(&message("0"), now), "forgotten");
        assert!(echoes.repeats(&message(&(REMEMBERED + 9).to_string()), now));
        assert!(delivered.lost(now).is_none(), "taken by the loss");
    }
}
