//! The cluster's shape: CRC16 hash slots, the immutable slot map, and the task that keeps it fresh.
//!
//! Readers get the current [`Topology`] snapshot without locking (`ArcSwap`); the refresher builds
//! a complete new snapshot and swaps it in at once, so nobody sees half an update.

mod config;
mod parse;
mod refresh;
mod slot;
mod topology;

pub use config::ClusterConfig;
pub use refresh::{ClusterState, Refresher};
pub use slot::{key_slot, SLOT_COUNT};
pub use topology::{Shard, Topology};
