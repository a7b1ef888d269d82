//! Per-client limits: how much one client may have in flight or buffered.
//!
//! Why the limits are per client as well as global: one client that pipelines without reading its
//! replies, or sends a 1 GiB argument, must not be able to take the memory every other client
//! needs. Each cap pauses or closes only the client that exceeds it; the global budget
//! (`max_buffered_bytes_total`) catches many clients each under their own caps. All byte sizes
//! accept units (`64mb`), durations accept `30s`, and 0 turns a timeout off. Reloadable except
//! where a field says restart-only.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::protocol::Limits;
use crate::values::units;

/// `client:` in the config file.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ClientConfig {
    /// Commands of one client awaiting their replies; beyond it redcar stops reading from that
    /// client (back-pressure) until replies go out.
    pub(crate) max_in_flight: usize,
    /// Largest bulk string in a request (Redis's proto-max-bulk-len).
    #[serde(with = "units::size")]
    pub(crate) max_bulk_len: usize,
    /// Most arguments in one command.
    pub(crate) max_args: usize,
    /// Longest inline (telnet-style) command line.
    #[serde(with = "units::size")]
    pub(crate) max_inline_len: usize,
    /// Unparsed request bytes one client may have buffered (Redis's client-query-buffer-limit);
    /// past it the client gets a protocol error and is closed.
    #[serde(with = "units::size")]
    pub(crate) max_request_bytes: usize,
    /// Reply bytes waiting for a slow client before redcar stops reading its commands.
    #[serde(with = "units::size")]
    pub(crate) max_reply_bytes: usize,
    /// Unparsed request bytes and unwritten reply bytes of every client together; over it,
    /// clients holding more than a little stop being read until the total falls (see
    /// `downstream/budget.rs`); 0 = no global budget.
    #[serde(with = "units::size")]
    pub(crate) max_buffered_bytes_total: usize,
    /// Close a client with nothing in flight after this long without a command; 0 = never.
    #[serde(with = "units::duration")]
    pub(crate) idle_timeout: Duration,
    /// A request whose first byte arrived this long ago and that is still incomplete gets an
    /// error and the client is closed (slowloris protection); 0 = never.
    #[serde(with = "units::duration")]
    pub(crate) request_timeout: Duration,
    /// Clients connected at once over all listeners; one more is told
    /// `-ERR redcar: max number of clients reached` and closed.
    pub(crate) max_connections: usize,
    /// Close a client connection once it is this old, at the next safe point (nothing owed,
    /// nothing unread, not in a transaction, WATCH or subscribe mode), so its next connection
    /// goes through the load balancer again; 0 = never.
    #[serde(with = "units::duration")]
    pub(crate) max_age: Duration,
    /// When this instance's recent command latency is well above its own baseline, close idle
    /// clients (at a safe point) so they reconnect, possibly to another instance. The exact rule
    /// is in docs/configuration.md.
    pub(crate) close_idle_when_slow: bool,
    /// The listen queue of every client listener (TCP, TLS, Unix): connections the kernel holds
    /// completed until redcar accepts them. Capped by `net.core.somaxconn`. Restart-only.
    pub(crate) accept_backlog: u32,
    /// Keys in the client-side caching table (who read what, for `CLIENT TRACKING`); at the
    /// bound the oldest key is invalidated for its readers and forgotten. Restart-only.
    pub(crate) tracking_table_max_keys: usize,
}

/// `client.accept_backlog` by default (bench/RESULTS-connect-burst.md).
const DEFAULT_ACCEPT_BACKLOG: u32 = 4096;

impl Default for ClientConfig {
    /// The defaults are Redis's where Redis has the same limit (512 MiB bulks, 1 GiB query buffer)
    /// and otherwise generous enough that a well-behaved client never meets them.
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
            accept_backlog: DEFAULT_ACCEPT_BACKLOG,
            tracking_table_max_keys: super::tracking::DEFAULT_MAX_KEYS,
        }
    }
}

/// What the client path reads of `client:`, grouped: made from [`ClientConfig`] (whose fields
/// are the YAML keys) at start-up and at each reload, so a session holds the settings it uses
/// per command rather than the whole section.
#[derive(Clone, Debug)]
pub(crate) struct ClientRules {
    /// How a request is parsed: `max_bulk_len`, `max_args`, `max_inline_len`.
    pub(crate) codec: Limits,
    /// What one client may hold at once.
    pub(crate) caps: ClientCaps,
    /// When a client is closed for time.
    pub(crate) clocks: ClientClocks,
    /// `close_idle_when_slow`.
    pub(crate) close_idle_when_slow: bool,
    /// `max_connections`: clients connected at once over all listeners.
    pub(crate) max_connections: usize,
}

/// `max_in_flight`, `max_request_bytes`, `max_reply_bytes`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ClientCaps {
    /// `max_in_flight`: commands of one client awaiting replies before its reads pause.
    pub(crate) in_flight: usize,
    /// `max_request_bytes`: unparsed bytes before the client is closed with a protocol error.
    pub(crate) request_bytes: usize,
    /// `max_reply_bytes`: unwritten reply bytes before its reads pause.
    pub(crate) reply_bytes: usize,
}

/// `idle_timeout`, `request_timeout`, `max_age` (0 = never, each).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ClientClocks {
    /// `idle_timeout`; zero is off.
    pub(crate) idle: Duration,
    /// `request_timeout`; zero is off.
    pub(crate) request: Duration,
    /// `max_age`; zero is off.
    pub(crate) max_age: Duration,
}

impl From<&ClientConfig> for ClientRules {
    /// `Limits` fields with no `client:` key (nesting depth) keep their defaults.
    fn from(config: &ClientConfig) -> Self {
        ClientRules {
            codec: Limits {
                max_bulk_len: config.max_bulk_len,
                max_array_len: config.max_args,
                max_inline_len: config.max_inline_len,
                ..Limits::default()
            },
            caps: ClientCaps {
                in_flight: config.max_in_flight,
                request_bytes: config.max_request_bytes,
                reply_bytes: config.max_reply_bytes,
            },
            clocks: ClientClocks {
                idle: config.idle_timeout,
                request: config.request_timeout,
                max_age: config.max_age,
            },
            close_idle_when_slow: config.close_idle_when_slow,
            max_connections: config.max_connections,
        }
    }
}

impl Default for ClientRules {
    fn default() -> Self {
        ClientRules::from(&ClientConfig::default())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    const MINIMAL: &str = "listen: 127.0.0.1:6380\ncluster:\n  seeds: [127.0.0.1:7000]\n";

    #[test]
    fn accept_backlog_defaults_to_4096_and_0_is_refused_by_name() {
        let config = Config::from_yaml(MINIMAL).expect("parses");
        assert_eq!(config.client.accept_backlog, super::DEFAULT_ACCEPT_BACKLOG);
        assert_eq!(super::DEFAULT_ACCEPT_BACKLOG, 4096);
        let check = |value: &str| {
            let yaml = format!("{MINIMAL}client:\n  accept_backlog: {value}\n");
            Config::from_yaml(&yaml).expect("parses").validate()
        };
        let error = check("0").expect_err("0 refused").to_string();
        assert_eq!(
            error,
            "invalid configuration: `client.accept_backlog` is 0: expected a value from 1 to 65535"
        );
        assert!(check("65536").is_err());
        check("1").expect("1 is valid");
        check("65535").expect("above somaxconn is valid: capped at start-up");
    }
}
