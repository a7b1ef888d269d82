//! A fully parsed RESP2 value, zero-copy over the bytes it was parsed from.

use bytes::{Bytes, BytesMut};
use memchr::memchr;

use super::encode::{
    bulk_encoded_len, header_encoded_len, integer_encoded_len, write_array_len, write_bulk,
    write_error, write_integer, write_null, write_null_array, write_simple,
};
use super::line::parse_i64;
use super::scan::reply_frame_len;
use super::{Limits, ProtocolError};

/// A RESP2 reply or value. Payloads are `Bytes` slices of the input, never copies, and never
/// assumed to be UTF-8.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    /// `+OK`; the payload holds no CR or LF.
    Simple(Bytes),
    /// `-ERR ...`, the payload starting with the error code; no CR or LF.
    Error(Bytes),
    /// `:n`; signed because Redis replies e.g. `TTL` with `-2`.
    Integer(i64),
    /// `$n` followed by `n` bytes of binary-safe payload.
    Bulk(Bytes),
    /// The null bulk string `$-1`.
    Null,
    /// `*n` followed by `n` frames.
    Array(Vec<Frame>),
    /// The null array `*-1`.
    NullArray,
}

impl Frame {
    /// Parse one complete frame from the front of `buf`, removing it; `Ok(None)` if incomplete.
    ///
    /// The frame is measured first, so an incomplete frame costs no allocation and leaves `buf`
    /// untouched. A well-framed RESP3 reply is removed from `buf` before
    /// [`ProtocolError::Resp3Unsupported`] is returned, so the stream stays in sync.
    pub fn parse(buf: &mut BytesMut, limits: &Limits) -> Result<Option<Frame>, ProtocolError> {
        let Some(len) = reply_frame_len(buf, limits)? else {
            return Ok(None);
        };
        Decoder::new(buf.split_to(len).freeze()).frame().map(Some)
    }

    /// Parse `bytes`, which must hold exactly one complete frame (as cut by `reply_frame_len`).
    pub fn from_bytes(bytes: Bytes, limits: &Limits) -> Result<Frame, ProtocolError> {
        match reply_frame_len(&bytes, limits)? {
            None => Err(ProtocolError::Incomplete),
            Some(len) if len < bytes.len() => Err(ProtocolError::TrailingBytes),
            Some(_) => Decoder::new(bytes).frame(),
        }
    }

    /// Append the RESP encoding of this frame to `out`.
    pub fn encode(&self, out: &mut BytesMut) {
        out.reserve(self.encoded_len());
        self.encode_reserved(out);
    }

    fn encode_reserved(&self, out: &mut BytesMut) {
        match self {
            Frame::Simple(s) => write_simple(out, s),
            Frame::Error(msg) => write_error(out, msg),
            Frame::Integer(n) => write_integer(out, *n),
            Frame::Bulk(b) => write_bulk(out, b),
            Frame::Null => write_null(out),
            Frame::NullArray => write_null_array(out),
            Frame::Array(items) => {
                write_array_len(out, items.len());
                items.iter().for_each(|item| item.encode_reserved(out));
            }
        }
    }

    /// The RESP encoding of this frame.
    pub fn to_bytes(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(self.encoded_len());
        self.encode_reserved(&mut out);
        out.freeze()
    }

    /// Bytes that [`Frame::encode`] writes.
    pub(crate) fn encoded_len(&self) -> usize {
        match self {
            Frame::Simple(s) | Frame::Error(s) => 1 + s.len() + 2,
            Frame::Integer(n) => integer_encoded_len(*n),
            Frame::Bulk(b) => bulk_encoded_len(b.len()),
            Frame::Null | Frame::NullArray => 5,
            Frame::Array(items) => {
                header_encoded_len(items.len())
                    + items.iter().map(Frame::encoded_len).sum::<usize>()
            }
        }
    }

    /// The payload of a simple or bulk string.
    pub fn as_bytes(&self) -> Option<&Bytes> {
        match self {
            Frame::Simple(b) | Frame::Bulk(b) => Some(b),
            _ => None,
        }
    }

    /// The value of an integer.
    pub fn as_integer(&self) -> Option<i64> {
        match self {
            Frame::Integer(n) => Some(*n),
            _ => None,
        }
    }

    /// The elements of a (non-null) array.
    pub fn as_array(&self) -> Option<&[Frame]> {
        match self {
            Frame::Array(items) => Some(items),
            _ => None,
        }
    }

    /// True for an error reply (`-...`).
    pub fn is_error(&self) -> bool {
        matches!(self, Frame::Error(_))
    }
}

/// Walks bytes already validated by `reply_frame_len` (so nesting is within limits and every
/// count is backed by real bytes), slicing payloads out of them. It still reports, rather than
/// panics on, anything unexpected.
struct Decoder {
    bytes: Bytes,
    pos: usize,
}

impl Decoder {
    fn new(bytes: Bytes) -> Self {
        Decoder { bytes, pos: 0 }
    }

    fn frame(&mut self) -> Result<Frame, ProtocolError> {
        let ty = *self.bytes.get(self.pos).ok_or(ProtocolError::Incomplete)?;
        self.pos += 1;
        match ty {
            b'+' => Ok(Frame::Simple(self.line()?)),
            b'-' => Ok(Frame::Error(self.line()?)),
            b':' => self
                .number(ProtocolError::InvalidInteger)
                .map(Frame::Integer),
            b'$' => self.bulk(),
            b'*' => self.array(),
            b'_' | b',' | b'#' | b'(' | b'!' | b'=' | b'~' | b'>' | b'%' | b'|' => {
                Err(ProtocolError::Resp3Unsupported(ty))
            }
            other => Err(ProtocolError::InvalidReplyType(other)),
        }
    }

    /// The rest of the current line, moving past its CRLF.
    fn line(&mut self) -> Result<Bytes, ProtocolError> {
        let rest = self.bytes.get(self.pos..).unwrap_or_default();
        let len = memchr(b'\r', rest).ok_or(ProtocolError::Incomplete)?;
        let line = self.bytes.slice(self.pos..self.pos + len);
        self.pos += len + 2;
        Ok(line)
    }

    fn number(&mut self, invalid: ProtocolError) -> Result<i64, ProtocolError> {
        parse_i64(&self.line()?).ok_or(invalid)
    }

    fn bulk(&mut self) -> Result<Frame, ProtocolError> {
        let len = self.number(ProtocolError::InvalidBulkLength)?;
        if len == -1 {
            return Ok(Frame::Null);
        }
        let len = usize::try_from(len).map_err(|_| ProtocolError::InvalidBulkLength)?;
        let end = self.pos.saturating_add(len);
        if end.saturating_add(2) > self.bytes.len() {
            return Err(ProtocolError::Incomplete);
        }
        let payload = self.bytes.slice(self.pos..end);
        self.pos = end + 2;
        Ok(Frame::Bulk(payload))
    }

    fn array(&mut self) -> Result<Frame, ProtocolError> {
        let count = self.number(ProtocolError::InvalidMultibulkLength)?;
        if count == -1 {
            return Ok(Frame::NullArray);
        }
        let count = usize::try_from(count).map_err(|_| ProtocolError::InvalidMultibulkLength)?;
        // The count was backed by real bytes during the scan, so this capacity is bounded.
        let mut items = Vec::with_capacity(count);
        for _ in 0..count {
            items.push(self.frame()?);
        }
        Ok(Frame::Array(items))
    }
}

#[cfg(test)]
mod tests;
