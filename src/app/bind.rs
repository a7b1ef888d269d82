//! Binds the client listeners with `client.accept_backlog` as their listen queue (tokio's own
//! `bind` fixes it), capped by the kernel's `net.core.somaxconn`.
//!
//! When the queue is full the kernel drops a new connection's SYN, and the client retries only
//! after a second: a burst of connects larger than the queue stalls some of them for 1 s
//! (bench/RESULTS-connect-burst.md).

use std::net::SocketAddr;
use std::path::Path;

use anyhow::Context;
use socket2::{Domain, SockAddr, Socket, Type};
use tokio::net::{TcpListener, UnixListener};

/// Where Linux keeps the largest listen queue it grants.
const SOMAXCONN: &str = "/proc/sys/net/core/somaxconn";

/// The listen queue the kernel will give for `configured`: at most `net.core.somaxconn` (the
/// kernel caps it silently; this says so in the log, once, at start-up).
/// Called when binding at start-up, and by a process started by an upgrade for the sockets it
/// binds anew; the same value for every client listener.
pub(super) fn effective_backlog(configured: u32) -> u32 {
    let Some(max) = somaxconn() else {
        return configured;
    };
    if configured <= max {
        return configured;
    }
    tracing::warn!(
        configured,
        effective = max,
        "client.accept_backlog is capped by net.core.somaxconn ({SOMAXCONN}); raise that sysctl for a longer listen queue"
    );
    max
}

/// `net.core.somaxconn`, when it can be read.
/// `None` off Linux or without `/proc`; the configured value is then used as is. A negative value
/// (which the kernel reads as 0) gives 0.
fn somaxconn() -> Option<u32> {
    let text = std::fs::read_to_string(SOMAXCONN).ok()?;
    let value: i64 = text.trim().parse().ok()?;
    u32::try_from(value.max(0)).ok()
}

/// A TCP listener on `addr` with a listen queue of `backlog`; `key` names the setting in errors.
/// Only numeric `IP:PORT` is accepted, so no DNS lookup happens at start-up; port 0 picks a free
/// port (the tests read it back).
pub(super) fn tcp(addr: &str, backlog: u32, key: &str) -> anyhow::Result<TcpListener> {
    let parsed: SocketAddr = addr
        .parse()
        .with_context(|| format!("cannot listen on {addr} (`{key}`): not IP:PORT"))?;
    let listen = || -> std::io::Result<TcpListener> {
        let socket = Socket::new(Domain::for_address(parsed), Type::STREAM, None)?;
        // As tokio's own bind: a restart may bind while old connections are in TIME_WAIT.
        socket.set_reuse_address(true)?;
        socket.bind(&parsed.into())?;
        socket.listen(queue(backlog))?;
        socket.set_nonblocking(true)?;
        TcpListener::from_std(socket.into())
    };
    listen().with_context(|| format!("cannot listen on {addr} (`{key}`)"))
}

/// A Unix-socket listener at `path` (already free) with a listen queue of `backlog`.
/// The caller (`bind_unix`) has removed a stale socket and applies `unix_permissions` afterwards.
pub(super) fn unix(path: &Path, backlog: u32) -> anyhow::Result<UnixListener> {
    let listen = || -> std::io::Result<UnixListener> {
        let socket = Socket::new(Domain::UNIX, Type::STREAM, None)?;
        socket.bind(&SockAddr::unix(path)?)?;
        socket.listen(queue(backlog))?;
        socket.set_nonblocking(true)?;
        UnixListener::from_std(std::os::unix::net::UnixListener::from(
            std::os::fd::OwnedFd::from(socket),
        ))
    };
    listen().with_context(|| format!("cannot listen on {} (`unix`)", path.display()))
}

/// `listen(2)` takes an int; validation keeps the setting far below `i32::MAX`.
fn queue(backlog: u32) -> i32 {
    i32::try_from(backlog).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The queue the kernel reports for a bound listener is checked in tests/it/backlog.rs.
    #[test]
    fn the_backlog_never_exceeds_somaxconn() {
        let max = somaxconn().unwrap_or(u32::MAX);
        assert_eq!(effective_backlog(1), 1);
        assert_eq!(effective_backlog(u32::MAX), max);
        assert_eq!(queue(u32::MAX), i32::MAX);
    }

    #[tokio::test]
    async fn tcp_and_unix_listeners_accept() {
        let listener = tcp("127.0.0.1:0", 7, "listen").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let _client = tokio::net::TcpStream::connect(addr).await.expect("connect");
        listener.accept().await.expect("accepted");
        let error = tcp("localhost:0", 7, "tls.listen").expect_err("not IP:PORT");
        assert!(format!("{error:#}").contains("`tls.listen`"), "{error:#}");
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("redcar.sock");
        let listener = unix(&path, 7).expect("bind unix");
        let _client = tokio::net::UnixStream::connect(&path)
            .await
            .expect("connect");
        listener.accept().await.expect("accepted");
    }
}
