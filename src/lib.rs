//! redcar: a Redis Cluster sidecar proxy.
//!
//! # Layout
//! Dependencies point one way, top to bottom (tests/layering.rs checks it):
//! - [`reactor`]: how other threads wake a worker's event loop and hand it mail (mio, no tokio).
//! - [`protocol`]: RESP frames as zero-copy views over `Bytes`; streaming parse with limits; encode.
//! - [`commands`]: the one command table (arity, flags, key specs, how redcar serves it).
//! - [`cluster`]: CRC16 slots, the immutable slot map, topology discovery and refresh.
//! - [`upstream`]: per-node shared, pipelined connections with FIFO reply matching.
//! - [`router`]: slot → node, MOVED/ASK, retries within the command deadline; key-prefix routes.
//! - [`backends`]: named backends (cluster, standalone, sentinel), each with its topology source,
//!   and the route table built over them.
//! - [`near_cache`]: chosen reads served from memory, kept correct by the nodes' invalidations.
//! - [`downstream`]: listeners and client sessions with in-order replies.
//! - [`metrics`]: the Prometheus registry (one group of series per producing module), the slow log
//!   and the event log.
//! - [`hotkeys`]: the hottest keys (sampled, Space-Saving over a sliding window) and the biggest
//!   requests and replies, in memory fixed at start-up.
//! - [`admin`]: HTTP health, readiness, metrics, topology, clients, slow log, config.
//! - [`auth`]: AUTH against `--requirepass` or configured users, and per-user command rules.
//! - [`values`]: durations, sizes, secrets and PEM loading, the value types every layer uses.
//! - [`workers`]: the threading model and the per-core worker layout.
//! - [`memory`]: freed memory given back to the system after a large value went through.
//! - [`sentinel`]: a Sentinel-managed primary published as a one-shard map.
//! - [`config`]: the typed configuration tree, CLI and YAML, validated at start-up; it only
//!   assembles the modules' own `*Config` types (only [`app`], [`envoy`] and `main` import it).
//! - [`envoy`]: `redcar config convert-envoy`, Envoy redis_proxy configs to redcar's.
//! - [`top`]: `redcar top`, live rates from a running redcar's admin API.
//! - [`app`]: wiring and graceful shutdown.
//! - [`doctor`]: `redcar doctor`, a cluster configuration and latency diagnosis (a tool, not on the proxy's path).

pub mod admin;
pub mod app;
pub mod auth;
pub mod backends;
pub mod cluster;
pub mod commands;
pub mod config;
pub mod doctor;
pub mod downstream;
pub mod envoy;
pub mod hotkeys;
pub mod memory;
pub mod metrics;
pub mod near_cache;
pub mod protocol;
pub mod reactor;
pub mod router;
pub mod sentinel;
pub mod top;
pub mod upstream;
pub mod values;
pub mod workers;
