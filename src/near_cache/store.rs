//! The cached replies: one entry per key (each command and protocol read of it a variant), in
//! shards behind their own locks, least recently used out first, bounded in bytes.
//!
//! What holds: a cached reply is served only while it is known to be current: its node's
//! invalidation connection must still vouch that it missed nothing (a variant's `heard`), the
//! entry must not have expired, and no write of the key through redcar may be in flight unless
//! the reader has nothing in flight itself. Every race between a fill, a write and an
//! invalidation is settled under the key's shard lock by tokens: only the fill or write-through
//! still registered when its reply arrives may store, so a stale reply can never overwrite a
//! newer one. Memory is bounded by `near_cache.max_bytes` over all shards, counting each entry's
//! overhead, not only its bytes.

use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use hashlink::LinkedHashMap;
use smallvec::SmallVec;
use tokio::sync::watch;
use twox_hash::XxHash3_64;

use crate::protocol::Protocol;
use crate::upstream::ProvenAt;

/// Shards: enough that the workers rarely meet on a lock.
const SHARDS: usize = 16;
/// What an entry or a variant costs beyond its bytes (map slot, links, vectors, `Arc`s).
const ENTRY_OVERHEAD: usize = 96;
const VARIANT_OVERHEAD: usize = 80;
/// Variants one key keeps (reads of different fields, ranges, protocols); more replace the
/// oldest.
const MAX_VARIANTS: usize = 8;

/// One cached read of a key: the command, its arguments after the key, the client's protocol,
/// and the reply to send.
pub(super) struct Variant {
    /// The command's table name: a GET and an HGET of one key are different reads.
    pub(crate) command: &'static str,
    /// The client's RESP version: the same read answers differently in RESP2 and RESP3.
    pub(crate) protocol: Protocol,
    /// The arguments after the key, which must match exactly for the variant to answer.
    pub(crate) args: Box<[Bytes]>,
    /// The reply as the node sent it, handed to clients without a copy.
    pub(crate) reply: Bytes,
    /// [`clock_ms`](crate::upstream::clock_ms) after which it is not served.
    pub(crate) expires: u64,
    /// Its node's invalidation connection: served only while that proves it missed nothing.
    pub(crate) heard: Arc<ProvenAt>,
}

impl Variant {
    /// Bytes charged against `near_cache.max_bytes`, overhead included.
    fn size(&self) -> usize {
        VARIANT_OVERHEAD + self.reply.len() + self.args.iter().map(Bytes::len).sum::<usize>()
    }

    /// Whether this variant answers a read of `command` with `args` in `protocol`.
    fn same_read(&self, command: &str, protocol: Protocol, args: &[Bytes]) -> bool {
        self.command == command && self.protocol == protocol && *self.args == *args
    }
}

/// A fill on its way: its token, the read it makes, and where its reply will be told.
struct Flight {
    /// Tells this fill from any later one of the same key.
    token: u64,
    /// The read being filled.
    command: &'static str,
    /// The RESP version it is read in.
    protocol: Protocol,
    /// Its arguments after the key.
    args: Box<[Bytes]>,
    /// Where the fill's reply is told to the reads that joined it.
    reply: watch::Receiver<Option<Bytes>>,
}

/// What [`Store::begin_fill`] decided.
pub(super) enum Begin {
    /// This read fills the key: tell the waiters its reply on the sender.
    Fill(watch::Sender<Option<Bytes>>),
    /// The same read is on its way already: wait for its reply.
    Join(watch::Receiver<Option<Bytes>>),
    /// Neither (another read of the key fills it, or a write holds it): read uncached.
    No,
}

/// A write-through queued in order on `lane`, not answered yet.
struct Sent {
    /// Tells this write-through from others of the key.
    token: u64,
    /// The connection it was queued on; order is only known within one lane.
    lane: LaneId,
    /// A write-through queued after it on its lane stored its value: that value is newer, so
    /// its end keeps it (unless it was answered out of order).
    superseded: bool,
    /// Answered by another attempt than this one (see `Store::answered_out_of_order`).
    out_of_order: bool,
}

/// A node connection a write-through was queued on: the node's near lane for `protocol`
/// (one connection per node and protocol, so one order of execution).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LaneId {
    /// The node.
    pub(crate) addr: Box<str>,
    /// The lane's RESP version.
    pub(crate) protocol: Protocol,
}

#[derive(Default)]
struct CachedEntry {
    /// The cached reads of the key, at most [`MAX_VARIANTS`].
    variants: SmallVec<[Variant; 1]>,
    /// The fill in flight: only its end may add a variant, and only if no invalidation or
    /// write came in between (they drop the entry or clear this).
    filling: Option<Box<Flight>>,
    /// Writes through redcar sent and not answered yet: no fill meanwhile (a read on another
    /// connection could run before them), and what is cached is served only to clients with
    /// nothing in flight (they cannot be the writer; the write is not acknowledged yet).
    writing: u32,
    /// Of those, the writes whose send is not ordered with the write-throughs' (every write but
    /// a write-through queued on a near lane under the key's send lock): while one is in flight
    /// no write-through may store.
    unordered: u32,
    /// Of those, the write-throughs queued in order (`store::writes`), in the order they were
    /// queued, with the lane they were queued on.
    sent: SmallVec<[Sent; 1]>,
    /// The write-through that may store its value with its reply: the last one queued, unless
    /// an unordered write, an invalidation or a flush came since it was queued, or a write of
    /// the key was in flight on another lane.
    through: Option<u64>,
    /// The write-through whose value was stored: its own end keeps it.
    kept: Option<u64>,
    /// A write queued in a transaction: no hit and no fill before this time.
    dirty_until: u64,
}

impl CachedEntry {
    fn size(&self, key: &Bytes) -> usize {
        ENTRY_OVERHEAD + key.len() + self.variants_size()
    }

    fn variants_size(&self) -> usize {
        self.variants.iter().map(Variant::size).sum::<usize>()
    }

    fn idle(&self, now: u64) -> bool {
        self.variants.is_empty()
            && self.filling.is_none()
            && self.writing == 0
            && self.dirty_until <= now
    }

    /// Neither served nor filled now (see `writing` and `dirty_until`).
    fn blocked(&self, now: u64) -> bool {
        self.writing > 0 || self.dirty_until > now
    }

    /// Not served to a reader with (`idle` false) or without commands in flight now.
    fn hidden(&self, now: u64, idle: bool) -> bool {
        self.dirty_until > now || (self.writing > 0 && !idle)
    }

    /// Drops what is cached and any fill or write-through on its way.
    fn empty(&mut self) {
        self.variants.clear();
        self.filling = None;
        self.through = None;
        self.kept = None;
    }
}

#[derive(Default)]
struct StoreShard {
    map: LinkedHashMap<Bytes, CachedEntry>,
    bytes: usize,
}

impl StoreShard {
    /// Evicts least recently used entries until the shard fits `limit`; how many went. An
    /// entry with a write in flight stays (its write must find it), moved to the back.
    fn fit(&mut self, limit: usize) -> usize {
        let mut evicted = 0;
        let mut kept = 0;
        while self.bytes > limit && kept < self.map.len() {
            let Some((key, entry)) = self.map.pop_front() else {
                break;
            };
            if entry.writing > 0 {
                self.map.insert(key, entry);
                kept += 1;
                continue;
            }
            self.bytes = self.bytes.saturating_sub(entry.size(&key));
            evicted += 1;
        }
        evicted
    }

    /// Makes sure `key` has an entry (an empty one counts its key and overhead).
    fn ensure(&mut self, key: &Bytes) {
        if !self.map.contains_key(key) {
            let entry = CachedEntry::default();
            self.bytes += entry.size(key);
            self.map.insert(key.clone(), entry);
        }
    }

    fn remove(&mut self, key: &[u8]) -> Option<CachedEntry> {
        let (key, entry) = self.map.remove_entry(key)?;
        self.bytes = self.bytes.saturating_sub(entry.size(&key));
        Some(entry)
    }
}

/// What a lookup found.
pub(super) enum CacheLookup {
    Hit(Bytes),
    /// Not cached, expired, or its node has been silent too long.
    Miss,
}

/// How the end of a fill went.
pub(super) struct Filled {
    pub(crate) stored: bool,
    pub(crate) evicted: usize,
}

/// The entries, sharded by key.
pub(super) struct Store {
    shards: Box<[Mutex<StoreShard>]>,
    /// Held by a write-through while it is queued on its node, so the write-throughs of one
    /// key are registered here in the order they reach their lane (`store::writes`).
    order: Box<[Mutex<()>]>,
    shard_limit: usize,
    /// The seed of the key hash (xxh3): fixed, so a key's place does not change with the process.
    seed: u64,
}

impl Store {
    pub(crate) fn new(max_bytes: usize) -> Store {
        Store {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            order: (0..SHARDS * 4).map(|_| Mutex::default()).collect(),
            shard_limit: max_bytes / SHARDS,
            seed: 0x6e63,
        }
    }

    fn shard(&self, key: &[u8]) -> MutexGuard<'_, StoreShard> {
        let index = (XxHash3_64::oneshot_with_seed(self.seed, key) as usize) % SHARDS;
        self.shards[index]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The reply cached for this read of `key`, if fresh: not expired, and its node heard from
    /// within `max_silence` of `now`. A hit moves the entry to the back of the eviction order.
    /// `idle`: the reader has nothing in flight (so it is not writing the key now).
    pub(crate) fn get(
        &self,
        key: &[u8],
        read: (&str, Protocol, &[Bytes]),
        now: u64,
        max_silence: u64,
        idle: bool,
    ) -> CacheLookup {
        let (command, protocol, args) = read;
        let mut shard = self.shard(key);
        let Some(entry) = shard.map.to_back(key) else {
            return CacheLookup::Miss;
        };
        if entry.hidden(now, idle) {
            return CacheLookup::Miss;
        }
        let variant = entry
            .variants
            .iter()
            .find(|v| v.same_read(command, protocol, args));
        match variant {
            Some(v) if v.expires > now && v.heard.at() + max_silence >= now => {
                CacheLookup::Hit(v.reply.clone())
            }
            _ => CacheLookup::Miss,
        }
    }

    /// Starts the fill `token` of `key` by the read `read` (its arguments after the key),
    /// unless a write holds the key; joins a fill of the same read already on its way.
    pub(crate) fn begin_fill(
        &self,
        key: &Bytes,
        token: u64,
        read: (&'static str, Protocol, &[Bytes]),
        now: u64,
    ) -> Begin {
        let mut shard = self.shard(key);
        shard.ensure(key);
        let Some(entry) = shard.map.to_back(key) else {
            return Begin::No;
        };
        if entry.blocked(now) {
            return Begin::No;
        }
        let (command, protocol, args) = read;
        if let Some(flight) = &entry.filling {
            let same = flight.command == command && flight.protocol == protocol;
            return match same && *flight.args == *args {
                true => Begin::Join(flight.reply.clone()),
                false => Begin::No,
            };
        }
        let (tell, reply) = watch::channel(None);
        entry.filling = Some(Box::new(Flight {
            token,
            command,
            protocol,
            args: args.into(),
            reply,
        }));
        Begin::Fill(tell)
    }

    /// Ends the fill `token` of `key`, storing `variant` if the fill is still the key's own
    /// (nothing invalidated or wrote the key since it began).
    pub(crate) fn end_fill(
        &self,
        key: &Bytes,
        token: u64,
        variant: Option<Variant>,
        now: u64,
    ) -> Filled {
        let mut shard = self.shard(key);
        let limit = self.shard_limit;
        let mut filled = Filled {
            stored: false,
            evicted: 0,
        };
        let Some(entry) = shard.map.get_mut(key) else {
            return filled;
        };
        if entry.filling.as_ref().map(|f| f.token) != Some(token) {
            return filled;
        }
        entry.filling = None;
        let before = entry.size(key);
        if let Some(variant) = variant {
            let read = (variant.command, variant.protocol, &variant.args[..]);
            entry
                .variants
                .retain(|v| !v.same_read(read.0, read.1, read.2) && v.expires > now);
            if entry.variants.len() >= MAX_VARIANTS {
                entry.variants.remove(0);
            }
            entry.variants.push(variant);
            filled.stored = true;
        }
        let after = entry.size(key);
        let idle = entry.idle(now);
        shard.bytes = (shard.bytes + after).saturating_sub(before);
        if idle {
            shard.remove(key);
        }
        filled.evicted = shard.fit(limit);
        filled
    }

    /// Forgets `key` (an invalidation); whether something cached was dropped. A write's hold
    /// on the key stays.
    pub(crate) fn forget(&self, key: &[u8], now: u64) -> bool {
        let mut shard = self.shard(key);
        let Some(entry) = shard.map.get_mut(key) else {
            return false;
        };
        let dropped = !entry.variants.is_empty();
        if !entry.blocked(now) {
            shard.remove(key);
            return dropped;
        }
        let freed = entry.variants_size();
        entry.empty();
        shard.bytes = shard.bytes.saturating_sub(freed);
        dropped
    }

    /// Forgets everything; how many entries held replies.
    /// Entries with a write in flight stay (emptied), so the write still blocks fills.
    pub(crate) fn clear(&self) -> usize {
        let mut dropped = 0;
        for shard in self.shards.iter() {
            let mut shard = shard.lock().unwrap_or_else(|p| p.into_inner());
            dropped += shard
                .map
                .values()
                .filter(|e| !e.variants.is_empty())
                .count();
            shard.map.retain(|_, entry| entry.writing > 0);
            let mut bytes = 0;
            for (key, entry) in shard.map.iter_mut() {
                entry.empty();
                bytes += entry.size(key);
            }
            shard.bytes = bytes;
        }
        dropped
    }

    /// Bytes and entries held now.
    pub(crate) fn usage(&self) -> (usize, usize) {
        self.shards.iter().fold((0, 0), |(bytes, entries), shard| {
            let shard = shard.lock().unwrap_or_else(|p| p.into_inner());
            (bytes + shard.bytes, entries + shard.map.len())
        })
    }
}

mod writes;

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
