//! `RedisServer`: one `redis-server` child process on a free loopback port,
//! in its own temp dir, killed (and reaped) on drop.

use std::collections::HashSet;
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use super::resp_client::{RespClient, Value};

/// How long a server gets to answer PING after being spawned.
const READY_TIMEOUT: Duration = Duration::from_secs(15);
/// How many times we pick a new port when the chosen one turns out to be taken.
const PORT_ATTEMPTS: usize = 20;
const POLL: Duration = Duration::from_millis(20);

/// Ports handed out by this process (so parallel tests never pick the same one,
/// even after the probe listener is closed). The only global state.
static RESERVED: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

fn loopback(port: u16) -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)
}

fn can_bind(port: u16) -> bool {
    TcpListener::bind(loopback(port)).is_ok()
}

fn reserve(port: u16) -> bool {
    let mut guard = RESERVED.lock().unwrap_or_else(|e| e.into_inner());
    guard.get_or_insert_with(HashSet::new).insert(port)
}

/// A free loopback port (bind 127.0.0.1:0), never handed out twice by this process.
/// Use it for redcar's `--listen` / `--admin` too.
pub fn free_port() -> u16 {
    loop {
        let port = TcpListener::bind(loopback(0))
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("bind 127.0.0.1:0");
        if reserve(port) {
            return port;
        }
    }
}

/// A free port P such that P+10000 (the cluster bus port) is free as well.
/// Picked below the kernel's ephemeral range (32768+) so client sockets do
/// not steal it between probing and redis-server binding.
pub fn free_cluster_port() -> u16 {
    let seed = std::process::id() as u64
        ^ Instant::now().elapsed().as_nanos() as u64
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
    let mut x = seed | 1;
    for _ in 0..10_000 {
        // xorshift64
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let port = 12_000 + (x % 10_000) as u16; // 12000..22000, bus 22000..32000
        if can_bind(port) && can_bind(port + 10_000) && reserve(port) {
            return port;
        }
    }
    panic!("could not find a free port pair P, P+10000");
}

/// How a server is started; kept so `restart()` can do it again.
#[derive(Clone, Debug)]
struct Spec {
    cluster_node_timeout_ms: Option<u64>,
    extra_args: Vec<String>,
    /// TLS only (`--port 0 --tls-port P`): readiness is checked with `redis-cli --tls`.
    tls: Option<TlsNode>,
}

/// The certificates of a TLS-only node, and how the harness talks to it (`redis-cli --tls`
/// with the client certificate, so `tls-auth-clients yes` nodes answer too).
#[derive(Clone, Debug)]
pub struct TlsNode {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    /// `tls-auth-clients`: `yes` (a client certificate is required) or `optional`.
    pub auth_clients: &'static str,
}

impl TlsNode {
    /// `redis-cli --tls ... -p port args`: stdout, or what went wrong.
    pub fn cli(&self, port: u16, args: &[&str]) -> Result<String, String> {
        let out = Command::new("redis-cli")
            .arg("--tls")
            .arg("--cacert")
            .arg(&self.ca)
            .arg("--cert")
            .arg(&self.client_cert)
            .arg("--key")
            .arg(&self.client_key)
            .args(["-h", "127.0.0.1", "-p", &port.to_string()])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("run redis-cli: {e}"))?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.success() && !stdout.starts_with("Could not connect") {
            Ok(stdout)
        } else {
            Err(format!("{stdout}{}", String::from_utf8_lossy(&out.stderr)))
        }
    }

    fn args(&self, port: u16) -> Vec<String> {
        let path = |p: &PathBuf| p.display().to_string();
        vec![
            "--port".into(),
            "0".into(),
            "--tls-port".into(),
            port.to_string(),
            "--tls-cert-file".into(),
            path(&self.cert),
            "--tls-key-file".into(),
            path(&self.key),
            "--tls-ca-cert-file".into(),
            path(&self.ca),
            "--tls-auth-clients".into(),
            self.auth_clients.into(),
            "--tls-cluster".into(),
            "yes".into(),
            "--tls-replication".into(),
            "yes".into(),
        ]
    }
}

/// A running `redis-server` child.
pub struct RedisServer {
    port: u16,
    dir: tempfile::TempDir,
    spec: Spec,
    child: Option<Child>,
}

impl RedisServer {
    /// A standalone server with default settings.
    pub fn start() -> RedisServer {
        RedisServer::start_with(&[])
    }

    /// A standalone server with extra `redis-server` arguments, e.g. `&["--maxmemory", "10mb"]`.
    pub fn start_with(extra_args: &[&str]) -> RedisServer {
        RedisServer::launch(Spec {
            cluster_node_timeout_ms: None,
            extra_args: extra_args.iter().map(|s| s.to_string()).collect(),
            tls: None,
        })
    }

    /// A cluster-enabled node (not yet part of any cluster); both its port and
    /// port+10000 were free when chosen.
    pub fn start_cluster_node(node_timeout_ms: u64, extra_args: &[&str]) -> RedisServer {
        RedisServer::launch(Spec {
            cluster_node_timeout_ms: Some(node_timeout_ms),
            extra_args: extra_args.iter().map(|s| s.to_string()).collect(),
            tls: None,
        })
    }

    /// A cluster-enabled node that speaks TLS only (no plain port), for nodes, clients and
    /// replication alike.
    pub fn start_tls_cluster_node(node_timeout_ms: u64, tls: &TlsNode) -> RedisServer {
        RedisServer::launch(Spec {
            cluster_node_timeout_ms: Some(node_timeout_ms),
            extra_args: Vec::new(),
            tls: Some(tls.clone()),
        })
    }

    /// How to reach this node when it is TLS only.
    pub fn tls(&self) -> Option<&TlsNode> {
        self.spec.tls.as_ref()
    }

    fn launch(spec: Spec) -> RedisServer {
        let mut last_err = String::new();
        for _ in 0..PORT_ATTEMPTS {
            let port = if spec.cluster_node_timeout_ms.is_some() {
                free_cluster_port()
            } else {
                free_port()
            };
            let dir = tempfile::Builder::new()
                .prefix("redcar-it-redis-")
                .tempdir()
                .expect("create temp dir for redis-server");
            let mut server = RedisServer {
                port,
                dir,
                spec: spec.clone(),
                child: None,
            };
            match server.spawn_and_wait() {
                Ok(()) => return server,
                // `server` drops here: kills the child if alive, removes its dir.
                Err(e) if e.contains("in use") => last_err = e,
                Err(e) => {
                    last_err = e;
                    break;
                }
            }
        }
        panic!("could not start redis-server: {last_err}");
    }

    fn args(&self) -> Vec<String> {
        let mut a: Vec<String> = match &self.spec.tls {
            None => vec!["--port".into(), self.port.to_string()],
            Some(tls) => tls.args(self.port),
        };
        a.extend::<[String; 14]>([
            "--bind".into(),
            "127.0.0.1".into(),
            "--protected-mode".into(),
            "no".into(),
            "--save".into(),
            "".into(),
            "--appendonly".into(),
            "no".into(),
            "--dir".into(),
            self.dir.path().display().to_string(),
            "--logfile".into(),
            self.log_path().display().to_string(),
            "--daemonize".into(),
            "no".into(),
        ]);
        if let Some(t) = self.spec.cluster_node_timeout_ms {
            a.extend(
                [
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                ]
                .iter()
                .map(|s| s.to_string()),
            );
            a.push(t.to_string());
            // Replicas sync right away instead of after the default 5 s delay.
            // CLUSTER SLOTS lists a replica only once its gossiped replication
            // offset is non-zero; on an idle primary that first happens at the
            // replication PING (default every 10 s), so ping every second.
            a.extend(
                [
                    "--repl-diskless-sync-delay",
                    "0",
                    "--repl-ping-replica-period",
                    "1",
                ]
                .iter()
                .map(|s| s.to_string()),
            );
        }
        a.extend(self.spec.extra_args.iter().cloned());
        a
    }

    /// Spawn the process and wait until it answers PING (and is really *our* process).
    fn spawn_and_wait(&mut self) -> Result<(), String> {
        let child = Command::new("redis-server")
            .args(self.args())
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("spawn redis-server (is it installed?): {e}"))?;
        let pid = child.id();
        self.child = Some(child);
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    self.child = None;
                    return Err(format!(
                        "redis-server on port {} exited early ({status}); log:\n{}",
                        self.port,
                        self.log_tail(30)
                    ));
                }
            }
            if let Some(tls) = &self.spec.tls {
                let info = tls.cli(self.port, &["INFO", "server"]).unwrap_or_default();
                if info.contains(&format!("process_id:{pid}")) {
                    return Ok(());
                }
            } else if let Ok(mut c) =
                RespClient::connect_timeout(self.addr(), Duration::from_millis(200))
            {
                let _ = c.set_timeout(Duration::from_secs(2));
                if let Ok(Value::Simple(s)) = c.cmd(&["PING"]) {
                    if s == "PONG" {
                        // Make sure we are not talking to somebody else's server.
                        let info = c.cmd(&["INFO", "server"]).map(|v| v.to_text());
                        let ours = info
                            .as_deref()
                            .map(|i| i.contains(&format!("process_id:{pid}\r\n")))
                            .unwrap_or(false);
                        if ours {
                            return Ok(());
                        }
                    }
                }
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "redis-server on port {} not ready after {:?}; log:\n{}",
                    self.port,
                    READY_TIMEOUT,
                    self.log_tail(30)
                ));
            }
            thread::sleep(POLL);
        }
    }

    /// `127.0.0.1:PORT`
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's working directory (holds nodes.conf and redis.log).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("redis.log")
    }

    /// The last `n` lines of the server log (for panic messages).
    pub fn log_tail(&self, n: usize) -> String {
        let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// Child PID while running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// Whether the process is still alive (reaps it if it exited).
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => match c.try_wait() {
                Ok(None) => true,
                _ => {
                    self.child = None;
                    false
                }
            },
            None => false,
        }
    }

    /// SIGKILL the process and reap it. Idempotent.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Kill (if running) and start again on the same port with the same dir,
    /// so a cluster node comes back with its nodes.conf (same node id, same slots).
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match self.spawn_and_wait() {
                Ok(()) => return,
                Err(e) if e.contains("in use") && Instant::now() < deadline => {
                    thread::sleep(Duration::from_millis(100));
                }
                Err(e) => panic!("restart of redis-server on port {} failed: {e}", self.port),
            }
        }
    }

    /// A new plain connection to this server.
    pub fn client(&self) -> RespClient {
        RespClient::connect(self.addr())
            .unwrap_or_else(|e| panic!("connect to redis-server {}: {e}", self.addr()))
    }

    /// Run one command on a fresh connection; panics on I/O errors (error replies are returned).
    pub fn cmd(&self, args: &[&str]) -> Value {
        self.client().q(args)
    }

    /// Run one command and render the reply as text (see [`Value::to_text`]).
    pub fn cli(&self, args: &[&str]) -> String {
        self.cmd(args).to_text()
    }

    /// `INFO <section>` parsed into `field -> value`.
    pub fn info_field(&self, section: &str, field: &str) -> Option<String> {
        let info = self.cli(&["INFO", section]);
        info.lines().find_map(|l| {
            l.strip_prefix(field)
                .and_then(|rest| rest.strip_prefix(':'))
                .map(|v| v.trim().to_string())
        })
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}
