//! A password in the config: given in clear, as a SHA-256 hex digest, in a file or in an
//! environment variable. Passwords clients present are kept only as their SHA-256 digest;
//! passwords redcar itself presents to the nodes are read once at start-up.

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use sha2::{Digest, Sha256};

/// How a password is given (YAML): `password: s3cret`, `password: {sha256: <64 hex>}`,
/// `password: {file: /run/secrets/redis}` (trailing newline ignored) or `password: {env: NAME}`.
/// A mapping has exactly one of those keys; anything else is refused (see [`Deserialize`]).
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum Secret {
    /// The password in clear in the config file.
    Plain(String),
    /// The password's SHA-256 as 64 hex digits: enough to check what clients present, never enough
    /// to send (see [`Secret::reveal`]).
    Sha256 { sha256: String },
    /// A file holding the password; one trailing newline (and a `\r` before it) is not part of it.
    File { file: String },
    /// An environment variable holding the password; unset is an error, not an empty password.
    Env { env: String },
}

/// Secrets never leave the process: `/config` and `--check-config` show this instead.
impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(REDACTED)
    }
}

/// Redacted for the same reason as `Serialize`: a `{:?}` of a config in a log or panic must not
/// carry a password.
impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

/// What a secret or digest prints as, in `Debug` and in serialised configs.
const REDACTED: &str = "(redacted)";

/// The accepted forms, quoted in every parse error (yaml_serde prefixes the key's path).
const FORMS: &str = "a string, {file: PATH}, {env: NAME} or {sha256: HEX}";

/// Strict, unlike `#[serde(untagged)]`: an unknown key (`fiel`, `extra`) or two forms at once
/// (`{file: F, env: E}`) are errors that say what is wrong and what is accepted.
impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(SecretVisitor)
    }
}

/// Accepts a string (a plain password) or a one-key mapping; a YAML number or bool is refused, with
/// a hint to quote it, so `password: 1234` cannot turn into something else silently.
struct SecretVisitor;

impl<'de> Visitor<'de> for SecretVisitor {
    type Value = Secret;

    /// Ends serde's "invalid type" message, e.g. for `password: 1234`, which YAML reads as a
    /// number.
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a secret: {FORMS} (quote a password YAML would read as a number)"
        )
    }

    /// Any string is a plain password, even one that looks like a path or a digest: only the
    /// mapping forms read files or variables.
    fn visit_str<E: de::Error>(self, text: &str) -> Result<Secret, E> {
        Ok(Secret::Plain(text.to_string()))
    }

    fn visit_string<E: de::Error>(self, text: String) -> Result<Secret, E> {
        Ok(Secret::Plain(text))
    }

    /// Every value must be a string; the error names the first offending key, whether unknown or a
    /// second form.
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Secret, A::Error> {
        let mut found: Option<(String, Secret)> = None;
        while let Some(key) = map.next_key::<String>()? {
            let value: String = map.next_value()?;
            let secret = match key.as_str() {
                "file" => Secret::File { file: value },
                "env" => Secret::Env { env: value },
                "sha256" => Secret::Sha256 { sha256: value },
                _ => {
                    return Err(de::Error::custom(format!(
                        "unknown key `{key}` in a secret: expected {FORMS}"
                    )))
                }
            };
            if let Some((first, _)) = &found {
                return Err(de::Error::custom(format!(
                    "`{first}` and `{key}` are exclusive: a secret is {FORMS}"
                )));
            }
            found = Some((key, secret));
        }
        found.map(|(_, secret)| secret).ok_or_else(|| {
            de::Error::custom(format!(
                "an empty mapping is not a secret: expected {FORMS}"
            ))
        })
    }
}

/// The SHA-256 of a password.
/// Kept instead of the password for everything clients present (`auth.requirepass`, users), so the
/// process holds no clear password it does not need to send; comparing digests also makes the
/// comparison length-independent.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct PasswordDigest([u8; 32]);

/// Redacted: a digest of a weak password is as good as the password to an attacker.
impl fmt::Debug for PasswordDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl PasswordDigest {
    /// A digest given as its 32 bytes (a `#<sha256>` ACL rule, or carried over by an upgrade).
    pub(crate) fn from_bytes(bytes: [u8; 32]) -> PasswordDigest {
        PasswordDigest(bytes)
    }

    /// The digest of `password` exactly as given (no trimming): what `AUTH` is checked against.
    pub(crate) fn of(password: &[u8]) -> PasswordDigest {
        PasswordDigest(Sha256::digest(password).into())
    }

    /// The digest's bytes (carried to the next process by an upgrade, never the password).
    pub(crate) fn bytes(&self) -> [u8; 32] {
        self.0
    }

    /// Compares in time independent of where the digests differ.
    /// Both sides are digests of equal length, so the time depends on neither the password's length
    /// nor on how much of it is right.
    pub(crate) fn matches(&self, password: &[u8]) -> bool {
        let candidate = PasswordDigest::of(password);
        self.0
            .iter()
            .zip(candidate.0.iter())
            .fold(0u8, |diff, (a, b)| diff | (a ^ b))
            == 0
    }
}

impl Secret {
    /// Reads the secret now (start-up), naming `key` in any error.
    /// Called for the secrets clients present. A file is read as bytes (a password need not be
    /// UTF-8); an empty password, an unreadable file, an unset variable or a malformed digest is an
    /// error, so a typo cannot open the proxy to everyone.
    pub(crate) fn resolve(&self, key: &str) -> Result<PasswordDigest, String> {
        match self {
            Secret::Plain(password) => non_empty(key, password.as_bytes()),
            Secret::Sha256 { sha256 } => parse_hex(sha256)
                .map(PasswordDigest)
                .ok_or_else(|| format!("`{key}.sha256` is not 64 hexadecimal characters")),
            Secret::File { file } => {
                let text = std::fs::read(file)
                    .map_err(|e| format!("`{key}.file`: cannot read {file}: {e}"))?;
                let text = text.strip_suffix(b"\n").unwrap_or(&text);
                let text = text.strip_suffix(b"\r").unwrap_or(text);
                non_empty(key, text)
            }
            Secret::Env { env } => {
                let value = std::env::var_os(env)
                    .ok_or_else(|| format!("`{key}.env`: environment variable {env} is not set"))?;
                non_empty(key, value.as_encoded_bytes())
            }
        }
    }
}

impl Secret {
    /// The password itself, for redcar to send (`AUTH` to the nodes). A digest cannot be sent.
    /// Called for `upstream.password` at start-up and reload. A file loses all trailing `\n`/`\r`;
    /// the value must be UTF-8 because it goes into a RESP command. Empty is an error.
    pub(crate) fn reveal(&self, key: &str) -> Result<String, String> {
        let text = match self {
            Secret::Plain(password) => password.clone(),
            Secret::Sha256 { .. } => {
                return Err(format!(
                    "`{key}` cannot be a sha256 digest: redcar must send this password to the \
                     nodes, so give it in clear, as {{file: PATH}} or as {{env: NAME}}"
                ))
            }
            Secret::File { file } => {
                let text = std::fs::read_to_string(file)
                    .map_err(|e| format!("`{key}.file`: cannot read {file}: {e}"))?;
                text.trim_end_matches(['\n', '\r']).to_string()
            }
            Secret::Env { env } => std::env::var(env).map_err(|_| {
                format!("`{key}.env`: environment variable {env} is not set or not UTF-8")
            })?,
        };
        if text.is_empty() {
            return Err(format!("`{key}` is an empty password"));
        }
        Ok(text)
    }
}

/// An empty password is refused for every form: it is nearly always an empty file or variable by
/// mistake, and would let in any client that sends an empty one.
fn non_empty(key: &str, password: &[u8]) -> Result<PasswordDigest, String> {
    if password.is_empty() {
        return Err(format!("`{key}` is an empty password"));
    }
    Ok(PasswordDigest::of(password))
}

/// Exactly 64 hex digits, either case; anything else is `None`.
fn parse_hex(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.as_bytes();
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (byte, pair) in out.iter_mut().zip(hex.chunks(2)) {
        let text = std::str::from_utf8(pair).ok()?;
        *byte = u8::from_str_radix(text, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_resolves_to_the_same_digest() {
        let plain = Secret::Plain("s3cret".into()).resolve("k").expect("plain");
        let hex: String = PasswordDigest::of(b"s3cret")
            .0
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let hashed = Secret::Sha256 { sha256: hex }.resolve("k").expect("hash");
        assert!(plain == hashed);
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("pw");
        std::fs::write(&path, "s3cret\n").expect("write");
        let file = Secret::File {
            file: path.to_string_lossy().into_owned(),
        };
        assert!(file.resolve("k").expect("file") == plain);
        assert!(plain.matches(b"s3cret"));
        assert!(!plain.matches(b"s3cret "));
        assert!(!plain.matches(b""));
    }

    #[test]
    fn bad_secrets_are_refused_with_their_key() {
        let short = Secret::Sha256 {
            sha256: "ab".repeat(5),
        };
        assert!(short.resolve("auth.requirepass").is_err());
        let not_hex = Secret::Sha256 {
            sha256: "z".repeat(64),
        };
        let message = not_hex.resolve("auth.requirepass").expect_err("not hex");
        assert!(message.contains("auth.requirepass.sha256"), "{message}");
        let empty = Secret::Plain(String::new()).resolve("auth.users[0].password");
        assert!(empty.expect_err("empty").contains("empty password"));
        let missing = Secret::Env {
            env: "REDCAR_TEST_NO_SUCH_VARIABLE".into(),
        };
        assert!(missing.resolve("k").expect_err("unset").contains("not set"));
        let no_file = Secret::File {
            file: "/nonexistent/redcar/pw".into(),
        };
        assert!(no_file
            .resolve("k")
            .expect_err("no file")
            .contains("cannot read"));
    }

    #[test]
    fn passwords_redcar_sends_are_revealed_except_digests() {
        assert_eq!(Secret::Plain("pw".into()).reveal("k"), Ok("pw".to_string()));
        let digest = Secret::Sha256 {
            sha256: "ab".repeat(32),
        };
        assert!(digest
            .reveal("upstream.password")
            .expect_err("digest")
            .contains("cannot be a sha256"));
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("pw");
        std::fs::write(&path, "from-file\n").expect("write");
        let file = Secret::File {
            file: path.to_string_lossy().into_owned(),
        };
        assert_eq!(file.reveal("k"), Ok("from-file".to_string()));
    }

    /// `password: <yaml>` parsed alone: the Secret, or yaml_serde's message.
    fn parse(yaml: &str) -> Result<Secret, String> {
        #[derive(Deserialize)]
        struct Holder {
            password: Secret,
        }
        yaml_serde::from_str::<Holder>(&format!("password: {yaml}\n"))
            .map(|h| h.password)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn every_form_parses() {
        assert!(parse("s3cret") == Ok(Secret::Plain("s3cret".into())));
        assert!(
            parse("{file: /run/pw}")
                == Ok(Secret::File {
                    file: "/run/pw".into()
                })
        );
        assert!(parse("{env: PW}") == Ok(Secret::Env { env: "PW".into() }));
        let hex = "ab".repeat(32);
        assert!(parse(&format!("{{sha256: {hex}}}")) == Ok(Secret::Sha256 { sha256: hex }));
    }

    #[test]
    fn unknown_keys_and_two_forms_are_refused_with_the_accepted_forms() {
        let extra = parse("{file: /run/pw, extra: x}").expect_err("extra key");
        assert!(extra.starts_with("password: "), "{extra}");
        assert!(extra.contains("unknown key `extra`"), "{extra}");
        assert!(extra.contains("{file: PATH}, {env: NAME}"), "{extra}");
        let typo = parse("{fiel: /run/pw}").expect_err("typo");
        assert!(typo.contains("unknown key `fiel`"), "{typo}");
        assert!(!typo.contains("untagged"), "{typo}");
        let both = parse("{file: /run/pw, env: PW}").expect_err("two forms");
        assert!(both.contains("`file` and `env` are exclusive"), "{both}");
        let empty = parse("{}").expect_err("empty mapping");
        assert!(empty.contains("empty mapping"), "{empty}");
        let list = parse("[a, b]").expect_err("a list");
        assert!(list.contains("a string, {file: PATH}"), "{list}");
        let number = parse("12345").expect_err("a number");
        assert!(number.contains("quote a password"), "{number}");
    }

    #[test]
    fn secrets_are_never_shown() {
        let secret = Secret::Plain("s3cret".into());
        assert_eq!(format!("{secret:?}"), "(redacted)");
        let json = serde_json::to_string(&secret).expect("serialize");
        assert_eq!(json, "\"(redacted)\"");
    }
}
