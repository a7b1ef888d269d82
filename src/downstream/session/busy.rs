//! A session while its client is busy: start each command as soon as it is parsed, write the
//! replies in the order the commands came, and go back to idle once the client has been quiet
//! for [`IDLE_TICK`] with nothing owed.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::task::Poll;
use std::time::Duration;

use bytes::Buf;
use futures_util::FutureExt;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;

use super::super::budget;
use super::super::listener::Downstream;
use super::super::pubsub;
use super::super::reply_batch::ReplyBatches;
use super::super::tracking;
use super::buffers::CHUNK;
use super::dispatch::{dispatch, facade_plan, protocol_error};
use super::failed_login::failed_login;
use super::near::Near;
use super::owed::{goes_idle, Owed};
use super::stamp::{key_position, Hot, Stamp};
use super::timer::{LazyTimer, OpTimer};
use super::{Busy, Client};
use crate::metrics::CommandTally;
use crate::protocol::{parse_request, Request};
use crate::router::{Call, Plan, Router};

/// Replies waiting for the rest of their read's replies are written anyway once this big: past
/// it, writing now is cheap per reply.
const HOLD_MAX: usize = 64 * 1024;

/// How often a session paused by `client.max_buffered_bytes_total` looks at the total again.
const BUDGET_RECHECK: Duration = Duration::from_millis(5);

/// A busy session with nothing owed looks this often whether its client said anything since the
/// last look; a client quiet for a whole tick goes idle (its busy state is freed): after one
/// tick for a client that sent one request, after one to two ticks of silence otherwise. A
/// client sending a command now and then stays busy and allocates nothing per command.
pub(super) const IDLE_TICK: Duration = Duration::from_millis(200);

/// Serves the client from its first bytes until it goes idle or the session ends.
pub(super) async fn serve_busy<'d, S>(c: &mut Client<'d, S>) -> Busy
where
    S: AsyncRead + AsyncWrite + Send + Unpin,
{
    let downstream: &'d Downstream = c.downstream;
    let router: &'d Router = &downstream.router;
    let metrics = &*downstream.metrics;
    let peer: &str = c.peer;
    // The request is kept (a reference count) for the slow log and the hot keys.
    let keep_raw = metrics.slowlog.is_enabled() || downstream.hotkeys.is_enabled();
    let hot = Hot {
        keys: &downstream.hotkeys,
        client: c.state.id,
    };
    let mut sampler = downstream.hotkeys.sampler(c.state.id);
    // Per-command series, added to the shared ones before each write to the client.
    let mut tally = CommandTally::new(metrics);
    // Replies owed to the client, oldest first, with what the metrics need to know about them.
    let mut calls: VecDeque<(Call<'_>, Stamp)> = VecDeque::new();
    let mut scratch = Vec::new();
    // One timer for the whole busy spell, armed for the oldest call's deadline, instead of one
    // per command. Deadlines grow along the queue, so when it fires only the front can be late.
    // With nothing owed it ticks every IDLE_TICK to see whether the client went quiet.
    let mut timer = OpTimer::default();
    timer.reset(Instant::now() + IDLE_TICK);
    // The client sent something since the last tick (the read that began the spell does not
    // count: a client that sent one request goes idle at the first tick).
    let mut heard = false;
    // Once set, no more commands are read; the session ends when every reply is written.
    let mut closing = false;
    // A command that must run alone (see `Transaction::is_exclusive`), waiting for the
    // commands before it to finish; and how many such commands are in `calls`.
    let mut parked: Option<Request> = None;
    let mut exclusive = 0usize;
    // Which replies may be written now: those to one read go out together (see reply_batch).
    let mut batches = ReplyBatches::default();
    // `client.request_timeout`: when the request now being received began, if it is incomplete.
    // Completing a request resets it, so trickling one byte at a time does not keep it alive.
    let mut partial_since: Option<Instant> = None;
    let mut request_timer = LazyTimer::default();
    // A timer to look again at `client.max_buffered_bytes_total` while paused by it.
    let mut budget_timer = LazyTimer::default();
    let mut budget_paused = false;
    // The clock read a turn ended with (a read or replies arriving), reused by the next turn:
    // one clock read per turn instead of two.
    let mut clock: Option<Instant> = Some(c.last_activity);
    let mut config = c.config.clone();
    let mut limits = config.limits();
    loop {
        if c.reload_if_changed() {
            config = c.config.clone();
            limits = config.limits();
        }
        // Start every complete command already buffered, up to the in-flight limit. One clock
        // read serves the whole batch.
        let now = clock.take().unwrap_or_else(Instant::now);
        // `client.max_buffered_bytes_total`, once per turn (a read, a write or a batch of
        // replies), not per command. Over it, a client owing us reads starts no more commands
        // either: their replies would pile up here (its buffered commands may be tiny, its
        // replies not).
        c.share.set(c.input.len() + c.out.len());
        let paused_now = !c.share.may_read(partial_since.is_some());
        if paused_now && !budget_paused {
            budget_timer.reset(Instant::now() + BUDGET_RECHECK);
        }
        budget_paused = paused_now;
        let starved = budget_paused && c.out.len() > budget::FLOOR;
        while !closing && calls.len() < config.max_in_flight && exclusive == 0 && !starved {
            let request = match parked.take() {
                Some(request) => request,
                // Nothing buffered: nothing to parse (most turns at `-P 1`).
                None if c.input.is_empty() => break,
                None => match parse_request(&mut c.input, &limits) {
                    Ok(Some(request)) => {
                        partial_since = None;
                        request
                    }
                    Ok(None) if c.input.len() < config.max_request_bytes => {
                        if !c.input.is_empty() && partial_since.is_none() {
                            partial_since = Some(now);
                            if !config.request_timeout.is_zero() && !request_timer.is_made() {
                                request_timer.reset(now + config.request_timeout);
                            }
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
                        let mut owed = Owed {
                            calls: &mut calls,
                            batches: &mut batches,
                            out: &mut c.out,
                            tally: &mut tally,
                            hot,
                            peer,
                        };
                        owed.push(call, Stamp::none(now), now);
                        break;
                    }
                },
            };
            let (plan, command) = router.plan(&request, &mut scratch);
            let key_arg = key_position(&plan, &scratch);
            let plan = match &c.facade {
                Some(facade) => facade_plan(facade, plan, command, &request, router, &c.state),
                None => plan,
            };
            let plan = c.state.gate(plan, || router.lookup(request.args()));
            let alone = c.state.tx.is_exclusive(&plan);
            if alone && !calls.is_empty() {
                parked = Some(request);
                break;
            }
            if let Plan::Sub(_) = plan {
                if !c.state.tx.is_open() {
                    // Subscribe mode takes the connection over until the client leaves it
                    // (and writes the replies before it).
                    tally.flush();
                    let left = c
                        .subscribe_mode(request, &limits, config.max_reply_bytes)
                        .await;
                    match left {
                        pubsub::Left::Normal => {}
                        pubsub::Left::Reset => c.state.reset(),
                        pubsub::Left::Close => closing = true,
                        pubsub::Left::Gone => return Busy::Done,
                    }
                    continue;
                }
            }
            let plan = tracking::intercept(downstream, &mut c.state, plan, &request);
            let mut near = (downstream.near_cache.as_ref())
                .map(|cache| Near::new(cache, command, &scratch, calls.is_empty()));
            let writing = near
                .as_mut()
                .and_then(|n| n.note_writes(&plan, &request, router, &c.state));
            // `CLIENT TRACKING on BCAST` answers once the nodes confirmed its prefixes.
            let call = match tracking::take_wait(&mut c.state) {
                Some(waiting) => waiting,
                None => dispatch(
                    router,
                    &mut c.inbox,
                    &mut c.state,
                    plan,
                    &request,
                    config.max_request_bytes,
                    now,
                    near,
                ),
            };
            let weight = if key_arg == 0 { 0 } else { sampler.sample() };
            let stamp = Stamp::new(command, &request, now, keep_raw, alone, c.state.protocol)
                .with_hot(key_arg, weight)
                .with_writing(writing);
            closing |= c.state.quit;
            if let Some((failures, limit_reached)) = c.state.take_failed_login() {
                closing |= failed_login(metrics, peer, &request, failures, limit_reached);
            }
            if call.is_ready() && calls.is_empty() {
                // Nothing ahead of it: straight to the output buffer.
                let reply = call.now_or_never().unwrap_or_default();
                c.out
                    .append(stamp.finish(&mut tally, hot, &reply, now, None, peer));
                continue;
            }
            if let Some(deadline) = call.deadline() {
                // Earlier than the armed deadline when the timer was ticking for idleness, or
                // after a reload shortened op_timeout.
                if timer.deadline().is_none_or(|armed| deadline < armed) {
                    timer.reset(deadline);
                }
            }
            exclusive += usize::from(alone);
            calls.push_back((call, stamp));
            batches.queued();
        }
        batches.end_of_read();
        // Every owed reply is in `out` (one command at a time, `-P 1`): written now, not in a
        // turn of its own, as the `select!` below would write first anyway. One turn of this
        // loop less per command, about 260 instructions (callgrind, 2026-11-26). A full socket
        // leaves the write to the `select!`, which waits for room.
        if calls.is_empty()
            && !c.out.is_empty()
            && batches.may_write(0, c.out.len(), HOLD_MAX.min(config.max_reply_bytes))
        {
            tally.flush();
            match c.write_now() {
                Ok(true) => batches.wrote(0, c.out.len()),
                Ok(false) => {}
                Err(()) => return Busy::Done, // client gone, as in the `select!`
            }
        }
        if !closing
            && calls.is_empty()
            && parked.is_none()
            && c.may_close_now()
            && c.closes_at_safe_point()
        {
            closing = true;
        }
        if closing && calls.is_empty() && c.out.is_empty() {
            c.close().await;
            return Busy::Done;
        }
        // While a command runs alone, read only enough to notice the client leaving.
        let waiting_alone = exclusive > 0 || parked.is_some();
        let can_read = !closing
            && !budget_paused
            && calls.len() < config.max_in_flight
            && c.out.len() < config.max_reply_bytes
            && (!waiting_alone || c.input.len() < CHUNK);
        let may_write = !c.out.is_empty()
            && batches.may_write(
                calls.len(),
                c.out.len(),
                HOLD_MAX.min(config.max_reply_bytes),
            );
        if may_write {
            // Whoever reads these replies finds their commands counted.
            tally.flush();
        }
        c.arm_timers();
        // Nothing held while there is nothing to hold: a waiting client keeps no buffer.
        c.input.release_if_empty();
        c.out.release_if_empty();
        let idle = config.idle_timeout;
        let latency = c.latency();
        tokio::select! {
            biased;
            reply = poll_fn(|cx| match calls.front_mut() {
                Some((call, _)) => call.poll_in(cx, c.inbox.as_deref_mut()),
                None => Poll::Pending,
            }), if !calls.is_empty() && c.out.len() < config.max_reply_bytes => {
                let now = Instant::now();
                clock = Some(now);
                let mut owed = Owed { calls: &mut calls, batches: &mut batches, out: &mut c.out, tally: &mut tally, hot, peer };
                // Take every following reply that is already here, to write them in one syscall.
                exclusive -= owed.take_replies(Some(reply), c.inbox.as_deref_mut(), latency, now, |call, inbox| call.try_now(inbox));
            }
            wrote = poll_fn(|cx| std::pin::Pin::new(&mut c.stream.writer()).poll_write(cx, &c.out[..])), if may_write => match wrote {
                Ok(n) if n > 0 => {
                    metrics.clients.bytes_sent.inc_by(n as u64);
                    c.out.advance(n);
                    batches.wrote(calls.len(), c.out.len());
                }
                _ => return Busy::Done, // client gone: owed replies are dropped with the session
            },
            read = poll_fn(|cx| c.input.poll_read_from(&mut c.stream.reader(), cx)), if can_read => match read {
                // Like Redis, a client that leaves while blocked is not waited for.
                Ok(0) | Err(_) if waiting_alone => return Busy::Done,
                Ok(0) | Err(_) => closing = true,
                Ok(n) => {
                    metrics.clients.bytes_received.inc_by(n as u64);
                    let now = Instant::now();
                    c.last_activity = now;
                    clock = Some(now);
                    heard = true;
                }
            },
            () = timer.fired() => {
                let now = Instant::now();
                // A call past its deadline whose reply is here anyway (it came while an earlier
                // call held up the queue) gets that reply, not the timeout.
                // Only first attempts are timed here (redirects and retries time themselves).
                let mut owed = Owed { calls: &mut calls, batches: &mut batches, out: &mut c.out, tally: &mut tally, hot, peer };
                exclusive -= owed.take_replies(None, c.inbox.as_deref_mut(), latency, now, |call, inbox| {
                    call.deadline()?;
                    match inbox {
                        Some(inbox) => call.try_now(Some(&mut *inbox)).or_else(|| call.expire(Some(inbox))),
                        None => call.try_now(None).or_else(|| call.expire(None)),
                    }
                });
                match calls.iter().find_map(|(call, _)| call.deadline()) {
                    Some(next) => timer.reset(next),
                    None => timer.reset(now + IDLE_TICK),
                }
                if calls.is_empty() && !std::mem::take(&mut heard) && goes_idle(c, &parked, closing, budget_paused, partial_since) {
                    return Busy::Idle;
                }
            }
            () = c.idle_timer.fired(), if !idle.is_zero() && calls.is_empty() && !closing => {
                // Re-armed from the last activity only when it fires, not on every read.
                if c.last_activity.elapsed() >= idle {
                    tracing::debug!(client = c.state.id, "closing idle client");
                    closing = true;
                } else {
                    c.idle_timer.reset(c.last_activity + idle);
                }
            }
            () = request_timer.fired(), if !config.request_timeout.is_zero() && partial_since.is_some() && !closing => {
                // Re-armed from the request's start only when it fires, not on every read.
                let started = partial_since.unwrap_or_else(Instant::now);
                if started.elapsed() >= config.request_timeout {
                    tracing::debug!(client = c.state.id, "closing client: request not completed within client.request_timeout");
                    closing = true;
                    let now = Instant::now();
                    let call = Call::ready(crate::router::redcar_error(format_args!(
                        "request not completed within {:?} (client.request_timeout); closing",
                        config.request_timeout
                    )));
                    let mut owed = Owed { calls: &mut calls, batches: &mut batches, out: &mut c.out, tally: &mut tally, hot, peer };
                    owed.push(call, Stamp::none(now), now);
                } else {
                    request_timer.reset(started + config.request_timeout);
                }
            }
            () = budget_timer.fired(), if budget_paused => {
                // Other sessions release bytes without telling anyone: look again now and then.
                budget_timer.reset(Instant::now() + BUDGET_RECHECK);
            }
            () = c.age_timer.fired(), if !config.max_age.is_zero() && !c.aged => {
                c.aged = true;
            }
            () = tracking::ready(&c.state), if c.state.tracking.is_some() && c.out.len() < config.max_reply_bytes => {
                // Invalidations go between replies, after those of the commands sent before.
                let now = Instant::now();
                let pushes = tracking::take_frames(&c.state);
                if !pushes.is_empty() {
                    let mut owed = Owed { calls: &mut calls, batches: &mut batches, out: &mut c.out, tally: &mut tally, hot, peer };
                    owed.push(Call::ready(pushes), Stamp::push(now), now);
                }
            }
            () = c.drain.started(), if !closing => closing = true,
            now_slow = c.slow.changed(), if c.slow.is_on() && !closing => {
                c.close_when_safe = now_slow;
            }
        }
    }
}
