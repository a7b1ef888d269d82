//! What redcar does with each command, in words: the text of the command reference
//! (docs/commands.md) and of the refusals that name why a command is not served.
//!
//! Apart from the policy it reads so that the decisions stay short: every phrase here follows from
//! a [`Serve`] answer, and a new answer without its phrase fails to compile.

use super::policy::{self, Serve, Sub, SubKind, Tx};
use super::spec::CommandSpec;

/// What a keyed command does beyond plain routing, for docs.
pub(crate) fn keyed_note(spec: &CommandSpec) -> Option<&'static str> {
    if policy::split_merge(spec).is_some() {
        Some("keys in several slots are split per slot and the replies merged")
    } else if policy::blocks_with_option(spec) {
        Some("routed by key; with BLOCK, sent on a dedicated connection like other blocking commands")
    } else if matches!(spec.name, "evalsha" | "evalsha_ro") {
        Some("a NOSCRIPT reply is healed by loading the script redcar saw and retrying once")
    } else {
        None
    }
}

/// Human text for docs and errors: what redcar does with the command.
pub fn describe(spec: &CommandSpec) -> &'static str {
    match policy::serve(spec) {
        Serve::Keyed => keyed_note(spec).unwrap_or("routed to the primary owning its keys' slot"),
        Serve::Local(_) => "answered by redcar",
        Serve::AnyNode => "sent to any one primary",
        Serve::FanOut(fan_out) => fan_out.describe(),
        Serve::Blocking => "sent on a dedicated connection to the primary owning its keys' slot",
        Serve::Wait => {
            "asked of every primary this client wrote to (tracked per group of 16 slots: a group that straddles two shards asks both), on the client's own connection (blocking it at most 10 ms, then polling); the smallest count"
        }
        Serve::Transaction(Tx::Multi | Tx::Exec | Tx::Discard) => {
            "queued by redcar; EXEC sends MULTI … EXEC in one piece to the slot's primary"
        }
        Serve::Transaction(Tx::Watch | Tx::Unwatch) => {
            "pins a dedicated connection to the watched slot's primary until EXEC, DISCARD or UNWATCH"
        }
        Serve::Subscription(Sub {
            kind: SubKind::Shard,
            ..
        }) => "subscribe mode; on a dedicated connection to the shard channel's primary",
        Serve::Subscription(_) => "subscribe mode; on one dedicated connection (cluster-wide channels)",
        Serve::Unsupported(reason) => reason,
    }
}
