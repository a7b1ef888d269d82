//! Write-through: a plain `SET` of a key tracked in BCAST mode stores the value it wrote when
//! the node acknowledges it, so the readers that follow hit instead of reading it back.
//!
//! Why it is correct: the `SET` goes on the node's near lane, whose BCAST registration has
//! NOLOOP, so the node reports every later write of the key by anyone else (the lane's own
//! writes are redcar's, each holding the key: `NearCache::begin_write`). A write-through is
//! queued holding the key's send lock ([`Through::send`]), so the write-throughs of a key are
//! registered in the order they reach their lane, which is one connection: the order the node
//! runs them and answers them. Of overlapping writes of a key, only the last one queued may
//! store its value, and only if nothing else could have run after it: no write of the key sent
//! another way (unordered) and none on another lane since it was queued, and no invalidation
//! or flush (`store::writes` has the rules).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use super::store::{LaneId, Variant};
use super::{Admitted, NearCache};
use crate::protocol::{write_bulk, Args, Protocol};
use crate::upstream::{clock_ms, Node};

/// A `SET` whose value the cache stores with its `+OK` (see the module docs). Dropped without
/// [`send`](Self::send) (it goes the usual way, or nowhere), it counts as an unordered write;
/// dropped sent but unanswered (its client left), as one answered out of order.
pub(crate) struct Through {
    /// Keeps the cache alive while the write is on its way, so `Drop` can always report.
    cache: Arc<NearCache>,
    /// Unique per write-through (a process-wide counter): tells this write from overlapping ones of
    /// the same key in `store::writes`.
    token: u64,
    /// The key written, as the client sent it.
    key: Bytes,
    /// The value as a `GET` reply.
    reply: Bytes,
    /// The writing client's protocol: the entry stored answers `GET`s of that protocol only.
    protocol: Protocol,
    /// The entry's lifetime: the `SET`'s own `EX`/`PX`, capped by `near_cache.max_ttl`.
    ttl_ms: u64,
    /// Queued by [`send`](Self::send).
    sent: bool,
    /// Its reply was handled by [`finish`](Self::finish).
    answered: bool,
}

impl NearCache {
    /// A write-through for `args` from a `protocol` client, when it is a plain `SET key value`
    /// (optionally `EX seconds` or `PX milliseconds`) of a key admitted in BCAST mode whose
    /// value fits an entry; `None` otherwise (the write only drops the key).
    pub(crate) fn through(self: &Arc<Self>, args: Args<'_>, protocol: Protocol) -> Option<Through> {
        let is_set = args.first().is_some_and(|c| c.eq_ignore_ascii_case(b"SET"));
        let (Some(key), Some(value), true, 3 | 5) =
            (args.bytes(1), args.get(2), is_set, args.len())
        else {
            return None;
        };
        let ttl_ms = match (args.get(3), args.get(4)) {
            (Some(unit), Some(amount)) => ttl_ms(unit, amount)?.min(self.max_ttl_ms),
            _ => self.max_ttl_ms,
        };
        if value.len() + 32 > self.max_entry_bytes
            || self.admission(&key, false) != Some(Admitted::Bcast)
        {
            return None;
        }
        let mut reply = BytesMut::with_capacity(value.len() + 16);
        write_bulk(&mut reply, value);
        Some(Through {
            cache: self.clone(),
            token: self.next_fill.fetch_add(1, Ordering::Relaxed),
            key,
            reply: reply.freeze(),
            protocol,
            ttl_ms,
            sent: false,
            answered: false,
        })
    }
}

impl Through {
    /// The key's send lock and the lane record this write under it.
    pub(super) fn token(&self) -> u64 {
        self.token
    }

    /// Sends the `SET` with `send`, which queues it on its node's near lane for the client's
    /// protocol before it returns (as `Router::forward` does), ordered with the key's other
    /// write-throughs; `queued_on`: the node the call was queued on, `None` when it was not
    /// queued now (no slot owner yet, ...: then it is unordered).
    pub(crate) fn send<C>(
        &mut self,
        send: impl FnOnce() -> C,
        queued_on: impl FnOnce(&C) -> Option<&str>,
    ) -> C {
        let store = &self.cache.store;
        let _order = store.order(&self.key);
        store.sending(&self.key, self.token);
        let call = send();
        let lane = queued_on(&call).map(|addr| LaneId {
            addr: addr.into(),
            protocol: self.protocol,
        });
        store.sent(&self.key, self.token, lane);
        self.sent = true;
        call
    }

    /// The `SET` was answered `reply` by `node` (`None` after a redirect, a retry or a
    /// time-out: it may have run after later writes, and no write-through in flight stores):
    /// on `+OK`, store its value as the key's `GET` reply, if it may be (see the module docs).
    pub(crate) fn finish(mut self, reply: &[u8], node: Option<Arc<Node>>) {
        self.answered = true;
        let Some(node) = node else {
            // Retried or redirected: maybe run after the writes queued behind it.
            self.cache
                .store
                .answered_out_of_order(&self.key, self.token);
            return;
        };
        if reply != b"+OK\r\n" {
            return;
        }
        let Some(heard) = node.heard() else {
            return;
        };
        let now = clock_ms();
        let variant = Variant {
            command: "get",
            protocol: self.protocol,
            args: Box::new([]),
            reply: std::mem::take(&mut self.reply),
            expires: now + self.ttl_ms,
            heard,
        };
        let cache = &self.cache;
        let filled = cache.store.end_through(&self.key, self.token, variant, now);
        if filled.stored {
            cache.metrics.fills.inc();
        }
        cache.metrics.evictions.inc_by(filled.evicted as u64);
    }
}

/// Every write-through ends in exactly one of `finish`, an unsent drop or an unanswered drop, so
/// the store's record of overlapping writes of the key is always closed.
impl Drop for Through {
    fn drop(&mut self) {
        if !self.sent {
            self.cache.store.unsent(&self.key, self.token);
        } else if !self.answered {
            // Its client left while it was on its way: a retry it started may still run, at
            // any time (dropped before its write's end, which then drops what is cached).
            self.cache
                .store
                .answered_out_of_order(&self.key, self.token);
        }
    }
}

/// `EX seconds` or `PX milliseconds` as milliseconds; `None` for anything else (`KEEPTTL`,
/// `EXAT`, `NX`, a bad number: the node decides, the cache stays out).
fn ttl_ms(unit: &[u8], amount: &[u8]) -> Option<u64> {
    let amount: u64 = std::str::from_utf8(amount).ok()?.parse().ok()?;
    if amount == 0 {
        return None;
    }
    if unit.eq_ignore_ascii_case(b"EX") {
        amount.checked_mul(1000)
    } else if unit.eq_ignore_ascii_case(b"PX") {
        Some(amount)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::ttl_ms;

    #[test]
    fn only_ex_and_px_with_a_positive_number_give_a_ttl() {
        assert_eq!(ttl_ms(b"ex", b"2"), Some(2000));
        assert_eq!(ttl_ms(b"PX", b"1500"), Some(1500));
        assert_eq!(ttl_ms(b"EX", b"0"), None);
        assert_eq!(ttl_ms(b"EX", b"-1"), None);
        assert_eq!(ttl_ms(b"NX", b"1"), None);
        assert_eq!(ttl_ms(b"EXAT", b"1"), None);
        assert_eq!(ttl_ms(b"EX", b"x"), None);
    }
}
