//! The name lists behind [`policy`](super::policy): which commands redcar answers itself, sends
//! anywhere, treats as transactions, subscriptions or node administration, fans out or splits.
//! Kept apart from the decisions that read them so each list can be reviewed on its own.

use super::policy::{FanOut, Local, SplitMerge, SubKind, Tx};

pub(super) const LOCAL: &[(&str, Local)] = &[
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
pub(super) const ANY_NODE: &[&str] = &[
    "command|getkeys",
    "command|getkeysandflags",
    "pubsub|help",
    "publish",
    "time",
];

pub(super) const TRANSACTION: &[(&str, Tx)] = &[
    ("discard", Tx::Discard),
    ("exec", Tx::Exec),
    ("multi", Tx::Multi),
    ("unwatch", Tx::Unwatch),
    ("watch", Tx::Watch),
];

pub(super) const SUBSCRIPTION: &[(&str, SubKind, bool)] = &[
    ("psubscribe", SubKind::Pattern, true),
    ("punsubscribe", SubKind::Pattern, false),
    ("ssubscribe", SubKind::Shard, true),
    ("subscribe", SubKind::Channel, true),
    ("sunsubscribe", SubKind::Shard, false),
    ("unsubscribe", SubKind::Channel, false),
];

/// Matched by container name, so every subcommand is covered too.
pub(super) const ADMIN: &[&str] = &[
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
pub(super) const FAN_OUT_SERVED: &[(&str, FanOut)] = &[
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
pub(super) const FAN_OUT_CMDS: &[&str] = &["function", "script"];

/// Multi-key commands that redcar splits per slot when their keys span several slots.
pub(super) const SPLIT: &[(&str, SplitMerge)] = &[
    ("del", SplitMerge::Sum),
    ("exists", SplitMerge::Sum),
    ("mget", SplitMerge::Values),
    ("mset", SplitMerge::AllOk),
    ("touch", SplitMerge::Sum),
    ("unlink", SplitMerge::Sum),
];

/// Flagged blocking by Redis but only block with their BLOCK option: without it they are plain
/// keyed reads, with it the router sends them on a dedicated connection.
pub(super) const BLOCK_OPTION: &[&str] = &["xread", "xreadgroup"];

pub(super) const CLUSTER_CONN: &[&str] = &["asking", "readonly", "readwrite"];
