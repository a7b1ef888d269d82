//! Persistent, pipelined connections to cluster nodes, shared by every client session.
//!
//! A `Node` owns a few long-lived connections to one address; each connection is a single task
//! that coalesces queued requests into one write and matches replies in FIFO order. This module
//! knows addresses, never slots: the router decides where a command goes. Every connection is
//! plain TCP or, with `upstream.tls`, TLS (`stream`; the settings and handshake from the crate
//! `redcar_tls`).
//!
//! What holds for every command handed to a node: it is written in the order it was queued on its
//! connection, its reply is the next frame that connection reads for it, and if no reply comes the
//! caller learns whether the command may have run (`UpstreamError`: never sent, or lost after
//! it may have reached the node). That distinction is what lets the router retry safely.
//!
//! Where to start reading:
//!
//! - `registry` and `node`: the nodes by address and each node's connections;
//! - `conn` (a tokio task per connection) and `loop_conn` (a connection driven by a worker's
//!   event loop), both over `wire`, the bookkeeping of commands in flight, and `batch`, when to
//!   write;
//! - `handshake`, `node_context`, `tls`, `stream`: opening and greeting a connection;
//! - `health`, `health_check`, `standby`, `replica_sync`: which nodes should get traffic;
//! - `dedicated`: connections lent to one client (blocking commands, WATCH, pub/sub);
//! - `tracking`, `tracked_lane`, `tracking_feed`: client-side caching towards the nodes;
//! - `pending`, `lane`, `error`, `metrics`, `config`, `connect_limit`: the shared vocabulary.
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
mod lane;
mod loop_conn;
mod loop_socket;
mod metrics;
mod node;
mod node_context;
mod pending;
mod registry;
mod replica_sync;
#[cfg(test)]
mod scripted_node;
mod standby;
mod stream;
mod tracked_lane;
mod tracking;
mod tracking_feed;
mod wire;

/// Commands to a node connection: one FIFO queue per connection (redcar_sync).
use redcar_sync::queue;

/// What a node connection hands back for one command.
type Outcome = Result<bytes::Bytes, UpstreamError>;

/// Replies awaited as futures (fan-outs, splits, retries): pooled one-shot channels.
mod reply_slot {
    redcar_sync::reply_pool!(
        /// The reply slots of node outcomes.
        pub(crate) Outcomes,
        super::Outcome
    );

    /// Where a node connection delivers one outcome.
    pub(crate) type ReplySender = redcar_sync::reply_slot::ReplySender<Outcomes>;
    /// Resolves to the outcome, or to `Closed` if the connection ended without one.
    pub(crate) type ReplyReceiver = redcar_sync::reply_slot::ReplyReceiver<Outcomes>;

    /// A new channel, on a recycled slot when this thread has one.
    pub(crate) fn channel() -> (ReplySender, ReplyReceiver) {
        redcar_sync::reply_slot::channel()
    }
}

/// A client session's replies from every node connection.
mod inbox {
    use super::Outcome;

    /// A session's inbox of node outcomes.
    pub(crate) type Inbox = redcar_sync::inbox::Inbox<Outcome>;
    /// Where one command's outcome goes.
    pub(crate) type Delivery = redcar_sync::inbox::Delivery<Outcome>;
    /// The part of an inbox node connections write to.
    pub(crate) type Shared = redcar_sync::inbox::Shared<Outcome>;
    /// An outcome, or `Closed` when the connection dropped the command without one.
    pub(crate) type Delivered = redcar_sync::inbox::Delivered<Outcome>;
}

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
// TLS towards the nodes: in its own crate, shared with `redcar doctor`.
pub(crate) use redcar_tls::{UpstreamTls, UpstreamTlsConfig};
pub(crate) use tracking::BcastRegistered;
pub(crate) use tracking_feed::{clock_ms, InvalidationSink, ProvenAt, TrackingFeed};
pub(crate) use wire::{LoopSink, ReplyFrame};
