//! Nodes that recently left the slot map, remembered for a while so the status page shows them
//! as gone instead of silently dropping their rows: Redis leaves a replica it cannot reach out
//! of `CLUSTER SLOTS` within seconds, and a failed primary once it is replaced.
//!
//! Fed by the sampler once a second (a walk over the map's nodes), never by the data path.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use tokio::time::Instant;

use crate::cluster::Topology;

/// How long a departed node is shown.
const SHOWN_FOR: Duration = Duration::from_secs(600);

/// Where a node was in the last map that had it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Place {
    /// `primary` or `replica`.
    pub(crate) role: &'static str,
    /// The first slot of its shard, to find the shard that owns those slots now.
    pub(crate) slot: u16,
}

/// A node no longer in the map.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Gone {
    /// `HOST:PORT` as the map named it.
    pub(crate) addr: String,
    /// Its role in the last map that had it.
    pub(crate) role: &'static str,
    /// Its shard's first slot then: the page shows the row under whichever shard owns it now.
    pub(crate) slot: u16,
    /// Unix time (ms) the map without it was first seen.
    since_ms: u64,
    /// When it was first missed, on the monotonic clock: what `SHOWN_FOR` counts from.
    #[serde(skip)]
    at: Instant,
}

/// Owned by the sampler; the lock is held for one comparison per second and one read per status
/// request.
#[derive(Default)]
pub(crate) struct Departed {
    /// The last map's nodes and the departed ones; a poisoned lock is taken over.
    state: Mutex<State>,
}

/// What `observe` compares and keeps between calls.
#[derive(Default)]
struct State {
    /// The map `last` was read from: a map seen before is not walked again.
    map: Weak<Topology>,
    /// Every node of the previous map, keyed by the nodes' own address handles (no copy per
    /// node of a big map).
    last: HashMap<Arc<str>, Place>,
    /// Nodes missed since, dropped after `SHOWN_FOR` or when they come back.
    gone: HashMap<Arc<str>, Gone>,
}

// === impl Departed ===

impl Departed {
    /// Compares `map`'s nodes with those of the map of the previous call, if it is another.
    pub(crate) fn observe_map(&self, map: &Arc<Topology>) {
        let seen = {
            let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            std::ptr::eq(state.map.as_ptr(), Arc::as_ptr(map))
        };
        if seen {
            self.expire();
        } else {
            self.observe(places(map));
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            state.map = Arc::downgrade(map);
        }
    }

    /// Forgets departed nodes shown for long enough.
    fn expire(&self) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let at = Instant::now();
        state
            .gone
            .retain(|_, g| at.duration_since(g.at) < SHOWN_FOR);
    }

    /// Compares the current map's nodes with the previous call's.
    /// A node that comes back leaves the list at once; one that leaves again starts a new
    /// `SHOWN_FOR`.
    pub(crate) fn observe(&self, now: HashMap<Arc<str>, Place>) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let at = Instant::now();
        let since_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let last = std::mem::take(&mut state.last);
        for (addr, place) in last {
            if !now.contains_key(&addr) {
                let gone = Gone {
                    addr: addr.to_string(),
                    role: place.role,
                    slot: place.slot,
                    since_ms,
                    at,
                };
                state.gone.insert(addr, gone);
            }
        }
        state
            .gone
            .retain(|addr, g| !now.contains_key(addr) && at.duration_since(g.at) < SHOWN_FOR);
        state.last = now;
    }

    /// Departed nodes, by address.
    pub(crate) fn list(&self) -> Vec<Gone> {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mut list: Vec<Gone> = state.gone.values().cloned().collect();
        list.sort_by(|a, b| a.addr.cmp(&b.addr));
        list
    }
}

/// Every node of `topology` with its role and its shard's first slot.
/// A shard that owns no slot (being emptied) gets slot 0.
pub(crate) fn places(topology: &Topology) -> HashMap<Arc<str>, Place> {
    let mut first_slot = vec![None; topology.shards().len()];
    for (start, _, shard) in topology.ranges() {
        let Some(shard) = shard else { continue };
        let index = topology
            .shards()
            .iter()
            .position(|s| std::ptr::eq(s, shard));
        if let Some(i) = index {
            first_slot[i].get_or_insert(start);
        }
    }
    let mut places = HashMap::new();
    for (shard, slot) in topology.shards().iter().zip(first_slot) {
        let slot = slot.unwrap_or(0);
        let role = "primary";
        places.insert(shard.primary.addr().clone(), Place { role, slot });
        for replica in &shard.replicas {
            let role = "replica";
            places.insert(replica.addr().clone(), Place { role, slot });
        }
    }
    places
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(nodes: &[(&str, &'static str)]) -> HashMap<Arc<str>, Place> {
        nodes
            .iter()
            .map(|&(addr, role)| (Arc::from(addr), Place { role, slot: 7 }))
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn a_node_missing_from_the_map_is_listed_until_it_returns_or_expires() {
        let departed = Departed::default();
        departed.observe(map(&[("a:1", "primary"), ("b:1", "replica")]));
        assert!(departed.list().is_empty());
        departed.observe(map(&[("a:1", "primary")]));
        let list = departed.list();
        assert_eq!(list.len(), 1);
        assert_eq!(
            (list[0].addr.as_str(), list[0].role, list[0].slot),
            ("b:1", "replica", 7)
        );
        departed.observe(map(&[("a:1", "primary"), ("b:1", "replica")]));
        assert!(departed.list().is_empty(), "back in the map");
        departed.observe(map(&[("a:1", "primary")]));
        tokio::time::advance(SHOWN_FOR + Duration::from_secs(1)).await;
        departed.observe(map(&[("a:1", "primary")]));
        assert!(departed.list().is_empty(), "forgotten after SHOWN_FOR");
    }

    /// The sampler's way: the map itself, walked only when it is another one; a map seen
    /// before still lets departed nodes expire.
    #[tokio::test(start_paused = true)]
    async fn a_map_seen_before_is_not_walked_again_but_departures_still_expire() {
        let (upstreams, _metrics) = crate::upstream::Upstreams::for_tests(false);
        let shard = |replicas: &[String]| {
            Arc::new(Topology::single_shard(
                "a:1",
                replicas,
                &upstreams,
                Arc::from("a:1"),
            ))
        };
        let departed = Departed::default();
        departed.observe_map(&shard(&["b:1".to_string()]));
        let without = shard(&[]);
        departed.observe_map(&without);
        let list = departed.list();
        assert_eq!(list.len(), 1);
        assert_eq!((list[0].addr.as_str(), list[0].role), ("b:1", "replica"));
        departed.observe_map(&without);
        assert_eq!(departed.list().len(), 1, "still shown");
        tokio::time::advance(SHOWN_FOR + Duration::from_secs(1)).await;
        departed.observe_map(&without);
        assert!(departed.list().is_empty(), "forgotten after SHOWN_FOR");
    }
}
