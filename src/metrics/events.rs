//! The event log: the last few topology changes and node ejections, with timestamps, for the
//! status page (`/status.json`).
//!
//! Written only on rare transitions (a slot map adopted or rejected, a node ejected or
//! restored), never per command, so a short mutex is fine. A repeat of the newest event (same
//! kind, node and detail, e.g. the same rejection every refresh) bumps its count instead of
//! pushing out older, more useful history.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// Events kept; the oldest is dropped first.
const EVENT_LOG_LEN: usize = 100;

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum EventKind {
    /// A new slot map was adopted (the first one, or one that differs from the current map).
    TopologyAdopted,
    /// A slot map was read but not adopted (stale, unconfirmed or partial).
    TopologyRejected,
    /// Outlier detection took a node out of selection.
    NodeEjected,
    /// A health check brought an ejected node back.
    NodeRestored,
}

/// One entry.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Event {
    /// Sequence number from 0 (a repeat keeps its first id).
    pub(crate) id: u64,
    /// Unix time in milliseconds of the latest occurrence.
    time_ms: u64,
    /// What happened (a node ejected or restored, a map adopted or rejected, ...).
    pub(crate) kind: EventKind,
    /// The node concerned (the ejected node, the map's source), or empty.
    pub(crate) node: String,
    /// What changed or why, in words.
    pub(crate) detail: String,
    /// Occurrences folded into this entry (1 unless it repeated).
    pub(crate) count: u64,
}

/// A bounded ring of events.
#[derive(Debug)]
pub(crate) struct EventLog {
    /// Locked only to push (on a transition, never per command) and to read.
    entries: Mutex<Ring>,
}

#[derive(Debug)]
struct Ring {
    /// The newest events, oldest first, at most the ring's capacity.
    events: VecDeque<Event>,
    /// The next event's id; ids keep increasing and are never reused.
    next_id: u64,
}

// === impl EventLog ===

impl EventLog {
    pub(crate) fn new() -> EventLog {
        EventLog {
            entries: Mutex::new(Ring {
                events: VecDeque::with_capacity(EVENT_LOG_LEN),
                next_id: 0,
            }),
        }
    }

    /// Records an event now.
    pub(crate) fn push(&self, kind: EventKind, node: &str, detail: String) {
        let time_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let mut ring = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(last) = ring.events.back_mut() {
            if last.kind == kind && last.node == node && last.detail == detail {
                last.count += 1;
                last.time_ms = time_ms;
                return;
            }
        }
        if ring.events.len() >= EVENT_LOG_LEN {
            ring.events.pop_front();
        }
        let id = ring.next_id;
        ring.next_id += 1;
        ring.events.push_back(Event {
            id,
            time_ms,
            kind,
            node: node.to_string(),
            detail,
            count: 1,
        });
    }

    /// Newest first.
    pub(crate) fn entries(&self) -> Vec<Event> {
        let ring = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        ring.events.iter().rev().cloned().collect()
    }
}

impl Default for EventLog {
    fn default() -> Self {
        EventLog::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_keeps_the_newest_events_newest_first() {
        let log = EventLog::new();
        for i in 0..EVENT_LOG_LEN + 5 {
            log.push(EventKind::NodeEjected, &format!("n:{i}"), String::new());
        }
        let entries = log.entries();
        assert_eq!(entries.len(), EVENT_LOG_LEN);
        assert_eq!(entries[0].node, format!("n:{}", EVENT_LOG_LEN + 4));
        assert_eq!(entries[0].id, (EVENT_LOG_LEN + 4) as u64);
        assert_eq!(
            entries[EVENT_LOG_LEN - 1].node,
            "n:5",
            "the 5 oldest dropped"
        );
    }

    #[test]
    fn a_repeat_of_the_newest_event_is_counted_not_pushed() {
        let log = EventLog::new();
        log.push(EventKind::TopologyRejected, "a:1", "stale".into());
        log.push(EventKind::TopologyRejected, "a:1", "stale".into());
        log.push(EventKind::NodeEjected, "b:2", "x".into());
        log.push(EventKind::TopologyRejected, "a:1", "stale".into());
        let entries = log.entries();
        assert_eq!(entries.len(), 3);
        assert_eq!(entries[2].count, 2, "first two folded");
        assert_eq!(entries[0].count, 1, "not a repeat of the newest");
        let json = serde_json::to_value(&entries[1]).expect("serializes");
        assert_eq!(json["kind"], "node_ejected");
    }
}
