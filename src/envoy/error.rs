//! The converter's one error: why nothing could be converted.

/// Errors end the conversion with nothing printed on stdout: [`super::run`] prints the message
/// after `redcar config convert-envoy: ` and exits with status 1. Settings that merely have no
/// redcar equivalent are not errors; they become notes (`Draft::note`).
/// Why nothing could be converted; the message names the Envoy setting.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct ConvertError(pub(crate) String);
