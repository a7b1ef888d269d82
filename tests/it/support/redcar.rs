//! `Redcar`: the proxy binary as a child process on free loopback ports.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::resp_client::{RespClient, Value};
use super::server::free_port;

pub const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// Path of the redcar binary: cargo's `CARGO_BIN_EXE_redcar` for this crate's
/// integration tests, else `$REDCAR_BIN`, else target/release/redcar.
pub fn redcar_bin() -> PathBuf {
    if let Some(p) = option_env!("CARGO_BIN_EXE_redcar") {
        return PathBuf::from(p);
    }
    if let Ok(p) = std::env::var("REDCAR_BIN") {
        return PathBuf::from(p);
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release/redcar")
}

pub struct Redcar {
    child: Option<Child>,
    port: u16,
    admin_port: u16,
    args: Vec<String>,
    /// Extra environment variables for the child (after the `REDCAR_*` ones are cleared).
    env: Vec<(String, String)>,
    dir: tempfile::TempDir,
    /// The binary run: [`redcar_bin`] unless a test measures another build.
    bin: PathBuf,
}

impl Redcar {
    /// `redcar --listen 127.0.0.1:<free> --admin 127.0.0.1:<free> --cluster <seeds>`,
    /// then wait for `GET /readyz` → 200.
    pub fn start(seeds: &str) -> Redcar {
        Redcar::start_with(seeds, &[])
    }

    /// Like [`start`](Self::start) with extra command-line arguments.
    pub fn start_with(seeds: &str, extra_args: &[&str]) -> Redcar {
        let mut r = Redcar::spawn(seeds, extra_args);
        r.wait_ready(READY_TIMEOUT);
        r
    }

    /// Spawn without waiting for readiness. stdout+stderr go to a log file
    /// (see [`log`](Self::log)). Inherited `REDCAR_*` variables are removed; `REDCAR_WORKERS=2`.
    pub fn spawn(seeds: &str, extra_args: &[&str]) -> Redcar {
        let dir = tempfile::Builder::new()
            .prefix("redcar-it-proxy-")
            .tempdir()
            .expect("temp dir for redcar");
        let port = free_port();
        let admin_port = free_port();
        let mut args = vec![
            "--listen".to_string(),
            format!("127.0.0.1:{port}"),
            "--admin".to_string(),
            format!("127.0.0.1:{admin_port}"),
        ];
        if !seeds.is_empty() {
            args.push("--cluster".to_string());
            args.push(seeds.to_string());
        }
        args.extend(extra_args.iter().map(|s| s.to_string()));
        let mut r = Redcar {
            child: None,
            port,
            admin_port,
            args,
            env: Vec::new(),
            dir,
            bin: redcar_bin(),
        };
        r.spawn_child();
        r
    }

    /// Like [`start_with`](Self::start_with), with environment variables set for redcar.
    pub fn start_with_env(seeds: &str, extra_args: &[&str], env: &[(&str, &str)]) -> Redcar {
        let mut r = Redcar::spawn(seeds, extra_args);
        r.kill();
        r.env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        r.spawn_child();
        r.wait_ready(READY_TIMEOUT);
        r
    }

    /// Like [`spawn`](Self::spawn), running the binary at `bin` (to compare builds).
    pub fn spawn_bin(bin: &std::path::Path, seeds: &str, extra_args: &[&str]) -> Redcar {
        let mut r = Redcar::spawn(seeds, extra_args);
        r.kill();
        r.bin = bin.to_path_buf();
        r.spawn_child();
        r
    }

    fn spawn_child(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("open redcar log");
        let log2 = log.try_clone().expect("clone log fd");
        let mut cmd = Command::new(&self.bin);
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("REDCAR_") {
                cmd.env_remove(k);
            }
        }
        // Two workers whatever the machine's core count, so `threading: auto` settles the same
        // way (per core) on every test machine; a test's own `--workers` flag overrides it.
        cmd.env("REDCAR_WORKERS", "2");
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        let child = cmd
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", self.bin.display()));
        self.child = Some(child);
    }

    /// Poll `/readyz` until 200; panics with the log after `timeout`.
    pub fn wait_ready(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(status)) = c.try_wait() {
                    self.child = None;
                    panic!("redcar exited early ({status}); log:\n{}", self.log());
                }
            }
            if matches!(self.http_get("/readyz"), Ok((200, _))) {
                return;
            }
            if Instant::now() > deadline {
                panic!("redcar not ready after {timeout:?}; log:\n{}", self.log());
            }
            thread::sleep(Duration::from_millis(25));
        }
    }

    /// `127.0.0.1:PORT` of the RESP listener.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn admin_addr(&self) -> String {
        format!("127.0.0.1:{}", self.admin_port)
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("redcar.log")
    }

    /// Everything redcar wrote to stdout/stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// A new plain connection to the proxy.
    pub fn client(&self) -> RespClient {
        RespClient::connect(self.addr())
            .unwrap_or_else(|e| panic!("connect to redcar {}: {e}", self.addr()))
    }

    pub fn cmd(&self, args: &[&str]) -> Value {
        self.client().q(args)
    }

    pub fn cli(&self, args: &[&str]) -> String {
        self.cmd(args).to_text()
    }

    /// Minimal HTTP/1.1 GET against the admin listener: `(status, body)`.
    pub fn http_get(&self, path: &str) -> std::io::Result<(u16, String)> {
        let mut s = TcpStream::connect(self.admin_addr())?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.admin_addr()
        )?;
        let mut resp = Vec::new();
        s.read_to_end(&mut resp)?;
        let text = String::from_utf8_lossy(&resp).into_owned();
        let status = text
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("bad HTTP response: {text:?}")))?;
        let body = text
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        Ok((status, body))
    }

    /// Sum of every series of `name` in `/metrics` (all label values); `name` may end in `{`
    /// to leave out the metric's other series (`_total`, `_bucket`).
    pub fn metric_sum(&self, name: &str) -> f64 {
        let (_, metrics) = self.http_get("/metrics").expect("metrics");
        metrics
            .lines()
            .filter(|line| line.starts_with(name))
            .filter_map(|line| line.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum()
    }

    /// SIGKILL and reap. Idempotent.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Wait for the process to exit on its own (e.g. after a signal sent by the test).
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            let c = self.child.as_mut()?;
            if let Ok(Some(st)) = c.try_wait() {
                self.child = None;
                return Some(st);
            }
            if Instant::now() > deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kill and start again with the same ports and arguments (no readiness wait).
    pub fn restart(&mut self) {
        self.kill();
        self.spawn_child();
    }
}

/// How much of redcar's log a failing test prints.
const LOG_TAIL_LINES: usize = 80;

impl Drop for Redcar {
    /// Stops redcar; when the test is failing (this thread is unwinding from a panic), prints
    /// the tail of redcar's log to stderr first, since its directory is removed right after.
    fn drop(&mut self) {
        self.kill();
        if thread::panicking() {
            let log = self.log();
            let lines: Vec<&str> = log.lines().collect();
            let tail = &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..];
            eprintln!(
                "---- redcar on 127.0.0.1:{} (the test failed): last {} of {} log lines ----\n{}\n---- end of redcar's log ----",
                self.port,
                tail.len(),
                lines.len(),
                tail.join("\n")
            );
        }
    }
}

/// `redcar --cluster 127.0.0.1:7000 --config <yaml> --check-config`: its exit code and stderr,
/// for tests of start-up validation (nothing connects anywhere).
pub fn check_config_yaml(yaml: &str) -> (Option<i32>, String) {
    let config = crate::redirects::write_config(yaml);
    let out = Command::new(redcar_bin())
        .args([
            "--cluster",
            "127.0.0.1:7000",
            "--config",
            config.path_str(),
            "--check-config",
        ])
        .output()
        .expect("run redcar --check-config");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
