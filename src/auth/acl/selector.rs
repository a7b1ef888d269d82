//! One set of command, key and channel rules (the root rules of a user, or one of its
//! `(...)` selectors), and the check of one command against it.
//!
//! Command rules are kept in the order they were given and read from the last: the last rule
//! that applies to a command decides. That is what Redis's bitmap ends up holding after
//! applying the rules in order (`+@all -@dangerous +flushdb`: FLUSHDB allowed, KEYS not), and
//! it also covers commands a module adds later, as `+@all` does in Redis.

use crate::commands::acl_keys::{acl_channels, Channels, KeyUse};
use crate::commands::spec::{flags, key_flags};
use crate::commands::{CommandSpec, CommandTable};
use crate::protocol::Args;

use super::denied::Denied;
use super::glob;

/// What a command rule applies to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Target {
    /// `+@all`, `allcommands`, `-@all`, `nocommands`.
    All,
    /// `+@read`: every command of the category, and every subcommand of a container that has
    /// it (module commands are left out, as in Redis).
    Category(u32),
    /// `+config`: the command, and all its subcommands if it is a container.
    Command(&'static str),
    /// `+config|get`: that subcommand alone (its full name).
    Subcommand(&'static str),
    /// `+select|0`: a command (not a container) when its first argument is this one (any
    /// case); only ever allowed, never denied.
    FirstArg(&'static str, Vec<u8>),
}

/// `+...` or `-...`.
#[derive(Clone, Debug)]
pub(super) struct CommandRule {
    /// `+` (allow) or `-` (deny).
    pub(super) allow: bool,
    /// What the rule names.
    pub(super) target: Target,
}

/// A key pattern and what it permits: `~p` both, `%R~p` reading, `%W~p` writing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct KeyPattern {
    /// The glob, matched as Redis matches it (`glob.rs`).
    pub(super) pattern: Vec<u8>,
    /// Permits reading keys that match.
    pub(super) read: bool,
    /// Permits writing keys that match.
    pub(super) write: bool,
}

/// One set of rules. Fresh, it allows nothing (Redis's default for a new user).
#[derive(Clone, Debug, Default)]
pub(super) struct Selector {
    /// The command rules in the order given; the last one that covers a command decides.
    pub(super) commands: Vec<CommandRule>,
    /// `allkeys` / `~*`.
    pub(super) all_keys: bool,
    /// Key patterns, each once, read and write merged.
    pub(super) keys: Vec<KeyPattern>,
    /// `allchannels` / `&*`.
    pub(super) all_channels: bool,
    /// Channel patterns, each once.
    pub(super) channels: Vec<Vec<u8>>,
}

impl Selector {
    /// Every command, key and channel.
    pub(super) fn is_unrestricted(&self) -> bool {
        self.all_keys
            && self.all_channels
            && matches!(
                self.commands.last(),
                Some(CommandRule {
                    allow: true,
                    target: Target::All
                })
            )
    }

    /// Whether every key is allowed, so the key checks can be skipped.
    pub(super) fn all_keys(&self) -> bool {
        self.all_keys
    }

    /// Redis's `ACLSelectorCheckCmd`: the command, then its keys, then its channels.
    pub(super) fn check(
        &self,
        spec: &CommandSpec,
        args: Args<'_>,
        keys: &[KeyUse],
    ) -> Result<(), Denied> {
        if !spec.has_flag(flags::NO_AUTH) && !self.allows_command(spec, args) {
            return Err(Denied::Command);
        }
        if !self.all_keys {
            for &(at, flags) in keys {
                let key = args.get(at).unwrap_or_default();
                if !self.key_allowed(key, flags) {
                    return Err(Denied::Key);
                }
            }
        }
        if !self.all_channels {
            if let Some(kind) = acl_channels(spec) {
                let named = match kind {
                    Channels::Publish => args.skip(1).take(1),
                    _ => args.skip(1),
                };
                let pattern = kind == Channels::PatternSubscribe;
                if !named.iter().all(|c| self.channel_allowed(c, pattern)) {
                    return Err(Denied::Channel);
                }
            }
        }
        Ok(())
    }

    /// The last command rule that applies decides; none: refused.
    fn allows_command(&self, spec: &CommandSpec, args: Args<'_>) -> bool {
        self.commands
            .iter()
            .rev()
            .find(|rule| applies(&rule.target, spec, args))
            .is_some_and(|rule| rule.allow)
    }

    /// Redis's `ACLSelectorCheckKey`: a key the command reads needs a pattern that permits
    /// reading, one it inserts, updates or deletes a pattern that permits writing; a key it
    /// only looks at (EXISTS, TYPE) any pattern.
    pub(super) fn key_allowed(&self, key: &[u8], flags: u32) -> bool {
        if self.all_keys {
            return true;
        }
        let read = flags & key_flags::ACCESS != 0;
        let write = flags & (key_flags::INSERT | key_flags::DELETE | key_flags::UPDATE) != 0;
        self.keys
            .iter()
            .any(|p| (p.read || !read) && (p.write || !write) && glob::matches(&p.pattern, key))
    }

    /// A channel matches a channel pattern; a pattern (PSUBSCRIBE) must equal one.
    pub(super) fn channel_allowed(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.all_channels
            || self.channels.iter().any(|p| match is_pattern {
                true => p == channel,
                false => glob::matches(p, channel),
            })
    }
}

/// Whether a command rule's target covers the command `args` names.
fn applies(target: &Target, spec: &CommandSpec, args: Args<'_>) -> bool {
    match target {
        Target::All => true,
        Target::Category(bit) => {
            !spec.has_flag(flags::MODULE)
                && (spec.acl_categories & bit != 0 || container_categories(spec) & bit != 0)
        }
        Target::Command(name) => spec.name == *name || spec.container() == *name,
        Target::Subcommand(full) => spec.name == *full,
        Target::FirstArg(name, arg) => {
            spec.name == *name && args.get(1).is_some_and(|a| a.eq_ignore_ascii_case(arg))
        }
    }
}

/// The categories of a subcommand's container (0 for a plain command).
fn container_categories(spec: &CommandSpec) -> u32 {
    if !spec.name.contains('|') {
        return 0;
    }
    CommandTable::builtin()
        .by_name(spec.container().as_bytes())
        .map_or(0, |c| c.acl_categories)
}
