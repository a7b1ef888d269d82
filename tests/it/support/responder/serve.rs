//! The responder's nodes on the network: one listener per node of the model that is not a real
//! redis-server, each answering what redcar asks a cluster node outside of data commands.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::model::Model;
use super::replies;

/// redcar's digest script (`src/cluster/change_check.rs`), as `EVAL` sends it.
pub const SCRIPT: &str = "local t = string.gsub('\\n' .. redis.call('CLUSTER', 'NODES'), '\\n(%x+ %S+ %S+ %S+) %d+ %d+', '\\n%1')\nreturn redis.sha1hex(t)\n";

/// What one node saw.
#[derive(Debug, Default)]
pub struct Counters {
    pub connections: AtomicU64,
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    /// Commands by name (`CLUSTER SHARDS`, `EVALSHA`, ...).
    pub commands: Mutex<HashMap<String, u64>>,
}

impl Counters {
    pub fn count(&self, name: &str) -> u64 {
        let commands = self.commands.lock().unwrap_or_else(|e| e.into_inner());
        commands.get(name).copied().unwrap_or(0)
    }

    pub fn total(&self) -> u64 {
        let commands = self.commands.lock().unwrap_or_else(|e| e.into_inner());
        commands.values().sum()
    }
}

/// State shared by every listener.
pub struct Shared {
    pub model: Mutex<Model>,
    /// By node address.
    pub counters: HashMap<String, Arc<Counters>>,
    /// Nodes that have the script cached (EVAL ran there once).
    pub scripts: Mutex<Vec<String>>,
}

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Accepts connections on `listener` for the node `addr` until the runtime stops.
pub async fn listen(listener: TcpListener, addr: String, shared: Arc<Shared>) {
    while let Ok((socket, _)) = listener.accept().await {
        let shared = shared.clone();
        let addr = addr.clone();
        tokio::spawn(async move { serve(socket, addr, shared).await });
    }
}

async fn serve(mut socket: TcpStream, addr: String, shared: Arc<Shared>) {
    let counters = shared.counters.get(&addr).cloned().unwrap_or_default();
    counters.connections.fetch_add(1, Ordering::Relaxed);
    let _ = socket.set_nodelay(true);
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        let n = match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        counters.bytes_in.fetch_add(n as u64, Ordering::Relaxed);
        buf.extend_from_slice(&chunk[..n]);
        let mut out = Vec::new();
        while let Some((args, used)) = parse_command(&buf) {
            buf.drain(..used);
            let name = command_name(&args);
            {
                let mut commands = counters.commands.lock().unwrap_or_else(|e| e.into_inner());
                *commands.entry(name.clone()).or_insert(0) += 1;
            }
            out.extend_from_slice(answer(&shared, &addr, &name, &args).as_bytes());
        }
        if out.is_empty() {
            continue;
        }
        counters
            .bytes_out
            .fetch_add(out.len() as u64, Ordering::Relaxed);
        if socket.write_all(&out).await.is_err() {
            return;
        }
    }
}

/// `CLUSTER SHARDS`, `EVALSHA`, `PING`: the command and, for `CLUSTER`, its subcommand.
fn command_name(args: &[Vec<u8>]) -> String {
    let word = |i: usize| {
        args.get(i)
            .map(|a| String::from_utf8_lossy(a).to_ascii_uppercase())
            .unwrap_or_default()
    };
    match word(0).as_str() {
        "CLUSTER" | "CLIENT" | "SCRIPT" | "CONFIG" => format!("{} {}", word(0), word(1)),
        other => other.to_string(),
    }
}

fn answer(shared: &Shared, addr: &str, name: &str, args: &[Vec<u8>]) -> String {
    let model = shared.model.lock().unwrap_or_else(|e| e.into_inner());
    let Some(me) = model.by_addr(addr).map(|n| n.id.clone()) else {
        return "-ERR this node was forgotten\r\n".to_string();
    };
    let now = now_ms();
    match name {
        "CLUSTER SHARDS" => replies::shards(&model),
        "CLUSTER SLOTS" => replies::slots(&model),
        "CLUSTER NODES" => replies::nodes(&model, &me, now),
        "CLUSTER INFO" => replies::info(&model, &me, now),
        "CLUSTER MYID" => format!("${}\r\n{me}\r\n", me.len()),
        "EVALSHA" | "EVAL" => {
            let script = args.get(1).map(|a| String::from_utf8_lossy(a).into_owned());
            let mut cached = shared.scripts.lock().unwrap_or_else(|e| e.into_inner());
            let known = cached.iter().any(|a| a == addr);
            match (name, script.as_deref()) {
                ("EVAL", Some(SCRIPT)) => cached.push(addr.to_string()),
                ("EVALSHA", Some(sha)) if known && sha == script_sha() => {}
                ("EVALSHA", _) => {
                    return "-NOSCRIPT No matching script. Please use EVAL.\r\n".to_string()
                }
                _ => return "-ERR the responder runs redcar's digest script only\r\n".to_string(),
            }
            let digest = replies::digest(&replies::nodes_text(&model, &me, now));
            format!("$40\r\n{digest}\r\n")
        }
        "PING" => "+PONG\r\n".to_string(),
        "READONLY" | "READWRITE" | "AUTH" | "CLIENT SETNAME" | "ASKING" => "+OK\r\n".to_string(),
        "COMMAND" => "*0\r\n".to_string(),
        "INFO" => {
            let role = if model.by_addr(addr).is_some_and(|n| n.is_primary()) {
                "role:master\r\nconnected_slaves:0\r\n"
            } else {
                "role:slave\r\nmaster_link_status:up\r\nmaster_sync_in_progress:0\r\n"
            };
            let text = format!("# Replication\r\n{role}");
            format!("${}\r\n{text}\r\n", text.len())
        }
        other => format!("-ERR the responder's node {addr} serves no data ({other})\r\n"),
    }
}

pub fn script_sha() -> String {
    format!("{:x}", <sha1::Sha1 as sha1::Digest>::digest(SCRIPT))
}

/// One RESP command (an array of bulk strings) from the front of `buf`, and its length.
fn parse_command(buf: &[u8]) -> Option<(Vec<Vec<u8>>, usize)> {
    let line = |at: usize| -> Option<(&[u8], usize)> {
        let end = buf.get(at..)?.windows(2).position(|w| w == b"\r\n")? + at;
        Some((&buf[at..end], end + 2))
    };
    let (header, mut at) = line(0)?;
    let count: usize = std::str::from_utf8(header.strip_prefix(b"*")?)
        .ok()?
        .parse()
        .ok()?;
    let mut args = Vec::with_capacity(count);
    for _ in 0..count {
        let (len, next) = line(at)?;
        let len: usize = std::str::from_utf8(len.strip_prefix(b"$")?)
            .ok()?
            .parse()
            .ok()?;
        let data = buf.get(next..next + len)?;
        buf.get(next + len..next + len + 2)?;
        args.push(data.to_vec());
        at = next + len + 2;
    }
    Some((args, at))
}
