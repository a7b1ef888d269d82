//! One user's rules ([`Acl`]) and the check of a command against them: the root rules or any
//! one selector must allow all of it.

use std::cell::RefCell;

use crate::commands::acl_keys::{acl_keys, has_acl_keys, KeyUse};
use crate::commands::CommandSpec;
use crate::protocol::Args;
use crate::values::secret::PasswordDigest;

use super::denied::Denied;
use super::selector::Selector;

/// One user's rules.
#[derive(Clone, Debug, Default)]
pub(crate) struct Acl {
    /// `on`: the user may log in at all (Redis's users are `off` until turned on).
    pub(crate) enabled: bool,
    /// `nopass`: any password logs in.
    pub(crate) nopass: bool,
    /// `>password` and `#<sha256>`, as digests.
    pub(crate) passwords: Vec<PasswordDigest>,
    /// The rules outside parentheses.
    pub(super) root: Selector,
    /// `(...)`: further sets of rules, each able to allow a command on its own.
    pub(super) selectors: Vec<Selector>,
}

thread_local! {
    /// The keys of the command being checked (reused: checking allocates nothing per command).
    static KEYS: RefCell<Vec<KeyUse>> = const { RefCell::new(Vec::new()) };
}

impl Acl {
    /// True when no rule can refuse anything (`+@all ~* &*`): the check is skipped.
    pub(crate) fn is_unrestricted(&self) -> bool {
        self.root.is_unrestricted() || self.selectors.iter().any(Selector::is_unrestricted)
    }

    /// Whether some selector lets the user read `key` (`filter_keys`: which keys KEYS, SCAN and
    /// RANDOMKEY may show).
    pub(crate) fn may_read(&self, key: &[u8]) -> bool {
        let read = crate::commands::spec::key_flags::ACCESS;
        self.selectors().any(|s| s.key_allowed(key, read))
    }

    /// Checks one command (`spec` is the command or subcommand `args` names).
    pub(crate) fn check(&self, spec: &CommandSpec, args: Args<'_>) -> Result<(), Denied> {
        KEYS.with(|keys| {
            let mut keys = keys.borrow_mut();
            keys.clear();
            if has_acl_keys(spec) && self.selectors().any(|s| !s.all_keys()) {
                acl_keys(spec, args, &mut keys);
            }
            let mut worst = Denied::Command;
            for selector in self.selectors() {
                match selector.check(spec, args, &keys) {
                    Ok(()) => return Ok(()),
                    Err(denied) => worst = worst.max(denied),
                }
            }
            Err(worst)
        })
    }

    /// After a reload: whether a subscriber may keep these channels and patterns. As Redis 7
    /// decides it when a user's rules change: against the channel rules of every selector
    /// together, whatever their command rules.
    pub(crate) fn keeps_subscriptions<'a>(
        &self,
        mut channels: impl Iterator<Item = &'a [u8]>,
        mut patterns: impl Iterator<Item = &'a [u8]>,
    ) -> bool {
        if self.selectors().any(|s| s.all_channels) {
            return true;
        }
        channels.all(|c| self.selectors().any(|s| s.channel_allowed(c, false)))
            && patterns.all(|p| self.selectors().any(|s| s.channel_allowed(p, true)))
    }

    /// The root rules, then each selector.
    fn selectors(&self) -> impl Iterator<Item = &Selector> {
        std::iter::once(&self.root).chain(&self.selectors)
    }
}
