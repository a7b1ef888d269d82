//! Per-client limits: how much one client may have in flight or buffered.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::units;
use crate::protocol::Limits;

/// `client:` in the config file.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ClientConfig {
    /// Commands of one client awaiting their replies; beyond it redcar stops reading from that
    /// client (back-pressure) until replies go out.
    pub max_in_flight: usize,
    /// Largest bulk string in a request (Redis's proto-max-bulk-len).
    #[serde(with = "units::size")]
    pub max_bulk_len: usize,
    /// Most arguments in one command.
    pub max_args: usize,
    /// Longest inline (telnet-style) command line.
    #[serde(with = "units::size")]
    pub max_inline_len: usize,
    /// Unparsed request bytes one client may have buffered (Redis's client-query-buffer-limit);
    /// past it the client gets a protocol error and is closed.
    #[serde(with = "units::size")]
    pub max_request_bytes: usize,
    /// Reply bytes waiting for a slow client before redcar stops reading its commands.
    #[serde(with = "units::size")]
    pub max_reply_bytes: usize,
    /// Unparsed request bytes and unwritten reply bytes of every client together; over it,
    /// clients holding more than a little stop being read until the total falls (see
    /// `downstream/budget.rs`); 0 = no global budget.
    #[serde(with = "units::size")]
    pub max_buffered_bytes_total: usize,
    /// Close a client with nothing in flight after this long without a command; 0 = never.
    #[serde(with = "units::duration")]
    pub idle_timeout: Duration,
    /// A request whose first byte arrived this long ago and that is still incomplete gets an
    /// error and the client is closed (slowloris protection); 0 = never.
    #[serde(with = "units::duration")]
    pub request_timeout: Duration,
    /// Clients connected at once over all listeners; one more is told
    /// `-ERR redcar: max number of clients reached` and closed.
    pub max_connections: usize,
    /// Close a client connection once it is this old, at the next safe point (nothing owed,
    /// nothing unread, not in a transaction, WATCH or subscribe mode), so its next connection
    /// goes through the load balancer again; 0 = never.
    #[serde(with = "units::duration")]
    pub max_age: Duration,
    /// When this instance's recent command latency is well above its own baseline, close idle
    /// clients (at a safe point) so they reconnect, possibly to another instance. The exact rule
    /// is in docs/configuration.md.
    pub close_idle_when_slow: bool,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            max_in_flight: 1024,
            max_bulk_len: 512 << 20,
            max_args: 1 << 20,
            max_inline_len: 64 << 10,
            max_request_bytes: 1 << 30,
            max_reply_bytes: 64 << 20,
            max_buffered_bytes_total: 512 << 20,
            idle_timeout: Duration::ZERO,
            request_timeout: Duration::from_secs(30),
            max_connections: 10_000,
            max_age: Duration::ZERO,
            close_idle_when_slow: false,
        }
    }
}

impl ClientConfig {
    /// The codec limits for requests.
    pub fn limits(&self) -> Limits {
        Limits {
            max_bulk_len: self.max_bulk_len,
            max_array_len: self.max_args,
            max_inline_len: self.max_inline_len,
            ..Limits::default()
        }
    }
}
