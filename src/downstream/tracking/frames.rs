//! The invalidation messages a client receives, as Redis 7.0 writes them.
//!
//! ```text
//! RESP3:                 >2 $10 invalidate *1 $1 k        null: >2 $10 invalidate _
//! RESP2 (REDIRECT to a   *3 $7 message $20 __redis__:invalidate *1 $1 k
//!   subscribed client):                                    null: ... __redis__:invalidate $-1
//! ```

use bytes::{Bytes, BytesMut};

use super::TrackingEvent;
use crate::protocol::{write_array_len, write_bulk, write_integer, Protocol};

/// Writes `events` for a client speaking `protocol`; `subscribed`: a RESP2 client in subscribe
/// mode, the only kind of RESP2 client that can receive them (others get nothing, as from
/// Redis).
pub(in crate::downstream) fn write_events(
    out: &mut BytesMut,
    events: &[TrackingEvent],
    protocol: Protocol,
    subscribed: bool,
) {
    if !protocol.is_resp3() && !subscribed {
        return;
    }
    for event in events {
        if let TrackingEvent::RedirectBroken(id) = event {
            // RESP3 only, as from Redis.
            if protocol.is_resp3() {
                out.extend_from_slice(b">2\r\n$21\r\ntracking-redir-broken\r\n");
                write_integer(out, *id as i64);
            }
            continue;
        }
        if protocol.is_resp3() {
            out.extend_from_slice(b">2\r\n$10\r\ninvalidate\r\n");
        } else {
            out.extend_from_slice(b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n");
        }
        match event {
            TrackingEvent::Keys(keys) => write_keys(out, keys),
            TrackingEvent::Flush if protocol.is_resp3() => out.extend_from_slice(b"_\r\n"),
            TrackingEvent::Flush => out.extend_from_slice(b"$-1\r\n"),
            TrackingEvent::RedirectBroken(_) => {}
        }
    }
}

fn write_keys(out: &mut BytesMut, keys: &[Bytes]) {
    write_array_len(out, keys.len());
    for key in keys {
        write_bulk(out, key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(events: &[TrackingEvent], protocol: Protocol, subscribed: bool) -> Vec<u8> {
        let mut out = BytesMut::new();
        write_events(&mut out, events, protocol, subscribed);
        out.to_vec()
    }

    #[test]
    fn resp3_gets_push_frames() {
        let events = [
            TrackingEvent::Keys(vec!["k3".into(), "x".into()]),
            TrackingEvent::Flush,
        ];
        assert_eq!(
            written(&events, Protocol::Resp3, false),
            b">2\r\n$10\r\ninvalidate\r\n*2\r\n$2\r\nk3\r\n$1\r\nx\r\n>2\r\n$10\r\ninvalidate\r\n_\r\n"
        );
    }

    #[test]
    fn a_broken_redirect_is_pushed_in_resp3_only() {
        let events = [TrackingEvent::RedirectBroken(12)];
        assert_eq!(
            written(&events, Protocol::Resp3, false),
            b">2\r\n$21\r\ntracking-redir-broken\r\n:12\r\n"
        );
        assert!(written(&events, Protocol::Resp2, true).is_empty());
    }

    #[test]
    fn resp2_gets_messages_only_while_subscribed() {
        let events = [TrackingEvent::Keys(vec!["k".into()]), TrackingEvent::Flush];
        assert_eq!(
            written(&events, Protocol::Resp2, true),
            &b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n$1\r\nk\r\n\
               *3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n$-1\r\n"[..]
        );
        assert!(written(&events, Protocol::Resp2, false).is_empty());
    }
}
