//! `auth:` in the config file: the users, their rules and their limits.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::values::secret::{PasswordDigest, Secret};
use crate::values::units;

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
    /// Connections not yet authenticated one source address may hold; 0: no limit.
    pub(crate) max_unauthenticated_per_address: u32,
}

/// One entry of `auth.users`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(crate) struct UserConfig {
    /// The user's name, as clients give it to `AUTH`; unique, no whitespace.
    pub(crate) name: String,
    /// Needed unless `acl` gives a password (`>pw`, `#sha256`) or `nopass`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) password: Option<Secret>,
    /// Redis ACL rules, as `ACL SETUSER` takes them (`on >pw ~app:* &app:* +@all`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) acl: Option<AclText>,
    /// Refuse every command that may write (not with `acl`).
    #[serde(default)]
    pub(crate) read_only: bool,
    /// Commands (`get`, `config`, `client|kill`) or categories (`@read`, `@all`) the user may
    /// run; empty means all (not with `acl`).
    #[serde(default)]
    pub(crate) allow: Vec<String>,
    /// Commands or categories refused even when `allow` matches (not with `acl`).
    #[serde(default)]
    pub(crate) deny: Vec<String>,
    /// KEYS, SCAN and RANDOMKEY show only keys the user may read (Redis shows every key).
    #[serde(default)]
    pub(crate) filter_keys: bool,
    /// Connections and rates.
    #[serde(default)]
    pub(crate) limits: LimitsConfig,
}

/// `auth.users[].limits`: all off by default.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct LimitsConfig {
    /// Connections logged in as the user at once; 0: no limit.
    pub(crate) max_connections: u32,
    /// Rates over all the user's connections together.
    pub(crate) per_user: RateConfig,
    /// Rates of each of the user's connections.
    pub(crate) per_client: RateConfig,
    /// What a client over a rate gets: `slow` (it is read no further until the rate allows) or
    /// `fail` (its commands are answered with an error until then).
    pub(crate) when_over: WhenOver,
}

/// One token bucket's settings (commands, and optionally bytes).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RateConfig {
    /// Commands per second; 0: no limit.
    pub(crate) commands_per_second: u32,
    /// Commands allowed at once above the rate; 0: a tenth of a second's worth (at least 1).
    pub(crate) burst: u32,
    /// Request and reply bytes per second; 0: no limit.
    #[serde(with = "units::size")]
    pub(crate) bytes_per_second: usize,
}

/// `limits.when_over`.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum WhenOver {
    /// Hold the command back until the rate allows it (the default: clients slow down, nothing
    /// fails).
    #[default]
    Slow,
    /// Answer the command with an error at once.
    Fail,
}

/// A rule string as written; shown with its passwords and hashes redacted.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct AclText(pub(crate) String);

impl AclText {
    /// The words that carry a secret (`>pw`, `<pw`, `#hash`, `!hash`).
    fn secret_words(&self) -> impl Iterator<Item = &str> {
        self.0
            .split_ascii_whitespace()
            .filter(|w| w.starts_with(['>', '<', '#', '!']))
    }

    /// The passwords and hashes in the string, as one digest (a reload names `acl` when they
    /// change, never what they are).
    pub(crate) fn secret_digest(&self) -> Option<PasswordDigest> {
        let secrets: Vec<&str> = self.secret_words().collect();
        (!secrets.is_empty()).then(|| PasswordDigest::of(secrets.join("\n").as_bytes()))
    }

    /// The string with every password and hash replaced by `(redacted)`.
    fn redacted(&self) -> String {
        let words: Vec<String> = self
            .0
            .split_ascii_whitespace()
            .map(|w| match w.as_bytes().first() {
                Some(c @ (b'>' | b'<' | b'#' | b'!')) => format!("{}(redacted)", *c as char),
                _ => w.to_string(),
            })
            .collect();
        words.join(" ")
    }
}

impl Serialize for AclText {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.redacted())
    }
}

impl<'de> Deserialize<'de> for AclText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(AclText)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acl_strings_are_shown_without_their_passwords() {
        let acl = AclText("on >s3cret #abc ~app:* <old !def +@all".into());
        assert_eq!(
            acl.redacted(),
            "on >(redacted) #(redacted) ~app:* <(redacted) !(redacted) +@all"
        );
        let shown = serde_json::to_string(&acl).expect("serializes");
        assert!(!shown.contains("s3cret"), "{shown}");
        let other = AclText("on >other #abc ~app:* <old !def +@all".into());
        assert_ne!(acl.secret_digest(), other.secret_digest());
        assert_eq!(AclText("on ~*".into()).secret_digest(), None);
    }
}
