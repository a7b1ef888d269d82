//! The cluster's shape: CRC16 hash slots, the immutable slot map, and the task that keeps it fresh.
//!
//! Readers get the current [`Topology`] snapshot without locking (`ArcSwap`); the refresher builds
//! a complete new snapshot and swaps it in at once, so nobody sees half an update. It never
//! adopts a map older than the current one (config epochs) and confirms surprising changes with a
//! second node first (`safety`).

mod change;
mod config;
mod migrating;
mod nodes;
mod parse;
mod refresh;
mod safety;
mod slot;
mod state;
mod topology;

pub use config::ClusterConfig;
pub use migrating::MigratingSlots;
pub use refresh::Refresher;
pub use slot::{key_slot, SLOT_COUNT};
pub use state::ClusterState;
pub use topology::{Shard, Topology};
