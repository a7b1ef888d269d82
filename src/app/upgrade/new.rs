//! The new process's side of an upgrade: find the old process, take its listening sockets, get
//! ready (config, slot map) within `upgrade_timeout`, say so, and once told to go, serve and
//! adopt the clients the old process hands over.

use std::os::fd::OwnedFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::runtime::Handle;
use tokio::sync::mpsc;

use super::wire::{Conn, Kind, UpgradeFrame};
use super::FROM_ENV;
use super::{claimed_versions, from_json, to_json, ClientId, Done, Failed, Go, Handing, Hello};
use crate::downstream::{adopt, Downstream, HandedOver};

/// How long the old process gets to answer Hello and Ready (it answers at once).
const ANSWER: Duration = Duration::from_secs(10);

/// The listening sockets the old process passed, by kind, and the connection to it.
pub(crate) struct Inherited {
    /// `(kind, address or path, socket)`.
    pub(crate) sockets: Vec<(String, String, OwnedFd)>,
    /// Kept until the proxy is built and its slot maps are read; then `Takeover::ready`.
    pub(crate) takeover: Takeover,
}

/// The connection to the old process, until this one takes over.
/// Held by `Listeners` between `inherit` and `run`'s take-over step.
pub(crate) struct Takeover {
    /// The upgrade connection; read with a timeout of `ANSWER` while the old process answers.
    conn: Conn,
    /// The client record version agreed; 0 means no clients will come, only `Done`.
    version: u16,
    /// This process's restart generation, as the old process computed it.
    pub(crate) generation: u64,
    /// The process being replaced, for the log and `redcar_upgrade_old_pid`.
    pub(crate) old_pid: u32,
}

/// Started by an upgrade (`REDCAR_UPGRADE_FROM` set): connects to the old process, says which
/// record versions this build reads, and receives the listeners. `None` when started by hand.
///
/// Fails, and the process exits before binding anything, when the old process cannot be reached
/// (only the child it started may connect), does not answer within `ANSWER`, or names a different
/// number of listeners than it passes; the old process then reports the upgrade as failed and goes
/// on serving.
pub(crate) fn inherit() -> anyhow::Result<Option<Inherited>> {
    let Ok(name) = std::env::var(FROM_ENV) else {
        return Ok(None);
    };
    let addr = SocketAddr::from_abstract_name(name.as_bytes())?;
    let stream = UnixStream::connect_addr(&addr)
        .map_err(|e| anyhow::anyhow!("upgrade: cannot reach the old process: {e}"))?;
    stream.set_read_timeout(Some(ANSWER))?;
    let mut conn = Conn::new(stream);
    let (oldest, newest) = claimed_versions();
    let hello = Hello {
        pid: std::process::id(),
        oldest,
        newest,
        release: env!("CARGO_PKG_VERSION").to_string(),
    };
    conn.send(Kind::Hello, &to_json(&hello), &[])?;
    let frame = next(&mut conn, Kind::Listeners)?;
    let handing: Handing = from_json(&frame.payload);
    anyhow::ensure!(
        handing.listeners.len() == frame.fds.len(),
        "upgrade: {} listeners named but {} passed",
        handing.listeners.len(),
        frame.fds.len()
    );
    let sockets = handing
        .listeners
        .into_iter()
        .zip(frame.fds)
        .map(|(entry, fd)| (entry.kind, entry.addr, fd))
        .collect();
    tracing::info!(
        old_pid = handing.old_pid,
        generation = handing.generation,
        version = handing.version,
        "upgrade: listeners received from the old process"
    );
    Ok(Some(Inherited {
        sockets,
        takeover: Takeover {
            conn,
            version: handing.version,
            generation: handing.generation,
            old_pid: handing.old_pid,
        },
    }))
}

/// The next frame, which must be of `kind`.
/// Fails on a closed connection, a read timeout or a frame of another kind: the handshake has a
/// fixed order, so anything else means the two processes disagree.
fn next(conn: &mut Conn, kind: Kind) -> anyhow::Result<UpgradeFrame> {
    let frame = conn
        .recv()?
        .ok_or_else(|| anyhow::anyhow!("upgrade: the old process closed the connection"))?;
    anyhow::ensure!(
        frame.kind == kind,
        "upgrade: expected {kind:?}, got {:?}",
        frame.kind
    );
    Ok(frame)
}

// === impl Takeover ===

impl Takeover {
    /// Waits until `ready()` holds (a complete slot map), at most `timeout` from `started`;
    /// then tells the old process and waits for `Go`. On failure the old process is told why
    /// (it goes on serving) and this one exits.
    pub(crate) async fn ready(
        self,
        ready: impl Fn() -> bool,
        started: Instant,
        timeout: Duration,
    ) -> anyhow::Result<Taken> {
        while !ready() {
            if started.elapsed() >= timeout {
                let reason = format!(
                    "the new process had no complete slot map within upgrade_timeout ({timeout:?})"
                );
                let failed = Failed {
                    reason: reason.clone(),
                };
                let _ = self.conn.send(Kind::Failed, &to_json(&failed), &[]);
                anyhow::bail!("upgrade: {reason}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let Takeover {
            mut conn, version, ..
        } = self;
        let go = tokio::task::spawn_blocking(move || -> anyhow::Result<(Conn, Go)> {
            conn.send(Kind::Ready, b"{}", &[])?;
            let go = next(&mut conn, Kind::Go)?;
            Ok((conn, from_json(&go.payload)))
        })
        .await??;
        let (conn, go) = go;
        Ok(Taken {
            conn,
            version,
            next_id: go.next_id,
        })
    }
}

/// Taken over: this process serves; the old one hands its clients over.
pub(crate) struct Taken {
    /// Moves to the adopting thread in `adopt_clients`.
    conn: Conn,
    version: u16,
    /// Client ids from here on are this process's.
    pub(crate) next_id: u64,
}

impl Taken {
    /// Adopts each client the old process hands over, on a thread of its own, until it says
    /// it is done. The thread holds a clone of `done`, as an accept loop does.
    /// `on_done` runs once the old process is done (or gone).
    pub(crate) fn adopt_clients(
        self,
        downstream: Arc<Downstream>,
        workers: Option<Arc<[Handle]>>,
        done: mpsc::Sender<()>,
        on_done: Box<dyn FnOnce() + Send>,
    ) {
        let runtime = Handle::current();
        let Taken {
            mut conn, version, ..
        } = self;
        answer_subscribed(&conn, &downstream);
        let spawned = std::thread::Builder::new()
            .name("redcar-adopt".into())
            .spawn(move || {
                let _entered = runtime.enter();
                let _ = conn.socket().set_read_timeout(None);
                receive(&mut conn, version, &downstream, workers.as_deref(), &done);
                // Held subscribers go on: the old process writes to none of them any more.
                downstream.exits.arrivals.finish();
                on_done();
            });
        if let Err(error) = spawned {
            tracing::error!(%error, "upgrade: cannot start the thread that adopts clients");
        }
    }
}

/// Adopts clients until `Done` or the end of the connection.
/// A record that cannot be decoded, or that comes without its socket, costs that client its
/// connection (it reconnects) and nothing else; the loop goes on with the next frame. Unknown frame
/// kinds are logged and skipped.
fn receive(
    conn: &mut Conn,
    version: u16,
    downstream: &Arc<Downstream>,
    workers: Option<&[Handle]>,
    done: &mpsc::Sender<()>,
) {
    let mut adopted = 0u64;
    loop {
        let frame = match conn.recv() {
            Ok(Some(frame)) => frame,
            Ok(None) => break,
            Err(error) => {
                tracing::error!(%error, "upgrade: the connection to the old process failed");
                break;
            }
        };
        match frame.kind {
            Kind::Client => {
                let Some(socket) = frame.fds.into_iter().next() else {
                    tracing::warn!("upgrade: a client record came without its socket");
                    continue;
                };
                match HandedOver::decode(&frame.payload) {
                    Ok(record) => {
                        adopt(downstream, record, socket, workers, done);
                        adopted += 1;
                    }
                    // Its socket is dropped, which closes it: the client reconnects.
                    Err(error) => {
                        tracing::warn!(%error, version, "upgrade: a client record could not be read; closing the client")
                    }
                }
            }
            Kind::Released => {
                let client: ClientId = from_json(&frame.payload);
                downstream.exits.arrivals.released(client.id);
            }
            Kind::Done => {
                let done: Done = from_json(&frame.payload);
                tracing::info!(
                    adopted,
                    moved = done.moved,
                    closed = done.closed,
                    took_ms = done.millis,
                    "upgrade: the old process handed every client over"
                );
                return;
            }
            other => {
                tracing::warn!(kind = ?other, "upgrade: unexpected frame from the old process")
            }
        }
    }
    tracing::warn!(
        adopted,
        "upgrade: the old process went away before saying it was done"
    );
}

/// Sends `Subscribed` for each held subscriber once it is subscribed again here, from a thread
/// of its own (the adopting thread waits in `recv`); it ends when the old process is done.
fn answer_subscribed(conn: &Conn, downstream: &Downstream) {
    let writer = match conn.socket().try_clone() {
        Ok(socket) => Conn::new(socket),
        Err(error) => {
            // Without it, held subscribers go on once the old process is done.
            tracing::error!(%error, "upgrade: cannot answer the old process about subscribers");
            return;
        }
    };
    let (tell, ids) = std::sync::mpsc::channel::<u64>();
    let spawned = std::thread::Builder::new()
        .name("redcar-subscribed".into())
        .spawn(move || {
            for id in ids {
                if let Err(error) = writer.send(Kind::Subscribed, &to_json(&ClientId { id }), &[]) {
                    tracing::warn!(%error, "upgrade: cannot tell the old process a client is subscribed");
                    return;
                }
            }
        });
    match spawned {
        Ok(_) => downstream.exits.arrivals.start(tell),
        Err(error) => {
            tracing::error!(%error, "upgrade: cannot start the thread that answers the old process")
        }
    }
}
