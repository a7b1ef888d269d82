//! The running process's side of an upgrade: on SIGUSR2, start the new binary, pass it the
//! listening sockets, wait until it is ready, tell it to go, then hand over the clients.

use std::os::fd::{AsFd, OwnedFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::signal::unix::Signal;
use tokio::sync::watch;

use super::handing::Committed;
use super::wire::{borrowed, Conn, Kind, UpgradeFrame};
use super::{agree, from_json, to_json, versions, Entry, Failed, Go, Handing, Hello};
use super::{PidFile, FROM_ENV};
use crate::downstream::Downstream;

/// Client ids the old process may still give after telling the new one where to start: it
/// accepts until its accept loops see the stop, a moment after `Go`.
const ID_MARGIN: u64 = 1 << 20;

/// How long a failed new process gets to exit after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// The listening sockets, as descriptors to pass (duplicates of those the accept loops use).
/// Built once at start-up (`Listeners::to_pass`), before any upgrade can be asked for.
#[derive(Default)]
pub(crate) struct Sockets {
    /// What each descriptor is, in the same order as `fds`.
    entries: Vec<Entry>,
    /// Duplicates owned here, so the accept loops closing theirs does not close these.
    fds: Vec<OwnedFd>,
}

impl Sockets {
    /// Adds a listener of `kind` (`tcp`, `tls`, `unix`, `admin`) at `addr`.
    pub(crate) fn add(
        &mut self,
        kind: &str,
        addr: String,
        socket: impl AsFd,
    ) -> std::io::Result<()> {
        self.fds.push(socket.as_fd().try_clone_to_owned()?);
        self.entries.push(Entry {
            kind: kind.to_string(),
            addr,
        });
        Ok(())
    }
}

/// What an upgrade needs from the running process.
pub(crate) struct Old {
    /// Passed again at every attempt, so a failed upgrade can be retried with the same sockets.
    pub(crate) sockets: Sockets,
    /// This process's restart generation (0 for one started by hand).
    pub(crate) generation: u64,
    /// The config in effect (`upgrade_timeout` is read from it at each upgrade).
    pub(crate) current: Arc<arc_swap::ArcSwap<crate::config::Config>>,
    /// Where the status of each attempt is written for `redcar upgrade`, when `--pid-file` is set.
    pub(crate) pid_file: Option<PidFile>,
    /// For the next client id to hand the new process, and later the clients themselves.
    pub(crate) downstream: Arc<Downstream>,
}

impl Old {
    /// Made once in `run`; the upgrade task owns it from then on.
    pub(crate) fn new(
        sockets: Sockets,
        generation: u64,
        current: Arc<arc_swap::ArcSwap<crate::config::Config>>,
        pid_file: Option<PidFile>,
        downstream: Arc<Downstream>,
    ) -> Old {
        Old {
            sockets,
            generation,
            current,
            pid_file,
            downstream,
        }
    }
}

/// An attempt before `Go`: the new process and the connection to it.
/// Dropping it without `go` would leave the child running: every failure path calls `stop_child`
/// first.
struct Attempt {
    conn: Conn,
    child: Child,
    /// The client record version agreed in the handshake.
    version: u16,
}

/// Takes over SIGUSR2 (whose default action ends the process); called before anything is
/// served.
pub(crate) fn watch_sigusr2() -> Option<Signal> {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::user_defined2()) {
        Ok(usr2) => Some(usr2),
        Err(error) => {
            tracing::error!(%error, "cannot watch SIGUSR2: upgrades in place are off");
            None
        }
    }
}

/// Serves until `shutdown` (`None`) or until an upgrade commits (returned).
/// Without an upgrade task (SIGUSR2 could not be watched) only `shutdown` ends it. A task that
/// panicked counts as no upgrade, so the process keeps serving until shutdown.
pub(crate) async fn until_taken_over(
    shutdown: impl std::future::Future<Output = ()>,
    upgrades: Option<tokio::task::JoinHandle<Option<Committed>>>,
) -> Option<Committed> {
    let upgrades = async {
        match upgrades {
            Some(task) => task.await.ok().flatten(),
            None => None,
        }
    };
    tokio::select! {
        () = shutdown => None,
        Some(committed) = upgrades => Some(committed),
    }
}

/// Runs an upgrade on each SIGUSR2 until one commits (returned); a failed one is logged and
/// changes nothing. Returns `None` once `stop` is sent (shutdown).
pub(crate) async fn watch(
    old: Old,
    mut usr2: Signal,
    mut stop: watch::Receiver<bool>,
) -> Option<Committed> {
    let old = Arc::new(old);
    loop {
        tokio::select! {
            got = usr2.recv() => got?,
            _ = stop.changed() => return None,
        };
        tracing::info!(
            generation = old.generation + 1,
            "SIGUSR2: upgrading in place"
        );
        if let Some(pid_file) = &old.pid_file {
            pid_file.status("started");
        }
        let cancel = Arc::new(AtomicBool::new(false));
        let attempt = tokio::task::spawn_blocking({
            let (old, cancel) = (old.clone(), cancel.clone());
            move || prepare(&old, &cancel)
        });
        let prepared = tokio::select! {
            done = attempt => done.unwrap_or_else(|e| Err(format!("the upgrade task failed: {e}"))),
            _ = stop.changed() => {
                // Shutting down: the attempt stops its new process and ends.
                cancel.store(true, Ordering::SeqCst);
                return None;
            }
        };
        match prepared.and_then(|pending| go(&old, pending)) {
            Ok(committed) => return Some(committed),
            Err(reason) => {
                tracing::error!(%reason, "upgrade failed; this process goes on serving as before");
                if let Some(pid_file) = &old.pid_file {
                    pid_file.status(&format!("failed {reason}"));
                }
            }
        }
    }
}

/// Starts the new process and waits until it is ready (or fails, or `upgrade_timeout` passes).
/// The upgrade socket has a fresh abstract name per attempt (pid, generation and a random part), so
/// a stale or parallel attempt cannot be joined by mistake. Runs on a blocking thread.
fn prepare(old: &Old, cancel: &AtomicBool) -> Result<Attempt, String> {
    let started = Instant::now();
    let deadline = started + old.current.load().upgrade_timeout;
    let name = format!(
        "redcar-upgrade-{}-{}-{}",
        std::process::id(),
        old.generation,
        started.elapsed().as_nanos() ^ u128::from(rand::random::<u64>())
    );
    let listener = SocketAddr::from_abstract_name(name.as_bytes())
        .and_then(|addr| UnixListener::bind_addr(&addr))
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|e| format!("cannot open the upgrade socket: {e}"))?;
    let mut child = spawn(&name)?;
    let result = handshake(old, &listener, &mut child, deadline, cancel);
    match result {
        Ok((conn, version)) => Ok(Attempt {
            conn,
            child,
            version,
        }),
        Err(reason) => {
            stop_child(&mut child);
            Err(reason)
        }
    }
}

/// The binary at this process's path (read from disk again), with the same arguments and
/// environment, told where to find this process.
/// Its stdout and stderr are this process's, so both logs land in the same place (journal or
/// terminal). Fails if the binary is gone or cannot be executed.
fn spawn(name: &str) -> Result<Child, String> {
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find this process's binary: {e}"))?;
    // A binary replaced on disk shows as `path (deleted)`: the path is what to start.
    let text = exe.to_string_lossy();
    let exe = std::path::PathBuf::from(text.strip_suffix(" (deleted)").unwrap_or(&text));
    let child = Command::new(&exe)
        .args(std::env::args_os().skip(1))
        .env(FROM_ENV, name)
        .stdin(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    tracing::info!(pid = child.id(), binary = %exe.display(), "upgrade: new process started");
    Ok(child)
}

/// Accepts the new process's connection (its pid checked), exchanges Hello and the
/// listeners, and waits for Ready.
/// The new process's `Failed` reason becomes this attempt's error, so `redcar upgrade` and the log
/// show why the new process refused.
fn handshake(
    old: &Old,
    listener: &UnixListener,
    child: &mut Child,
    deadline: Instant,
    cancel: &AtomicBool,
) -> Result<(Conn, u16), String> {
    let mut conn = accept_child(listener, child, deadline, cancel)?;
    let hello = expect(&mut conn, Kind::Hello, child, deadline, cancel)?;
    let hello: Hello = from_json(&hello.payload);
    let version = agree(versions(), (hello.oldest, hello.newest));
    if version == 0 {
        tracing::warn!(
            theirs = ?(hello.oldest, hello.newest),
            ours = ?versions(),
            "upgrade: the new process reads no client record version of ours; passing the listeners only, clients will be closed at their safe points"
        );
    }
    let handing = Handing {
        version,
        generation: old.generation + 1,
        old_pid: std::process::id(),
        listeners: old.sockets.entries.clone(),
    };
    conn.send(
        Kind::Listeners,
        &to_json(&handing),
        &borrowed(&old.sockets.fds),
    )
    .map_err(|e| format!("cannot pass the listeners: {e}"))?;
    let ready = recv_until(&mut conn, child, deadline, cancel)?;
    match ready.kind {
        Kind::Ready => Ok((conn, version)),
        Kind::Failed => Err(from_json::<Failed>(&ready.payload).reason),
        other => Err(format!("unexpected {other:?} from the new process")),
    }
}

/// Sends `Go`: from now on the new process serves. Then this one stops accepting.
///
/// From here on there is no going back: a `Go` that cannot be sent stops the child and fails, but
/// once it is sent, this process only hands over and exits.
fn go(old: &Old, mut pending: Attempt) -> Result<Committed, String> {
    let next_id = old.downstream.next_id().saturating_add(ID_MARGIN);
    if let Err(e) = pending.conn.send(Kind::Go, &to_json(&Go { next_id }), &[]) {
        stop_child(&mut pending.child);
        return Err(format!("the new process went away before taking over: {e}"));
    }
    let new_pid = pending.child.id();
    // Not waited for: it outlives this process, and init (or systemd) reaps it.
    drop(pending.child);
    if let Some(pid_file) = &old.pid_file {
        pid_file.status(&format!("ok {new_pid}"));
    }
    Ok(Committed {
        conn: pending.conn,
        version: pending.version,
        new_pid,
        started: Instant::now(),
    })
}

/// Only the child this process started may connect: the peer's pid (`SO_PEERCRED`) must be the
/// child's, so no other local process can take the sockets. Polls every 10 ms, checking the child,
/// the deadline and shutdown between tries.
fn accept_child(
    listener: &UnixListener,
    child: &mut Child,
    deadline: Instant,
    cancel: &AtomicBool,
) -> Result<Conn, String> {
    loop {
        check(child, deadline, cancel)?;
        match listener.accept() {
            Ok((stream, _)) => {
                let peer = rustix::net::sockopt::socket_peercred(&stream).map(|c| c.pid);
                let child_pid = rustix::process::Pid::from_child(child);
                if peer.ok() != Some(child_pid) {
                    tracing::warn!(
                        "upgrade: a process other than the new redcar connected; refused"
                    );
                    continue;
                }
                stream
                    .set_nonblocking(false)
                    .map_err(|e| format!("upgrade socket: {e}"))?;
                return Ok(Conn::new(stream));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => return Err(format!("upgrade socket: {e}")),
        }
    }
}

/// The next frame, which must be of `kind`.
fn expect(
    conn: &mut Conn,
    kind: Kind,
    child: &mut Child,
    deadline: Instant,
    cancel: &AtomicBool,
) -> Result<UpgradeFrame, String> {
    let frame = recv_until(conn, child, deadline, cancel)?;
    if frame.kind != kind {
        return Err(format!(
            "expected {kind:?} from the new process, got {:?}",
            frame.kind
        ));
    }
    Ok(frame)
}

/// The next frame, looking at the child, the deadline and shutdown every 100 ms.
fn recv_until(
    conn: &mut Conn,
    child: &mut Child,
    deadline: Instant,
    cancel: &AtomicBool,
) -> Result<UpgradeFrame, String> {
    let _ = conn
        .socket()
        .set_read_timeout(Some(Duration::from_millis(100)));
    loop {
        check(child, deadline, cancel)?;
        match conn.recv() {
            Ok(Some(frame)) => return Ok(frame),
            Ok(None) => {
                // It closed the connection: it is exiting; say how, if it already did.
                std::thread::sleep(Duration::from_millis(200));
                check(child, deadline, cancel)?;
                return Err(
                    "the new process closed the upgrade connection before it was ready".into(),
                );
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(format!("upgrade connection: {e}")),
        }
    }
}

/// Fails once the child exited, the deadline passed, or the process shuts down.
fn check(child: &mut Child, deadline: Instant, cancel: &AtomicBool) -> Result<(), String> {
    if let Ok(Some(status)) = child.try_wait() {
        return Err(format!(
            "the new process exited ({status}) before it was ready; its log says why"
        ));
    }
    if cancel.load(Ordering::SeqCst) {
        return Err("shutting down".into());
    }
    if Instant::now() >= deadline {
        return Err("the new process was not ready within upgrade_timeout".into());
    }
    Ok(())
}

/// Stops a new process that will not take over: SIGTERM, then SIGKILL after a grace period.
fn stop_child(child: &mut Child) {
    let pid = rustix::process::Pid::from_child(child);
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    let until = Instant::now() + STOP_GRACE;
    while Instant::now() < until {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}
