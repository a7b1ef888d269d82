//! PING in subscribe mode: its `pong` must keep its place among the pushes, so it goes to a
//! subscription connection when there is one; otherwise (or when that connection was lost
//! before answering) redcar answers in subscribe mode's form.

use bytes::BytesMut;

use super::SubscribeMode;
use crate::protocol::{write_array_len, write_bulk, Request};

impl SubscribeMode<'_> {
    /// PING goes to a subscription connection so its `pong` keeps its place among the pushes.
    pub(super) fn ping(&mut self, request: &Request, out: &mut BytesMut) {
        let conn = self
            .global
            .as_ref()
            .map(|(_, conn)| conn)
            .or_else(|| self.shard_conns.values().next());
        if conn.is_some_and(|conn| conn.send(request.raw().clone())) {
            self.awaiting = 1;
            self.current = None;
            return;
        }
        match (request.args().get(1), self.state.protocol.is_resp3()) {
            // RESP3 has no subscribe-mode form of PING: the usual replies.
            (Some(message), true) => write_bulk(out, message),
            (None, true) => out.extend_from_slice(b"+PONG\r\n"),
            (message, false) => {
                write_array_len(out, 2);
                write_bulk(out, b"pong");
                write_bulk(out, message.map_or(&b""[..], |m| m));
            }
        }
    }

    /// The reply to a PING whose connection was lost, in subscribe mode's form.
    pub(super) fn pong(&self, out: &mut BytesMut) {
        if self.state.protocol.is_resp3() {
            out.extend_from_slice(b"+PONG\r\n");
        } else {
            write_array_len(out, 2);
            write_bulk(out, b"pong");
            write_bulk(out, b"");
        }
    }
}
