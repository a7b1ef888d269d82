//! A session's part of client-side caching: the tracking subcommands of CLIENT, and the look at
//! each command it sends while tracking (which keys it reads, which it writes with NOLOOP). What
//! the session keeps (mode, mailbox) is `client.rs`.
//!
//! Sessions that never track pay one branch per command ([`intercept`]) and nothing else.

use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};

use super::client::ClientTracking;
use super::command::{self, TrackingMode};
use super::Tracking;
use crate::commands::policy::Tx;
use crate::commands::spec::flags;
use crate::commands::{key_indices, CommandSpec, Local};
use crate::downstream::client_state::ClientState;
use crate::downstream::clients::Downstream;
use crate::protocol::{write_integer, Args, Request};
use crate::router::{Call, Plan, Router};

/// Called with every command a session is about to start: answers the tracking subcommands of
/// CLIENT, and notes what a tracking session reads and writes. `plan` as the router made it.
#[inline]
pub(in crate::downstream) fn intercept(
    downstream: &Downstream,
    state: &mut ClientState,
    plan: Plan,
    request: &Request,
) -> Plan {
    match plan {
        Plan::Local(
            local @ (Local::ClientTracking
            | Local::ClientCaching
            | Local::ClientGetRedir
            | Local::ClientTrackingInfo),
        ) if !state.tx.is_open() => Plan::Reply(answer(downstream, state, local, request.args())),
        plan if state.tracking.is_some() => {
            note(downstream, state, &plan, request);
            plan
        }
        plan => plan,
    }
}

/// Subscribe mode: the session may receive invalidations redirected to it from now on.
pub(in crate::downstream) fn join_subscriber(downstream: &Downstream, state: &mut ClientState) {
    if state.tracking.is_none() {
        state.tracking = Some(Box::new(ClientTracking::new(
            &downstream.tracking,
            state.id,
        )));
    }
}

/// The reply of a command [`intercept`] answered that must wait (`CLIENT TRACKING on BCAST`),
/// to run as the command's call instead of its plan.
#[inline]
pub(in crate::downstream) fn take_wait(state: &mut ClientState) -> Option<Call<'static>> {
    let pending = state.tracking.as_deref_mut()?.pending.take()?;
    Some(Call::slow(
        pending.into_inner().unwrap_or_else(|e| e.into_inner()),
    ))
}

fn answer(downstream: &Downstream, state: &mut ClientState, local: Local, args: Args<'_>) -> Bytes {
    if let Some(tracking) = state.tracking.as_deref_mut() {
        tracking.settle();
    }
    let mode = state.tracking.as_deref().and_then(|t| t.mode.as_ref());
    match local {
        Local::ClientTracking => {
            let switch = match command::parse(args, mode, |id| downstream.is_connected(id)) {
                Ok(switch) => switch,
                Err(line) => return command::error(&line),
            };
            if switch.on || state.tracking.is_some() {
                let hub = &downstream.tracking;
                let id = state.id;
                let tracking = state
                    .tracking
                    .get_or_insert_with(|| Box::new(ClientTracking::new(hub, id)));
                tracking.switch(switch);
            }
            Bytes::from_static(b"+OK\r\n")
        }
        Local::ClientCaching => {
            let mode = state.tracking.as_deref_mut().and_then(|t| t.mode.as_mut());
            let arg = args.get(2).unwrap_or_default();
            match command::caching(arg, mode) {
                Ok(()) => Bytes::from_static(b"+OK\r\n"),
                Err(line) => command::error(line),
            }
        }
        Local::ClientGetRedir => {
            let mut out = BytesMut::with_capacity(8);
            write_integer(&mut out, command::redirect(mode));
            out.freeze()
        }
        _ => {
            let broken = mode.is_some() && downstream.tracking.is_broken(state.id);
            command::info(mode, broken, state.protocol)
        }
    }
}

/// A tracking session's command: the keys of a read the node will track go to the table; a
/// NOLOOP session's write takes it off its keys' entries. `CLIENT CACHING` lasts one command.
fn note(downstream: &Downstream, state: &mut ClientState, plan: &Plan, request: &Request) {
    let watching = state.tx.watched_slot().is_some();
    let tx_open = state.tx.is_open();
    let Some(tracking) = state.tracking.as_deref_mut() else {
        return;
    };
    tracking.settle();
    let Some(mode) = tracking.mode.as_mut() else {
        return;
    };
    let Some(spec) = downstream.router.planner().lookup(request.args()) else {
        return;
    };
    // Commands on a dedicated connection (blocking ones, a WATCHed transaction) are not tracked.
    let dedicated = watching || matches!(plan, Plan::Blocking { .. });
    note_keys(&tracking.hub, tracking.id, mode, spec, request, dedicated);
    if spec.container() != "client" && !tx_open && !matches!(plan, Plan::Tx(Tx::Multi, _)) {
        mode.caching = false;
    }
}

/// A command of a RESP3 client in subscribe mode (served one at a time on its lanes).
pub(in crate::downstream) fn note_subscribed(
    router: &Router,
    state: &ClientState,
    request: &Request,
) {
    let Some(tracking) = state.tracking.as_deref() else {
        return;
    };
    let (Some(mode), Some(spec)) = (
        tracking.mode.as_ref(),
        router.planner().lookup(request.args()),
    ) else {
        return;
    };
    note_keys(&tracking.hub, tracking.id, mode, spec, request, false);
}

fn note_keys(
    hub: &Tracking,
    id: u64,
    mode: &TrackingMode,
    spec: &CommandSpec,
    request: &Request,
    dedicated: bool,
) {
    let wanted = match (mode.optin, mode.optout) {
        (true, _) => mode.caching,
        (_, true) => !mode.caching,
        _ => true,
    };
    let read = spec.has_flag(flags::READONLY) && !mode.bcast && !dedicated && wanted;
    let noloop_write = mode.noloop && spec.has_flag(flags::WRITE);
    if !read && !noloop_write {
        return;
    }
    let mut indices = Vec::new();
    if key_indices(spec, request.args(), &mut indices).is_err() {
        return;
    }
    let keys = indices.into_iter().filter_map(|i| request.args().bytes(i));
    if read {
        hub.read(id, keys);
    } else {
        hub.wrote(id, keys);
    }
}

/// Ready once invalidations wait for this session (never, for a session that has no mailbox).
#[inline]
pub(in crate::downstream) fn poll_ready(state: &ClientState, cx: &mut Context<'_>) -> Poll<()> {
    match state.tracking.as_deref() {
        Some(tracking) => tracking.poll_ready(cx),
        None => Poll::Pending,
    }
}

/// Waits until invalidations wait for this session.
pub(in crate::downstream) async fn ready(state: &ClientState) {
    std::future::poll_fn(|cx| poll_ready(state, cx)).await
}

/// The invalidations waiting for this session, in its protocol, outside subscribe mode.
pub(in crate::downstream) fn take_frames(state: &ClientState) -> Bytes {
    match state.tracking.as_deref() {
        Some(tracking) => tracking.take_frames(state.protocol, false),
        None => Bytes::new(),
    }
}
