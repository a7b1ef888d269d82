//! `SentinelSetup`: one primary, one replica (`--replicaof`) and three sentinels
//! (`redis-server <conf> --sentinel`) on free loopback ports, each in its own temp dir, with
//! short failure-detection times. Drop kills every process by PID and removes the dirs.

use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::resp_client::{RespClient, Value};
use super::server::{free_port, RedisServer};

/// The name the sentinels monitor.
pub const MASTER: &str = "mymaster";
/// How long the set-up gets to agree (sentinels discover each other every 2 s).
const READY_TIMEOUT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(50);

/// How the set-up is started.
#[derive(Clone, Debug, Default)]
pub struct SentinelOptions {
    /// `requirepass` on the sentinels (and `sentinel sentinel-pass` so they talk to each
    /// other); the data nodes stay open.
    pub sentinel_password: Option<String>,
    /// Extra `redis-server` arguments for the first primary only.
    pub primary_args: Vec<String>,
}

/// One sentinel process.
pub struct Sentinel {
    port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
    password: Option<String>,
}

/// The whole set-up. `nodes[0]` starts as the primary, `nodes[1]` as its replica.
pub struct SentinelSetup {
    nodes: Vec<RedisServer>,
    sentinels: Vec<Sentinel>,
}

// === impl SentinelSetup ===

impl SentinelSetup {
    pub fn start() -> SentinelSetup {
        SentinelSetup::start_with(SentinelOptions::default())
    }

    pub fn start_with(options: SentinelOptions) -> SentinelSetup {
        // Replicas sync at once, and the primary pings them every second so the replication
        // offset Sentinel reports moves even when idle.
        let fast_sync = [
            "--repl-diskless-sync-delay",
            "0",
            "--repl-ping-replica-period",
            "1",
        ];
        let mut primary_args: Vec<&str> = fast_sync.to_vec();
        primary_args.extend(options.primary_args.iter().map(String::as_str));
        let primary = RedisServer::start_with(&primary_args);
        let port = primary.port().to_string();
        let mut replica_args = fast_sync.to_vec();
        replica_args.extend(["--replicaof", "127.0.0.1", &port]);
        let replica = RedisServer::start_with(&replica_args);
        let mut setup = SentinelSetup {
            nodes: vec![primary, replica],
            sentinels: Vec::new(),
        };
        setup.wait_replica_linked();
        for _ in 0..3 {
            let sentinel = Sentinel::start(setup.nodes[0].port(), &options);
            setup.sentinels.push(sentinel);
        }
        setup.wait_ready();
        setup
    }

    /// `127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3`, for `--sentinel`.
    pub fn sentinel_addrs(&self) -> String {
        let addrs: Vec<String> = self.sentinels.iter().map(Sentinel::addr).collect();
        addrs.join(",")
    }

    pub fn sentinels(&self) -> &[Sentinel] {
        &self.sentinels
    }

    /// Both data nodes (the original primary first).
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    pub fn node_by_port(&self, port: u16) -> &RedisServer {
        self.nodes
            .iter()
            .find(|n| n.port() == port)
            .unwrap_or_else(|| panic!("no data node on port {port}"))
    }

    /// SIGKILL the data node on `port` (by its PID).
    pub fn kill_node(&mut self, port: u16) {
        if let Some(node) = self.nodes.iter_mut().find(|n| n.port() == port) {
            node.kill();
        }
    }

    /// The primary's port as the first sentinel sees it.
    pub fn primary_port(&self) -> u16 {
        self.sentinels[0]
            .primary_port()
            .unwrap_or_else(|e| panic!("ask sentinel for the primary: {e}"))
    }

    /// Waits until every sentinel names a primary other than `old`, and that node says
    /// `role:master`; returns its port.
    pub fn wait_primary_changed(&self, old: u16, timeout: Duration) -> u16 {
        let deadline = Instant::now() + timeout;
        loop {
            let seen: Vec<Result<u16, String>> =
                self.sentinels.iter().map(Sentinel::primary_port).collect();
            if let Some(Ok(new)) = seen.first() {
                let agreed = seen.iter().all(|p| p.as_ref().ok() == Some(new));
                let promoted = *new != old
                    && self
                        .node_by_port(*new)
                        .info_field("replication", "role")
                        .as_deref()
                        == Some("master");
                if agreed && promoted {
                    return *new;
                }
            }
            if Instant::now() > deadline {
                panic!(
                    "sentinels did not agree on a new primary within {timeout:?}: {seen:?}; log:\n{}",
                    self.sentinels[0].log_tail(30)
                );
            }
            thread::sleep(POLL);
        }
    }

    fn wait_replica_linked(&self) {
        let deadline = Instant::now() + READY_TIMEOUT;
        while self.nodes[1]
            .info_field("replication", "master_link_status")
            .as_deref()
            != Some("up")
        {
            assert!(
                Instant::now() < deadline,
                "replica never linked; log:\n{}",
                self.nodes[1].log_tail(20)
            );
            thread::sleep(POLL);
        }
    }

    /// Every sentinel sees the replica (link ok) and reaches quorum with the others.
    fn wait_ready(&self) {
        let deadline = Instant::now() + READY_TIMEOUT;
        let replica = self.nodes[1].port().to_string();
        for sentinel in &self.sentinels {
            loop {
                let quorum = sentinel.cmd(&["SENTINEL", "CKQUORUM", MASTER]);
                let replicas = sentinel.cmd(&["SENTINEL", "REPLICAS", MASTER]);
                let ok = matches!(&quorum, Ok(Value::Simple(s)) if s.contains("3 usable"))
                    && replicas.as_ref().is_ok_and(|r| {
                        let text = r.to_text();
                        text.contains(&replica) && text.contains("ok")
                    });
                if ok {
                    break;
                }
                if Instant::now() > deadline {
                    panic!(
                        "sentinel {} not ready: {quorum:?} {replicas:?}; log:\n{}",
                        sentinel.addr(),
                        sentinel.log_tail(30)
                    );
                }
                thread::sleep(POLL);
            }
        }
    }
}

impl Drop for SentinelSetup {
    fn drop(&mut self) {
        // Sentinels first, so they do not fail anything over while the nodes go away.
        for sentinel in &mut self.sentinels {
            sentinel.kill();
        }
    }
}

// === impl Sentinel ===

impl Sentinel {
    fn start(primary_port: u16, options: &SentinelOptions) -> Sentinel {
        let mut last = String::new();
        for _ in 0..5 {
            let mut sentinel = Sentinel {
                port: free_port(),
                dir: tempfile::Builder::new()
                    .prefix("redcar-it-sentinel-")
                    .tempdir()
                    .expect("temp dir for a sentinel"),
                child: None,
                password: options.sentinel_password.clone(),
            };
            match sentinel.spawn(primary_port) {
                Ok(()) => return sentinel,
                Err(e) => last = e,
            }
        }
        panic!("could not start a sentinel: {last}");
    }

    fn config(&self, primary_port: u16) -> String {
        let dir = self.dir.path().display();
        let mut conf = format!(
            "port {port}\nbind 127.0.0.1\ndaemonize no\ndir {dir}\nlogfile {dir}/sentinel.log\n\
             sentinel resolve-hostnames no\n\
             sentinel monitor {MASTER} 127.0.0.1 {primary_port} 2\n\
             sentinel down-after-milliseconds {MASTER} 1000\n\
             sentinel failover-timeout {MASTER} 3000\n\
             sentinel parallel-syncs {MASTER} 1\n",
            port = self.port
        );
        if let Some(password) = &self.password {
            conf.push_str(&format!(
                "requirepass {password}\nsentinel sentinel-pass {password}\n"
            ));
        }
        conf
    }

    /// Writes the config (Sentinel rewrites it, so it lives in the temp dir) and waits for PING.
    fn spawn(&mut self, primary_port: u16) -> Result<(), String> {
        let path = self.dir.path().join("sentinel.conf");
        std::fs::write(&path, self.config(primary_port)).map_err(|e| e.to_string())?;
        let child = Command::new("redis-server")
            .arg(&path)
            .arg("--sentinel")
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("spawn redis-server --sentinel: {e}"))?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    self.child = None;
                    return Err(format!("sentinel exited ({status}): {}", self.log_tail(10)));
                }
            }
            if matches!(self.cmd(&["PING"]), Ok(Value::Simple(s)) if s == "PONG") {
                return Ok(());
            }
            if Instant::now() > deadline {
                self.kill();
                return Err(format!("sentinel not answering: {}", self.log_tail(10)));
            }
            thread::sleep(POLL);
        }
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// One command on a new connection (authenticated when the sentinels need it).
    pub fn cmd(&self, args: &[&str]) -> Result<Value, String> {
        let mut client = RespClient::connect_timeout(self.addr(), Duration::from_millis(500))
            .map_err(|e| e.to_string())?;
        if let Some(password) = &self.password {
            client
                .cmd(&["AUTH", password.as_str()])
                .map_err(|e| e.to_string())?;
        }
        client.cmd(args).map_err(|e| e.to_string())
    }

    /// The primary's port as this sentinel names it.
    pub fn primary_port(&self) -> Result<u16, String> {
        let reply = self.cmd(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER])?;
        let port = reply
            .as_array()
            .and_then(|a| a.get(1))
            .and_then(Value::as_str)
            .ok_or_else(|| format!("unexpected reply {reply:?}"))?;
        port.parse().map_err(|_| format!("bad port {port}"))
    }

    pub fn log_tail(&self, n: usize) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("sentinel.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// SIGKILL by PID and reap. Idempotent.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        self.kill();
    }
}
