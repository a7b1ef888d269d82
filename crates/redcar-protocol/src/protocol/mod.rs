//! RESP wire protocol: zero-copy frames, streaming parse with limits, encoding.
//!
//! Two directions, two shapes. Requests from clients are parsed whole into a [`Request`] (a
//! slice of the read buffer plus the arguments' spans) by [`parse_request`], which also reads
//! inline commands the way redis-server does. Replies from nodes are not parsed at all on the
//! command path: [`reply_frame_len`] measures a complete frame so it can be cut off the buffer
//! and handed on untouched; [`Frame`] is the full tree, for the few places that must read a
//! reply (topology, INFO merges, handshakes).
//!
//! What holds for every parse: it consumes bytes only when a whole request or frame is there
//! (an incomplete one is left for the next read, whatever the split), and it never trusts a
//! length or count beyond [`Limits`], so a corrupt or hostile stream fails with a
//! [`ProtocolError`] instead of exhausting memory or the stack. Nothing here allocates per
//! argument: arguments are spans into the request's own `Bytes`.
#![warn(unreachable_pub, missing_docs)]

mod args;
mod encode;
mod error;
mod frame;
mod fuzz;
mod inline;
mod limits;
mod line;
mod parse;
mod request;
mod resp3;
mod scan;
mod version;

pub use args::Args;
pub use encode::*;
pub use error::ProtocolError;
pub use frame::Frame;
pub use fuzz::fuzz_logic;
pub use limits::Limits;
pub use parse::{parse_request, parse_request_into};
pub use request::Request;
pub use resp3::{bulk_as_verbatim, resp3_null, write_map_len, write_null_in, write_verbatim};
pub use scan::{header_value, reply_frame_len};
pub use version::Protocol;

#[cfg(test)]
mod tests;
