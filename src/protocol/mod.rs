//! RESP wire protocol: zero-copy frames, streaming parse with limits, encoding.

mod encode;
mod error;
mod frame;
mod fuzz;
mod inline;
mod limits;
mod line;
mod request;
mod scan;

pub use encode::*;
pub use error::ProtocolError;
pub use frame::Frame;
pub use fuzz::fuzz_logic;
pub use limits::Limits;
pub use request::{parse_request, Request};
pub use scan::{header_value, reply_frame_len};

#[cfg(test)]
mod tests;
