//! The postinst's package-upgrade step (packaging/debian/postinst, docs/packaging.md): a running
//! redcar moves to the new binary in place; only one from before upgrades in place (exit 64) is
//! restarted; one whose new binary did not get ready (exit 1) keeps serving. Its two functions
//! are run by `sh` with `systemctl`, `deb-systemd-invoke`, `redcar` and `policy-rc.d` stubbed,
//! since the real branch runs only under a booted systemd.

use std::path::Path;
use std::process::Command;

/// The postinst's `policy_allows` and `move_to_new_binary`, pointed at the stubs in `dir`.
fn functions(dir: &Path) -> String {
    let script = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/debian/postinst"),
    )
    .expect("postinst");
    let start = script.find("policy_allows() {").expect("policy_allows");
    let end = script
        .find("\nif [ \"$1\" = configure ]")
        .expect("the main part");
    script[start..end]
        .replace("/usr/bin/redcar", &dir.join("redcar").to_string_lossy())
        .replace(
            "/usr/sbin/policy-rc.d",
            &dir.join("policy-rc.d").to_string_lossy(),
        )
}

/// Runs `move_to_new_binary` with `redcar upgrade` exiting `upgrade`, the service active or not,
/// and a policy-rc.d exiting `policy` (none when `None`): the stubs' calls, and stderr.
fn run(upgrade: i32, active: bool, policy: Option<i32>) -> (String, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let calls = dir.path().join("calls");
    let stub = |name: &str, code: i32| {
        let path = dir.path().join(name);
        let body = format!(
            "#!/bin/sh\necho \"{name} $*\" >> {}\nexit {code}\n",
            calls.display()
        );
        std::fs::write(&path, body).expect("stub");
        Command::new("chmod")
            .arg("+x")
            .arg(&path)
            .status()
            .expect("chmod");
    };
    stub("systemctl", if active { 0 } else { 3 });
    stub("deb-systemd-invoke", 0);
    stub("redcar", upgrade);
    if let Some(code) = policy {
        stub("policy-rc.d", code);
    }
    let path = format!("{}:/usr/bin:/bin", dir.path().display());
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "set -e\n{}\nmove_to_new_binary",
            functions(dir.path())
        ))
        .env("PATH", path)
        .output()
        .expect("sh");
    assert!(out.status.success(), "{out:?}");
    let calls = std::fs::read_to_string(&calls).unwrap_or_default();
    (calls, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_package_upgrade_moves_a_running_redcar_in_place_and_restarts_only_an_old_one() {
    let upgrade = "redcar upgrade --pid-file /run/redcar/redcar.pid --timeout 60s";
    let (calls, _) = run(0, true, None);
    assert!(calls.contains(upgrade), "{calls}");
    assert!(!calls.contains("try-restart"), "moved in place: {calls}");

    let (calls, _) = run(64, true, None);
    assert!(
        calls.contains("deb-systemd-invoke try-restart redcar.service"),
        "no pid file (a redcar from before upgrades in place): restarted: {calls}"
    );

    let (calls, stderr) = run(1, true, None);
    assert!(!calls.contains("try-restart"), "{calls}");
    assert!(stderr.contains("keeps serving"), "{stderr}");

    let (calls, _) = run(0, false, None);
    assert!(
        !calls.contains("redcar upgrade"),
        "a stopped redcar stays stopped: {calls}"
    );

    let (calls, _) = run(0, true, Some(101));
    assert!(
        !calls.contains("redcar upgrade"),
        "policy-rc.d forbids it: {calls}"
    );
    assert!(
        calls.contains("policy-rc.d redcar.service restart"),
        "{calls}"
    );
}
