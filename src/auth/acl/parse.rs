//! Reading a Redis ACL rule string into an [`Acl`]: the words `ACL SETUSER` takes, in the order
//! given, with Redis 7.0's meaning and its refusals (an unknown rule or command, a pattern after
//! `allkeys`, a malformed hash, a selector never closed, ...).
//!
//! Why Redis's exact semantics: operators paste rules from `ACL LIST` or a users.acl file they
//! already run, and a rule that meant one thing on the node and another in front of it would open
//! or close access silently. So the rules apply left to right, each later one amending the earlier
//! ones (`resetkeys`, `nopass`, `reset` undo what came before), and every rule Redis would refuse
//! is refused here too, naming the rule. Passwords never stay in clear: `>pw` is hashed at once and
//! only digests are kept. Parsed once per load or reload, never per command.

use crate::commands::spec::acl as categories;
use crate::commands::{CommandSpec, CommandTable};
use crate::values::secret::PasswordDigest;

use super::rules::Acl;
use super::selector::{CommandRule, KeyPattern, Selector, Target};

/// A rule that cannot be read: the rule as written and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RuleError {
    /// The rule as written (for a selector, the whole `( ... )`).
    pub(crate) rule: String,
    /// What is wrong with it, in words for the config error.
    pub(crate) reason: String,
}

/// A [`RuleError`] for `rule`.
fn error(rule: &str, reason: impl Into<String>) -> RuleError {
    RuleError {
        rule: rule.to_string(),
        reason: reason.into(),
    }
}

/// Reads a rule string (`on >pw ~app:* +@all`), optionally starting with `user NAME` as in
/// users.acl and `ACL LIST`: the name found there is returned for the caller to compare.
pub(crate) fn parse(text: &str) -> Result<(Acl, Option<String>), RuleError> {
    let mut words: Vec<&str> = text.split_ascii_whitespace().collect();
    let mut name = None;
    if words
        .first()
        .is_some_and(|w| w.eq_ignore_ascii_case("user"))
    {
        let found = words
            .get(1)
            .ok_or_else(|| error("user", "`user` must be followed by the user's name"))?;
        name = Some(found.to_string());
        words.drain(..2);
    }
    let mut acl = Acl::default();
    for rule in merge_selectors(&words)? {
        apply(&mut acl, &rule)?;
    }
    Ok((acl, name))
}

/// Joins the words of a selector written with spaces (`(~app:* +get)`) back into one rule, as
/// Redis does with the lines of users.acl.
fn merge_selectors(words: &[&str]) -> Result<Vec<String>, RuleError> {
    let mut rules = Vec::with_capacity(words.len());
    let mut open: Option<String> = None;
    for word in words {
        match &mut open {
            Some(selector) => {
                selector.push(' ');
                selector.push_str(word);
                if word.ends_with(')') {
                    rules.extend(open.take());
                }
            }
            None if word.starts_with('(') && !word.ends_with(')') => {
                open = Some(word.to_string());
            }
            None => rules.push(word.to_string()),
        }
    }
    match open {
        Some(selector) => Err(error(
            &selector,
            "a selector's `(` is never closed by a `)`",
        )),
        None => Ok(rules),
    }
}

/// One rule of the user (outside any selector).
///
/// The rules about the user as a whole (`on`, `off`, password resets, `reset`) are handled here;
/// anything else goes to [`apply_special`]. `reset` leaves the user off, without passwords, keys,
/// channels or commands, as in Redis.
fn apply(acl: &mut Acl, rule: &str) -> Result<(), RuleError> {
    let lower = rule.to_ascii_lowercase();
    match lower.as_str() {
        "on" => acl.enabled = true,
        "off" => acl.enabled = false,
        // RESTORE's payload checks happen on the nodes, under redcar's own upstream user:
        // accepted (users.acl has them) and without effect here.
        "sanitize-payload" | "skip-sanitize-payload" => {}
        "nopass" => {
            acl.nopass = true;
            acl.passwords.clear();
        }
        "resetpass" => {
            acl.nopass = false;
            acl.passwords.clear();
        }
        "clearselectors" => acl.selectors.clear(),
        "reset" => {
            acl.nopass = false;
            acl.passwords.clear();
            acl.enabled = false;
            acl.selectors.clear();
            acl.root = Selector::default();
        }
        _ => return apply_special(acl, rule),
    }
    Ok(())
}

/// Passwords, selectors, and the rules a selector may hold too.
fn apply_special(acl: &mut Acl, rule: &str) -> Result<(), RuleError> {
    if let Some(password) = rule.strip_prefix('>') {
        add_password(acl, PasswordDigest::of(password.as_bytes()));
    } else if let Some(hex) = rule.strip_prefix('#') {
        add_password(acl, hash(rule, hex)?);
    } else if let Some(password) = rule.strip_prefix('<') {
        remove_password(acl, rule, PasswordDigest::of(password.as_bytes()))?;
    } else if let Some(hex) = rule.strip_prefix('!') {
        let digest = hash(rule, hex)?;
        remove_password(acl, rule, digest)?;
    } else if rule.starts_with('(') && rule.ends_with(')') && rule.len() >= 2 {
        let mut selector = Selector::default();
        for inner in rule[1..rule.len() - 1].split_ascii_whitespace() {
            apply_selector(&mut selector, inner).map_err(|e| RuleError {
                rule: rule.to_string(),
                reason: format!("`{}`: {}", e.rule, e.reason),
            })?;
        }
        acl.selectors.push(selector);
    } else {
        apply_selector(&mut acl.root, rule)?;
    }
    Ok(())
}

/// Adding a password turns `nopass` off, as in Redis; a password already there is not added twice.
fn add_password(acl: &mut Acl, digest: PasswordDigest) {
    acl.nopass = false;
    if !acl.passwords.contains(&digest) {
        acl.passwords.push(digest);
    }
}

/// Removing a password the user does not have is an error, as in Redis (it usually means a typo in
/// the rule).
fn remove_password(acl: &mut Acl, rule: &str, digest: PasswordDigest) -> Result<(), RuleError> {
    let before = acl.passwords.len();
    acl.passwords.retain(|p| *p != digest);
    if acl.passwords.len() == before {
        return Err(error(
            rule,
            "the password to remove is not one of the user's",
        ));
    }
    Ok(())
}

/// `#<sha256>`: exactly 64 lowercase hexadecimal characters, as Redis requires.
fn hash(rule: &str, hex: &str) -> Result<PasswordDigest, RuleError> {
    let bad = || {
        error(
            rule,
            "a password hash must be exactly 64 lowercase hexadecimal characters",
        )
    };
    if hex.len() != 64 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Err(bad());
    }
    let mut bytes = [0u8; 32];
    for (byte, pair) in bytes.iter_mut().zip(hex.as_bytes().chunks(2)) {
        let pair = std::str::from_utf8(pair).map_err(|_| bad())?;
        *byte = u8::from_str_radix(pair, 16).map_err(|_| bad())?;
    }
    Ok(PasswordDigest::from_bytes(bytes))
}

/// A command, key or channel rule (what a selector may hold).
///
/// Errors carry the offending word; inside a selector the caller wraps them with the selector's
/// text.
fn apply_selector(selector: &mut Selector, rule: &str) -> Result<(), RuleError> {
    let lower = rule.to_ascii_lowercase();
    match lower.as_str() {
        "allkeys" | "~*" => {
            selector.all_keys = true;
            selector.keys.clear();
        }
        "resetkeys" => {
            selector.all_keys = false;
            selector.keys.clear();
        }
        "allchannels" | "&*" => {
            selector.all_channels = true;
            selector.channels.clear();
        }
        "resetchannels" => {
            selector.all_channels = false;
            selector.channels.clear();
        }
        "allcommands" | "+@all" => command_rule(selector, true, Target::All),
        "nocommands" | "-@all" => command_rule(selector, false, Target::All),
        _ => match rule.as_bytes().first() {
            Some(b'~' | b'%') => key_rule(selector, rule)?,
            Some(b'&') => channel_rule(selector, rule)?,
            Some(b'+' | b'-') => {
                let target = command_target(rule)?;
                command_rule(selector, rule.starts_with('+'), target);
            }
            _ => return Err(error(rule, "not a rule Redis knows (syntax error)")),
        },
    }
    Ok(())
}

/// Adds a command rule. Rules before a `+@all` or `-@all` can no longer decide anything: they
/// are dropped, so a long history of rules does not cost a longer check.
fn command_rule(selector: &mut Selector, allow: bool, target: Target) {
    if target == Target::All {
        selector.commands.clear();
    }
    selector.commands.push(CommandRule { allow, target });
}

/// `~pattern` (read and write), `%R~pattern`, `%W~pattern`, `%RW~pattern`.
fn key_rule(selector: &mut Selector, rule: &str) -> Result<(), RuleError> {
    if selector.all_keys {
        return Err(error(
            rule,
            "a key pattern after `allkeys` (or `~*`) has no effect: use `resetkeys` first",
        ));
    }
    let (read, write, pattern) = match rule.strip_prefix('%') {
        None => (true, true, &rule[1..]),
        Some(rest) => {
            let (perms, pattern) = rest.split_once('~').unwrap_or((rest, ""));
            let (mut read, mut write) = (false, false);
            for c in perms.chars() {
                match c.to_ascii_uppercase() {
                    'R' if !read => read = true,
                    'W' if !write => write = true,
                    _ => return Err(error(rule, "`%` must be followed by R, W or RW, then `~`")),
                }
            }
            if !read && !write {
                return Err(error(rule, "`%` must be followed by R, W or RW, then `~`"));
            }
            (read, write, pattern)
        }
    };
    let pattern = pattern.as_bytes().to_vec();
    match selector.keys.iter_mut().find(|p| p.pattern == pattern) {
        Some(found) => {
            found.read |= read;
            found.write |= write;
        }
        None => selector.keys.push(KeyPattern {
            pattern,
            read,
            write,
        }),
    }
    Ok(())
}

/// `&pattern`.
///
/// A pattern already listed is not added twice; `allchannels` before it is an error, as for keys.
fn channel_rule(selector: &mut Selector, rule: &str) -> Result<(), RuleError> {
    if selector.all_channels {
        return Err(error(
            rule,
            "a channel pattern after `allchannels` (or `&*`) has no effect: use \
             `resetchannels` first",
        ));
    }
    let pattern = rule.as_bytes()[1..].to_vec();
    if !selector.channels.contains(&pattern) {
        selector.channels.push(pattern);
    }
    Ok(())
}

/// What `+...` or `-...` names: a category, a command, a subcommand, or a command's first
/// argument (only with `+`, and only for a command without subcommands).
///
/// `+config|get` names a subcommand, `+select|0` a first argument of a command without subcommands
/// (only allowed with `+`, as in Redis); an unknown command or category is refused rather than
/// ignored, so a typo cannot leave a command allowed that the rule meant to deny.
fn command_target(rule: &str) -> Result<Target, RuleError> {
    let name = &rule[1..];
    if let Some(category) = name.strip_prefix('@') {
        return categories::NAMES
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(category))
            .map(|&(_, bit)| Target::Category(bit))
            .ok_or_else(|| error(rule, "unknown command or category name"));
    }
    let unknown = || error(rule, "unknown command or category name");
    let Some((command, sub)) = name.rsplit_once('|') else {
        return Ok(Target::Command(builtin(name).ok_or_else(unknown)?.name));
    };
    let parent = builtin(command).ok_or_else(unknown)?;
    if parent.name.contains('|') {
        return Err(error(
            rule,
            "a first argument of a subcommand cannot be allowed",
        ));
    }
    if sub.is_empty() {
        return Err(error(rule, "a subcommand name is missing (syntax error)"));
    }
    if !parent.subcommands.is_empty() {
        return Ok(Target::Subcommand(builtin(name).ok_or_else(unknown)?.name));
    }
    if rule.starts_with('-') {
        return Err(unknown());
    }
    Ok(Target::FirstArg(parent.name, sub.as_bytes().to_vec()))
}

/// A command of the built-in table by name (`get`, `config|get`), any case.
///
/// Only the built-in table: the rules name Redis's own commands.
fn builtin(name: &str) -> Option<&'static CommandSpec> {
    CommandTable::builtin().by_name(name.as_bytes())
}
