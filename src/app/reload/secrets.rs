//! Which secrets a reload changed. Secrets serialize as `(redacted)` and a rewritten password
//! file leaves the config itself equal, so they are compared by the digests of what they read
//! now; the reload log names the keys (never the values).

use crate::config::secrets::SecretDigests;
use crate::config::Config;

/// The secret keys a reload changed, and the digests in effect afterwards.
#[derive(Debug, Default)]
pub(super) struct SecretChanges {
    /// Applied now (`auth.*`; a backend's password when that backend restarts).
    pub(crate) live: Vec<String>,
    /// Read once at start-up: the running value stays until a restart.
    pub(crate) restart: Vec<String>,
    /// What runs now: the new digests of the live keys, the old ones of the others.
    pub(crate) running: SecretDigests,
}

/// Compares `before` (what runs) with `read` (the file's secrets, read for this reload).
/// `running` and `config` are the configs before and after the reload, which tell whether a
/// backend restarts with its new settings.
/// A restart-only key that changed keeps its old digest in `running`, so the warning repeats at
/// every reload until the process restarts, and stops once the file is put back.
pub(super) fn compare(
    before: &SecretDigests,
    read: SecretDigests,
    running: &Config,
    config: &Config,
) -> SecretChanges {
    let mut changes = SecretChanges {
        running: read,
        ..SecretChanges::default()
    };
    let keys: Vec<String> = before
        .keys()
        .chain(changes.running.keys())
        .cloned()
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    for key in keys {
        if before.get(&key) == changes.running.get(&key) {
            continue;
        }
        if applies_live(&key, running, config) {
            changes.live.push(key);
            continue;
        }
        match before.get(&key) {
            Some(digest) => changes.running.insert(key.clone(), *digest),
            None => changes.running.remove(&key),
        };
        changes.restart.push(key);
    }
    changes
}

/// `auth.*` is resolved again on every reload; a backend's password is read when the backend
/// starts, which a reload does when that backend's settings changed.
/// Keys look like `auth.requirepass`, `auth.users[0].password` or `backends.NAME.password`; a
/// backend whose settings are unchanged keeps its connections, and with them the old password.
fn applies_live(key: &str, running: &Config, config: &Config) -> bool {
    if key.starts_with("auth.") {
        return true;
    }
    let Some(rest) = key.strip_prefix("backends.") else {
        return false;
    };
    let name = rest.rsplit_once('.').map_or(rest, |(name, _)| name);
    running.backends.get(name) != config.backends.get(name)
}

/// Adds the secret keys to a list of changed keys: drops what only said "something in this
/// section" (`upstream`, `admin`: a secret serializes alike) and repeats no key.
/// For example `["admin"]` merged with `["admin.token"]` gives `["admin.token"]`.
pub(super) fn merge(keys: &mut Vec<String>, secrets: &[String]) {
    keys.retain(|key| {
        !secrets.iter().any(|s| {
            s.strip_prefix(key.as_str())
                .is_some_and(|r| r.starts_with('.'))
        })
    });
    for secret in secrets {
        if !keys.contains(secret) {
            keys.push(secret.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(yaml: &str) -> Config {
        Config::from_yaml(&format!(
            "listen: 127.0.0.1:6380\ncluster:\n  seeds: [127.0.0.1:7000]\n{yaml}"
        ))
        .expect("valid")
    }

    fn digests(config: &Config) -> SecretDigests {
        config.secret_digests().expect("readable")
    }

    #[test]
    fn client_passwords_apply_live_and_node_passwords_wait_for_a_restart() {
        let old = config("auth: {requirepass: a}\nupstream: {password: u}\n");
        let new = config("auth: {requirepass: b}\nupstream: {password: v}\n");
        let changes = compare(&digests(&old), digests(&new), &old, &old);
        assert_eq!(changes.live, ["auth.requirepass"]);
        assert_eq!(changes.restart, ["upstream.password"]);
        assert!(changes.running["auth.requirepass"] == digests(&new)["auth.requirepass"]);
        assert!(changes.running["upstream.password"] == digests(&old)["upstream.password"]);
        let again = compare(&changes.running, digests(&new), &old, &old);
        assert!(again.live.is_empty(), "{again:?}");
        assert_eq!(
            again.restart,
            ["upstream.password"],
            "warned until restarted"
        );
    }

    #[test]
    fn a_token_turned_on_by_a_reload_needs_a_restart() {
        let old = config("admin: 127.0.0.1:9190\n");
        let new = config("admin: {listen: 127.0.0.1:9190, token: t}\n");
        let changes = compare(&digests(&old), digests(&new), &old, &old);
        assert_eq!(changes.restart, ["admin.token"]);
        assert!(!changes.running.contains_key("admin.token"));
    }

    #[test]
    fn merged_keys_name_the_secret_instead_of_its_section() {
        let mut keys = vec!["admin".to_string(), "router.op_timeout".to_string()];
        merge(&mut keys, &["admin.token".to_string()]);
        assert_eq!(keys, ["router.op_timeout", "admin.token"]);
        let mut keys = vec!["auth.requirepass".to_string()];
        merge(&mut keys, &["auth.requirepass".to_string()]);
        assert_eq!(keys, ["auth.requirepass"]);
        let mut keys = vec!["auth.users".to_string(), "authx".to_string()];
        merge(&mut keys, &["auth.users[0].password".to_string()]);
        assert_eq!(keys, ["auth.users", "authx", "auth.users[0].password"]);
    }
}
