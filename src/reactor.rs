//! How other threads reach a worker's event loop (`downstream::event_loop`): a `Remote` to
//! wake one thing the loop owns (by its token) or to post it a message, and a [`std::task::Waker`]
//! for futures the loop polls. A wake from the loop's own thread is a push onto a thread-local
//! list, with no lock and no system call; from any other thread it takes the remote's lock and,
//! when the loop may be asleep, writes its eventfd once.
//!
//! Ordering: `asleep` is set with `SeqCst` before the loop looks at the inbound lists under the
//! lock, and a remote wake pushes under the same lock before it swaps `asleep` back; either the
//! loop sees the pushed token, or the waker sees `asleep` and writes the eventfd. Docs:
//! docs/decisions/0001-one-loop-per-worker.md.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Wake, Waker};

/// A message for a loop from another thread (rare: connects, sessions that move). Each
/// receiver downcasts the kinds it knows.
pub(crate) type Mail = Box<dyn Any + Send>;

/// The token of the eventfd that wakes a sleeping loop.
pub(crate) const WAKER_TOKEN: mio::Token = mio::Token(usize::MAX);

thread_local! {
    /// The loop running on this thread (its index), if one is.
    static LOOP: Cell<Option<usize>> = const { Cell::new(None) };
    /// Tokens woken on this thread since the loop last looked.
    static WOKEN_HERE: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// Marks the calling thread as the one running loop `index`.
pub(crate) fn enter_loop(index: usize) {
    LOOP.with(|l| l.set(Some(index)));
}

/// Moves the tokens woken on this thread into `into`.
pub(crate) fn take_woken_here(into: &mut Vec<u64>) {
    WOKEN_HERE.with(|woken| into.append(&mut woken.borrow_mut()));
}

/// One loop's door for other threads.
pub(crate) struct Remote {
    /// The loop's worker index; compared with the thread-local `LOOP` to tell a local wake.
    index: usize,
    /// The eventfd registered under [`WAKER_TOKEN`]; written only when the loop may be asleep.
    waker: mio::Waker,
    /// What other threads have sent since the loop last looked.
    inner: Mutex<Inbound>,
    /// The loop is (about to be) asleep in `epoll_wait`: a wake must write the eventfd.
    asleep: AtomicBool,
}

/// Filled by other threads, emptied by the loop in [`Remote::awake`].
#[derive(Default)]
struct Inbound {
    /// Tokens to wake, in arrival order; a token may appear twice.
    woken: Vec<u64>,
    /// Messages in the order posted.
    mail: Vec<Mail>,
}

impl Remote {
    /// The door of loop `index`, whose sleep `registry` can interrupt.
    pub(crate) fn new(index: usize, registry: &mio::Registry) -> std::io::Result<Remote> {
        Ok(Remote {
            index,
            waker: mio::Waker::new(registry, WAKER_TOKEN)?,
            inner: Mutex::new(Inbound::default()),
            asleep: AtomicBool::new(false),
        })
    }

    /// The loop's index among the workers.
    pub(crate) fn index(&self) -> usize {
        self.index
    }

    /// Nothing panics while holding the lock, so a poisoned one is still consistent.
    fn lock(&self) -> MutexGuard<'_, Inbound> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes whatever `token` names in the loop.
    pub(crate) fn wake(&self, token: u64) {
        if LOOP.with(Cell::get) == Some(self.index) {
            WOKEN_HERE.with(|woken| woken.borrow_mut().push(token));
            return;
        }
        self.lock().woken.push(token);
        self.rouse();
    }

    /// Posts `mail` to the loop.
    pub(crate) fn post(&self, mail: Mail) {
        self.lock().mail.push(mail);
        if LOOP.with(Cell::get) != Some(self.index) {
            self.rouse();
        } else {
            // From the loop itself: it looks at its mail before it sleeps again.
            self.asleep.store(false, Ordering::Relaxed);
        }
    }

    /// Writes the eventfd at most once per sleep: the swap clears `asleep`, so racing wakers skip
    /// it. A failed write is logged; the loop then sleeps until its next event or timeout.
    fn rouse(&self) {
        if self.asleep.swap(false, Ordering::AcqRel) {
            if let Err(error) = self.waker.wake() {
                tracing::error!(%error, loop_index = self.index, "cannot wake a worker's event loop");
            }
        }
    }

    /// Called by the loop before it sleeps: whether anything arrived (then it must not sleep).
    pub(crate) fn going_to_sleep(&self) -> bool {
        // A quiet moment to give back what another thread freed in this loop's pages since it
        // last looked (a slot map's reply, read here and parsed and dropped by the refresher):
        // an idle loop allocates nothing, so without this those pages stay resident. One atomic
        // load when nothing large was freed.
        crate::memory::give_back(false);
        self.asleep.store(true, Ordering::SeqCst);
        let inbound = self.lock();
        let any = !inbound.woken.is_empty() || !inbound.mail.is_empty();
        drop(inbound);
        if any {
            self.asleep.store(false, Ordering::Relaxed);
        }
        any
    }

    /// Called by the loop after waking: it is awake; what arrived goes into the lists given.
    pub(crate) fn awake(&self, woken: &mut Vec<u64>, mail: &mut Vec<Mail>) {
        self.asleep.store(false, Ordering::Relaxed);
        let mut inbound = self.lock();
        woken.append(&mut inbound.woken);
        mail.append(&mut inbound.mail);
    }
}

/// A waker for what the loop polls on behalf of `token` (a client's futures, a connection's
/// queue), made once and kept: waking it again before the loop looked costs one atomic swap.
pub(crate) struct LoopWaker {
    /// The state every clone of `waker` shares, kept to rearm it.
    shared: Arc<TokenWaker>,
    /// The waker handed to futures polled by the loop.
    waker: Waker,
}

impl LoopWaker {
    /// Made once per token and kept, so polling never allocates a waker.
    pub(crate) fn new(remote: &Arc<Remote>, token: u64) -> LoopWaker {
        let shared = Arc::new(TokenWaker {
            remote: remote.clone(),
            token,
            queued: AtomicBool::new(false),
        });
        LoopWaker {
            waker: Waker::from(shared.clone()),
            shared,
        }
    }

    /// The waker to hand to what is polled.
    pub(crate) fn waker(&self) -> &Waker {
        &self.waker
    }

    /// Lets the waker wake again: the loop calls it before polling what it wakes. A wake
    /// racing with that poll is kept, at worst costing one extra poll.
    pub(crate) fn rearm(&self) {
        self.shared.queued.store(false, Ordering::Release);
    }
}

/// The `Wake` behind a `LoopWaker`: wakes `token` through `remote`, once until rearmed.
struct TokenWaker {
    /// The loop's door, where the token is posted.
    remote: Arc<Remote>,
    /// What the loop is told woke.
    token: u64,
    /// Already woken and not yet looked at: further wakes are free.
    queued: AtomicBool,
}

impl Wake for TokenWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !self.queued.swap(true, Ordering::AcqRel) {
            self.remote.wake(self.token);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wakes_from_another_thread_reach_the_loop_and_rouse_it() {
        let poll = mio::Poll::new().expect("poll");
        let remote = Arc::new(Remote::new(3, poll.registry()).expect("remote"));
        assert!(!remote.going_to_sleep(), "nothing yet");
        let other = remote.clone();
        std::thread::spawn(move || {
            other.wake(7);
            other.post(Box::new(42u32));
        })
        .join()
        .expect("thread");
        let (mut woken, mut mail) = (Vec::new(), Vec::new());
        remote.awake(&mut woken, &mut mail);
        assert_eq!(woken, [7]);
        assert_eq!(mail.len(), 1);
        assert_eq!(
            mail.pop()
                .and_then(|m| m.downcast::<u32>().ok())
                .map(|b| *b),
            Some(42)
        );
    }

    #[test]
    fn wakes_on_the_loops_own_thread_stay_on_it() {
        let poll = mio::Poll::new().expect("poll");
        let remote = Arc::new(Remote::new(0, poll.registry()).expect("remote"));
        std::thread::spawn(move || {
            enter_loop(0);
            let waker = LoopWaker::new(&remote, 9);
            waker.waker().wake_by_ref();
            waker.waker().wake_by_ref(); // already queued: no second entry
            let mut here = Vec::new();
            take_woken_here(&mut here);
            assert_eq!(here, [9]);
            let (mut woken, mut mail) = (Vec::new(), Vec::new());
            remote.awake(&mut woken, &mut mail);
            assert!(
                woken.is_empty(),
                "no lock taken for a wake from the loop itself"
            );
            waker.rearm();
            waker.waker().wake_by_ref();
            take_woken_here(&mut here);
            assert_eq!(here, [9, 9], "woken again once rearmed");
        })
        .join()
        .expect("thread");
    }
}
