//! redcar: a Redis Cluster sidecar proxy.
//!
//! # Layout
//! Dependencies point one way, top to bottom:
//! - [`protocol`]: RESP frames as zero-copy views over `Bytes`; streaming parse with limits; encode.
//! - [`commands`]: the one command table (arity, flags, key specs, how redcar serves it).
//! - [`cluster`]: CRC16 slots, the immutable slot map, topology discovery and refresh.
//! - [`upstream`]: per-node shared, pipelined connections with FIFO reply matching.
//! - [`router`]: slot → node, MOVED/ASK, retries within the command deadline; key-prefix routes.
//! - [`backends`]: named backends (cluster, standalone, sentinel), each with its topology source,
//!   and the route table built over them.
//! - [`downstream`]: listeners and client sessions with in-order replies.
//! - [`metrics`]: the Prometheus registry and the slow log.
//! - [`admin`]: HTTP health, readiness, metrics, topology, clients, slow log, config.
//! - [`auth`]: AUTH against `--requirepass` or configured users, and per-user command rules.
//! - [`config`]: the typed configuration tree, CLI and YAML, validated at start-up (and
//!   `config::envoy`, the `redcar config convert-envoy` tool).
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
pub mod metrics;
pub mod protocol;
pub mod router;
pub mod sentinel;
pub mod top;
pub mod upstream;
pub mod workers;
