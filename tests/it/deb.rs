//! The Debian package (`make deb`, scripts/build-deb.sh, docs/packaging.md), built through the
//! same script and installed with a real `dpkg -i` into a temporary root; then the installed
//! files are used: the binary's `--version`, `--check-config` on the packaged config, the unit
//! (`systemd-analyze verify` where it exists), the man pages, the sysusers entry; then an
//! upgrade that keeps an edited conffile, and a purge.
//!
//! It packages the debug binary `cargo test` has just built, not a release one: a release build
//! (thin LTO) costs minutes on CI's 2 cores, and what is under test is the package, whose
//! layout, Depends and scripts do not change with the profile; `make deb` builds the release.
//! gzip instead of xz for the same reason (the compressor is dpkg-deb's business).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::redcar::redcar_bin;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()))
}

/// Runs `cmd`, fails the test with its output unless it exits 0.
fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(cmd: &mut Command) -> String {
    String::from_utf8_lossy(&run(cmd).stdout).trim().to_owned()
}

/// `dpkg` on the temporary root, with its own database; maintainer scripts run outside a chroot
/// with DPKG_ROOT set, as they must for this (they touch only that root then).
fn dpkg_in(root: &Path) -> Command {
    let mut cmd = Command::new("dpkg");
    cmd.arg(format!("--root={}", root.display()))
        .arg(format!(
            "--admindir={}",
            root.join("var/lib/dpkg").display()
        ))
        .args(["--force-not-root", "--force-script-chrootless"]);
    cmd
}

#[test]
#[cfg_attr(
    not(feature = "toolchain-tests"),
    ignore = "needs dpkg-deb (Debian or Ubuntu): cargo test --features toolchain-tests (make test turns it on)"
)]
fn deb_installs_into_a_root_and_its_files_work() {
    if !on_path("dpkg-deb") {
        println!(
            "SKIPPED deb: dpkg-deb not found, so not a Debian/Ubuntu machine: no package to build"
        );
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let built = stdout(Command::new(repo().join("scripts/build-deb.sh")).args([
        "--binary".as_ref(),
        redcar_bin().as_os_str(),
        "--out".as_ref(),
        tmp.path().join("out").as_os_str(),
        "--compression".as_ref(),
        "gzip".as_ref(),
        "--no-lintian".as_ref(),
    ]));
    let deb = PathBuf::from(built.lines().last().expect("the script prints the package"));
    let arch = stdout(Command::new("dpkg").arg("--print-architecture"));
    let version = env!("CARGO_PKG_VERSION");
    let name = deb.file_name().expect("file name").to_string_lossy();
    assert!(
        name.starts_with(&format!("redcar_{version}-")) && name.ends_with(&format!("_{arch}.deb")),
        "{name}: expected redcar_{version}-<revision>_{arch}.deb"
    );

    let field = |name: &str| stdout(Command::new("dpkg-deb").arg("--field").arg(&deb).arg(name));
    assert_eq!(field("Package"), "redcar");
    assert_eq!(field("Section"), "net");
    assert_eq!(field("Recommends"), "redis-tools");
    assert!(!field("Description").is_empty());
    let conffiles = stdout(
        Command::new("dpkg-deb")
            .arg("--info")
            .arg(&deb)
            .arg("conffiles"),
    );
    assert_eq!(conffiles, "/etc/redcar/redcar.yaml");
    depends_hold_on_this_host(&field("Depends"));

    // An empty root has no libc6: --force-depends, after the check above on the host, where the
    // packaged binary is about to run.
    let root = tmp.path().join("root");
    for dir in ["var/lib/dpkg/updates", "var/lib/dpkg/info"] {
        std::fs::create_dir_all(root.join(dir)).expect("mkdir");
    }
    std::fs::write(root.join("var/lib/dpkg/status"), "").expect("status");
    run(dpkg_in(&root).arg("--force-depends").arg("-i").arg(&deb));
    let status = stdout(dpkg_in(&root).args(["-s", "redcar"]));
    assert!(status.contains("Status: install ok installed"), "{status}");

    let bin = root.join("usr/bin/redcar");
    let shown = stdout(Command::new(&bin).arg("--version"));
    assert_eq!(shown, format!("redcar {version}"));
    let config = root.join("etc/redcar/redcar.yaml");
    let mut check = Command::new(&bin);
    check.arg("--check-config").arg("--config").arg(&config);
    // The packaged file alone, not this environment's overrides.
    for (key, _) in std::env::vars().filter(|(key, _)| key.starts_with("REDCAR_")) {
        check.env_remove(key);
    }
    let effective: yaml_serde::Value =
        yaml_serde::from_str(&stdout(&mut check)).expect("--check-config prints YAML");
    assert_eq!(effective["listen"].as_str(), Some("127.0.0.1:6380"));
    let seeds = effective["cluster"]["seeds"].as_sequence();
    assert!(
        seeds.is_some_and(|s| !s.is_empty()),
        "no cluster.seeds: {effective:?}"
    );

    check_unit(&root, tmp.path());
    check_man_pages(&root);
    for doc in ["copyright", "changelog.Debian.gz"] {
        let path = root.join("usr/share/doc/redcar").join(doc);
        assert!(
            path.metadata().is_ok_and(|m| m.len() > 0),
            "{}",
            path.display()
        );
    }
    if on_path("systemd-sysusers") {
        let passwd =
            std::fs::read_to_string(root.join("etc/passwd")).expect("postinst made passwd");
        assert!(
            passwd
                .lines()
                .any(|l| l.starts_with("redcar:") && l.ends_with(":/usr/sbin/nologin")),
            "postinst did not create the redcar user: {passwd}"
        );
    } else {
        println!("systemd-sysusers not found: the postinst's user creation is not checked");
    }

    // An upgrade (the same package again: postinst runs with the old version in $2) keeps the
    // operator's edit of the conffile, without a prompt since the packaged file did not change.
    let edited = std::fs::read_to_string(&config).expect("config") + "# edited by the operator\n";
    std::fs::write(&config, &edited).expect("edit config");
    run(dpkg_in(&root).arg("--force-depends").arg("-i").arg(&deb));
    let kept = std::fs::read_to_string(&config).expect("config after upgrade");
    assert_eq!(kept, edited, "the upgrade replaced the edited conffile");

    run(dpkg_in(&root).args(["--purge", "redcar"]));
    assert!(!bin.exists(), "purge left the binary");
    assert!(!config.exists(), "purge left the conffile");
}

/// Every `pkg (>= version)` in Depends is installed here at that version or newer, so a
/// Depends computed too high (or naming a package that does not exist) shows here.
fn depends_hold_on_this_host(depends: &str) {
    assert!(depends.contains("libc6 (>= "), "Depends: {depends}");
    for dep in depends.split(',').map(str::trim) {
        let (package, version) = match dep.split_once(" (>= ") {
            Some((package, version)) => (package, version.trim_end_matches(')')),
            None => (dep, ""),
        };
        let installed = stdout(Command::new("dpkg-query").args(["-W", "-f=${Version}", package]));
        if !version.is_empty() {
            run(Command::new("dpkg").args(["--compare-versions", &installed, "ge", version]));
        }
    }
}

/// The installed unit starts the packaged binary on the packaged config, is not enabled, keeps
/// in step with examples/systemd/redcar.service, and passes `systemd-analyze verify`.
fn check_unit(root: &Path, tmp: &Path) {
    let unit_path = root.join("lib/systemd/system/redcar.service");
    let unit = std::fs::read_to_string(&unit_path).expect("the unit is installed");
    let lines: Vec<&str> = unit.lines().collect();
    for line in [
        "ExecStart=/usr/bin/redcar --config /etc/redcar/redcar.yaml",
        "ExecStartPre=/usr/bin/redcar --config /etc/redcar/redcar.yaml --check-config",
        "DynamicUser=yes",
    ] {
        assert!(lines.contains(&line), "the unit lacks `{line}`");
    }
    // Every setting of the hand-install example, with the packaged path, is in the package's.
    let example = std::fs::read_to_string(repo().join("examples/systemd/redcar.service"))
        .expect("examples/systemd/redcar.service");
    for line in example
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let line = line.replace("/usr/local/bin/redcar", "/usr/bin/redcar");
        assert!(
            lines.contains(&line.as_str()),
            "the packaged unit lacks `{line}`"
        );
    }
    let wants = root.join("etc/systemd/system/multi-user.target.wants/redcar.service");
    assert!(!wants.exists(), "the package enabled the service");

    if !on_path("systemd-analyze") {
        println!("systemd-analyze not found: the unit is checked by its lines only");
        return;
    }
    // verify wants the executables at their paths on this host: the same unit with the paths
    // into the temporary root.
    let copy = tmp.join("verify/redcar.service");
    std::fs::create_dir_all(copy.parent().expect("parent")).expect("mkdir");
    let rooted = unit
        .replace(
            "/usr/bin/redcar",
            &root.join("usr/bin/redcar").to_string_lossy(),
        )
        .replace(
            "/etc/redcar/",
            &format!("{}/", root.join("etc/redcar").display()),
        );
    std::fs::write(&copy, rooted).expect("write unit copy");
    // Documentation=man:redcar(1) is checked with `man`: point it at the installed pages.
    let out = run(Command::new("systemd-analyze")
        .env("MANPATH", root.join("usr/share/man"))
        .arg("verify")
        .arg(&copy));
    // Unknown keys are only warnings (exit 0): any output is a finding.
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.trim().is_empty(), "systemd-analyze verify: {said}");
}

/// A page for redcar and each subcommand, gzipped, naming the flags; rendered by `man -l`
/// where man is installed.
fn check_man_pages(root: &Path) {
    let dir = root.join("usr/share/man/man1");
    for page in ["redcar", "redcar-doctor", "redcar-top", "redcar-config"] {
        let path = dir.join(format!("{page}.1.gz"));
        assert!(
            path.metadata().is_ok_and(|m| m.len() > 0),
            "{}",
            path.display()
        );
    }
    let main = dir.join("redcar.1.gz");
    let roff = stdout(Command::new("gzip").arg("-dc").arg(&main));
    for text in [".TH redcar 1", "check\\-config", "/etc/redcar/redcar.yaml"] {
        assert!(roff.contains(text), "redcar.1 lacks `{text}`");
    }
    if !on_path("man") {
        println!("man not found: redcar.1 is not rendered");
        return;
    }
    // Not a terminal: no pager. MANWIDTH keeps the lines unbroken enough to search.
    let shown = stdout(
        Command::new("man")
            .env("MANWIDTH", "200")
            .arg("-l")
            .arg(&main),
    );
    for text in ["--cluster <SEEDS>", "redcar-doctor(1)", "EXIT STATUS"] {
        assert!(
            shown.contains(text),
            "man -l redcar.1 lacks `{text}`:\n{shown}"
        );
    }
}
