//! Every secret-typed key of the config, by its dotted name, and what each resolves to now: a
//! reload compares these digests to name the secrets that changed (never their values).

use std::collections::BTreeMap;

use super::{Config, ConfigError};
use crate::backends::BackendConfig;
use crate::values::secret::{PasswordDigest, Secret};

/// Secret key (`auth.requirepass`, `auth.users[0].password`, ...) → digest of its value.
/// Ordered by key so the reload log lists changed secrets in a stable order.
pub(crate) type SecretDigests = BTreeMap<String, PasswordDigest>;

impl Config {
    /// Each secret that is set, with the key that names it in messages.
    /// Only secrets that are set. The names are the keys of [`SecretDigests`] and what the reload
    /// log prints, so they follow the config's own spelling.
    pub(crate) fn secrets(&self) -> Vec<(String, &Secret)> {
        let sentinel = self.sentinel.as_ref();
        let mut keys: Vec<(String, Option<&Secret>)> = vec![
            ("admin.token".into(), self.admin.token.as_ref()),
            ("auth.requirepass".into(), self.auth.requirepass.as_ref()),
        ];
        for (i, user) in self.auth.users.iter().enumerate() {
            keys.push((format!("auth.users[{i}].password"), user.password.as_ref()));
        }
        keys.push(("upstream.password".into(), self.upstream.password.as_ref()));
        keys.push((
            "sentinel.sentinel_password".into(),
            sentinel.and_then(|s| s.sentinel_password.as_ref()),
        ));
        for (name, backend) in &self.backends {
            if let BackendConfig::Sentinel(sentinel) = backend {
                keys.push((
                    format!("backends.{name}.sentinel_password"),
                    sentinel.sentinel_password.as_ref(),
                ));
            }
        }
        keys.into_iter()
            .filter_map(|(key, secret)| Some((key, secret?)))
            .collect()
    }

    /// Reads every secret now (files, variables) and keeps only its digest; the passwords and
    /// hashes written in an `acl` string count as one secret, `auth.users[N].acl`.
    /// Fails when a secret cannot be read (missing file or variable, empty value, malformed
    /// digest): at start-up and at a reload alike, before anything changes.
    pub(crate) fn secret_digests(&self) -> Result<SecretDigests, ConfigError> {
        let mut digests = self
            .secrets()
            .into_iter()
            .map(|(key, secret)| {
                let digest = secret.resolve(&key).map_err(ConfigError)?;
                Ok((key, digest))
            })
            .collect::<Result<SecretDigests, ConfigError>>()?;
        for (i, user) in self.auth.users.iter().enumerate() {
            if let Some(digest) = user.acl.as_ref().and_then(|acl| acl.secret_digest()) {
                digests.insert(format!("auth.users[{i}].acl"), digest);
            }
        }
        Ok(digests)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = "listen: 127.0.0.1:6380\ncluster:\n  seeds: [127.0.0.1:7000]\n";

    /// A config with every secret-typed key set.
    const ALL_SECRETS: &str = "\
listen: 127.0.0.1:6380
admin: {listen: 127.0.0.1:9190, token: t}
auth:
  requirepass: a
  users: [{name: bob, password: b}]
upstream: {password: u}
sentinel: {sentinels: [127.0.0.1:26379], master: m, sentinel_password: s}
backends:
  side: {kind: sentinel, sentinels: [127.0.0.1:26380], master: n, sentinel_password: s}
";

    /// Dotted paths of every value that serializes as `(redacted)`: the secrets.
    fn redacted_paths(value: &serde_json::Value, path: &str, out: &mut Vec<String>) {
        let join = |key: &str| match path {
            "" => key.to_string(),
            _ => format!("{path}.{key}"),
        };
        match value {
            serde_json::Value::Object(map) => {
                for (key, child) in map {
                    redacted_paths(child, &join(key), out);
                }
            }
            serde_json::Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    redacted_paths(child, &format!("{path}[{i}]"), out);
                }
            }
            serde_json::Value::String(text) if text == "(redacted)" => out.push(path.to_string()),
            _ => {}
        }
    }

    /// A new `Secret` field anywhere in the tree must be listed by `Config::secrets`, or a
    /// reload could not say that it changed.
    #[test]
    fn every_secret_typed_key_is_listed() {
        let config = Config::from_yaml(ALL_SECRETS).expect("parses");
        let mut serialized = Vec::new();
        redacted_paths(
            &serde_json::to_value(&config).expect("serializes"),
            "",
            &mut serialized,
        );
        serialized.sort();
        let mut listed: Vec<String> = config.secrets().into_iter().map(|(k, _)| k).collect();
        listed.sort();
        assert_eq!(listed, serialized);
    }

    #[test]
    fn digests_follow_the_value_not_the_form() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("pw");
        std::fs::write(&path, "old\n").expect("write");
        let yaml = format!(
            "{MINIMAL}auth:\n  requirepass: {{file: {}}}\n",
            path.display()
        );
        let config = Config::from_yaml(&yaml).expect("parses");
        let before = config.secret_digests().expect("reads");
        std::fs::write(&path, "new\n").expect("rewrite");
        let after = config.secret_digests().expect("reads");
        assert!(before["auth.requirepass"] != after["auth.requirepass"]);
        let plain = Config::from_yaml(&format!("{MINIMAL}auth:\n  requirepass: new\n"))
            .expect("parses")
            .secret_digests()
            .expect("reads");
        assert!(plain["auth.requirepass"] == after["auth.requirepass"]);
    }

    /// The message names the key's full path and the accepted forms.
    fn parse_error(yaml: &str) -> String {
        Config::from_yaml(yaml)
            .expect_err("must be refused")
            .to_string()
    }

    #[test]
    fn bad_secret_forms_name_their_key_everywhere() {
        let cases = [
            ("auth:\n  requirepass: {fiel: /pw}\n", "auth.requirepass"),
            (
                "auth:\n  users:\n    - {name: a, password: {file: /pw, extra: x}}\n",
                "auth.users[0].password",
            ),
            (
                "upstream:\n  password: {file: /pw, env: PW}\n",
                "upstream.password",
            ),
            (
                "sentinel: {sentinels: [h:1], master: m, sentinel_password: {fiel: x}}\n",
                "sentinel.sentinel_password",
            ),
            (
                "backends:\n  b: {kind: sentinel, sentinels: [h:1], master: m, \
                 sentinel_password: {fiel: x}}\n",
                "backends",
            ),
            (
                "admin:\n  listen: 127.0.0.1:9190\n  token: {fiel: x}\n",
                "admin.token",
            ),
        ];
        for (yaml, key) in cases {
            let error = parse_error(&format!("{MINIMAL}{yaml}"));
            assert!(error.contains(key), "{key}: {error}");
            assert!(error.contains("{file: PATH}, {env: NAME}"), "{error}");
            assert!(!error.contains("untagged"), "{error}");
        }
        let both = parse_error(&format!(
            "{MINIMAL}auth:\n  requirepass: {{file: /pw, env: PW}}\n"
        ));
        assert!(both.contains("`file` and `env` are exclusive"), "{both}");
        let extra = parse_error(&format!(
            "{MINIMAL}auth:\n  requirepass: {{file: /pw, extra: x}}\n"
        ));
        assert!(extra.contains("unknown key `extra`"), "{extra}");
    }
}
