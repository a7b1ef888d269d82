//! The `router:` settings every forwarded command reads (`op_timeout`, `read_policy`), packed
//! into one atomic word beside the [`Live`] snapshot, so the usual command costs one load
//! instead of an `ArcSwap` load (SeqCst atomics and a walk of arc-swap's debt list).
//!
//! The word is whole per reload: a command sees one reload's settings, never half of two. It
//! says "plain" only when nothing else of `live` can matter to forwarding (no fault injection,
//! no hedged reads, a timeout that fits); otherwise the command loads `live` as before.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::router::core::Live;
use crate::router::ReadPolicy;

/// The bits of the timeout (nanoseconds: up to 78 hours).
const TIMEOUT_BITS: u32 = 48;
const TIMEOUT_MASK: u64 = (1 << TIMEOUT_BITS) - 1;
/// Set when the word holds the settings (see the module's header).
const PLAIN: u64 = 1 << 63;
/// The read policies by their code in the word.
const POLICIES: [ReadPolicy; 5] = [
    ReadPolicy::Primary,
    ReadPolicy::PreferPrimary,
    ReadPolicy::Replica,
    ReadPolicy::PreferReplica,
    ReadPolicy::Any,
];

/// One reload's forwarding settings in one word.
pub(super) struct QuickSettings(AtomicU64);

/// What a plain word says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Quick {
    pub(super) op_timeout: Duration,
    pub(super) read_policy: ReadPolicy,
}

impl QuickSettings {
    /// `hedged`: `live` hedges reads (the forwarder decides, `Forwarder::hedges_reads`).
    pub(super) fn new(live: &Live, hedged: bool) -> QuickSettings {
        QuickSettings(AtomicU64::new(pack(live, hedged)))
    }

    /// Follows a reload; called after `live` is stored, so a command that reads the new word
    /// and is told to load `live` gets the new snapshot too.
    pub(super) fn set(&self, live: &Live, hedged: bool) {
        self.0.store(pack(live, hedged), Ordering::Release);
    }

    /// The settings, or `None` when the command needs the whole `live` snapshot.
    #[inline]
    pub(super) fn get(&self) -> Option<Quick> {
        unpack(self.0.load(Ordering::Acquire))
    }
}

fn pack(live: &Live, hedged: bool) -> u64 {
    let config = &live.config;
    let timeout = u64::try_from(config.op_timeout.as_nanos()).unwrap_or(u64::MAX);
    let policy = POLICIES.iter().position(|p| *p == config.read_policy);
    match policy {
        Some(code) if live.faults.is_none() && !hedged && timeout <= TIMEOUT_MASK => {
            PLAIN | (code as u64) << TIMEOUT_BITS | timeout
        }
        _ => 0,
    }
}

#[inline]
fn unpack(word: u64) -> Option<Quick> {
    if word & PLAIN == 0 {
        return None;
    }
    let code = ((word & !PLAIN) >> TIMEOUT_BITS) as usize;
    Some(Quick {
        op_timeout: Duration::from_nanos(word & TIMEOUT_MASK),
        read_policy: *POLICIES.get(code)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;
    use crate::router::RouterConfig;

    fn live(config: RouterConfig) -> Live {
        Live::new(config, &Metrics::default())
    }

    #[test]
    fn the_usual_settings_travel_in_the_word() {
        for (policy, timeout) in [
            (ReadPolicy::Primary, Duration::from_secs(1)),
            (ReadPolicy::Any, Duration::from_nanos(1)),
            (ReadPolicy::Replica, Duration::from_millis(1500)),
            (ReadPolicy::PreferPrimary, Duration::from_secs(3600 * 78)),
            (ReadPolicy::PreferReplica, Duration::ZERO),
        ] {
            let config = RouterConfig {
                read_policy: policy,
                op_timeout: timeout,
                ..RouterConfig::default()
            };
            let quick = QuickSettings::new(&live(config), false).get();
            let expected = Quick {
                op_timeout: timeout,
                read_policy: policy,
            };
            assert_eq!(quick, Some(expected));
        }
    }

    #[test]
    fn hedging_or_a_huge_timeout_needs_the_snapshot() {
        let config = RouterConfig::default();
        assert_eq!(QuickSettings::new(&live(config), true).get(), None);
        let huge = RouterConfig {
            op_timeout: Duration::from_secs(3600 * 79),
            ..RouterConfig::default()
        };
        assert_eq!(QuickSettings::new(&live(huge), false).get(), None);
    }

    #[test]
    fn a_reload_replaces_the_word() {
        let quick = QuickSettings::new(&live(RouterConfig::default()), false);
        let reloaded = RouterConfig {
            read_policy: ReadPolicy::Any,
            op_timeout: Duration::from_millis(250),
            ..RouterConfig::default()
        };
        quick.set(&live(reloaded), false);
        let expected = Quick {
            op_timeout: Duration::from_millis(250),
            read_policy: ReadPolicy::Any,
        };
        assert_eq!(quick.get(), Some(expected));
    }
}
