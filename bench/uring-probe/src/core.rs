//! The forwarding logic both modes share: split requests, queue them for the upstream, route
//! replies through the FIFO. No I/O here: the modes feed bytes in and take the output buffers.

use std::collections::{HashMap, VecDeque};

use crate::resp;

/// Connection id of the upstream; clients are 1, 2, ...
pub const UPSTREAM: u64 = 0;

#[derive(Default)]
struct Client {
    /// Bytes of an incomplete request frame, kept across reads.
    partial: Vec<u8>,
    /// Replies not yet handed to the I/O layer.
    out: Vec<u8>,
    /// Already in `Core::dirty`.
    dirty: bool,
}

#[derive(Default)]
pub struct Core {
    clients: HashMap<u64, Client>,
    /// (client, requests forwarded whose replies are still due), oldest first.
    fifo: VecDeque<(u64, u32)>,
    /// Bytes of an incomplete reply frame.
    up_partial: Vec<u8>,
    /// Requests not yet handed to the I/O layer.
    pub up_out: Vec<u8>,
    /// Clients with replies in `out`, in the order they got them this turn.
    dirty: Vec<u64>,
    pub commands: u64,
    /// Event-loop turns, and RECVs armed again after a multishot one ended (uring mode).
    pub turns: u64,
    pub rearms: u64,
    next_report: u64,
}

impl Core {
    /// Counts a turn; every 2^20 commands prints the counters to stderr.
    pub fn end_turn(&mut self) {
        self.turns += 1;
        if self.commands >= self.next_report {
            if self.commands > 0 {
                eprintln!(
                    "uring-probe: {} commands, {} turns ({:.2} commands/turn), {} RECV re-arms",
                    self.commands,
                    self.turns,
                    self.commands as f64 / self.turns as f64,
                    self.rearms
                );
            }
            self.next_report = self.commands + (1 << 20);
        }
    }

    pub fn add_client(&mut self, id: u64) {
        self.clients.insert(id, Client::default());
    }

    /// Forgets a client; replies still due to it are dropped when they arrive.
    pub fn remove_client(&mut self, id: u64) {
        self.clients.remove(&id);
    }

    /// Bytes read from client `id`. Err: not RESP requests, close the client.
    pub fn client_data(&mut self, id: u64, data: &[u8]) -> Result<(), ()> {
        let Some(c) = self.clients.get_mut(&id) else { return Ok(()) };
        // Parse straight from `data` when nothing is pending (the usual case): no copy.
        let joined;
        let buf: &[u8] = if c.partial.is_empty() {
            data
        } else {
            c.partial.extend_from_slice(data);
            joined = std::mem::take(&mut c.partial);
            &joined
        };
        let mut end = 0;
        let mut n = 0u32;
        while let Some(e) = resp::request(buf, end)? {
            end = e;
            n += 1;
        }
        if n > 0 {
            self.up_out.extend_from_slice(&buf[..end]);
            self.commands += u64::from(n);
            match self.fifo.back_mut() {
                Some((last, count)) if *last == id => *count += n,
                _ => self.fifo.push_back((id, n)),
            }
        }
        c.partial.clear();
        c.partial.extend_from_slice(&buf[end..]);
        Ok(())
    }

    /// Bytes read from the upstream. Err: a reply nobody asked for, or not RESP.
    pub fn upstream_data(&mut self, data: &[u8]) -> Result<(), String> {
        let joined;
        let buf: &[u8] = if self.up_partial.is_empty() {
            data
        } else {
            self.up_partial.extend_from_slice(data);
            joined = std::mem::take(&mut self.up_partial);
            &joined
        };
        let mut start = 0;
        while let Some(end) = resp::reply(buf, start).map_err(|()| "upstream sent bad RESP")? {
            let (id, count) = self.fifo.front_mut().ok_or("upstream reply without a request")?;
            if let Some(c) = self.clients.get_mut(id) {
                c.out.extend_from_slice(&buf[start..end]);
                if !c.dirty {
                    c.dirty = true;
                    self.dirty.push(*id);
                }
            }
            *count -= 1;
            if *count == 0 {
                self.fifo.pop_front();
            }
            start = end;
        }
        self.up_partial.clear();
        self.up_partial.extend_from_slice(&buf[start..]);
        Ok(())
    }

    /// Marks a client for flushing (its socket became writable again).
    pub fn mark_dirty(&mut self, id: u64) {
        if let Some(c) = self.clients.get_mut(&id) {
            if !c.dirty {
                c.dirty = true;
                self.dirty.push(id);
            }
        }
    }

    /// The clients to flush this turn (and forgets them as dirty).
    pub fn take_dirty(&mut self, into: &mut Vec<u64>) {
        into.clear();
        into.append(&mut self.dirty);
        for id in into.iter() {
            if let Some(c) = self.clients.get_mut(id) {
                c.dirty = false;
            }
        }
    }

    /// The reply buffer of a client, if it is still connected.
    pub fn out(&mut self, id: u64) -> Option<&mut Vec<u8>> {
        self.clients.get_mut(&id).map(|c| &mut c.out)
    }
}
