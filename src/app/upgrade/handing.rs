//! The old process after `Go`: its clients leave for the new process at their safe points
//! (or are closed, counted by reason), their records and sockets written to the upgrade
//! connection by a thread of their own; then `Done`, and the old process exits.

use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::wire::{Conn, Kind};
use super::{to_json, Done};
use crate::downstream::Downstream;

/// An upgrade the new process has taken over: it serves new clients, and this process hands
/// its own over as they reach their safe points.
pub(crate) struct Committed {
    pub(super) conn: Conn,
    pub(super) version: u16,
    pub(super) new_pid: u32,
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
        let (sink, records) = std::sync::mpsc::channel::<crate::downstream::Outgoing>();
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
                downstream.handover.closed("drain_timeout");
            }
        }
        downstream.handover.finish();
        if let Ok(writer) = writer {
            let _ = tokio::task::spawn_blocking(move || writer.join()).await;
        }
        let (moved, closed) = downstream.handover.counts();
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

/// Sends each client's record and socket as sessions give them, then `Done`.
fn write_clients(
    conn: &Conn,
    records: &std::sync::mpsc::Receiver<crate::downstream::Outgoing>,
    downstream: &Downstream,
    started: Instant,
) {
    for outgoing in records {
        if let Err(error) = conn.send(Kind::Client, &outgoing.record, &[outgoing.socket.as_fd()]) {
            tracing::error!(%error, "upgrade: a client could not be handed over; it is closed");
        }
    }
    let (moved, closed) = downstream.handover.counts();
    let done = Done {
        moved,
        closed,
        millis: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    };
    let _ = conn.send(Kind::Done, &to_json(&done), &[]);
}
