//! Human-friendly durations ("250ms", "5s") and byte sizes ("64kb", "512mb") for config values
//! and command-line flags.
//!
//! Every duration and size key in docs/configuration.md goes through this crate, so they all take
//! the same spellings: durations `us`/`µs`, `ms`, `s` (or none), `m`, `h`, fractions allowed
//! (`1.5s`); sizes `b`, `k`/`kb`, `m`/`mb`, `g`/`gb` (powers of 1024, case-insensitive), whole
//! numbers only. A bare YAML number is seconds or bytes. Written back ([`format_duration`], the
//! serialisers), a value reads back as the same value, which the Envoy converter relies on (it
//! writes durations that the proxy's config reads back).
//!
//! A crate of its own so that the proxy (`redcar`, as `values::units`) and the tools that share
//! its spellings (`redcar-top`'s `--interval`, `redcar-envoy`'s output) take them from one place
//! without depending on the proxy.
#![warn(unreachable_pub, missing_docs)]

use std::time::Duration;

use serde::{de, Deserialize, Deserializer, Serializer};

/// Parses `"150us"`, `"250ms"`, `"5s"`, `"2m"`, `"1h"`; a bare number means seconds.
///
/// Fails, with a message naming the text and the units accepted, on a missing or non-numeric
/// number, an unknown unit, or more than 10^9 seconds (about 31 years, far beyond any timeout and
/// well inside what `Duration::from_secs_f64` takes without panicking). A sign is not part of the
/// number, so `-5s` fails as not a duration.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration (examples: 250ms, 5s, 2m)"))?;
    let seconds = match unit.trim() {
        "us" | "µs" => value / 1_000_000.0,
        "ms" => value / 1000.0,
        "" | "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        other => {
            return Err(format!(
                "unknown duration unit `{other}` in `{text}` (use us, ms, s, m or h)"
            ))
        }
    };
    if !seconds.is_finite() || seconds > 1e9 {
        return Err(format!("`{text}` is out of range"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// Parses `"512mb"`, `"64kb"`, `"1gb"`, or a plain number of bytes.
///
/// Fails on fractions, unknown units and on sizes that overflow `usize`, never wrapping.
fn parse_size(text: &str) -> Result<usize, String> {
    let lower = text.trim().to_ascii_lowercase();
    let split = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let (number, unit) = lower.split_at(split);
    let value: usize = number
        .parse()
        .map_err(|_| format!("`{text}` is not a size (examples: 4096, 64kb, 512mb)"))?;
    let factor: usize = match unit.trim() {
        "" | "b" => 1,
        "k" | "kb" => 1 << 10,
        "m" | "mb" => 1 << 20,
        "g" | "gb" => 1 << 30,
        other => {
            return Err(format!(
                "unknown size unit `{other}` in `{text}` (use b, kb, mb or gb)"
            ))
        }
    };
    value
        .checked_mul(factor)
        .ok_or_else(|| format!("`{text}` is out of range"))
}

/// Formats a duration the way the parser reads it back.
/// The largest unit that is exact is chosen (`5s`, `1500ms`, `250us`); below a microsecond the
/// value is truncated, which no config key can express anyway.
pub fn format_duration(d: Duration) -> String {
    let micros = d.as_micros();
    if micros.is_multiple_of(1_000_000) {
        format!("{}s", micros / 1_000_000)
    } else if micros.is_multiple_of(1000) {
        format!("{}ms", micros / 1000)
    } else {
        format!("{micros}us")
    }
}

/// serde adapter: `#[serde(with = "units::duration")]`.
/// A YAML number is whole seconds; text goes through [`parse_duration`].
pub mod duration {
    use super::*;

    /// Fails with the parser's message, which serde places at the key in the config error.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let raw = NumberOrText::deserialize(d)?;
        match raw {
            NumberOrText::Number(n) => Ok(Duration::from_secs(n)),
            NumberOrText::Text(t) => parse_duration(&t).map_err(de::Error::custom),
        }
    }

    /// Writes the text form, never a number, so the unit is always visible in dumped configs.
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_duration(*d))
    }
}

/// serde adapter for a duration that may be unset: `#[serde(with = "units::optional_duration")]`.
/// A missing or `null` key is `None` (the feature's "unset", e.g. the OS default for TCP
/// keepalive); otherwise as [`duration`](mod@duration).
pub mod optional_duration {
    use super::*;

    /// `null` gives `None`; text goes through the duration parser.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        match Option::<NumberOrText>::deserialize(d)? {
            None => Ok(None),
            Some(NumberOrText::Number(n)) => Ok(Some(Duration::from_secs(n))),
            Some(NumberOrText::Text(t)) => parse_duration(&t).map(Some).map_err(de::Error::custom),
        }
    }

    /// `None` is written as YAML `null`.
    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_str(&format_duration(*d)),
            None => s.serialize_none(),
        }
    }
}

/// serde adapter: `#[serde(with = "units::size")]`.
/// A YAML number is bytes; text goes through `parse_size`.
pub mod size {
    use super::*;

    /// Fails on a number too large for `usize` on this platform, or on the size parser's errors.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
        match NumberOrText::deserialize(d)? {
            NumberOrText::Number(n) => usize::try_from(n).map_err(de::Error::custom),
            NumberOrText::Text(t) => parse_size(&t).map_err(de::Error::custom),
        }
    }

    /// Written as a plain byte count, which [`deserialize`] reads back unchanged.
    pub fn serialize<S: Serializer>(v: &usize, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(*v as u64)
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
/// What a duration or size key may hold in YAML: a bare number (seconds or bytes) or text with a
/// unit. `untagged`, so serde tries the number first.
enum NumberOrText {
    /// A non-negative whole number; a negative or fractional YAML number matches neither variant.
    Number(u64),
    /// Anything else that is a string, given to the matching parser.
    Text(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("5"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("150us"), Ok(Duration::from_micros(150)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("fast").is_err());
    }

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64kb"), Ok(65536));
        assert_eq!(parse_size("512MB"), Ok(512 << 20));
        assert!(parse_size("12 bananas").is_err());
        assert!(parse_size("99999999999999999999gb").is_err());
    }

    #[test]
    fn durations_format_round_trip() {
        for d in [
            Duration::from_secs(5),
            Duration::from_millis(250),
            Duration::from_micros(7),
        ] {
            assert_eq!(parse_duration(&format_duration(d)), Ok(d));
        }
    }
}
