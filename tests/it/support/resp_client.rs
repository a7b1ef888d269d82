//! A tiny synchronous RESP client over `std::net::TcpStream`.
//!
//! This is deliberately a *plain, non-cluster* client: it follows no
//! redirects and knows nothing about slots. Tests use it both to drive
//! `redis-server` nodes directly and to talk to redcar as an ordinary
//! application would.
//!
//! RESP2 replies map 1:1 onto [`Value`]. RESP3 replies (after `HELLO 3`) are
//! folded onto the same five variants so tests never fail to parse:
//! null → `Bulk(None)`, boolean → `Int(0|1)`, double/big-number/verbatim →
//! `Bulk`, map/set/push → `Array` (maps flattened as k1, v1, k2, v2, ...),
//! attributes are skipped. A client made [`typed`](RespClient::typed) keeps
//! each RESP3 type instead, as [`Value::Typed`] around the folded value, so
//! two RESP3 replies compare equal only when their types match too.

use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Default read/write timeout for every client created by [`RespClient::connect`].
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// One RESP reply.
#[derive(Clone, PartialEq, Eq)]
pub enum Value {
    /// `+OK`
    Simple(String),
    /// `-ERR ...` (the text without the leading `-`)
    Error(String),
    /// `:42`
    Int(i64),
    /// `$3\r\nfoo` / `$-1` (nil)
    Bulk(Option<Vec<u8>>),
    /// `*2\r\n...` / `*-1` (nil array)
    Array(Option<Vec<Value>>),
    /// A RESP3 type (from a [`typed`](RespClient::typed) client) around its folded value.
    Typed(Resp3, Box<Value>),
}

/// RESP3's own types, as a typed client reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resp3 {
    Null,
    Boolean,
    Double,
    BigNumber,
    Verbatim,
    Map,
    Set,
    Push,
}

impl Value {
    /// Convenience constructor for a non-nil bulk string.
    pub fn bulk(s: impl AsRef<[u8]>) -> Value {
        Value::Bulk(Some(s.as_ref().to_vec()))
    }

    /// Convenience constructor for a simple string.
    pub fn simple(s: &str) -> Value {
        Value::Simple(s.to_string())
    }

    pub fn is_error(&self) -> bool {
        matches!(self, Value::Error(_))
    }

    pub fn is_nil(&self) -> bool {
        matches!(self.folded(), Value::Bulk(None) | Value::Array(None))
    }

    /// The value without its RESP3 type.
    pub fn folded(&self) -> &Value {
        match self {
            Value::Typed(_, inner) => inner,
            other => other,
        }
    }

    /// The error text if this is an error reply.
    pub fn error(&self) -> Option<&str> {
        match self {
            Value::Error(e) => Some(e),
            _ => None,
        }
    }

    pub fn as_int(&self) -> Option<i64> {
        match self.folded() {
            Value::Int(i) => Some(*i),
            Value::Bulk(Some(b)) => std::str::from_utf8(b).ok()?.parse().ok(),
            Value::Simple(s) => s.parse().ok(),
            _ => None,
        }
    }

    /// Bytes of a simple or non-nil bulk string.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self.folded() {
            Value::Simple(s) => Some(s.as_bytes()),
            Value::Bulk(Some(b)) => Some(b),
            _ => None,
        }
    }

    /// UTF-8 view of a simple or non-nil bulk string.
    pub fn as_str(&self) -> Option<&str> {
        self.as_bytes().and_then(|b| std::str::from_utf8(b).ok())
    }

    pub fn as_array(&self) -> Option<&[Value]> {
        match self.folded() {
            Value::Array(Some(v)) => Some(v),
            _ => None,
        }
    }

    /// A readable, redis-cli-like rendering:
    /// simple/bulk → the text, nil → `(nil)`, int → the number,
    /// error → `ERR ...` (unchanged), array → elements joined with `\n`
    /// (nested arrays are rendered recursively).
    pub fn to_text(&self) -> String {
        match self {
            Value::Simple(s) => s.clone(),
            Value::Error(e) => e.clone(),
            Value::Int(i) => i.to_string(),
            Value::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
            Value::Bulk(None) | Value::Array(None) => "(nil)".to_string(),
            Value::Array(Some(items)) => items
                .iter()
                .map(Value::to_text)
                .collect::<Vec<_>>()
                .join("\n"),
            Value::Typed(_, inner) => inner.to_text(),
        }
    }
}

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Simple(s) => write!(f, "+{s}"),
            Value::Error(e) => write!(f, "-{e}"),
            Value::Int(i) => write!(f, ":{i}"),
            Value::Bulk(None) => write!(f, "(nil)"),
            Value::Bulk(Some(b)) => write!(f, "{:?}", String::from_utf8_lossy(b)),
            Value::Array(None) => write!(f, "(nil array)"),
            Value::Array(Some(items)) => f.debug_list().entries(items).finish(),
            Value::Typed(kind, inner) => write!(f, "{kind:?}({inner:?})"),
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_text())
    }
}

/// Encode one command as a RESP array of bulk strings.
pub fn encode_command<A: AsRef<[u8]>>(args: &[A]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + args.len() * 16);
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        let a = a.as_ref();
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// A blocking connection speaking RESP.
pub struct RespClient {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    /// Keep RESP3 types ([`Value::Typed`]) instead of folding them.
    typed: bool,
}

impl RespClient {
    /// Connect with a 5 s connect timeout and [`DEFAULT_TIMEOUT`] read/write timeouts.
    pub fn connect(addr: impl ToSocketAddrs) -> io::Result<RespClient> {
        RespClient::connect_timeout(addr, Duration::from_secs(5))
    }

    pub fn connect_timeout(
        addr: impl ToSocketAddrs,
        connect_timeout: Duration,
    ) -> io::Result<RespClient> {
        let mut last = io::Error::new(io::ErrorKind::NotFound, "no address resolved");
        for a in addr.to_socket_addrs()? {
            match TcpStream::connect_timeout(&a, connect_timeout) {
                Ok(stream) => {
                    stream.set_nodelay(true)?;
                    stream.set_read_timeout(Some(DEFAULT_TIMEOUT))?;
                    stream.set_write_timeout(Some(DEFAULT_TIMEOUT))?;
                    let writer = stream.try_clone()?;
                    return Ok(RespClient {
                        reader: BufReader::new(stream),
                        writer,
                        typed: false,
                    });
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// From now on RESP3 replies keep their types ([`Value::Typed`]).
    pub fn typed(mut self) -> RespClient {
        self.typed = true;
        self
    }

    /// Set the read timeout (and write timeout) for subsequent operations.
    pub fn set_timeout(&self, timeout: Duration) -> io::Result<()> {
        self.writer.set_read_timeout(Some(timeout))?;
        self.writer.set_write_timeout(Some(timeout))
    }

    /// Send one command and read one reply. Error replies are `Ok(Value::Error)`;
    /// only I/O and protocol problems are `Err`.
    pub fn cmd<A: AsRef<[u8]>>(&mut self, args: &[A]) -> io::Result<Value> {
        self.send(args)?;
        self.read_reply()
    }

    /// Like [`cmd`](Self::cmd) for `&str` arguments, panicking on I/O errors.
    pub fn q(&mut self, args: &[&str]) -> Value {
        match self.cmd(args) {
            Ok(v) => v,
            Err(e) => panic!("command {args:?} failed: {e}"),
        }
    }

    /// Write one command without reading its reply (for pipelining).
    pub fn send<A: AsRef<[u8]>>(&mut self, args: &[A]) -> io::Result<()> {
        self.writer.write_all(&encode_command(args))
    }

    /// Write raw bytes (inline commands, malformed input, partial frames...).
    pub fn send_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.writer.write_all(bytes)
    }

    /// Send all commands in one write, then read one reply per command, in order.
    pub fn pipeline<A: AsRef<[u8]>>(&mut self, cmds: &[Vec<A>]) -> io::Result<Vec<Value>> {
        let mut buf = Vec::new();
        for c in cmds {
            buf.extend_from_slice(&encode_command(c));
        }
        self.writer.write_all(&buf)?;
        (0..cmds.len()).map(|_| self.read_reply()).collect()
    }

    /// Half-close the write side (the peer sees EOF).
    pub fn shutdown_write(&self) -> io::Result<()> {
        self.writer.shutdown(std::net::Shutdown::Write)
    }

    /// The underlying stream (e.g. for peer/local addresses).
    pub fn stream(&self) -> &TcpStream {
        &self.writer
    }

    /// Read exactly one reply.
    pub fn read_reply(&mut self) -> io::Result<Value> {
        let (kind, value) = self.read_folded()?;
        Ok(match kind {
            Some(kind) if self.typed => Value::Typed(kind, Box::new(value)),
            _ => value,
        })
    }

    /// One reply folded onto the RESP2 variants, and its RESP3 type if it had one.
    fn read_folded(&mut self) -> io::Result<(Option<Resp3>, Value)> {
        loop {
            let line = self.read_line()?;
            let (kind, rest) = line.split_first().ok_or_else(|| proto("empty line"))?;
            let text = || String::from_utf8_lossy(rest).into_owned();
            let resp3 = match kind {
                b'_' => Some(Resp3::Null),
                b'#' => Some(Resp3::Boolean),
                b',' => Some(Resp3::Double),
                b'(' => Some(Resp3::BigNumber),
                b'=' => Some(Resp3::Verbatim),
                b'%' => Some(Resp3::Map),
                b'~' => Some(Resp3::Set),
                b'>' => Some(Resp3::Push),
                _ => None,
            };
            return Ok((
                resp3,
                match kind {
                    b'+' => Value::Simple(text()),
                    b'-' | b'!' => {
                        if *kind == b'!' {
                            let n = parse_int(rest)?;
                            let b = self.read_bulk_body(n)?;
                            Value::Error(String::from_utf8_lossy(&b).into_owned())
                        } else {
                            Value::Error(text())
                        }
                    }
                    b':' => Value::Int(parse_int(rest)?),
                    b'$' | b'=' => {
                        let n = parse_int(rest)?;
                        if n < 0 {
                            Value::Bulk(None)
                        } else {
                            let mut b = self.read_bulk_body(n)?;
                            if *kind == b'=' && b.len() >= 4 {
                                b.drain(..4); // "txt:" prefix of verbatim strings
                            }
                            Value::Bulk(Some(b))
                        }
                    }
                    b'*' | b'~' | b'>' => {
                        let n = parse_int(rest)?;
                        if n < 0 {
                            Value::Array(None)
                        } else {
                            let mut items = Vec::with_capacity(n.min(1 << 16) as usize);
                            for _ in 0..n {
                                items.push(self.read_reply()?);
                            }
                            Value::Array(Some(items))
                        }
                    }
                    b'%' => {
                        let n = parse_int(rest)?;
                        let mut items = Vec::with_capacity((2 * n.max(0)).min(1 << 16) as usize);
                        for _ in 0..(2 * n.max(0)) {
                            items.push(self.read_reply()?);
                        }
                        Value::Array(Some(items))
                    }
                    b'|' => {
                        // RESP3 attribute: skip it, the real reply follows.
                        let n = parse_int(rest)?;
                        for _ in 0..(2 * n.max(0)) {
                            self.read_reply()?;
                        }
                        continue;
                    }
                    b'_' => Value::Bulk(None),
                    b'#' => Value::Int(i64::from(rest == b"t")),
                    b',' | b'(' => Value::Bulk(Some(rest.to_vec())),
                    other => {
                        return Err(proto(&format!(
                            "unexpected type byte {:?} in line {:?}",
                            *other as char,
                            String::from_utf8_lossy(&line)
                        )))
                    }
                },
            ));
        }
    }

    fn read_line(&mut self) -> io::Result<Vec<u8>> {
        let mut line = Vec::new();
        let n = self.reader.read_until(b'\n', &mut line)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed by peer",
            ));
        }
        if !line.ends_with(b"\r\n") {
            return Err(proto("line not terminated by CRLF"));
        }
        line.truncate(line.len() - 2);
        Ok(line)
    }

    fn read_bulk_body(&mut self, n: i64) -> io::Result<Vec<u8>> {
        let n = usize::try_from(n).map_err(|_| proto("negative length"))?;
        let mut buf = vec![0u8; n + 2];
        self.reader.read_exact(&mut buf)?;
        if &buf[n..] != b"\r\n" {
            return Err(proto("bulk not terminated by CRLF"));
        }
        buf.truncate(n);
        Ok(buf)
    }
}

fn parse_int(b: &[u8]) -> io::Result<i64> {
    std::str::from_utf8(b)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| proto(&format!("bad integer {:?}", String::from_utf8_lossy(b))))
}

fn proto(msg: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("RESP protocol error: {msg}"),
    )
}

/// Calls of `command` in an `INFO commandstats` reply (0 when it never ran).
pub fn command_calls(info: &str, command: &str) -> u64 {
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}
