//! A user's Redis ACL rules, as `ACL SETUSER` takes them and `ACL LIST` prints them: which
//! commands, keys and channels it may use, its passwords, and the selectors Redis 7 adds.
//!
//! - `parse`: the rule string → [`Acl`] (every rule Redis 7.0 knows; anything else is an error
//!   naming the rule).
//! - `rules`: a user's rules and the check of one command; `denied`: Redis's refusals.
//! - `selector`: one set of command, key and channel rules, and how a command is checked
//!   against it (Redis's `ACLSelectorCheckCmd`).
//! - `glob`: Redis's own pattern matcher.
//!
//! A command is allowed when the root rules or any one selector allow all of it: the command,
//! every key (for what the command does to it: read, write, or neither) and every channel.
//! Otherwise the refusal is Redis's, chosen as Redis chooses it: a channel refusal over a key
//! refusal over a command refusal.

mod denied;
mod glob;
mod parse;
mod rules;
mod selector;

pub(crate) use denied::Denied;
pub(crate) use parse::parse;
pub(crate) use rules::Acl;

#[cfg(test)]
mod tests;
