//! Test helper: a throwaway local redis-server and a minimal RESP2 client to cross-check against.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A decoded RESP2 reply (enough for COMMAND GETKEYS / COMMAND INFO).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `+...`.
    Status(String),
    /// `-...`.
    Error(String),
    /// `:...`.
    Int(i64),
    /// `$...`, `None` for a null.
    Bulk(Option<Vec<u8>>),
    /// `*...`, `None` for a null.
    Array(Option<Vec<Reply>>),
}

/// A redis-server on a free port in a temp dir; killed on drop.
pub struct TestServer {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
    conn: BufReader<TcpStream>,
}

impl TestServer {
    /// Starts a server, or `None` (after printing why) when `redis-server` is unavailable,
    /// so the cross-checks degrade to a skip on machines without Redis.
    pub fn start() -> Option<Self> {
        TestServer::start_with(&[])
    }

    /// [`start`](Self::start) with extra `redis-server` arguments (e.g. `--replicaof`).
    ///
    /// The port is free when picked but may be taken before the server binds it (tests run in
    /// parallel): a server that could not bind exits, and a connection that reached another
    /// test's server is recognised by its `process_id`. Either way a new port is tried.
    pub fn start_with(extra: &[&str]) -> Option<Self> {
        for _ in 0..5 {
            match TestServer::try_start(extra) {
                Start::Up(server) => return Some(server),
                Start::PortTaken => continue,
                Start::Unavailable(why) => {
                    eprintln!("skipping: {why}");
                    return None;
                }
            }
        }
        eprintln!("skipping: five ports in a row were taken before redis-server bound them");
        None
    }

    fn try_start(extra: &[&str]) -> Start {
        let Some(dir) = tempfile::tempdir().ok() else {
            return Start::Unavailable("no temp dir");
        };
        let Some(port) = free_port() else {
            return Start::Unavailable("no free port");
        };
        let spawned = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .args(["--appendonly", "no"])
            .args(extra)
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let Ok(mut child) = spawned else {
            return Start::Unavailable("redis-server not found on PATH");
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Ok(Some(_)) = child.try_wait() {
                return Start::PortTaken; // it could not bind
            }
            if let Ok(stream) = TcpStream::connect(("127.0.0.1", port)) {
                let mut server = TestServer {
                    child,
                    port,
                    _dir: dir,
                    conn: BufReader::new(stream),
                };
                return match server.serving_pid() {
                    Some(pid) if pid == server.child.id() => Start::Up(server),
                    _ => Start::PortTaken, // another test's server (dropping ours kills it)
                };
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Start::Unavailable("redis-server did not start");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The `process_id` of the server this connection reached.
    fn serving_pid(&mut self) -> Option<u32> {
        let Reply::Bulk(Some(info)) = self.call(&[b"INFO", b"server"]) else {
            return None;
        };
        let info = String::from_utf8_lossy(&info).into_owned();
        let line = info.lines().find(|l| l.starts_with("process_id:"))?;
        line["process_id:".len()..].trim().parse().ok()
    }

    /// `127.0.0.1:PORT`
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Sends one command and reads its reply.
    pub fn call(&mut self, args: &[&[u8]]) -> Reply {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            out.extend_from_slice(arg);
            out.extend_from_slice(b"\r\n");
        }
        self.conn
            .get_mut()
            .write_all(&out)
            .expect("write to redis-server");
        read_reply(&mut self.conn)
    }

    /// Sends one command and returns its reply's bytes as the server sent them (RESP2 or RESP3,
    /// after `HELLO 3`).
    pub fn call_raw(&mut self, args: &[&str]) -> Vec<u8> {
        let request = crate::protocol::Request::from_args(args);
        self.conn
            .get_mut()
            .write_all(request.raw())
            .expect("write to redis-server");
        let limits = crate::protocol::Limits::default();
        let mut reply = Vec::new();
        loop {
            let framed = crate::protocol::reply_frame_len(&reply, &limits).expect("a reply");
            if let Some(len) = framed {
                assert_eq!(len, reply.len(), "one reply to one command");
                return reply;
            }
            let read = self.conn.fill_buf().expect("read from redis-server");
            assert!(!read.is_empty(), "redis-server closed the connection");
            let n = read.len();
            reply.extend_from_slice(read);
            self.conn.consume(n);
        }
    }
}

/// How one attempt to start a server went.
enum Start {
    Up(TestServer),
    /// The port was taken meanwhile: try another.
    PortTaken,
    /// No server can be had here (why): the cross-checks are skipped.
    Unavailable(&'static str),
}

/// A port free right now (it may be taken again before it is used).
fn free_port() -> Option<u16> {
    Some(
        TcpListener::bind("127.0.0.1:0")
            .ok()?
            .local_addr()
            .ok()?
            .port(),
    )
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn read_line(conn: &mut BufReader<TcpStream>) -> String {
    let mut line = String::new();
    conn.read_line(&mut line).expect("read from redis-server");
    line.trim_end_matches("\r\n").to_owned()
}

fn read_reply(conn: &mut BufReader<TcpStream>) -> Reply {
    let line = read_line(conn);
    let (kind, rest) = line.split_at(1);
    let len = || rest.parse::<i64>().expect("length");
    match kind {
        "+" => Reply::Status(rest.to_owned()),
        "-" => Reply::Error(rest.to_owned()),
        ":" => Reply::Int(len()),
        "$" if len() < 0 => Reply::Bulk(None),
        "$" => {
            let mut buf = vec![0; len() as usize + 2];
            conn.read_exact(&mut buf).expect("bulk");
            buf.truncate(buf.len() - 2);
            Reply::Bulk(Some(buf))
        }
        "*" if len() < 0 => Reply::Array(None),
        "*" => Reply::Array(Some((0..len()).map(|_| read_reply(conn)).collect())),
        other => panic!("unexpected RESP type {other:?}"),
    }
}
