//! `auth.users[].filter_keys`: KEYS, SCAN and RANDOMKEY show only the keys the user may read.
//!
//! Redis checks key rules only on a command's key arguments, and these three have none: they
//! list every key whatever the user's `~` patterns. With `filter_keys` the merged reply is
//! filtered here: KEYS keeps the readable names, SCAN keeps its cursor and the readable names of
//! the page (a page may come back shorter, even empty, with the scan still going on, as Redis's
//! own MATCH does), RANDOMKEY asks again, up to [`RANDOM_TRIES`] times, until the key it got is
//! readable, and otherwise answers nil.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use crate::auth::User;
use crate::protocol::{Frame, Limits, Request};
use crate::router::{Call, Plan, Router};
use crate::upstream::Lane;

/// RANDOMKEY's tries before it answers nil: with a quarter of the keys readable, it finds one
/// 99.9 % of the time.
pub(super) const RANDOM_TRIES: usize = 24;

/// `call` (the reply to `command`) with the keys `user` may not read left out; other commands'
/// calls unchanged.
pub(super) fn filtered<'r>(
    router: &'r Router,
    user: &Arc<User>,
    command: &str,
    call: Call<'r>,
    request: &Request,
    lane: Lane,
) -> Call<'r> {
    let user = user.clone();
    match command {
        "keys" => Call::slow(async move { keys(call.await, &user) }),
        "scan" => Call::slow(async move { scan(call.await, &user) }),
        "randomkey" => {
            let request = request.clone();
            Call::slow(async move { random_key(router, call.await, &user, &request, lane).await })
        }
        _ => call,
    }
}

/// KEYS: the readable names (an error or anything unexpected passes unchanged).
fn keys(reply: Bytes, user: &User) -> Bytes {
    match Frame::from_bytes(reply.clone(), &Limits::default()) {
        Ok(Frame::Array(names)) => readable(names, user).to_bytes(),
        _ => reply,
    }
}

/// SCAN: the cursor, and the readable names of the page.
fn scan(reply: Bytes, user: &User) -> Bytes {
    match Frame::from_bytes(reply.clone(), &Limits::default()) {
        Ok(Frame::Array(mut parts)) if parts.len() == 2 => {
            let Frame::Array(names) = parts.pop().unwrap_or(Frame::Null) else {
                return reply;
            };
            parts.push(readable(names, user));
            Frame::Array(parts).to_bytes()
        }
        _ => reply,
    }
}

fn readable(names: Vec<Frame>, user: &User) -> Frame {
    Frame::Array(
        names
            .into_iter()
            .filter(|name| match name {
                Frame::Bulk(key) => user.may_read(key),
                _ => true,
            })
            .collect(),
    )
}

/// RANDOMKEY: a readable key, asking again while the one found is not; nil after
/// [`RANDOM_TRIES`] tries or on an empty keyspace.
async fn random_key(
    router: &Router,
    mut reply: Bytes,
    user: &User,
    request: &Request,
    lane: Lane,
) -> Bytes {
    for _ in 1..RANDOM_TRIES {
        match Frame::from_bytes(reply.clone(), &Limits::default()) {
            Ok(Frame::Bulk(key)) if !user.may_read(&key) => {}
            _ => return reply, // readable, nil (RESP2 or RESP3), or an error
        }
        let (plan, _) = router.planner().plan(request, &mut Vec::new());
        let Plan::Compound(compound) = plan else {
            return reply;
        };
        reply = router.fanout().start(compound, request, lane).await;
    }
    match Frame::from_bytes(reply.clone(), &Limits::default()) {
        Ok(Frame::Bulk(key)) if !user.may_read(&key) => {
            let mut nil = BytesMut::new();
            crate::protocol::write_null_in(&mut nil, lane.protocol());
            nil.freeze()
        }
        _ => reply,
    }
}
