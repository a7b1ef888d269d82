//! A latency-adding TCP relay: the "simulated data-centre network" of redcar's connection
//! benchmarks (bench/connections.sh).
//!
//! ```text
//! relay [--delay-us 250] [--no-handshake] LISTEN=TARGET...
//!     LISTEN, TARGET: PORT (on 127.0.0.1) or IP:PORT
//! ```
//!
//! Every accepted connection is forwarded to its TARGET, and every chunk read in either direction
//! is written to the other side `--delay-us` later (one way; a round trip costs twice that).
//! With `--delay-us 0` there is no delay line: bytes are pumped straight through, the least work
//! a proxy hop can do (`make bench` measures that as its hop floor).
//! Chunks are queued with their due time (`delay.rs`), so order and throughput are kept: a
//! pipeline of chunks is delayed once, not once per chunk.
//!
//! A real network also charges a round trip for the TCP handshake, which a relay on loopback
//! cannot delay (the kernel answers the SYN at once). So, unless `--no-handshake`, nothing
//! crosses a new connection before one round trip (2 × delay) after it was accepted: the first
//! reply to a fresh connection costs two round trips, as it would over a network.

mod delay;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::unbounded_channel;
use tokio::sync::Semaphore;

use delay::{due_at, DelayLine};

/// What travels through the delay line: a chunk, or the end of one direction (half-close).
enum Chunk {
    Data(Vec<u8>),
    Eof,
}

/// Bytes one direction may have in the delay line before it stops reading (back-pressure).
const MAX_IN_FLIGHT: usize = 4 << 20;
const READ_BUF: usize = 64 << 10;

struct Config {
    delay: Duration,
    handshake: bool,
    maps: Vec<(SocketAddr, SocketAddr)>,
}

fn usage() -> ! {
    eprintln!("usage: relay [--delay-us MICROS] [--no-handshake] LISTEN=TARGET...");
    eprintln!("       LISTEN, TARGET: PORT (127.0.0.1) or IP:PORT");
    std::process::exit(2)
}

fn parse_addr(s: &str) -> Option<SocketAddr> {
    if let Ok(port) = s.parse::<u16>() {
        return Some(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    s.parse().ok()
}

fn parse_args() -> Config {
    let mut cfg = Config {
        delay: Duration::from_micros(250),
        handshake: true,
        maps: Vec::new(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--delay-us" => {
                let us = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| usage());
                cfg.delay = Duration::from_micros(us);
            }
            "--no-handshake" => cfg.handshake = false,
            "-h" | "--help" => usage(),
            map => {
                let Some((l, t)) = map.split_once('=') else {
                    usage()
                };
                match (parse_addr(l), parse_addr(t)) {
                    (Some(l), Some(t)) => cfg.maps.push((l, t)),
                    _ => usage(),
                }
            }
        }
    }
    if cfg.maps.is_empty() {
        usage();
    }
    cfg
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> io::Result<()> {
    let cfg = parse_args();
    let line: DelayLine<Chunk> = DelayLine::start()?;
    for &(listen, target) in &cfg.maps {
        let listener = TcpListener::bind(listen).await.map_err(|e| {
            io::Error::new(e.kind(), format!("relay: cannot listen on {listen}: {e}"))
        })?;
        eprintln!(
            "relay: {listen} -> {target}, {} µs each way",
            cfg.delay.as_micros()
        );
        let line = line.clone();
        let (delay, handshake) = (cfg.delay, cfg.handshake);
        tokio::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((client, _)) => {
                        let line = line.clone();
                        tokio::spawn(async move {
                            let _ = serve(client, target, line, delay, handshake).await;
                        });
                    }
                    Err(e) => {
                        eprintln!("relay: accept on {listen}: {e}");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
        });
    }
    tokio::signal::ctrl_c().await?;
    Ok(())
}

/// One relayed connection: both directions until both are closed, or either fails.
async fn serve(
    client: TcpStream,
    target: SocketAddr,
    line: DelayLine<Chunk>,
    delay: Duration,
    handshake: bool,
) -> io::Result<()> {
    let accepted = Instant::now();
    let ready_at = if handshake {
        accepted + 2 * delay
    } else {
        accepted
    };
    let mut server = TcpStream::connect(target).await?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    if delay.is_zero() {
        // No delay: a plain byte pump, the least work any proxy hop can do.
        let mut client = client;
        tokio::io::copy_bidirectional(&mut client, &mut server).await?;
        return Ok(());
    }
    let (client_r, client_w) = client.into_split();
    let (server_r, server_w) = server.into_split();
    let up = direction(client_r, server_w, line.clone(), delay, ready_at);
    let down = direction(server_r, client_w, line, delay, ready_at);
    tokio::pin!(up, down);
    // An error in one direction ends both (dropping the halves closes the sockets).
    tokio::select! {
        r = &mut up => { r?; down.await }
        r = &mut down => { r?; up.await }
    }
}

/// Reads chunks from `from`, and writes each to `to` one delay later.
async fn direction(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    line: DelayLine<Chunk>,
    delay: Duration,
    ready_at: Instant,
) -> io::Result<()> {
    let (tx, mut rx) = unbounded_channel();
    let budget = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let reader = {
        let budget = budget.clone();
        async move {
            let mut last = None;
            let mut buf = vec![0u8; READ_BUF];
            loop {
                let n = from.read(&mut buf).await?;
                let due = due_at(Instant::now(), ready_at, last, delay);
                last = Some(due);
                if n == 0 {
                    line.push(due, Chunk::Eof, &tx);
                    return Ok::<_, io::Error>(());
                }
                // READ_BUF fits in u32; the permits come back once the chunk is written.
                budget
                    .acquire_many(n as u32)
                    .await
                    .map_err(|_| io::Error::other("closed"))?
                    .forget();
                line.push(due, Chunk::Data(buf[..n].to_vec()), &tx);
            }
        }
    };
    let writer = async move {
        while let Some(chunk) = rx.recv().await {
            match chunk {
                Chunk::Data(bytes) => {
                    to.write_all(&bytes).await?;
                    budget.add_permits(bytes.len());
                }
                Chunk::Eof => break,
            }
        }
        to.shutdown().await
    };
    tokio::try_join!(reader, writer).map(|_| ())
}
