//! Tests across the whole codec: chunking at every byte and property tests.

mod props;
mod split;

use bytes::BytesMut;

use super::fuzz::{drain, Drained};
use super::{parse_request, reply_frame_len, Frame, Limits, ProtocolError, Request};

/// Feed `chunks` to `parse_request`.
fn requests<'a>(chunks: impl IntoIterator<Item = &'a [u8]>, limits: &Limits) -> Drained<Request> {
    drain(chunks, |buf| parse_request(buf, limits))
}

/// Feed `chunks` to `Frame::parse`.
fn frames<'a>(chunks: impl IntoIterator<Item = &'a [u8]>, limits: &Limits) -> Drained<Frame> {
    drain(chunks, |buf| Frame::parse(buf, limits))
}

/// Feed `chunks` to `reply_frame_len`, cutting each measured frame off the buffer, as the
/// upstream reader does for pass-through.
fn frame_lens<'a>(chunks: impl IntoIterator<Item = &'a [u8]>, limits: &Limits) -> Drained<usize> {
    drain(chunks, |buf: &mut BytesMut| {
        let len = reply_frame_len(buf, limits)?;
        if let Some(len) = len {
            let _ = buf.split_to(len);
        }
        Ok::<_, ProtocolError>(len)
    })
}
