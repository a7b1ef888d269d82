//! Where the listening sockets come from: bound here, or passed by the process an upgrade in
//! place replaces (`upgrade::inherit`); and the descriptors this process would pass on in turn.
//!
//! Sockets are matched by kind and address (a path for Unix), so an upgrade that keeps an address
//! keeps the very socket: no connection attempt is refused during the switch. A configured port 0
//! matches whatever port the old process had been given. See docs/operations.md, "Upgrading".

use std::net::SocketAddr;
use std::os::fd::OwnedFd;

use tokio::net::{TcpListener, UnixListener};

use super::upgrade::{self, Sockets};
use super::Listeners;
use crate::config::Config;

/// The inherited sockets not yet claimed by a configured listener.
/// Each entry is (kind, address, descriptor); kinds are `tcp`, `tls`, `unix` and `admin`.
struct Passed(Vec<(String, String, OwnedFd)>);

impl Passed {
    /// The socket of `kind` at `addr` (an `IP:PORT`, or a path), if the old process passed it.
    /// Removes the socket it returns, so one passed socket serves at most one listener.
    fn take(&mut self, kind: &str, addr: &str) -> Option<OwnedFd> {
        let wanted: Option<SocketAddr> = addr.parse().ok();
        let at = self.0.iter().position(|(k, a, _)| {
            k == kind
                && match (wanted, a.parse::<SocketAddr>()) {
                    // Port 0 in the config: whatever port the old process was given.
                    (Some(w), Ok(got)) => w == got || (w.port() == 0 && w.ip() == got.ip()),
                    _ => a == addr,
                }
        })?;
        Some(self.0.swap_remove(at).2)
    }
}

impl Listeners {
    /// The listeners the old process passed when this one was started by an upgrade (binding
    /// whatever the config asks for that it did not pass), else [`Listeners::bind`].
    /// What `main.rs` calls. Fails when the upgrade's hand-off cannot be read or a missing socket
    /// cannot be bound; a passed socket the new config does not use is closed and logged.
    pub async fn inherit_or_bind(config: &Config) -> anyhow::Result<Listeners> {
        let Some(inherited) = upgrade::inherit()? else {
            return Listeners::bind(config).await;
        };
        let mut passed = Passed(inherited.sockets);
        let fresh = Listeners::bind_missing(config, &mut passed).await?;
        // What the new config no longer listens on closes here; the old process keeps its
        // copies until it exits.
        for (kind, addr, _) in &passed.0 {
            tracing::info!(
                kind,
                addr,
                "upgrade: a passed listener is not in the config; closed"
            );
        }
        Ok(Listeners {
            takeover: Some(inherited.takeover),
            ..fresh
        })
    }

    /// Each configured listener from `passed`, or bound anew.
    /// Binding anew uses the same code as a fresh start, so errors read the same.
    async fn bind_missing(config: &Config, passed: &mut Passed) -> anyhow::Result<Listeners> {
        let mut listeners = Listeners::default();
        let backlog = super::bind::effective_backlog(config.client.accept_backlog);
        if let Some(addr) = &config.listen {
            listeners.tcp = Some(match passed.take("tcp", addr) {
                Some(fd) => tcp(fd)?,
                None => super::bind::tcp(addr, backlog, "listen")?,
            });
        }
        if let Some(path) = &config.unix {
            listeners.unix = Some(match passed.take("unix", &path.to_string_lossy()) {
                Some(fd) => UnixListener::from_std(std::os::unix::net::UnixListener::from(fd))?,
                None => super::bind_unix(path, &config.unix_permissions, backlog)?,
            });
        }
        if let Some(addr) = &config.tls.listen {
            listeners.tls = Some(match passed.take("tls", addr) {
                Some(fd) => tcp(fd)?,
                None => super::bind::tcp(addr, backlog, "tls.listen")?,
            });
        }
        if let Some(addr) = &config.admin.listen {
            listeners.admin = Some(match passed.take("admin", addr) {
                Some(fd) => tcp(fd)?,
                None => super::bind_admin(addr).await?,
            });
        }
        Ok(listeners)
    }

    /// Duplicates of every listening socket, to pass to the next process at an upgrade.
    /// Made at start-up, before serving, so an upgrade later never fails for want of a descriptor.
    /// Fails if a socket cannot be duplicated or has no local address.
    pub(super) fn to_pass(&self, config: &Config) -> std::io::Result<Sockets> {
        let mut sockets = Sockets::default();
        if let Some(tcp) = &self.tcp {
            sockets.add("tcp", tcp.local_addr()?.to_string(), tcp)?;
        }
        if let Some(tls) = &self.tls {
            sockets.add("tls", tls.local_addr()?.to_string(), tls)?;
        }
        if let (Some(unix), Some(path)) = (&self.unix, &config.unix) {
            sockets.add("unix", path.to_string_lossy().into_owned(), unix)?;
        }
        if let Some(admin) = &self.admin {
            sockets.add("admin", admin.local_addr()?.to_string(), admin)?;
        }
        Ok(sockets)
    }
}

/// A passed TCP listener, registered with this runtime.
/// Fails if the descriptor cannot be made non-blocking or registered.
fn tcp(fd: OwnedFd) -> std::io::Result<TcpListener> {
    let listener = std::net::TcpListener::from(fd);
    listener.set_nonblocking(true)?;
    TcpListener::from_std(listener)
}
