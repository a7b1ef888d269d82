//! The one error type of the protocol module, worded like Redis's own protocol errors.

/// Why input could not be parsed.
///
/// `Display` reads like Redis so a session can reply `-ERR Protocol error: <display>`. Any byte
/// quoted in a message is ASCII-escaped, so the text never contains CR or LF and is always safe
/// to put on one RESP error line. After any error the stream is out of sync: close the connection.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    /// A `$` length that is not a number, is negative, or exceeds `max_bulk_len`.
    #[error("invalid bulk length")]
    InvalidBulkLength,
    /// A `*` count that is not a number or exceeds `max_array_len`.
    #[error("invalid multibulk length")]
    InvalidMultibulkLength,
    /// An element of a request multibulk that is not a bulk string.
    #[error("expected '$', got '{}'", .0.escape_ascii())]
    ExpectedBulk(u8),
    /// An inline command line longer than `max_inline_len`.
    #[error("too big inline request")]
    InlineTooBig,
    /// An inline command with an unterminated quote, or a closing quote not followed by a space.
    #[error("unbalanced quotes in request")]
    UnbalancedQuotes,
    /// A request `*` header line longer than `max_inline_len`.
    #[error("too big mbulk count string")]
    MultibulkCountTooBig,
    /// A request `$` header line longer than `max_inline_len`.
    #[error("too big bulk count string")]
    BulkCountTooBig,
    /// A request whose arguments reach past 4 GiB: their offsets would not fit the 32 bits a
    /// request keeps them in. A guard: `client.max_request_bytes`, checked at start-up to be
    /// below 4 GiB, closes a client before such a request could arrive.
    #[error("request larger than 4 GiB")]
    RequestTooBig,
    /// A bulk payload not followed by CRLF, or a line ending in a bare CR.
    #[error("expected CRLF")]
    ExpectedCrlf,
    /// A `:` reply that is not a 64-bit signed integer.
    #[error("invalid integer")]
    InvalidInteger,
    /// A reply starting with a byte that is no RESP2 or RESP3 type.
    #[error("invalid reply type byte 0x{0:02x}")]
    InvalidReplyType(u8),
    /// A reply with more than `max_depth` aggregates nested inside each other.
    #[error("nesting too deep")]
    NestingTooDeep,
    /// A well-formed RESP3 reply, which [`crate::protocol::Frame`] cannot represent; it is
    /// still framed correctly by [`crate::protocol::reply_frame_len`] for pass-through.
    #[error("unsupported RESP3 type '{}'", .0.escape_ascii())]
    Resp3Unsupported(u8),
    /// [`crate::protocol::Frame::from_bytes`] was given less than one whole frame.
    #[error("incomplete frame")]
    Incomplete,
    /// [`crate::protocol::Frame::from_bytes`] was given more than one whole frame.
    #[error("trailing bytes after frame")]
    TrailingBytes,
}
