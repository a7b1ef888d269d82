//! Finding out whether the slot map changed without fetching it whole: one small command to the
//! node the current map came from, whose answer — a fingerprint of that node's view — is compared
//! with the fingerprint taken together with the map.
//!
//! Two fingerprints, both of one node's view (so a check goes to the node the map came from):
//!
//! - **digest**: the SHA-1 of the node's `CLUSTER NODES` with each line's two volatile fields
//!   (`ping-sent`, `pong-recv`) cut out, computed by the node in a short script ([`SCRIPT`],
//!   sent as `EVALSHA`). It covers every field that describes the topology: ids, addresses,
//!   flags (roles, `fail`), each replica's primary, config epochs, link states and slots, so it
//!   changes with every change of ownership, role, address or membership. The reply is 47
//!   bytes whatever the cluster's size; the node's CPU grows with it (the text it hashes).
//!   The refresher computes the same digest from the `CLUSTER NODES` it fetched with the map
//!   ([`local_digest`]), so the baseline costs the node nothing.
//! - **info**: the topology fields of `CLUSTER INFO` (state, slot counts by health, known nodes,
//!   primaries with slots, current and own config epoch). About 600 bytes, and a cost
//!   independent of the cluster's size, but blind to what moves no epoch and no count: a slot
//!   moved to the primary that already has the highest epoch, a replica moved to another
//!   primary, a changed address. It catches a failover (epochs, failed slots), a node added or
//!   forgotten, and slots assigned or lost, so it is what the refresher polls while a node is in
//!   trouble ([`Probe::Info`]), whatever `cluster.change_check` says.

use bytes::Bytes;

/// The digest script, run with `EVALSHA` ([`SCRIPT_SHA`]) or, when the node does not have it
/// cached (`NOSCRIPT`), with `EVAL`. Lua patterns: `%x+` the node id, three `%S+` fields
/// (address, flags, primary), then the two numbers to drop. A line that does not match is kept
/// whole. No shebang line, so Redis 6 runs it too; Redis 7 runs it in compatibility mode, where
/// a script that writes nothing runs on replicas and on a node over `maxmemory`.
pub(crate) const SCRIPT: &str = "local t = string.gsub('\\n' .. redis.call('CLUSTER', 'NODES'), '\\n(%x+ %S+ %S+ %S+) %d+ %d+', '\\n%1')\nreturn redis.sha1hex(t)\n";

/// SHA-1 of [`SCRIPT`] (a unit test keeps the two in step).
pub(crate) const SCRIPT_SHA: &str = "c049298c59ad15abca9faa3df9853aa86ddd7700";

/// The `CLUSTER INFO` fields that describe the topology; the others are message counters.
const INFO_FIELDS: [&str; 9] = [
    "cluster_state",
    "cluster_slots_assigned",
    "cluster_slots_ok",
    "cluster_slots_pfail",
    "cluster_slots_fail",
    "cluster_known_nodes",
    "cluster_size",
    "cluster_current_epoch",
    "cluster_my_epoch",
];

/// One node's view at one moment, as far as a check can tell: either part may be unknown (the
/// node refused the command, or it was not asked).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Print {
    /// The digest of the node's `CLUSTER NODES` view, from the digest script.
    pub(crate) digest: Option<String>,
    /// The fingerprint read from `CLUSTER INFO`.
    pub(crate) info: Option<String>,
}

/// What a check asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Probe {
    /// A Lua script on the node hashes its `CLUSTER NODES`: sees every change of owners, replicas
    /// and addresses.
    Digest,
    /// `CLUSTER INFO`'s counters: needs no scripting, but blind to some changes (a slot moved to
    /// the newest primary, a replica moved, a changed address).
    Info,
}

/// What the node answered to a check.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    /// The fingerprint.
    Print(String),
    /// `NOSCRIPT`: the script must be sent whole (`EVAL`) once.
    NoScript,
    /// The node refused the command (ACL, scripting disabled, unknown command): the reason.
    Refused(String),
}

impl Probe {
    /// `cluster.change_check` → what the periodic refresh asks; `None` for `off`.
    pub(crate) fn periodic(check: super::config::ChangeCheck) -> Option<Probe> {
        match check {
            super::config::ChangeCheck::Digest => Some(Probe::Digest),
            super::config::ChangeCheck::Info => Some(Probe::Info),
            super::config::ChangeCheck::Off => None,
        }
    }

    /// The command; `whole`: the script itself (`EVAL`) rather than its SHA.
    pub(crate) fn request(self, whole: bool) -> Bytes {
        match (self, whole) {
            (Probe::Info, _) => Bytes::from_static(CLUSTER_INFO),
            (Probe::Digest, false) => encode(&["EVALSHA", SCRIPT_SHA, "0"]),
            (Probe::Digest, true) => encode(&["EVAL", SCRIPT, "0"]),
        }
    }

    /// The name used in logs and metrics.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Probe::Digest => "digest",
            Probe::Info => "info",
        }
    }

    /// Reads the node's reply: a bulk string (the digest, or the `CLUSTER INFO` text) or an
    /// error.
    pub(crate) fn answer(self, reply: &crate::protocol::Frame) -> Answer {
        use crate::protocol::Frame;
        match reply {
            Frame::Error(message) if message.starts_with(b"NOSCRIPT") => Answer::NoScript,
            Frame::Error(message) => Answer::Refused(String::from_utf8_lossy(message).into()),
            Frame::Bulk(text) => match self {
                Probe::Digest if is_digest(text) => {
                    Answer::Print(String::from_utf8_lossy(text).into())
                }
                Probe::Digest => Answer::Refused("the script's reply is not a digest".into()),
                Probe::Info => match info_print(text) {
                    Some(print) => Answer::Print(print),
                    None => Answer::Refused("CLUSTER INFO has no cluster_current_epoch".into()),
                },
            },
            other => Answer::Refused(format!("unexpected reply {other:?}")),
        }
    }

    /// This probe's part of `print`.
    pub(crate) fn of(self, print: &Print) -> Option<&str> {
        match self {
            Probe::Digest => print.digest.as_deref(),
            Probe::Info => print.info.as_deref(),
        }
    }
}

/// `CLUSTER INFO`, as the refresher pipelines it behind the map.
pub(crate) const CLUSTER_INFO: &[u8] = b"*2\r\n$7\r\nCLUSTER\r\n$4\r\nINFO\r\n";

fn encode(args: &[&str]) -> Bytes {
    let mut out = format!("*{}\r\n", args.len());
    for arg in args {
        out.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
    }
    Bytes::from(out)
}

fn is_digest(text: &[u8]) -> bool {
    text.len() == 40 && text.iter().all(u8::is_ascii_hexdigit)
}

/// The topology fields of a `CLUSTER INFO` text, in a fixed order (`name:value` lines); `None`
/// when it lacks the current epoch (not a cluster node's answer).
pub(crate) fn info_print(text: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(text).ok()?;
    let value = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
    };
    value("cluster_current_epoch")?;
    let fields: Vec<String> = INFO_FIELDS
        .iter()
        .map(|name| format!("{name}:{}", value(name).unwrap_or("-")))
        .collect();
    Some(fields.join(" "))
}

/// The digest [`SCRIPT`] computes, from the same `CLUSTER NODES` text: a newline, then each line
/// (split at `\n`, the last piece empty when the text ends with one) with its `ping-sent` and
/// `pong-recv` cut out, each line preceded by a newline; then SHA-1 in lower-case hex.
pub(crate) fn local_digest(nodes: &[u8]) -> String {
    let mut text = Vec::with_capacity(nodes.len() + 1);
    for line in nodes.split(|&b| b == b'\n') {
        text.push(b'\n');
        match volatile(line) {
            Some((cut, end)) => {
                text.extend_from_slice(&line[..cut]);
                text.extend_from_slice(&line[end..]);
            }
            None => text.extend_from_slice(line),
        }
    }
    crate::values::sha1_hex(&text)
}

/// Where the ` ping-sent pong-recv` part of a line starts and ends, if the line matches the
/// script's pattern `^%x+ %S+ %S+ %S+ %d+ %d+` (each run as long as it can be, as Lua matches).
fn volatile(line: &[u8]) -> Option<(usize, usize)> {
    let mut at = run(line, 0, |b| b.is_ascii_hexdigit())?;
    for _ in 0..3 {
        at = run(line, space(line, at)?, |b| !is_lua_space(b))?;
    }
    let cut = at;
    at = run(line, space(line, at)?, |b| b.is_ascii_digit())?;
    at = run(line, space(line, at)?, |b| b.is_ascii_digit())?;
    Some((cut, at))
}

/// The end of the run of at least one byte matching `class` from `from`.
fn run(line: &[u8], from: usize, class: impl Fn(u8) -> bool) -> Option<usize> {
    let len = line.get(from..)?.iter().take_while(|&&b| class(b)).count();
    (len > 0).then_some(from + len)
}

/// Just past the single space at `at`.
fn space(line: &[u8], at: usize) -> Option<usize> {
    (line.get(at) == Some(&b' ')).then_some(at + 1)
}

/// Lua's `%s` (C `isspace`): space, `\t`, `\n`, `\v`, `\f`, `\r`.
fn is_lua_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

#[cfg(test)]
#[path = "change_check_tests.rs"]
mod tests;
