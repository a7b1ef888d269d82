//! How redcar serves each command: routed by key, answered locally, sent anywhere, or refused.

use std::sync::OnceLock;

use super::spec::{flags, CommandSpec};
use super::table::COMMANDS;

/// Serving decision for one command (or subcommand).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serve {
    /// Has keys: forward to the node owning their slot (the router computes and checks slots).
    Keyed,
    /// Answered by redcar itself.
    Local(Local),
    /// Keyless and harmless on any one primary.
    AnyNode,
    /// Keyless, sent to every primary and the replies merged.
    FanOut(FanOut),
    /// Blocks until data arrives: sent on a dedicated connection, never a shared one.
    Blocking,
    /// WAIT: asked of the primaries this client wrote to, on its own connections.
    Wait,
    /// MULTI / EXEC / DISCARD / WATCH / UNWATCH: connection state kept by the session.
    Transaction(Tx),
    /// (P|S)SUBSCRIBE and their UNSUBSCRIBE: the session enters subscribe mode.
    Subscription(Sub),
    /// Refused with `-ERR redcar: <CMD> is not supported (<reason>)`.
    Unsupported(&'static str),
}

/// The transaction commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tx {
    /// `MULTI`.
    Multi,
    /// `EXEC`.
    Exec,
    /// `DISCARD`.
    Discard,
    /// `WATCH`.
    Watch,
    /// `UNWATCH`.
    Unwatch,
}

/// The subscription commands: which kind of subscription, and whether it adds or removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sub {
    /// Channels, patterns or shard channels.
    pub kind: SubKind,
    /// `true` for (P|S)SUBSCRIBE, `false` for their UNSUBSCRIBE.
    pub subscribe: bool,
}

/// Channels and patterns are cluster-wide (one node connection hears every message); shard
/// channels live on the node owning their slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SubKind {
    /// `SUBSCRIBE`, `UNSUBSCRIBE`.
    Channel,
    /// `PSUBSCRIBE`, `PUNSUBSCRIBE`.
    Pattern,
    /// `SSUBSCRIBE`, `SUNSUBSCRIBE`.
    Shard,
}

/// Commands redcar answers without a node; an undocumented variant is the command its name
/// spells (`ClientSetName`: `CLIENT SETNAME`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Local {
    /// `AUTH [user] password`: checked against `auth` in the config.
    Auth,
    Ping,
    Echo,
    Quit,
    Select,
    Hello,
    Reset,
    ClientSetName,
    /// `CLIENT SETINFO` (Redis 7.2): checked and accepted, not kept.
    ClientSetInfo,
    ClientGetName,
    ClientId,
    /// `CLIENT TRACKING`, `CLIENT CACHING`, `CLIENT GETREDIR`, `CLIENT TRACKINGINFO`:
    /// client-side caching, kept per session (downstream/tracking).
    ClientTracking,
    ClientCaching,
    ClientGetRedir,
    ClientTrackingInfo,
    Command,
    CommandCount,
    CommandInfo,
    CommandDocs,
    CommandList,
}

/// How a fan-out command's per-primary replies become the client's reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FanOut {
    /// DBSIZE: the sum of the integers.
    DbSize,
    /// KEYS: the arrays concatenated.
    Keys,
    /// SCAN: one primary per call; the cursor names the primary and its cursor.
    Scan,
    /// RANDOMKEY: a random primary, then the others while the answer is nil.
    RandomKey,
    /// FLUSHALL / FLUSHDB: every primary must say OK; `router.allow_flush` can refuse them.
    Flush,
    /// SCRIPT LOAD: every primary must return the same sha1; redcar remembers the script.
    ScriptLoad,
    /// SCRIPT EXISTS: per sha1, 1 only if every primary has it.
    ScriptExists,
    /// SCRIPT FLUSH, FUNCTION LOAD/DELETE/FLUSH: one reply from every primary, or the first error.
    Broadcast,
    /// SLOWLOG GET / LEN / RESET: every primary's slow log merged with redcar's own.
    Slowlog,
    /// INFO: redcar's own section, counters summed over primaries, per-node sections from one.
    Info,
    /// PUBSUB CHANNELS / NUMSUB / NUMPAT / SHARDCHANNELS / SHARDNUMSUB: merged (sums, sets).
    PubSub,
}

impl FanOut {
    /// Human text for docs: how the replies are merged.
    pub fn describe(self) -> &'static str {
        match self {
            FanOut::DbSize => "sent to every primary; replies summed",
            FanOut::Keys => "sent to every primary; replies concatenated",
            FanOut::Scan => {
                "one primary at a time; the cursor encodes which primary and its cursor"
            }
            FanOut::RandomKey => "a random primary, then the others while the reply is nil",
            FanOut::Flush => {
                "sent to every primary; all must reply OK; refused when router.allow_flush is false"
            }
            FanOut::ScriptLoad => {
                "sent to every primary; the sha1 if all agree; redcar remembers the script"
            }
            FanOut::ScriptExists => {
                "sent to every primary; 1 per sha1 only if every primary has it"
            }
            FanOut::Broadcast => "sent to every primary; the common reply, or the first error",
            FanOut::PubSub => {
                "sent to every primary; channel names deduplicated, subscriber counts summed"
            }
            FanOut::Slowlog => {
                "sent to every primary; merged with redcar's own slow log (GET newest first, LEN summed, RESET both)"
            }
            FanOut::Info => {
                "sent to every primary; `# Redcar` (redcar's own: version, uptime, clients, slot map) \
                 comes first (with no section, `redcar`, `default`, `all` or `everything`); \
                 `clients`, `memory`, `stats`, `cpu`, `commandstats`, `errorstats` and `keyspace` are \
                 summed over the primaries (ratios, percentages, `current_*` and recent maxima: the \
                 largest; `*_human` recomputed; `avg_ttl` weighted by `expires`); every other section \
                 (`server`, `replication`, `persistence`, `cluster`, ...) is the first primary's by \
                 address, with `redis_version` the lowest of all; a `redcar_source` line in each \
                 non-list section says which"
            }
        }
    }
}

/// How a multi-key command whose keys span several slots is split per slot and merged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitMerge {
    /// MGET: the values in the original key order.
    Values,
    /// MSET: key/value pairs; OK only if every part is OK.
    AllOk,
    /// DEL, UNLINK, EXISTS, TOUCH: the sum of the counts.
    Sum,
}

impl SplitMerge {
    /// Arguments per key: 2 for MSET's key/value pairs, else 1.
    pub fn step(self) -> usize {
        match self {
            SplitMerge::AllOk => 2,
            SplitMerge::Values | SplitMerge::Sum => 1,
        }
    }
}

/// The reason `Unsupported` gives for the node administration commands.
pub const NODE_ADMIN: &str = "node administration is not allowed through the proxy";
const FAN_OUT: &str = "needs a fan-out to every primary; not yet supported";
const CONNECTION_STATE: &str = "changes server-side state of a connection shared by many clients";
const CLUSTER_STATE: &str = "cluster connection state is managed by redcar";
const KEYLESS: &str = "keyless command with no single target node";

const LOCAL: &[(&str, Local)] = &[
    ("auth", Local::Auth),
    ("client|caching", Local::ClientCaching),
    ("client|getname", Local::ClientGetName),
    ("client|getredir", Local::ClientGetRedir),
    ("client|id", Local::ClientId),
    ("client|setinfo", Local::ClientSetInfo),
    ("client|setname", Local::ClientSetName),
    ("client|tracking", Local::ClientTracking),
    ("client|trackinginfo", Local::ClientTrackingInfo),
    ("command", Local::Command),
    ("command|count", Local::CommandCount),
    ("command|docs", Local::CommandDocs),
    ("command|info", Local::CommandInfo),
    ("command|list", Local::CommandList),
    ("echo", Local::Echo),
    ("hello", Local::Hello),
    ("ping", Local::Ping),
    ("quit", Local::Quit),
    ("reset", Local::Reset),
    ("select", Local::Select),
];

/// Keyless, read-only and the same answer from any primary.
/// PUBLISH too: Redis Cluster delivers a message published on any node to every node's subscribers.
const ANY_NODE: &[&str] = &[
    "command|getkeys",
    "command|getkeysandflags",
    "pubsub|help",
    "publish",
    "time",
];

const TRANSACTION: &[(&str, Tx)] = &[
    ("discard", Tx::Discard),
    ("exec", Tx::Exec),
    ("multi", Tx::Multi),
    ("unwatch", Tx::Unwatch),
    ("watch", Tx::Watch),
];

const SUBSCRIPTION: &[(&str, SubKind, bool)] = &[
    ("psubscribe", SubKind::Pattern, true),
    ("punsubscribe", SubKind::Pattern, false),
    ("ssubscribe", SubKind::Shard, true),
    ("subscribe", SubKind::Channel, true),
    ("sunsubscribe", SubKind::Shard, false),
    ("unsubscribe", SubKind::Channel, false),
];

/// Matched by container name, so every subcommand is covered too.
const ADMIN: &[&str] = &[
    "acl",
    "bgrewriteaof",
    "bgsave",
    "cluster",
    "config",
    "debug",
    "failover",
    "lastsave",
    "latency",
    "memory",
    "migrate",
    "module",
    "monitor",
    "pfdebug",
    "pfselftest",
    "psync",
    "replconf",
    "replicaof",
    "restore-asking",
    "role",
    "save",
    "shutdown",
    "slaveof",
    "slowlog",
    "swapdb",
    "sync",
];

/// Served by sending to every primary and merging (matched by full name).
const FAN_OUT_SERVED: &[(&str, FanOut)] = &[
    ("dbsize", FanOut::DbSize),
    ("flushall", FanOut::Flush),
    ("flushdb", FanOut::Flush),
    ("function|delete", FanOut::Broadcast),
    ("function|flush", FanOut::Broadcast),
    ("function|load", FanOut::Broadcast),
    ("info", FanOut::Info),
    ("keys", FanOut::Keys),
    ("pubsub|channels", FanOut::PubSub),
    ("pubsub|numpat", FanOut::PubSub),
    ("pubsub|numsub", FanOut::PubSub),
    ("pubsub|shardchannels", FanOut::PubSub),
    ("pubsub|shardnumsub", FanOut::PubSub),
    ("randomkey", FanOut::RandomKey),
    ("scan", FanOut::Scan),
    ("script|exists", FanOut::ScriptExists),
    ("script|flush", FanOut::Broadcast),
    ("script|load", FanOut::ScriptLoad),
    ("slowlog|get", FanOut::Slowlog),
    ("slowlog|len", FanOut::Slowlog),
    ("slowlog|reset", FanOut::Slowlog),
];

/// Matched by container name: their effect or answer spans the whole keyspace and no merge is
/// implemented (checked after [`FAN_OUT_SERVED`]).
const FAN_OUT_CMDS: &[&str] = &["function", "script"];

/// Multi-key commands that redcar splits per slot when their keys span several slots.
const SPLIT: &[(&str, SplitMerge)] = &[
    ("del", SplitMerge::Sum),
    ("exists", SplitMerge::Sum),
    ("mget", SplitMerge::Values),
    ("mset", SplitMerge::AllOk),
    ("touch", SplitMerge::Sum),
    ("unlink", SplitMerge::Sum),
];

/// Flagged blocking by Redis but only block with their BLOCK option: without it they are plain
/// keyed reads, with it the router sends them on a dedicated connection.
const BLOCK_OPTION: &[&str] = &["xread", "xreadgroup"];

const CLUSTER_CONN: &[&str] = &["asking", "readonly", "readwrite"];

/// How `spec` is served. Deciding walks several name lists and the router asks for every
/// command, so the builtin table's top-level commands are decided once and looked up by the
/// spec's position in it; subcommands and learned or custom commands are decided each time.
#[inline]
pub fn serve(spec: &CommandSpec) -> Serve {
    static BUILTIN: OnceLock<Vec<Serve>> = OnceLock::new();
    match builtin_index(spec) {
        Some(index) => BUILTIN.get_or_init(|| COMMANDS.iter().map(decide).collect())[index],
        None => decide(spec),
    }
}

/// `spec`'s index in [`COMMANDS`] when it is one of its entries (found by address: the table is
/// one static slice).
#[inline]
fn builtin_index(spec: &CommandSpec) -> Option<usize> {
    let size = std::mem::size_of::<CommandSpec>();
    let start = COMMANDS.as_ptr() as usize;
    let offset = (spec as *const CommandSpec as usize).checked_sub(start)?;
    (offset % size == 0 && offset / size < COMMANDS.len()).then_some(offset / size)
}

/// Decides how `spec` is served. Order matters: refusals that depend on the command's
/// nature (transactions, pub/sub, blocking, admin) win over "it has keys".
fn decide(spec: &CommandSpec) -> Serve {
    let name = spec.name;
    let container = spec.container();
    if let Some((_, local)) = LOCAL.iter().find(|(n, _)| *n == name) {
        return Serve::Local(*local);
    }
    if ANY_NODE.contains(&name) {
        return Serve::AnyNode;
    }
    if let Some((_, fan_out)) = FAN_OUT_SERVED.iter().find(|(n, _)| *n == name) {
        return Serve::FanOut(*fan_out);
    }
    if let Some((_, tx)) = TRANSACTION.iter().find(|(n, _)| *n == name) {
        return Serve::Transaction(*tx);
    }
    if let Some((_, kind, subscribe)) = SUBSCRIPTION.iter().find(|(n, ..)| *n == name) {
        return Serve::Subscription(Sub {
            kind: *kind,
            subscribe: *subscribe,
        });
    }
    if name == "wait" {
        return Serve::Wait;
    }
    if spec.has_flag(flags::BLOCKING) && !BLOCK_OPTION.contains(&name) && spec.has_keys() {
        return Serve::Blocking;
    }
    if let Some(reason) = refusal(name, container) {
        return Serve::Unsupported(reason);
    }
    if spec.has_keys() {
        return Serve::Keyed;
    }
    Serve::Unsupported(KEYLESS)
}

fn refusal(name: &str, container: &str) -> Option<&'static str> {
    Some(if ADMIN.contains(&container) && !admin_keyed(name) {
        NODE_ADMIN
    } else if FAN_OUT_CMDS.contains(&container) {
        FAN_OUT
    } else if CLUSTER_CONN.contains(&name) {
        CLUSTER_STATE
    } else if container == "client" {
        CONNECTION_STATE
    } else {
        return None;
    })
}

/// Subcommands of admin containers that are really per-key reads: fine to route.
fn admin_keyed(name: &str) -> bool {
    name == "memory|usage"
}

/// How `spec` is split per slot when its keys span several slots; `None`: it must not be (it is
/// atomic across its keys, or not a plain multi-key command), so cross-slot use is refused.
#[inline]
pub fn split_merge(spec: &CommandSpec) -> Option<SplitMerge> {
    SPLIT
        .iter()
        .find(|(n, _)| *n == spec.name)
        .map(|(_, merge)| *merge)
}

/// True for the keyed commands that block only when they carry a BLOCK option.
pub fn blocks_with_option(spec: &CommandSpec) -> bool {
    BLOCK_OPTION.contains(&spec.name)
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
