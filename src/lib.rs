//! redcar: a Redis Cluster sidecar proxy.
//!
//! # Layout
//! Dependencies point one way, top to bottom:
//! - [`protocol`]: RESP frames as zero-copy views over `Bytes`; streaming parse with limits; encode.
//! - [`commands`]: the one command table (arity, flags, key specs, how redcar serves it).
//! - [`cluster`]: CRC16 slots, the immutable slot map, topology discovery and refresh.
//! - [`upstream`]: per-node shared, pipelined connections with FIFO reply matching.
//! - [`router`]: slot → node, MOVED/ASK, retries within the command deadline.
//! - [`downstream`]: listeners and client sessions with in-order replies.
//! - [`admin`]: HTTP health and readiness.
//! - [`config`]: the typed configuration tree, CLI and YAML, validated at start-up.
//! - [`app`]: wiring and graceful shutdown.

pub mod admin;
pub mod app;
pub mod cluster;
pub mod commands;
pub mod config;
pub mod downstream;
pub mod protocol;
pub mod router;
pub mod upstream;
