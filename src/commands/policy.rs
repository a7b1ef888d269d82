//! How redcar serves each command: routed by key, answered locally, sent anywhere, or refused.

use super::spec::{flags, CommandSpec};

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
    /// Refused with `-ERR redcar: <CMD> is not supported (<reason>)`.
    Unsupported(&'static str),
}

/// Commands redcar answers without a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Local {
    Ping,
    Echo,
    Quit,
    Select,
    Hello,
    Reset,
    ClientSetName,
    ClientGetName,
    ClientId,
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
    /// SCRIPT FLUSH, FUNCTION LOAD/DELETE/FLUSH: every primary must give the same reply;
    /// otherwise the first error, naming its node.
    Broadcast,
    /// SLOWLOG GET / LEN / RESET: every primary's slow log merged with redcar's own.
    Slowlog,
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
            FanOut::Slowlog => {
                "sent to every primary; merged with redcar's own slow log (GET newest first, LEN summed, RESET both)"
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

pub const BLOCKING: &str = "blocking commands need a dedicated connection; not yet supported";
pub const TRANSACTIONS: &str = "transactions are not yet supported";
pub const PUBSUB: &str = "pub/sub is not yet supported";
pub const NODE_ADMIN: &str = "node administration is not allowed through the proxy";
pub const FAN_OUT: &str = "needs a fan-out to every primary; not yet supported";
pub const AUTH: &str = "authentication is not configured";
pub const CONNECTION_STATE: &str =
    "changes server-side state of a connection shared by many clients";
pub const CLUSTER_STATE: &str = "cluster connection state is managed by redcar";
pub const KEYLESS: &str = "keyless command with no single target node";

const LOCAL: &[(&str, Local)] = &[
    ("client|getname", Local::ClientGetName),
    ("client|id", Local::ClientId),
    ("client|setname", Local::ClientSetName),
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
const ANY_NODE: &[&str] = &["command|getkeys", "command|getkeysandflags", "time"];

const TRANSACTION: &[&str] = &["discard", "exec", "multi", "unwatch", "watch"];

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
    ("keys", FanOut::Keys),
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
const FAN_OUT_CMDS: &[&str] = &["function", "info", "script", "wait"];

/// Multi-key commands that redcar splits per slot when their keys span several slots.
const SPLIT: &[(&str, SplitMerge)] = &[
    ("del", SplitMerge::Sum),
    ("exists", SplitMerge::Sum),
    ("mget", SplitMerge::Values),
    ("mset", SplitMerge::AllOk),
    ("touch", SplitMerge::Sum),
    ("unlink", SplitMerge::Sum),
];

/// Flagged blocking by Redis but only block with their BLOCK option, which the router refuses.
const BLOCK_OPTION: &[&str] = &["xread", "xreadgroup"];

const CLUSTER_CONN: &[&str] = &["asking", "readonly", "readwrite"];

/// Decides how `spec` is served. Order matters: refusals that depend on the command's
/// nature (transactions, pub/sub, blocking, admin) win over "it has keys".
pub fn serve(spec: &CommandSpec) -> Serve {
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
    if let Some(reason) = refusal(spec, name, container) {
        return Serve::Unsupported(reason);
    }
    if spec.has_keys() {
        return Serve::Keyed;
    }
    Serve::Unsupported(KEYLESS)
}

fn refusal(spec: &CommandSpec, name: &str, container: &str) -> Option<&'static str> {
    Some(if name == "auth" {
        AUTH
    } else if TRANSACTION.contains(&name) {
        TRANSACTIONS
    } else if spec.has_flag(flags::PUBSUB) || container == "pubsub" {
        PUBSUB
    } else if spec.has_flag(flags::BLOCKING) && !BLOCK_OPTION.contains(&name) {
        BLOCKING
    } else if ADMIN.contains(&container) && !admin_keyed(name) {
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
pub fn split_merge(spec: &CommandSpec) -> Option<SplitMerge> {
    SPLIT
        .iter()
        .find(|(n, _)| *n == spec.name)
        .map(|(_, merge)| *merge)
}

/// True for the keyed commands that must be refused when they carry a BLOCK option.
pub fn refuses_block_option(spec: &CommandSpec) -> bool {
    BLOCK_OPTION.contains(&spec.name)
}

/// What a keyed command does beyond plain routing, for docs.
pub fn keyed_note(spec: &CommandSpec) -> Option<&'static str> {
    if split_merge(spec).is_some() {
        Some("keys in several slots are split per slot and the replies merged")
    } else if refuses_block_option(spec) {
        Some("refused with the BLOCK option (blocking needs a dedicated connection)")
    } else if matches!(spec.name, "evalsha" | "evalsha_ro") {
        Some("a NOSCRIPT reply is healed by loading the script redcar saw and retrying once")
    } else {
        None
    }
}

/// Human text for docs and errors: what redcar does with the command.
pub fn describe(spec: &CommandSpec) -> &'static str {
    match serve(spec) {
        Serve::Keyed => keyed_note(spec).unwrap_or("routed to the primary owning its keys' slot"),
        Serve::Local(_) => "answered by redcar",
        Serve::AnyNode => "sent to any one primary",
        Serve::FanOut(fan_out) => fan_out.describe(),
        Serve::Unsupported(reason) => reason,
    }
}

/// The error line (without `-` and CRLF) sent for an unsupported command.
pub fn unsupported_message(spec: &CommandSpec, reason: &str) -> String {
    let shown = spec.name.replace('|', " ").to_ascii_uppercase();
    format!("ERR redcar: {shown} is not supported ({reason})")
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
