//! The old process after `Go`: its clients leave for the new process at their safe points
//! (or are closed, counted by reason), their records and sockets written to the upgrade
//! connection by a thread of their own; then `Done`, and the old process exits. Another thread
//! reads what the new process says back: which subscribed clients it has subscribed again.

use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::wire::{Conn, Kind};
use super::{from_json, to_json, ClientId, Done};
use crate::downstream::{Downstream, Outgoing};

/// An upgrade the new process has taken over: it serves new clients, and this process hands
/// its own over as they reach their safe points.
pub(crate) struct Committed {
    /// The upgrade connection: client records and sockets go out on it, `Subscribed` comes back.
    pub(super) conn: Conn,
    /// The client record version both processes read; 0: clients are closed at their safe points,
    /// not moved.
    pub(super) version: u16,
    /// The process that took over, for the log.
    pub(super) new_pid: u32,
    /// When `Go` was sent: the hand-over's duration is measured from here.
    pub(super) started: Instant,
}

// === impl Committed ===

impl Committed {
    /// Hands every client over at its safe point (or closes it, counted by reason), waits for
    /// the last one at most `drain_timeout`, tells the new process it is done, and logs how it
    /// went. `done` closes when every session and accept loop has ended.
    pub(crate) async fn hand_over(
        self,
        downstream: Arc<Downstream>,
        done: &mut mpsc::Receiver<()>,
        drain_timeout: Duration,
    ) {
        let Committed {
            conn,
            version,
            new_pid,
            started,
        } = self;
        let (sink, records) = std::sync::mpsc::channel::<Outgoing>();
        listen_for_subscribed(&conn, &downstream);
        let writer = std::thread::Builder::new()
            .name("redcar-handover".into())
            .spawn({
                let downstream = downstream.clone();
                move || write_clients(&conn, &records, &downstream, started)
            });
        let sink = (version > 0).then_some(sink);
        tracing::info!(
            clients = downstream.connected_clients(),
            new_pid,
            "upgrade: the new process took over; handing clients over at their safe points"
        );
        downstream.hand_over_clients(version, sink);
        let timed_out = tokio::time::timeout(drain_timeout, done.recv())
            .await
            .is_err();
        let left = downstream.connected_clients();
        if timed_out {
            for _ in 0..left {
                downstream.exits.handover.closed("drain_timeout");
            }
        }
        downstream.exits.handover.finish();
        if let Ok(writer) = writer {
            let _ = tokio::task::spawn_blocking(move || writer.join()).await;
        }
        let (moved, closed) = downstream.exits.handover.counts();
        tracing::info!(
            moved,
            closed,
            closed_at_drain_timeout = if timed_out { left } else { 0 },
            took_ms = started.elapsed().as_millis() as u64,
            new_pid,
            "upgrade: handover finished; this process exits"
        );
    }
}

/// Sends each client's record and socket as sessions give them (and each subscribed client's
/// release), then `Done`.
/// Runs on its own thread because sending blocks on the socket and must not stall the runtime
/// that serves the clients still here. Ends once every sender of `records` is gone (no session
/// has a client left to give). A client whose send fails is lost to both processes (its socket
/// closes here); the error is logged.
fn write_clients(
    conn: &Conn,
    records: &std::sync::mpsc::Receiver<Outgoing>,
    downstream: &Downstream,
    started: Instant,
) {
    for outgoing in records {
        let sent = match outgoing {
            Outgoing::Client { record, socket } => {
                conn.send(Kind::Client, &record, &[socket.as_fd()])
            }
            Outgoing::Released(id) => conn.send(Kind::Released, &to_json(&ClientId { id }), &[]),
        };
        if let Err(error) = sent {
            tracing::error!(%error, "upgrade: a client could not be handed over; it is closed");
        }
    }
    let (moved, closed) = downstream.exits.handover.counts();
    let done = Done {
        moved,
        closed,
        millis: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    };
    let _ = conn.send(Kind::Done, &to_json(&done), &[]);
}

/// Reads the new process's `Subscribed` frames on a thread of its own, for as long as the
/// connection lasts (the process exits soon after the handover, so it is not joined). When the
/// new process goes away, subscribers waiting for it stop waiting.
fn listen_for_subscribed(conn: &Conn, downstream: &Arc<Downstream>) {
    let reader = conn.socket().try_clone().and_then(|socket| {
        // The handshake read with a timeout; after `Go` only this thread reads.
        socket.set_read_timeout(None)?;
        Ok(Conn::new(socket))
    });
    let mut reader = match reader {
        Ok(reader) => reader,
        Err(error) => {
            tracing::error!(%error, "upgrade: cannot read the new process's answers; subscribed clients will wait for drain_timeout");
            return;
        }
    };
    let downstream = downstream.clone();
    let spawned = std::thread::Builder::new()
        .name("redcar-subscribed".into())
        .spawn(move || {
            while let Ok(Some(frame)) = reader.recv() {
                if frame.kind == Kind::Subscribed {
                    let client: ClientId = from_json(&frame.payload);
                    downstream.exits.handover.subscribed(client.id);
                }
            }
            downstream.exits.handover.finish();
        });
    if let Err(error) = spawned {
        tracing::error!(%error, "upgrade: cannot start the thread that reads the new process");
    }
}
