//! Differential test: a seeded random mix of commands of every type — strings, keys, hashes,
//! lists, sets, sorted sets, HyperLogLog, bitmaps, streams, scripts, wrong-type and wrong-arity
//! errors, multi-key commands across slots, blocking commands that do not block for long, WAIT,
//! transactions (MULTI … EXEC / DISCARD, WATCH, UNWATCH), and pipelines of 1–50 commands written
//! at once — is sent both through redcar (in front of a 3-primary cluster) and to a standalone
//! redis-server. Every reply must match, and at the end so must every key's type, contents and
//! expiry kind.
//!
//! The seed is printed. Rerun one with
//! `REDCAR_DIFF_SEED=<seed> cargo test --test it differential -- --nocapture`
//! (`REDCAR_DIFF_COMMANDS=<n>` changes the number of commands, default 3000;
//! `REDCAR_DIFF_TRACE=1` prints every command with redcar's reply); without it the
//! seed is fixed so CI is deterministic. A mismatch fails with the seed, the command's index,
//! the command and both replies.
//!
//! Transactions are generated as units that are never split across pipelines: `MULTI`, 1–6
//! commands whose keys share one hash tag (with queue-time errors, WRONGTYPE errors at run time,
//! blocking commands, nested MULTI/WATCH), then `EXEC` or `DISCARD`; and `WATCH` of keys of that
//! tag, a few commands (sometimes modifying a watched key, sometimes `UNWATCH`), then the same.
//! A unit is written in one pipeline, or — when the batch is a single unit — one command at a
//! time, as a client without pipelining does.
//!
//! Where cluster semantics legitimately differ the comparison is normalised, and only there
//! (see [`Check`]):
//! - atomic multi-key commands (MSETNX, RENAME, SMOVE, SINTER, ZUNIONSTORE, PFMERGE, BITOP, EVAL,
//!   XREAD, BLPOP, ...) are generated mostly with keys sharing a hash tag; when their keys span
//!   slots redcar must answer `-CROSSSLOT ...` and the command is not sent to the standalone
//!   server;
//! - transactions redcar must refuse (a command of another slot queued after MULTI, a
//!   fan-out command like DBSIZE or a split one like MGET across slots inside MULTI, WATCH of two
//!   slots, a transaction on another slot than its WATCH) are sent to redcar only, and every
//!   reply is asserted: `+OK`/`+QUEUED`, the refusal, then `-EXECABORT` (or `-CROSSSLOT` at EXEC
//!   after WATCH of another slot);
//! - TTL/PTTL/EXPIRETIME compare only the kind (-2 no key, -1 no expiry, >= 0 has one), since the
//!   two servers set expiries a few microseconds apart;
//! - replies listing a hash-table set or the keyspace (SMEMBERS, SINTER/SUNION/SDIFF, KEYS) are
//!   compared as multisets: their order depends on each process's random hash seed; inside an
//!   EXEC reply each item is compared with its own command's rule;
//! - `WAIT 0 0` compares only that both answer a non-negative integer (the standalone server has
//!   no replicas, a cluster primary may have some);
//! - errors redcar words itself (an unknown command: `-ERR redcar: unknown command ...`) compare
//!   only the error code. Every other error, including arity and CROSSSLOT-free script errors,
//!   must match Redis's text exactly.
//!
//! Commands whose reply is random or time-dependent (SPOP, SRANDMEMBER, RANDOMKEY, SCAN over a
//! hash table, OBJECT, ...) are not generated, nor are pub/sub and INFO. Known divergences that
//! are redcar bugs are listed in [`KNOWN_DIVERGENCES`], each with its reason.

use std::fmt::Write as _;
use std::time::Instant;

use crate::support::{Redcar, RedisCluster, RedisServer, Resp3, RespClient, Value};

const DEFAULT_SEED: u64 = 0x00c0_ffee_2024;
const DEFAULT_COMMANDS: usize = 3000;
const MAX_PIPELINE: u64 = 50;
/// The timeout of generated blocking commands (seconds): short enough that a pop on an empty
/// key costs little, and both servers answer nil after it.
const BLOCK_TIMEOUT: &str = "0.01";

/// How a reply pair is compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Check {
    /// Byte-for-byte equal replies.
    Exact,
    /// Arrays compared as multisets (order depends on each server's hash seed).
    Unordered,
    /// TTL-like integers: only -2, -1 or "some expiry" (>= 0) is compared.
    TtlKind,
    /// Keys span slots: sent to redcar only, which must answer `-CROSSSLOT`.
    CrossSlot,
    /// Errors redcar words itself (unknown commands): both must be errors with the same code.
    ErrorCode,
    /// EXEC: an array is compared item by item, each with its queued command's check
    /// ([`Cmd::queued`]); anything else (nil, EXECABORT) exactly.
    Exec,
    /// WAIT: both must answer an integer >= 0 (the replica counts differ by design).
    NonNegative,
    /// Sent to redcar only, whose reply must be [`Cmd::expect`] (transactions redcar refuses).
    RedcarOnly,
}

const CHECKS: usize = 8;

/// What redcar must answer to a command it alone is sent ([`Check::RedcarOnly`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// `+OK` (MULTI, WATCH, DISCARD, UNWATCH).
    Ok,
    /// `+QUEUED`.
    Queued,
    /// `-CROSSSLOT ...`.
    CrossSlot,
    /// A command redcar cannot queue in a transaction (fan-out, or split across slots):
    /// `-ERR redcar: this command cannot be queued in a transaction ...`, or `-CROSSSLOT`.
    Refused,
    /// `-EXECABORT ...`.
    ExecAbort,
}

impl Expect {
    fn holds(self, v: &Value) -> bool {
        let err = v.error().unwrap_or_default();
        match self {
            Expect::Ok => *v == Value::simple("OK"),
            Expect::Queued => *v == Value::simple("QUEUED"),
            Expect::CrossSlot => err.starts_with("CROSSSLOT "),
            Expect::Refused => {
                err.starts_with("CROSSSLOT ")
                    || (err.starts_with("ERR redcar: ")
                        && err.contains("cannot be queued in a transaction"))
            }
            Expect::ExecAbort => err.starts_with("EXECABORT "),
        }
    }
}

struct Cmd {
    args: Vec<String>,
    check: Check,
    /// For EXEC: the checks of the commands it runs (the items of its array), in order.
    queued: Vec<Check>,
    /// For [`Check::RedcarOnly`]: what redcar must answer.
    expect: Option<Expect>,
    /// Part of a `MULTI … EXEC/DISCARD` (MULTI, the queued commands, EXEC or DISCARD): the
    /// transaction's hash tag.
    in_tx: Option<&'static str>,
    /// For EXEC: a WATCH is in force (redcar runs it on the watch's dedicated connection).
    watched: bool,
}

impl Cmd {
    fn new(args: Vec<String>, check: Check) -> Cmd {
        Cmd {
            args,
            check,
            queued: Vec::new(),
            expect: None,
            in_tx: None,
            watched: false,
        }
    }

    fn redcar_only(args: Vec<String>, expect: Expect) -> Cmd {
        Cmd {
            expect: Some(expect),
            ..Cmd::new(args, Check::RedcarOnly)
        }
    }

    fn in_tx(mut self, tag: &'static str) -> Cmd {
        self.in_tx = Some(tag);
        self
    }

    /// Not sent to the standalone server.
    fn redcar_alone(&self) -> bool {
        matches!(self.check, Check::CrossSlot | Check::RedcarOnly)
    }

    /// What redcar alone must answer.
    fn expected(&self) -> Option<Expect> {
        match self.check {
            Check::CrossSlot => Some(Expect::CrossSlot),
            Check::RedcarOnly => self.expect,
            _ => None,
        }
    }
}

/// A divergence between redcar and Redis that is a known redcar bug (or a deliberate
/// difference). It begins at one command of a pipeline (`starts`, given the commands pipelined
/// after it) and may change the replies of that command and of later ones (`affects`). A
/// mismatch is tolerated only when an earlier-or-same command of its pipeline `starts` a known
/// divergence that `affects` it; the rest of that pipeline is then not compared. After any
/// pipeline where a known divergence could have started, every key is copied from the standalone
/// server to the cluster (DUMP/RESTORE through redcar), so both agree again.
struct Known {
    name: &'static str,
    /// Why redcar answers differently; printed when the divergence is seen.
    reason: &'static str,
    starts: fn(&Cmd, &[Cmd]) -> bool,
    /// `(start, command, same command?, redcar's reply, standalone's reply)`.
    affects: fn(&Cmd, &Cmd, bool, &Value, &Value) -> bool,
}

/// Every divergence tolerated by this test. Keep it short and narrow: each entry is a bug to fix
/// or a documented difference, and recognises only its own situation.
const KNOWN_DIVERGENCES: &[Known] = &[Known {
    name: "evalsha-retry-runs-after-later-commands",
    reason: "an EVALSHA healed after -NOSCRIPT (its node lacks a script the client EVALed on \
                 another node) is retried after the commands the client pipelined after it \
                 (docs/decisions/0013-multi-key-and-fan-out.md, Scripts), so when those touch the same keys the EVALSHA or \
                 the later command sees a different value than on one Redis server.",
    starts: |c, later| {
        c.in_tx.is_none() && is_evalsha(c) && later.iter().any(|l| touches(script_keys(c), l))
    },
    affects: |start, c, same, _, _| same || touches(script_keys(start), c),
}];

/// Whether `c` names one of `keys` or is about the whole keyspace (or is the EXEC of a
/// transaction on the hash tag of one of `keys`: it runs commands naming them).
fn touches(keys: &[String], c: &Cmd) -> bool {
    if c.args[0] == "EXEC" {
        if let Some(tag) = c.in_tx {
            let tag = format!("{{{tag}}}");
            return keys.iter().any(|k| k.starts_with(&tag));
        }
    }
    matches!(c.args[0].as_str(), "DBSIZE" | "KEYS") || keys.iter().any(|k| c.args[1..].contains(k))
}

fn is_evalsha(c: &Cmd) -> bool {
    matches!(c.args[0].as_str(), "EVALSHA" | "EVALSHA_RO")
}

/// The keys of an EVAL/EVALSHA (`name script numkeys key...`).
fn script_keys(c: &Cmd) -> &[String] {
    let n: usize = c.args.get(2).and_then(|n| n.parse().ok()).unwrap_or(0);
    c.args.get(3..3 + n).unwrap_or(&[])
}

// ---------------------------------------------------------------------------------------------
// PRNG: xorshift64* seeded through splitmix64, so a seed means the same run on every platform and
// every version of the `rand` crate.

struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Rng((z ^ (z >> 31)) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

// ---------------------------------------------------------------------------------------------
// The key universe: per data type ("family"), 3 keys without a hash tag (different slots),
// 3 with the tag {A} and 2 with the tag {B}, so multi-key commands can be same-slot or not.

const FAMILIES: [&str; 8] = ["s", "h", "l", "set", "z", "hll", "bit", "x"];
const STR: usize = 0;
const HASH: usize = 1;
const LIST: usize = 2;
const SET: usize = 3;
const ZSET: usize = 4;
const HLL: usize = 5;
const BIT: usize = 6;
const STREAM: usize = 7;

struct Key {
    name: String,
    family: usize,
    /// `None`: no hash tag.
    tag: Option<&'static str>,
    slot: u16,
}

struct Universe {
    keys: Vec<Key>,
}

impl Universe {
    fn new(mut slot_of: impl FnMut(&str) -> u16) -> Universe {
        let mut keys = Vec::new();
        for (family, f) in FAMILIES.iter().enumerate() {
            for (tag, n) in [(None, 3), (Some("A"), 3), (Some("B"), 2)] {
                for i in 0..n {
                    let name = match tag {
                        None => format!("{f}:{i}"),
                        Some(t) => format!("{{{t}}}{f}:{i}"),
                    };
                    let slot = slot_of(&name);
                    keys.push(Key {
                        name,
                        family,
                        tag,
                        slot,
                    });
                }
            }
        }
        Universe { keys }
    }

    fn slot(&self, name: &str) -> u16 {
        self.keys
            .iter()
            .find(|k| k.name == name)
            .map(|k| k.slot)
            .unwrap_or_else(|| panic!("key {name} not in the universe"))
    }
}

const VALUES: &[&str] = &[
    "a", "b", "c", "hello", "world", "1", "2", "10", "-3", "3.5", "", "x y", "007", "zz",
];
const FIELDS: &[&str] = &["f1", "f2", "f3", "f4", "f5"];
const MEMBERS: &[&str] = &["m1", "m2", "m3", "m4", "m5", "m6", "1", "2", "3"];
const SCORES: &[&str] = &["0", "1", "1.5", "2", "-1", "10", "+inf", "3"];

/// Scripts for EVAL/EVALSHA: (body, number of keys, number of args, read-only).
const SCRIPTS: &[(&str, usize, usize, bool)] = &[
    ("return redis.call('GET', KEYS[1])", 1, 0, true),
    ("return redis.call('SET', KEYS[1], ARGV[1])", 1, 1, false),
    (
        "redis.call('SET', KEYS[1], ARGV[1]); return redis.call('INCR', KEYS[2])",
        2,
        1,
        false,
    ),
    (
        "return {KEYS[1], ARGV[1], redis.call('EXISTS', KEYS[1]), redis.call('TYPE', KEYS[1])}",
        1,
        1,
        true,
    ),
    ("return redis.call('INCR', KEYS[1])", 1, 0, false),
    ("return ARGV[1] .. ARGV[2]", 0, 2, true),
    (
        "local n = 0 for i, k in ipairs(KEYS) do n = n + redis.call('EXISTS', k) end return n",
        3,
        0,
        true,
    ),
];

struct Gen {
    rng: Rng,
    universe: Universe,
    /// The next explicit stream entry ID: strictly increasing, so XADD is deterministic.
    stream_ms: u64,
    /// Inside a transaction: every key has this hash tag (one slot), and commands redcar cannot
    /// queue (DBSIZE, KEYS, WAIT) are not generated.
    tag: Option<&'static str>,
    /// Only commands Redis queues without complaint (no wrong arity, unknown command or script):
    /// for the transactions sent to redcar alone, where every reply is asserted.
    clean: bool,
}

fn strs(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

impl Gen {
    /// A key of `family` (90%) or of any family (10%: wrong-type errors).
    fn key(&mut self, family: usize) -> String {
        let tag = self.tag;
        let allowed = |k: &&Key| tag.is_none() || k.tag == tag;
        if self.rng.chance(10) {
            let any: Vec<&Key> = self.universe.keys.iter().filter(allowed).collect();
            return self.rng.pick(&any).name.clone();
        }
        let of: Vec<&Key> = self
            .universe
            .keys
            .iter()
            .filter(allowed)
            .filter(|k| k.family == family)
            .collect();
        self.rng.pick(&of).name.clone()
    }

    /// `n` keys (repeats allowed) from anywhere: for the commands redcar splits per slot.
    fn any_keys(&mut self, family: usize, n: usize) -> Vec<String> {
        (0..n).map(|_| self.key(family)).collect()
    }

    /// `n` keys for an atomic multi-key command: 92% sharing a hash tag (one slot), else mixed
    /// with untagged keys; the `Check` is `CrossSlot` iff the keys really span slots.
    fn group(&mut self, family: usize, n: usize) -> (Vec<String>, Check) {
        let tag = match self.tag {
            Some(tag) => tag,
            None => self.tag_name(),
        };
        let cross = self.tag.is_none() && self.rng.chance(8);
        let mut keys = Vec::with_capacity(n);
        for i in 0..n {
            let untagged = cross && (i == 0 || self.rng.chance(50));
            let pool: Vec<&Key> = self
                .universe
                .keys
                .iter()
                .filter(|k| {
                    if untagged {
                        k.tag.is_none() && k.family == family
                    } else {
                        k.tag == Some(tag)
                    }
                })
                .collect();
            let same_family: Vec<&Key> = pool
                .iter()
                .copied()
                .filter(|k| k.family == family)
                .collect();
            let from = if same_family.is_empty() || self.rng.chance(8) {
                &pool
            } else {
                &same_family
            };
            keys.push(self.rng.pick(from).name.clone());
        }
        let first = self.universe.slot(&keys[0]);
        let same = keys.iter().all(|k| self.universe.slot(k) == first);
        (keys, if same { Check::Exact } else { Check::CrossSlot })
    }

    /// 1–3 keys for a blocking pop: one key of any slot, or a group (mostly one slot).
    fn blocking_keys(&mut self, family: usize) -> (Vec<String>, Check) {
        match self.rng.range(1, 3) as usize {
            1 => (vec![self.key(family)], Check::Exact),
            n => self.group(family, n),
        }
    }

    /// One of `words`.
    fn word(&mut self, words: &[&'static str]) -> &'static str {
        words[self.rng.below(words.len() as u64) as usize]
    }

    fn value(&mut self) -> String {
        self.rng.pick(VALUES).to_string()
    }

    fn int(&mut self, lo: i64, hi: i64) -> String {
        self.rng.range(lo, hi).to_string()
    }

    /// One of the two hash tags.
    fn tag_name(&mut self) -> &'static str {
        if self.rng.chance(50) {
            "A"
        } else {
            "B"
        }
    }

    fn next(&mut self) -> Cmd {
        let roll = self.rng.below(100);
        // Scripts are rarer inside transactions (an EVALSHA there cannot be healed after
        // NOSCRIPT, so its reply depends on which node ran the script before).
        let script = !self.clean && (self.tag.is_none() || self.rng.chance(20));
        let (args, check) = match roll {
            0..=17 => self.string_cmd(),
            18..=29 => self.key_cmd(),
            30..=39 => self.hash_cmd(),
            40..=50 => self.list_cmd(),
            51..=60 => self.set_cmd(),
            61..=71 => self.zset_cmd(),
            72..=76 => self.hll_cmd(),
            77..=82 => self.bit_cmd(),
            83..=90 => self.stream_cmd(),
            91..=96 if script => self.script_cmd(),
            91..=96 => self.string_cmd(),
            _ if self.clean => self.list_cmd(),
            97 => (self.unknown_command(), Check::ErrorCode),
            _ => (self.wrong_arity(), Check::Exact),
        };
        Cmd::new(args, check)
    }

    fn string_cmd(&mut self) -> (Vec<String>, Check) {
        let k = self.key(STR);
        let v = self.value();
        let args = match self.rng.below(22) {
            0 => strs(&["SET", &k, &v]),
            1 => {
                let opts: [&[&str]; 7] = [
                    &["EX", "1000"],
                    &["PX", "500000"],
                    &["NX"],
                    &["XX"],
                    &["GET"],
                    &["KEEPTTL"],
                    &["EX", "notanumber"],
                ];
                let opt = *self.rng.pick(&opts);
                let mut a = strs(&["SET", &k, &v]);
                a.extend(opt.iter().map(|s| s.to_string()));
                a
            }
            2 | 3 => strs(&["GET", &k]),
            4 => strs(&["GETSET", &k, &v]),
            5 => strs(&["APPEND", &k, &v]),
            6 => strs(&["INCR", &k]),
            7 => strs(&["DECR", &k]),
            8 => {
                let n = self.int(-20, 20);
                strs(&[self.word(&["INCRBY", "DECRBY"]), &k, &n])
            }
            9 => strs(&["INCRBYFLOAT", &k, self.word(&["1.5", "-0.25", "3", "x"])]),
            10 => strs(&["STRLEN", &k]),
            11 => {
                let off = self.int(0, 20);
                strs(&["SETRANGE", &k, &off, &v])
            }
            12 => {
                let (a, b) = (self.int(-10, 10), self.int(-10, 10));
                strs(&["GETRANGE", &k, &a, &b])
            }
            13 => strs(&["SETNX", &k, &v]),
            14 => strs(&["GETDEL", &k]),
            15 => {
                let opts: [&[&str]; 3] = [&[], &["EX", "2000"], &["PERSIST"]];
                let opt = *self.rng.pick(&opts);
                let mut a = strs(&["GETEX", &k]);
                a.extend(opt.iter().map(|s| s.to_string()));
                a
            }
            16 | 17 => {
                let n = self.rng.range(1, 8) as usize;
                let mut a = strs(&["MGET"]);
                a.extend(self.any_keys(STR, n));
                a
            }
            18 | 19 => {
                let n = self.rng.range(1, 6) as usize;
                let mut a = strs(&["MSET"]);
                for key in self.any_keys(STR, n) {
                    a.push(key);
                    a.push(self.value());
                }
                a
            }
            20 => {
                let n = self.rng.range(1, 3) as usize;
                let (keys, check) = self.group(STR, n);
                let mut a = strs(&["MSETNX"]);
                for key in keys {
                    a.push(key);
                    a.push(self.value());
                }
                return (a, check);
            }
            _ => {
                let (keys, check) = self.group(STR, 2);
                return (strs(&["LCS", &keys[0], &keys[1]]), check);
            }
        };
        (args, Check::Exact)
    }

    fn key_cmd(&mut self) -> (Vec<String>, Check) {
        let family = self.rng.below(FAMILIES.len() as u64) as usize;
        let k = self.key(family);
        let args = match self.rng.below(19) {
            0..=3 => {
                let n = self.rng.range(1, 6) as usize;
                let name = self.word(&["DEL", "UNLINK", "EXISTS", "TOUCH"]);
                let mut a = strs(&[name]);
                a.extend(self.any_keys(family, n));
                a
            }
            4 => {
                let secs = self.int(100, 10_000);
                let mut a = strs(&["EXPIRE", &k, &secs]);
                if self.rng.chance(30) {
                    a.push(self.word(&["NX", "XX"]).to_string());
                }
                a
            }
            5 => {
                let ms = self.int(100_000, 10_000_000);
                strs(&["PEXPIRE", &k, &ms])
            }
            6 => strs(&["PERSIST", &k]),
            7 | 8 => {
                let name = self.word(&["TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME"]);
                return (strs(&[name, &k]), Check::TtlKind);
            }
            9 | 10 => strs(&["TYPE", &k]),
            11 | 12 => {
                let (keys, check) = self.group(family, 2);
                let name = self.word(&["RENAME", "RENAMENX"]);
                return (strs(&[name, &keys[0], &keys[1]]), check);
            }
            13 => {
                let (keys, check) = self.group(family, 2);
                let mut a = strs(&["COPY", &keys[0], &keys[1]]);
                if self.rng.chance(50) {
                    a.push("REPLACE".into());
                }
                return (a, check);
            }
            // Redcar cannot queue these in a transaction (they are about every node).
            14 | 15 | 17 if self.tag.is_some() => strs(&["EXISTS", &k]),
            14 => strs(&["DBSIZE"]),
            15 => {
                let pattern = self.word(&["*", "s:*", "{A}*", "*:1", "nomatch*"]);
                return (strs(&["KEYS", pattern]), Check::Unordered);
            }
            16 => strs(&["EXPIRE", &k, "0"]),
            17 => return (strs(&["WAIT", "0", "0"]), Check::NonNegative),
            _ => strs(&["EXISTS", &k]),
        };
        (args, Check::Exact)
    }

    fn hash_cmd(&mut self) -> (Vec<String>, Check) {
        let k = self.key(HASH);
        let f = self.rng.pick(FIELDS).to_string();
        let v = self.value();
        let args = match self.rng.below(16) {
            0..=2 => {
                let mut a = strs(&["HSET", &k]);
                for _ in 0..self.rng.range(1, 3) {
                    a.push(self.rng.pick(FIELDS).to_string());
                    a.push(self.value());
                }
                a
            }
            3 | 4 => strs(&["HGET", &k, &f]),
            5 => {
                let g = self.rng.pick(FIELDS).to_string();
                strs(&["HMGET", &k, &f, &g, "nofield"])
            }
            6 => {
                let g = self.rng.pick(FIELDS).to_string();
                strs(&["HDEL", &k, &f, &g])
            }
            7 => strs(&["HEXISTS", &k, &f]),
            8 => strs(&["HLEN", &k]),
            9 => {
                let n = self.int(-5, 5);
                strs(&["HINCRBY", &k, &f, &n])
            }
            10 => strs(&["HINCRBYFLOAT", &k, &f, "0.5"]),
            11 => strs(&["HSETNX", &k, &f, &v]),
            12 => strs(&["HKEYS", &k]),
            13 => strs(&["HVALS", &k]),
            14 => strs(&["HGETALL", &k]),
            _ => strs(&["HSTRLEN", &k, &f]),
        };
        (args, Check::Exact)
    }

    fn list_cmd(&mut self) -> (Vec<String>, Check) {
        let k = self.key(LIST);
        let v = self.value();
        let args = match self.rng.below(23) {
            0..=3 => {
                let name = self.word(&["LPUSH", "RPUSH", "LPUSH", "RPUSH", "LPUSHX", "RPUSHX"]);
                let mut a = strs(&[name, &k]);
                for _ in 0..self.rng.range(1, 4) {
                    a.push(self.value());
                }
                a
            }
            4 | 5 => {
                let mut a = strs(&[self.word(&["LPOP", "RPOP"]), &k]);
                if self.rng.chance(40) {
                    a.push(self.int(0, 3));
                }
                a
            }
            6 | 7 => {
                let (a, b) = (self.int(-5, 5), self.int(-5, 5));
                strs(&["LRANGE", &k, &a, &b])
            }
            8 => strs(&["LLEN", &k]),
            9 => {
                let i = self.int(-4, 4);
                strs(&["LINDEX", &k, &i])
            }
            10 => {
                let i = self.int(-3, 3);
                strs(&["LSET", &k, &i, &v])
            }
            11 => {
                let pivot = self.value();
                strs(&["LINSERT", &k, self.word(&["BEFORE", "AFTER"]), &pivot, &v])
            }
            12 => {
                let n = self.int(-2, 2);
                strs(&["LREM", &k, &n, &v])
            }
            13 => {
                let (a, b) = (self.int(-6, 2), self.int(-3, 8));
                strs(&["LTRIM", &k, &a, &b])
            }
            14 => strs(&["LPOS", &k, &v]),
            15 => {
                let (keys, check) = self.group(LIST, 2);
                let (from, to) = (self.word(&["LEFT", "RIGHT"]), self.word(&["LEFT", "RIGHT"]));
                return (strs(&["LMOVE", &keys[0], &keys[1], from, to]), check);
            }
            16 => {
                let (keys, check) = self.group(LIST, 2);
                return (strs(&["RPOPLPUSH", &keys[0], &keys[1]]), check);
            }
            17 => {
                let n = self.rng.range(1, 3) as usize;
                let (keys, check) = self.group(LIST, n);
                let mut a = strs(&["LMPOP", &n.to_string()]);
                a.extend(keys);
                a.push(self.word(&["LEFT", "RIGHT"]).to_string());
                if self.rng.chance(50) {
                    a.push("COUNT".into());
                    a.push(self.int(1, 3));
                }
                return (a, check);
            }
            // Blocking pops with a 10 ms timeout: data at once, or nil after 10 ms.
            20 => {
                let (keys, check) = self.blocking_keys(LIST);
                let mut a = strs(&[self.word(&["BLPOP", "BRPOP"])]);
                a.extend(keys);
                a.push(BLOCK_TIMEOUT.into());
                return (a, check);
            }
            21 => {
                let (keys, check) = self.group(LIST, 2);
                let a = if self.rng.chance(25) {
                    strs(&["BRPOPLPUSH", &keys[0], &keys[1], BLOCK_TIMEOUT])
                } else {
                    let (from, to) = (self.word(&["LEFT", "RIGHT"]), self.word(&["LEFT", "RIGHT"]));
                    strs(&["BLMOVE", &keys[0], &keys[1], from, to, BLOCK_TIMEOUT])
                };
                return (a, check);
            }
            22 => {
                let (keys, check) = self.blocking_keys(LIST);
                let mut a = strs(&["BLMPOP", BLOCK_TIMEOUT, &keys.len().to_string()]);
                a.extend(keys);
                a.push(self.word(&["LEFT", "RIGHT"]).to_string());
                if self.rng.chance(50) {
                    a.push("COUNT".into());
                    a.push(self.int(1, 3));
                }
                return (a, check);
            }
            _ => strs(&["LRANGE", &k, "0", "-1"]),
        };
        (args, Check::Exact)
    }

    fn set_cmd(&mut self) -> (Vec<String>, Check) {
        let k = self.key(SET);
        let m = self.rng.pick(MEMBERS).to_string();
        let args = match self.rng.below(16) {
            0..=3 => {
                let mut a = strs(&["SADD", &k]);
                for _ in 0..self.rng.range(1, 4) {
                    a.push(self.rng.pick(MEMBERS).to_string());
                }
                a
            }
            4 => {
                let n = self.rng.pick(MEMBERS).to_string();
                strs(&["SREM", &k, &m, &n])
            }
            5 => strs(&["SISMEMBER", &k, &m]),
            6 => {
                let n = self.rng.pick(MEMBERS).to_string();
                strs(&["SMISMEMBER", &k, &m, &n])
            }
            7 => strs(&["SCARD", &k]),
            8 | 9 => return (strs(&["SMEMBERS", &k]), Check::Unordered),
            10 | 11 => {
                let n = self.rng.range(1, 3) as usize;
                let (keys, check) = self.group(SET, n);
                let mut a = strs(&[self.word(&["SINTER", "SUNION", "SDIFF"])]);
                a.extend(keys);
                let check = if check == Check::Exact {
                    Check::Unordered
                } else {
                    check
                };
                return (a, check);
            }
            12 => {
                let n = self.rng.range(2, 3) as usize;
                let (keys, check) = self.group(SET, n);
                let name = self.word(&["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"]);
                let mut a = strs(&[name]);
                a.extend(keys);
                return (a, check);
            }
            13 => {
                let n = self.rng.range(1, 3) as usize;
                let (keys, check) = self.group(SET, n);
                let mut a = strs(&["SINTERCARD", &n.to_string()]);
                a.extend(keys);
                return (a, check);
            }
            14 => {
                let (keys, check) = self.group(SET, 2);
                return (strs(&["SMOVE", &keys[0], &keys[1], &m]), check);
            }
            _ => strs(&["SISMEMBER", &k, "nomember"]),
        };
        (args, Check::Exact)
    }

    fn zset_cmd(&mut self) -> (Vec<String>, Check) {
        let k = self.key(ZSET);
        let m = self.rng.pick(MEMBERS).to_string();
        let s = self.rng.pick(SCORES).to_string();
        let args = match self.rng.below(26) {
            0..=3 => {
                let mut a = strs(&["ZADD", &k]);
                if self.rng.chance(30) {
                    let opt = self.word(&["NX", "XX", "GT", "LT", "CH"]);
                    a.push(opt.to_string());
                }
                for _ in 0..self.rng.range(1, 3) {
                    a.push(self.rng.pick(SCORES).to_string());
                    a.push(self.rng.pick(MEMBERS).to_string());
                }
                a
            }
            4 => strs(&["ZADD", &k, "INCR", &s, &m]),
            5 => strs(&["ZINCRBY", &k, &s, &m]),
            6 => strs(&["ZSCORE", &k, &m]),
            7 => strs(&["ZMSCORE", &k, &m, "nomember"]),
            8 | 9 => {
                let mut a = strs(&["ZRANGE", &k, "0", "-1"]);
                if self.rng.chance(50) {
                    a.push("WITHSCORES".into());
                }
                a
            }
            10 => strs(&["ZRANGE", &k, "(1", "+inf", "BYSCORE", "LIMIT", "0", "2"]),
            11 => strs(&["ZRANGE", &k, "0", "2", "REV", "WITHSCORES"]),
            12 => strs(&["ZRANGEBYSCORE", &k, "-inf", "2"]),
            13 => strs(&[self.word(&["ZRANK", "ZREVRANK"]), &k, &m]),
            14 => strs(&["ZREM", &k, &m]),
            15 => strs(&["ZCARD", &k]),
            16 => strs(&["ZCOUNT", &k, "1", "10"]),
            17 => strs(&["ZLEXCOUNT", &k, "-", "+"]),
            18 => {
                let mut a = strs(&[self.word(&["ZPOPMIN", "ZPOPMAX"]), &k]);
                if self.rng.chance(50) {
                    a.push(self.int(1, 3));
                }
                a
            }
            19 => {
                let n = self.rng.range(2, 3) as usize;
                let (keys, check) = self.group(ZSET, n);
                let name = self.word(&["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"]);
                let mut a = strs(&[name, &keys[0], &(n - 1).to_string()]);
                a.extend(keys[1..].iter().cloned());
                return (a, check);
            }
            20 => {
                let n = self.rng.range(1, 3) as usize;
                let (keys, check) = self.group(ZSET, n);
                let name = self.word(&["ZUNION", "ZINTER", "ZDIFF"]);
                let mut a = strs(&[name, &n.to_string()]);
                a.extend(keys);
                a.push("WITHSCORES".into());
                return (a, check);
            }
            21 => {
                let (keys, check) = self.group(ZSET, 2);
                return (strs(&["ZRANGESTORE", &keys[0], &keys[1], "0", "-1"]), check);
            }
            22 => {
                let n = self.rng.range(1, 2) as usize;
                let (keys, check) = self.group(ZSET, n);
                let mut a = strs(&["ZMPOP", &n.to_string()]);
                a.extend(keys);
                a.push(self.word(&["MIN", "MAX"]).to_string());
                return (a, check);
            }
            24 => {
                let (keys, check) = self.blocking_keys(ZSET);
                let mut a = strs(&[self.word(&["BZPOPMIN", "BZPOPMAX"])]);
                a.extend(keys);
                a.push(BLOCK_TIMEOUT.into());
                return (a, check);
            }
            25 => {
                let (keys, check) = self.blocking_keys(ZSET);
                let mut a = strs(&["BZMPOP", BLOCK_TIMEOUT, &keys.len().to_string()]);
                a.extend(keys);
                a.push(self.word(&["MIN", "MAX"]).to_string());
                if self.rng.chance(50) {
                    a.push("COUNT".into());
                    a.push(self.int(1, 3));
                }
                return (a, check);
            }
            _ => strs(&["ZRANGE", &k, "0", "-1", "WITHSCORES"]),
        };
        (args, Check::Exact)
    }

    fn hll_cmd(&mut self) -> (Vec<String>, Check) {
        let k = self.key(HLL);
        match self.rng.below(4) {
            0 | 1 => {
                let mut a = strs(&["PFADD", &k]);
                for _ in 0..self.rng.range(0, 5) {
                    a.push(self.value());
                }
                (a, Check::Exact)
            }
            2 => {
                let n = self.rng.range(1, 3) as usize;
                let (keys, check) = self.group(HLL, n);
                let mut a = strs(&["PFCOUNT"]);
                a.extend(keys);
                (a, check)
            }
            _ => {
                let n = self.rng.range(1, 3) as usize;
                let (keys, check) = self.group(HLL, n);
                let mut a = strs(&["PFMERGE"]);
                a.extend(keys);
                (a, check)
            }
        }
    }

    fn bit_cmd(&mut self) -> (Vec<String>, Check) {
        let k = self.key(BIT);
        let off = self.int(0, 64);
        let args = match self.rng.below(9) {
            0..=2 => {
                let bit = self.int(0, 1);
                strs(&["SETBIT", &k, &off, &bit])
            }
            3 => strs(&["GETBIT", &k, &off]),
            4 => {
                let mut a = strs(&["BITCOUNT", &k]);
                if self.rng.chance(50) {
                    a.push(self.int(-3, 3));
                    a.push(self.int(-3, 8));
                }
                a
            }
            5 => {
                let bit = self.int(0, 1);
                strs(&["BITPOS", &k, &bit])
            }
            6 => {
                let n = self.rng.range(2, 3) as usize;
                let (keys, check) = self.group(BIT, n);
                let op = self.word(&["AND", "OR", "XOR"]);
                let mut a = strs(&["BITOP", op]);
                a.extend(keys);
                return (a, check);
            }
            7 => {
                let (keys, check) = self.group(BIT, 2);
                return (strs(&["BITOP", "NOT", &keys[0], &keys[1]]), check);
            }
            _ => {
                let by = self.int(-10, 10);
                strs(&["BITFIELD", &k, "INCRBY", "i8", "0", &by, "GET", "u4", "4"])
            }
        };
        (args, Check::Exact)
    }

    fn stream_cmd(&mut self) -> (Vec<String>, Check) {
        let k = self.key(STREAM);
        let old = self.rng.range(1, self.stream_ms.max(2) as i64);
        let old_id = format!("{old}-1");
        let args = match self.rng.below(11) {
            0..=3 => {
                self.stream_ms += self.rng.range(1, 3) as u64;
                let id = if self.rng.chance(5) {
                    "1-1".to_string() // smaller than the top entry: an error once it has one
                } else {
                    format!("{}-1", self.stream_ms)
                };
                let mut a = strs(&["XADD", &k]);
                if self.rng.chance(20) {
                    a.extend(strs(&["MAXLEN", "3"]));
                }
                a.push(id);
                for _ in 0..self.rng.range(1, 2) {
                    a.push(self.rng.pick(FIELDS).to_string());
                    a.push(self.value());
                }
                a
            }
            4 => strs(&["XLEN", &k]),
            5 | 6 => {
                let mut a = strs(&["XRANGE", &k, "-", "+"]);
                if self.rng.chance(50) {
                    a.push("COUNT".into());
                    a.push(self.int(1, 3));
                }
                a
            }
            7 => strs(&["XREVRANGE", &k, "+", &old_id, "COUNT", "2"]),
            8 => strs(&["XDEL", &k, &old_id]),
            9 => strs(&["XTRIM", &k, "MAXLEN", &self.int(0, 5)]),
            _ => {
                let n = self.rng.range(1, 2) as usize;
                let (keys, check) = self.group(STREAM, n);
                let mut a = strs(&["XREAD", "COUNT", "2", "STREAMS"]);
                a.extend(keys);
                for _ in 0..n {
                    a.push(old_id.clone());
                }
                return (a, check);
            }
        };
        (args, Check::Exact)
    }

    fn script_cmd(&mut self) -> (Vec<String>, Check) {
        let &(body, numkeys, nargs, read_only) = self.rng.pick(SCRIPTS);
        let family = if self.rng.chance(70) {
            STR
        } else {
            self.rng.below(FAMILIES.len() as u64) as usize
        };
        let (keys, check) = match numkeys {
            0 => (Vec::new(), Check::Exact),
            1 => (vec![self.key(family)], Check::Exact),
            n => self.group(family, n),
        };
        let name = match self.rng.below(10) {
            0..=4 => "EVAL",
            5..=7 => "EVALSHA",
            _ if read_only => "EVAL_RO",
            _ => "EVAL",
        };
        let head = if name == "EVALSHA" {
            format!("{:x}", <sha1::Sha1 as sha1::Digest>::digest(body))
        } else {
            body.to_string()
        };
        let mut a = vec![name.to_string(), head, numkeys.to_string()];
        a.extend(keys);
        for _ in 0..nargs {
            a.push(self.value());
        }
        (a, check)
    }

    /// A command no Redis has: redcar refuses it with its own wording.
    fn unknown_command(&mut self) -> Vec<String> {
        let k = self.key(STR);
        strs(&[self.word(&["FOOBAR", "GETT", "HSETT"]), &k, "1"])
    }

    fn wrong_arity(&mut self) -> Vec<String> {
        let k = self.key(STR);
        let h = self.key(HASH);
        let z = self.key(ZSET);
        let x = self.key(STREAM);
        // Inside a transaction every key has its tag; elsewhere some span slots.
        let (s1, l0, l1) = match self.tag {
            Some(_) => (self.key(STR), self.key(LIST), self.key(LIST)),
            None => ("s:1".into(), "l:0".into(), "{A}l:0".into()),
        };
        let choices: Vec<Vec<String>> = vec![
            strs(&["GET"]),
            strs(&["SET", &k]),
            strs(&["GET", &k, &k]),
            strs(&["MGET"]),
            strs(&["MSET"]),
            strs(&["MSET", &k, "1", &s1]),
            strs(&["DEL"]),
            strs(&["EXISTS"]),
            strs(&["HSET", &h, "f"]),
            strs(&["HGET", &h]),
            strs(&["ZADD", &z, "1"]),
            strs(&["LPUSH", &l0]),
            strs(&["XADD", &x, "5-1"]),
            strs(&["EVAL", "return 1"]),
            strs(&["EVAL", "return KEYS[1]", "3", &k]),
            strs(&["EVAL", "return 1", "-1"]),
            strs(&["EXPIRE", &k]),
            strs(&["INCRBY", &k, "notanumber"]),
            strs(&["RENAME", &k]),
            strs(&["SINTERCARD", "0"]),
            strs(&["ZUNION", "0"]),
            strs(&["LMPOP", "2", &l1]),
        ];
        self.rng.pick(&choices).clone()
    }
}

// ---------------------------------------------------------------------------------------------
// Units: one command, or a transaction that is always sent whole (in one pipeline, or one
// command at a time), so a pipeline never ends inside MULTI or WATCH.

impl Gen {
    fn unit(&mut self) -> Vec<Cmd> {
        match self.rng.below(1000) {
            0..=29 => self.transaction(),
            30..=44 => self.watched_transaction(),
            45..=54 => self.refused_transaction(),
            // Outside any transaction: UNWATCH answers +OK, EXEC and DISCARD an error.
            55..=57 => {
                let name = self.word(&["UNWATCH", "EXEC", "DISCARD"]);
                vec![Cmd::new(strs(&[name]), Check::Exact)]
            }
            _ => vec![self.next()],
        }
    }

    /// `MULTI`, 1–6 commands on keys with one hash tag, `EXEC` (or `DISCARD`).
    fn transaction(&mut self) -> Vec<Cmd> {
        let tag = self.tag_name();
        let mut out = vec![Cmd::new(strs(&["MULTI"]), Check::Exact).in_tx(tag)];
        let n = self.rng.range(1, 6) as usize;
        out.extend(self.queued(tag, n));
        out.push(self.exec_or_discard(tag, &out[1..], 12));
        out
    }

    /// `n` commands (some with a companion) between MULTI and EXEC, all keys tagged `tag`.
    fn queued(&mut self, tag: &'static str, n: usize) -> Vec<Cmd> {
        let mut out = Vec::new();
        self.tag = Some(tag);
        for _ in 0..n {
            match self.rng.below(100) {
                // A queue-time error (mostly wrong arity): EXEC answers -EXECABORT.
                0..=4 => out.push(Cmd::new(self.wrong_arity(), Check::Exact)),
                // A WRONGTYPE error at run time: EXEC's array holds it, the rest runs.
                5..=9 => {
                    let k = self.key(STR);
                    let v = self.value();
                    out.push(Cmd::new(strs(&["SET", &k, &v]), Check::Exact));
                    let wrong = match self.rng.below(3) {
                        0 => strs(&["LPUSH", &k, &v]),
                        1 => strs(&["HGET", &k, "f1"]),
                        _ => strs(&["ZADD", &k, "1", "m1"]),
                    };
                    out.push(Cmd::new(wrong, Check::Exact));
                }
                // Answered at once, not queued, and no abort: nested MULTI, WATCH inside MULTI.
                10 => {
                    let k = self.key(STR);
                    let c = match self.rng.chance(50) {
                        true => strs(&["MULTI"]),
                        false => strs(&["WATCH", &k]),
                    };
                    out.push(Cmd::new(c, Check::Exact));
                }
                11..=13 => {
                    let v = self.value();
                    let c = match self.rng.below(3) {
                        0 => strs(&["PING"]),
                        1 => strs(&["ECHO", &v]),
                        _ => strs(&["UNWATCH"]),
                    };
                    out.push(Cmd::new(c, Check::Exact));
                }
                _ => out.push(self.next()),
            }
        }
        self.tag = None;
        out.into_iter().map(|c| c.in_tx(tag)).collect()
    }

    /// EXEC (its array items checked like the commands `queued` that were queued), or DISCARD
    /// `discard` percent of the time.
    fn exec_or_discard(&mut self, tag: &'static str, queued: &[Cmd], discard: u64) -> Cmd {
        if self.rng.chance(discard) {
            return Cmd::new(strs(&["DISCARD"]), Check::Exact).in_tx(tag);
        }
        let mut exec = Cmd::new(strs(&["EXEC"]), Check::Exec).in_tx(tag);
        exec.queued = queued
            .iter()
            .filter(|c| !matches!(c.args[0].as_str(), "MULTI" | "WATCH"))
            .map(|c| c.check)
            .collect();
        exec
    }

    /// `WATCH` of 1–2 keys of one tag, 0–2 other commands, sometimes a write to a watched key by
    /// this same client (EXEC then answers nil, in Redis too) and sometimes `UNWATCH` (then it
    /// runs), then a transaction on that tag.
    fn watched_transaction(&mut self) -> Vec<Cmd> {
        let tag = self.tag_name();
        let pool: Vec<(String, usize)> = self
            .universe
            .keys
            .iter()
            .filter(|k| k.tag == Some(tag))
            .map(|k| (k.name.clone(), k.family))
            .collect();
        let watched: Vec<(String, usize)> = (0..self.rng.range(1, 2))
            .map(|_| self.rng.pick(&pool).clone())
            .collect();
        let mut watch = strs(&["WATCH"]);
        watch.extend(watched.iter().map(|(k, _)| k.clone()));
        let mut out = vec![Cmd::new(watch, Check::Exact)];
        for _ in 0..self.rng.range(0, 2) {
            out.push(self.next());
        }
        if self.rng.chance(40) {
            let (key, family) = self.rng.pick(&watched).clone();
            out.push(Cmd::new(self.write_to(&key, family), Check::Exact));
        }
        let unwatched = self.rng.chance(15);
        if unwatched {
            out.push(Cmd::new(strs(&["UNWATCH"]), Check::Exact));
        }
        let multi = out.len();
        out.push(Cmd::new(strs(&["MULTI"]), Check::Exact).in_tx(tag));
        let n = self.rng.range(1, 4) as usize;
        out.extend(self.queued(tag, n));
        let mut end = self.exec_or_discard(tag, &out[multi + 1..], 10);
        end.watched = !unwatched;
        out.push(end);
        out
    }

    /// A write that modifies `key` (of `family`) when it holds that type.
    fn write_to(&mut self, key: &str, family: usize) -> Vec<String> {
        let v = self.value();
        match (self.rng.below(10), family) {
            (0, _) => strs(&["DEL", key]),
            (1, _) => strs(&["EXPIRE", key, "5000"]),
            (_, HASH) => strs(&["HSET", key, "f1", &v]),
            (_, LIST) => strs(&["RPUSH", key, &v]),
            (_, SET) => strs(&["SADD", key, "fresh"]),
            (_, ZSET) => strs(&["ZADD", key, "7", "fresh"]),
            (_, HLL) => strs(&["PFADD", key, "fresh", &v]),
            (_, BIT) => strs(&["SETBIT", key, "70", "1"]),
            (_, STREAM) => {
                self.stream_ms += 1;
                strs(&["XADD", key, &format!("{}-1", self.stream_ms), "f1", &v])
            }
            _ => strs(&["APPEND", key, "+"]),
        }
    }

    /// A transaction redcar must refuse, sent to redcar alone with every reply asserted.
    fn refused_transaction(&mut self) -> Vec<Cmd> {
        let tag = self.tag_name();
        let other = if tag == "A" { "B" } else { "A" };
        let only = Cmd::redcar_only;
        let mut out = Vec::new();
        match self.rng.below(10) {
            // MULTI, commands of `tag` (so the transaction's slot is set), one command redcar
            // refuses, maybe more, then EXEC (-EXECABORT) or DISCARD.
            0..=6 => {
                out.push(only(strs(&["MULTI"]), Expect::Ok));
                let before = self.rng.range(1, 3) as usize;
                out.extend(self.clean(tag, before, Expect::Queued));
                let (bad, expect) = self.refused_in_tx(tag, other);
                out.push(only(bad, expect));
                let after = self.rng.range(0, 2) as usize;
                out.extend(self.clean(tag, after, Expect::Queued));
                out.push(match self.rng.chance(15) {
                    true => only(strs(&["DISCARD"]), Expect::Ok),
                    false => only(strs(&["EXEC"]), Expect::ExecAbort),
                });
            }
            // WATCH a key of `tag`, then a transaction on `other`: EXEC gets -CROSSSLOT.
            7 | 8 => {
                let k = self.tagged_key(tag);
                out.push(only(strs(&["WATCH", &k]), Expect::Ok));
                out.push(only(strs(&["MULTI"]), Expect::Ok));
                let n = self.rng.range(1, 3) as usize;
                out.extend(self.clean(other, n, Expect::Queued));
                out.push(only(strs(&["EXEC"]), Expect::CrossSlot));
            }
            // WATCH of keys in two slots, at once or one after the other.
            _ => {
                let (a, b) = (self.tagged_key(tag), self.tagged_key(other));
                if self.rng.chance(50) {
                    out.push(only(strs(&["WATCH", &a, &b]), Expect::CrossSlot));
                } else {
                    out.push(only(strs(&["WATCH", &a]), Expect::Ok));
                    out.push(only(strs(&["WATCH", &b]), Expect::CrossSlot));
                    out.push(only(strs(&["UNWATCH"]), Expect::Ok));
                }
            }
        }
        out
    }

    fn tagged_key(&mut self, tag: &'static str) -> String {
        let family = self.rng.below(FAMILIES.len() as u64) as usize;
        self.tag = Some(tag);
        let k = self.key(family);
        self.tag = None;
        k
    }

    /// `n` commands Redis queues without complaint, keys tagged `tag`, for redcar alone.
    fn clean(&mut self, tag: &'static str, n: usize, expect: Expect) -> Vec<Cmd> {
        self.tag = Some(tag);
        self.clean = true;
        let out = (0..n)
            .map(|_| Cmd::redcar_only(self.next().args, expect))
            .collect();
        self.tag = None;
        self.clean = false;
        out
    }

    /// A command redcar refuses inside a transaction on `tag`, and how.
    fn refused_in_tx(&mut self, tag: &'static str, other: &'static str) -> (Vec<String>, Expect) {
        let tag_slot = self.universe.slot(&format!("{{{tag}}}s:0"));
        match self.rng.below(4) {
            // Any command on the other tag's slot.
            0 => {
                let c = self.clean(other, 1, Expect::CrossSlot);
                (
                    c.into_iter().next().expect("one command").args,
                    Expect::CrossSlot,
                )
            }
            // A key without a tag (in another slot).
            1 => {
                let untagged: Vec<&Key> = self
                    .universe
                    .keys
                    .iter()
                    .filter(|k| k.tag.is_none() && k.slot != tag_slot)
                    .collect();
                let k = self.rng.pick(&untagged).name.clone();
                let name = self.word(&["TYPE", "EXISTS", "GET", "TTL"]);
                (strs(&[name, &k]), Expect::CrossSlot)
            }
            // A command redcar would split per slot, over two slots.
            2 => {
                let (a, b) = (self.tagged_key(tag), self.tagged_key(other));
                let name = self.word(&["MGET", "DEL", "EXISTS", "TOUCH", "UNLINK"]);
                (strs(&[name, &a, &b]), Expect::Refused)
            }
            // A command about every node.
            _ => {
                let c = match self.rng.chance(50) {
                    true => strs(&["DBSIZE"]),
                    false => strs(&["KEYS", "*"]),
                };
                (c, Expect::Refused)
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------

/// `v` as compared for `cmd` (an EXEC's array item by item, with its queued commands' checks).
fn normalise_reply(v: &Value, cmd: &Cmd) -> Value {
    match (cmd.check, v) {
        (Check::Exec, Value::Array(Some(items))) if items.len() == cmd.queued.len() => {
            let items = items
                .iter()
                .zip(&cmd.queued)
                .map(|(item, &check)| normalise(item, check))
                .collect();
            Value::Array(Some(items))
        }
        _ => normalise(v, cmd.check),
    }
}

fn normalise(v: &Value, check: Check) -> Value {
    match (check, v) {
        (_, Value::Typed(kind, inner)) => Value::Typed(*kind, Box::new(normalise(inner, check))),
        (Check::TtlKind, Value::Int(n)) if *n >= 0 => Value::simple("<has an expiry>"),
        (Check::NonNegative, Value::Int(n)) if *n >= 0 => Value::simple("<non-negative integer>"),
        (Check::ErrorCode, Value::Error(e)) => {
            Value::Error(e.split(' ').next().unwrap_or_default().to_string())
        }
        (Check::Unordered, Value::Array(Some(items))) => {
            let mut items = items.clone();
            items.sort_by_key(|i| format!("{i:?}"));
            Value::Array(Some(items))
        }
        _ => v.clone(),
    }
}

/// Counts the RESP3 types in `v`, nested ones included.
fn count_types(v: &Value, counts: &mut std::collections::BTreeMap<String, usize>) {
    match v {
        Value::Typed(kind, inner) => {
            *counts.entry(format!("{kind:?}")).or_default() += 1;
            count_types(inner, counts);
        }
        Value::Array(Some(items)) => items.iter().for_each(|i| count_types(i, counts)),
        _ => {}
    }
}

fn show(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if a.is_empty() || a.contains([' ', '"']) {
                format!("{a:?}")
            } else {
                a.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Sends `cmds` in one pipeline, or one at a time (each reply read before the next command).
fn send(
    client: &mut RespClient,
    cmds: &[Vec<String>],
    one_by_one: bool,
) -> std::io::Result<Vec<Value>> {
    if !one_by_one {
        return client.pipeline(cmds);
    }
    cmds.iter().map(|c| client.cmd(c)).collect()
}

fn seed_from_env() -> u64 {
    match std::env::var("REDCAR_DIFF_SEED") {
        Ok(s) => {
            let s = s.trim();
            let parsed = match s.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => s.parse(),
            };
            parsed.unwrap_or_else(|e| panic!("REDCAR_DIFF_SEED={s:?}: {e}"))
        }
        Err(_) => DEFAULT_SEED,
    }
}

/// Both sides' view of every key at the end: type, contents (order-independent where the
/// encoding's order is), and expiry kind.
fn key_state(c: &mut RespClient, key: &str) -> Vec<Value> {
    let ty = c.q(&["TYPE", key]);
    let contents = match ty.as_str() {
        Some("string") => c.q(&["GET", key]),
        Some("hash") => normalise(&c.q(&["HGETALL", key]), Check::Exact),
        Some("list") => c.q(&["LRANGE", key, "0", "-1"]),
        Some("set") => normalise(&c.q(&["SMEMBERS", key]), Check::Unordered),
        Some("zset") => c.q(&["ZRANGE", key, "0", "-1", "WITHSCORES"]),
        Some("stream") => c.q(&["XRANGE", key, "-", "+"]),
        _ => Value::Bulk(None),
    };
    let ttl = normalise(&c.q(&["TTL", key]), Check::TtlKind);
    vec![ty, contents, ttl]
}

/// Copy every key of the universe from the standalone server to the cluster (through redcar),
/// with its expiry, so the two agree again after a tolerated divergence.
fn resync(direct: &mut RespClient, proxy: &mut RespClient, universe: &Universe) {
    for key in &universe.keys {
        let name = key.name.as_str();
        let dump = direct
            .cmd(&["DUMP", name])
            .expect("DUMP on the standalone server");
        let reply = match dump {
            Value::Bulk(Some(payload)) => {
                let ttl = direct.q(&["PTTL", name]).as_int().unwrap_or(-1).max(0);
                let ttl = ttl.to_string();
                let args: [&[u8]; 5] = [
                    b"RESTORE",
                    name.as_bytes(),
                    ttl.as_bytes(),
                    &payload,
                    b"REPLACE",
                ];
                proxy.cmd(&args).expect("RESTORE through redcar")
            }
            _ => proxy.q(&["DEL", name]),
        };
        assert!(!reply.is_error(), "resync of {name}: {reply:?}");
    }
    for key in &universe.keys {
        let (g, w) = (key_state(proxy, &key.name), key_state(direct, &key.name));
        assert_eq!(g, w, "{} differs right after the resync", key.name);
    }
}

#[test]
fn random_commands_through_redcar_match_a_standalone_server() {
    run(false);
}

/// The same mix with both connections switched to RESP3 (`HELLO 3`), every reply compared type
/// for type: maps, sets, doubles, nulls, booleans and verbatim strings must be where Redis puts
/// them, inside pipelines, EXEC's arrays and merged multi-key replies too.
#[test]
fn random_resp3_commands_through_redcar_match_a_standalone_server_type_for_type() {
    run(true);
}

/// Runs the seeded mix; `resp3`: both connections say `HELLO 3` first and keep RESP3's types.
fn run(resp3: bool) {
    let seed = seed_from_env();
    let total: usize = std::env::var("REDCAR_DIFF_COMMANDS")
        .ok()
        .map(|n| n.parse().expect("REDCAR_DIFF_COMMANDS: a number"))
        .unwrap_or(DEFAULT_COMMANDS);
    eprintln!("differential: seed {seed} (REDCAR_DIFF_SEED={seed} to rerun), {total} commands");
    let t0 = Instant::now();
    let standalone = RedisServer::start();
    let cluster = RedisCluster::start(3, 0);
    let redcar = Redcar::start(&cluster.seeds());
    let mut probe = cluster.any_node().client();
    let universe = Universe::new(|key| {
        let v = probe.q(&["CLUSTER", "KEYSLOT", key]);
        v.as_int()
            .and_then(|s| u16::try_from(s).ok())
            .unwrap_or_else(|| panic!("CLUSTER KEYSLOT {key}: {v:?}"))
    });
    let untagged_slots: std::collections::HashSet<u16> = universe
        .keys
        .iter()
        .filter(|k| k.tag.is_none())
        .map(|k| k.slot)
        .collect();
    assert!(untagged_slots.len() > 20, "untagged keys must span slots");
    let mut gen = Gen {
        rng: Rng::new(seed),
        universe,
        stream_ms: 1,
        tag: None,
        clean: false,
    };
    let mut proxy = redcar.client();
    let mut direct = standalone.client();
    if resp3 {
        proxy = proxy.typed();
        direct = direct.typed();
        for (side, client) in [("redcar", &mut proxy), ("redis", &mut direct)] {
            let hello = client.q(&["HELLO", "3"]);
            assert!(
                matches!(hello, Value::Typed(Resp3::Map, _)),
                "HELLO 3 to {side} must answer a map: {hello:?}"
            );
        }
    }
    let protocol = if resp3 { "RESP3" } else { "RESP2" };
    let trace = std::env::var_os("REDCAR_DIFF_TRACE").is_some();
    let setup = t0.elapsed();

    let mut sent = 0usize;
    let mut tolerated: Vec<(usize, &'static str)> = Vec::new();
    let mut per_check = [0usize; CHECKS];
    // What redcar's EXECs answered: an array, nil (WATCH), -EXECABORT, -CROSSSLOT (WATCH of
    // another slot); and DISCARDs inside MULTI.
    let mut execs = [0usize; 5];
    let mut unverified = 0usize;
    let mut resyncs = 0usize;
    // RESP3 types in redcar's replies, to show the comparison covered them.
    let mut typed: std::collections::BTreeMap<String, usize> = Default::default();
    while sent < total {
        let n = if gen.rng.chance(40) {
            1
        } else {
            gen.rng.range(2, MAX_PIPELINE as i64) as usize
        }
        .min(total - sent);
        // Whole units: a transaction may make the batch a little longer than `n`. A batch of one
        // unit is sent one command at a time (a client that does not pipeline), others at once.
        let mut batch: Vec<Cmd> = Vec::new();
        while batch.len() < n {
            batch.extend(gen.unit());
        }
        let one_by_one = n == 1;
        let n = batch.len();
        let how = match one_by_one {
            true if n > 1 => format!("{n} commands sent one at a time"),
            _ => format!("pipeline of {n}"),
        };
        let all: Vec<Vec<String>> = batch.iter().map(|c| c.args.clone()).collect();
        let to_direct: Vec<Vec<String>> = batch
            .iter()
            .filter(|c| !c.redcar_alone())
            .map(|c| c.args.clone())
            .collect();
        let from_proxy = send(&mut proxy, &all, one_by_one).unwrap_or_else(|e| {
            panic!(
                "seed {seed}: redcar connection failed in the batch starting at command {sent} \
                 ({e}); batch:\n{}\nredcar log:\n{}",
                batch
                    .iter()
                    .map(|c| show(&c.args))
                    .collect::<Vec<_>>()
                    .join("\n"),
                redcar.log()
            )
        });
        let from_direct = send(&mut direct, &to_direct, one_by_one)
            .unwrap_or_else(|e| panic!("seed {seed}: standalone redis-server failed: {e}"));
        from_proxy.iter().for_each(|v| count_types(v, &mut typed));
        let mut direct_replies = from_direct.into_iter();
        let mut diverged = false;
        for (i, (cmd, got)) in batch.iter().zip(&from_proxy).enumerate() {
            let index = sent + i;
            per_check[cmd.check as usize] += 1;
            if trace {
                eprintln!("#{index} [{how}] {} -> {got:?}", show(&cmd.args));
            }
            if cmd.in_tx.is_some() || cmd.check == Check::RedcarOnly {
                match (cmd.args[0].as_str(), got.folded()) {
                    ("EXEC", Value::Array(Some(_))) => execs[0] += 1,
                    ("EXEC", v) if v.is_nil() => execs[1] += 1,
                    ("EXEC", v) if Expect::ExecAbort.holds(v) => execs[2] += 1,
                    ("EXEC", v) if Expect::CrossSlot.holds(v) => execs[3] += 1,
                    ("DISCARD", v) if *v == Value::simple("OK") => execs[4] += 1,
                    _ => {}
                }
            }
            if let Some(expect) = cmd.expected() {
                let mut context = String::new();
                for (j, (c, r)) in batch.iter().zip(&from_proxy).enumerate().take(i) {
                    let _ = writeln!(context, "    #{}: {} -> {r:?}", sent + j, show(&c.args));
                }
                assert!(
                    expect.holds(got),
                    "seed {seed}, command #{index} ({how}): {}\n  sent to redcar \
                     alone (keys span slots, or a transaction redcar refuses), which must answer \
                     {expect:?}, got {got:?}\n  earlier commands of this pipeline (with \
                     redcar's replies):\n{context}",
                    show(&cmd.args)
                );
                continue;
            }
            let want = direct_replies
                .next()
                .expect("one standalone reply per command");
            if diverged {
                unverified += 1;
                continue;
            }
            let (g, w) = (normalise_reply(got, cmd), normalise_reply(&want, cmd));
            if g == w {
                continue;
            }
            let known = KNOWN_DIVERGENCES.iter().find(|k| {
                (0..=i).any(|j| {
                    (k.starts)(&batch[j], &batch[j + 1..])
                        && (k.affects)(&batch[j], cmd, j == i, got, &want)
                })
            });
            if let Some(known) = known {
                eprintln!(
                    "differential: seed {seed}: known divergence {} at command #{index}: {}\n  \
                     redcar: {got:?}\n  redis:  {want:?}\n  ({})",
                    known.name,
                    show(&cmd.args),
                    known.reason
                );
                tolerated.push((index, known.name));
                diverged = true;
                continue;
            }
            let mut context = String::new();
            for (j, (c, r)) in batch.iter().zip(&from_proxy).enumerate().take(i) {
                let _ = writeln!(context, "    #{}: {} -> {r:?}", sent + j, show(&c.args));
            }
            panic!(
                "seed {seed}: reply mismatch at command #{index} ({how}, check \
                 {:?}):\n  command:    {}\n  redcar:     {got:?}\n  redis:      {want:?}\n  \
                 earlier commands of this pipeline (with redcar's replies):\n{context}  rerun: REDCAR_DIFF_SEED={seed} cargo \
                 test --test it differential",
                cmd.check,
                show(&cmd.args)
            );
        }
        let risky = (0..batch.len()).any(|j| {
            KNOWN_DIVERGENCES
                .iter()
                .any(|k| (k.starts)(&batch[j], &batch[j + 1..]))
        });
        if diverged || risky {
            resync(&mut direct, &mut proxy, &gen.universe);
            resyncs += 1;
        }
        sent += n;
    }

    // The data itself must end up the same.
    let mut compared = 0;
    for key in &gen.universe.keys {
        let (g, w) = (
            key_state(&mut proxy, &key.name),
            key_state(&mut direct, &key.name),
        );
        assert_eq!(
            g, w,
            "seed {seed}: final state of {} differs (type, contents, expiry): redcar vs redis",
            key.name
        );
        compared += usize::from(w[0] != Value::simple("none"));
    }
    assert_eq!(
        proxy.q(&["DBSIZE"]),
        direct.q(&["DBSIZE"]),
        "DBSIZE at the end"
    );
    if resp3 {
        for kind in ["Null", "Double", "Map", "Set"] {
            assert!(
                typed.contains_key(kind),
                "seed {seed}: no {kind} reply in the RESP3 run, so none was compared: {typed:?}"
            );
        }
        eprintln!("differential (RESP3): RESP3 types compared: {typed:?}");
    } else {
        assert!(typed.is_empty(), "RESP3 types in a RESP2 run: {typed:?}");
    }
    eprintln!(
        "differential ({protocol}): seed {seed}: {sent} commands matched (exact {}, unordered {}, ttl-kind {}, \
         crossslot {}, error-code {}, exec {}, non-negative {}, redcar-only {}); EXEC answered \
         {} arrays, {} nil (WATCH), {} EXECABORT, {} CROSSSLOT, and {} DISCARDs; \
         {compared} keys compared at the end, {} known divergences tolerated{} \
         ({unverified} commands after them in their pipelines not compared, {resyncs} resyncs); \
         setup {setup:?}, \
         total {:?}",
        per_check[Check::Exact as usize],
        per_check[Check::Unordered as usize],
        per_check[Check::TtlKind as usize],
        per_check[Check::CrossSlot as usize],
        per_check[Check::ErrorCode as usize],
        per_check[Check::Exec as usize],
        per_check[Check::NonNegative as usize],
        per_check[Check::RedcarOnly as usize],
        execs[0],
        execs[1],
        execs[2],
        execs[3],
        execs[4],
        tolerated.len(),
        if tolerated.is_empty() {
            String::new()
        } else {
            format!(": {tolerated:?}")
        },
        t0.elapsed()
    );
}
