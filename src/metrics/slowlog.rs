//! The slow log: the last N commands slower than a threshold, with who sent them and where they went.
//!
//! Why redcar keeps its own: a command slow through the proxy may be fast on its node (it waited
//! behind a redirect, a retry, a full connection, a busy worker), and `SLOWLOG GET` through redcar
//! shows both logs merged, so an operator can tell where the time went. What holds: only commands
//! at or over `metrics.slowlog_threshold` take the lock; the ring holds at most `slowlog_max_len`
//! entries, the oldest dropped first; a key is cut to 64 bytes so one huge key cannot make the log
//! large. Ids increase by one per entry, like Redis's, and are not reused, even across `SLOWLOG
//! RESET`.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// Keys longer than this are cut in the log (and marked), so a huge key cannot bloat it.
const KEY_SHOWN: usize = 64;

/// One slow command.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub(crate) struct SlowEntry {
    /// Sequence number, from 0, like Redis's slow-log ids.
    pub(crate) id: u64,
    /// Unix time (seconds) when the command finished.
    pub(crate) time: u64,
    /// Dispatch to reply, in microseconds.
    pub(crate) duration_us: u64,
    /// The command's table name (`get`, `config|get`).
    pub(crate) command: String,
    /// The first key, cut to 64 bytes (lossy UTF-8), or empty.
    pub(crate) key: String,
    /// The node it went to, when known.
    pub(crate) node: String,
    /// The client's address, as `/clients` shows it.
    pub(crate) client: String,
}

/// A bounded ring of slow commands; pushes lock briefly, only for commands over the threshold.
pub(crate) struct SlowLog {
    /// `metrics.slowlog_threshold`; zero turns the log off.
    threshold: Duration,
    /// `metrics.slowlog_max_len`; zero turns the log off.
    max_len: usize,
    /// The newest entries, oldest first; locked only to push, read or reset.
    entries: Mutex<VecDeque<SlowEntry>>,
    /// The next entry's id.
    next_id: std::sync::atomic::AtomicU64,
}

impl SlowLog {
    /// From `metrics:` at start-up. Allocates room for at most 1,024 entries up front, however long
    /// the log may grow.
    pub(crate) fn new(threshold: Duration, max_len: usize) -> SlowLog {
        SlowLog {
            threshold,
            max_len,
            entries: Mutex::new(VecDeque::with_capacity(max_len.min(1024))),
            next_id: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// True when `elapsed` deserves an entry.
    pub(crate) fn is_slow(&self, elapsed: Duration) -> bool {
        self.is_enabled() && elapsed >= self.threshold
    }

    /// False when `slowlog_threshold` is 0 or `slowlog_max_len` is 0.
    pub(crate) fn is_enabled(&self) -> bool {
        !self.threshold.is_zero() && self.max_len > 0
    }

    /// Adds an entry, dropping the oldest when full.
    pub(crate) fn push(
        &self,
        elapsed: Duration,
        command: &str,
        key: &[u8],
        node: &str,
        client: &str,
    ) {
        let time = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut key_text = String::from_utf8_lossy(&key[..key.len().min(KEY_SHOWN)]).into_owned();
        if key.len() > KEY_SHOWN {
            key_text.push('…');
        }
        let entry = SlowEntry {
            id: self
                .next_id
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            time,
            duration_us: u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX),
            command: command.to_string(),
            key: key_text,
            node: node.to_string(),
            client: client.to_string(),
        };
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= self.max_len {
            entries.pop_front();
        }
        entries.push_back(entry);
    }

    /// Entries kept now.
    pub(crate) fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Forgets every entry (SLOWLOG RESET).
    pub(crate) fn reset(&self) {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// Newest first, like Redis's SLOWLOG GET.
    pub(crate) fn entries(&self) -> Vec<SlowEntry> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.iter().rev().cloned().collect()
    }
}
