//! How writes through redcar hold a key in the [`Store`]: a write in flight blocks fills and
//! hides the cached value from its writer, a write-through may store the value it wrote with its
//! reply (`near_cache::through`), and a write queued in a transaction blocks the key for a while.

use bytes::Bytes;

use super::{Entry, Filled, Store, Variant};

impl Store {
    /// A write of `key` through redcar is being sent: cancel any fill, and fill nothing until
    /// [`end_write`](Self::end_write); what is cached is served meanwhile only to readers with
    /// nothing in flight. `through`: the token of a write-through, which may store the value it
    /// writes with its reply ([`end_through`](Self::end_through)) if no other write of the key
    /// is in flight now.
    pub(crate) fn begin_write(&self, key: &Bytes, through: Option<u64>) {
        let mut shard = self.shard(key);
        shard.ensure(key);
        if let Some(entry) = shard.map.to_back(key) {
            // Only a write that began alone may store its value: one begun while another was
            // in flight may reach the node before it (sessions on other threads send in their
            // own time, even on the same lane), and a later one clears this.
            entry.through = through.filter(|_| entry.writing == 0);
            entry.writing += 1;
            entry.filling = None;
        }
        shard.fit(self.shard_limit);
    }

    /// The write-through `token` of `key` was acknowledged: store `variant` (the value it
    /// wrote, as a read of it), replacing every other read of the key, if it is still the
    /// key's own (no other write, invalidation or flush since it began) and the only write of
    /// the key in flight. Whether it was stored.
    pub(crate) fn end_through(&self, key: &[u8], token: u64, variant: Variant, now: u64) -> Filled {
        let mut shard = self.shard(key);
        let mut filled = Filled {
            stored: false,
            evicted: 0,
        };
        let Some(entry) = shard.map.get_mut(key) else {
            return filled;
        };
        if entry.through != Some(token) || entry.writing != 1 || entry.dirty_until > now {
            return filled;
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
    /// (`through`) stored. Whether something cached was dropped.
    pub(crate) fn end_write(&self, key: &[u8], through: Option<u64>, now: u64) -> bool {
        let mut shard = self.shard(key);
        let Some(entry) = shard.map.get_mut(key) else {
            return false;
        };
        entry.writing = entry.writing.saturating_sub(1);
        let mut freed = 0;
        if through.is_some() && entry.kept == through {
            entry.kept = None;
        } else {
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

    fn block(&self, key: &Bytes, mark: impl FnOnce(&mut Entry)) -> bool {
        let mut shard = self.shard(key);
        let before = shard.map.get(key).map_or(0, |e| e.size(key));
        if before == 0 {
            shard.map.insert(key.clone(), Entry::default());
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
