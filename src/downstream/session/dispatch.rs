//! Turns one planned command into a [`Call`]: the transaction rules first, then forwarded
//! commands queued on their node right away, local answers, splits and fan-outs.

use bytes::BytesMut;
use tokio::time::Instant;

use super::super::client_state::ClientState;
use super::near::NearCacheRequest;
use crate::commands::Local;
use crate::protocol::Request;
use crate::router::TxStep;
use crate::router::{Call, Plan, Router};
use crate::upstream::Inbox;
use crate::upstream::Lane;

/// Starts one planned command: forwarded commands are queued on their node right away, their
/// replies going to the session's `inbox` (made on the first such command). `near`: the near
/// cache's view of the command, when the cache is on (its writes were noted before).
#[allow(clippy::too_many_arguments)]
pub(in crate::downstream) fn dispatch<'r>(
    router: &'r Router,
    inbox: &mut Option<Box<Inbox>>,
    state: &mut ClientState,
    plan: Plan,
    request: &Request,
    max_tx_bytes: usize,
    now: Instant,
    near: Option<NearCacheRequest<'_>>,
) -> Call<'r> {
    if let Some(mut near) = near {
        if !state.tx.is_open() {
            if let Some(call) = near.serve(router, &plan, request, state, now) {
                return call;
            }
        }
    }
    let lane = state.lane();
    // Most commands: one slot, no transaction open. The transaction rules would pass the plan
    // through unchanged (`TxStep::Serve`); going straight to the node skips their moves of it.
    if let Plan::Slot { slot, write } = plan {
        if !state.tx.is_open() {
            return forward_slot(router, inbox, state, request, slot, write, lane, now);
        }
    }
    let rewritten = match &plan {
        Plan::Compound(compound) if state.tx.is_open() && compound.script_slot().is_some() => {
            router.forwarder().evalsha_as_eval(request)
        }
        _ => None,
    };
    let raw = rewritten.as_ref().unwrap_or(request.raw());
    let step = state.tx.step(plan, raw, max_tx_bytes);
    run_step(router, inbox, state, step, request, lane, now)
}

/// Carries out what the transaction rules said about a command (see `Transaction::step`).
fn run_step<'r>(
    router: &'r Router,
    inbox: &mut Option<Box<Inbox>>,
    state: &mut ClientState,
    step: TxStep,
    request: &Request,
    lane: Lane,
    now: Instant,
) -> Call<'r> {
    match step {
        TxStep::Serve(plan) => serve_plan(router, inbox, state, plan, request, lane, now),
        TxStep::Reply(reply) => Call::ready(reply),
        TxStep::Exec {
            payload,
            frames,
            slot,
            backend: None,
        } => {
            match slot {
                Some(slot) => state.written.note(slot),
                None => state.written.note_everywhere(),
            }
            router.stateful().exec(payload, frames, slot, lane)
        }
        // A prefix route's backend: WAIT does not follow it (as for other routed writes).
        TxStep::Exec {
            payload,
            frames,
            slot,
            backend,
        } => router
            .stateful()
            .exec_on(backend, payload, frames, slot, lane),
        TxStep::ExecWatched {
            payload,
            frames,
            slot,
            backend,
        } => {
            router
                .stateful()
                .exec_watched(state.tx.watch_handle(), payload, frames, slot, backend)
        }
        TxStep::Watch {
            slot,
            backend,
            payload,
        } => {
            let payload = payload.unwrap_or_else(|| request.raw().clone());
            router.stateful().watch_on(
                state.tx.watch_handle(),
                backend,
                payload,
                slot,
                lane.protocol(),
            )
        }
        TxStep::Unwatch { reply } => {
            if reply.starts_with(b"+RESET") {
                state.reset();
            }
            router.stateful().unwatch(state.tx.watch_handle(), reply)
        }
    }
}

fn serve_plan<'r>(
    router: &'r Router,
    inbox: &mut Option<Box<Inbox>>,
    state: &mut ClientState,
    plan: Plan,
    request: &Request,
    lane: Lane,
    now: Instant,
) -> Call<'r> {
    match plan {
        Plan::Slot { slot, write } => {
            forward_slot(router, inbox, state, request, slot, write, lane, now)
        }
        // Keyless commands whose write-ness is unknown are treated as writes: never re-sent.
        Plan::AnyNode => router.forwarder().forward(
            Some(inbox.get_or_insert_with(Box::default)),
            request.raw().clone(),
            None,
            true,
            lane,
            now,
        ),
        Plan::Compound(compound) => {
            // Splits, fan-outs and scripts: where they wrote is not tracked; WAIT asks everyone.
            state.written.note_everywhere();
            router.fanout().start(compound, request, lane)
        }
        Plan::Wait { replicas, timeout } => {
            router
                .stateful()
                .wait(&mut state.written, replicas, timeout, lane)
        }
        Plan::Blocking {
            slot,
            write,
            timeout,
        } => {
            if write {
                state.written.note(slot);
            }
            router
                .stateful()
                .blocking(request.raw().clone(), slot, write, timeout, lane.protocol())
        }
        Plan::Local(Local::Reset) => {
            state.reset();
            Call::ready(state.answer(Local::Reset, request.args()))
        }
        Plan::Local(local) => Call::ready(state.answer(local, request.args())),
        Plan::Reply(reply) => Call::ready(reply),
        // Handled by the transaction rules and subscribe mode before getting here.
        Plan::Tx(..) | Plan::Sub(_) => Call::ready(crate::router::redcar_error(
            "SUBSCRIBE inside MULTI is not supported",
        )),
    }
}

/// A one-slot command to its node, its reply to the session's inbox.
#[allow(clippy::too_many_arguments)]
#[inline]
fn forward_slot<'r>(
    router: &'r Router,
    inbox: &mut Option<Box<Inbox>>,
    state: &mut ClientState,
    request: &Request,
    slot: u16,
    write: bool,
    lane: Lane,
    now: Instant,
) -> Call<'r> {
    if write {
        state.written.note(slot);
    }
    router.forwarder().forward(
        Some(inbox.get_or_insert_with(Box::default)),
        request.raw().clone(),
        Some(slot),
        write,
        lane,
        now,
    )
}

/// Redis's own wording, so clients recognise it; the client is closed after it.
pub(in crate::downstream) fn protocol_error(reason: &str) -> Call<'static> {
    let mut reply = BytesMut::with_capacity(reason.len() + 24);
    reply.extend_from_slice(b"-ERR Protocol error: ");
    reply.extend_from_slice(reason.replace(['\r', '\n'], " ").as_bytes());
    reply.extend_from_slice(b"\r\n");
    Call::ready(reply.freeze())
}
