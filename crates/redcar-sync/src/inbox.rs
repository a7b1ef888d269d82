//! One client session's replies from every node connection, handed over a read at a time
//! instead of one channel per command.
//!
//! A [`reply_slot`](crate::reply_slot) channel costs about a dozen atomic operations per command
//! (a reference count, the slot's mutex on both sides, the pool's bookkeeping) and was the largest
//! piece of redcar's own code in the `-P 16` profile (13% of its samples). Here a session owns one
//! [`Inbox`]; each command it forwards carries a [`Delivery`] (the inbox and a sequence number:
//! one reference count). A node connection hands over all the replies of one read that belong
//! to the same session under one lock and wakes the session only if it delivered the reply the
//! session is waiting for; the session takes everything that arrived under one lock per turn.
//! Callers that are not a session (fan-outs, retries, scripts) keep using reply slots.
//!
//! What holds: numbers are handed out in order by [`Inbox::reserve`] and each is filed at most
//! once: a reply for a number already taken or forgotten, or below the oldest entry, is dropped
//! when filed, so a late reply can never be mistaken for a newer command's. The session is woken
//! only for the number it last asked for, by whichever delivery brings it, and the wake happens
//! after the lock is released, so the woken session never contends with the deliverer. A
//! [`Delivery`] dropped without delivering (its connection task ended) files `Closed` for its
//! number, so a session never waits forever on a reply that cannot come. Checked under loom
//! (crates/redcar-sync/tests/loom_inbox.rs).

use std::collections::VecDeque;
use std::task::{Context, Poll, Waker};

use crate::sync::atomic::{AtomicBool, Ordering};
use crate::sync::{Arc, Mutex, MutexGuard};
use crate::Closed;

/// What a delivery carries: the node's reply `T`, or `Closed` when the connection task dropped
/// the command without one (it ended).
pub type Delivered<T> = Result<T, Closed>;

/// The part node connections write to.
pub struct Shared<T> {
    /// Set under the lock when something arrived; lets the session skip the lock otherwise.
    has_mail: AtomicBool,
    /// The replies that arrived since the session last looked, and who to wake.
    mail: Mutex<Mail<T>>,
}

/// What the node connections hand over, under the lock.
struct Mail<T> {
    /// Replies not yet filed by the session, in the order they arrived (any order of numbers).
    arrived: Vec<(u64, Delivered<T>)>,
    /// The session, waiting for the reply numbered `wanted`.
    waker: Option<Waker>,
    /// The number the session waits for; cleared when that reply arrives, so later deliveries do
    /// not wake it again.
    wanted: Option<u64>,
}

impl<T> Default for Shared<T> {
    fn default() -> Self {
        Shared {
            has_mail: AtomicBool::new(false),
            mail: Mutex::new(Mail {
                arrived: Vec::new(),
                waker: None,
                wanted: None,
            }),
        }
    }
}

impl<T> Shared<T> {
    /// Nothing panics while holding the lock, so a poisoned one is still consistent.
    fn lock(&self) -> MutexGuard<'_, Mail<T>> {
        self.mail.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands over `replies` (for this inbox) under one lock; wakes the session after unlocking
    /// if one of them is the reply it waits for.
    pub fn deliver(&self, replies: impl Iterator<Item = (u64, Delivered<T>)>) {
        let waker = {
            let mut mail = self.lock();
            let mut wake = false;
            for (seq, delivered) in replies {
                wake |= mail.wanted == Some(seq);
                mail.arrived.push((seq, delivered));
            }
            self.has_mail.store(true, Ordering::Release);
            if wake {
                mail.wanted = None;
                mail.waker.take()
            } else {
                None
            }
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// Where one command's reply goes: the session's inbox and the command's number in it.
/// Dropped without [`take`](Self::take) (its connection task ended), it tells the session so.
pub struct Delivery<T> {
    /// The inbox; `None` once delivered or taken, so the drop reports nothing more.
    inbox: Option<Arc<Shared<T>>>,
    /// The command's number, unique within its inbox.
    seq: u64,
}

impl<T> Delivery<T> {
    /// This reply's number in its inbox.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The inbox and number, for a caller that delivers a batch itself (see
    /// [`Shared::deliver`]); the drop no longer reports anything.
    pub fn take(mut self) -> Option<(Arc<Shared<T>>, u64)> {
        self.inbox.take().map(|inbox| (inbox, self.seq))
    }

    /// Delivers one outcome on its own.
    pub fn send(self, outcome: T) {
        if let Some((inbox, seq)) = self.take() {
            inbox.deliver(std::iter::once((seq, Ok(outcome))));
        }
    }
}

impl<T> Drop for Delivery<T> {
    fn drop(&mut self) {
        if let Some(inbox) = self.inbox.take() {
            inbox.deliver(std::iter::once((self.seq, Err(Closed))));
        }
    }
}

/// A reply's place in the session's view of the inbox.
enum Entry<T> {
    /// Reserved; no reply yet.
    Waiting,
    /// The reply, not yet taken by the session.
    Arrived(Delivered<T>),
    /// Given to its command, or its command gave up: whatever comes later is dropped.
    Taken,
}

/// The session's end: numbers the commands it forwards and keeps their replies until asked.
pub struct Inbox<T> {
    /// Shared with every `Delivery` in flight; the only part other threads touch.
    shared: Arc<Shared<T>>,
    /// The session's own view, touched only by the session (no lock).
    filed: Filed<T>,
}

/// The replies the session has taken out of the shared list, by number.
struct Filed<T> {
    /// The number of `entries[0]`; entries before it are all taken.
    base: u64,
    /// One entry per number from `base` on, in order.
    entries: VecDeque<Entry<T>>,
    /// Swapped with the shared list on each collection, so both keep their capacity.
    spare: Vec<(u64, Delivered<T>)>,
}

impl<T> Default for Inbox<T> {
    fn default() -> Self {
        Inbox {
            shared: Arc::new(Shared::default()),
            filed: Filed {
                base: 0,
                entries: VecDeque::new(),
                spare: Vec::new(),
            },
        }
    }
}

impl<T> Inbox<T> {
    /// A number for one more command, and where its reply goes.
    pub fn reserve(&mut self) -> Delivery<T> {
        let filed = &mut self.filed;
        let seq = filed.base + filed.entries.len() as u64;
        filed.entries.push_back(Entry::Waiting);
        Delivery {
            inbox: Some(self.shared.clone()),
            seq,
        }
    }

    /// The reply numbered `seq`, once it is here; otherwise the session is woken when it comes.
    pub fn poll_reply(&mut self, seq: u64, cx: &mut Context<'_>) -> Poll<Delivered<T>> {
        if let Some(delivered) = self.filed.take_arrived(seq) {
            return Poll::Ready(delivered);
        }
        let mut mail = self.shared.lock();
        self.filed.file(&self.shared.has_mail, &mut mail);
        if let Some(delivered) = self.filed.take_arrived(seq) {
            return Poll::Ready(delivered);
        }
        mail.wanted = Some(seq);
        match &mail.waker {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            _ => mail.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// The reply numbered `seq` if it is here now (no waker is kept).
    pub fn try_reply(&mut self, seq: u64) -> Option<Delivered<T>> {
        if let Some(delivered) = self.filed.take_arrived(seq) {
            return Some(delivered);
        }
        if !self.shared.has_mail.load(Ordering::Acquire) {
            return None;
        }
        let mut mail = self.shared.lock();
        self.filed.file(&self.shared.has_mail, &mut mail);
        drop(mail);
        self.filed.take_arrived(seq)
    }

    /// The command numbered `seq` no longer wants its reply (it gave up at its deadline).
    pub fn forget(&mut self, seq: u64) {
        if let Some(entry) = self.filed.entry(seq) {
            *entry = Entry::Taken;
        }
        self.filed.trim();
    }

    /// Commands whose replies are still expected or not yet taken.
    pub fn outstanding(&self) -> usize {
        self.filed.entries.len()
    }

    /// No command is waiting for a reply here, and none will be filed: a late reply to a
    /// command that gave up has a number below every entry, so a new inbox may replace this one.
    pub fn is_empty(&self) -> bool {
        self.filed.entries.is_empty()
    }
}

impl<T> Filed<T> {
    /// The entry for `seq`, if it is not below `base` nor past the last reserved number.
    fn entry(&mut self, seq: u64) -> Option<&mut Entry<T>> {
        let index = usize::try_from(seq.checked_sub(self.base)?).ok()?;
        self.entries.get_mut(index)
    }

    /// Takes the reply for `seq` if it arrived (it becomes `Taken`) and trims the front.
    fn take_arrived(&mut self, seq: u64) -> Option<Delivered<T>> {
        let entry = self.entry(seq)?;
        if !matches!(entry, Entry::Arrived(_)) {
            return None;
        }
        let Entry::Arrived(delivered) = std::mem::replace(entry, Entry::Taken) else {
            return None;
        };
        self.trim();
        Some(delivered)
    }

    /// Moves everything that arrived into `entries` (called with the lock held).
    fn file(&mut self, has_mail: &AtomicBool, mail: &mut Mail<T>) {
        has_mail.store(false, Ordering::Relaxed);
        std::mem::swap(&mut mail.arrived, &mut self.spare);
        let mut spare = std::mem::take(&mut self.spare);
        for (seq, delivered) in spare.drain(..) {
            // Late ones (their command gave up) and unknown numbers are dropped.
            if let Some(entry @ Entry::Waiting) = self.entry(seq) {
                *entry = Entry::Arrived(delivered);
            }
        }
        self.spare = spare;
    }

    /// Drops taken entries from the front.
    fn trim(&mut self) {
        while matches!(self.entries.front(), Some(Entry::Taken)) {
            self.entries.pop_front();
            self.base += 1;
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::task::Wake;

    type Outcome = Result<&'static str, ()>;

    struct Count(std::sync::atomic::AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counting() -> (Arc<Count>, Waker) {
        let count = Arc::new(Count(0.into()));
        (count.clone(), Waker::from(count))
    }

    fn wakes(count: &Count) -> usize {
        count.0.load(Ordering::SeqCst)
    }

    fn reply(text: &'static str) -> Outcome {
        Ok(text)
    }

    fn bytes(delivered: Delivered<Outcome>) -> &'static str {
        delivered.expect("not closed").expect("a reply")
    }

    #[test]
    fn replies_arriving_in_any_order_are_found_by_number() {
        let mut inbox = Inbox::<Outcome>::default();
        let (_, waker) = counting();
        let mut cx = Context::from_waker(&waker);
        let first = inbox.reserve();
        let second = inbox.reserve();
        second.send(reply("+2\r\n"));
        assert!(inbox.poll_reply(0, &mut cx).is_pending());
        first.send(reply("+1\r\n"));
        let Poll::Ready(one) = inbox.poll_reply(0, &mut cx) else {
            panic!("first reply not found");
        };
        assert_eq!(bytes(one), "+1\r\n");
        assert_eq!(bytes(inbox.try_reply(1).expect("second")), "+2\r\n");
        assert_eq!(inbox.outstanding(), 0, "taken entries are trimmed");
    }

    #[test]
    fn the_session_is_woken_only_for_the_reply_it_waits_for() {
        let mut inbox = Inbox::<Outcome>::default();
        let (count, waker) = counting();
        let mut cx = Context::from_waker(&waker);
        let first = inbox.reserve();
        let second = inbox.reserve();
        assert!(inbox.poll_reply(0, &mut cx).is_pending());
        second.send(reply("+2\r\n"));
        assert_eq!(wakes(&count), 0, "woken for a reply it does not wait for");
        first.send(reply("+1\r\n"));
        assert_eq!(wakes(&count), 1);
    }

    #[test]
    fn a_batch_is_handed_over_at_once() {
        let mut inbox = Inbox::<Outcome>::default();
        let (count, waker) = counting();
        let mut cx = Context::from_waker(&waker);
        let deliveries: Vec<_> = (0..3).map(|_| inbox.reserve()).collect();
        assert!(inbox.poll_reply(0, &mut cx).is_pending());
        let taken: Vec<_> = deliveries.into_iter().filter_map(Delivery::take).collect();
        let shared = taken[0].0.clone();
        shared.deliver(taken.into_iter().map(|(_, seq)| (seq, Ok(reply("+x\r\n")))));
        assert_eq!(wakes(&count), 1);
        for seq in 0..3 {
            assert!(inbox.try_reply(seq).is_some(), "reply {seq}");
        }
    }

    #[test]
    fn a_dropped_delivery_reports_closed() {
        let mut inbox = Inbox::<Outcome>::default();
        drop(inbox.reserve());
        assert_eq!(inbox.try_reply(0).map(|d| d.is_err()), Some(true));
    }

    #[test]
    fn a_forgotten_reply_is_dropped_when_it_comes_late() {
        let mut inbox = Inbox::<Outcome>::default();
        let late = inbox.reserve();
        let next = inbox.reserve();
        inbox.forget(0);
        late.send(reply("+late\r\n"));
        next.send(reply("+next\r\n"));
        assert!(inbox.try_reply(0).is_none());
        assert_eq!(bytes(inbox.try_reply(1).expect("next")), "+next\r\n");
        assert_eq!(inbox.outstanding(), 0);
        // Numbers keep growing after the trim.
        let third = inbox.reserve();
        third.send(reply("+3\r\n"));
        assert_eq!(bytes(inbox.try_reply(2).expect("third")), "+3\r\n");
    }
}
