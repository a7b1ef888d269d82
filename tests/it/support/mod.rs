//! Integration-test harness: real `redis-server` processes, a real Redis
//! Cluster, the redcar binary, and a tiny plain (non-cluster) RESP client.
//!
//! Everything lives in temp dirs and child processes that are killed on drop,
//! so tests can run in parallel on cargo's test threads.
#![allow(dead_code, unused_imports)]

pub mod cluster;
pub mod freeze;
pub mod load;
pub mod pki;
pub mod redcar;
pub mod resp_client;
pub mod responder;
pub mod sentinel;
pub mod server;
pub mod tls_cluster;

pub use cluster::{Migration, NodeInfo, RedisCluster, SlotRange};
pub use freeze::{signal, Resume};
pub use pki::Pki;
pub use redcar::Redcar;
pub use resp_client::{Resp3, RespClient, Value};
pub use server::{free_cluster_port, free_port, RedisServer};
pub use tls_cluster::TlsCluster;
