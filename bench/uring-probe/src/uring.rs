//! uring mode: io_uring through the `io-uring` crate. Per turn: ONE `io_uring_enter`
//! (`submit_and_wait(1)`) that submits the turn's SENDs and re-armed RECVs and waits for
//! completions. Accept is multishot; receives are multishot, selecting buffers from a registered
//! provided-buffer ring (`--uring-recv multi`, the default), or single-shot into each
//! connection's own buffer (`--uring-recv single`). One SEND in flight per socket (order).
//!
//! `unsafe` is needed where the kernel reads or writes our memory outside Rust's view: pushing an
//! SQE (its buffer must outlive the operation), the buffer ring (shared with the kernel), and
//! taking ownership of the descriptor an ACCEPT returns.
#![allow(unsafe_code)]

use std::alloc::{alloc_zeroed, Layout};
use std::collections::HashMap;
use std::io;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd};
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::{cqueue, opcode, squeue, types, IoUring};

use crate::core::{Core, UPSTREAM};
use crate::{Args, RecvKind, UringFlags};

const K_ACCEPT: u64 = 1;
const K_RECV: u64 = 2;
const K_SEND: u64 = 3;
const fn ud(kind: u64, id: u64) -> u64 {
    kind << 56 | id
}

const BGID: u16 = 1;
const NBUF: u16 = 512; // a power of two, as the kernel requires
const BUF_LEN: usize = 16 * 1024;
const SINGLE_BUF_LEN: usize = 64 * 1024;

/// A provided-buffer ring (IORING_REGISTER_PBUF_RING): NBUF entries naming NBUF buffers of
/// BUF_LEN bytes. The kernel takes a buffer per multishot RECV completion; we give it back
/// (`give`) once its bytes are parsed, and `publish` the new tail before the next submit.
struct BufRing {
    ring: *mut types::BufRingEntry,
    bufs: *mut u8,
    tail: u16,
}

impl BufRing {
    fn new() -> Self {
        let layout = Layout::from_size_align(usize::from(NBUF) * size_of::<types::BufRingEntry>(), 4096)
            .expect("valid layout");
        // SAFETY: non-zero size. Both allocations are leaked on purpose: the kernel may write
        // into them until the ring is torn down (asynchronously), and the process ends then.
        let ring = unsafe { alloc_zeroed(layout) }.cast::<types::BufRingEntry>();
        assert!(!ring.is_null(), "out of memory");
        let bufs = Box::leak(vec![0u8; usize::from(NBUF) * BUF_LEN].into_boxed_slice()).as_mut_ptr();
        let mut br = BufRing { ring, bufs, tail: 0 };
        for bid in 0..NBUF {
            br.give(bid);
        }
        br.publish();
        br
    }

    /// Queues buffer `bid` back to the kernel (visible after `publish`).
    fn give(&mut self, bid: u16) {
        // SAFETY: the index is masked into the ring; the entry is not one the kernel may be
        // reading (it reads only entries below the published tail that it has not consumed).
        unsafe {
            let e = &mut *self.ring.add(usize::from(self.tail & (NBUF - 1)));
            e.set_addr(self.bufs.add(usize::from(bid) * BUF_LEN) as u64);
            e.set_len(BUF_LEN as u32);
            e.set_bid(bid);
        }
        self.tail = self.tail.wrapping_add(1);
    }

    fn publish(&self) {
        // SAFETY: the tail is the u16 the kernel reads in the ring's first entry; it is shared
        // with the kernel, so it is written atomically with release ordering (after the entries).
        unsafe { (*types::BufRingEntry::tail(self.ring).cast::<AtomicU16>()).store(self.tail, Ordering::Release) };
    }

    /// The bytes the kernel received into buffer `bid`.
    fn data(&self, bid: u16, len: usize) -> &[u8] {
        assert!(bid < NBUF && len <= BUF_LEN);
        // SAFETY: in bounds (checked); the kernel finished writing it (we hold its CQE) and will
        // not reuse it before we `give` it back.
        unsafe { std::slice::from_raw_parts(self.bufs.add(usize::from(bid) * BUF_LEN), len) }
    }
}

struct Conn {
    sock: TcpStream,
    /// The bytes of the SEND in flight; not touched until its completion.
    inflight: Vec<u8>,
    sent: usize,
    sending: bool,
    recv_armed: bool,
    closing: bool,
    /// Single-shot mode's receive buffer; not touched while a RECV is in flight.
    rbuf: Vec<u8>,
}

impl Conn {
    fn new(sock: TcpStream, recv: RecvKind) -> Self {
        let rbuf = if recv == RecvKind::Single { vec![0; SINGLE_BUF_LEN] } else { Vec::new() };
        Conn { sock, inflight: Vec::new(), sent: 0, sending: false, recv_armed: false, closing: false, rbuf }
    }
    fn fd(&self) -> types::Fd {
        types::Fd(self.sock.as_raw_fd())
    }
}

fn push(ring: &mut IoUring, e: &squeue::Entry) -> Result<(), String> {
    loop {
        // SAFETY: every buffer an SQE names (Conn::inflight, Conn::rbuf, the buffer ring) stays
        // alive and unmoved until its completion: a Conn is dropped only when no RECV or SEND of
        // it is in flight (`maybe_free`), and the buffer ring is never freed.
        if unsafe { ring.submission().push(e) }.is_ok() {
            return Ok(());
        }
        ring.submit().map_err(|e| format!("io_uring_enter: {e}"))?;
    }
}

fn arm_recv(ring: &mut IoUring, id: u64, c: &mut Conn, recv: RecvKind) -> Result<(), String> {
    let e = match recv {
        RecvKind::Multi => opcode::RecvMulti::new(c.fd(), BGID).build(),
        RecvKind::Single => opcode::Recv::new(c.fd(), c.rbuf.as_mut_ptr(), c.rbuf.len() as u32).build(),
    };
    c.recv_armed = true;
    push(ring, &e.user_data(ud(K_RECV, id)))
}

fn push_send(ring: &mut IoUring, id: u64, c: &Conn) -> Result<(), String> {
    let rest = &c.inflight[c.sent..];
    let e = opcode::Send::new(c.fd(), rest.as_ptr(), rest.len() as u32).flags(libc::MSG_NOSIGNAL).build();
    push(ring, &e.user_data(ud(K_SEND, id)))
}

/// Starts a SEND of `out` unless one is in flight (then `out` waits for the next turn).
fn flush(ring: &mut IoUring, id: u64, c: &mut Conn, out: &mut Vec<u8>) -> Result<(), String> {
    if c.sending || c.closing || out.is_empty() {
        return Ok(());
    }
    c.inflight.clear();
    std::mem::swap(&mut c.inflight, out);
    c.sent = 0;
    c.sending = true;
    push_send(ring, id, c)
}

/// Stops a client: no more requests from it, no more replies to it; freed once idle.
fn close_client(conns: &mut HashMap<u64, Conn>, core: &mut Core, id: u64) {
    core.remove_client(id);
    if let Some(c) = conns.get_mut(&id) {
        if !c.closing {
            c.closing = true;
            let _ = c.sock.shutdown(Shutdown::Both); // ends an armed RECV with 0
        }
        if !c.sending && !c.recv_armed {
            conns.remove(&id);
        }
    }
}

pub fn run(args: &Args) -> Result<(), String> {
    let listener = TcpListener::bind(args.listen).map_err(|e| format!("listen {}: {e}", args.listen))?;
    let up = TcpStream::connect(args.upstream).map_err(|e| format!("upstream {}: {e}", args.upstream))?;
    up.set_nodelay(true).map_err(|e| e.to_string())?;

    let mut b = IoUring::builder();
    match args.flags {
        UringFlags::Plain => {}
        UringFlags::Coop => {
            b.setup_coop_taskrun().setup_single_issuer();
        }
        UringFlags::Defer => {
            b.setup_defer_taskrun().setup_single_issuer();
        }
    }
    b.setup_cqsize(8192);
    let mut ring = b.build(1024).map_err(|e| format!("io_uring_setup ({:?}): {e}", args.flags))?;
    let p = ring.params();
    eprintln!(
        "uring-probe: uring mode on {} -> {}: flags {:?}, recv {:?}; kernel features: fast_poll {} nodrop {} ext_arg {} submit_stable {} recvsend_bundle {}",
        args.listen,
        args.upstream,
        args.flags,
        args.recv,
        p.is_feature_fast_poll(),
        p.is_feature_nodrop(),
        p.is_feature_ext_arg(),
        p.is_feature_submit_stable(),
        p.is_feature_recvsend_bundle(),
    );
    let mut br = None;
    if args.recv == RecvKind::Multi {
        let r = BufRing::new();
        // SAFETY: the ring memory is page-aligned, NBUF entries long, and never freed.
        unsafe { ring.submitter().register_buf_ring_with_flags(r.ring as u64, NBUF, BGID, 0) }
            .map_err(|e| format!("IORING_REGISTER_PBUF_RING: {e} (try --uring-recv single)"))?;
        br = Some(r);
    }

    let mut core = Core::default();
    let mut conns: HashMap<u64, Conn> = HashMap::new();
    let mut upc = Conn::new(up, args.recv);
    arm_recv(&mut ring, UPSTREAM, &mut upc, args.recv)?;
    conns.insert(UPSTREAM, upc);
    let accept = opcode::AcceptMulti::new(types::Fd(listener.as_raw_fd())).build().user_data(ud(K_ACCEPT, 0));
    push(&mut ring, &accept)?;

    let mut next_id = 1u64;
    let mut cqes: Vec<(u64, i32, u32)> = Vec::with_capacity(1024);
    let mut dirty = Vec::new();
    loop {
        if let Some(br) = &br {
            br.publish();
        }
        match ring.submit_and_wait(1) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {} // CQ backed up: drain it
            Err(e) => return Err(format!("io_uring_enter: {e}")),
        }
        cqes.clear();
        cqes.extend(ring.completion().map(|c| (c.user_data(), c.result(), c.flags())));
        for &(udata, res, flags) in &cqes {
            let (kind, id) = (udata >> 56, udata & ((1 << 56) - 1));
            match kind {
                K_ACCEPT => {
                    if res < 0 {
                        return Err(format!("multishot accept: {}", io::Error::from_raw_os_error(-res)));
                    }
                    // SAFETY: a successful ACCEPT returns a new descriptor that nobody else owns.
                    let s = unsafe { TcpStream::from_raw_fd(res) };
                    s.set_nodelay(true).map_err(|e| e.to_string())?;
                    let cid = next_id;
                    next_id += 1;
                    let mut c = Conn::new(s, args.recv);
                    arm_recv(&mut ring, cid, &mut c, args.recv)?;
                    conns.insert(cid, c);
                    core.add_client(cid);
                    if !cqueue::more(flags) {
                        push(&mut ring, &accept)?;
                    }
                }
                K_RECV => {
                    let bid = cqueue::buffer_select(flags);
                    let Some(c) = conns.get_mut(&id) else { continue };
                    let mut failed = false;
                    if res > 0 && !c.closing {
                        let data = match (&br, bid) {
                            (Some(br), Some(bid)) => br.data(bid, res as usize),
                            (None, _) => &c.rbuf[..res as usize],
                            (Some(_), None) => return Err("multishot RECV completed without a buffer".into()),
                        };
                        if id == UPSTREAM {
                            core.upstream_data(data)?;
                        } else {
                            failed = core.client_data(id, data).is_err();
                        }
                    }
                    if let (Some(br), Some(bid)) = (&mut br, bid) {
                        br.give(bid);
                    }
                    // Still armed while the kernel says MORE; re-arm after data or ENOBUFS.
                    let retry = res > 0 || res == -libc::ENOBUFS || res == -libc::EINTR || res == -libc::EAGAIN;
                    if !cqueue::more(flags) {
                        c.recv_armed = false;
                        if retry && !c.closing && !failed {
                            core.rearms += 1;
                            arm_recv(&mut ring, id, c, args.recv)?;
                        }
                    }
                    if id == UPSTREAM && !retry {
                        return Err(format!("upstream closed (recv {res})"));
                    }
                    if failed || (!retry && !cqueue::more(flags)) || (c.closing && !c.recv_armed) {
                        close_client(&mut conns, &mut core, id);
                    }
                }
                K_SEND => {
                    let Some(c) = conns.get_mut(&id) else { continue };
                    if res < 0 {
                        if id == UPSTREAM {
                            return Err(format!("upstream send: {}", io::Error::from_raw_os_error(-res)));
                        }
                        c.sending = false;
                        close_client(&mut conns, &mut core, id);
                        continue;
                    }
                    c.sent += res as usize;
                    if c.sent < c.inflight.len() {
                        push_send(&mut ring, id, c)?;
                    } else {
                        c.sending = false;
                        if c.closing {
                            close_client(&mut conns, &mut core, id);
                        } else {
                            core.mark_dirty(id); // replies that came meanwhile go next
                        }
                    }
                }
                _ => return Err(format!("unknown completion {udata:#x}")),
            }
        }
        // Flush: all requests of this turn in one SEND, each client's replies in one SEND;
        // they are submitted together by the next submit_and_wait.
        if let Some(c) = conns.get_mut(&UPSTREAM) {
            flush(&mut ring, UPSTREAM, c, &mut core.up_out)?;
        }
        core.take_dirty(&mut dirty);
        for &id in &dirty {
            let (Some(c), Some(out)) = (conns.get_mut(&id), core.out(id)) else { continue };
            flush(&mut ring, id, c, out)?;
        }
        core.end_turn();
    }
}
