//! # redcar-protocol
//!
//! What a Redis client and server say to each other, and nothing else: redcar's RESP codec and
//! its command table. It knows no sockets, no cluster and no configuration; the proxy (the
//! `redcar` crate) builds on it, and Cargo keeps the dependency one way.
//!
//! - [`protocol`]: RESP frames as zero-copy views over `Bytes`, the streaming request parser with
//!   its limits, the reply framer, and encoding.
//! - [`commands`]: every Redis command with its arity, flags and key positions, and how redcar
//!   serves it.
//!
//! Its public items are what the proxy uses, and the fuzz targets' entry point: the parse, frame
//! length, command lookup and key position functions are on every request's path, so they are
//! `#[inline]` where a call across the crate boundary would otherwise cost a call per request.
#![warn(unreachable_pub, missing_docs)]

pub mod commands;
pub mod protocol;
