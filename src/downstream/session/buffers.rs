//! A session's input and output bytes, lent from a per-thread pool for as long as they hold
//! something, so an idle client holds no buffer at all (Redis frees an idle client's query
//! buffer the same way).
//!
//! A session reads into a pooled buffer and gives it back when it is empty again: at the end of
//! a turn, or when a read finds nothing to read. Only a partial request, or replies the client
//! has not taken yet, keep a buffer with the session. Requests are zero-copy slices of the
//! buffer they were read into, so a buffer given back may still share its allocation with
//! commands waiting to be written to a node; `BytesMut::reserve` takes the allocation back
//! once they are gone, or allocates anew.

use std::cell::RefCell;
use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::pin::pin;
use std::task::{Context, Poll};

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt};

/// What a fresh buffer holds: the size of one read.
pub(in crate::downstream) const CHUNK: usize = 16 * 1024;

/// With less room than this left, a buffer is topped up before the next read.
const MIN_SPARE: usize = 1024;

/// Buffers a thread keeps for its sessions; more are freed. Only sessions in the middle of a
/// turn, or holding a partial request or unwritten replies, have one out at a time.
const KEEP: usize = 64;

thread_local! {
    static POOL: RefCell<Vec<BytesMut>> = const { RefCell::new(Vec::new()) };
}

/// Bytes a session holds: nothing while idle, a pooled buffer while busy.
#[derive(Default)]
pub(in crate::downstream) struct Buffer {
    bytes: BytesMut,
    /// It grew past a fresh buffer (a large request or reply): freed, not pooled, once empty.
    /// (Its capacity alone cannot tell: after a large request is split off, the rest of the
    /// buffer looks small while the allocation behind it is not.)
    grown: bool,
    /// It may hold an allocation: it was lent, or written through `DerefMut`, since it was last
    /// given back. A session gives its buffers back up to six times per command at `-P 1`
    /// (both buffers, every turn of its loop), most of them already given back: this makes
    /// that a test of one flag.
    lent: bool,
    /// It gave a grown allocation back since [`take_large`](Self::take_large) was last asked.
    gave_large: bool,
}

// === impl Buffer ===

impl Buffer {
    /// Makes room for a read or for replies: an empty buffer takes one from the pool, one that
    /// holds something grows in place.
    pub(in crate::downstream) fn make_room(&mut self) {
        self.lent = true;
        if self.bytes.capacity() - self.bytes.len() >= MIN_SPARE {
            return;
        }
        if self.bytes.is_empty() && !self.grown {
            if let Some(pooled) = POOL.with(|pool| pool.borrow_mut().pop()) {
                self.bytes = pooled;
                if self.bytes.capacity() >= MIN_SPARE {
                    return;
                }
            }
        }
        self.bytes.reserve(CHUNK);
        self.grown |= self.bytes.capacity() > 2 * CHUNK;
    }

    /// Gives the buffer back once it is empty; the session then holds nothing.
    ///
    /// A buffer written to its very end has no capacity left but still holds its allocation
    /// (capacity alone cannot tell it from a buffer never lent), so every empty buffer is taken.
    pub(in crate::downstream) fn release_if_empty(&mut self) {
        if !self.lent || !self.bytes.is_empty() {
            return;
        }
        self.lent = false;
        let mut bytes = std::mem::take(&mut self.bytes);
        if std::mem::take(&mut self.grown) {
            // Dropped: a large value's memory goes back to the allocator, and from there to the
            // system once the session goes quiet (`memory::give_back`).
            crate::memory::large_freed();
            self.gave_large = true;
            return;
        }
        if bytes.capacity() < MIN_SPARE && !bytes.try_reclaim(CHUNK) {
            // Used up, and its allocation still shared with requests on their way to a node
            // (or nothing was ever lent): dropped; the allocation goes when they do.
            return;
        }
        POOL.with(|pool| {
            let mut pool = pool.borrow_mut();
            if pool.len() < KEEP {
                pool.push(bytes);
            }
        });
    }

    /// Whether a large request or reply went through this buffer since last asked: the session
    /// then has its thread's heap collected once quiet (`crate::memory::give_back`), when the
    /// value's last reference (the request on its way to a node, the reply a node connection
    /// read) is gone too. One still held counts.
    pub(in crate::downstream) fn take_large(&mut self) -> bool {
        std::mem::take(&mut self.gave_large) || self.grown
    }

    /// Appends `bytes`, taking a buffer first if the session had none.
    pub(in crate::downstream) fn append(&mut self, bytes: &[u8]) {
        self.lent = true;
        if self.bytes.capacity() == 0 {
            self.make_room();
        }
        self.grown |= self.bytes.len() + bytes.len() > 2 * CHUNK;
        self.bytes.extend_from_slice(bytes);
    }

    /// Reads what `reader` has into a lent buffer; while there is nothing to read, the buffer
    /// goes back (unless it holds a partial request).
    pub(in crate::downstream) fn poll_read_from<R>(
        &mut self,
        reader: &mut R,
        cx: &mut Context<'_>,
    ) -> Poll<std::io::Result<usize>>
    where
        R: AsyncRead + Unpin,
    {
        self.make_room();
        let read = pin!(reader.read_buf(&mut self.bytes)).poll(cx);
        if read.is_pending() {
            self.release_if_empty();
        }
        read
    }

    /// Reads once from a non-blocking `reader` (an event loop's client socket), appending what
    /// came; the caller gives an empty buffer back at the end of its turn.
    pub(in crate::downstream) fn read_from(
        &mut self,
        reader: &mut impl std::io::Read,
    ) -> std::io::Result<usize> {
        self.make_room();
        let n = crate::upstream::read_into(reader, &mut self.bytes)?;
        self.grown |= self.bytes.capacity() > 2 * CHUNK;
        Ok(n)
    }

    /// Whether the session holds a buffer.
    #[cfg(test)]
    pub(in crate::downstream) fn is_lent(&self) -> bool {
        self.bytes.capacity() > 0
    }
}

impl Drop for Buffer {
    /// A session that ends holding a large request or reply frees it here.
    fn drop(&mut self) {
        if self.grown {
            crate::memory::large_freed();
        }
    }
}

impl Deref for Buffer {
    type Target = BytesMut;

    fn deref(&self) -> &BytesMut {
        &self.bytes
    }
}

impl DerefMut for Buffer {
    fn deref_mut(&mut self) -> &mut BytesMut {
        self.lent = true;
        &mut self.bytes
    }
}

/// Buffers pooled on this thread (tests).
#[cfg(test)]
fn pooled() -> usize {
    POOL.with(|pool| pool.borrow().len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Buf;

    #[test]
    fn an_empty_buffer_is_given_back_and_lent_again() {
        let before = pooled();
        let mut buffer = Buffer::default();
        assert!(!buffer.is_lent(), "nothing is held until needed");
        buffer.make_room();
        assert!(buffer.capacity() >= CHUNK);
        buffer.extend_from_slice(b"PING\r\n");
        buffer.release_if_empty();
        assert!(buffer.is_lent(), "a buffer holding bytes stays");
        buffer.advance(6);
        buffer.release_if_empty();
        assert!(!buffer.is_lent());
        assert_eq!(pooled(), before + 1);
        let mut other = Buffer::default();
        other.make_room();
        assert_eq!(pooled(), before, "the pooled buffer is lent again");
    }

    #[test]
    fn a_partial_request_keeps_its_buffer_and_grows_in_place() {
        let mut buffer = Buffer::default();
        buffer.make_room();
        let filler = vec![b'x'; CHUNK - 100];
        buffer.extend_from_slice(&filler);
        buffer.make_room();
        assert!(buffer.capacity() - buffer.len() >= MIN_SPARE);
        assert_eq!(&buffer[..], &filler[..], "what it held is kept");
    }

    #[test]
    fn a_buffer_that_grew_for_a_large_value_is_freed_not_pooled() {
        let before = pooled();
        let mut buffer = Buffer::default();
        buffer.append(&vec![b'v'; 1 << 20]);
        buffer.clear();
        buffer.release_if_empty();
        assert!(!buffer.is_lent());
        assert_eq!(pooled(), before, "not kept");
        // The session goes on with a fresh buffer.
        buffer.make_room();
        assert!(buffer.capacity() < 2 * CHUNK + MIN_SPARE);
    }

    #[test]
    fn a_large_buffer_given_back_or_dropped_asks_for_the_memory_back() {
        let freed = crate::memory::freed_here();
        let mut buffer = Buffer::default();
        buffer.make_room();
        buffer.extend_from_slice(b"PING\r\n");
        buffer.clear();
        buffer.release_if_empty();
        assert!(!buffer.take_large());
        drop(buffer);
        assert_eq!(
            crate::memory::freed_here(),
            freed,
            "a pooled-size buffer: nothing to ask"
        );
        let mut buffer = Buffer::default();
        buffer.append(&vec![b'v'; 1 << 20]);
        buffer.clear();
        assert!(buffer.take_large(), "held");
        buffer.release_if_empty();
        assert_eq!(
            crate::memory::freed_here(),
            freed + 1,
            "given back once empty"
        );
        assert!(buffer.take_large(), "the session is told");
        assert!(!buffer.take_large(), "once");
        drop(buffer);
        assert_eq!(crate::memory::freed_here(), freed + 1, "counted once");
        let mut held = Buffer::default();
        held.append(&vec![b'v'; 1 << 20]);
        drop(held); // the client left in the middle of a large request
        assert_eq!(crate::memory::freed_here(), freed + 2);
    }

    #[test]
    fn a_reply_written_to_the_buffers_very_end_is_still_given_back() {
        // A large reply fills its allocation exactly; once written, the buffer has no capacity
        // left but still owns the allocation. It used to be kept for the client's whole life.
        let before = pooled();
        let mut buffer = Buffer::default();
        let reply = vec![b'r'; 3 * CHUNK];
        buffer.append(&reply);
        let len = buffer.len();
        buffer.advance(len);
        assert_eq!(buffer.len(), 0);
        buffer.release_if_empty();
        assert!(!buffer.is_lent());
        assert_eq!(pooled(), before, "grown: freed, not pooled");
        // The same for a pooled-size buffer used up exactly: reclaimed and pooled again.
        let mut small = Buffer::default();
        small.make_room();
        let room = small.capacity();
        small.extend_from_slice(&vec![b's'; room]);
        small.advance(room);
        assert_eq!(small.capacity(), 0);
        small.release_if_empty();
        assert_eq!(pooled(), before + 1, "reclaimed whole and pooled");
    }

    #[test]
    fn a_read_that_finds_nothing_gives_the_buffer_back() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let (mut client, mut server) = tokio::io::duplex(64);
            let mut buffer = Buffer::default();
            let pending = std::future::poll_fn(|cx| {
                Poll::Ready(buffer.poll_read_from(&mut server, cx).is_pending())
            })
            .await;
            assert!(pending);
            assert!(!buffer.is_lent(), "nothing to read: nothing held");
            tokio::io::AsyncWriteExt::write_all(&mut client, b"PING\r\n")
                .await
                .expect("write");
            let read = std::future::poll_fn(|cx| buffer.poll_read_from(&mut server, cx)).await;
            assert_eq!(read.expect("read"), 6);
            assert_eq!(&buffer[..], b"PING\r\n");
        });
    }
}
