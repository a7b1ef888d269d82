//! Settings for the near cache: which keys, how much memory, how stale at most.

use std::time::Duration;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::glob;
use crate::values::units;

/// `near_cache:` in the config file (docs/near-cache.md). Off by default.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct NearCacheConfig {
    /// Serve the reads of the keys below from memory, kept correct by the nodes' invalidations.
    pub(crate) enabled: bool,
    /// Memory for cached replies, keys and bookkeeping; least recently used entries go first.
    #[serde(with = "units::size")]
    pub(crate) max_bytes: usize,
    /// A reply bigger than this is never cached (it would push out many small ones).
    #[serde(with = "units::size")]
    pub(crate) max_entry_bytes: usize,
    /// No entry is served longer than this after it was read from its node (also bounds how
    /// long a key that expires on the node is served: the key's own TTL is read with it).
    #[serde(with = "units::duration")]
    pub(crate) max_ttl: Duration,
    /// The staleness bound: an entry is served only while its node's invalidation connection
    /// answered a `PING` sent within this long, which proves every invalidation for writes
    /// acknowledged before that `PING` has arrived. Pings go every quarter of it.
    #[serde(with = "units::duration")]
    pub(crate) max_silence: Duration,
    /// Which keys may be cached: `prefix` or `pattern` (a glob) rules; any match admits.
    pub(crate) keys: Vec<KeyRule>,
    /// Also admit the keys read most often, whatever their name.
    pub(crate) hot_keys: HotKeyAdmission,
    /// Keys a `prefix` rule admits are tracked in BCAST mode on the nodes' near lanes, and a
    /// plain `SET` of one through redcar stores the value it wrote when the node acknowledges
    /// it, so the next reads hit instead of reading the key back. Off: those keys are tracked
    /// like the others (by the reads), and a write only drops the key.
    pub(crate) write_through: bool,
}

/// Off, with the bounds docs/configuration.md lists: the cache exists only when asked for.
impl Default for NearCacheConfig {
    fn default() -> Self {
        NearCacheConfig {
            enabled: false,
            max_bytes: 64 << 20,
            max_entry_bytes: 64 << 10,
            max_ttl: Duration::from_secs(60),
            max_silence: Duration::from_millis(200),
            keys: Vec::new(),
            hot_keys: HotKeyAdmission::default(),
            write_through: true,
        }
    }
}

/// One `near_cache.keys` rule: exactly one of `prefix` and `pattern`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct KeyRule {
    /// Keys starting with these bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) prefix: Option<String>,
    /// Keys matching this glob (`*`, `?`, `[a-z]`, `[^x]`, `\` escapes), as Redis's `KEYS`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) pattern: Option<String>,
}

/// `near_cache.hot_keys`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct HotKeyAdmission {
    /// Keys read at least this often per second (estimated, over about two seconds) are
    /// admitted too; 0 = off.
    pub(crate) min_reads_per_second: u32,
}

/// Longest `max_silence`: a bound longer than this is no bound a client would want.
const MAX_SILENCE: Duration = Duration::from_secs(10);
/// Shortest `max_silence`: a heartbeat every quarter of it must stay cheap.
const MIN_SILENCE: Duration = Duration::from_millis(20);

impl NearCacheConfig {
    /// Start-up checks: each error names its key.
    pub(crate) fn validate(&self) -> Result<(), String> {
        if !self.enabled {
            return Ok(());
        }
        if self.keys.is_empty() && self.hot_keys.min_reads_per_second == 0 {
            return Err("near_cache.enabled is true but nothing may be cached: add \
                        near_cache.keys rules (- prefix: \"cfg:\" or - pattern: \"flag:*\") or \
                        set near_cache.hot_keys.min_reads_per_second"
                .into());
        }
        if self.max_bytes < 1 << 20 {
            return Err(format!(
                "near_cache.max_bytes must be at least 1mb (got {} bytes)",
                self.max_bytes
            ));
        }
        if self.max_entry_bytes == 0 || self.max_entry_bytes > self.max_bytes / 16 {
            return Err(format!(
                "near_cache.max_entry_bytes must be between 1 and max_bytes/16 ({} bytes; got {})",
                self.max_bytes / 16,
                self.max_entry_bytes
            ));
        }
        if self.max_ttl < Duration::from_millis(1) {
            return Err("near_cache.max_ttl must be at least 1ms".into());
        }
        if !(MIN_SILENCE..=MAX_SILENCE).contains(&self.max_silence) {
            return Err(format!(
                "near_cache.max_silence must be between {MIN_SILENCE:?} and {MAX_SILENCE:?} \
                 (got {:?})",
                self.max_silence
            ));
        }
        for rule in &self.keys {
            match (&rule.prefix, &rule.pattern) {
                (Some(p), None) if p.is_empty() => {
                    return Err("near_cache.keys: an empty prefix would cache every key; \
                                use pattern: \"*\" if that is meant"
                        .into())
                }
                (Some(_), None) => {}
                (None, Some(p)) => glob::check(p.as_bytes())
                    .map_err(|why| format!("near_cache.keys: pattern {p:?}: {why}"))?,
                _ => {
                    return Err(
                        "near_cache.keys: each rule is one of `- prefix: \"...\"` or \
                                `- pattern: \"...\"`"
                            .into(),
                    )
                }
            }
        }
        Ok(())
    }

    /// The rules as bytes, prefixes first (the cheap test).
    pub(super) fn rules(&self) -> (Vec<Bytes>, Vec<Bytes>) {
        let mut prefixes = Vec::new();
        let mut patterns = Vec::new();
        for rule in &self.keys {
            if let Some(p) = &rule.prefix {
                prefixes.push(Bytes::copy_from_slice(p.as_bytes()));
            }
            if let Some(p) = &rule.pattern {
                patterns.push(Bytes::copy_from_slice(p.as_bytes()));
            }
        }
        (prefixes, patterns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enabled(yaml: &str) -> Result<NearCacheConfig, String> {
        let config: NearCacheConfig = yaml_serde::from_str(yaml).map_err(|e| e.to_string())?;
        config.validate().map(|()| config)
    }

    #[test]
    fn rules_parse_and_bad_settings_name_their_key() {
        let config = enabled(
            "enabled: true\nmax_bytes: 8mb\nkeys:\n  - prefix: \"cfg:\"\n  - pattern: \"flag:*\"\n",
        )
        .expect("valid");
        assert_eq!(config.max_bytes, 8 << 20);
        let (prefixes, patterns) = config.rules();
        assert_eq!(prefixes, [Bytes::from_static(b"cfg:")]);
        assert_eq!(patterns, [Bytes::from_static(b"flag:*")]);
        let nothing = enabled("enabled: true\n").expect_err("no keys");
        assert!(nothing.contains("near_cache.keys"), "{nothing}");
        let silence = enabled("enabled: true\nmax_silence: 1ms\nkeys: [{prefix: a}]\n")
            .expect_err("too short");
        assert!(silence.contains("near_cache.max_silence"), "{silence}");
        let glob = enabled("enabled: true\nkeys: [{pattern: \"a[b\"}]\n").expect_err("bad glob");
        assert!(glob.contains("pattern"), "{glob}");
        let unknown = enabled("enabled: true\nkeys: [{suffix: a}]\n").expect_err("unknown rule");
        assert!(unknown.contains("suffix"), "{unknown}");
        let both = enabled("enabled: true\nkeys: [{prefix: a, pattern: b}]\n").expect_err("both");
        assert!(both.contains("one of"), "{both}");
        assert!(enabled("keys: []\n").is_ok(), "off needs nothing");
    }
}
