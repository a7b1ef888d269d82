//! Waiting for a split's batches: the client's session is woken once, when the last batch's
//! reply is in (or at the deadline), not once per batch.
//!
//! What holds: the gather's count is raised before each batch's reply is first polled and lowered
//! exactly once per batch (at that poll if the reply was in, else by the reply's wake), plus one
//! count held while registering, so the session is woken exactly once and never before every batch
//! has either answered or the deadline passed. A gather is reused only when nothing else holds it
//! (`Arc::get_mut`), so a late reply's waker can never count into a later split's gather.

use std::cell::RefCell;
use std::future::{poll_fn, Future};
use std::ops::Range;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;
use smallvec::SmallVec;
use tokio::time::{sleep_until, Instant, Sleep};

use crate::router::forward::Outcome;
use crate::upstream::{Node, Reply};

/// The parts queued on one node together.
pub(super) struct Batch {
    /// The node the batch went to: where a part that asks for more (a redirect, a retry) is
    /// reported from.
    pub(super) node: Arc<Node>,
    /// The batch's one reply, carrying every part's frame back to back.
    pub(super) reply: Reply,
    /// The batch's parts, in the order sent, as a range of the split's sending order.
    pub(super) parts: Range<usize>,
}

/// Wakes the task waiting for a split's batches once, when the last of them is in, rather than
/// once per batch: each wake is a whole turn of the client's session.
struct Gather {
    /// Batches not in yet, plus one while the waiting task is still registering them.
    pending: AtomicUsize,
    /// The session's task, woken once the count reaches zero.
    task: AtomicWaker,
}

thread_local! {
    /// Gathers whose split finished, for this thread's next splits: none is allocated per split
    /// in the steady state.
    static GATHERS: RefCell<Vec<Arc<Gather>>> = const { RefCell::new(Vec::new()) };
}

/// Gathers a thread keeps for reuse.
///
/// Past this many pooled gathers a finished one is dropped, so a burst of splits does not keep
/// memory for good.
const POOLED_GATHERS: usize = 64;

impl Gather {
    /// A reset gather from this thread's pool, or a new one.
    fn take() -> Arc<Gather> {
        let pooled = GATHERS
            .try_with(|pool| pool.borrow_mut().pop())
            .ok()
            .flatten();
        pooled.unwrap_or_else(|| {
            Arc::new(Gather {
                pending: AtomicUsize::new(1),
                task: AtomicWaker::new(),
            })
        })
    }

    /// Resets `gather` and parks it for reuse, unless something still holds it: a reply still
    /// out at the deadline keeps its waker, and a reply may still be inside `wake` on another
    /// thread.
    fn give_back(mut gather: Arc<Gather>) {
        let Some(fresh) = Arc::get_mut(&mut gather) else {
            return;
        };
        *fresh.pending.get_mut() = 1;
        drop(fresh.task.take());
        let _ = GATHERS.try_with(|pool| {
            let mut pool = pool.borrow_mut();
            if pool.len() < POOLED_GATHERS {
                pool.push(gather);
            }
        });
    }
}

impl Wake for Gather {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    /// Counts one batch in; the last one wakes the session. Safe from any thread: the count is
    /// atomic and the waker is an `AtomicWaker`.
    fn wake_by_ref(self: &Arc<Self>) {
        if self.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.task.wake();
        }
    }
}

/// Each batch's outcome once all are in, or at `deadline` (`None`: a batch still out then).
/// Every batch's reply is polled once with a [`Gather`] waker, so the task is woken once, by the
/// last reply (or by the deadline); the deadline's timer is armed only if a reply is still out
/// after that first look.
pub(super) async fn gather(
    batches: &mut [Batch],
    deadline: Instant,
) -> SmallVec<[Option<Outcome>; 4]> {
    let mut outcomes: SmallVec<[Option<Outcome>; 4]> = batches.iter().map(|_| None).collect();
    if batches.is_empty() {
        return outcomes;
    }
    let gather = Gather::take();
    let waker = Waker::from(gather.clone());
    let mut registered = false;
    let mut timer = pin!(None::<Sleep>);
    poll_fn(|cx| {
        gather.task.register(cx.waker());
        let mut batch_cx = Context::from_waker(&waker);
        if !registered {
            registered = true;
            for (batch, outcome) in batches.iter_mut().zip(outcomes.iter_mut()) {
                // Counted before the poll: the reply may come (and wake) on another thread
                // right after it.
                gather.pending.fetch_add(1, Ordering::AcqRel);
                if let Poll::Ready(ready) = Pin::new(&mut batch.reply).poll(&mut batch_cx) {
                    *outcome = Some(ready);
                    gather.pending.fetch_sub(1, Ordering::AcqRel);
                }
            }
            // Drops the registering count; zero: every reply was in already.
            if gather.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
                return Poll::Ready(());
            }
        } else if gather.pending.load(Ordering::Acquire) == 0 {
            collect(batches, &mut outcomes, &mut batch_cx);
            return Poll::Ready(());
        }
        if timer.is_none() {
            timer.set(Some(sleep_until(deadline)));
        }
        match timer.as_mut().as_pin_mut().map(|timer| timer.poll(cx)) {
            Some(Poll::Ready(())) => {
                // Past the deadline: whatever is in counts; the rest timed out.
                collect(batches, &mut outcomes, &mut batch_cx);
                Poll::Ready(())
            }
            _ => Poll::Pending,
        }
    })
    .await;
    drop(waker);
    Gather::give_back(gather);
    outcomes
}

/// Takes the replies that are in. A reply is polled again only once it has woken the
/// [`Gather`] (or at the deadline, when a later wake no longer matters): each batch wakes it
/// exactly once.
///
/// `cx` carries the gather's waker, so polling a reply here does not re-register the session's own
/// waker with it.
fn collect(batches: &mut [Batch], outcomes: &mut [Option<Outcome>], cx: &mut Context<'_>) {
    for (batch, outcome) in batches.iter_mut().zip(outcomes) {
        if outcome.is_none() {
            if let Poll::Ready(ready) = Pin::new(&mut batch.reply).poll(cx) {
                *outcome = Some(ready);
            }
        }
    }
}
