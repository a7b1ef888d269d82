//! The converter's one error: why nothing could be converted.
//!
//! Errors are reserved for input that cannot be converted without changing what clients get: no or
//! several `redis_proxy` filters, a cluster type redcar cannot front, a key rewrite, client auth
//! redcar cannot check, or a malformed value. The message names the setting by its Envoy path, so
//! the user can find it in the file.

/// Errors end the conversion with nothing printed on stdout: [`crate::run`] prints the message
/// after `redcar config convert-envoy: ` and exits with status 1. Settings that merely have no
/// redcar equivalent are not errors; they become notes (`Draft::note`).
/// Why nothing could be converted; the message names the Envoy setting.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConvertError(pub String);
