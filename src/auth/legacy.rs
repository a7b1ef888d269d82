//! The rules a user had before `acl` (and still may have instead of it): `read_only`, and
//! `allow` / `deny` lists of commands and categories. They never restrict keys or channels.
//!
//! What holds: `deny` wins over `allow`; an empty `allow` allows everything; `read_only` refuses
//! every command that may write, including scripts that are not `_RO` (a proxy cannot see what a
//! script will call). Command names and categories are checked when the config is loaded, so a typo
//! fails the load instead of silently allowing or refusing nothing.

use crate::commands::spec::{acl, flags};
use crate::commands::CommandSpec;

/// A command or a category in `allow` / `deny`.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Rule {
    /// `@all`: every command.
    All,
    /// An ACL category (`@read`, `@dangerous`), as its bit in the command table's categories.
    Category(u32),
    /// A command name, lowercase; a container name (`config`) covers its subcommands, a subcommand
    /// (`client|kill`) only itself.
    Command(String),
}

impl Rule {
    /// Case-insensitive, like Redis's own ACL rules. An unknown category or a name with whitespace
    /// is refused.
    fn parse(text: &str) -> Result<Rule, String> {
        let lower = text.to_ascii_lowercase();
        if lower == "@all" {
            return Ok(Rule::All);
        }
        if let Some(name) = lower.strip_prefix('@') {
            return acl::NAMES
                .iter()
                .find(|(n, _)| *n == name)
                .map(|&(_, bit)| Rule::Category(bit))
                .ok_or_else(|| format!("unknown category `{text}`"));
        }
        if lower.is_empty() || lower.contains(char::is_whitespace) {
            return Err(format!("`{text}` is not a command name"));
        }
        Ok(Rule::Command(lower))
    }

    /// Whether the rule covers `spec` (a command or subcommand of the table).
    fn matches(&self, spec: &CommandSpec) -> bool {
        match self {
            Rule::All => true,
            Rule::Category(bit) => spec.acl_categories & bit != 0,
            // `config` covers `config|get`; `client|kill` only itself.
            Rule::Command(name) => spec.name == name || spec.container() == name,
        }
    }
}

/// `read_only`, `allow` and `deny`.
#[derive(Debug, Default)]
pub(super) struct Lists {
    /// `read_only: true`: refuse anything that may write.
    read_only: bool,
    /// If not empty, only commands these rules cover may run.
    allow: Vec<Rule>,
    /// Commands these rules cover never run, whatever `allow` says.
    deny: Vec<Rule>,
}

impl Lists {
    /// Reads the lists; errors name the field (`allow`, `deny`) after `key`.
    pub(super) fn new(
        key: &str,
        read_only: bool,
        allow: &[String],
        deny: &[String],
    ) -> Result<Lists, String> {
        let rules = |list: &[String], field: &str| -> Result<Vec<Rule>, String> {
            list.iter()
                .map(|r| Rule::parse(r).map_err(|e| format!("`{key}.{field}`: {e}")))
                .collect()
        };
        Ok(Lists {
            read_only,
            allow: rules(allow, "allow")?,
            deny: rules(deny, "deny")?,
        })
    }

    /// No rule can refuse a command.
    pub(super) fn is_unrestricted(&self) -> bool {
        !self.read_only
            && self.deny.is_empty()
            && (self.allow.is_empty() || self.allow.contains(&Rule::All))
    }

    /// Whether the user may run `spec`.
    pub(super) fn may_run(&self, spec: &CommandSpec) -> bool {
        let writes = spec.has_flag(flags::WRITE)
            || spec.acl_categories & acl::WRITE != 0
            || runs_writable_script(spec);
        if self.read_only && writes {
            return false;
        }
        let allowed = self.allow.is_empty() || self.allow.iter().any(|r| r.matches(spec));
        allowed && !self.deny.iter().any(|r| r.matches(spec))
    }
}

/// EVAL, EVALSHA and FCALL may write through the script, and a proxy cannot check what the
/// script calls; their `_RO` variants (flagged `readonly`) may not write.
fn runs_writable_script(spec: &CommandSpec) -> bool {
    spec.acl_categories & acl::SCRIPTING != 0
        && spec.has_flag(flags::MOVABLE_KEYS)
        && !spec.has_flag(flags::READONLY)
}
