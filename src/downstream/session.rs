//! One client connection: parse its commands, start each as soon as it arrives, and write the
//! replies back in the order the commands came, whatever order the nodes answer in.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::task::Poll;

use bytes::{Buf, Bytes, BytesMut};
use futures_util::FutureExt;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;
use tokio::time::{sleep_until, Instant};

use super::budget;
use super::facade::Endpoint;
use super::listener::Downstream;
use super::local::ClientState;
use super::pubsub;
use super::reply_batch::ReplyBatches;
use super::slow::LatencyWatch;
use super::transaction::Step;
use crate::commands::Local;
use crate::metrics::{CommandTally, Metrics};
use crate::protocol::{parse_request, Limits, Request};
use crate::router::{Call, Plan, Router};
use crate::upstream::Inbox;

const READ_CHUNK: usize = 16 * 1024;

/// Replies waiting for the rest of their read's replies are written anyway once this big: past
/// it, writing now is cheap per reply.
const HOLD_MAX: usize = 64 * 1024;

/// How often a session paused by `client.max_buffered_bytes_total` looks at the total again.
const BUDGET_RECHECK: std::time::Duration = std::time::Duration::from_millis(5);

/// Serves one client until it disconnects, sends QUIT, breaks the protocol, idles out, or the
/// proxy drains. `facade`: the client came in on a cluster-facade listener.
pub async fn serve<S>(
    stream: S,
    downstream: &Downstream,
    id: u64,
    peer: &str,
    facade: Option<Endpoint>,
) where
    S: AsyncRead + AsyncWrite + Send + Unpin,
{
    let router: &Router = &downstream.router;
    let metrics: &Metrics = &downstream.metrics;
    // The reloadable settings this session uses, renewed when a reload bumps the generation.
    let (mut generation, mut config, users) = downstream.snapshot();
    let mut limits = config.limits();
    let (mut reader, mut writer) = tokio::io::split(stream);
    let mut state = ClientState::new(id, users);
    state.cluster_mode = facade.is_some();
    // This client's connection to every node (see `Node::send`).
    let lane = state.id as usize;
    let keep_raw = metrics.slowlog.is_enabled();
    // Per-command series, added to the shared ones before each write to the client.
    let mut tally = CommandTally::new(metrics);
    let mut input = BytesMut::with_capacity(READ_CHUNK);
    let mut out = BytesMut::with_capacity(READ_CHUNK);
    // Replies owed to the client, oldest first, with what the metrics need to know about them.
    let mut calls: VecDeque<(Call<'_>, Stamp)> = VecDeque::new();
    // Where the nodes put the replies to this client's forwarded commands (see upstream::inbox).
    let mut inbox = Inbox::default();
    let mut scratch = Vec::with_capacity(8);
    // One timer for the whole session, armed for the oldest call's deadline, instead of one per
    // command. Deadlines grow along the queue, so when it fires only the front can be late.
    let mut timer = Box::pin(sleep_until(Instant::now() + router.op_timeout()));
    let mut timer_armed = false;
    // Once set, no more commands are read; the session ends when every reply is written.
    let mut closing = false;
    let mut last_activity = Instant::now();
    // A command that must run alone (see `Transaction::is_exclusive`), waiting for the
    // commands before it to finish; and how many such commands are in `calls`.
    let mut parked: Option<Request> = None;
    let mut exclusive = 0usize;
    // Which replies may be written now: those to one read go out together (see reply_batch).
    let mut batches = ReplyBatches::default();
    // `client.max_age`: once reached, the client is closed at the next safe point.
    // (One timer made once: select! builds every branch's future on every turn, even disabled.)
    let connected_at = Instant::now();
    let mut age_timer = Box::pin(sleep_until(connected_at + config.max_age));
    let mut idle_timer = Box::pin(sleep_until(Instant::now() + config.idle_timeout));
    // `client.request_timeout`: when the request now being received began, if it is incomplete.
    // Completing a request resets it, so trickling one byte at a time does not keep it alive.
    let mut partial_since: Option<Instant> = None;
    let mut request_timer = Box::pin(sleep_until(Instant::now() + config.request_timeout));
    let mut aged = false;
    // `client.close_idle_when_slow`: the latency watch if it is on, its state changes, and
    // whether this client is to be closed at its next safe point.
    // (Off, the select! below has no latency branch to poll: that costs every turn.)
    let mut latency = config.close_idle_when_slow.then_some(&*downstream.latency);
    let mut slow = latency.map(LatencyWatch::subscribe);
    let mut close_when_safe = false;
    // This session's part of `client.max_buffered_bytes_total`, and a timer to look again at
    // the total while paused by it (made once, reset only while paused).
    let mut share = downstream.budget.share(id);
    // Shutdown: close once nothing is owed (a flag read per turn, see drain.rs).
    let mut drain = downstream.drain.signal(id);
    let mut budget_timer = Box::pin(sleep_until(Instant::now()));
    let mut budget_paused = false;
    // The clock read a turn ended with (a read or replies arriving), reused by the next turn:
    // one clock read per turn instead of two.
    let mut clock: Option<Instant> = None;
    loop {
        if downstream.generation() != generation {
            // A reload: new limits and timeouts from now on, and the user is checked again.
            let users;
            (generation, config, users) = downstream.snapshot();
            limits = config.limits();
            latency = config.close_idle_when_slow.then_some(&*downstream.latency);
            if latency.is_none() {
                slow = None;
                close_when_safe = false;
            } else if slow.is_none() {
                slow = latency.map(LatencyWatch::subscribe);
            }
            aged = false;
            age_timer.as_mut().reset(connected_at + config.max_age);
            state.reauthorize(users);
        }
        // Start every complete command already buffered, up to the in-flight limit. One clock
        // read serves the whole batch.
        let now = clock.take().unwrap_or_else(Instant::now);
        // `client.max_buffered_bytes_total`, once per turn (a read, a write or a batch of
        // replies), not per command. Over it, a client owing us reads starts no more commands
        // either: their replies would pile up here (its buffered commands may be tiny, its
        // replies not).
        share.set(input.len() + out.len());
        let paused_now = !share.may_read(partial_since.is_some());
        if paused_now && !budget_paused {
            budget_timer.as_mut().reset(Instant::now() + BUDGET_RECHECK);
        }
        budget_paused = paused_now;
        let starved = budget_paused && out.len() > budget::FLOOR;
        while !closing && calls.len() < config.max_in_flight && exclusive == 0 && !starved {
            let request = match parked.take() {
                Some(request) => request,
                None => match parse_request(&mut input, &limits) {
                    Ok(Some(request)) => {
                        partial_since = None;
                        request
                    }
                    Ok(None) if input.len() < config.max_request_bytes => {
                        if !input.is_empty() {
                            partial_since.get_or_insert(now);
                        }
                        break;
                    }
                    broken => {
                        // A protocol error, or a request too big to ever complete: say so, close.
                        let reason = match broken {
                            Err(e) => e.to_string(),
                            _ => "request exceeds client.max_request_bytes".to_string(),
                        };
                        closing = true;
                        let call = protocol_error(&reason);
                        let stamp = Stamp::none(now);
                        push(
                            &mut calls,
                            &mut batches,
                            call,
                            stamp,
                            &mut out,
                            &mut tally,
                            peer,
                            now,
                        );
                        break;
                    }
                },
            };
            let (plan, command) = router.plan(&request, &mut scratch);
            let plan = match &facade {
                Some(facade) => facade_plan(facade, plan, command, &request, router, &state),
                None => plan,
            };
            let plan = state.gate(plan, || router.lookup(request.args()));
            let alone = state.tx.is_exclusive(&plan);
            if alone && !calls.is_empty() {
                parked = Some(request);
                break;
            }
            if let Plan::Sub(_) = plan {
                if !state.tx.is_open() {
                    // Subscribe mode takes the connection over until the client leaves it
                    // (and writes the replies before it).
                    tally.flush();
                    let left = pubsub::serve(
                        router,
                        request,
                        &mut reader,
                        &mut writer,
                        &mut input,
                        &mut out,
                        &limits,
                        metrics,
                        config.max_reply_bytes,
                        &mut drain,
                        lane,
                        &state,
                    )
                    .await;
                    last_activity = Instant::now();
                    match left {
                        pubsub::Left::Normal => {}
                        pubsub::Left::Reset => state.reset(),
                        pubsub::Left::Close => closing = true,
                        pubsub::Left::Gone => return,
                    }
                    continue;
                }
            }
            let call = dispatch(
                router,
                &mut inbox,
                &mut state,
                plan,
                &request,
                lane,
                config.max_request_bytes,
                now,
            );
            let stamp = Stamp::new(command, &request, now, keep_raw, alone);
            closing |= state.quit;
            if call.is_ready() && calls.is_empty() {
                // Nothing ahead of it: straight to the output buffer.
                let reply = call.now_or_never().unwrap_or_default();
                stamp.finish(&mut tally, &reply, now, None, peer);
                out.extend_from_slice(&reply);
                continue;
            }
            if let Some(deadline) = call.deadline() {
                // Earlier than the armed deadline only after a reload shortened op_timeout (or
                // when the timer is left armed from finished calls).
                if !timer_armed || deadline < timer.deadline() {
                    timer.as_mut().reset(deadline);
                    timer_armed = true;
                }
            }
            exclusive += usize::from(alone);
            calls.push_back((call, stamp));
            batches.queued();
        }
        batches.end_of_read();
        if aged && !closing && at_safe_point(&calls, &out, &input, &parked, &state) {
            metrics.clients_closed_max_age.inc();
            tracing::debug!(client = state.id, "closing client at client.max_age");
            closing = true;
        }
        if close_when_safe && !closing && at_safe_point(&calls, &out, &input, &parked, &state) {
            downstream.metrics.clients_closed_slow().inc();
            tracing::debug!(
                client = state.id,
                "closing idle client: latency above baseline"
            );
            closing = true;
        }
        if closing && calls.is_empty() && out.is_empty() {
            let _ = writer.shutdown().await;
            return;
        }
        // While a command runs alone, read only enough to notice the client leaving.
        let waiting_alone = exclusive > 0 || parked.is_some();
        let can_read = !closing
            && !budget_paused
            && calls.len() < config.max_in_flight
            && out.len() < config.max_reply_bytes
            && (!waiting_alone || input.len() < READ_CHUNK);
        let may_write = !out.is_empty()
            && batches.may_write(calls.len(), out.len(), HOLD_MAX.min(config.max_reply_bytes));
        if may_write {
            // Whoever reads these replies finds their commands counted.
            tally.flush();
        }
        let idle = config.idle_timeout;
        tokio::select! {
            biased;
            reply = poll_fn(|cx| match calls.front_mut() {
                Some((call, _)) => call.poll_in(cx, Some(&mut inbox)),
                None => Poll::Pending,
            }), if !calls.is_empty() && out.len() < config.max_reply_bytes => {
                let now = Instant::now();
                clock = Some(now);
                let mut reply = Some(reply);
                // Take every following reply that is already here, to write them in one syscall.
                while let Some(bytes) = reply.take().or_else(|| calls.front_mut().and_then(|(call, _)| call.try_now(Some(&mut inbox)))) {
                    if let Some((call, stamp)) = calls.pop_front() {
                        exclusive -= usize::from(stamp.alone);
                        note_latency(latency, &stamp, now);
                        stamp.finish(&mut tally, &bytes, now, call.node(), peer);
                    }
                    out.extend_from_slice(&bytes);
                }
            }
            wrote = writer.write(&out), if may_write => match wrote {
                Ok(n) if n > 0 => {
                    metrics.bytes_sent.inc_by(n as u64);
                    out.advance(n);
                    batches.wrote(calls.len(), out.len());
                }
                _ => return, // client gone: owed replies are dropped with the session
            },
            read = reader.read_buf(&mut input), if can_read => match read {
                // Like Redis, a client that leaves while blocked is not waited for.
                Ok(0) | Err(_) if waiting_alone => return,
                Ok(0) | Err(_) => closing = true,
                Ok(n) => {
                    metrics.bytes_received.inc_by(n as u64);
                    let now = Instant::now();
                    last_activity = now;
                    clock = Some(now);
                    if input.capacity() - input.len() < 1024 {
                        input.reserve(READ_CHUNK);
                    }
                }
            },
            () = &mut timer, if timer_armed => {
                let now = Instant::now();
                // A call past its deadline whose reply is here anyway (it came while an earlier
                // call held up the queue) gets that reply, not the timeout.
                // Only first attempts are timed here (redirects and retries time themselves).
                while let Some(reply) = calls.front_mut().and_then(|(call, _)| {
                    call.deadline()?;
                    call.try_now(Some(&mut inbox)).or_else(|| call.expire(Some(&mut inbox)))
                }) {
                    if let Some((call, stamp)) = calls.pop_front() {
                        exclusive -= usize::from(stamp.alone);
                        note_latency(latency, &stamp, now);
                        stamp.finish(&mut tally, &reply, now, call.node(), peer);
                    }
                    out.extend_from_slice(&reply);
                }
                match calls.iter().find_map(|(call, _)| call.deadline()) {
                    Some(next) => timer.as_mut().reset(next),
                    None => timer_armed = false,
                }
            }
            () = &mut idle_timer, if !idle.is_zero() && calls.is_empty() && !closing => {
                // Re-armed from the last activity only when it fires, not on every read.
                if last_activity.elapsed() >= idle {
                    tracing::debug!(client = state.id, "closing idle client");
                    closing = true;
                } else {
                    idle_timer.as_mut().reset(last_activity + idle);
                }
            }
            () = &mut request_timer, if !config.request_timeout.is_zero() && partial_since.is_some() && !closing => {
                // Re-armed from the request's start only when it fires, not on every read.
                let started = partial_since.unwrap_or_else(Instant::now);
                if started.elapsed() >= config.request_timeout {
                    tracing::debug!(client = state.id, "closing client: request not completed within client.request_timeout");
                    closing = true;
                    let now = Instant::now();
                    let call = Call::ready(crate::router::redcar_error(format_args!(
                        "request not completed within {:?} (client.request_timeout); closing",
                        config.request_timeout
                    )));
                    push(&mut calls, &mut batches, call, Stamp::none(now), &mut out, &mut tally, peer, now);
                } else {
                    request_timer.as_mut().reset(started + config.request_timeout);
                }
            }
            () = &mut budget_timer, if budget_paused => {
                // Other sessions release bytes without telling anyone: look again now and then.
                budget_timer.as_mut().reset(Instant::now() + BUDGET_RECHECK);
            }
            () = &mut age_timer, if !config.max_age.is_zero() && !aged => {
                aged = true;
            }
            () = drain.started(), if !closing => closing = true,
            now_slow = slow_changed(&mut slow), if slow.is_some() && !closing => {
                close_when_safe = now_slow;
            }
        }
    }
}

/// True when closing the client loses nothing and breaks no state: no reply owed or unwritten,
/// no command unread, no transaction or WATCH open (subscribe mode never reaches here).
fn at_safe_point(
    calls: &VecDeque<(Call<'_>, Stamp)>,
    out: &BytesMut,
    input: &BytesMut,
    parked: &Option<Request>,
    state: &ClientState,
) -> bool {
    calls.is_empty()
        && out.is_empty()
        && input.is_empty()
        && parked.is_none()
        && !state.tx.is_open()
        && state.tx.watch.slot().is_none()
}

/// Feeds `client.close_idle_when_slow` (one atomic add) when it is on.
#[inline]
fn note_latency(latency: Option<&LatencyWatch>, stamp: &Stamp, now: Instant) {
    if let Some(watch) = latency {
        watch.record(now.saturating_duration_since(stamp.started));
    }
}

/// The next change of the latency state (true: slow). Never resolves without a watch, or once
/// the watch is gone.
async fn slow_changed(slow: &mut Option<watch::Receiver<bool>>) -> bool {
    if let Some(receiver) = slow {
        if receiver.changed().await.is_ok() {
            return *receiver.borrow_and_update();
        }
    }
    std::future::pending().await
}

/// On a cluster-facade listener, the facade's own reply replaces the plan of the commands it
/// answers (still subject to authentication, which runs after). Inside MULTI the usual plan
/// stands: those commands cannot be queued through redcar.
fn facade_plan(
    facade: &Endpoint,
    plan: Plan,
    command: &str,
    request: &Request,
    router: &Router,
    state: &ClientState,
) -> Plan {
    if state.tx.is_open() {
        return plan;
    }
    let ready = || router.cluster().is_ready();
    match facade.answer(command, request.args(), ready) {
        Some(reply) => Plan::Reply(reply),
        None => plan,
    }
}

/// Starts one planned command: forwarded commands are queued on their node right away.
#[allow(clippy::too_many_arguments)]
fn dispatch<'r>(
    router: &'r Router,
    inbox: &mut Inbox,
    state: &mut ClientState,
    plan: Plan,
    request: &Request,
    lane: usize,
    max_tx_bytes: usize,
    now: Instant,
) -> Call<'r> {
    let rewritten = match &plan {
        Plan::Multi(multi) if state.tx.is_open() && multi.script_slot().is_some() => {
            router.evalsha_as_eval(request)
        }
        _ => None,
    };
    let raw = rewritten.as_ref().unwrap_or(request.raw());
    match state.tx.step(plan, raw, max_tx_bytes) {
        Step::Serve(plan) => serve_plan(router, inbox, state, plan, request, lane, now),
        Step::Reply(reply) => Call::ready(reply),
        Step::Exec {
            payload,
            frames,
            slot,
            backend: None,
        } => {
            match slot {
                Some(slot) => state.written.note(slot),
                None => state.written.note_everywhere(),
            }
            router.exec(payload, frames, slot, lane)
        }
        // A prefix route's backend: WAIT does not follow it (as for other routed writes).
        Step::Exec {
            payload,
            frames,
            slot,
            backend,
        } => router.exec_on(backend, payload, frames, slot, lane),
        Step::ExecWatched {
            payload,
            frames,
            slot,
            backend,
        } => router.exec_watched(state.tx.watch.clone(), payload, frames, slot, backend),
        Step::Watch {
            slot,
            backend,
            payload,
        } => {
            let payload = payload.unwrap_or_else(|| request.raw().clone());
            router.watch_on(state.tx.watch.clone(), backend, payload, slot)
        }
        Step::Unwatch { reply } => {
            if reply.starts_with(b"+RESET") {
                state.reset();
            }
            router.unwatch(state.tx.watch.clone(), reply)
        }
    }
}

fn serve_plan<'r>(
    router: &'r Router,
    inbox: &mut Inbox,
    state: &mut ClientState,
    plan: Plan,
    request: &Request,
    lane: usize,
    now: Instant,
) -> Call<'r> {
    match plan {
        Plan::Slot { slot, write } => {
            if write {
                state.written.note(slot);
            }
            router.forward(
                Some(inbox),
                request.raw().clone(),
                Some(slot),
                write,
                lane,
                now,
            )
        }
        // Keyless commands whose write-ness is unknown are treated as writes: never re-sent.
        Plan::AnyNode => router.forward(Some(inbox), request.raw().clone(), None, true, lane, now),
        Plan::Multi(multi) => {
            // Splits, fan-outs and scripts: where they wrote is not tracked; WAIT asks everyone.
            state.written.note_everywhere();
            router.start(multi, request, lane)
        }
        Plan::Wait { replicas, timeout } => router.wait(&state.written, replicas, timeout, lane),
        Plan::Blocking {
            slot,
            write,
            timeout,
        } => {
            if write {
                state.written.note(slot);
            }
            router.blocking(request.raw().clone(), slot, write, timeout)
        }
        Plan::Local(Local::Reset) => {
            state.reset();
            Call::ready(state.answer(Local::Reset, request.args()))
        }
        Plan::Local(local) => Call::ready(state.answer(local, request.args())),
        Plan::Reply(reply) => Call::ready(reply),
        // Handled by the transaction rules and subscribe mode before getting here.
        Plan::Tx(..) | Plan::Sub(_) => Call::ready(crate::router::redcar_error(
            "SUBSCRIBE inside MULTI is not supported",
        )),
    }
}

/// Queues a reply that is not to a command (protocol errors) behind the owed ones.
#[allow(clippy::too_many_arguments)]
fn push<'r>(
    calls: &mut VecDeque<(Call<'r>, Stamp)>,
    batches: &mut ReplyBatches,
    call: Call<'r>,
    stamp: Stamp,
    out: &mut BytesMut,
    tally: &mut CommandTally,
    peer: &str,
    now: Instant,
) {
    if calls.is_empty() {
        let reply = call.now_or_never().unwrap_or_default();
        stamp.finish(tally, &reply, now, None, peer);
        out.extend_from_slice(&reply);
    } else {
        calls.push_back((call, stamp));
        batches.queued();
    }
}

/// Redis's own wording, so clients recognise it; the client is closed after it.
fn protocol_error(reason: &str) -> Call<'static> {
    let mut reply = BytesMut::with_capacity(reason.len() + 24);
    reply.extend_from_slice(b"-ERR Protocol error: ");
    reply.extend_from_slice(reason.replace(['\r', '\n'], " ").as_bytes());
    reply.extend_from_slice(b"\r\n");
    Call::ready(reply.freeze())
}

/// What the metrics and the slow log need to know about one command.
struct Stamp {
    command: &'static str,
    started: Instant,
    /// The request, kept (a reference count, not a copy) so a slow command's key can be logged.
    raw: Option<Bytes>,
    /// It runs alone (see `Transaction::is_exclusive`).
    alone: bool,
}

impl Stamp {
    /// `keep_raw` only when the slow log is on: otherwise the request is not needed afterwards.
    fn new(
        command: &'static str,
        request: &Request,
        now: Instant,
        keep_raw: bool,
        alone: bool,
    ) -> Stamp {
        Stamp {
            command,
            started: now,
            raw: keep_raw.then(|| request.raw().clone()),
            alone,
        }
    }

    /// For replies that are not to a command (protocol errors).
    fn none(now: Instant) -> Stamp {
        Stamp {
            command: "protocol_error",
            started: now,
            raw: None,
            alone: false,
        }
    }

    /// Records the finished command; slow ones also go to the slow log.
    fn finish(
        self,
        tally: &mut CommandTally,
        reply: &[u8],
        now: Instant,
        node: Option<&str>,
        peer: &str,
    ) {
        let elapsed = now.saturating_duration_since(self.started);
        let error = reply.first() == Some(&b'-');
        if tally.record(self.command, elapsed, error) {
            let key = self.raw.map(|raw| first_argument(&raw)).unwrap_or_default();
            tally
                .metrics()
                .slowlog
                .push(elapsed, self.command, &key, node.unwrap_or(""), peer);
        }
    }
}

/// The argument after the command name (the key, for most commands), parsed again from the raw
/// request: only slow commands pay for it.
fn first_argument(raw: &Bytes) -> Bytes {
    let mut buf = BytesMut::from(&raw[..]);
    match parse_request(&mut buf, &Limits::default()) {
        Ok(Some(request)) => request.args().get(1).cloned().unwrap_or_default(),
        _ => Bytes::new(),
    }
}
