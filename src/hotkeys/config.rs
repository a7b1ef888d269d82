//! `hotkeys:` in the config file: sampling, the window and the sizes of the two lists.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::values::units;

/// Most counters one sketch may hold (`hotkeys.top_k` × [`COUNTERS_PER_SHOWN`]).
/// So `top_k` is at most 256, which bounds each sketch's memory however the config is set.
const MAX_TOP_K: usize = 1024;

/// Each sketch keeps this many counters per key shown: Space-Saving's error bound falls with the
/// number of counters, so the keys shown are the well-measured head of a longer list.
const COUNTERS_PER_SHOWN: usize = 4;

/// Sub-windows a window is cut into: the oldest falls out as a new one begins.
pub(crate) const BUCKETS: u32 = 5;

/// `hotkeys:` in the config file. `Default` holds the documented defaults.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct HotKeysConfig {
    /// Watch for hot and big keys at all.
    pub(crate) enabled: bool,
    /// One command in this many (on average, per client) is counted for the hot keys; its count
    /// is scaled back up by the same factor. `1` counts every command.
    pub(crate) sample_rate: u32,
    /// Hot-key rates are over the last `window` (cut into five sub-windows).
    #[serde(with = "units::duration")]
    pub(crate) window: Duration,
    /// Hot keys shown; each sketch keeps four times as many counters.
    pub(crate) top_k: usize,
    /// Requests and replies at least this big are candidates for the big-key list (every one is
    /// looked at, not a sample).
    #[serde(with = "units::size")]
    pub(crate) big_value_threshold: usize,
    /// Big keys kept: the biggest seen since start-up.
    pub(crate) big_top_n: usize,
}

impl Default for HotKeysConfig {
    /// The defaults docs/configuration.md lists for `hotkeys.*`; tests/surface/ pins them.
    fn default() -> Self {
        HotKeysConfig {
            enabled: true,
            sample_rate: 16,
            window: Duration::from_secs(10),
            top_k: 32,
            big_value_threshold: 128 << 10,
            big_top_n: 32,
        }
    }
}

// === impl HotKeysConfig ===

impl HotKeysConfig {
    /// Start-up checks; the message names the key.
    /// Run by config validation before anything is sized from these values, so `HotKeys::new` can
    /// trust them (no zero-sized window, no empty lists).
    pub(crate) fn check(&self) -> Result<(), String> {
        if !(1..=65_536).contains(&self.sample_rate) {
            return Err(format!(
                "`hotkeys.sample_rate` is {}: give 1 (every command) to 65536",
                self.sample_rate
            ));
        }
        if self.window < Duration::from_secs(1) || self.window > Duration::from_secs(3600) {
            return Err(format!(
                "`hotkeys.window` is {:?}: give 1s to 1h",
                self.window
            ));
        }
        if !(1..=MAX_TOP_K / COUNTERS_PER_SHOWN).contains(&self.top_k) {
            return Err(format!(
                "`hotkeys.top_k` is {}: give 1 to {}",
                self.top_k,
                MAX_TOP_K / COUNTERS_PER_SHOWN
            ));
        }
        if self.big_value_threshold == 0 {
            return Err("`hotkeys.big_value_threshold` is 0: give a size such as 128kb".into());
        }
        if !(1..=1024).contains(&self.big_top_n) {
            return Err(format!(
                "`hotkeys.big_top_n` is {}: give 1 to 1024",
                self.big_top_n
            ));
        }
        Ok(())
    }

    /// Counters per sketch.
    /// Each sketch, in each of `BUCKETS` sub-windows of every shard, holds this many.
    pub(super) fn counters(&self) -> usize {
        self.top_k * COUNTERS_PER_SHOWN
    }

    /// One sub-window.
    /// `window` is 1 s to 1 h, so a sub-window is 200 ms to 12 min.
    pub(super) fn bucket(&self) -> Duration {
        self.window / BUCKETS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_pass_and_bad_values_name_their_key() {
        HotKeysConfig::default()
            .check()
            .expect("defaults are valid");
        let cases = [
            (
                HotKeysConfig {
                    sample_rate: 0,
                    ..Default::default()
                },
                "hotkeys.sample_rate",
            ),
            (
                HotKeysConfig {
                    window: Duration::from_millis(10),
                    ..Default::default()
                },
                "hotkeys.window",
            ),
            (
                HotKeysConfig {
                    top_k: 0,
                    ..Default::default()
                },
                "hotkeys.top_k",
            ),
            (
                HotKeysConfig {
                    top_k: 257,
                    ..Default::default()
                },
                "hotkeys.top_k",
            ),
            (
                HotKeysConfig {
                    big_value_threshold: 0,
                    ..Default::default()
                },
                "hotkeys.big_value_threshold",
            ),
            (
                HotKeysConfig {
                    big_top_n: 0,
                    ..Default::default()
                },
                "hotkeys.big_top_n",
            ),
        ];
        for (config, key) in cases {
            let error = config.check().expect_err(key);
            assert!(error.contains(key), "{error}");
        }
    }

    #[test]
    fn yaml_with_units_and_unknown_keys_refused() {
        let config: HotKeysConfig =
            yaml_serde::from_str("{sample_rate: 8, window: 30s, big_value_threshold: 1mb}")
                .expect("parses");
        assert_eq!(config.sample_rate, 8);
        assert_eq!(config.window, Duration::from_secs(30));
        assert_eq!(config.big_value_threshold, 1 << 20);
        let typo = yaml_serde::from_str::<HotKeysConfig>("{sample_rat: 8}").expect_err("typo");
        assert!(typo.to_string().contains("sample_rat"), "{typo}");
    }
}
