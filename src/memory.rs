//! Giving memory back once a large value has gone through and the clients went quiet.
//!
//! mimalloc keeps what a thread freed in that thread's heap for reuse: the last empty page of
//! each size class is kept ("retired"), and pages other threads freed blocks in wait for their
//! owner to collect them. Both are given back only when the owning thread allocates through its
//! slow path again. A buffer that grew for a 1 MB value goes through every size class on its
//! way (16 KiB, 32 KiB, … 512 KiB, then 1 and 2 MiB), and a worker whose clients went idle
//! afterwards allocates nothing more: 200 clients that each SET 1 MB and went idle left 43 KB
//! of RSS per client behind, nearly all of it free in mimalloc's pages (the heap
//! still in use was 1.5 KB per client under massif). Collected when they went idle: 3.4 KB.
//!
//! So a session whose client goes idle or leaves asks for the memory back (`give_back`): the
//! thread's heap is collected if that client moved a large value, or if code anywhere freed a
//! buffer grown for one (`large_freed`: node connections, other threads) since this thread
//! last collected. Traffic without large values never pays for a collection; with them, a
//! session collects at most once per busy spell that moved one.
//!
//! The collection itself is the allocator's business: the binary registers it
//! ([`set_collector`], from `src/allocator.rs`, the one place allowed `unsafe`). Without one
//! (tests, tools), `give_back` does nothing.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Large buffers freed in the process so far.
static FREED: AtomicU64 = AtomicU64::new(0);

/// Collects the calling thread's heap (set once by the binary).
static COLLECTOR: OnceLock<fn()> = OnceLock::new();

thread_local! {
    /// [`FREED`] when this thread last collected.
    static SEEN: Cell<u64> = const { Cell::new(0) };
    /// Large buffers freed on this thread (tests: [`FREED`] is shared by tests running at once).
    #[cfg(test)]
    static FREED_HERE: Cell<u64> = const { Cell::new(0) };
}

/// Registers how to collect the calling thread's heap. Allocates nothing (it may run before
/// `main`). Returns false if one was registered already (that one stays).
pub fn set_collector(collect: fn()) -> bool {
    COLLECTOR.set(collect).is_ok()
}

/// A buffer grown for a large value was freed (or is about to be, with the last reference).
pub(crate) fn large_freed() {
    FREED.fetch_add(1, Ordering::Relaxed);
    #[cfg(test)]
    FREED_HERE.with(|here| here.set(here.get() + 1));
}

/// At a quiet moment (a session went idle or ended): collects this thread's heap if the session
/// moved a large value (`moved_large`: all its references are gone by now), or if a large
/// buffer was freed anywhere since this thread last collected.
///
/// The session's own word matters: a large buffer is often reported before its memory is
/// actually freed (a request's bytes live until its reply is in), and another session going
/// idle in between would take the report and collect too early.
pub(crate) fn give_back(moved_large: bool) {
    if let Some(collect) = COLLECTOR.get() {
        SEEN.with(|seen| {
            // `|`, not `||`: the thread catches up with `FREED` either way.
            if due(&FREED, seen) | moved_large {
                collect();
            }
        });
    }
}

/// Collects this thread's heap now, after it freed many small blocks at once (a slot map's
/// replies and their parse), which no large buffer reports. Also tells the other threads to
/// collect at their next quiet moment: the replies were read into their buffers.
pub(crate) fn collect_now() {
    large_freed();
    give_back(true);
}

/// Whether `freed` moved since `seen`, which then catches up.
fn due(freed: &AtomicU64, seen: &Cell<u64>) -> bool {
    let now = freed.load(Ordering::Relaxed);
    if now == seen.get() {
        return false;
    }
    seen.set(now);
    true
}

/// Large buffers freed on this thread so far (tests).
#[cfg(test)]
pub(crate) fn freed_here() -> u64 {
    FREED_HERE.with(Cell::get)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_collects_once_per_large_free_and_never_without_one() {
        let freed = AtomicU64::new(0);
        let seen = Cell::new(0);
        assert!(!due(&freed, &seen), "nothing large freed: no collection");
        assert!(!due(&freed, &seen));
        freed.fetch_add(1, Ordering::Relaxed);
        assert!(due(&freed, &seen), "a large buffer was freed: collect");
        assert!(!due(&freed, &seen), "once");
        freed.fetch_add(3, Ordering::Relaxed);
        assert!(due(&freed, &seen), "several frees since: one collection");
        assert!(!due(&freed, &seen));
    }

    #[test]
    fn every_thread_collects_after_a_large_free_anywhere() {
        // The freeing thread need not be the one whose heap holds the pages.
        let freed = AtomicU64::new(0);
        let (here, there) = (Cell::new(0), Cell::new(0));
        freed.fetch_add(1, Ordering::Relaxed);
        assert!(due(&freed, &here));
        assert!(due(&freed, &there));
        assert!(!due(&freed, &here) && !due(&freed, &there));
    }

    thread_local! {
        static COLLECTED: Cell<u32> = const { Cell::new(0) };
    }

    fn count_collection() {
        COLLECTED.with(|c| c.set(c.get() + 1));
    }

    #[test]
    fn a_session_that_moved_a_large_value_always_collects() {
        // Even when another session on the thread already took the report of that value's
        // buffer (its memory was freed only after: a request's bytes live until its reply).
        set_collector(count_collection); // the one collector of this test process
        std::thread::spawn(|| {
            give_back(false); // catch up with what other tests freed
            large_freed();
            give_back(false); // another session goes idle first
            let before = COLLECTED.with(Cell::get);
            give_back(true);
            assert_eq!(COLLECTED.with(Cell::get), before + 1);
            give_back(true);
            assert_eq!(
                COLLECTED.with(Cell::get),
                before + 2,
                "every spell that moved one"
            );
        })
        .join()
        .expect("the test thread");
    }

    #[test]
    fn large_freed_is_counted() {
        let before = freed_here();
        large_freed();
        assert_eq!(freed_here(), before + 1);
    }
}
