//! Which writes a client's WAIT covers: the slots it wrote to since its previous WAIT, plus those
//! a previous WAIT could not confirm.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

/// Slots per group in [`Written`]: 1,024 groups, one bit each.
const GROUP: u16 = 16;
/// 64-bit words holding one bit per group.
const GROUP_WORDS: usize = 16384 / GROUP as usize / 64;

/// One bit per group of [`GROUP`] slots.
type Groups = [u64; GROUP_WORDS];

/// Where a client wrote, for WAIT: the slots written since its previous WAIT, and what that
/// WAIT covered and how it ended.
///
/// A WAIT asks only the primaries of the writes it covers, so one dead or frozen primary the
/// client wrote to long ago does not hold up (or fail) WAITs for writes that went elsewhere:
/// - a WAIT covers the slots written since the previous WAIT;
/// - a WAIT that did not get the count it asked for (it timed out short, failed, or the client
///   left before it ended) did not confirm its writes, so the next WAIT covers them again;
/// - a WAIT with no write since a WAIT that got its count asks the same primaries again: Redis
///   answers such a WAIT with the replicas that acknowledged the connection's last write,
///   however long ago, i.e. those still in sync.
///
/// Kept per group of [`GROUP`] slots in 128 bytes inside the session, not per slot: noting a
/// write is on every write's path, and a 2 KiB per-slot bitmap per client, hit at a random word
/// for every write, cost 4–10% of redcar's CPU at `SET -P 16` (bench/README.md, "WAIT
/// bookkeeping"; most likely cache and TLB misses across 50 sessions' bitmaps). The price: a
/// group that straddles two shards' slot ranges makes WAIT ask both primaries — it may wait
/// for, and count, one primary more than the client wrote to, never fewer. A WAIT only swaps
/// and clears bitmaps; a write still just sets a bit.
#[derive(Default)]
pub(crate) struct Written {
    /// One bit per group of slots written to since the last WAIT; made with the first write (a
    /// client that never writes, or a crowd of idle ones, holds none) and kept, cleared, after.
    groups: Option<Box<Groups>>,
    /// A write whose slots were not noted (split or fan-out commands): ask every primary.
    everywhere: bool,
    /// What the last WAIT covered; made by the first WAIT.
    last: Option<Box<Covered>>,
    /// Per core: bit `w` for worker `w`, whose node connections carried some of the client's
    /// writes before the session moved away from it (see [`note_moved_from`]). Never cleared:
    /// a WAIT with nothing new written asks about the same writes again, on the same
    /// connections.
    ///
    /// [`note_moved_from`]: Written::note_moved_from
    moved_from: u64,
}

/// Workers a session's writes can be remembered on ([`Written::note_moved_from`]): one bit each
/// in a `u64`.
pub(crate) const MOVED_FROM_WORKERS: usize = u64::BITS as usize;

/// The writes one WAIT covers, and how that WAIT ended.
pub(super) struct Covered {
    /// The groups of slots the WAIT asked about.
    groups: Groups,
    /// It asked every primary (a write whose slots were not noted came before it).
    everywhere: bool,
    /// How it ended, set by the WAIT itself.
    end: Settle,
}

/// How a WAIT ended, reported by the WAIT itself (it runs after the session moved on).
#[derive(Clone)]
pub(super) struct Settle(Arc<AtomicU8>);

/// Not ended yet (or never will: the client left).
const PENDING: u8 = 0;
/// Got the count it asked for: its writes are confirmed.
const CONFIRMED: u8 = 1;
/// Answered fewer replicas than asked, or failed.
const SHORT: u8 = 2;

impl Settle {
    fn new(state: u8) -> Settle {
        Settle(Arc::new(AtomicU8::new(state)))
    }

    /// The WAIT got the count it asked for: the next WAIT need not cover its writes again.
    pub(super) fn confirmed(&self) {
        self.0.store(CONFIRMED, Ordering::Release);
    }

    /// The WAIT answered fewer replicas than asked, or failed: the next one covers its writes.
    pub(super) fn short(&self) {
        self.0.store(SHORT, Ordering::Release);
    }

    fn is_confirmed(&self) -> bool {
        self.0.load(Ordering::Acquire) == CONFIRMED
    }
}

impl Written {
    #[inline]
    pub(crate) fn note(&mut self, slot: u16) {
        let group = usize::from(slot / GROUP);
        let groups = self.groups.get_or_insert_with(Default::default);
        groups[(group / 64) % GROUP_WORDS] |= 1 << (group % 64);
    }

    pub(crate) fn note_everywhere(&mut self) {
        self.everywhere = true;
    }

    /// The session moves (with nothing in flight) away from per-core worker `worker`: if it
    /// wrote anything so far, some of those writes went over that worker's node connections,
    /// and its WAITs from now on ask there too (see `router::stateful::wait`). False, with
    /// nothing noted, when the session wrote and `worker` is beyond [`MOVED_FROM_WORKERS`]: it
    /// must not move then (its WAIT could no longer count its earlier writes). A session that
    /// never wrote may always move.
    ///
    /// A worker is noted for any earlier write, not only for those made on it: asking one more
    /// connection can only lower WAIT's count (its last write may be later than the client's),
    /// never raise it past what the client's writes reached.
    #[must_use = "a session whose move could not be noted must not move"]
    pub(crate) fn note_moved_from(&mut self, worker: usize) -> bool {
        if !self.wrote() {
            return true;
        }
        if worker >= MOVED_FROM_WORKERS {
            return false;
        }
        self.moved_from |= 1 << worker;
        true
    }

    /// The workers noted by [`note_moved_from`](Self::note_moved_from): bit `w` for worker `w`.
    pub(crate) fn moved_from(&self) -> u64 {
        self.moved_from
    }

    /// Whether the client wrote anything so far: a slot noted (the bitmap is made by the first
    /// one), a write everywhere not yet covered by a WAIT, or writes a WAIT covered.
    fn wrote(&self) -> bool {
        self.groups.is_some()
            || self.everywhere
            || self
                .last
                .as_deref()
                .is_some_and(|last| last.everywhere || !is_clear(&last.groups))
    }

    /// A WAIT starts: the writes it covers (see [`Written`]), and where it reports how it
    /// ended. Nothing is allocated but the first time, and a new report slot while the previous
    /// WAIT still holds its own.
    pub(super) fn begin_wait(&mut self) -> (&Covered, Settle) {
        let fresh = self.everywhere || self.groups.as_deref().is_some_and(|g| !is_clear(g));
        let last = self.last.get_or_insert_with(|| {
            Box::new(Covered {
                groups: [0; GROUP_WORDS],
                everywhere: false,
                end: Settle::new(CONFIRMED),
            })
        });
        if last.end.is_confirmed() {
            // The last WAIT's writes are confirmed; with nothing new, the same ones again.
            if fresh {
                last.groups = self.groups.as_deref().copied().unwrap_or_default();
                last.everywhere = self.everywhere;
            }
        } else {
            // Not confirmed (yet): they stay covered, with what was written since.
            if let Some(groups) = self.groups.as_deref() {
                for (word, new) in last.groups.iter_mut().zip(groups) {
                    *word |= new;
                }
            }
            last.everywhere |= self.everywhere;
        }
        if let Some(groups) = self.groups.as_deref_mut() {
            *groups = [0; GROUP_WORDS];
        }
        self.everywhere = false;
        match Arc::get_mut(&mut last.end.0) {
            Some(state) => *state.get_mut() = PENDING,
            None => last.end = Settle::new(PENDING),
        }
        let end = last.end.clone();
        (last, end)
    }
}

impl Covered {
    /// True when the WAIT must ask every primary: a write went everywhere, or none is known
    /// (a client that never wrote: Redis answers it with the replicas it has).
    pub(super) fn everywhere(&self) -> bool {
        self.everywhere || is_clear(&self.groups)
    }

    /// Every slot of every group covered.
    pub(super) fn slots(&self) -> impl Iterator<Item = u16> + '_ {
        (0..16384u16).filter(move |slot| {
            let group = usize::from(slot / GROUP);
            self.groups[group / 64] & (1 << (group % 64)) != 0
        })
    }
}

fn is_clear(groups: &Groups) -> bool {
    groups.iter().all(|word| *word == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn covered(written: &mut Written) -> (Vec<u16>, bool, Settle) {
        let (covered, end) = written.begin_wait();
        (covered.slots().collect(), covered.everywhere(), end)
    }

    #[test]
    fn written_slots_are_remembered_by_group_without_duplicates() {
        let mut written = Written::default();
        for slot in [0, 5, 15, 16383, 5] {
            written.note(slot);
        }
        let (slots, everywhere, _) = covered(&mut written);
        // Slots 0, 5 and 15 share the first group; 16383 is in the last.
        let expected: Vec<u16> = (0..16).chain(16368..16384).collect();
        assert_eq!(slots, expected);
        assert!(!everywhere);
    }

    #[test]
    fn a_write_next_to_a_shard_boundary_marks_both_sides_of_its_group() {
        // The default 3-shard layout splits at 5460 | 5461: group 341 holds 5456..=5471.
        let mut written = Written::default();
        written.note(5460);
        let (slots, _, _) = covered(&mut written);
        assert_eq!(slots.first(), Some(&5456));
        assert_eq!(slots.last(), Some(&5471));
        assert!(
            slots.contains(&5461),
            "the neighbouring shard's slot is asked too"
        );
    }

    #[test]
    fn a_client_that_never_wrote_asks_every_primary() {
        let mut written = Written::default();
        let (slots, everywhere, _) = covered(&mut written);
        assert!(slots.is_empty());
        assert!(everywhere);
    }

    #[test]
    fn a_confirmed_wait_resets_the_set_to_the_writes_since() {
        let mut written = Written::default();
        written.note(100);
        written.note(9000);
        let (slots, _, end) = covered(&mut written);
        assert_eq!(slots, (96..112).chain(8992..9008).collect::<Vec<_>>());
        end.confirmed();
        // Only shard B's slot written since: the next WAIT does not ask about slot 100.
        written.note(9000);
        let (slots, everywhere, _) = covered(&mut written);
        assert_eq!(slots, (8992..9008).collect::<Vec<_>>());
        assert!(!everywhere);
    }

    #[test]
    fn with_nothing_written_since_a_confirmed_wait_the_same_writes_are_asked_again() {
        let mut written = Written::default();
        written.note(100);
        let (_, _, end) = covered(&mut written);
        end.confirmed();
        let (slots, everywhere, end) = covered(&mut written);
        assert_eq!(slots, (96..112).collect::<Vec<_>>());
        assert!(!everywhere);
        end.confirmed();
        let (again, _, _) = covered(&mut written);
        assert_eq!(again, slots);
    }

    #[test]
    fn writes_a_wait_did_not_confirm_stay_covered() {
        for ended in [Some(false), None] {
            let mut written = Written::default();
            written.note(100);
            let (_, _, end) = covered(&mut written);
            // Short of its count, failed, or still running (the client pipelined the next).
            if ended.is_some() {
                end.short();
            }
            written.note(9000);
            let (slots, _, end) = covered(&mut written);
            assert_eq!(slots, (96..112).chain(8992..9008).collect::<Vec<_>>());
            // Once confirmed, the next WAIT covers only what is new.
            end.confirmed();
            written.note(9000);
            let (slots, _, _) = covered(&mut written);
            assert_eq!(slots, (8992..9008).collect::<Vec<_>>());
        }
    }

    #[test]
    fn a_write_to_every_shard_is_covered_until_confirmed() {
        let mut written = Written::default();
        written.note_everywhere();
        let (_, everywhere, end) = covered(&mut written);
        assert!(everywhere);
        end.short();
        written.note(100);
        let (_, everywhere, end) = covered(&mut written);
        assert!(everywhere, "the unconfirmed fan-out is still covered");
        end.confirmed();
        written.note(100);
        let (slots, everywhere, _) = covered(&mut written);
        assert!(!everywhere);
        assert_eq!(slots, (96..112).collect::<Vec<_>>());
    }

    #[test]
    fn a_move_is_noted_only_after_a_write() {
        let mut written = Written::default();
        assert!(written.note_moved_from(1));
        assert_eq!(
            written.moved_from(),
            0,
            "nothing written: no connection to ask"
        );
        // A WAIT alone writes nothing either.
        let (_, end) = written.begin_wait();
        end.confirmed();
        assert!(written.note_moved_from(1));
        assert_eq!(written.moved_from(), 0);
        written.note(100);
        assert!(written.note_moved_from(1));
        assert!(written.note_moved_from(3));
        assert_eq!(written.moved_from(), 0b1010);
    }

    #[test]
    fn a_write_everywhere_or_one_a_wait_covered_counts_as_written() {
        let mut written = Written::default();
        written.note_everywhere();
        assert!(written.note_moved_from(0));
        assert_eq!(written.moved_from(), 1);
        // Only the last WAIT's covered writes are left (the fan-out, then nothing new).
        let mut written = Written::default();
        written.note_everywhere();
        let (_, end) = written.begin_wait();
        end.confirmed();
        assert!(!written.everywhere && written.groups.is_none());
        assert!(written.note_moved_from(2));
        assert_eq!(written.moved_from(), 0b100);
    }

    #[test]
    fn a_worker_beyond_the_bitmap_refuses_a_move_after_a_write() {
        let mut written = Written::default();
        let last = MOVED_FROM_WORKERS - 1;
        assert!(
            written.note_moved_from(MOVED_FROM_WORKERS),
            "never wrote: free to move"
        );
        written.note(1);
        assert!(!written.note_moved_from(MOVED_FROM_WORKERS));
        assert!(!written.note_moved_from(usize::MAX));
        assert_eq!(written.moved_from(), 0, "nothing noted on refusal");
        assert!(written.note_moved_from(last));
        assert_eq!(written.moved_from(), 1 << last);
    }

    #[test]
    fn moved_from_workers_outlive_waits() {
        let mut written = Written::default();
        written.note(100);
        assert!(written.note_moved_from(0));
        for confirmed in [true, false, true] {
            let (_, end) = written.begin_wait();
            if confirmed {
                end.confirmed();
            } else {
                end.short();
            }
            assert_eq!(written.moved_from(), 1);
        }
        written.note(9000);
        let _ = written.begin_wait();
        assert_eq!(written.moved_from(), 1);
    }

    #[test]
    fn the_report_slot_is_reused_once_the_last_wait_let_go_of_it() {
        let mut written = Written::default();
        written.note(1);
        let (_, end) = written.begin_wait();
        let first = Arc::as_ptr(&end.0);
        end.confirmed();
        drop(end);
        written.note(1);
        let (_, end) = written.begin_wait();
        assert_eq!(Arc::as_ptr(&end.0), first);
        assert!(!end.is_confirmed(), "a new WAIT starts pending");
    }
}
