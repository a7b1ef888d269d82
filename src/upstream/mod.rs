//! Persistent, pipelined connections to cluster nodes, shared by every client session.
//!
//! A [`Node`] owns a few long-lived connections to one address; each connection is a single task
//! that coalesces queued requests into one write and matches replies in FIFO order. This module
//! knows addresses, never slots: the router decides where a command goes. Every connection is
//! plain TCP or, with `upstream.tls`, TLS (`tls`, `stream`).

mod batch;
mod config;
mod conn;
mod connect_limit;
mod dedicated;
mod error;
mod handshake;
mod health;
mod health_check;
mod inbox;
mod lane;
mod node;
mod queue;
mod registry;
mod replica_sync;
mod reply_slot;
#[cfg(test)]
mod scripted_node;
mod standby;
mod stream;
mod tls;
mod tracking;

pub use config::{
    DedicatedConfig, Exhausted, UpstreamConfig, MAX_KEEPALIVE_PROBES, MAX_KEEPALIVE_SECONDS,
};
pub use conn::ASKING;
pub use connect_limit::ConnectLimit;
pub use dedicated::{Dedicated, DedicatedPool};
pub use error::UpstreamError;
pub use handshake::{Credentials, Handshake};
pub use health::{Health, HealthSnapshot, OutlierConfig};
pub use health_check::run_health_checks;
pub use inbox::{Delivered, Inbox};
pub use lane::Lane;
pub use node::{Node, Queued, Reply};
pub use registry::Upstreams;
pub use standby::STANDBY_IDLE;
pub use stream::NodeStream;
pub use tls::{UpstreamTls, UpstreamTlsConfig};
pub use tracking::{
    clock_ms, parse_invalidation, BcastRegistered, Heard, InvalidationSink, TrackingFeed,
};
