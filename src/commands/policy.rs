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

/// Matched by container name: their effect or answer spans the whole keyspace.
const FAN_OUT_CMDS: &[&str] = &[
    "dbsize",
    "flushall",
    "flushdb",
    "function",
    "info",
    "keys",
    "randomkey",
    "scan",
    "script",
    "wait",
];

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
    } else if spec.has_flag(flags::BLOCKING) {
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

/// Human text for docs and errors: what redcar does with the command.
pub fn describe(spec: &CommandSpec) -> &'static str {
    match serve(spec) {
        Serve::Keyed => "routed to the primary owning its keys' slot",
        Serve::Local(_) => "answered by redcar",
        Serve::AnyNode => "sent to any one primary",
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
