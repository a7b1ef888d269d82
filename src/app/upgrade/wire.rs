//! The upgrade connection between the old and the new process: frames over a Unix stream
//! socket, each carrying file descriptors (SCM_RIGHTS, through rustix: no `unsafe` here).
//!
//! ```text
//! frame = kind: u8 | descriptors: u8 | length: u32 (big-endian) | payload
//! ```
//!
//! The descriptors ride on the `sendmsg` that carries the frame's first bytes; the receiver
//! queues every descriptor it gets and hands a frame the number its header names, in order.
//! This envelope is frozen: every release that upgrades in place reads it, whatever record
//! versions it knows (`downstream::handover`), so two releases can always at least pass the
//! listeners. Control payloads are JSON objects (unknown fields ignored); a client's payload is
//! its record.

use std::collections::VecDeque;
use std::io::{self, IoSlice, IoSliceMut, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;

use rustix::net::{
    recvmsg, sendmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags,
    SendAncillaryBuffer, SendAncillaryMessage, SendFlags,
};

/// The most descriptors one frame carries (the listeners: TCP, TLS, Unix, admin).
const MAX_FDS: usize = 8;

/// The largest frame accepted: a record carries at most a partial request.
const MAX_FRAME: usize = 1 << 30;

/// Bytes before the payload: kind (1), descriptor count (1), payload length (4, big-endian).
const HEADER: usize = 6;

/// What a frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// New → old: the record versions it reads.
    Hello = 1,
    /// Old → new: the agreed version, the generation, and the listening sockets.
    Listeners = 2,
    /// New → old: config read, slot map fetched, ready to serve.
    Ready = 3,
    /// New → old: it cannot take over, and why.
    Failed = 4,
    /// Old → new: take over (with the first client id to give).
    Go = 5,
    /// Old → new: one client, its record and its socket.
    Client = 6,
    /// Old → new: no more clients; the counts.
    Done = 7,
    /// New → old: a subscribed client is subscribed again here (record version 2 on).
    Subscribed = 8,
    /// Old → new: the old process no longer writes to that subscribed client.
    Released = 9,
}

impl Kind {
    fn from_byte(byte: u8) -> Option<Kind> {
        Some(match byte {
            1 => Kind::Hello,
            2 => Kind::Listeners,
            3 => Kind::Ready,
            4 => Kind::Failed,
            5 => Kind::Go,
            6 => Kind::Client,
            7 => Kind::Done,
            8 => Kind::Subscribed,
            9 => Kind::Released,
            _ => return None,
        })
    }
}

/// One received frame.
pub(super) struct UpgradeFrame {
    /// Decoded from the first header byte; an unknown byte is an error, not a skipped frame.
    pub(super) kind: Kind,
    /// JSON for control frames, the client record for `Client`.
    pub(super) payload: Vec<u8>,
    /// As many as the header named, owned by the receiver from now on.
    pub(super) fds: Vec<OwnedFd>,
}

/// One end of the upgrade connection (blocking; run on threads of its own).
pub(super) struct Conn {
    /// Blocking; the handshake sets read timeouts on it, the hand-over clears them.
    stream: UnixStream,
    /// Bytes received but not yet returned as a frame (a frame may span several reads).
    buf: Vec<u8>,
    /// Descriptors received but not yet given to a frame, in arrival order.
    fds: VecDeque<OwnedFd>,
}

impl Conn {
    /// Both sides wrap their end the same way; the buffers start empty.
    pub(super) fn new(stream: UnixStream) -> Conn {
        Conn {
            stream,
            buf: Vec::new(),
            fds: VecDeque::new(),
        }
    }

    /// The socket, for timeouts and the peer's credentials.
    pub(super) fn socket(&self) -> &UnixStream {
        &self.stream
    }

    /// Sends one frame with `fds` (at most [`MAX_FDS`]).
    pub(super) fn send(
        &self,
        kind: Kind,
        payload: &[u8],
        fds: &[BorrowedFd<'_>],
    ) -> io::Result<()> {
        let count = u8::try_from(fds.len())
            .ok()
            .filter(|&n| usize::from(n) <= MAX_FDS)
            .ok_or_else(|| io::Error::other("too many descriptors in one frame"))?;
        let len = u32::try_from(payload.len())
            .ok()
            .filter(|&n| (n as usize) <= MAX_FRAME)
            .ok_or_else(|| io::Error::other("frame too large"))?;
        let mut header = [0u8; HEADER];
        header[0] = kind as u8;
        header[1] = count;
        header[2..].copy_from_slice(&len.to_be_bytes());
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
            return Err(io::Error::other(
                "descriptors do not fit the control buffer",
            ));
        }
        let iov = [IoSlice::new(&header), IoSlice::new(payload)];
        let sent = loop {
            match sendmsg(&self.stream, &iov, &mut control, SendFlags::NOSIGNAL) {
                Ok(sent) => break sent,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
        };
        // The descriptors went with the first bytes; the rest follows as plain data.
        let mut writer = &self.stream;
        writer.write_all(&header[sent.min(HEADER)..])?;
        writer.write_all(&payload[sent.saturating_sub(HEADER).min(payload.len())..])
    }

    /// The next frame; `None` when the peer closed the connection between frames.
    /// A frame cut short by the end of the stream is an error; descriptors that arrive ahead of
    /// their frame wait in `fds`.
    pub(super) fn recv(&mut self) -> io::Result<Option<UpgradeFrame>> {
        loop {
            if let Some(frame) = self.take_frame()? {
                return Ok(Some(frame));
            }
            if !self.fill()? {
                return match self.buf.is_empty() {
                    true => Ok(None),
                    false => Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the upgrade connection closed inside a frame",
                    )),
                };
            }
        }
    }

    /// A whole frame from the buffer, if there is one.
    fn take_frame(&mut self) -> io::Result<Option<UpgradeFrame>> {
        if self.buf.len() < HEADER {
            return Ok(None);
        }
        let kind = Kind::from_byte(self.buf[0])
            .ok_or_else(|| io::Error::other(format!("unknown frame kind {}", self.buf[0])))?;
        let count = usize::from(self.buf[1]);
        let len_bytes: [u8; 4] = [self.buf[2], self.buf[3], self.buf[4], self.buf[5]];
        let len = u32::from_be_bytes(len_bytes) as usize;
        if len > MAX_FRAME {
            return Err(io::Error::other("frame too large"));
        }
        if self.buf.len() < HEADER + len {
            return Ok(None);
        }
        if self.fds.len() < count {
            return Err(io::Error::other("a frame's descriptors did not arrive"));
        }
        let payload = self.buf[HEADER..HEADER + len].to_vec();
        self.buf.drain(..HEADER + len);
        let fds = self.fds.drain(..count).collect();
        Ok(Some(UpgradeFrame { kind, payload, fds }))
    }

    /// Reads more bytes (and descriptors); false at the end of the stream.
    fn fill(&mut self) -> io::Result<bool> {
        let mut chunk = vec![0u8; 64 * 1024];
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let received = loop {
            let mut iov = [IoSliceMut::new(&mut chunk)];
            match recvmsg(
                &self.stream,
                &mut iov,
                &mut control,
                RecvFlags::CMSG_CLOEXEC,
            ) {
                Ok(received) => break received,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
        };
        for message in control.drain() {
            if let RecvAncillaryMessage::ScmRights(fds) = message {
                self.fds.extend(fds);
            }
        }
        if received.flags.contains(ReturnFlags::CTRUNC) {
            return Err(io::Error::other(
                "descriptors were cut off (control buffer too small)",
            ));
        }
        self.buf.extend_from_slice(&chunk[..received.bytes]);
        Ok(received.bytes > 0)
    }
}

/// Borrows every descriptor of `owned`, for [`Conn::send`].
pub(super) fn borrowed(owned: &[OwnedFd]) -> Vec<BorrowedFd<'_>> {
    owned.iter().map(AsFd::as_fd).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn frames_and_their_descriptors_cross_in_order() {
        let (a, b) = UnixStream::pair().expect("pair");
        let (mut one, mut one_peer) = UnixStream::pair().expect("pair");
        let (two, mut two_peer) = UnixStream::pair().expect("pair");
        let sender = Conn::new(a);
        let mut receiver = Conn::new(b);
        sender.send(Kind::Hello, b"{}", &[]).expect("send");
        let one_fd: OwnedFd = one.try_clone().expect("dup").into();
        let two_fd: OwnedFd = two.into();
        sender
            .send(Kind::Listeners, b"{\"n\":2}", &borrowed(&[one_fd, two_fd]))
            .expect("send");
        let big = vec![7u8; 300_000];
        // Larger than the socket's buffer: sent while the receiver reads.
        let writer = std::thread::spawn({
            let big = big.clone();
            move || sender.send(Kind::Client, &big, &[]).expect("send big")
        });
        let hello = receiver.recv().expect("recv").expect("frame");
        assert_eq!(
            (hello.kind, hello.payload.as_slice(), hello.fds.len()),
            (Kind::Hello, &b"{}"[..], 0)
        );
        let listeners = receiver.recv().expect("recv").expect("frame");
        assert_eq!(listeners.kind, Kind::Listeners);
        assert_eq!(listeners.fds.len(), 2);
        // The descriptors are the same sockets: what is written through them arrives.
        let mut got_one = UnixStream::from(listeners.fds.into_iter().next().expect("fd"));
        got_one.write_all(b"x").expect("write");
        let mut byte = [0u8; 1];
        one_peer.read_exact(&mut byte).expect("read");
        assert_eq!(&byte, b"x");
        one.write_all(b"y").expect("write");
        let _ = &mut two_peer;
        let client = receiver.recv().expect("recv").expect("frame");
        assert_eq!(client.payload, big);
        writer.join().expect("writer");
        assert!(receiver.recv().expect("end").is_none());
    }
}
