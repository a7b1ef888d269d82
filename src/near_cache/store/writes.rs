//! How writes through redcar hold a key in the [`Store`]: a write in flight blocks fills and
//! hides the cached value from its writer, a write-through may store the value it wrote with its
//! reply (`near_cache::through`), and a write queued in a transaction blocks the key for a while.
//!
//! Which write-through may store: writes of one key through redcar may overlap, and only the
//! one the node runs last may leave its value cached. A write-through is queued on its node's
//! near lane while holding the key's send lock ([`Store::order`]), and registered here just
//! before ([`Store::sending`]: it becomes the key's candidate, unless an unordered write is in
//! flight) and just after ([`Store::sent`]: with the lane it was queued on). One lane is one
//! connection, which the node runs in order, so of the write-throughs of a key in flight on one
//! lane, the last registered is the last run. The candidate loses its place to any later
//! write-through, any unordered write (every other write: its send is not ordered with these),
//! an invalidation or a flush, and when another write-through of the key is in flight on
//! another lane (another node or protocol: no order between them). When it stores, the
//! write-throughs still in flight were queued before it on its lane and ran before it: their
//! ends keep its value, unless they were answered out of order (a retry may run later).

use std::sync::MutexGuard;

use bytes::Bytes;
use twox_hash::XxHash3_64;

use super::{CachedEntry, Filled, LaneId, Sent, Store, Variant};

impl Store {
    /// A write of `key` through redcar is being sent: cancel any fill, and fill nothing until
    /// [`end_write`](Self::end_write); what is cached is served meanwhile only to readers with
    /// nothing in flight. `through`: the token of a write-through, which is then queued in
    /// order ([`sending`](Self::sending), [`sent`](Self::sent)) or not at all
    /// ([`unsent`](Self::unsent)); any other write is unordered and takes the candidate's
    /// place away.
    pub(crate) fn begin_write(&self, key: &Bytes, through: Option<u64>) {
        let mut shard = self.shard(key);
        shard.ensure(key);
        if let Some(entry) = shard.map.to_back(key) {
            if through.is_none() {
                entry.unordered += 1;
                entry.through = None;
            }
            entry.writing += 1;
            entry.filling = None;
        }
        shard.fit(self.shard_limit);
    }

    /// The lock a write-through of `key` holds from [`sending`](Self::sending) to
    /// [`sent`](Self::sent), across queueing it on its node: the write-throughs of one key are
    /// registered in the order they are queued.
    pub(crate) fn order(&self, key: &[u8]) -> MutexGuard<'_, ()> {
        let index = (XxHash3_64::oneshot_with_seed(self.seed, key) as usize) % self.order.len();
        self.order[index]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The write-through `token` of `key` is about to be queued (holding [`order`](Self::order)):
    /// it is the last write of the key sent, so it is the candidate unless an unordered write
    /// is in flight (which may run after it). Registered before it is queued, so an
    /// invalidation read after it reached the node clears it.
    pub(crate) fn sending(&self, key: &[u8], token: u64) {
        let mut shard = self.shard(key);
        if let Some(entry) = shard.map.get_mut(key) {
            entry.through = (entry.unordered == 0).then_some(token);
        }
    }

    /// The write-through `token` of `key` was queued on `lane` (`None`: not queued now, as
    /// after a missing slot owner: it is unordered). With another write-through of the key in
    /// flight on another lane, it is no candidate.
    pub(crate) fn sent(&self, key: &[u8], token: u64, lane: Option<LaneId>) {
        let mut shard = self.shard(key);
        let Some(entry) = shard.map.get_mut(key) else {
            return;
        };
        let ordered = match lane {
            Some(lane) => {
                let alone = entry.sent.iter().all(|s| s.lane == lane);
                entry.sent.push(Sent {
                    token,
                    lane,
                    superseded: false,
                    out_of_order: false,
                });
                alone
            }
            None => {
                entry.unordered += 1;
                false
            }
        };
        if !ordered && entry.through == Some(token) {
            entry.through = None;
        }
    }

    /// The write-through `token` of `key` will be sent another way (or not at all): it is
    /// unordered, and no write-through in flight may store.
    pub(crate) fn unsent(&self, key: &[u8], token: u64) {
        let mut shard = self.shard(key);
        if let Some(entry) = shard.map.get_mut(key) {
            if entry.sent.iter().all(|s| s.token != token) {
                entry.unordered += 1;
                entry.through = None;
            }
        }
    }

    /// A write-through of `key` got its reply from another attempt than the one queued in
    /// order (a redirect, a retry) or none (a time-out): it may have run after the writes
    /// queued behind it, so the candidate loses its place.
    pub(crate) fn answered_out_of_order(&self, key: &[u8], token: u64) {
        let mut shard = self.shard(key);
        if let Some(entry) = shard.map.get_mut(key) {
            entry.through = None;
            let own = entry.sent.iter_mut().find(|s| s.token == token);
            if let Some(sent) = own {
                sent.out_of_order = true;
            }
        }
    }

    /// The write-through `token` of `key` was acknowledged: store `variant` (the value it
    /// wrote, as a read of it), replacing every other read of the key, if it is still the
    /// key's candidate (see the module docs). Whether it was stored.
    pub(crate) fn end_through(&self, key: &[u8], token: u64, variant: Variant, now: u64) -> Filled {
        let mut shard = self.shard(key);
        let mut filled = Filled {
            stored: false,
            evicted: 0,
        };
        let Some(entry) = shard.map.get_mut(key) else {
            return filled;
        };
        let queued = entry.sent.iter().any(|s| s.token == token);
        if entry.through != Some(token) || !queued || entry.dirty_until > now {
            return filled;
        }
        // The candidate was queued after every other write-through in flight, on their lane.
        for sent in entry.sent.iter_mut().take_while(|s| s.token != token) {
            sent.superseded = true;
        }
        let before = entry.variants_size();
        entry.through = None;
        entry.kept = Some(token);
        entry.variants.clear();
        entry.variants.push(variant);
        let after = entry.variants_size();
        shard.bytes = (shard.bytes + after).saturating_sub(before);
        filled.stored = true;
        filled.evicted = shard.fit(self.shard_limit);
        filled
    }

    /// The write of `key` that [`begin_write`](Self::begin_write) announced was answered (or
    /// will never be): what was cached is dropped, unless it is what this write-through
    /// (`through`) stored or what a write-through queued after it on its lane stored. Whether
    /// something cached was dropped.
    pub(crate) fn end_write(&self, key: &[u8], through: Option<u64>, now: u64) -> bool {
        let mut shard = self.shard(key);
        let Some(entry) = shard.map.get_mut(key) else {
            return false;
        };
        entry.writing = entry.writing.saturating_sub(1);
        let queued = through.and_then(|t| entry.sent.iter().position(|s| s.token == t));
        // Run before the write-through whose value is stored (when that one stored it).
        let superseded = match queued {
            Some(i) => {
                let sent = entry.sent.remove(i);
                sent.superseded && !sent.out_of_order
            }
            None => {
                entry.unordered = entry.unordered.saturating_sub(1);
                false
            }
        };
        let mut freed = 0;
        if through.is_some() && entry.kept == through {
            entry.kept = None;
        } else if !superseded {
            freed = entry.variants_size();
            entry.variants.clear();
        }
        let dropped = freed > 0;
        let idle = entry.idle(now);
        shard.bytes = shard.bytes.saturating_sub(freed);
        if idle {
            shard.remove(key);
        }
        dropped
    }

    /// A write of `key` queued in a transaction: drop what is cached, cancel any fill, and
    /// serve or fill nothing until `until`. Whether something cached was dropped.
    pub(crate) fn written(&self, key: &Bytes, until: u64) -> bool {
        self.block(key, |entry| {
            entry.dirty_until = entry.dirty_until.max(until)
        })
    }

    fn block(&self, key: &Bytes, mark: impl FnOnce(&mut CachedEntry)) -> bool {
        let mut shard = self.shard(key);
        let before = shard.map.get(key).map_or(0, |e| e.size(key));
        if before == 0 {
            shard.map.insert(key.clone(), CachedEntry::default());
        }
        let Some(entry) = shard.map.to_back(key) else {
            return false;
        };
        let dropped = !entry.variants.is_empty();
        entry.empty();
        mark(entry);
        let after = entry.size(key);
        shard.bytes = (shard.bytes + after).saturating_sub(before);
        shard.fit(self.shard_limit);
        dropped
    }
}

#[cfg(test)]
#[path = "writes_tests.rs"]
mod tests;
