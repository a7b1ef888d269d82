//! Upgrades in place (docs/operations.md): `redcar upgrade --pid-file` (SIGUSR2) starts the
//! binary again; the new process takes over the listeners and the connected clients with their
//! state, and a failed upgrade changes nothing.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use crate::support::redcar::redcar_bin;
use crate::support::{Redcar, RedisCluster, Value};

/// A pid file in a temp dir, and whatever process it names killed at the end (the processes
/// an upgrade starts are not the test's children).
pub struct PidFile {
    _dir: tempfile::TempDir,
    pub path: PathBuf,
}

impl PidFile {
    pub fn new() -> PidFile {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("redcar.pid");
        PidFile { _dir: dir, path }
    }

    pub fn arg(&self) -> String {
        self.path.to_string_lossy().into_owned()
    }

    /// The pid the file names now.
    pub fn pid(&self) -> Option<u32> {
        std::fs::read_to_string(&self.path)
            .ok()?
            .trim()
            .parse()
            .ok()
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        if let Some(pid) = self.pid() {
            if pid != std::process::id() {
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            }
        }
    }
}

/// Whether process `pid` still runs (and is not a zombie).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
        Err(_) => false,
    }
}

/// Waits until process `pid` is gone; panics after `timeout`.
pub fn wait_gone(pid: u32, timeout: Duration, log: impl Fn() -> String) {
    let deadline = Instant::now() + timeout;
    while alive(pid) {
        assert!(
            Instant::now() < deadline,
            "process {pid} still runs after {timeout:?}; log:\n{}",
            log()
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// `redcar upgrade --pid-file FILE`: its exit code and output.
pub fn upgrade(pid_file: &Path) -> (i32, String) {
    let out = Command::new(redcar_bin())
        .args([
            "upgrade",
            "--pid-file",
            &pid_file.to_string_lossy(),
            "--timeout",
            "60s",
        ])
        .output()
        .expect("run redcar upgrade");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// Waits until the pid file names a process other than `old`.
fn wait_new_pid(pid_file: &PidFile, old: u32) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(pid) = pid_file.pid().filter(|&p| p != old) {
            return pid;
        }
        assert!(Instant::now() < deadline, "no new pid in the pid file");
        thread::sleep(Duration::from_millis(20));
    }
}

fn text(v: &Value) -> String {
    v.to_text()
}

#[test]
fn an_upgraded_client_keeps_its_id_name_login_protocol_and_half_sent_request() {
    let cluster = RedisCluster::start(3, 0);
    let pid_file = PidFile::new();
    let redcar = Redcar::start_with(
        &cluster.seeds(),
        &["--pid-file", &pid_file.arg(), "--requirepass", "s3cret"],
    );
    let old = redcar.pid().expect("running");
    assert_eq!(
        pid_file.pid(),
        Some(old),
        "the pid file names the serving process"
    );
    let mut resp3 = redcar.client();
    let hello = resp3.q(&[
        "HELLO", "3", "AUTH", "default", "s3cret", "SETNAME", "three",
    ]);
    assert!(!hello.is_error(), "{hello:?}");
    let id3 = resp3.q(&["CLIENT", "ID"]).as_int().expect("id");
    let mut resp2 = redcar.client();
    assert_eq!(text(&resp2.q(&["AUTH", "s3cret"])), "OK");
    assert_eq!(text(&resp2.q(&["CLIENT", "SETNAME", "two"])), "OK");
    let id2 = resp2.q(&["CLIENT", "ID"]).as_int().expect("id");
    let mut anonymous = redcar.client();
    assert!(anonymous.q(&["GET", "k"]).is_error(), "NOAUTH before AUTH");
    // Half a request: the rest comes after the upgrade, to the new process.
    resp2
        .send_raw(b"*3\r\n$3\r\nSET\r\n$8\r\nupgraded\r\n$")
        .expect("half a request");

    let (code, out) = upgrade(&pid_file.path);
    assert_eq!(code, 0, "{out}\nlog:\n{}", redcar.log());
    let new = wait_new_pid(&pid_file, old);
    assert_ne!(new, old);
    resp2.send_raw(b"3\r\nyes\r\n").expect("the rest");
    assert_eq!(
        text(&resp2.read_reply().expect("reply")),
        "OK",
        "log:\n{}",
        redcar.log()
    );
    assert_eq!(resp2.q(&["CLIENT", "ID"]).as_int(), Some(id2));
    assert_eq!(text(&resp2.q(&["CLIENT", "GETNAME"])), "two");
    assert_eq!(text(&resp2.q(&["GET", "upgraded"])), "yes");
    assert_eq!(resp3.q(&["CLIENT", "ID"]).as_int(), Some(id3));
    assert_eq!(text(&resp3.q(&["CLIENT", "GETNAME"])), "three");
    let proto = resp3.q(&["HELLO"]);
    assert!(
        format!("{proto:?}").contains("\"proto\", :3"),
        "still RESP3: {proto:?}"
    );
    assert!(anonymous.q(&["GET", "k"]).is_error(), "still not logged in");
    // A new client gets an id of the new process, never one of the moved clients.
    let fresh = redcar.client().q(&["CLIENT", "ID"]);
    assert!(fresh.is_error(), "NOAUTH: {fresh:?}");
    let (status, json) = redcar.http_get("/status.json").expect("status");
    assert_eq!(status, 200);
    assert!(json.contains(&format!("\"pid\":{new}")), "{json}");
    assert!(json.contains("\"restart_generation\":1"), "{json}");
    wait_gone(old, Duration::from_secs(15), || redcar.log());
    let log = redcar.log();
    assert!(log.contains("upgrade: handover finished"), "{log}");
}

#[test]
fn a_new_binary_that_cannot_start_leaves_the_old_process_serving() {
    let cluster = RedisCluster::start(3, 0);
    let pid_file = PidFile::new();
    let config = crate::redirects::write_config("log_level: info\n");
    let redcar = Redcar::start_with(
        &cluster.seeds(),
        &["--pid-file", &pid_file.arg(), "--config", config.path_str()],
    );
    let old = redcar.pid().expect("running");
    let mut client = redcar.client();
    assert_eq!(text(&client.q(&["SET", "k", "before"])), "OK");
    // The new process reads the config again: a broken one stops it at start-up.
    std::fs::write(config.path_str(), "no_such_key: 1\n").expect("break the config");
    let (code, out) = upgrade(&pid_file.path);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("failed"), "{out}");
    assert_eq!(pid_file.pid(), Some(old));
    assert_eq!(
        text(&client.q(&["GET", "k"])),
        "before",
        "the same connection still served"
    );
    assert_eq!(
        text(&redcar.client().q(&["SET", "k", "after"])),
        "OK",
        "new clients too"
    );
    assert!(redcar.log().contains("upgrade failed"), "{}", redcar.log());
    // A config fixed again upgrades.
    std::fs::write(config.path_str(), "log_level: info\n").expect("fix the config");
    let (code, out) = upgrade(&pid_file.path);
    assert_eq!(code, 0, "{out}\nlog:\n{}", redcar.log());
    assert_eq!(text(&client.q(&["GET", "k"])), "after");
}

#[test]
fn a_near_cache_client_moves_and_reads_no_stale_value_after_the_upgrade() {
    let cluster = RedisCluster::start(3, 0);
    let pid_file = PidFile::new();
    let config = crate::redirects::write_config(
        "near_cache:\n  enabled: true\n  max_silence: 200ms\n  keys:\n    - prefix: \"nc:\"\n",
    );
    let redcar = Redcar::start_with(
        &cluster.seeds(),
        &["--pid-file", &pid_file.arg(), "--config", config.path_str()],
    );
    let old = redcar.pid().expect("running");
    let mut c = redcar.client();
    assert_eq!(text(&c.q(&["SET", "nc:a", "1"])), "OK");
    thread::sleep(Duration::from_millis(250));
    // Read twice: the second is served from the old process's near cache.
    assert_eq!(text(&c.q(&["GET", "nc:a"])), "1");
    assert_eq!(text(&c.q(&["GET", "nc:a"])), "1");
    let id = c.q(&["CLIENT", "ID"]).as_int().expect("id");

    let (code, out) = upgrade(&pid_file.path);
    assert_eq!(code, 0, "{out}\nlog:\n{}", redcar.log());
    wait_gone(old, Duration::from_secs(15), || redcar.log());
    let log = redcar.log();
    assert!(log.contains("moved=1 closed=0"), "the client moved: {log}");
    assert_eq!(c.q(&["CLIENT", "ID"]).as_int(), Some(id));
    assert_eq!(text(&c.q(&["GET", "nc:a"])), "1");
    // A write straight on the node after the move: the new process's cache must not serve 1.
    cluster.primary_for_key("nc:a").cmd(&["SET", "nc:a", "2"]);
    let deadline = Instant::now() + Duration::from_secs(2);
    while text(&c.q(&["GET", "nc:a"])) != "2" {
        assert!(
            Instant::now() < deadline,
            "stale near-cache value after the upgrade"
        );
        thread::sleep(Duration::from_millis(5));
    }
}
