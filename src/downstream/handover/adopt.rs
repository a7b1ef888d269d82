//! The new process's side of an upgrade: a session started from a record and a socket, with
//! the client's id, login, protocol, name, facade endpoint, tracking and unparsed input as the
//! previous process had them.

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::runtime::Handle;
use tokio::sync::mpsc;

use super::super::client_state::ClientState;
use super::super::clients::Downstream;
use super::super::session::adopt_session;
use super::super::tracking::ClientTracking;
use super::HandedOver;

/// Starts serving a client handed over by the previous process: `record` says who it is,
/// `socket` is its connection. Per core (`workers`), it goes to the worker with the fewest
/// clients. The session holds a clone of `done`, as an accepted one does.
pub(crate) fn adopt(
    downstream: &Arc<Downstream>,
    record: HandedOver,
    socket: OwnedFd,
    workers: Option<&[Handle]>,
    done: &mpsc::Sender<()>,
) {
    let listener: &'static str = match record.listener.as_str() {
        "tcp" => "tcp",
        "unix" => "unix",
        other => {
            tracing::warn!(
                client = record.id,
                listener = other,
                "upgrade: a client from an unknown listener; closing it"
            );
            return;
        }
    };
    let place = workers.and_then(|handles| {
        let worker = least_busy(downstream, handles.len());
        handles.get(worker).map(|handle| (worker, handle))
    });
    let gauges = downstream.client_metrics.listener(listener);
    let connected_at = SystemTime::now()
        .checked_sub(record.age)
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs());
    let connected = downstream.connect_adopted(
        record.id,
        Arc::from(record.peer.as_str()),
        (listener, &gauges),
        done,
        (place.map(|(worker, _)| worker), connected_at),
    );
    let (generation, config, users) = downstream.snapshot();
    let state = state_of(&record, users, downstream);
    // Held before its session starts, so the old process's release cannot come first.
    let released =
        (!record.subscriptions.is_empty()).then(|| downstream.exits.arrivals.hold(record.id));
    adopt_session(
        connected,
        record,
        (state, generation, config),
        (socket, released),
        place,
    );
}

/// The client's connection state in this process.
fn state_of(
    record: &HandedOver,
    users: Arc<crate::auth::Users>,
    downstream: &Downstream,
) -> ClientState {
    let login = record
        .login
        .as_ref()
        .and_then(|login| users.adopted(&login.user, login.credential));
    if record.login.is_some() && login.is_none() {
        tracing::info!(
            client = record.id,
            "upgrade: the client's user or its password changed; it is logged out"
        );
    }
    let mut state = ClientState::new(record.id, users);
    state.restore(login, record.failed_logins);
    state.protocol = record.resp();
    state.name = record.name.clone();
    state.cluster_mode = record.facade.is_some();
    if let Some(tracking) = &record.tracking {
        state.tracking = Some(Box::new(ClientTracking::restore(
            &downstream.tracking,
            record.id,
            tracking,
        )));
    }
    state
}

/// Per core: the worker with the fewest clients now.
fn least_busy(downstream: &Downstream, workers: usize) -> usize {
    let Some(spread) = downstream.spread() else {
        return 0;
    };
    let (_, _, standing) = spread.standing();
    standing
        .iter()
        .take(workers)
        .enumerate()
        .min_by_key(|(_, (clients, _))| *clients)
        .map_or(0, |(worker, _)| worker)
}
