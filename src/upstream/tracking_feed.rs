//! Where every node's invalidations go ([`TrackingFeed`], to the [`InvalidationSink`]s), the
//! BCAST prefixes every node registers, and how recently a node proved it missed nothing
//! ([`ProvenAt`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::watch;

/// Who is told about invalidations (the downstream tracking table).
pub(crate) trait InvalidationSink: Send + Sync {
    /// `keys` changed on the node at `addr`; `None`: the node flushed (forget everything).
    fn invalidated(&self, addr: &str, keys: Option<Vec<Bytes>>);

    /// A connection to the node at `addr` that tracking relies on was lost: what it tracked
    /// there is forgotten, and invalidations may have been missed.
    fn lost(&self, addr: &str);
}

/// Where every node's invalidations go (the downstream tracking table, and the near cache when
/// it is on), and the BCAST prefixes every node's invalidation connection registers.
pub(crate) struct TrackingFeed {
    /// Weak: the sinks (held by the sessions' side) outlive no one because of the nodes.
    sinks: RwLock<Vec<Weak<dyn InvalidationSink>>>,
    /// The union of the BCAST prefixes clients asked for, as its minimal cover (`""`: every
    /// key). It only grows: redcar filters per client, so a wider registration is only traffic.
    bcast: watch::Sender<Vec<Bytes>>,
    /// How often each invalidation connection sends `PING` (milliseconds; 0: never), so the
    /// near cache knows how recently it heard everything a node had to say (see [`ProvenAt`]).
    heartbeat_ms: AtomicU64,
    /// The near cache's prefix rules (their minimal cover), registered in BCAST mode with
    /// NOLOOP on every node's near lanes (set once at start-up, when the near cache has them).
    near_prefixes: OnceLock<Vec<Bytes>>,
}

impl Default for TrackingFeed {
    fn default() -> Self {
        TrackingFeed {
            sinks: RwLock::default(),
            bcast: watch::channel(Vec::new()).0,
            heartbeat_ms: AtomicU64::new(0),
            near_prefixes: OnceLock::new(),
        }
    }
}

/// Milliseconds on redcar's monotonic clock (since the first call), the unit of [`ProvenAt`].
pub(crate) fn clock_ms() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    let start = *START.get_or_init(Instant::now);
    u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// What one node's invalidation connection has proven: the [`clock_ms`] time at which redcar
/// sent the latest `PING` the node answered. Every invalidation the node queued before
/// answering was read before that `PONG` (one connection, in order), so a write acknowledged
/// before that time has had its invalidation delivered. 0: nothing proven yet.
#[derive(Debug, Default)]
pub(crate) struct ProvenAt(AtomicU64);

impl ProvenAt {
    /// The send time of the latest answered `PING`.
    pub(crate) fn at(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }

    pub(super) fn answered(&self, sent_ms: u64) {
        self.0.fetch_max(sent_ms, Ordering::AcqRel);
    }

    #[cfg(test)]
    pub(crate) fn answered_for_tests(&self, sent_ms: u64) {
        self.answered(sent_ms);
    }
}

impl TrackingFeed {
    /// A client tracks in BCAST mode with `prefixes` (`""`: all keys): every node's
    /// invalidation connection registers them too (those with a tracked lane now; others when
    /// they start, see `Node::start_tracking`).
    pub(crate) fn want_bcast(&self, prefixes: &[Bytes]) {
        self.bcast.send_if_modified(|cover| {
            let mut all: Vec<Bytes> = cover.iter().chain(prefixes).cloned().collect();
            all = minimal_cover(all);
            let changed = all != *cover;
            *cover = all;
            changed
        });
    }

    /// The BCAST prefixes every node registers now (their minimal cover).
    pub(crate) fn bcast_cover(&self) -> Vec<Bytes> {
        self.bcast.borrow().clone()
    }

    /// The BCAST prefixes wanted now, and a way to hear of changes.
    pub(super) fn bcast(&self) -> watch::Receiver<Vec<Bytes>> {
        self.bcast.subscribe()
    }

    /// Sends every node's invalidations to `sink` too from now on.
    pub(crate) fn add_sink(&self, sink: Weak<dyn InvalidationSink>) {
        self.sinks
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(sink);
    }

    /// Has every invalidation connection send `PING` every `every` (set once at start-up, by
    /// the near cache; connections started before pick it up when they next connect).
    pub(crate) fn set_heartbeat(&self, every: Duration) {
        let ms = u64::try_from(every.as_millis()).unwrap_or(u64::MAX).max(1);
        self.heartbeat_ms.store(ms, Ordering::Relaxed);
    }

    /// The near cache's prefixes, registered on the nodes' near lanes (see [`Lane::near`]);
    /// set once at start-up, before any lane connects.
    ///
    /// [`Lane::near`]: super::Lane::near
    pub(crate) fn set_near_prefixes(&self, prefixes: Vec<Bytes>) {
        let _ = self.near_prefixes.set(minimal_cover(prefixes));
    }

    pub(super) fn near_prefixes(&self) -> Vec<Bytes> {
        self.near_prefixes.get().cloned().unwrap_or_default()
    }

    pub(super) fn heartbeat(&self) -> Option<Duration> {
        match self.heartbeat_ms.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(Duration::from_millis(ms)),
        }
    }

    pub(super) fn deliver(&self, addr: &str, keys: Option<Vec<Bytes>>) {
        let sinks = self.sinks();
        let Some((last, others)) = sinks.split_last() else {
            return;
        };
        for sink in others {
            sink.invalidated(addr, keys.clone());
        }
        last.invalidated(addr, keys);
    }

    /// A connection to `addr` that tracking relies on was lost (see [`InvalidationSink::lost`]).
    pub(super) fn lost(&self, addr: &str) {
        for sink in self.sinks() {
            sink.lost(addr);
        }
    }

    fn sinks(&self) -> Vec<Arc<dyn InvalidationSink>> {
        self.sinks
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter_map(Weak::upgrade)
            .collect()
    }
}

/// The prefixes of `prefixes` that no other one of them starts: registering those covers all.
pub(super) fn minimal_cover(mut prefixes: Vec<Bytes>) -> Vec<Bytes> {
    prefixes.sort();
    let mut cover: Vec<Bytes> = Vec::with_capacity(prefixes.len());
    for prefix in prefixes {
        // Sorted: the keys starting with a kept prefix follow it in one run.
        if cover.last().is_none_or(|kept| !prefix.starts_with(kept)) {
            cover.push(prefix);
        }
    }
    cover
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bcast_cover_keeps_only_the_shortest_prefixes() {
        let cover = |p: &[&str]| {
            minimal_cover(
                p.iter()
                    .map(|p| Bytes::copy_from_slice(p.as_bytes()))
                    .collect(),
            )
        };
        assert_eq!(cover(&["ab", "a", "b", "abc", "ba"]), ["a", "b"]);
        assert_eq!(cover(&["user:", "", "x"]), [""]);
        let feed = TrackingFeed::default();
        let mut seen = feed.bcast();
        feed.want_bcast(&[Bytes::from_static(b"user:1")]);
        feed.want_bcast(&[Bytes::from_static(b"user:")]);
        feed.want_bcast(&[Bytes::from_static(b"user:2")]);
        assert!(seen.has_changed().unwrap_or(false));
        assert_eq!(*seen.borrow_and_update(), [Bytes::from_static(b"user:")]);
    }

    /// A node that answers every `PING` with `+PONG`, each preceded by a push frame, as
    /// Redis's `tracking-redir-broken` would come.
    async fn pushing_node() -> String {
        use crate::upstream::scripted_node::{scripted_node, NodeAction};
        const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";
        scripted_node(Duration::ZERO, |input| {
            let complete = input.len() / PING.len();
            input.drain(..complete * PING.len());
            NodeAction::Reply(
                b">2\r\n$21\r\ntracking-redir-broken\r\n:5\r\n+PONG\r\n".repeat(complete),
            )
        })
        .await
    }

    #[tokio::test]
    async fn a_push_on_a_pipelined_connection_is_never_taken_for_a_reply() {
        let (upstreams, _metrics) = crate::upstream::Upstreams::for_tests(false);
        let node = upstreams.node(&pushing_node().await);
        let replies: Vec<_> = (0..10)
            .map(|_| {
                node.send(
                    Bytes::from_static(b"*1\r\n$4\r\nPING\r\n"),
                    false,
                    crate::upstream::Lane::default(),
                )
            })
            .collect();
        for reply in replies {
            assert_eq!(&reply.await.expect("a reply")[..], b"+PONG\r\n");
        }
    }

    struct Count(std::sync::Mutex<Vec<Option<Vec<Bytes>>>>);

    impl InvalidationSink for Count {
        fn invalidated(&self, _addr: &str, keys: Option<Vec<Bytes>>) {
            self.0.lock().unwrap_or_else(|e| e.into_inner()).push(keys);
        }

        fn lost(&self, _addr: &str) {
            self.0.lock().unwrap_or_else(|e| e.into_inner()).push(None);
        }
    }

    #[test]
    fn the_feed_reaches_its_sink_while_it_lives() {
        let feed = TrackingFeed::default();
        feed.deliver("a:1", None); // no sink yet: nothing happens
        let sink = Arc::new(Count(Default::default()));
        let weak: Weak<dyn InvalidationSink> = Arc::downgrade(&sink) as Weak<dyn InvalidationSink>;
        feed.add_sink(weak);
        feed.deliver("a:1", Some(vec![Bytes::from_static(b"k")]));
        assert_eq!(sink.0.lock().map(|v| v.len()).unwrap_or(0), 1);
        drop(sink);
        feed.deliver("a:1", None); // sink gone: dropped
    }
}
