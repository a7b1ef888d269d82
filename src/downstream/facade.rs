//! Cluster-facade mode: on a listener that opts in, redcar describes itself as a one-node Redis
//! Cluster owning all 16384 slots, so clients that insist on cluster mode can use it unchanged.
//!
//! Which address is announced is decided once per client connection (the socket's local address,
//! or the configured `announce`), so a listener on `0.0.0.0` tells each client the address that
//! client actually reached. The replies themselves are encoded in `facade_reply.rs`.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::facade_reply as reply;
pub(crate) use super::facade_reply::Endpoint;
use crate::protocol::{Args, Protocol};

/// `cluster_facade:` (for `listen`) and `tls.cluster_facade:` (for `tls.listen`).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct FacadeConfig {
    /// Answer CLUSTER SLOTS/SHARDS/NODES/INFO/MYID (and READONLY, READWRITE, ASKING) as a
    /// one-node cluster on this listener.
    pub(crate) enabled: bool,
    /// `HOST:PORT` to announce instead of the address the client connected to (behind NAT,
    /// Docker port mapping or a Kubernetes service).
    pub(crate) announce: Option<String>,
}

/// A facade listener's settings, checked and parsed once at start-up.
#[derive(Debug)]
pub(crate) struct Facade {
    /// `announce`: the address clients are told to use; `None` announces the address each client
    /// reached.
    announce: Option<Announce>,
    /// The TLS listener announces its port as `tls-port` in CLUSTER SHARDS.
    tls: bool,
}

/// An `announce` value split into host and port (IPv6 without its brackets).
#[derive(Debug, Clone, PartialEq)]
struct Announce {
    /// The announced host: an IP, or a name the clients resolve.
    host: String,
    /// The announced port.
    port: u16,
}

// === impl FacadeConfig ===

impl FacadeConfig {
    /// Start-up checks. `key` is where this config sits (`cluster_facade`), `listener` the key
    /// of the listener it applies to and whether that listener is configured.
    pub(crate) fn check(&self, key: &str, listener: (&str, bool)) -> Result<(), String> {
        let (listener_key, configured) = listener;
        if !self.enabled {
            if self.announce.is_some() {
                return Err(format!(
                    "`{key}.announce` is set but `{key}.enabled` is not (--cluster-facade)"
                ));
            }
            return Ok(());
        }
        if !configured {
            return Err(format!(
                "`{key}.enabled` needs `{listener_key}`: a cluster client must reach the \
                 facade over TCP at an address it can announce (a Unix socket cannot be a \
                 cluster node)"
            ));
        }
        match &self.announce {
            Some(value) => Announce::parse(value)
                .map(|_| ())
                .map_err(|why| format!("`{key}.announce` is `{value}`: {why}")),
            None => Ok(()),
        }
    }
}

// === impl Facade ===

impl Facade {
    /// The facade for a listener, or `None` when it is off. `config` must have passed
    /// [`FacadeConfig::check`].
    pub(crate) fn new(config: &FacadeConfig, tls: bool) -> Option<Arc<Facade>> {
        if !config.enabled {
            return None;
        }
        let announce = config
            .announce
            .as_deref()
            .and_then(|value| Announce::parse(value).ok());
        Some(Arc::new(Facade { announce, tls }))
    }

    /// What to announce to a client whose socket's local address is `local`; `None` when
    /// there is neither an announce address nor a local one (the socket is already broken).
    pub(super) fn endpoint(&self, local: Option<SocketAddr>) -> Option<Endpoint> {
        // A listener on `[::]` reached over IPv4 reports `::ffff:a.b.c.d`: announce `a.b.c.d`.
        let local_ip = local.map(|addr| addr.ip().to_canonical());
        let (host, port) = match (&self.announce, local) {
            (Some(announce), _) => (announce.host.clone(), announce.port),
            (None, Some(addr)) => (addr.ip().to_canonical().to_string(), addr.port()),
            (None, None) => return None,
        };
        let is_ip = host.parse::<IpAddr>().is_ok();
        let ip = match (is_ip, local_ip) {
            (false, Some(local_ip)) => local_ip.to_string(),
            _ => host.clone(),
        };
        let id = crate::values::sha1_hex(format!("{host}:{port}"));
        Some(Endpoint {
            hostname: (!is_ip).then(|| host.clone()),
            host,
            ip,
            port,
            tls: self.tls,
            id,
        })
    }

    /// Where the facade announces itself when the client's address decides (for the log).
    pub(crate) fn describe(&self) -> String {
        match &self.announce {
            Some(a) => format!("{}:{}", a.host, a.port),
            None => "the address each client connected to".to_string(),
        }
    }
}

// === impl Endpoint ===

impl Endpoint {
    /// The facade's reply to `command` (the command table's name, `cluster|slots`), or `None`
    /// when the command is not one the facade answers, or has the wrong number of arguments
    /// (then the usual plan, with its arity error, stands). `ready` says whether redcar has a
    /// complete slot map (CLUSTER INFO's `cluster_state`); it is asked only for CLUSTER INFO.
    pub(super) fn answer(
        &self,
        command: &str,
        args: Args<'_>,
        ready: impl FnOnce() -> bool,
        protocol: Protocol,
    ) -> Option<Bytes> {
        let reply = match (command, args.len()) {
            ("cluster|slots", 2) => reply::slots(self, protocol),
            ("cluster|shards", 2) => reply::shards(self, protocol),
            ("cluster|nodes", 2) => reply::nodes(self, protocol),
            ("cluster|info", 2) => reply::info(ready(), protocol),
            ("cluster|myid", 2) => reply::myid(self),
            // Cluster clients send these per connection; redcar picks nodes itself.
            ("readonly" | "readwrite" | "asking", 1) => Bytes::from_static(b"+OK\r\n"),
            _ => return None,
        };
        Some(reply)
    }
}

// === impl Announce ===

impl Announce {
    /// `HOST:PORT` or `[IPv6]:PORT`. The host ends up inside CLUSTER NODES' space-separated
    /// `host:port@cport` field, so spaces, `@` and `,` are refused.
    fn parse(value: &str) -> Result<Announce, &'static str> {
        const SHAPE: &str = "expected HOST:PORT such as redcar.example:6380 or 10.0.0.5:6380";
        let (host, port) = value.rsplit_once(':').ok_or(SHAPE)?;
        let port = port.parse::<u16>().ok().filter(|p| *p != 0).ok_or(SHAPE)?;
        let host = match host.strip_prefix('[') {
            Some(v6) => v6.strip_suffix(']').ok_or(SHAPE)?,
            None if host.contains(':') => return Err("an IPv6 address needs brackets: [::1]:6380"),
            None => host,
        };
        if host.is_empty() {
            return Err(SHAPE);
        }
        if host
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '@' | ','))
        {
            return Err("the host may not contain spaces, `@` or `,`");
        }
        Ok(Announce {
            host: host.to_string(),
            port,
        })
    }
}

#[cfg(test)]
#[path = "facade_tests.rs"]
mod tests;
