//! `admin:` in the config file: the HTTP admin address and the optional bearer token.
//!
//! `admin: 127.0.0.1:9190` (the address alone, as `--admin` gives it) and
//! `admin: {listen: 127.0.0.1:9190, token: {file: PATH}}` are both accepted.

use std::fmt;

use serde::de::{self, value::MapAccessDeserializer, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

use crate::values::secret::{PasswordDigest, Secret};

/// `admin:` in the config file. `Default`: no admin listener.
/// Public because it is the type of a `Config` field; serialised as a mapping with the token
/// redacted, so `/config` shows whether a token is set but never which.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct AdminConfig {
    /// `IP:PORT` of the HTTP admin listener; off when absent.
    pub(crate) listen: Option<String>,
    /// Bearer token every endpoint except `/healthz` and `/readyz` requires (`Authorization:
    /// Bearer <token>`); a string, `{file: PATH}`, `{env: NAME}` or `{sha256: HEX}`. Never shown.
    pub(crate) token: Option<Secret>,
}

/// The mapping form, checked like every other section (unknown keys are errors).
#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Mapping {
    /// As `AdminConfig::listen`.
    listen: Option<String>,
    /// As `AdminConfig::token`.
    token: Option<Secret>,
}

// === impl AdminConfig ===

impl AdminConfig {
    /// The token's digest, read now (start-up): errors name `admin.token`. `None` when the
    /// admin API is open.
    pub(crate) fn token_digest(&self) -> Result<Option<PasswordDigest>, String> {
        self.token
            .as_ref()
            .map(|token| token.resolve("admin.token"))
            .transpose()
    }

    /// Start-up checks the address checks in `config::validate` leave: a token needs a
    /// listener, and a token that cannot be read stops start-up.
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.token.is_some() && self.listen.is_none() {
            return Err(
                "`admin.token` is set but there is no admin listener: set `admin.listen` \
                 (--admin ADDR) or remove the token"
                    .to_string(),
            );
        }
        self.token_digest().map(|_| ())
    }
}

/// Accepts the bare address, the mapping, or `null`/nothing (no admin listener), so the short form
/// `--admin` documents stays valid in a file.
impl<'de> Deserialize<'de> for AdminConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(AdminVisitor)
    }
}

/// Dispatches on the YAML shape: string, mapping, or null.
struct AdminVisitor;

impl<'de> Visitor<'de> for AdminVisitor {
    type Value = AdminConfig;

    /// Ends serde's "invalid type" error, e.g. for `admin: 9190` (a number).
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an address (IP:PORT) or a mapping with `listen` and `token`")
    }

    /// The short form: the address only, no token.
    fn visit_str<E: de::Error>(self, addr: &str) -> Result<AdminConfig, E> {
        Ok(AdminConfig {
            listen: Some(addr.to_string()),
            token: None,
        })
    }

    /// `admin:` with nothing after it: off.
    fn visit_unit<E: de::Error>(self) -> Result<AdminConfig, E> {
        Ok(AdminConfig::default())
    }

    /// An explicit null: off.
    fn visit_none<E: de::Error>(self) -> Result<AdminConfig, E> {
        Ok(AdminConfig::default())
    }

    /// Unknown keys fail through `Mapping`'s `deny_unknown_fields`.
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<AdminConfig, A::Error> {
        let Mapping { listen, token } = Mapping::deserialize(MapAccessDeserializer::new(map))?;
        Ok(AdminConfig { listen, token })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<AdminConfig, String> {
        yaml_serde::from_str(yaml).map_err(|e| e.to_string())
    }

    #[test]
    fn the_address_alone_or_a_mapping_with_a_token() {
        let short = parse("127.0.0.1:9190").expect("address");
        assert_eq!(short.listen.as_deref(), Some("127.0.0.1:9190"));
        assert!(short.token.is_none());
        let full = parse("{listen: 127.0.0.1:9190, token: {env: TOKEN}}").expect("mapping");
        assert_eq!(full.listen.as_deref(), Some("127.0.0.1:9190"));
        assert!(
            full.token
                == Some(Secret::Env {
                    env: "TOKEN".into()
                })
        );
        assert_eq!(parse("~").expect("null"), AdminConfig::default());
        let typo = parse("{listen: 127.0.0.1:9190, tokne: x}").expect_err("unknown key");
        assert!(typo.contains("tokne"), "{typo}");
    }

    #[test]
    fn a_token_needs_a_listener_and_must_be_readable() {
        let orphan = AdminConfig {
            listen: None,
            token: Some(Secret::Plain("t".into())),
        };
        assert!(orphan
            .check()
            .expect_err("no listener")
            .contains("admin.listen"));
        let unset = AdminConfig {
            listen: Some("127.0.0.1:9190".into()),
            token: Some(Secret::Env {
                env: "REDCAR_TEST_NO_SUCH_TOKEN".into(),
            }),
        };
        let error = unset.check().expect_err("unset variable");
        assert!(error.contains("admin.token.env"), "{error}");
        let good = AdminConfig {
            listen: Some("127.0.0.1:9190".into()),
            token: Some(Secret::Plain("t0ken".into())),
        };
        let digest = good.token_digest().expect("reads").expect("a token");
        assert!(digest.matches(b"t0ken"));
    }

    #[test]
    fn the_token_is_never_shown() {
        let config = AdminConfig {
            listen: Some("127.0.0.1:9190".into()),
            token: Some(Secret::Plain("t0ken".into())),
        };
        let json = serde_json::to_string(&config).expect("serializes");
        assert!(!json.contains("t0ken"), "{json}");
        assert!(json.contains("(redacted)"), "{json}");
        assert!(!format!("{config:?}").contains("t0ken"));
    }
}
