//! The delay line: hands items to their receivers at a given instant, with sub-millisecond
//! precision.
//!
//! Why not `tokio::time::sleep` per chunk: tokio's timer wheel has a 1 ms resolution (and
//! `epoll_wait` takes its timeout in milliseconds), so a 250 µs delay would come out as 1–2 ms.
//! Instead one OS thread keeps every pending item in a heap ordered by due time and sleeps on a
//! condition variable until the earliest one is due. Condvar timeouts overshoot by the kernel's
//! timer slack (50–100 µs on a busy box), so the thread aims that much early, learning the
//! overshoot as it goes, and yields the rest of the way. Items are then sent on a tokio
//! unbounded channel, which wakes the connection's writer task.
//!
//! Order and throughput: each direction of a connection computes its due times with [`due_at`],
//! which never goes backwards, and ties are broken by insertion order, so a direction's chunks
//! come out in the order they went in. Nothing waits for the previous chunk to be written: a
//! burst of chunks all come out one delay later, not one delay each.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedSender;

/// When a chunk read at `now` is due at the other end: one `delay` after it was read, but never
/// before `ready_at` + `delay` (the simulated TCP handshake: a real client could not have sent
/// before its SYN was answered) and never before the previous chunk of the same direction
/// (`last`), so the order holds even if the clock or `ready_at` would say otherwise.
pub fn due_at(now: Instant, ready_at: Instant, last: Option<Instant>, delay: Duration) -> Instant {
    let due = now.max(ready_at) + delay;
    match last {
        Some(last) => due.max(last),
        None => due,
    }
}

/// A handle on the delay thread; cheap to clone. The thread stops when the last handle is dropped.
pub struct DelayLine<T: Send + 'static> {
    shared: Arc<Shared<T>>,
    /// Only the handles count towards stopping the thread (the thread holds `shared` too).
    _handles: Arc<StopOnDrop<T>>,
}

impl<T: Send + 'static> Clone for DelayLine<T> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
            _handles: self._handles.clone(),
        }
    }
}

struct StopOnDrop<T>(Arc<Shared<T>>);

impl<T> Drop for StopOnDrop<T> {
    fn drop(&mut self) {
        lock(&self.0.state).stop = true;
        self.0.wake.notify_one();
    }
}

struct Shared<T> {
    state: Mutex<State<T>>,
    wake: Condvar,
}

struct State<T> {
    heap: BinaryHeap<Entry<T>>,
    seq: u64,
    stop: bool,
}

struct Entry<T> {
    due: Instant,
    seq: u64,
    item: T,
    to: UnboundedSender<T>,
}

// Min-heap on (due, seq): `BinaryHeap` is a max-heap, so the comparison is reversed.
impl<T> Ord for Entry<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        (other.due, other.seq).cmp(&(self.due, self.seq))
    }
}
impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> PartialEq for Entry<T> {
    fn eq(&self, other: &Self) -> bool {
        self.seq == other.seq
    }
}
impl<T> Eq for Entry<T> {}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere leaves the heap consistent (pushes and pops are single calls).
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<T: Send + 'static> DelayLine<T> {
    /// Starts the delay thread.
    pub fn start() -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                heap: BinaryHeap::new(),
                seq: 0,
                stop: false,
            }),
            wake: Condvar::new(),
        });
        let worker = shared.clone();
        thread::Builder::new()
            .name("delay-line".into())
            .spawn(move || run(&worker))?;
        Ok(Self {
            _handles: Arc::new(StopOnDrop(shared.clone())),
            shared,
        })
    }

    /// Sends `item` on `to` at `due` (at once if `due` has passed). A closed receiver drops it.
    pub fn push(&self, due: Instant, item: T, to: &UnboundedSender<T>) {
        let mut st = lock(&self.shared.state);
        let seq = st.seq;
        st.seq += 1;
        let earliest = st.heap.peek().is_none_or(|e| due < e.due);
        st.heap.push(Entry {
            due,
            seq,
            item,
            to: to.clone(),
        });
        drop(st);
        if earliest {
            self.shared.wake.notify_one();
        }
    }
}

/// The delay thread: sleep until the earliest entry is due, send everything due, repeat.
fn run<T>(shared: &Shared<T>) {
    // How late a condvar timeout fires, learned as an exponentially weighted average.
    let mut overshoot = Duration::from_micros(60);
    let mut due_now = Vec::new();
    loop {
        let mut st = lock(&shared.state);
        loop {
            if st.stop {
                return;
            }
            let Some(first) = st.heap.peek() else {
                st = shared.wake.wait(st).unwrap_or_else(PoisonError::into_inner);
                continue;
            };
            let now = Instant::now();
            if first.due <= now {
                break;
            }
            let left = first.due - now;
            if left > overshoot {
                let aim = left - overshoot;
                let (guard, res) = shared
                    .wake
                    .wait_timeout(st, aim)
                    .unwrap_or_else(PoisonError::into_inner);
                st = guard;
                if res.timed_out() {
                    let late = now.elapsed().saturating_sub(aim);
                    // 1/8 weight for the new sample, capped so one stall cannot make us spin long.
                    overshoot = (overshoot * 7 + late.min(Duration::from_micros(300))) / 8;
                }
            } else {
                // Less than one overshoot to go: yield (not sleep) the rest of the way.
                drop(st);
                thread::yield_now();
                st = lock(&shared.state);
            }
        }
        let now = Instant::now();
        while st.heap.peek().is_some_and(|e| e.due <= now) {
            if let Some(e) = st.heap.pop() {
                due_now.push(e);
            }
        }
        drop(st);
        for e in due_now.drain(..) {
            let _ = e.to.send(e.item);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::mpsc::unbounded_channel;

    const D: Duration = Duration::from_micros(250);

    #[test]
    fn due_is_one_delay_after_the_later_of_now_and_ready() {
        let t0 = Instant::now();
        let us = Duration::from_micros;
        assert_eq!(due_at(t0 + us(10), t0, None, D), t0 + us(260));
        // Before the simulated handshake is over: the handshake end counts.
        assert_eq!(due_at(t0, t0 + us(500), None, D), t0 + us(750));
        // Never before the previous chunk of the same direction.
        assert_eq!(due_at(t0, t0, Some(t0 + us(900)), D), t0 + us(900));
    }

    #[tokio::test]
    async fn items_come_out_after_the_delay_in_order_without_serialising() {
        let line = DelayLine::start().expect("thread");
        let (tx, mut rx) = unbounded_channel();
        let start = Instant::now();
        // A burst of 1000 chunks with the same delay: one delay for all, not 1000 delays.
        let mut last = None;
        for i in 0..1000u32 {
            let due = due_at(Instant::now(), start, last, D);
            last = Some(due);
            line.push(due, (i, due), &tx);
        }
        for want in 0..1000u32 {
            let (i, due) = rx.recv().await.expect("item");
            assert_eq!(i, want, "order");
            assert!(Instant::now() >= due, "item {i} came out early");
        }
        let took = start.elapsed();
        assert!(took >= D, "{took:?}");
        // 1000 × 250 µs would be 250 ms; generous bound for a loaded CI box.
        assert!(took < Duration::from_millis(100), "burst took {took:?}");
    }

    #[tokio::test]
    async fn an_earlier_item_pushed_later_comes_out_first() {
        let line = DelayLine::start().expect("thread");
        let (tx, mut rx) = unbounded_channel();
        let now = Instant::now();
        line.push(now + Duration::from_millis(30), "late", &tx);
        line.push(now + Duration::from_millis(1), "early", &tx);
        assert_eq!(rx.recv().await, Some("early"));
        assert_eq!(rx.recv().await, Some("late"));
        assert!(now.elapsed() >= Duration::from_millis(30));
    }
}
