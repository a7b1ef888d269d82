//! A session started for a client the previous process handed over (an upgrade in place,
//! `downstream::handover`): its lasting state rebuilt from the record, then served as a session
//! moved from another worker is (moving.rs), unparsed input first.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::super::client_state::ClientState;
use super::super::clients::Connected;
use super::super::handover::HandedOver;
use super::super::movable::Detached;
use super::super::pubsub::Rejoin;
use super::super::ClientRules;
use super::moving::{MovedClient, Moving};

/// Starts a session for a client handed over by the previous process: `record` read from the
/// upgrade connection, `socket` its client's connection. Runs on `handle` (a per-core worker,
/// numbered `worker`) or on the current runtime.
/// `state` is the record's, made with the users in `config`'s generation. `released`: a
/// subscribed client's wake-up once the previous process lets go of it (it starts in subscribe
/// mode, writing nothing until then).
pub(crate) fn adopt_session(
    connected: Connected,
    record: HandedOver,
    (state, generation, config): (ClientState, u64, Arc<ClientRules>),
    (socket, released): (OwnedFd, Option<oneshot::Receiver<()>>),
    place: Option<(usize, &tokio::runtime::Handle)>,
) {
    let stream = match record.listener.as_str() {
        "unix" => Detached::Unix(std::os::unix::net::UnixStream::from(socket)),
        _ => Detached::Tcp(std::net::TcpStream::from(socket)),
    };
    let now = Instant::now();
    let moved = MovedClient {
        facade: record.facade.clone().map(|f| Box::new(f.into())),
        state,
        generation,
        config,
        last_activity: now.checked_sub(record.idle).unwrap_or(now),
        connected_at: now.checked_sub(record.age).unwrap_or(now),
        aged: false,
        pipelining: None,
        input: record.input,
        rejoin: released.map(|released| {
            Box::new(Rejoin {
                subscriptions: record.subscriptions,
                released,
            })
        }),
    };
    let peer: Arc<str> = Arc::from(record.peer.as_str());
    let to = place.map_or(0, |(worker, _)| worker);
    let moving = Moving { to, stream, moved };
    let task = super::life::resumed(moving, connected, peer);
    match place {
        Some((_, handle)) => drop(handle.spawn(task)),
        None => drop(tokio::spawn(task)),
    }
}
