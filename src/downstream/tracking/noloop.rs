//! NOLOOP in BCAST mode: a BCAST client with NOLOOP is not told of the keys it wrote itself
//! (Redis remembers the last client that changed each key). The nodes cannot tell: every
//! redcar client's write reaches them over connections shared by many clients, and redcar's
//! invalidation connection is the only BCAST client they know. So redcar remembers which
//! BCAST NOLOOP session just wrote each key, and drops that session's copy of the key's next
//! invalidation if it comes within [`WINDOW`]. Later, it is delivered: an extra invalidation,
//! never a missing one, unless the session's write changed nothing (a refused write, a DEL of
//! a missing key) and another client changes the key within the window.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

/// How long a session's write hides the key's next invalidation from it.
const WINDOW: Duration = Duration::from_millis(200);

/// Keys remembered at most; past it, writes are not remembered (their invalidations come).
const MAX_KEYS: usize = 65_536;

/// Key → the BCAST NOLOOP sessions that wrote it in the last [`WINDOW`], and when.
#[derive(Default)]
pub(super) struct OwnWrites {
    by_key: HashMap<Bytes, Vec<(u64, Instant)>>,
}

impl OwnWrites {
    /// `session` is about to write `key`.
    pub(super) fn wrote(&mut self, key: Bytes, session: u64, now: Instant) {
        if self.by_key.len() >= MAX_KEYS && !self.by_key.contains_key(&key) {
            self.prune(now);
            if self.by_key.len() >= MAX_KEYS {
                return;
            }
        }
        let writers = self.by_key.entry(key).or_default();
        writers.retain(|&(s, _)| s != session);
        writers.push((session, now));
    }

    /// Whether `session` wrote `key` within the window (forgotten either way: one write hides
    /// one invalidation).
    pub(super) fn take(&mut self, key: &[u8], session: u64, now: Instant) -> bool {
        let Some(writers) = self.by_key.get_mut(key) else {
            return false;
        };
        let mut own = false;
        writers.retain(|&(s, at)| {
            if s == session {
                own = now.duration_since(at) <= WINDOW;
                return false;
            }
            now.duration_since(at) <= WINDOW
        });
        if writers.is_empty() {
            self.by_key.remove(key);
        }
        own
    }

    /// Nothing remembered (the common case: no BCAST NOLOOP session wrote lately).
    pub(super) fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    fn prune(&mut self, now: Instant) {
        self.by_key.retain(|_, writers| {
            writers.retain(|&(_, at)| now.duration_since(at) <= WINDOW);
            !writers.is_empty()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_hides_one_invalidation_from_its_writer_only_within_the_window() {
        let mut own = OwnWrites::default();
        let t0 = Instant::now();
        own.wrote(Bytes::from_static(b"k"), 1, t0);
        own.wrote(Bytes::from_static(b"k"), 2, t0);
        assert!(!own.take(b"k", 3, t0), "another session");
        assert!(own.take(b"k", 1, t0 + Duration::from_millis(10)));
        assert!(!own.take(b"k", 1, t0), "one write hides one invalidation");
        assert!(!own.take(b"k", 2, t0 + WINDOW * 2), "too late: delivered");
        assert!(own.is_empty());
    }

    #[test]
    fn expired_writes_make_room_at_the_bound() {
        let mut own = OwnWrites::default();
        let t0 = Instant::now();
        for i in 0..MAX_KEYS {
            own.wrote(Bytes::from(i.to_string()), 1, t0);
        }
        own.wrote(Bytes::from_static(b"new"), 1, t0);
        assert!(!own.take(b"new", 1, t0), "full: not remembered");
        own.wrote(Bytes::from_static(b"new"), 1, t0 + WINDOW * 2);
        assert!(own.take(b"new", 1, t0 + WINDOW * 2));
    }
}
