//! Finding the hottest keys (per command and node, over a sliding window) and the biggest
//! requests and replies redcar forwards, in memory bounded by `hotkeys:`, for `/hotkeys`, the
//! status page and `redcar top` (docs/observability.md, "Hot keys and big keys").
//!
//! The cost per command is a countdown and two size comparisons. One command in
//! `hotkeys.sample_rate` (a random gap per client, so a periodic pipeline is not always sampled
//! at the same place) is counted, with that weight, in one of a few shards chosen by the client,
//! so sessions seldom wait for each other; each shard holds a sliding window of Space-Saving
//! sketches (`window`, `sketch`) and a list of the biggest values (`big`). Every structure is
//! sized at start-up: counting allocates nothing.
#![warn(unreachable_pub, missing_docs)]

mod args;
mod big;
mod config;
mod hash;
mod sketch;
mod text;
mod window;

pub(crate) use args::nth_arg;
pub(crate) use big::Direction;
pub(crate) use config::HotKeysConfig;

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use tokio::time::Instant;

use big::BigList;
use window::RateWindow;

/// Most shards: enough that sessions on different cores seldom share one.
/// Shards are a power of two (for the mask in `shard`), one per worker up to this many.
const MAX_SHARDS: usize = 16;

/// Busy spells begun, mixed into each sampler's seed.
/// A process-wide counter rather than a random call: one relaxed add per busy spell.
static SPELLS: AtomicU64 = AtomicU64::new(0);

/// The hot-key sketches and the big-key lists of every shard.
pub(crate) struct HotKeys {
    /// As given at start-up: `hotkeys` needs a restart to change, since every structure is sized
    /// from it.
    config: HotKeysConfig,
    /// `config.sample_rate`, or 0 when off (no command is sampled).
    rate: u32,
    /// `config.big_value_threshold`, or `usize::MAX` when off.
    big_threshold: usize,
    /// A power of two long (empty when off); a client's shard is its id modulo the length.
    shards: Box<[Mutex<SketchShard>]>,
    /// Random per process: which keys share a hash cannot be chosen from outside.
    seed: u64,
}

/// What one shard counts.
struct SketchShard {
    /// The sliding window of Space-Saving sketches behind the hot keys.
    window: RateWindow,
    /// The biggest requests and replies seen past the threshold, at most `big_top_n`.
    big: BigList,
}

/// Decides which of one client's commands are sampled: a countdown over random gaps of mean
/// `sample_rate`. One per busy session (no shared state, no atomics).
pub(crate) struct HotKeySampler {
    /// Commands until the next one sampled; `u32::MAX` when sampling is off.
    left: u32,
    /// The mean gap, `hotkeys.sample_rate`; 0 when off.
    rate: u32,
    /// A xorshift state seeded per spell, never 0, for the next gap.
    random: u32,
}

/// One finished command, as [`HotKeys::observe`] takes it.
pub(crate) struct Observed<'a> {
    /// The client's id (picks the shard).
    pub(crate) client: u64,
    /// The command's name from the command table, counted per name (GET and SET apart).
    pub(crate) command: &'static str,
    /// The request as the client sent it (RESP multibulk) and where its key is (0: no single
    /// key; only big values are then recorded).
    pub(crate) raw: &'a [u8],
    /// Argument index of the key (1 for most commands).
    pub(crate) key_arg: usize,
    /// The node that answered ("" when none did).
    pub(crate) node: &'a str,
    /// The sample's weight ([`HotKeySampler::sample`]; 0 when not sampled).
    pub(crate) weight: u32,
    /// The reply's size in bytes as sent to the client, for the big-value list.
    pub(crate) reply_len: usize,
    /// When the command finished: the time the window buckets it by.
    pub(crate) now: Instant,
}

/// What `/hotkeys` serves.
#[derive(Debug, Serialize)]
pub(crate) struct HotKeysReport {
    /// `hotkeys.enabled`; when false every list is empty.
    pub(crate) enabled: bool,
    /// One command in this many is counted, with this weight, so counts estimate every command.
    pub(crate) sample_rate: u32,
    /// Seconds the rates are measured over (the window, less right after start-up).
    pub(crate) window_seconds: f64,
    /// Hottest first: at most `hotkeys.top_k`.
    pub(crate) hot: Vec<HotKey>,
    /// Biggest first: at most `hotkeys.big_top_n`.
    pub(crate) big: Vec<BigKey>,
    /// Requests or replies at least this many bytes are recorded in `big`.
    pub(crate) big_value_threshold: usize,
}

/// One hot key with the command and node it was counted for.
#[derive(Debug, Serialize)]
pub(crate) struct HotKey {
    /// The key as text; bytes that are not printable are escaped and long keys cut (`Text`).
    pub(crate) key: String,
    /// The command it was counted for: the same key under GET and under SET is two entries.
    pub(crate) command: &'static str,
    /// The node that answered, `HOST:PORT`; empty when none did.
    pub(crate) node: String,
    /// Estimated commands per second over the window.
    pub(crate) rate: f64,
    /// Estimated commands in the window, and how much of that may be overestimate.
    pub(crate) count: u64,
    /// See `count`: the sketch's bound on the overcount.
    pub(crate) error: u64,
}

/// One big request or reply.
#[derive(Debug, Serialize)]
pub(crate) struct BigKey {
    /// The key as text, escaped and cut like a hot key's.
    pub(crate) key: String,
    /// The command that carried the value.
    pub(crate) command: &'static str,
    /// The node it went to or came from, `HOST:PORT`.
    pub(crate) node: String,
    /// A request (written) or a reply (read).
    pub(crate) direction: Direction,
    /// The biggest seen, in bytes on the wire.
    pub(crate) size: u64,
    /// Times seen past the threshold, and when last (milliseconds since the Unix epoch).
    pub(crate) seen: u64,
    /// See `seen`.
    pub(crate) at_ms: u64,
}

// === impl HotKeys ===

impl HotKeys {
    /// Sized for `config` with about one shard per worker thread.
    /// Called once at start-up by `make_downstream`; everything counting needs is allocated here.
    pub(crate) fn new(config: &HotKeysConfig, workers: usize) -> HotKeys {
        let on = config.enabled;
        let count = if on {
            workers.clamp(1, MAX_SHARDS).next_power_of_two()
        } else {
            0
        };
        let epoch = Instant::now();
        let shards = (0..count)
            .map(|_| {
                Mutex::new(SketchShard {
                    window: RateWindow::new(
                        config::BUCKETS as usize,
                        config.bucket(),
                        config.counters(),
                        epoch,
                    ),
                    big: BigList::new(config.big_top_n),
                })
            })
            .collect();
        HotKeys {
            config: config.clone(),
            rate: if on { config.sample_rate } else { 0 },
            big_threshold: if on {
                config.big_value_threshold
            } else {
                usize::MAX
            },
            shards,
            seed: RandomState::new().hash_one(0x0068_6f74_6b65_7973_u64),
        }
    }

    /// Watches nothing (sessions built without `hotkeys:`, tests).
    /// Allocates nothing: no shards are made when off.
    pub(crate) fn off() -> HotKeys {
        let config = HotKeysConfig {
            enabled: false,
            ..HotKeysConfig::default()
        };
        HotKeys::new(&config, 1)
    }

    /// Off means no shard exists, so `observe` returns at once and `report` is empty.
    pub(crate) fn is_enabled(&self) -> bool {
        !self.shards.is_empty()
    }

    /// A sampler for one busy spell of client `client`. Its first gap differs from spell to
    /// spell (one relaxed atomic add per spell, not per command): a client sending one command
    /// per spell is then sampled one time in `sample_rate`, not always or never.
    pub(crate) fn sampler(&self, client: u64) -> HotKeySampler {
        let spell = SPELLS.fetch_add(1, Ordering::Relaxed);
        let seed = (client ^ spell.rotate_left(32)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut sampler = HotKeySampler {
            left: 0,
            rate: self.rate,
            random: (seed >> 32) as u32 | 1,
        };
        // The first command to sample is uniform over the first `rate`: a spell of n commands
        // (n ≤ rate) is sampled with probability n / rate, as a share of one in `rate` must be.
        sampler.left = match sampler.rate {
            0 => u32::MAX,
            rate => 1 + sampler.random() % rate,
        };
        sampler
    }

    /// Whether a finished command is to be recorded: sampled, or a big request or reply.
    #[inline]
    pub(crate) fn wants(&self, weight: u32, request_len: usize, reply_len: usize) -> bool {
        weight != 0 || request_len.max(reply_len) >= self.big_threshold
    }

    /// Records a command [`HotKeys::wants`]: its key, and its sizes when big.
    pub(crate) fn observe(&self, seen: Observed<'_>) {
        let Some(shard) = self.shard(seen.client) else {
            return;
        };
        // Without a single key (a split MGET, a fan-out), a big value is named by the first
        // argument, as the slow log does; such commands are never sampled as hot keys.
        let key = nth_arg(seen.raw, seen.key_arg.max(1)).unwrap_or_default();
        let hash = hash::hash(
            self.seed,
            [seen.command.as_bytes(), key, seen.node.as_bytes()],
        );
        let mut shard = lock(shard);
        if seen.weight != 0 {
            shard
                .window
                .offer(seen.now, hash, u64::from(seen.weight), |counter| {
                    counter.command = seen.command;
                    counter.text.set(key, seen.node);
                });
        }
        for (direction, size) in [
            (Direction::Request, seen.raw.len()),
            (Direction::Reply, seen.reply_len),
        ] {
            if size >= self.big_threshold {
                let at = SystemTime::now();
                shard.big.offer(hash, direction, size as u64, at, |big| {
                    big.command = seen.command;
                    big.text.set(key, seen.node);
                });
            }
        }
    }

    /// A client always lands in the same shard, so its own commands never contend with each other;
    /// `None` when off.
    fn shard(&self, client: u64) -> Option<&Mutex<SketchShard>> {
        if self.shards.is_empty() {
            return None;
        }
        self.shards.get(client as usize & (self.shards.len() - 1))
    }

    /// The hottest and biggest keys over every shard, at `now`.
    /// Merges the shards: the same key counted in two shards (two clients) is summed, so a key is
    /// ranked by its traffic from all clients; each shard's lock is held only while it is read.
    pub(crate) fn report(&self, now: Instant) -> HotKeysReport {
        let mut hot: HashMap<u64, HotKey> = HashMap::new();
        let mut big: HashMap<(u64, Direction), BigKey> = HashMap::new();
        let mut covered = Duration::ZERO;
        for shard in self.shards.iter() {
            let mut shard = lock(shard);
            shard.window.advance(now);
            covered = shard.window.covered(now);
            for c in shard.window.counters() {
                let entry = hot.entry(c.hash).or_insert_with(|| HotKey {
                    key: c.text.shown_key(),
                    command: c.command,
                    node: c.text.node().to_string(),
                    rate: 0.0,
                    count: 0,
                    error: 0,
                });
                entry.count += c.count;
                entry.error += c.error;
            }
            for b in shard.big.entries() {
                let at_ms =
                    b.at.duration_since(UNIX_EPOCH)
                        .map_or(0, |d| d.as_millis() as u64);
                let entry = big.entry((b.hash, b.direction)).or_insert_with(|| BigKey {
                    key: b.text.shown_key(),
                    command: b.command,
                    node: b.text.node().to_string(),
                    direction: b.direction,
                    size: 0,
                    seen: 0,
                    at_ms: 0,
                });
                entry.size = entry.size.max(b.size);
                entry.seen += b.seen;
                entry.at_ms = entry.at_ms.max(at_ms);
            }
        }
        let seconds = covered.as_secs_f64();
        let mut hot: Vec<HotKey> = hot.into_values().collect();
        hot.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
        hot.truncate(self.config.top_k);
        for key in &mut hot {
            key.rate = if seconds > 0.0 {
                key.count as f64 / seconds
            } else {
                0.0
            };
        }
        let mut big: Vec<BigKey> = big.into_values().collect();
        big.sort_by(|a, b| b.size.cmp(&a.size).then_with(|| a.key.cmp(&b.key)));
        big.truncate(self.config.big_top_n);
        HotKeysReport {
            enabled: self.is_enabled(),
            sample_rate: self.config.sample_rate,
            window_seconds: seconds,
            hot,
            big,
            big_value_threshold: self.config.big_value_threshold,
        }
    }
}

/// Nothing panics while a shard is locked, so a poisoned lock still holds consistent counts.
/// Used by `observe` and `report` alike; a poisoned lock is taken over rather than failing.
fn lock(shard: &Mutex<SketchShard>) -> MutexGuard<'_, SketchShard> {
    shard.lock().unwrap_or_else(|e| e.into_inner())
}

// === impl Sampler ===

impl HotKeySampler {
    /// The weight to count this command with: `sample_rate` for a sampled one, else 0.
    #[inline]
    pub(crate) fn sample(&mut self) -> u32 {
        if self.left > 1 {
            self.left -= 1;
            return 0;
        }
        self.left = self.gap();
        self.rate
    }

    /// A gap of 1 to 2 × rate − 1 commands (mean: the rate); `u32::MAX` when off.
    fn gap(&mut self) -> u32 {
        if self.rate <= 1 {
            return if self.rate == 0 { u32::MAX } else { 1 };
        }
        1 + self.random() % (2 * self.rate - 1)
    }

    /// xorshift32: a few instructions, once per sampled command.
    fn random(&mut self) -> u32 {
        let mut x = self.random;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.random = x;
        x
    }
}

#[cfg(test)]
mod tests;
