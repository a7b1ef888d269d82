//! epoll mode: mio (edge-triggered epoll), plain read/write system calls.
//! Per turn: one epoll_wait; per readable socket reads until a short read or EAGAIN; then one
//! write to the upstream and one write per client with replies.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::TcpStream as StdStream;

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};

use crate::core::{Core, UPSTREAM};
use crate::Args;

const LISTENER: Token = Token(usize::MAX);

enum ReadEnd {
    Open,
    Closed,
}

/// Reads until a short read, EAGAIN or end of stream, feeding every chunk to `sink`.
fn read_all(
    s: &mut TcpStream,
    buf: &mut [u8],
    mut sink: impl FnMut(&[u8]) -> Result<(), String>,
) -> Result<ReadEnd, String> {
    loop {
        match s.read(buf) {
            Ok(0) => return Ok(ReadEnd::Closed),
            Ok(n) => {
                sink(&buf[..n])?;
                if n < buf.len() {
                    return Ok(ReadEnd::Open);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(ReadEnd::Open),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Ok(ReadEnd::Closed),
        }
    }
}

/// Writes as much of `out` as the socket takes (one write unless interrupted); keeps the rest.
fn write_some(s: &mut TcpStream, out: &mut Vec<u8>) -> io::Result<()> {
    while !out.is_empty() {
        match s.write(out) {
            Ok(n) if n == out.len() => out.clear(),
            Ok(n) => {
                out.drain(..n);
                return Ok(()); // socket full: EPOLLOUT will tell when to go on
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

pub fn run(args: &Args) -> Result<(), String> {
    let mut poll = Poll::new().map_err(|e| format!("epoll: {e}"))?;
    let mut listener =
        TcpListener::bind(args.listen).map_err(|e| format!("listen {}: {e}", args.listen))?;
    let up = StdStream::connect(args.upstream).map_err(|e| format!("upstream {}: {e}", args.upstream))?;
    up.set_nodelay(true).map_err(|e| e.to_string())?;
    up.set_nonblocking(true).map_err(|e| e.to_string())?;
    let mut up = TcpStream::from_std(up);
    let rw = Interest::READABLE | Interest::WRITABLE;
    poll.registry().register(&mut listener, LISTENER, Interest::READABLE).map_err(|e| e.to_string())?;
    poll.registry().register(&mut up, Token(UPSTREAM as usize), rw).map_err(|e| e.to_string())?;
    eprintln!("uring-probe: epoll mode on {} -> {}", args.listen, args.upstream);

    let mut core = Core::default();
    let mut clients: HashMap<u64, TcpStream> = HashMap::new();
    let mut next_id = 1u64;
    let mut events = Events::with_capacity(1024);
    let mut rbuf = vec![0u8; 64 * 1024];
    let mut dirty = Vec::new();
    let mut closed = Vec::new();
    loop {
        match poll.poll(&mut events, None) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("epoll_wait: {e}")),
        }
        for ev in events.iter() {
            match ev.token() {
                LISTENER => loop {
                    match listener.accept() {
                        Ok((mut s, _)) => {
                            s.set_nodelay(true).map_err(|e| e.to_string())?;
                            let id = next_id;
                            next_id += 1;
                            poll.registry().register(&mut s, Token(id as usize), rw).map_err(|e| e.to_string())?;
                            clients.insert(id, s);
                            core.add_client(id);
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) => return Err(format!("accept: {e}")),
                    }
                },
                Token(0) => {
                    if ev.is_readable() {
                        if let ReadEnd::Closed = read_all(&mut up, &mut rbuf, |d| core.upstream_data(d))? {
                            return Err("upstream closed".into());
                        }
                    }
                    // Writable again: the flush below retries what is left in `up_out`.
                }
                Token(t) => {
                    let id = t as u64;
                    let Some(s) = clients.get_mut(&id) else { continue };
                    if ev.is_readable() {
                        let end = read_all(s, &mut rbuf, |d| {
                            core.client_data(id, d).map_err(|()| String::new())
                        });
                        if !matches!(end, Ok(ReadEnd::Open)) {
                            closed.push(id);
                            continue;
                        }
                    }
                    if ev.is_writable() {
                        core.mark_dirty(id);
                    }
                }
            }
        }
        for id in closed.drain(..) {
            clients.remove(&id); // drop closes the socket (and leaves epoll)
            core.remove_client(id);
        }
        // Flush: all requests of this turn in one write, then each client's replies in one.
        write_some(&mut up, &mut core.up_out).map_err(|e| format!("upstream write: {e}"))?;
        core.take_dirty(&mut dirty);
        for &id in &dirty {
            let (Some(s), Some(out)) = (clients.get_mut(&id), core.out(id)) else { continue };
            if write_some(s, out).is_err() {
                closed.push(id);
            }
        }
        core.end_turn();
    }
}
