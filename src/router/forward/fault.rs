//! Fault injection (`router.faults`): delays and error replies for chosen commands on chosen
//! nodes, for tests and drills. With no rule configured the router holds `None` and a command
//! pays one `Option` check.
//!
//! Rules apply where `Forwarder::forward` has picked the node: single-slot and keyless commands,
//! and each per-slot part of a split MGET/MSET/DEL/... Fan-outs, transactions, blocking commands
//! and subscriptions are not touched. The rules are here; the forwarder applies what they pick
//! in inject.rs.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use prometheus_client::metrics::counter::Counter;
use rand::Rng;
use serde::{Deserialize, Serialize};

use super::super::RouterMetrics;
use crate::metrics::Metrics;
use crate::values::units;

/// One entry of `router.faults` in the config file.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(crate) struct FaultRule {
    /// `host:port` of the node whose commands are affected (as the cluster names it); absent:
    /// every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) node: Option<String>,
    /// Command names (the first word, any case); empty: every command.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) commands: Vec<String>,
    /// Share of the matching commands affected, from 0 to 100.
    pub(crate) percentage: f64,
    /// The reply reaches the client no earlier than this after dispatch; 0 = no delay.
    #[serde(default, with = "units::duration")]
    pub(crate) delay: Duration,
    /// Answer with this error (`ERR injected fault` is sent as `-ERR injected fault`) instead of
    /// sending the command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
}

/// The rules, prepared once at start-up.
pub(in crate::router) struct Faults {
    /// In config order; the first that matches and fires decides.
    rules: Box<[PreparedRule]>,
    /// `faults_injected{kind="delay"}`.
    delays: Counter,
    /// `faults_injected{kind="error"}`.
    errors: Counter,
}

/// What a rule that fired does to one command. Owned (a `Bytes` clone), so the command does not
/// borrow the rules, which a reload may replace while it runs.
pub(in crate::router) struct Picked {
    /// Held back this long before the reply reaches the client.
    pub(super) delay: Duration,
    /// Sent instead of the command's reply; the command is then not sent at all.
    pub(super) error: Option<Bytes>,
}

/// A prepared rule: upper-case names, the error already encoded.
struct PreparedRule {
    /// Only commands sent to this node (`host:port`); `None` for any node.
    node: Option<Box<str>>,
    /// Only these commands, upper-case; empty for every command.
    commands: Box<[Box<[u8]>]>,
    /// `percentage / 100`.
    share: f64,
    /// As [`Picked::delay`].
    delay: Duration,
    /// As [`Picked::error`], already encoded as a RESP error.
    error: Option<Bytes>,
}

impl Faults {
    /// `None` when there is no rule: the hot path then skips fault injection entirely.
    pub(crate) fn new(rules: &[FaultRule], metrics: &Metrics) -> Option<Faults> {
        if rules.is_empty() {
            return None;
        }
        let rules = rules.iter().map(PreparedRule::new).collect();
        let counts = metrics.group::<RouterMetrics>();
        Some(Faults {
            rules,
            delays: counts.faults("delay"),
            errors: counts.faults("error"),
        })
    }

    /// The first rule that matches `payload` (one encoded command) on `node` and fires; counted
    /// here, as it is always injected.
    pub(crate) fn pick(&self, payload: &[u8], node: &str) -> Option<Picked> {
        let name = command_name(payload);
        let rule = self
            .rules
            .iter()
            .find(|rule| rule.matches(name, node) && rule.fires())?;
        if !rule.delay.is_zero() {
            self.delays.inc();
        }
        if rule.error.is_some() {
            self.errors.inc();
        }
        Some(Picked {
            delay: rule.delay,
            error: rule.error.clone(),
        })
    }
}

impl PreparedRule {
    fn new(rule: &FaultRule) -> PreparedRule {
        PreparedRule {
            node: rule.node.as_deref().map(Box::from),
            commands: rule
                .commands
                .iter()
                .map(|c| c.to_ascii_uppercase().into_bytes().into_boxed_slice())
                .collect(),
            share: rule.percentage / 100.0,
            delay: rule.delay,
            error: rule.error.as_deref().map(encode_error),
        }
    }

    fn matches(&self, name: &[u8], node: &str) -> bool {
        self.node.as_deref().is_none_or(|n| n == node)
            && (self.commands.is_empty()
                || self.commands.iter().any(|c| c.eq_ignore_ascii_case(name)))
    }

    /// A dice roll, skipped for 0 and 100%.
    fn fires(&self) -> bool {
        if self.share >= 1.0 {
            return true;
        }
        self.share > 0.0 && rand::rng().random::<f64>() < self.share
    }
}

/// `-<text>\r\n`; the text was checked for CR and LF at start-up.
fn encode_error(text: &str) -> Bytes {
    let mut reply = BytesMut::with_capacity(text.len() + 3);
    reply.extend_from_slice(b"-");
    reply.extend_from_slice(text.as_bytes());
    reply.extend_from_slice(b"\r\n");
    reply.freeze()
}

/// The command name of a multibulk request (`*N\r\n$L\r\nNAME\r\n...`); empty if malformed.
/// Inline requests reach the router re-encoded as multibulk.
fn command_name(payload: &[u8]) -> &[u8] {
    let Some(header) = memchr::memchr(b'\n', payload) else {
        return &[];
    };
    let rest = &payload[header + 1..];
    let Some(len_end) = memchr::memchr(b'\r', rest) else {
        return &[];
    };
    let len = rest
        .get(1..len_end)
        .and_then(|digits| std::str::from_utf8(digits).ok())
        .and_then(|digits| digits.parse::<usize>().ok());
    match len {
        Some(len) if rest.first() == Some(&b'$') => {
            rest.get(len_end + 2..len_end + 2 + len).unwrap_or(&[])
        }
        _ => &[],
    }
}

/// Start-up checks of `router.faults`; the message names the entry and key.
pub(crate) fn validate(rules: &[FaultRule]) -> Result<(), String> {
    for (i, rule) in rules.iter().enumerate() {
        let key = format!("router.faults[{i}]");
        if !(0.0..=100.0).contains(&rule.percentage) {
            return Err(format!(
                "`{key}.percentage` is {}: expected a value from 0 to 100",
                rule.percentage
            ));
        }
        if let Some(node) = &rule.node {
            let port = node
                .rsplit_once(':')
                .map(|(host, port)| (host, port.parse::<u16>()));
            if !matches!(port, Some((host, Ok(port))) if !host.is_empty() && port != 0) {
                return Err(format!(
                    "`{key}.node` is `{node}`: expected HOST:PORT as the cluster names the node, such as 127.0.0.1:7000"
                ));
            }
        }
        if let Some(name) = rule
            .commands
            .iter()
            .find(|c| c.is_empty() || c.contains(char::is_whitespace))
        {
            return Err(format!(
                "`{key}.commands` has `{name}`: expected a command name such as GET (one word)"
            ));
        }
        match &rule.error {
            Some(error) if error.is_empty() || error.contains(['\r', '\n']) => {
                return Err(format!(
                    "`{key}.error` must be one non-empty line (no CR or LF), such as \"ERR injected fault\""
                ));
            }
            None if rule.delay.is_zero() => {
                return Err(format!(
                    "`{key}` has neither `delay` nor `error`: it would do nothing"
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "fault_tests.rs"]
mod tests;
