//! Client-facing side: listeners (TCP and Unix socket) and one session per client that answers a
//! pipeline in order while its commands run in parallel on different nodes; optionally a cluster
//! facade (`facade`) that presents redcar as a one-node cluster.
//!
//! What holds for every client, whichever way it is served: replies go back in the order the
//! commands came; a command is started as soon as it is read (the pipeline is not held back by a
//! slow node); a client that stops reading is paused before its buffers pass its own limits or
//! the process-wide budget; and a client leaves only at a point where it owes nothing (drain,
//! upgrade hand-over, idle close), so no reply is ever cut in half.
//!
//! Where to start reading:
//!
//! - `session`: one client on a tokio task (`threading: shared`), from parse to ordered replies;
//! - `event_loop`: the per-core workers (`threading: per-core`), where a worker's loop owns its
//!   clients' sockets and its share of the node connections;
//! - `clients`: what all sessions share, and the registry of who is connected;
//! - `local` and `local_args`: the connection commands redcar answers itself;
//! - `pubsub` and `tracking`: subscribe mode and client-side caching, which keep state per
//!   client that a shared node connection cannot;
//! - `listener`, `accept`, `tls`, `spread`: accepting clients and choosing their worker;
//! - `budget`, `config`, `slow`, `drain`: the limits and signals every session checks;
//! - `handover`, `moves`, `movable`: clients crossing to another process or another worker;
//! - `facade`, `facade_reply`, `keyspace`: the cluster facade and per-user key filtering.
#![warn(unreachable_pub, missing_docs)]

mod accept;
mod budget;
mod client_state;
mod clients;
mod config;
mod drain;
mod event_loop;
mod facade;
mod facade_reply;
mod handover;
mod keyspace;
mod listener;
mod local;
mod local_args;
mod metrics;
mod movable;
mod moves;
mod pubsub;
mod reply_batch;
mod session;
mod slow;
mod spread;
mod tls;
mod tracking;

pub(crate) use accept::Accept;
pub(crate) use clients::Downstream;
pub(crate) use config::{ClientConfig, ClientRules};
pub(crate) use event_loop::{
    start as start_loop, LoopListen, LoopListener, LoopSetup, Stop as LoopStop,
};
pub(crate) use facade::{Facade, FacadeConfig};
pub(crate) use handover::{
    adopt, HandedOver, Outgoing, CURRENT as HANDOVER_CURRENT, OLDEST as HANDOVER_OLDEST,
};
pub(crate) use listener::serve;
pub(crate) use metrics::{ClientMetrics, ListenerMetrics};
pub(crate) use pubsub::PubsubMetrics;
pub(crate) use spread::{Gated, Spread};
pub(crate) use tls::{TlsConfig, TlsListener};
pub(crate) use tracking::TrackingMetrics;
