//! The near cache: chosen reads answered from redcar's memory, kept correct by the nodes' own
//! invalidations (server-assisted client-side caching on redcar's node connections).
//!
//! How it stays correct (docs/near-cache.md has the whole argument):
//! - A miss is read (from the node the read policy picks) on that node's **tracked lane**
//!   (`upstream::tracking`), so the node remembers the key and pushes an invalidation to its
//!   invalidation connection when the key changes; those reach the cache as an
//!   `InvalidationSink`.
//! - The fill is registered before the read is sent; an invalidation or a write arriving before
//!   the reply cancels it (`store`), so a reply read before a change is never stored after it.
//! - Writes through redcar drop the key before they are sent and keep it uncached until their
//!   reply reaches the client, so a client reads its own writes.
//! - Each entry is served only while its node's invalidation connection answered a heartbeat
//!   `PING` sent within `max_silence`: every invalidation the node queued before that answer
//!   has been read. So a value is never served more than `max_silence` after a write to it was
//!   acknowledged, whatever happens to the connection.
//! - A lost connection, a null invalidation (FLUSHALL) or a changed slot owner drops everything;
//!   entries also end at `max_ttl` and at the key's own TTL, read with the fill (`PTTL`).
#![warn(unreachable_pub, missing_docs)]

mod admit;
mod commands;
mod config;
mod glob;
mod metrics;
mod store;
mod through;
mod watch;

pub(crate) use commands::cacheable;
pub(crate) use config::NearCacheConfig;
pub(crate) use metrics::NearCacheMetrics;
pub(crate) use through::Through;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use smallvec::SmallVec;

use self::admit::Admission;
use self::store::{Begin, CacheLookup, Store, Variant};
use crate::cluster::ClusterState;
use crate::metrics::FlushCause;
use crate::protocol::{header_value, Protocol};
use crate::upstream::{clock_ms, InvalidationSink, Node, TrackingFeed};

/// How a key is admitted, which decides the lanes its reads and writes take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Admitted {
    /// By a `prefix` rule with `write_through` on: the nodes' near lanes, which track those
    /// prefixes in BCAST mode with NOLOOP (`upstream::tracking`).
    Bcast,
    /// By a `pattern` rule or the hot-key estimate: the tracked lanes (default tracking).
    Tracked,
}

/// The near cache, shared by every session.
pub(crate) struct NearCache {
    /// The `prefix` rules' prefixes: keys under them are cached.
    prefixes: Vec<Bytes>,
    /// `write_through` is on: the prefix rules' keys are [`Admitted::Bcast`].
    write_through: bool,
    /// The `pattern` rules' globs.
    patterns: Vec<Bytes>,
    /// The hot-key estimate that admits keys read often (`hot_keys`), when on.
    admission: Option<Admission>,
    /// The cached replies, bounded by `near_cache.max_bytes`.
    store: Store,
    /// `near_cache.max_entry_bytes`: bigger replies are never cached.
    max_entry_bytes: usize,
    /// `near_cache.max_ttl` in milliseconds: no entry is served longer after it was read.
    max_ttl_ms: u64,
    /// `near_cache.max_silence` in milliseconds: the staleness bound the invalidation connections'
    /// heartbeats must meet.
    max_silence_ms: u64,
    /// Tokens for fills and write-throughs, so a late reply can tell it is no longer the current
    /// one.
    next_fill: AtomicU64,
    /// Hits, misses, invalidations, evictions and size.
    metrics: NearCacheMetrics,
}

impl NearCache {
    /// The cache `config` asks for (`None` when off), fed by `feed`'s invalidations, with its
    /// heartbeat set, and dropped whole when `cluster`'s slot owners change.
    pub(crate) fn start(
        config: &NearCacheConfig,
        feed: &TrackingFeed,
        cluster: Arc<ClusterState>,
        metrics: NearCacheMetrics,
    ) -> Option<Arc<NearCache>> {
        if !config.enabled {
            return None;
        }
        let (prefixes, patterns) = config.rules();
        let min_rate = config.hot_keys.min_reads_per_second;
        let write_through = config.write_through && !prefixes.is_empty();
        if write_through {
            feed.set_near_prefixes(prefixes.clone());
        }
        let cache = Arc::new(NearCache {
            write_through,
            prefixes,
            patterns,
            admission: (min_rate > 0).then(|| Admission::new(min_rate)),
            store: Store::new(config.max_bytes),
            max_entry_bytes: config.max_entry_bytes,
            max_ttl_ms: millis(config.max_ttl),
            max_silence_ms: millis(config.max_silence),
            next_fill: AtomicU64::new(1),
            metrics,
        });
        feed.set_heartbeat(config.max_silence / 4);
        let sink: Arc<dyn InvalidationSink> = cache.clone();
        feed.add_sink(Arc::downgrade(&sink));
        tokio::spawn(watch::watch(Arc::downgrade(&cache), cluster));
        tracing::info!(
            max_bytes = config.max_bytes,
            max_silence = ?config.max_silence,
            rules = config.keys.len(),
            hot_keys = min_rate,
            write_through,
            "near cache on"
        );
        Some(cache)
    }

    /// Whether `key` may be cached: a `near_cache.keys` rule matches, or (hot keys on) it is
    /// read often enough. `read`: count this as a read for the hot-key estimate.
    pub(crate) fn admits(&self, key: &[u8], read: bool) -> bool {
        self.admission(key, read).is_some()
    }

    /// How `key` is admitted, if it is (see [`admits`](Self::admits)).
    pub(crate) fn admission(&self, key: &[u8], read: bool) -> Option<Admitted> {
        if self.prefixes.iter().any(|p| key.starts_with(p)) {
            return Some(match self.write_through {
                true => Admitted::Bcast,
                false => Admitted::Tracked,
            });
        }
        if self.patterns.iter().any(|p| glob::matches(p, key)) {
            return Some(Admitted::Tracked);
        }
        let admitted = match &self.admission {
            Some(admission) if read => admission.read(key, clock_ms()),
            // A write must reach any key the cache may hold.
            Some(_) => true,
            None => false,
        };
        admitted.then_some(Admitted::Tracked)
    }

    /// The cached reply to `command key rest...` (a [`cacheable`] read) for a `protocol`
    /// client; `idle`: the client has nothing in flight.
    pub(crate) fn get(
        &self,
        command: &str,
        protocol: Protocol,
        key: &[u8],
        rest: &[Bytes],
        idle: bool,
    ) -> Option<Bytes> {
        let read = (command, protocol, rest);
        match self
            .store
            .get(key, read, clock_ms(), self.max_silence_ms, idle)
        {
            CacheLookup::Hit(reply) => Some(reply),
            CacheLookup::Miss => None,
        }
    }

    /// Counts a read answered from memory (`hit`) or sent to a node.
    pub(crate) fn count(&self, hit: bool) {
        if hit {
            self.metrics.hits.inc();
        } else {
            self.metrics.misses.inc();
        }
    }

    /// A miss of the read `command key rest...`: fill it, or wait for the same read already
    /// on its way (a burst of readers after a write sends one read, not one each); `None`
    /// when a write holds the key or another read of it fills it (read it uncached).
    pub(crate) fn begin_fill(
        self: &Arc<Self>,
        command: &'static str,
        protocol: Protocol,
        key: &Bytes,
        rest: &[Bytes],
    ) -> Option<Filling> {
        let token = self.next_fill.fetch_add(1, Ordering::Relaxed);
        match self
            .store
            .begin_fill(key, token, (command, protocol, rest), clock_ms())
        {
            Begin::Fill(tell) => Some(Filling::Fill(Fill {
                cache: self.clone(),
                key: key.clone(),
                token,
                tell,
                done: false,
            })),
            Begin::Join(reply) => {
                self.metrics.coalesced.inc();
                Some(Filling::Join(Joined(reply)))
            }
            Begin::No => None,
        }
    }

    /// `keys` are being written through redcar (before the write is sent): they are not
    /// filled, and served only to clients with nothing in flight, until the returned guard is
    /// dropped, when the write's reply reaches the client; then what was cached is dropped
    /// (unless `through`, the write-through of the first key, stored its value). So the writer
    /// reads its write back while other keys and other times keep their hits.
    pub(crate) fn begin_write(
        self: &Arc<Self>,
        keys: SmallVec<[Bytes; 2]>,
        through: Option<&Through>,
    ) -> Writing {
        let through = through.map(Through::token);
        for (i, key) in keys.iter().enumerate() {
            self.store.begin_write(key, through.filter(|_| i == 0));
        }
        Writing {
            cache: self.clone(),
            keys,
            through,
        }
    }

    /// `key` was queued in a transaction: drop it and keep it uncached for `max_silence`
    /// (its write runs at EXEC, whose reply is not followed).
    pub(crate) fn written_in_transaction(&self, key: &Bytes) {
        if self.store.written(key, clock_ms() + self.max_silence_ms) {
            self.metrics.invalidations.inc();
        }
    }

    /// Drops everything (something may have been missed).
    pub(crate) fn flush(&self, cause: FlushCause) {
        self.store.clear();
        self.metrics.flushed(cause);
    }

    /// Called every second by the watch task; the gauges are never updated on the read path.
    fn sample(&self) {
        let (bytes, entries) = self.store.usage();
        self.metrics
            .bytes
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
        self.metrics
            .entries
            .set(i64::try_from(entries).unwrap_or(i64::MAX));
    }
}

impl InvalidationSink for NearCache {
    /// `None` is a node's flush (`FLUSHALL`, `FLUSHDB`): the whole cache goes, since the keys are
    /// not named. Each named key is dropped, counted only if it was held.
    fn invalidated(&self, _addr: &str, keys: Option<Vec<Bytes>>) {
        match keys {
            Some(keys) => {
                let now = clock_ms();
                let dropped = keys
                    .iter()
                    .filter(|key| self.store.forget(key, now))
                    .count();
                self.metrics.invalidations.inc_by(dropped as u64);
            }
            None => self.flush(FlushCause::NodeFlush),
        }
    }

    /// A lost tracking connection may have missed invalidations, so nothing cached can be trusted.
    fn lost(&self, addr: &str) {
        tracing::info!(node = %addr, "near cache flushed: a tracking connection was lost");
        self.flush(FlushCause::ConnectionLost);
    }
}

impl watch::Watched for NearCache {
    fn flush(&self, cause: FlushCause) {
        NearCache::flush(self, cause);
    }

    fn sample(&self) {
        NearCache::sample(self);
    }
}

/// Writes in flight through redcar (see [`NearCache::begin_write`]); dropping it ends them.
pub(crate) struct Writing {
    /// The cache whose store holds the writes open.
    cache: Arc<NearCache>,
    /// Every key the command writes; most write one or two.
    keys: SmallVec<[Bytes; 2]>,
    /// The write-through token of the first key.
    through: Option<u64>,
}

/// Ends each key's write (`store.end_write`): what was cached is dropped unless the first key's
/// write-through stored it, and the key may be filled again. Each drop counts as an invalidation.
impl Drop for Writing {
    fn drop(&mut self) {
        let now = clock_ms();
        for (i, key) in self.keys.iter().enumerate() {
            let through = self.through.filter(|_| i == 0);
            if self.cache.store.end_write(key, through, now) {
                self.cache.metrics.invalidations.inc();
            }
        }
    }
}

/// A fill in flight; dropped unfinished (the client went away), it cancels itself.
pub(crate) struct Fill {
    /// The cache the fill stores into.
    cache: Arc<NearCache>,
    /// The key being filled.
    key: Bytes,
    /// The fill's token: it stores only if still the key's current fill.
    token: u64,
    /// Where the reads waiting for this one hear its reply.
    tell: tokio::sync::watch::Sender<Option<Bytes>>,
    /// Finished (stored or given up), so the drop does not cancel it.
    done: bool,
}

/// What a miss does: fill, or wait for the same read's fill.
pub(crate) enum Filling {
    /// This read goes to the node and fills the entry.
    Fill(Fill),
    /// The same read is already on its way: wait for its reply.
    Join(Joined),
}

/// A read waiting for the same read already on its way to the node.
pub(crate) struct Joined(tokio::sync::watch::Receiver<Option<Bytes>>);

impl Joined {
    /// That read's reply (what the node answered, stored or not: it was read after this read
    /// arrived at redcar, or moments before); `None` if it was dropped unanswered (its client
    /// left), when this read must go itself.
    pub(crate) async fn reply(mut self) -> Option<Bytes> {
        let reply = self.0.wait_for(Option::is_some).await.ok()?;
        reply.clone()
    }
}

impl Fill {
    /// Stores `reply` to the read `args` (for `protocol` clients), read from `node` on its
    /// tracked lane, if it may be: a value or nil (no error), small enough, from the slot's
    /// first node (`None` after a redirect or retry). `ttl` is the node's `PTTL` reply for
    /// the key, read right after it.
    pub(crate) fn finish(
        mut self,
        read: (&'static str, Protocol, &[Bytes]),
        reply: &Bytes,
        ttl: &[u8],
        node: Option<Arc<Node>>,
    ) {
        self.done = true;
        self.tell.send_replace(Some(reply.clone()));
        let cache = &self.cache;
        let now = clock_ms();
        let variant = node
            .and_then(|node| node.heard())
            .zip(ttl_ms(ttl, cache.max_ttl_ms))
            .filter(|_| storable(reply, cache.max_entry_bytes))
            .map(|(heard, ttl)| Variant {
                command: read.0,
                protocol: read.1,
                args: read.2[2..].into(),
                reply: Bytes::copy_from_slice(reply),
                expires: now + ttl,
                heard,
            });
        let filled = cache.store.end_fill(&self.key, self.token, variant, now);
        if filled.stored {
            cache.metrics.fills.inc();
        }
        cache.metrics.evictions.inc_by(filled.evicted as u64);
    }
}

/// An unfinished fill ends with nothing stored, releasing the key for the next reader.
impl Drop for Fill {
    fn drop(&mut self) {
        if !self.done {
            self.cache
                .store
                .end_fill(&self.key, self.token, None, clock_ms());
        }
    }
}

/// How long an entry may live: the key's own TTL (`PTTL`'s reply, in ms) capped at `max_ms`;
/// `None` when the reply is not a number (an error: do not cache).
fn ttl_ms(pttl: &[u8], max_ms: u64) -> Option<u64> {
    let (ms, _) = header_value(pttl, b':')?;
    match u64::try_from(ms) {
        Ok(ms) => Some(ms.min(max_ms)),
        // -1: no TTL; -2: no key (a nil is cached too, and invalidated when the key appears).
        Err(_) => Some(max_ms),
    }
}

/// A reply worth keeping: not an error or a push, within the entry limit.
/// Nils pass: an absent key is read as often as a present one, and its nil is cached too.
fn storable(reply: &[u8], max: usize) -> bool {
    !reply.is_empty() && reply.len() <= max && !matches!(reply[0], b'-' | b'!' | b'>')
}

/// Config durations as the store's millisecond clock counts them, saturating.
fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keys_ttl_caps_an_entry_and_errors_are_never_stored() {
        assert_eq!(ttl_ms(b":1500\r\n", 60_000), Some(1500));
        assert_eq!(ttl_ms(b":999999\r\n", 60_000), Some(60_000));
        assert_eq!(ttl_ms(b":-1\r\n", 60_000), Some(60_000));
        assert_eq!(ttl_ms(b":-2\r\n", 60_000), Some(60_000));
        assert_eq!(ttl_ms(b"-MOVED 1 a:1\r\n", 60_000), None);
        assert!(storable(b"$1\r\nx\r\n", 100));
        assert!(storable(b"$-1\r\n", 100));
        assert!(storable(b"_\r\n", 100));
        assert!(!storable(b"-WRONGTYPE x\r\n", 100));
        assert!(!storable(b"$5\r\nhello\r\n", 8));
    }
}
