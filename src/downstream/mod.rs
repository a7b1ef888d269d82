//! Client-facing side: listeners (TCP and Unix socket) and one session per client that answers a
//! pipeline in order while its commands run in parallel on different nodes; optionally a cluster
//! facade (`facade`) that presents redcar as a one-node cluster.
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
