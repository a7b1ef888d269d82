//! TLS towards Redis nodes as redcar sets it up, and the PEM files both TLS sides read: the
//! client settings built from a CA file, an optional client certificate and a server name
//! (`upstream.tls`), the handshake with its explained failures, and certificate, key and CA
//! loading whose errors start with the setting at fault.
//!
//! A crate of its own so that the proxy (its node connections, and its TLS listener for the PEM
//! files) and `redcar doctor` (`--tls --cacert ...`) connect the same way, with the same
//! messages, without the doctor depending on the proxy. It knows nothing of either: errors are
//! plain strings naming the config key, which the doctor rewrites into its flags.
#![warn(unreachable_pub, missing_docs)]

mod client;
pub mod pem;

pub use client::{UpstreamTls, UpstreamTlsConfig};
