//! Persistent, pipelined connections to cluster nodes, shared by every client session.
//!
//! A [`Node`] owns a few long-lived connections to one address; each connection is a single task
//! that coalesces queued requests into one write and matches replies in FIFO order. This module
//! knows addresses, never slots: the router decides where a command goes. Every connection is
//! plain TCP or, with `upstream.tls`, TLS (`tls`, `stream`).
#![warn(unreachable_pub, missing_docs)]

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
mod loop_conn;
mod loop_socket;
mod metrics;
mod node;
mod node_context;
mod pending;
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
mod tracking_feed;
mod wire;

pub(crate) use config::{Exhausted, UpstreamConfig, MAX_KEEPALIVE_PROBES, MAX_KEEPALIVE_SECONDS};
pub(crate) use connect_limit::ConnectLimit;
pub(crate) use dedicated::{Dedicated, DedicatedPool};
pub(crate) use error::UpstreamError;
pub(crate) use handshake::{Credentials, Handshake};
pub(crate) use health::{HealthSnapshot, OutlierConfig};
pub(crate) use health_check::run_health_checks;
pub(crate) use inbox::Inbox;
pub(crate) use lane::Lane;
pub(crate) use loop_conn::{ConnAttach, ConnEvent, LoopConn};
pub(crate) use loop_socket::read_into;
pub(crate) use metrics::{NodeMetrics, UpstreamMetrics};
pub(crate) use node::{Node, Queued, Reply};
pub(crate) use pending::LoopWaiter;
pub(crate) use pending::ASKING;
pub(crate) use registry::Upstreams;
pub(crate) use stream::NodeStream;
pub(crate) use tls::{UpstreamTls, UpstreamTlsConfig};
pub(crate) use tracking::BcastRegistered;
pub(crate) use tracking_feed::{clock_ms, Heard, InvalidationSink, TrackingFeed};
pub(crate) use wire::{Frame, LoopSink};
