//! Reading Envoy's value shapes: protobuf durations, wrapped numbers, socket addresses and
//! `DataSource`s (secrets), turned into what redcar's config takes.
//!
//! | Envoy shape | read as |
//! | --- | --- |
//! | `"0.5s"`, `{seconds: 1, nanos: 500000000}` | a `Duration`, written back as `500ms`, `1500ms` |
//! | `5`, `"5"` (protobuf JSON writes 64-bit numbers as strings) | `u64` |
//! | `{address, port_value}` | `HOST:PORT`, IPv6 in brackets |
//! | `{inline_string}`, `{filename}`, `{environment_variable}` | a [`DataSource`] |
//!
//! Secrets go through [`secret`] and [`describe`] only, so no path from here prints a value.

use std::time::Duration;

use sha2::{Digest, Sha256};
use yaml_serde::{Mapping, Value};

use super::ConvertError;
use redcar_units::{format_duration, parse_duration};

/// An Envoy `google.protobuf.Duration`: `"0.5s"`, `"5s"`, or `{seconds: 5, nanos: 0}`.
/// A string goes through redcar's own duration parser, so it accepts the same units as the
/// config; `nanos` must fit a `u32`. `key` names the setting in the error.
pub(super) fn duration(value: &Value, key: &str) -> Result<Duration, ConvertError> {
    let bad = || {
        ConvertError(format!(
            "`{key}` is not a duration such as \"0.5s\" or \"5s\""
        ))
    };
    match value {
        Value::String(text) => parse_duration(text).map_err(|_| bad()),
        Value::Mapping(map) => {
            let seconds = map.get("seconds").map_or(Some(0), number).ok_or_else(bad)?;
            let nanos = map.get("nanos").map_or(Some(0), number).ok_or_else(bad)?;
            let nanos = u32::try_from(nanos).map_err(|_| bad())?;
            Ok(Duration::new(seconds, nanos))
        }
        _ => Err(bad()),
    }
}

/// The same duration written the way redcar's config reads it (`500ms`, `5s`).
/// Fails as [`duration`] does; the text is what the converted config carries.
pub(super) fn duration_text(value: &Value, key: &str) -> Result<(Duration, String), ConvertError> {
    let d = duration(value, key)?;
    Ok((d, format_duration(d)))
}

/// A non-negative integer, plain or as a protobuf JSON string (`"5"`).
/// Negative, fractional or non-numeric values give `None`: callers decide whether that is an
/// error ([`require_number`]) or means "not set".
pub(super) fn number(value: &Value) -> Option<u64> {
    match value {
        Value::Number(n) => n.as_u64(),
        Value::String(text) => text.trim().parse().ok(),
        _ => None,
    }
}

/// [`number`] naming the key on failure.
/// For settings whose absence was already checked, where a non-number is the user's error.
pub(super) fn require_number(value: &Value, key: &str) -> Result<u64, ConvertError> {
    number(value).ok_or_else(|| ConvertError(format!("`{key}` is not a non-negative integer")))
}

/// A protobuf bool (absent: false).
/// Protobuf JSON may spell it as the string `"true"`; every other value, including a malformed
/// one, reads as false.
pub(super) fn flag(value: &Value) -> bool {
    matches!(value, Value::Bool(true)) || value.as_str() == Some("true")
}

/// `socket_address: {address, port_value}` as `HOST:PORT` (IPv6 in brackets).
/// Fails on a missing host or a port outside 1..=65535; Envoy's named ports cannot be resolved
/// without the process, so they are refused too.
pub(super) fn socket_address(value: &Value, key: &str) -> Result<String, ConvertError> {
    let host = value["address"]
        .as_str()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| ConvertError(format!("`{key}.socket_address.address` is missing")))?;
    let port = number(&value["port_value"])
        .filter(|p| (1..=65535).contains(p))
        .ok_or_else(|| {
            ConvertError(format!(
                "`{key}.socket_address.port_value` is missing or not a port (named ports are not supported)"
            ))
        })?;
    if host.contains(':') && !host.starts_with('[') {
        return Ok(format!("[{host}]:{port}"));
    }
    Ok(format!("{host}:{port}"))
}

/// Where an Envoy `DataSource` keeps its value.
/// The value is kept as found: a file or variable is not read (except for user names), so the
/// converted config reads it where Envoy did.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum DataSource {
    /// The value itself, written in the Envoy file (`inline_string`).
    Inline(String),
    /// A path the value is read from (`filename`); redcar reads the same file at start.
    File(String),
    /// An environment variable's name (`environment_variable`); redcar reads the same variable.
    Env(String),
}

/// Reads a `DataSource` (`inline_string`, `filename`, `environment_variable`). `inline_bytes`
/// is refused: decoding it would put a secret in the output in clear.
pub(super) fn data_source(value: &Value, key: &str) -> Result<DataSource, ConvertError> {
    let text = |field: &str| value[field].as_str().map(str::to_owned);
    if let Some(inline) = text("inline_string") {
        return Ok(DataSource::Inline(inline));
    }
    if let Some(file) = text("filename") {
        return Ok(DataSource::File(file));
    }
    if let Some(env) = text("environment_variable") {
        return Ok(DataSource::Env(env));
    }
    if !value["inline_bytes"].is_null() {
        return Err(ConvertError(format!(
            "`{key}.inline_bytes` is not supported: give it as inline_string, filename or \
             environment_variable"
        )));
    }
    Err(ConvertError(format!(
        "`{key}` has none of inline_string, filename or environment_variable"
    )))
}

/// A password in redcar's `Secret` shapes. `digest_inline`: a password clients present, which
/// redcar can keep as its SHA-256 so the output does not repeat it; a password redcar sends to
/// the nodes must stay in clear.
/// For example an inline `s3cret` is `{sha256: <hex>}` for `auth.requirepass` and `s3cret` for
/// `upstream.password`; a file is `{file: PATH}` either way, read by redcar at start.
pub(super) fn secret(source: &DataSource, digest_inline: bool) -> Value {
    let one = |key: &str, v: &str| {
        let mut map = Mapping::new();
        map.insert(Value::from(key), Value::from(v));
        Value::Mapping(map)
    };
    match source {
        DataSource::Inline(password) if digest_inline => one("sha256", &sha256_hex(password)),
        DataSource::Inline(password) => Value::from(password.as_str()),
        DataSource::File(path) => one("file", path),
        DataSource::Env(name) => one("env", name),
    }
}

/// A user name: redcar takes names in clear, so a file or variable is read now.
/// Fails if the file or variable cannot be read, or the name is empty or holds whitespace.
pub(super) fn plain_name(source: &DataSource, key: &str) -> Result<String, ConvertError> {
    let name = match source {
        DataSource::Inline(name) => name.clone(),
        DataSource::File(path) => std::fs::read_to_string(path)
            .map_err(|e| ConvertError(format!("`{key}.filename`: cannot read {path}: {e}")))?
            .trim_end_matches(['\n', '\r'])
            .to_owned(),
        DataSource::Env(var) => std::env::var(var).map_err(|_| {
            ConvertError(format!(
                "`{key}.environment_variable`: {var} is not set (redcar takes user names in \
                 clear, so the converter reads it now)"
            ))
        })?,
    };
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err(ConvertError(format!(
            "`{key}` is empty or has spaces: not a user name"
        )));
    }
    Ok(name)
}

/// Says where a secret came from, without its value.
/// Used in notes, which are printed on stderr and in the output: a value must never reach them.
pub(super) fn describe(source: &DataSource) -> String {
    match source {
        DataSource::Inline(_) => "inline_string".to_owned(),
        DataSource::File(path) => format!("filename {path}"),
        DataSource::Env(var) => format!("environment_variable {var}"),
    }
}

/// Lower-case hex, as redcar's `sha256:` secret shape expects it.
fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
