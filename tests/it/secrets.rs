//! Strict secrets: a password or token given as a mapping with an unknown key, two forms at once
//! or a misspelt form stops start-up with exit 64, naming the key and the accepted forms.

use crate::support::redcar::check_config_yaml;

const LISTEN: &str = "listen: 127.0.0.1:6380\n";

#[test]
fn bad_secret_forms_stop_start_up_naming_the_key() {
    let cases = [
        (
            "auth:\n  requirepass: {file: /run/pw, extra: x}\n",
            "auth.requirepass",
            "unknown key `extra`",
        ),
        (
            "auth:\n  requirepass: {file: /run/pw, env: PW}\n",
            "auth.requirepass",
            "`file` and `env` are exclusive",
        ),
        (
            "auth:\n  requirepass: {fiel: /run/pw}\n",
            "auth.requirepass",
            "unknown key `fiel`",
        ),
        (
            "auth:\n  users:\n    - {name: app, password: {env: PW, sha256: ab}}\n",
            "auth.users[0].password",
            "`env` and `sha256` are exclusive",
        ),
        (
            "upstream:\n  password: {fiel: /run/pw}\n",
            "upstream.password",
            "unknown key `fiel`",
        ),
        (
            "admin:\n  listen: 127.0.0.1:9190\n  token: {file: /run/t, env: T}\n",
            "admin.token",
            "`file` and `env` are exclusive",
        ),
    ];
    for (yaml, key, problem) in cases {
        let (code, stderr) = check_config_yaml(&format!("{LISTEN}{yaml}"));
        assert_eq!(code, Some(64), "{yaml}: {stderr}");
        assert!(
            stderr.starts_with("redcar: invalid configuration"),
            "{stderr}"
        );
        assert!(stderr.contains(key), "{key}: {stderr}");
        assert!(stderr.contains(problem), "{problem}: {stderr}");
        assert!(
            stderr.contains("a string, {file: PATH}, {env: NAME}"),
            "the accepted forms: {stderr}"
        );
        assert!(!stderr.contains("untagged"), "{stderr}");
    }
}

#[test]
fn an_unreadable_admin_token_or_one_without_a_listener_stops_start_up() {
    let (code, stderr) = check_config_yaml(&format!(
        "{LISTEN}admin:\n  listen: 127.0.0.1:9190\n  token: {{file: /nonexistent/redcar/token}}\n"
    ));
    assert_eq!(code, Some(64), "{stderr}");
    assert!(stderr.contains("`admin.token.file`"), "{stderr}");
    let (code, stderr) = check_config_yaml(&format!("{LISTEN}admin:\n  token: t0ken\n"));
    assert_eq!(code, Some(64), "{stderr}");
    assert!(stderr.contains("`admin.token` is set but"), "{stderr}");
    assert!(!stderr.contains("t0ken"), "{stderr}");
}
