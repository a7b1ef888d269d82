//! uring-probe: the same single-threaded RESP forwarder over two I/O mechanisms, so their CPU per
//! command can be compared (bench/uring-probe.sh).
//!
//! ```text
//! uring-probe --mode epoll|uring --listen 127.0.0.1:PORT --upstream 127.0.0.1:PORT
//!             [--uring-flags plain|coop|defer] [--uring-recv multi|single]
//! ```
//!
//! Clients' complete RESP requests go to ONE persistent upstream connection; a FIFO of
//! (client, frame count) gives each reply to the right client, in order. Per event-loop turn all
//! requests gathered go upstream in one write, and each client gets its replies in one write.
//! `core.rs` is that logic, shared; `epoll.rs` (mio, edge-triggered) and `uring.rs` (io-uring:
//! multishot accept, multishot recv into a provided buffer ring, batched SENDs, one
//! `submit_and_wait` per turn) only move the bytes.

mod core;
mod epoll;
mod resp;
mod uring;

use std::net::SocketAddr;
use std::process::ExitCode;

/// The io_uring setup flags tried (`--uring-flags`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UringFlags {
    /// No setup flags.
    Plain,
    /// IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SINGLE_ISSUER.
    Coop,
    /// IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_SINGLE_ISSUER.
    Defer,
}

/// How the uring mode receives (`--uring-recv`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecvKind {
    /// Multishot RECV selecting buffers from a registered buffer ring.
    Multi,
    /// One single-shot RECV at a time per connection, into the connection's own buffer.
    Single,
}

pub struct Args {
    pub mode: String,
    pub listen: SocketAddr,
    pub upstream: SocketAddr,
    pub flags: UringFlags,
    pub recv: RecvKind,
}

fn parse_args() -> Result<Args, String> {
    let mut mode = None;
    let mut listen = None;
    let mut upstream = None;
    let mut flags = UringFlags::Defer;
    let mut recv = RecvKind::Multi;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut val = || it.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--mode" => mode = Some(val()?),
            "--listen" => listen = Some(val()?.parse().map_err(|e| format!("--listen: {e}"))?),
            "--upstream" => upstream = Some(val()?.parse().map_err(|e| format!("--upstream: {e}"))?),
            "--uring-flags" => {
                flags = match val()?.as_str() {
                    "plain" => UringFlags::Plain,
                    "coop" => UringFlags::Coop,
                    "defer" => UringFlags::Defer,
                    o => return Err(format!("--uring-flags: {o}: expected plain, coop or defer")),
                }
            }
            "--uring-recv" => {
                recv = match val()?.as_str() {
                    "multi" => RecvKind::Multi,
                    "single" => RecvKind::Single,
                    o => return Err(format!("--uring-recv: {o}: expected multi or single")),
                }
            }
            o => return Err(format!("unknown argument {o}")),
        }
    }
    let mode = mode.ok_or("--mode is required")?;
    if mode != "epoll" && mode != "uring" {
        return Err(format!("--mode {mode}: expected epoll or uring"));
    }
    Ok(Args {
        mode,
        listen: listen.ok_or("--listen is required")?,
        upstream: upstream.ok_or("--upstream is required")?,
        flags,
        recv,
    })
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("uring-probe: {e}");
            return ExitCode::from(64);
        }
    };
    let res = if args.mode == "epoll" { epoll::run(&args) } else { uring::run(&args) };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("uring-probe: {e}");
            ExitCode::FAILURE
        }
    }
}
