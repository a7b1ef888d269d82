//! One authenticated identity: how it logs in, what it may run and touch, and its limits.

use std::sync::Arc;

use bytes::Bytes;

use super::acl::{Acl, Denied};
use super::legacy::Lists;
use super::limits::Limits;
use super::tenant::Tenant;
use crate::commands::CommandSpec;
use crate::protocol::Args;
use crate::values::secret::PasswordDigest;

/// What a user may run.
#[derive(Debug)]
pub(super) enum Rules {
    /// `read_only`, `allow` and `deny` (or nothing: every command, key and channel).
    Lists(Lists),
    /// Redis ACL rules (`acl`).
    Acl(Acl),
}

/// An authenticated identity and what it may do.
#[derive(Debug)]
pub(crate) struct User {
    /// The configured name: the label of its series and the name `/clients` shows.
    pub(crate) name: String,
    /// `on` (users without `acl` always are).
    enabled: bool,
    /// Any password logs in (`nopass`).
    nopass: bool,
    /// SHA-256 digests of the passwords that log it in; never the passwords.
    passwords: Vec<PasswordDigest>,
    /// What it may run, checked on every command unless `unrestricted`.
    rules: Rules,
    /// No rule can refuse a command: computed once, read on every command.
    unrestricted: bool,
    /// `filter_keys`: KEYS, SCAN and RANDOMKEY show only keys the user may read.
    pub(crate) filter_keys: bool,
    /// `limits`: connections and rates.
    pub(crate) limits: Limits,
    /// Its running state (connections, shared buckets, figures); `None` for the open default
    /// user of a proxy without authentication.
    pub(crate) tenant: Option<Arc<Tenant>>,
}

/// How a user logs in.
#[derive(Debug, Default)]
pub(super) struct UserCredentials {
    /// `on`: the user may log in at all.
    pub(super) enabled: bool,
    /// Any password logs in.
    pub(super) nopass: bool,
    /// The accepted passwords' digests.
    pub(super) passwords: Vec<PasswordDigest>,
}

impl User {
    pub(super) fn new(name: &str, credentials: UserCredentials, rules: Rules) -> User {
        let unrestricted = match &rules {
            Rules::Lists(lists) => lists.is_unrestricted(),
            Rules::Acl(acl) => acl.is_unrestricted(),
        };
        User {
            name: name.to_string(),
            enabled: credentials.enabled,
            nopass: credentials.nopass,
            passwords: credentials.passwords,
            rules,
            unrestricted,
            filter_keys: false,
            limits: Limits::default(),
            tenant: None,
        }
    }

    /// What an upgrade carries of the login (docs/operations.md): the SHA-256 of the user's
    /// first password (`None`: no password). The new process takes the login only if the user
    /// still accepts it ([`Users::adopted`](super::Users::adopted)).
    pub(crate) fn credential(&self) -> Option<[u8; 32]> {
        self.passwords.first().map(PasswordDigest::bytes)
    }

    /// Whether a login carried over by an upgrade with `credential` still holds.
    pub(super) fn still_accepts(&self, credential: Option<[u8; 32]>) -> bool {
        let accepted = match credential {
            Some(digest) => self.passwords.contains(&PasswordDigest::from_bytes(digest)),
            None => self.nopass || self.passwords.is_empty(),
        };
        self.enabled && accepted
    }

    /// True when no rule can refuse a command (the session then skips the check).
    #[inline]
    pub(crate) fn is_unrestricted(&self) -> bool {
        self.unrestricted
    }

    /// Whether `password` logs this user in.
    pub(super) fn accepts(&self, password: &[u8]) -> bool {
        // Every digest is compared, so the time taken says nothing about which one matched.
        let matched = self
            .passwords
            .iter()
            .fold(false, |found, digest| digest.matches(password) | found);
        self.enabled && (self.nopass || matched)
    }

    /// Same way of logging in (a reload that changes a user's passwords logs its clients out).
    pub(super) fn same_credentials(&self, other: &User) -> bool {
        self.enabled == other.enabled
            && self.nopass == other.nopass
            && self.passwords.len() == other.passwords.len()
            && self.passwords.iter().all(|p| other.passwords.contains(p))
    }

    /// Checks one command against the user's rules (`spec`: the command or subcommand `args`
    /// names): `Err` with Redis's refusal. A command Redis would refuse first for its
    /// argument count, or a container without a known subcommand, is let through to get that
    /// error instead, as Redis checks those before the ACL.
    pub(crate) fn check(&self, spec: &CommandSpec, args: Args<'_>) -> Result<(), Bytes> {
        if !arity_ok(spec.arity, args.len()) || !spec.subcommands.is_empty() {
            return Ok(());
        }
        match &self.rules {
            Rules::Lists(lists) if lists.may_run(spec) => Ok(()),
            Rules::Lists(_) => Err(Denied::Command.reply(spec)),
            Rules::Acl(acl) => acl.check(spec, args).map_err(|denied| denied.reply(spec)),
        }
    }

    /// Whether the user may read `key` (for `filter_keys`; users without key rules may read
    /// every key).
    pub(crate) fn may_read(&self, key: &[u8]) -> bool {
        match &self.rules {
            Rules::Lists(_) => true,
            Rules::Acl(acl) => acl.may_read(key),
        }
    }

    /// After a reload: whether a subscriber logged in as this user may keep its channels and
    /// patterns (users without channel rules keep every one).
    pub(crate) fn keeps_subscriptions<'a>(
        &self,
        channels: impl Iterator<Item = &'a [u8]>,
        patterns: impl Iterator<Item = &'a [u8]>,
    ) -> bool {
        match &self.rules {
            Rules::Lists(_) => true,
            Rules::Acl(acl) => acl.keeps_subscriptions(channels, patterns),
        }
    }
}

/// Redis's arity rule: exactly `arity` arguments (the name included), or at least `-arity`.
fn arity_ok(arity: i32, given: usize) -> bool {
    let given = i64::try_from(given).unwrap_or(i64::MAX);
    if arity >= 0 {
        given == i64::from(arity)
    } else {
        given >= -i64::from(arity)
    }
}
