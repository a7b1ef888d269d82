//! Human-friendly durations ("250ms", "5s") and byte sizes ("64kb", "512mb") for config values.

use std::time::Duration;

use serde::{de, Deserialize, Deserializer, Serializer};

/// Parses `"150us"`, `"250ms"`, `"5s"`, `"2m"`, `"1h"`; a bare number means seconds.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
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
pub(crate) fn format_duration(d: Duration) -> String {
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
pub(crate) mod duration {
    use super::*;

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let raw = NumberOrText::deserialize(d)?;
        match raw {
            NumberOrText::Number(n) => Ok(Duration::from_secs(n)),
            NumberOrText::Text(t) => parse_duration(&t).map_err(de::Error::custom),
        }
    }

    pub(crate) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_duration(*d))
    }
}

/// serde adapter for a duration that may be unset: `#[serde(with = "units::optional_duration")]`.
pub(crate) mod optional_duration {
    use super::*;

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        match Option::<NumberOrText>::deserialize(d)? {
            None => Ok(None),
            Some(NumberOrText::Number(n)) => Ok(Some(Duration::from_secs(n))),
            Some(NumberOrText::Text(t)) => parse_duration(&t).map(Some).map_err(de::Error::custom),
        }
    }

    pub(crate) fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_str(&format_duration(*d)),
            None => s.serialize_none(),
        }
    }
}

/// serde adapter: `#[serde(with = "units::size")]`.
pub(crate) mod size {
    use super::*;

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
        match NumberOrText::deserialize(d)? {
            NumberOrText::Number(n) => usize::try_from(n).map_err(de::Error::custom),
            NumberOrText::Text(t) => parse_size(&t).map_err(de::Error::custom),
        }
    }

    pub(crate) fn serialize<S: Serializer>(v: &usize, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(*v as u64)
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum NumberOrText {
    Number(u64),
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
