//! A session's part of client-side caching: its tracking mode, its mailbox, and the look at
//! each command it sends while tracking (which keys it reads, which it writes with NOLOOP).
//!
//! Sessions that never track pay one branch per command ([`intercept`]) and nothing else.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};

use super::command::{self, Switch};
use super::{Event, Mailbox, Tracking, Tracks};
use crate::commands::policy::Tx;
use crate::commands::spec::flags;
use crate::commands::{key_indices, CommandSpec, Local};
use crate::downstream::listener::Downstream;
use crate::downstream::local::ClientState;
use crate::protocol::{write_integer, Request};
use crate::router::{redcar_error, Call, Plan, Router};

type Waiting = Pin<Box<dyn Future<Output = Bytes> + Send>>;

/// A session's tracking mode while it is on (as `CLIENT TRACKINGINFO` shows it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(in crate::downstream) struct Mode {
    pub(crate) redirect: u64,
    pub(crate) bcast: bool,
    pub(crate) optin: bool,
    pub(crate) optout: bool,
    pub(crate) noloop: bool,
    /// `CLIENT CACHING yes|no` for the next command.
    pub(crate) caching: bool,
    /// BCAST prefixes, sorted (`""` when BCAST was asked without one).
    pub(crate) prefixes: Vec<Bytes>,
}

/// What a session keeps once it tracked or could receive invalidations (boxed in its
/// `ClientState`; `None` there for every other session).
pub(crate) struct ClientTracking {
    hub: Arc<Tracking>,
    id: u64,
    mailbox: Arc<Mailbox>,
    mode: Option<Mode>,
    /// `CLIENT TRACKING on BCAST`'s reply, once every primary confirmed the prefixes (the
    /// session runs it as its next call, see [`take_wait`]). In a mutex only to be `Sync`, as
    /// the session's state must be (never locked but to be taken out).
    pending: Option<Mutex<Waiting>>,
    /// Set by `pending` when the nodes did not confirm: tracking is off for this session.
    refused: Arc<AtomicBool>,
}

// === impl ClientTracking ===

impl ClientTracking {
    fn new(hub: &Arc<Tracking>, id: u64) -> ClientTracking {
        ClientTracking {
            hub: hub.clone(),
            id,
            mailbox: hub.join(id),
            mode: None,
            pending: None,
            refused: Arc::default(),
        }
    }

    /// Tracking was refused after the fact (see `refused`): off from now on.
    fn settle(&mut self) {
        if self.refused.swap(false, Ordering::Relaxed) {
            self.off();
        }
    }

    /// The reply to `CLIENT TRACKING on BCAST` waits until every primary confirmed the
    /// session's prefixes: a write sent after it reaches a node that broadcasts it.
    fn confirm(&mut self, prefixes: Vec<Bytes>) {
        let wait = self.hub.bcast_confirmed(prefixes);
        let hub = self.hub.clone();
        let id = self.id;
        let refused = self.refused.clone();
        self.pending = Some(Mutex::new(Box::pin(async move {
            match wait.await {
                Ok(()) => Bytes::from_static(b"+OK\r\n"),
                Err(reason) => {
                    refused.store(true, Ordering::Relaxed);
                    hub.set_tracks(id, None);
                    tracing::warn!(client = id, %reason, "CLIENT TRACKING on BCAST refused");
                    redcar_error(format!("CLIENT TRACKING: {reason}; tracking stays off"))
                }
            }
        })));
    }

    /// Tracking is on: the session's commands take the nodes' tracked lanes.
    pub(crate) fn is_on(&self) -> bool {
        self.mode.is_some()
    }

    /// `CLIENT TRACKING off`, and RESET.
    pub(crate) fn off(&mut self) {
        if self.mode.take().is_some() {
            self.hub.set_tracks(self.id, None);
        }
    }

    /// Ready once invalidations wait to be written.
    pub(crate) fn poll_ready(&self, cx: &mut Context<'_>) -> Poll<()> {
        self.mailbox.poll_ready(cx)
    }

    /// The waiting invalidations, as `client` gets them (see `frames`).
    pub(crate) fn take_frames(&self, state: &ClientState, subscribed: bool) -> Bytes {
        let events: Vec<Event> = self.mailbox.take();
        let mut out = BytesMut::new();
        super::write_events(&mut out, &events, state.protocol, subscribed);
        out.freeze()
    }

    fn switch(&mut self, switch: Switch) {
        if !switch.on {
            return self.off();
        }
        let mut mode = self.mode.take().unwrap_or_default();
        let mut prefixes = std::mem::take(&mut mode.prefixes);
        if switch.bcast {
            if switch.prefixes.is_empty() && !prefixes.iter().any(Bytes::is_empty) {
                prefixes.push(Bytes::new());
            }
            prefixes.extend(switch.prefixes);
            prefixes.sort();
        }
        let mode = Mode {
            redirect: switch.redirect,
            bcast: switch.bcast,
            optin: switch.optin,
            optout: switch.optout,
            noloop: switch.noloop,
            caching: false,
            prefixes,
        };
        let tracks = Tracks {
            redirect: mode.redirect,
            prefixes: mode.bcast.then(|| mode.prefixes.clone()),
            broken: false,
        };
        self.hub.started(&tracks);
        let bcast = tracks.prefixes.clone();
        self.hub.set_tracks(self.id, Some(tracks));
        self.mode = Some(mode);
        if let Some(prefixes) = bcast {
            self.confirm(prefixes);
        }
    }
}

impl Drop for ClientTracking {
    fn drop(&mut self) {
        self.hub.leave(self.id);
    }
}

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

fn answer(downstream: &Downstream, state: &mut ClientState, local: Local, args: &[Bytes]) -> Bytes {
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
            let arg = args.get(2).map_or(&b""[..], |a| &a[..]);
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
    mode: &Mode,
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
    let keys = indices
        .into_iter()
        .filter_map(|i| request.args().get(i).cloned());
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
        Some(tracking) => tracking.take_frames(state, false),
        None => Bytes::new(),
    }
}
