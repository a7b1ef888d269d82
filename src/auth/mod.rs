//! Who may use the proxy and which commands they may run: `AUTH` / `HELLO … AUTH` against
//! `--requirepass` or users from the config, with Redis's replies (`-NOAUTH`, `-WRONGPASS`,
//! `-NOPERM`), checked before routing.
//!
//! With neither `requirepass` nor users configured, every client is the unrestricted default
//! user and nothing here runs per command.
#![warn(unreachable_pub, missing_docs)]

pub(crate) use crate::values::secret::{PasswordDigest, Secret};

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::commands::spec::{acl, flags};
use crate::commands::CommandSpec;

/// `auth:` in the config file.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// The `default` user's password (`AUTH <password>`), like redis-server's `requirepass`.
    pub(crate) requirepass: Option<Secret>,
    /// Named users (`AUTH <user> <password>`).
    pub(crate) users: Vec<UserConfig>,
    /// Failed authentications one connection may make before redcar closes it; 0: no limit.
    pub(crate) max_failures: u32,
}

/// One entry of `auth.users`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(crate) struct UserConfig {
    pub(crate) name: String,
    pub(crate) password: Secret,
    /// Refuse every command that may write.
    #[serde(default)]
    pub(crate) read_only: bool,
    /// Commands (`get`, `config`, `client|kill`) or categories (`@read`, `@all`) the user may
    /// run; empty means all.
    #[serde(default)]
    pub(crate) allow: Vec<String>,
    /// Commands or categories refused even when `allow` matches (`@admin`, `@dangerous`, `flushall`).
    #[serde(default)]
    pub(crate) deny: Vec<String>,
}

/// A command or a category in `allow` / `deny`.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Rule {
    All,
    Category(u32),
    Command(String),
}

impl Rule {
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

    fn matches(&self, spec: &CommandSpec) -> bool {
        match self {
            Rule::All => true,
            Rule::Category(bit) => spec.acl_categories & bit != 0,
            // `config` covers `config|get`; `client|kill` only itself.
            Rule::Command(name) => {
                let container = spec.name.split('|').next().unwrap_or(spec.name);
                spec.name == name || container == name
            }
        }
    }
}

/// An authenticated identity and what it may run.
#[derive(Debug)]
pub(crate) struct User {
    pub(crate) name: String,
    digest: Option<PasswordDigest>,
    read_only: bool,
    allow: Vec<Rule>,
    deny: Vec<Rule>,
    /// No rule can refuse a command: computed once, read on every command.
    unrestricted: bool,
}

impl User {
    fn new(
        name: &str,
        digest: Option<PasswordDigest>,
        read_only: bool,
        allow: Vec<Rule>,
        deny: Vec<Rule>,
    ) -> User {
        let unrestricted =
            !read_only && deny.is_empty() && (allow.is_empty() || allow.contains(&Rule::All));
        User {
            name: name.to_string(),
            digest,
            read_only,
            allow,
            deny,
            unrestricted,
        }
    }

    /// The SHA-256 of the password that logs this user in (`None`: no password).
    pub(crate) fn credential(&self) -> Option<[u8; 32]> {
        self.digest.as_ref().map(PasswordDigest::bytes)
    }

    /// True when no rule can refuse a command (the session then skips the check).
    #[inline]
    pub(crate) fn is_unrestricted(&self) -> bool {
        self.unrestricted
    }

    /// Whether the user may run `spec`.
    pub(crate) fn may_run(&self, spec: &CommandSpec) -> bool {
        let writes = spec.has_flag(flags::WRITE)
            || spec.acl_categories & acl::WRITE != 0
            || runs_writable_script(spec);
        if self.read_only && writes {
            return false;
        }
        let allowed = self.allow.is_empty() || self.allow.iter().any(|r| r.matches(spec));
        allowed && !self.deny.iter().any(|r| r.matches(spec))
    }

    /// Redis's refusal for a command the user may not run.
    pub(crate) fn refusal(&self, spec: &CommandSpec) -> Bytes {
        Bytes::from(format!(
            "-NOPERM User {} has no permissions to run the '{}' command\r\n",
            self.name, spec.name
        ))
    }
}

/// Every configured identity, resolved (secrets read and hashed) at start-up.
#[derive(Debug)]
pub(crate) struct Users {
    /// `requirepass`, or a user named `default`.
    default: Option<Arc<User>>,
    named: HashMap<String, Arc<User>>,
    /// What clients are before they authenticate; `None` when authentication is required.
    anonymous: Option<Arc<User>>,
    /// `auth.max_failures` (0: no limit).
    max_failures: u32,
}

pub(crate) const NOAUTH: &[u8] = b"-NOAUTH Authentication required.\r\n";
pub(crate) const WRONGPASS: &[u8] =
    b"-WRONGPASS invalid username-password pair or user is disabled.\r\n";

impl Users {
    /// No authentication: everyone is the unrestricted default user.
    pub(crate) fn open() -> Users {
        Users {
            default: None,
            named: HashMap::new(),
            anonymous: Some(Arc::new(unrestricted("default", None))),
            max_failures: 0,
        }
    }

    /// `auth.max_failures`: failed logins after which a connection is closed (0: never).
    pub(crate) fn max_failures(&self) -> u32 {
        self.max_failures
    }

    /// Resolves the config (reads files and environment variables); errors name the key.
    pub(crate) fn from_config(config: &AuthConfig) -> Result<Users, String> {
        if config.requirepass.is_none() && config.users.is_empty() {
            return Ok(Users::open());
        }
        let mut users = Users {
            default: None,
            named: HashMap::new(),
            anonymous: None,
            max_failures: config.max_failures,
        };
        if let Some(secret) = &config.requirepass {
            let digest = secret.resolve("auth.requirepass")?;
            users.default = Some(Arc::new(unrestricted("default", Some(digest))));
        }
        for (i, user) in config.users.iter().enumerate() {
            let key = format!("auth.users[{i}]");
            let resolved = Arc::new(resolve_user(&key, user)?);
            if user.name == "default" {
                if users.default.is_some() {
                    return Err(format!(
                        "`{key}` defines the user `default` and `auth.requirepass` is set too: \
                         use one of them"
                    ));
                }
                users.default = Some(resolved);
            } else if users.named.insert(user.name.clone(), resolved).is_some() {
                return Err(format!("`{key}`: user `{}` is defined twice", user.name));
            }
        }
        Ok(users)
    }

    /// The identity of a client that has not authenticated: `None` when it must.
    pub(crate) fn anonymous(&self) -> Option<Arc<User>> {
        self.anonymous.clone()
    }

    /// `user` as this (reloaded) set defines it: the same name with the same password, else
    /// `None` (removed, or the password changed). The open default user only matches the open
    /// default user, so turning `requirepass` on logs out clients that never authenticated.
    pub(crate) fn renewed(&self, user: &User) -> Option<Arc<User>> {
        let candidate = if user.name == "default" {
            self.default.as_ref().or(self.anonymous.as_ref())
        } else {
            self.named.get(&user.name)
        };
        candidate
            .filter(|found| found.digest == user.digest)
            .cloned()
    }

    /// A login carried over by an upgrade: the user `name` as this set defines it, if its
    /// password is still the one whose digest is `credential` (as [`Users::renewed`]).
    pub(crate) fn adopted(&self, name: &str, credential: Option<[u8; 32]>) -> Option<Arc<User>> {
        let digest = credential.map(PasswordDigest::from_bytes);
        let candidate = if name == "default" {
            self.default.as_ref().or(self.anonymous.as_ref())
        } else {
            self.named.get(name)
        };
        candidate.filter(|found| found.digest == digest).cloned()
    }

    /// `AUTH [user] password`: the user, or the reply refusing it.
    pub(crate) fn login(&self, user: Option<&[u8]>, password: &[u8]) -> Result<Arc<User>, Bytes> {
        let candidate = match user {
            None | Some(b"default") => self.default.as_ref(),
            Some(name) => std::str::from_utf8(name)
                .ok()
                .and_then(|name| self.named.get(name)),
        };
        if let Some(anonymous) = &self.anonymous {
            // Nothing configured: like redis-server without requirepass.
            return match user {
                None => Err(Bytes::from_static(
                    b"-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n",
                )),
                Some(b"default") => Ok(anonymous.clone()),
                Some(_) => Err(Bytes::from_static(WRONGPASS)),
            };
        }
        match candidate {
            Some(found) if found.digest.is_some_and(|d| d.matches(password)) => Ok(found.clone()),
            _ => Err(Bytes::from_static(WRONGPASS)),
        }
    }
}

/// EVAL, EVALSHA and FCALL may write through the script, and a proxy cannot check what the
/// script calls; their `_RO` variants (flagged `readonly`) may not write.
fn runs_writable_script(spec: &CommandSpec) -> bool {
    spec.acl_categories & acl::SCRIPTING != 0
        && spec.has_flag(flags::MOVABLE_KEYS)
        && !spec.has_flag(flags::READONLY)
}

/// True for commands Redis serves before authentication (AUTH, HELLO, QUIT, ...).
pub(crate) fn allowed_before_auth(spec: &CommandSpec) -> bool {
    spec.has_flag(flags::NO_AUTH)
}

fn unrestricted(name: &str, digest: Option<PasswordDigest>) -> User {
    User::new(name, digest, false, Vec::new(), Vec::new())
}

fn resolve_user(key: &str, config: &UserConfig) -> Result<User, String> {
    if config.name.is_empty() || config.name.contains(|c: char| c.is_whitespace()) {
        return Err(format!("`{key}.name` `{}` is not a user name", config.name));
    }
    let digest = config.password.resolve(&format!("{key}.password"))?;
    let rules = |list: &[String], field: &str| -> Result<Vec<Rule>, String> {
        list.iter()
            .map(|r| Rule::parse(r).map_err(|e| format!("`{key}.{field}`: {e}")))
            .collect()
    };
    Ok(User::new(
        &config.name,
        Some(digest),
        config.read_only,
        rules(&config.allow, "allow")?,
        rules(&config.deny, "deny")?,
    ))
}

#[cfg(test)]
mod tests;
