//! The workers' event loops (`threading: per-core`): each worker thread runs one loop that owns
//! its clients' sockets and its share of every node's connections, so a one-key command goes from
//! the client's socket to the node's and back on one thread, in one pass, with no task, channel
//! or wake-up between its steps (docs/decisions/0001-one-loop-per-worker.md says why and what it
//! measured).
//!
//! # A GET, from socket to socket
//!
//! 1. `poll` returns: the client's socket is readable ([`Loop::run`], this file).
//! 2. [`LoopClient::run`](client::LoopClient) reads it into the client's input buffer and parses each
//!    complete request in place (`commands.rs`; `protocol/request.rs`).
//! 3. The command is decided once: the router's plan (`router/plan/mod.rs`: the command table,
//!    its key, the key's slot), then the cluster facade and the auth gate, which may answer it
//!    instead (`commands.rs`, `local.rs`).
//! 4. `Forwarder::first_hop` picks the slot's node by read policy from the slot map
//!    (`router/forward/direct.rs`, `resolve.rs`).
//! 5. The request's bytes are appended to this loop's connection to that node, with a note of
//!    whose reply comes back (`upstream/loop_conn.rs`, `wire.rs`); the client owes a reply
//!    (`replies.rs`).
//! 6. At the end of the turn every connection with something queued writes it, once for all
//!    the clients that queued (`conns.rs`).
//! 7. `poll` returns: the node's socket is readable. The connection reads and scans each reply
//!    frame (`wire.rs`, `protocol/scan.rs`) and hands it to the client in place
//!    (`arrivals.rs`).
//! 8. The reply is the oldest owed: it is recorded (`session/record.rs`, `metrics/tally.rs`)
//!    and appended to the client's output buffer, after it the replies that were waiting
//!    behind it.
//! 9. At the end of the turn the client's output is written (`client.rs`).
//!
//! Anything else (keys in several slots, transactions, blocking commands, scripts, redirects
//! and retries) runs as a call of the general path (`router::Call`), polled by the loop with a
//! waker that names the client; its node commands still go through the loop's connections. A
//! client that enters subscribe mode or turns on client tracking is handed to a session of the
//! general kind (`handoff.rs`).

mod accept;
mod arrivals;
mod chores;
mod client;
mod commands;
mod conns;
mod handoff;
mod listener;
mod moves;
mod replies;
mod setup;
mod socket;
mod thread_cpu;
mod timers;
mod tokens;
mod upgrade;
mod work;

pub(crate) use listener::{LoopListen, LoopListener};
pub(crate) use setup::{start, LoopSetup};
pub(crate) use work::Stop;

use std::sync::Arc;
use std::time::Duration;

use slab::Slab;
use tokio::time::Instant;

use super::clients::Downstream;
use crate::reactor::{Mail, Remote};
use arrivals::ToClients;
use client::{Fate, LoopClient};
use tokens::TokenKind;
use work::Work;

/// The client `token` names in `clients`, if it is still there (a late event or wake for a
/// client gone finds another generation, or nothing).
#[inline]
fn client_in<'a, 'd>(
    clients: &'a mut Slab<LoopClient<'d>>,
    token: u64,
) -> Option<&'a mut LoopClient<'d>> {
    let client = clients.get_mut(tokens::key(token))?;
    (client.token == token).then_some(client)
}

/// One worker's loop.
pub(super) struct Loop<'d> {
    /// The loop's poll: client sockets, node connections, listeners and the door's waker are
    /// registered with it.
    poll: mio::Poll,
    /// The loop's door: other threads post mail and wake tokens through it.
    remote: Arc<Remote>,
    /// The loop's clients by slab key; a token carries the key and the generation.
    clients: Slab<LoopClient<'d>>,
    /// Bumped for each client (tokens' generations).
    admitted: u32,
    /// The listening sockets this loop accepts on (none once draining).
    listeners: Vec<LoopListener>,
    /// What a client's handling needs besides the client (the router, the node connections, timers,
    /// lists of clients to run or write).
    work: Work<'d>,
    /// Tokens woken since the last turn (calls completing on other threads), taken from the door
    /// each turn.
    woken: Vec<u64>,
    /// Mail taken from the door each turn: listeners, moved clients, node connections to attach,
    /// stop.
    mail: Vec<Mail>,
    /// When the deadline sweep of commands sent in place runs next.
    next_sweep: Instant,
    /// When the chores (connection ticks, latency watch, accept retry, busy report) run next.
    next_chores: Instant,
    /// The loop thread's CPU time when the chores last reported its busy share to the placement
    /// (`spread.rs`): what it used since then is the time it served.
    cpu_reported: Duration,
    /// Reads this thread's CPU time, for the busy report.
    cpu: thread_cpu::ThreadCpu,
    /// Set once the proxy drains: no more clients, and those connected close when safe.
    draining: bool,
    /// Every worker's loop, in worker order (clients move between them).
    peers: Arc<[Arc<Remote>]>,
    /// The sessions' home, as clients' registrations hold it.
    home: Arc<Downstream>,
    /// Held while the loop may have clients: the drain waits for every holder to let go.
    done: Option<tokio::sync::mpsc::Sender<()>>,
    /// `client.close_idle_when_slow`: the latency watch's changes of mind.
    slow: Option<tokio::sync::watch::Receiver<bool>>,
    /// Wakes the loop when the proxy starts draining.
    drain: super::drain::DrainSignal<'d>,
    /// The waker the drain signal holds: it names the loop itself, so the drain wakes its poll.
    drain_waker: crate::reactor::LoopWaker,
}

impl<'d> Loop<'d> {
    /// Runs until told to stop (the workers end with the proxy).
    ///
    /// A failed `poll` (other than an interrupt) ends the loop and with it the worker's thread; in
    /// practice `poll` fails only when the process is out of resources.
    pub(super) fn run(&mut self) {
        let mut events = mio::Events::with_capacity(256);
        loop {
            let timeout = self.timeout();
            if let Err(error) = self.poll.poll(&mut events, timeout) {
                if error.kind() != std::io::ErrorKind::Interrupted {
                    tracing::error!(%error, worker = self.work.index, "event loop poll failed");
                    return;
                }
            }
            self.work.now = Instant::now();
            self.remote.awake(&mut self.woken, &mut self.mail);
            if !self.read_mail() {
                return;
            }
            for event in events.iter() {
                self.on_event(event);
            }
            self.settle();
        }
    }

    /// How long `poll` may sleep: not past the next timer or sweep, and not at all when
    /// something woke on this thread or arrived meanwhile. Counted from the clock read at the
    /// start of the turn just served (no second reading per turn): a timer may fire that turn's
    /// length late, microseconds against timers of milliseconds.
    fn timeout(&mut self) -> Option<Duration> {
        crate::reactor::take_woken_here(&mut self.woken);
        let listed = !self.work.lists.run.is_empty() || !self.work.lists.write.is_empty();
        if listed || !self.woken.is_empty() || self.remote.going_to_sleep() {
            return Some(Duration::ZERO);
        }
        let mut next = self.next_chores;
        if !self.work.lists.watched.is_empty() {
            next = next.min(self.next_sweep);
        }
        if let Some(timer) = self.work.timers.next() {
            next = next.min(timer);
        }
        Some(next.saturating_duration_since(self.work.now))
    }

    /// One socket is ready.
    fn on_event(&mut self, event: &mio::event::Event) {
        let token = event.token().0 as u64;
        match tokens::kind(token) {
            TokenKind::LoopClient => {
                let Some(client) = client_in(&mut self.clients, token) else {
                    return;
                };
                if event.is_writable() {
                    client.flags.blocked = false;
                    // Edge-triggered, the socket reports room after each ACK of what was
                    // written: only output waiting (or a close) needs the write pass.
                    if !client.link.out.is_empty() || client.closed() || client.flags.closing {
                        client.want_write(&mut self.work);
                    }
                }
                if event.is_readable() || event.is_read_closed() || event.is_error() {
                    client.flags.readable = true;
                    self.run_client(token);
                }
            }
            TokenKind::Conn => {
                let mut sink = ToClients {
                    clients: &mut self.clients,
                    work: &mut self.work,
                };
                let registry = self.poll.registry();
                let now = sink.work.now;
                // The connections live in `work` while the clients are borrowed beside it.
                let mut conns = std::mem::take(&mut sink.work.conns);
                conns.on_event(token, event, now, registry, &mut sink);
                sink.work.conns = conns;
            }
            TokenKind::Listener => self.accept(tokens::key(token)),
            TokenKind::Loop => {}
        }
    }

    /// Gives client `token` a turn; drops or hands it off when that ends it.
    fn run_client(&mut self, token: u64) {
        let Some(client) = self.clients.get_mut(tokens::key(token)) else {
            return;
        };
        if client.token != token {
            return;
        }
        client.flags.listed.run = false;
        client.poll_calls(&mut self.work, &self.remote);
        match client.run(&mut self.work) {
            // Clients leave only once the drain has started: one flag test per turn.
            Fate::Stays if self.draining => self.leave_if_upgrading(token),
            Fate::Stays => {}
            Fate::HandOff => self.hand_off(token),
        }
    }

    /// After the events: woken clients and connections, the turns they asked for, the writes,
    /// the timers.
    fn settle(&mut self) {
        let woken = std::mem::take(&mut self.woken);
        for &token in &woken {
            match tokens::kind(token) {
                TokenKind::LoopClient => self.run_client(token),
                TokenKind::Conn => self.work.conns.on_woken(token, self.work.now),
                TokenKind::Loop => {
                    self.drain_waker.rearm();
                    let mut cx = std::task::Context::from_waker(self.drain_waker.waker());
                    if self.drain.poll_started(&mut cx).is_ready() {
                        self.on_drain();
                    }
                }
                TokenKind::Listener => {}
            }
        }
        self.woken = woken;
        self.woken.clear();
        self.run_listed();
        self.flush_conns();
        self.write_clients();
        self.on_timers();
    }

    /// The clients that asked for another turn in this one.
    fn run_listed(&mut self) {
        while let Some(token) = self.work.lists.run.pop() {
            self.run_client(token);
        }
    }

    /// Every node connection with something queued writes it.
    fn flush_conns(&mut self) {
        if !self.work.conns.any_dirty() {
            // The turn of a reply: nothing to write to a node (and no move of the connections).
            return;
        }
        let mut conns = std::mem::take(&mut self.work.conns);
        let mut sink = ToClients {
            clients: &mut self.clients,
            work: &mut self.work,
        };
        conns.flush(&self.remote, self.poll.registry(), &mut sink);
        self.work.conns = conns;
        // A failed connection handed commands back to the general path: poll them now.
        self.run_listed();
    }

    /// Every client with replies writes them; those that finished closing go.
    fn write_clients(&mut self) {
        let mut listed = std::mem::take(&mut self.work.lists.write);
        for token in listed.drain(..) {
            let Some(client) = client_in(&mut self.clients, token) else {
                continue;
            };
            client.flags.listed.write = false;
            let before = client.link.out.len();
            let gone = client.write_out(&mut self.work).is_err();
            client.flags.gone |= gone;
            if before > super::budget::FLOOR {
                // What it wrote no longer counts against the buffer budget.
                client
                    .books
                    .share
                    .set(client.link.input.len() + client.link.out.len());
            }
            if client.link.out.len() < before && (client.flags.stalled || client.parked.is_some()) {
                // Room in its output: a client stopped at `max_reply_bytes`, or waiting to
                // hand off once its replies are out, goes on.
                client.want_run(&mut self.work);
            }
            client.close_if_asked(&self.work);
            if client.closed() {
                self.drop_client(token);
            } else {
                client.release_buffers();
                self.move_if_wanted(token);
                if self.draining {
                    self.leave_if_upgrading(token);
                }
            }
        }
        if self.work.lists.write.is_empty() {
            self.work.lists.write = listed;
        }
    }

    /// The loop's mail; `false` when the loop is to stop.
    fn read_mail(&mut self) -> bool {
        for mail in std::mem::take(&mut self.mail) {
            let mail = match mail.downcast::<crate::upstream::ConnAttach>() {
                Ok(attach) => {
                    self.work.conns.attach(*attach, &self.remote);
                    continue;
                }
                Err(mail) => mail,
            };
            let mail = match mail.downcast::<crate::upstream::ConnEvent>() {
                Ok(event) => {
                    let mut conns = std::mem::take(&mut self.work.conns);
                    let mut sink = ToClients {
                        clients: &mut self.clients,
                        work: &mut self.work,
                    };
                    conns.on_connected(*event, self.poll.registry(), &mut sink);
                    self.work.conns = conns;
                    continue;
                }
                Err(mail) => mail,
            };
            let mail = match mail.downcast::<LoopListen>() {
                Ok(listen) => {
                    self.listen(listen.0);
                    continue;
                }
                Err(mail) => mail,
            };
            match mail.downcast::<Stop>() {
                Ok(_) => return false,
                Err(mail) => self.adopt(mail),
            }
        }
        true
    }
}
