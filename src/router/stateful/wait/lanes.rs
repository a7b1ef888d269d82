//! Which connections a WAIT asks on: the client's lane, and the same lane on the workers a moved
//! session wrote from (see the module docs of `router::stateful::wait`).

use smallvec::SmallVec;

use crate::upstream::Lane;

/// The lanes a WAIT asks on: the client's own `lane`, and the same lane on every worker in
/// `moved_from` (bit `w` for worker `w`, see [`super::Written::note_moved_from`]) other than the one
/// `lane` runs on (the lane's own worker, else `current`: the calling thread's).
pub(super) fn wait_lanes(
    lane: Lane,
    moved_from: u64,
    current: Option<usize>,
) -> SmallVec<[Lane; 4]> {
    let mut lanes = SmallVec::new();
    lanes.push(lane);
    let own = lane.worker().or(current);
    let mut rest = moved_from;
    while rest != 0 {
        let worker = rest.trailing_zeros() as usize;
        rest &= rest - 1;
        if Some(worker) != own {
            lanes.push(lane.on_worker(worker));
        }
    }
    lanes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_asks_on_the_workers_the_session_moved_from_too() {
        let lane = Lane::resp2(9);
        // Never moved (or never wrote before moving): the client's lane alone, as always.
        assert_eq!(&wait_lanes(lane, 0, Some(1))[..], [lane]);
        assert_eq!(&wait_lanes(lane, 0, None)[..], [lane]);
        // Moved away from both 0 and 1, now on 1: its own lane covers worker 1's connections.
        assert_eq!(
            &wait_lanes(lane, 0b11, Some(1))[..],
            [lane, lane.on_worker(0)]
        );
        assert_eq!(
            &wait_lanes(lane, 0b11, Some(0))[..],
            [lane, lane.on_worker(1)]
        );
        // Off any worker (not how a moved session runs): every noted worker.
        assert_eq!(
            &wait_lanes(lane, 0b101, None)[..],
            [lane, lane.on_worker(0), lane.on_worker(2)]
        );
        // The highest worker a bit can name.
        let last = wait_lanes(lane, 1 << 63, Some(0));
        assert_eq!(&last[..], [lane, lane.on_worker(63)]);
        // A lane that already names its worker skips that one, wherever the WAIT runs.
        let pinned = lane.on_worker(2);
        assert_eq!(
            &wait_lanes(pinned, 0b101, Some(0))[..],
            [pinned, lane.on_worker(0)]
        );
    }
}
