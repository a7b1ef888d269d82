//! A session's life: idle waits and busy spells in turn, from the accepted connection until the
//! client is done or moves to another worker (see `mod.rs` on the two states, moving.rs on moves).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use super::super::clients::{Connected, Downstream};
use super::super::facade::Endpoint;
use super::super::movable::{Detached, Movable};
use super::busy;
use super::leaving::AtUpgrade;
use super::moving::{MovedClient, Moving};
use super::{Busy, Client, Wake};

/// Serves one client until it disconnects, sends QUIT, breaks the protocol, idles out, or the
/// proxy drains; or until it moves to another worker (returned, for [`hand_over`]). `facade`:
/// the client came in on a cluster-facade listener.
pub(crate) async fn serve<S>(
    stream: S,
    downstream: &Downstream,
    id: u64,
    peer: &Arc<str>,
    facade: Option<Box<Endpoint>>,
) -> Option<Moving>
where
    S: AsyncRead + AsyncWrite + Send + Unpin + Movable,
{
    let mut client = Client::new(stream, downstream, id, peer, facade);
    // `auth.max_unauthenticated_per_address`: refused before anything is read (boxed: the
    // refusal's write would otherwise be part of every session's future).
    if let Err(refusal) = client.state.connect(peer) {
        Box::pin(refuse(&mut client, refusal)).await;
        return None;
    }
    let end = run(&mut client).await;
    end.finish(client)
}

/// Answers a client refused at connect time, then closes it.
async fn refuse<S>(client: &mut Client<'_, S>, refusal: bytes::Bytes)
where
    S: AsyncRead + AsyncWrite + Send + Unpin,
{
    let _ = client.stream.writer().write_all(&refusal).await;
    client.close().await;
}

/// Serves a client that moved here from another worker: a busy spell first (it was busy when
/// it left, and its pipelining membership goes on), then as [`serve`] does. A subscribed client
/// from the previous process starts in subscribe mode instead.
pub(super) async fn resume<'d, S>(
    stream: S,
    downstream: &'d Downstream,
    peer: &'d Arc<str>,
    mut moved: MovedClient,
) -> Option<Moving>
where
    S: AsyncRead + AsyncWrite + Send + Unpin + Movable,
{
    let rejoin = moved.rejoin.take();
    let (mut client, pipelining) = Client::resume(stream, downstream, peer, moved);
    // A subscribed client from the previous process starts in subscribe mode (boxed: rare,
    // and this future lasts as long as the moved session).
    let subscribed = match rejoin {
        Some(rejoin) => {
            let (limits, max_reply_bytes) =
                (client.config.codec.clone(), client.config.caps.reply_bytes);
            Some(Box::pin(client.rejoin(*rejoin, &limits, max_reply_bytes)).await)
        }
        None => None,
    };
    let busy = Box::pin(busy::serve_busy(&mut client, pipelining, subscribed)).await;
    let end = match after_spell(&mut client, busy) {
        Some(end) => end,
        None => run(&mut client).await,
    };
    end.finish(client)
}

/// Idle waits and busy spells in turn until the session ends. The client is borrowed, not
/// moved in: an `async fn` keeps a moved-in argument twice, and this future is part of every
/// idle client's memory (568 bytes borrowed against 904 moved in, measured).
async fn run<S>(client: &mut Client<'_, S>) -> SessionEnding
where
    S: AsyncRead + AsyncWrite + Send + Unpin + Movable,
{
    loop {
        match client.wait_for_request().await {
            Wake::Request => {}
            Wake::Close => {
                // An upgrade handing clients over (leaving.rs) may take this one instead.
                match client.at_upgrade() {
                    AtUpgrade::No => {}
                    AtUpgrade::Leave => return SessionEnding::HandOver,
                    AtUpgrade::NotYet => continue,
                }
                client.close().await;
                return SessionEnding::Closed;
            }
        }
        // Boxed: its state exists only while the client is busy.
        let busy = Box::pin(busy::serve_busy(client, None, None)).await;
        if let Some(end) = after_spell(client, busy) {
            return end;
        }
    }
}

/// How a session ends after a busy spell, and whether a large value went through it.
enum SessionEnding {
    /// The connection is closed (nothing was owed).
    Closed,
    /// The client is done.
    Done(bool),
    /// It leaves for the process taking over (an upgrade, see leaving.rs).
    HandOver,
    /// It moves from worker `from` to worker `to` (see [`Busy::Move`]).
    Move {
        /// The worker it leaves.
        from: usize,
        /// The worker it goes to.
        to: usize,
        /// Its place in the pipelining count, moved with it.
        pipelining: Option<super::super::moves::Pipelining>,
        /// A large value went through the session: once it has moved, the thread gives the
        /// memory it used back to the system.
        large: bool,
    },
}

impl SessionEnding {
    /// Ends the session: nothing more for a client that is done, the move for one that moves;
    /// then memory a large value used goes back to the system.
    fn finish<S>(self, client: Client<'_, S>) -> Option<Moving>
    where
        S: AsyncRead + AsyncWrite + Send + Unpin + Movable,
    {
        let (moving, large) = match self {
            SessionEnding::Closed => (None, false),
            SessionEnding::Done(large) => {
                drop(client);
                (None, large)
            }
            SessionEnding::HandOver => {
                client.leave_for_upgrade();
                (None, false)
            }
            SessionEnding::Move {
                from,
                to,
                pipelining,
                large,
            } => (client.into_moving(from, to, pipelining), large),
        };
        crate::memory::give_back(large);
        moving
    }
}

/// A quiet moment after a busy spell (its state is freed). Whether the session ends here; if
/// it goes on and a large value went through, its memory goes back to the system (otherwise
/// this costs a load and a compare).
fn after_spell<S>(client: &mut Client<'_, S>, busy: Busy) -> Option<SessionEnding> {
    let large = client.input.take_large() | client.out.take_large();
    match busy {
        Busy::Idle => {
            crate::memory::give_back(large);
            None
        }
        Busy::Done => Some(SessionEnding::Done(large)),
        Busy::HandOver => Some(SessionEnding::HandOver),
        Busy::Move {
            from,
            to,
            pipelining,
        } => Some(SessionEnding::Move {
            from,
            to,
            pipelining,
            large,
        }),
    }
}

/// Sends a moved session to its new worker, which serves it from there; the client's
/// registration and worker count follow it.
pub(crate) fn hand_over(moving: Moving, mut client: Connected, peer: Arc<str>) {
    let handle = client
        .downstream
        .spread()
        .and_then(|spread| spread.moves())
        .and_then(|moves| moves.handle(moving.to))
        .cloned();
    let Some(handle) = handle else {
        return; // no such worker: dropping the socket closes the client
    };
    client.moved_to(moving.to);
    handle.spawn(resumed(moving, client, peer));
}

/// Serves, on this thread's runtime, a client a worker's event loop hands over (subscribe mode,
/// client tracking); `moved` holds what it sent that the loop did not run, the command that
/// made it leave first.
pub(crate) fn adopt(stream: Detached, moved: MovedClient, client: Connected, peer: Arc<str>) {
    let to = crate::workers::current().unwrap_or(0);
    let moving = Moving { to, stream, moved };
    tokio::spawn(resumed(moving, client, peer));
}

/// The moved session's task on its new worker (boxed: a session may move again, from there).
/// Also the task of a client adopted from the previous process (leaving.rs).
pub(super) fn resumed(
    moving: Moving,
    client: Connected,
    peer: Arc<str>,
) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        let downstream = &*client.downstream;
        let Moving { stream, moved, .. } = moving;
        let next = match attach(stream) {
            Ok(Attached::Tcp(stream)) => resume(stream, downstream, &peer, moved).await,
            Ok(Attached::Unix(stream)) => resume(stream, downstream, &peer, moved).await,
            Err(error) => {
                tracing::warn!(%error, client = client.id, "could not register a moved client's socket; closing it");
                None
            }
        };
        if let Some(next) = next {
            hand_over(next, client, peer);
        }
    })
}

/// A moved socket registered with this worker's reactor.
enum Attached {
    /// A TCP client.
    Tcp(tokio::net::TcpStream),
    /// A Unix-socket client.
    Unix(tokio::net::UnixStream),
}

fn attach(stream: Detached) -> std::io::Result<Attached> {
    Ok(match stream {
        Detached::Tcp(s) => Attached::Tcp(tokio::net::TcpStream::from_std(s)?),
        Detached::Unix(s) => Attached::Unix(tokio::net::UnixStream::from_std(s)?),
    })
}
