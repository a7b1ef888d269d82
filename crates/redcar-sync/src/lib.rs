//! The channels that carry redcar's commands to node connections and their replies back, each
//! made for one traffic pattern so that the steady state allocates nothing and takes as few
//! locks as it can:
//!
//! - [`queue`]: client sessions → one node connection (many senders, one receiver, unbounded,
//!   FIFO; the receiver swaps the whole queue out under one lock).
//! - [`inbox`]: every node connection → one client session (each command a number; a read's
//!   replies handed over under one lock; the session woken only for the reply it waits for).
//! - [`reply_slot`]: a one-shot reply channel whose cells are pooled per thread, for callers
//!   that await a reply as a future (fan-outs, splits, retries).
//!
//! They know nothing of Redis or of the proxy: the item and reply types are parameters.
//!
//! # What holds
//!
//! A reply (or the news that none will come: [`Closed`]) reaches its receiver exactly once, a
//! waiting receiver is always woken for it, and nothing is lost or delivered twice when either
//! end goes away at any moment. `tests/loom_*.rs` check this for every interleaving of the
//! threads involved with [loom](https://docs.rs/loom): `RUSTFLAGS="--cfg loom" cargo test -p
//! redcar-sync --release`. That build swaps the `std::sync` types for loom's (`sync` below), so
//! the code under test is the code that ships.
#![warn(missing_docs, unreachable_pub)]

pub mod inbox;
pub mod queue;
pub mod reply_slot;

pub use reply_slot::Closed;

/// `std::sync` normally; loom's model-checked twins under `--cfg loom`. Public only for
/// [`reply_pool!`](crate::reply_pool), whose expansion names these types.
#[doc(hidden)]
pub mod sync {
    #[cfg(loom)]
    pub use loom::sync::{atomic, Arc, Mutex, MutexGuard};
    #[cfg(not(loom))]
    pub use std::sync::{atomic, Arc, Mutex, MutexGuard};

    #[cfg(loom)]
    pub use loom::{lazy_static, thread_local};
}
