//! RESP wire protocol: zero-copy frames, streaming parse with limits, encoding.
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
