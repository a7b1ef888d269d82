//! The client's socket, read and written from the same session without splitting it into two
//! reference-counted halves (`tokio::io::split` allocates an `Arc` per client: 136 bytes of every
//! idle client's memory, measured with massif). A session polls its reads and writes one after
//! the other on one task, so the lock is never contended; it exists only so a read side and a
//! write side may be borrowed at once (a `select!` holds both).

use std::pin::Pin;
use std::sync::{Mutex, MutexGuard};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The socket, owned by the session.
pub(super) struct ClientStream<S>(Mutex<S>);

/// A read view of a [`ClientStream`].
pub(super) struct Reader<'a, S>(&'a ClientStream<S>);

/// A write view of a [`ClientStream`].
pub(super) struct Writer<'a, S>(&'a ClientStream<S>);

// === impl ClientStream ===

impl<S> ClientStream<S> {
    pub(super) fn new(stream: S) -> Self {
        ClientStream(Mutex::new(stream))
    }

    /// The socket itself, for a session moving to another worker.
    pub(super) fn into_inner(self) -> S {
        self.0.into_inner().unwrap_or_else(|e| e.into_inner())
    }

    /// A second descriptor of the socket (see `Movable::duplicate`).
    pub(super) fn duplicate(&self) -> Option<(&'static str, std::os::fd::OwnedFd)>
    where
        S: super::super::movable::Movable,
    {
        self.lock().duplicate()
    }

    pub(super) fn reader(&self) -> Reader<'_, S> {
        Reader(self)
    }

    pub(super) fn writer(&self) -> Writer<'_, S> {
        Writer(self)
    }

    /// Nothing panics while holding the lock, so a poisoned one is still consistent.
    fn lock(&self) -> MutexGuard<'_, S> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

// === impl Reader ===

impl<S: AsyncRead + Unpin> AsyncRead for Reader<'_, S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.0.lock()).poll_read(cx, buf)
    }
}

// === impl Writer ===

impl<S: AsyncWrite + Unpin> AsyncWrite for Writer<'_, S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut *self.0.lock()).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.0.lock()).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.0.lock()).poll_shutdown(cx)
    }
}

impl<S: AsyncWrite + Unpin> Writer<'_, S> {
    /// Writes what the socket takes right now, without waiting: `None` when it takes nothing
    /// now. No waker is kept then, so the caller must poll a write to wait for room.
    pub(super) fn try_write(&mut self, buf: &[u8]) -> Option<std::io::Result<usize>> {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        match Pin::new(self).poll_write(&mut cx, buf) {
            Poll::Ready(wrote) => Some(wrote),
            Poll::Pending => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn a_read_and_a_write_may_wait_at_once_on_one_stream() {
        let (mut peer, ours) = tokio::io::duplex(64);
        let stream = ClientStream::new(ours);
        let mut buf = [0u8; 4];
        let (mut reader, mut writer) = (stream.reader(), stream.writer());
        // The read waits (nothing sent yet) while the write goes through.
        let (read, wrote) = tokio::join!(reader.read_exact(&mut buf), async {
            writer.write_all(b"+OK\r\n").await?;
            let mut echoed = [0u8; 5];
            peer.read_exact(&mut echoed).await?;
            assert_eq!(&echoed, b"+OK\r\n");
            peer.write_all(b"PING").await
        });
        wrote.expect("write");
        read.expect("read");
        assert_eq!(&buf, b"PING");
    }
}
