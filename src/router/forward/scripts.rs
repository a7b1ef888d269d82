//! NOSCRIPT healing: remembers Lua scripts seen in EVAL and SCRIPT LOAD (bounded), and when an
//! EVALSHA gets `-NOSCRIPT` from a node, loads the script there and retries once.
//!
//! Why healing is needed behind a proxy: a client loads a script once and then calls it by hash,
//! but redcar may send that EVALSHA to any primary (whichever owns the keys), and after a failover
//! or a slot move the node that runs it may never have seen the script. Only scripts redcar itself
//! saw in an EVAL or SCRIPT LOAD can be healed; the cache is bounded (oldest out first) and shared
//! by every client, since a sha1 names the same body for everyone.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use bytes::Bytes;
use tokio::time::Instant;

use super::call::Call;
use super::Forwarder;
use crate::protocol::Request;
use crate::router::replies::encode_command;
use crate::upstream::Lane;

/// Scripts remembered; the oldest is forgotten first.
const CAPACITY: usize = 1024;

/// sha1 (lowercase hex) → script body, bounded to [`CAPACITY`] entries.
#[derive(Default)]
pub(in crate::router) struct ScriptCache {
    /// One lock for the whole cache: it is taken on EVAL and SCRIPT LOAD and on a NOSCRIPT, never
    /// on the plain command path.
    inner: Mutex<Known>,
}

#[derive(Default)]
struct Known {
    /// sha1 (lowercase hex) → the script's body.
    bodies: HashMap<String, Bytes>,
    /// The sha1s in the order they were first remembered, oldest first: what goes when the cache is
    /// full.
    order: VecDeque<String>,
}

/// The sha1 Redis names a script by: lowercase hex of the body's SHA-1.
pub(super) fn sha1_hex(body: &[u8]) -> String {
    crate::values::sha1_hex(body)
}

impl ScriptCache {
    /// Remembers `body` under its sha1.
    ///
    /// A body already known keeps its place (the order is of first sight, not of use). Called for
    /// every EVAL and SCRIPT LOAD, before they are forwarded, so an EVALSHA later in the pipeline
    /// can be healed.
    pub(crate) fn remember(&self, body: &Bytes) {
        let sha = sha1_hex(body);
        let mut known = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if known.bodies.contains_key(&sha) {
            return;
        }
        if known.order.len() >= CAPACITY {
            if let Some(oldest) = known.order.pop_front() {
                known.bodies.remove(&oldest);
            }
        }
        known.order.push_back(sha.clone());
        known.bodies.insert(sha, body.clone());
    }

    /// The body of the script named `sha` (any case), if remembered.
    pub(crate) fn body(&self, sha: &[u8]) -> Option<Bytes> {
        let sha = String::from_utf8_lossy(sha).to_ascii_lowercase();
        let known = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        known.bodies.get(&sha).cloned()
    }
}

impl Forwarder {
    /// Inside MULTI a NOSCRIPT cannot be healed (EXEC has already run the rest), so an
    /// EVALSHA / EVALSHA_RO whose script redcar knows is queued as EVAL / EVAL_RO of that body:
    /// the same result, and the node learns the script. `None`: not one of those, or unknown.
    pub(crate) fn evalsha_as_eval(&self, request: &Request) -> Option<Bytes> {
        let args = request.args();
        let name = args.first()?;
        let eval: &[u8] = if name.eq_ignore_ascii_case(b"evalsha") {
            b"EVAL"
        } else if name.eq_ignore_ascii_case(b"evalsha_ro") {
            b"EVAL_RO"
        } else {
            return None;
        };
        let body = self.scripts.body(args.get(1)?)?;
        let rest = args.skip(2).iter();
        let all: Vec<&[u8]> = [eval, &body[..]].into_iter().chain(rest).collect();
        Some(encode_command(all.into_iter()))
    }

    /// EVAL / EVAL_RO: remember the script, then forward as usual.
    ///
    /// `write` is what the plan decided for the command; it decides whether the script may be
    /// sent to a replica and whether it may be sent again after a lost connection.
    pub(in crate::router) fn start_eval(
        &self,
        request: &Request,
        slot: Option<u16>,
        write: bool,
        lane: Lane,
    ) -> Call<'_> {
        if let Some(body) = request.args().bytes(1) {
            self.scripts.remember(&body);
        }
        self.forward(
            None,
            request.raw().clone(),
            slot,
            write,
            lane,
            Instant::now(),
        )
    }

    /// EVALSHA / EVALSHA_RO: forward now; on `-NOSCRIPT` with a known body, `SCRIPT LOAD` it on
    /// the slot's node and retry once (NOSCRIPT means the script did not run, so a retry is safe).
    pub(in crate::router) fn start_evalsha(
        &self,
        request: &Request,
        slot: Option<u16>,
        write: bool,
        lane: Lane,
    ) -> Call<'_> {
        let payload = request.raw().clone();
        let sha = request.args().bytes(1).unwrap_or_default();
        // Only a script seen before this EVALSHA may heal it: one learned from a later command
        // of the pipeline would make the EVALSHA run a script the node had not got yet.
        let known_body = self.scripts.body(&sha);
        let first = self.forward(None, payload.clone(), slot, write, lane, Instant::now());
        Call::slow(async move {
            let reply = first.settle().await;
            if !reply.starts_with(b"-NOSCRIPT") {
                return reply;
            }
            let Some(body) = known_body else {
                return reply;
            };
            let load = encode_command([&b"SCRIPT"[..], b"LOAD", &body].into_iter());
            let loaded = self.forward(None, load, slot, true, lane, Instant::now());
            let retry = self.forward(None, payload, slot, write, lane, Instant::now());
            let loaded = loaded.settle().await;
            if loaded.starts_with(b"-") {
                tracing::debug!(reply = %String::from_utf8_lossy(&loaded), "SCRIPT LOAD for NOSCRIPT healing failed");
            }
            retry.settle().await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha1_matches_redis() {
        // redis-cli SCRIPT LOAD "return 1"
        assert_eq!(
            sha1_hex(b"return 1"),
            "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"
        );
    }

    #[test]
    fn remembers_by_sha_in_any_case_and_stays_bounded() {
        let cache = ScriptCache::default();
        let body = Bytes::from_static(b"return 1");
        cache.remember(&body);
        assert_eq!(
            cache.body(b"E0E1F9FABFC9D4800C877A703B823AC0578FF8DB"),
            Some(body.clone())
        );
        for i in 0..CAPACITY {
            cache.remember(&Bytes::from(format!("return {}", i + 2)));
        }
        assert_eq!(
            cache.body(sha1_hex(&body).as_bytes()),
            None,
            "oldest evicted"
        );
        let last = format!("return {}", CAPACITY + 1);
        assert!(cache.body(sha1_hex(last.as_bytes()).as_bytes()).is_some());
        let known = cache.inner.lock().expect("not poisoned");
        assert_eq!(known.bodies.len(), CAPACITY);
        assert_eq!(known.order.len(), CAPACITY);
    }
}
