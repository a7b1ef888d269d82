//! One client connection: parse its commands, start each as soon as it arrives, and write the
//! replies back in the order the commands came, whatever order the nodes answer in.

use std::future::Future;

use bytes::{Buf, Bytes, BytesMut};
use futures_util::future::{ready, Either, Ready};
use futures_util::stream::{FuturesOrdered, StreamExt};
use futures_util::FutureExt;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;
use tokio::time::Instant;

use super::listener::Downstream;
use super::local::ClientState;
use crate::protocol::{parse_request, Request};
use crate::router::{Plan, Router};

const READ_CHUNK: usize = 16 * 1024;

/// What a command turns into once planned.
enum Action {
    /// The reply is known already.
    Ready(Bytes),
    /// Send to a node: the encoded command, its slot (`None`: any primary), and whether it writes.
    Forward { payload: Bytes, slot: Option<u16>, write: bool },
}

/// The one future type for every command, so the ordered queue holds no boxed futures. Calling
/// it queues a forwarded command on its node connection immediately (see `Router::forward`).
fn respond(router: &Router, action: Action, lane: usize) -> Either<Ready<Bytes>, impl Future<Output = Bytes> + '_> {
    match action {
        Action::Ready(reply) => Either::Left(ready(reply)),
        Action::Forward { payload, slot, write } => Either::Right(router.forward(payload, slot, write, lane)),
    }
}

/// Queues a reply slot. A ready reply with nothing ahead of it goes straight to the output buffer
/// (no future needed: the common case for local commands). A macro, not a function, because the
/// queue's future type is the unnameable type of `respond`.
macro_rules! push {
    ($in_flight:expr, $out:expr, $router:expr, $action:expr, $lane:expr) => {
        match $action {
            Action::Ready(reply) if $in_flight.is_empty() => $out.extend_from_slice(&reply),
            action => $in_flight.push_back(respond($router, action, $lane)),
        }
    };
}

/// Serves one client until it disconnects, sends QUIT, breaks the protocol, idles out, or the
/// proxy drains.
pub async fn serve<S>(stream: S, downstream: &Downstream, mut shutdown: watch::Receiver<bool>)
where
    S: AsyncRead + AsyncWrite + Send + Unpin,
{
    let router: &Router = &downstream.router;
    let config = &downstream.config;
    let limits = config.limits();
    let (mut reader, mut writer) = tokio::io::split(stream);
    let mut state = ClientState::new(downstream.next_client_id());
    // This client's connection to every node (see `Node::call`).
    let lane = state.id as usize;
    let mut input = BytesMut::with_capacity(READ_CHUNK);
    let mut out = BytesMut::with_capacity(READ_CHUNK);
    let mut in_flight = FuturesOrdered::new();
    let mut scratch = Vec::with_capacity(8);
    // Once set, no more commands are read; the session ends when every reply is written.
    let mut closing = false;
    let mut last_activity = Instant::now();
    loop {
        // Start every complete command already buffered, up to the in-flight limit.
        while !closing && in_flight.len() < config.max_in_flight {
            let request = match parse_request(&mut input, &limits) {
                Ok(Some(request)) => request,
                Ok(None) if input.len() >= config.max_request_bytes => {
                    push!(in_flight, out, router, protocol_error("request exceeds client.max_request_bytes"), lane);
                    closing = true;
                    break;
                }
                Ok(None) => break,
                Err(e) => {
                    push!(in_flight, out, router, protocol_error(&e.to_string()), lane);
                    closing = true;
                    break;
                }
            };
            let action = plan(router, &mut state, &request, &mut scratch);
            closing |= state.quit;
            push!(in_flight, out, router, action, lane);
        }
        if closing && in_flight.is_empty() && out.is_empty() {
            let _ = writer.shutdown().await;
            return;
        }
        let can_read = !closing && in_flight.len() < config.max_in_flight && out.len() < config.max_reply_bytes;
        let idle = config.idle_timeout;
        tokio::select! {
            biased;
            Some(reply) = in_flight.next(), if !in_flight.is_empty() && out.len() < config.max_reply_bytes => {
                out.extend_from_slice(&reply);
                // Take every other reply that is already done, to write them in one syscall.
                while let Some(Some(reply)) = in_flight.next().now_or_never() {
                    out.extend_from_slice(&reply);
                }
            }
            wrote = writer.write(&out), if !out.is_empty() => match wrote {
                Ok(n) if n > 0 => out.advance(n),
                _ => return, // client gone: in-flight commands are dropped with the session
            },
            read = reader.read_buf(&mut input), if can_read => match read {
                Ok(0) | Err(_) => closing = true,
                Ok(_) => {
                    last_activity = Instant::now();
                    if input.capacity() - input.len() < 1024 {
                        input.reserve(READ_CHUNK);
                    }
                }
            },
            _ = tokio::time::sleep_until(last_activity + idle), if !idle.is_zero() && in_flight.is_empty() && !closing => {
                tracing::debug!(client = state.id, "closing idle client");
                closing = true;
            }
            _ = shutdown.changed(), if !closing => closing = true,
        }
    }
}

fn plan(router: &Router, state: &mut ClientState, request: &Request, scratch: &mut Vec<usize>) -> Action {
    match router.plan(request, scratch) {
        Plan::Slot { slot, write } => Action::Forward {
            payload: request.raw().clone(),
            slot: Some(slot),
            write,
        },
        // Keyless commands whose write-ness is unknown are treated as writes: never re-sent.
        Plan::AnyNode => Action::Forward {
            payload: request.raw().clone(),
            slot: None,
            write: true,
        },
        Plan::Local(local) => Action::Ready(state.answer(local, request.args())),
        Plan::Reply(reply) => Action::Ready(reply),
    }
}

/// Redis's own wording, so clients recognise it; the client is closed after it.
fn protocol_error(reason: &str) -> Action {
    let mut reply = BytesMut::with_capacity(reason.len() + 24);
    reply.extend_from_slice(b"-ERR Protocol error: ");
    reply.extend_from_slice(reason.replace(['\r', '\n'], " ").as_bytes());
    reply.extend_from_slice(b"\r\n");
    Action::Ready(reply.freeze())
}
