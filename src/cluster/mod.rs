//! The cluster's shape: CRC16 hash slots, the immutable slot map, and the task that keeps it fresh.
//!
//! Readers get the current `Topology` snapshot without locking (`ArcSwap`); the refresher builds
//! a complete new snapshot and swaps it in at once, so nobody sees half an update. It never
//! adopts a map older than the current one (config epochs) and confirms surprising changes with a
//! second node first (`safety`).
#![warn(unreachable_pub, missing_docs)]

mod change;
mod change_check;
mod config;
mod metrics;
mod migrating;
mod nodes;
mod parse;
mod refresh;
mod safety;
mod shards;
mod slot;
mod state;
mod topology;

pub(crate) use config::ClusterConfig;
pub(crate) use metrics::TopologyMetrics;
pub(crate) use migrating::MigratingSlots;
pub(crate) use refresh::Refresher;
pub use slot::key_slot;
pub(crate) use slot::SLOT_COUNT;
pub(crate) use state::ClusterState;
pub(crate) use topology::{Shard, Topology};
