//! Commands declared in the configuration (`custom_commands`): module commands on servers too old
//! to describe their keys in `COMMAND`, routed by a first/last/step key range like Redis's legacy
//! key positions.
//!
//! What holds once [`validate`] passed: every declared name is new (not a built-in command, not
//! declared twice, one word without `|`), every command has at least one key (a keyless command
//! would have no node to go to), and the arity covers the declared keys. A custom command is served
//! like a keyed built-in of the same shape: routed by the slot of its keys, refused as CROSSSLOT
//! when they span slots, and, unless `write: false`, never sent again once it may have reached a
//! node.

use serde::{Deserialize, Serialize};

use super::lookup::{CommandTable, MAX_NAME_LEN};
use super::spec::{flags, key_flags, BeginSearch, CommandSpec, FindKeys, KeySpec};

/// One entry of `custom_commands:` in the config file.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct CustomCommand {
    /// The command's name, any case (`MYMOD.GET`).
    pub(crate) name: String,
    /// Argument index of the first key: 1 is the argument right after the name.
    pub(crate) first_key: i32,
    /// Index of the last key; negative counts from the end (-1: the last argument). Defaults to
    /// `first_key` (one key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) last_key: Option<i32>,
    /// Every `key_step`-th argument from the first to the last key is a key (2 for key/value pairs).
    #[serde(default = "one")]
    pub key_step: i32,
    /// Whether the command may write. Writes are never sent again once they may have reached a
    /// node; `false` lets a read be retried after a broken connection.
    #[serde(default = "yes")]
    pub write: bool,
    /// Redis arity: exact argument count including the name, or negative for a minimum. Defaults
    /// to "at least up to the last fixed key".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) arity: Option<i32>,
}

/// Serde's default for `key_step`: one key after another.
fn one() -> i32 {
    1
}

/// Serde's default for `write`: a command is assumed to write unless declared otherwise, the safe
/// side for retries.
fn yes() -> bool {
    true
}

impl CustomCommand {
    /// The last key's index as declared, or `first_key` when only one key is declared.
    fn last(&self) -> i32 {
        self.last_key.unwrap_or(self.first_key)
    }

    /// The highest argument index the keys are known to reach without seeing the command line.
    fn last_fixed_index(&self) -> i32 {
        self.last().max(self.first_key)
    }

    /// The spec the router uses, as the legacy first/last/step become a Redis 7 range key spec
    /// (what Redis itself does in `populateCommandLegacyRangeSpec`).
    ///
    /// Leaks the lowercase name once per call: called when the command table is built (start-up and
    /// reload), not per command. A write is flagged `write` with `RW`/`update` key access, a read
    /// `readonly` with `RO`/`access`, so the router's read policy and retry rules apply to it like
    /// to a built-in command.
    pub fn spec(&self) -> CommandSpec {
        let (command_flags, key_access) = if self.write {
            (flags::WRITE, key_flags::RW | key_flags::UPDATE)
        } else {
            (flags::READONLY, key_flags::RO | key_flags::ACCESS)
        };
        let last = self.last();
        let key_spec = KeySpec {
            flags: key_access,
            begin: BeginSearch::Index(self.first_key),
            find: FindKeys::Range {
                last_key: if last < 0 {
                    last
                } else {
                    last - self.first_key
                },
                step: self.key_step,
                limit: 0,
            },
        };
        CommandSpec {
            name: self.name.to_ascii_lowercase().leak(),
            arity: self.arity.unwrap_or(-(self.last_fixed_index() + 1)),
            flags: command_flags,
            acl_categories: 0,
            tips: &[],
            key_specs: vec![key_spec].leak(),
            subcommands: &[],
        }
    }
}

/// Checks every declared command; the message names the offending key, e.g.
/// `custom_commands[1].key_step`.
///
/// Stops at the first problem, as the rest of config validation does.
pub fn validate(commands: &[CustomCommand]) -> Result<(), String> {
    for (i, command) in commands.iter().enumerate() {
        let key = |field: &str| format!("`custom_commands[{i}].{field}`");
        let name = command.name.as_str();
        if name.is_empty() {
            return Err(format!("{} is empty: expected a command name", key("name")));
        }
        if name.len() > MAX_NAME_LEN || name.contains(|c: char| c.is_whitespace() || c == '|') {
            return Err(format!(
                "{} is `{name}`: expected one word of at most {MAX_NAME_LEN} characters without `|`",
                key("name")
            ));
        }
        if CommandTable::builtin().by_name(name.as_bytes()).is_some() {
            return Err(format!(
                "{} is `{name}`: {} is a built-in Redis command that redcar already knows how to \
                 serve; declare only commands redcar does not know",
                key("name"),
                name.to_ascii_uppercase()
            ));
        }
        if let Some(j) = commands[..i]
            .iter()
            .position(|other| other.name.eq_ignore_ascii_case(name))
        {
            return Err(format!(
                "{} is `{name}`, already declared by `custom_commands[{j}]`",
                key("name")
            ));
        }
        if command.first_key < 1 {
            return Err(format!(
                "{} is {}: expected the index of the first key, 1 or more (redcar routes custom \
                 commands by their keys; a keyless command has no node to go to)",
                key("first_key"),
                command.first_key
            ));
        }
        if let Some(last) = command.last_key {
            if last >= 0 && last < command.first_key {
                return Err(format!(
                    "{} is {last}: expected first_key ({}) or more, or a negative index counted \
                     from the end (-1: the last argument)",
                    key("last_key"),
                    command.first_key
                ));
            }
        }
        if command.key_step < 1 {
            return Err(format!(
                "{} is {}: expected 1 or more",
                key("key_step"),
                command.key_step
            ));
        }
        if let Some(arity) = command.arity {
            let needed = command.last_fixed_index() + 1;
            if arity.unsigned_abs() < needed.unsigned_abs() {
                return Err(format!(
                    "{} is {arity}: the keys reach argument {}, so expected {needed} or more \
                     (exact count), or -{needed} or less (a minimum)",
                    key("arity"),
                    needed - 1
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "custom_tests.rs"]
mod tests;
