//! The converter's one error: why nothing could be converted.

/// Why nothing could be converted; the message names the Envoy setting.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct ConvertError(pub(crate) String);
