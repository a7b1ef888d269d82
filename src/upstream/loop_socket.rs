//! A loop connection's socket work: opening it (as a tokio task, then handed over), registering
//! it with the loop's poll, and reading it without blocking (writing is `loop_conn.rs`'s).
//!
//! Why connecting stays a tokio task: a connect and its handshake are a few round trips with
//! timeouts and back-off, rare next to the traffic, and writing them as loop state machines would
//! buy nothing. What holds: the loop only ever sees an established, greeted, non-blocking socket,
//! or the reason there is none; TLS connections never come here, since with `upstream.tls` the
//! workers keep connection tasks.

use std::io::{self, Read};

use bytes::BytesMut;

use super::node_context::NodeContext;
use super::stream::NodeStream;
use super::wire::READ_CHUNK;

/// TCP (with keepalive) and the handshake, as a connection task does; the socket is handed to
/// the loop in non-blocking mode.
pub(super) async fn open(context: &NodeContext) -> Result<std::net::TcpStream, String> {
    let stream = super::conn::connect(
        &context.addr,
        &context.config,
        &context.connect_limit,
        &context.tls,
    )
    .await?;
    match context.greet(stream).await? {
        NodeStream::Tcp(tcp) => tcp
            .into_std()
            .map_err(|e| format!("cannot hand the connection to the event loop: {e}")),
        // `upstream.tls` keeps connection tasks (see `workers::Model`): never reached.
        NodeStream::Tls(_) => Err("TLS connections are not driven by the event loop".into()),
    }
}

/// Readable and writable, edge-triggered: the loop reads until `WouldBlock` and writes what is
/// queued until the socket takes no more.
pub(super) fn register(
    stream: std::net::TcpStream,
    registry: &mio::Registry,
    token: u64,
) -> Result<mio::net::TcpStream, String> {
    let mut stream = mio::net::TcpStream::from_std(stream);
    let interest = mio::Interest::READABLE | mio::Interest::WRITABLE;
    registry
        .register(&mut stream, mio::Token(token as usize), interest)
        .map_err(|e| format!("cannot register the connection with the event loop: {e}"))?;
    Ok(stream)
}

/// Reads once, appending to `input` what came. Through a per-thread buffer, initialised once:
/// reading into `input`'s spare room directly would need `unsafe` to mark it filled (or zeroing
/// it before every read, which costs more than this copy of what arrived).
pub(crate) fn read_into(stream: &mut impl Read, input: &mut BytesMut) -> io::Result<usize> {
    SCRATCH.with(|scratch| {
        let mut scratch = scratch.borrow_mut();
        let n = stream.read(&mut scratch[..])?;
        input.extend_from_slice(&scratch[..n]);
        Ok(n)
    })
}

thread_local! {
    /// One read's worth of buffer per loop thread, zeroed once at the thread's first read.
    static SCRATCH: std::cell::RefCell<Box<[u8]>> =
        std::cell::RefCell::new(vec![0; READ_CHUNK].into_boxed_slice());
}
