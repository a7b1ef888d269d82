//! Finding a command's spec from its arguments, case-insensitively and without allocating.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::learn::{self, InfoValue};
use super::newer;
use super::spec::CommandSpec;
use super::table::COMMANDS;
use crate::protocol::Args;

/// Longest command or subcommand name we look up; longer names are simply unknown
/// (the longest Redis 7 name is 20 bytes), which keeps lowercasing on the stack.
pub(crate) const MAX_NAME_LEN: usize = 32;

/// Upper bound on runtime-learned top-level commands: learned specs are leaked, so a
/// misbehaving node must not be able to grow memory without limit.
pub(crate) const MAX_LEARNED: usize = 1024;

/// Looks `args` up in the builtin table only; see [`CommandTable::lookup`].
/// Every command passes through here: the name is hashed and compared in place, in any case,
/// without first being copied and lowercased.
#[inline]
pub fn lookup(args: Args<'_>) -> Option<&'static CommandSpec> {
    BuiltinIndex::get()
        .find_any_case(args.first()?)
        .map(|spec| resolve(spec, args))
}

/// The builtin table plus specs learned at runtime from a node's `COMMAND INFO`.
/// Cloning is cheap: learned specs are `'static` references.
#[derive(Debug, Clone, Default)]
pub struct CommandTable {
    /// Specs learned from nodes (module commands), by lowercase name; bounded by `MAX_LEARNED`.
    learned: HashMap<&'static str, &'static CommandSpec>,
}

impl CommandTable {
    /// The table with only the builtin (generated) commands.
    pub fn builtin() -> Self {
        Self::default()
    }

    /// Spec for a command line: `args[0]` is the name in any case; when the command is a
    /// container and `args[1]` names one of its subcommands, the subcommand's spec
    /// (`CLIENT SETNAME` → `client|setname`), otherwise the container's.
    #[inline]
    pub fn lookup(&self, args: Args<'_>) -> Option<&'static CommandSpec> {
        let mut buf = [0u8; MAX_NAME_LEN];
        let name = lowercase(args.first()?, &mut buf)?;
        self.top(name).map(|spec| resolve(spec, args))
    }

    /// Spec by Redis name, any case: `"get"` or `"client|setname"` (as `COMMAND INFO` takes).
    pub fn by_name(&self, name: &[u8]) -> Option<&'static CommandSpec> {
        let mut buf = [0u8; MAX_NAME_LEN];
        let name = lowercase(name, &mut buf)?;
        match name.split_once('|') {
            None => self.top(name),
            Some((container, sub)) => find_sub(self.top(container)?, sub),
        }
    }

    /// Learns commands from a decoded `COMMAND INFO` / `COMMAND` reply (see [`InfoValue`]).
    /// Only names not yet known are added (each is leaked once); malformed entries are
    /// skipped. Returns how many new top-level commands were added.
    pub fn learn(&mut self, reply: &InfoValue) -> usize {
        let InfoValue::Array(entries) = reply else {
            return 0;
        };
        let mut added = 0;
        for entry in entries {
            if self.learned.len() >= MAX_LEARNED {
                break;
            }
            let Some(name) = learn::entry_name(entry) else {
                continue;
            };
            if self.by_name(name.as_bytes()).is_some() || name.contains('|') {
                continue;
            }
            if let Some(spec) = learn::parse_entry(entry) {
                let spec = learn::leak(spec);
                self.learned.insert(spec.name, spec);
                added += 1;
            }
        }
        added
    }

    /// Adds a spec declared in the configuration (`custom_commands`, already validated not to
    /// clash with a builtin name). Learning later skips its name, so the declaration wins.
    pub fn declare(&mut self, spec: &'static CommandSpec) {
        self.learned.insert(spec.name, spec);
    }

    fn top(&self, lower_name: &str) -> Option<&'static CommandSpec> {
        find_builtin(lower_name).or_else(|| self.learned.get(lower_name).copied())
    }
}

/// Lowercases `src` into `buf`; `None` when too long or not UTF-8 (then it can't be a name).
fn lowercase<'b>(src: &[u8], buf: &'b mut [u8; MAX_NAME_LEN]) -> Option<&'b str> {
    let dst = buf.get_mut(..src.len())?;
    dst.copy_from_slice(src);
    dst.make_ascii_lowercase();
    std::str::from_utf8(dst).ok()
}

/// A top-level builtin command by lowercase name. Every command passes through here, so instead
/// of a binary search (eight string comparisons for ~240 names) it is one hash and usually one
/// comparison in [`BuiltinIndex`].
fn find_builtin(name: &str) -> Option<&'static CommandSpec> {
    BuiltinIndex::get().find(name)
}

/// Open-addressing hash table over [`COMMANDS`], built once: slots hold `index + 1` (0 = empty).
struct BuiltinIndex {
    /// A power of two long, mostly empty, so a probe ends quickly.
    slots: Vec<u16>,
    /// `slots.len() - 1`: a hash modulo the table's size.
    mask: usize,
}

impl BuiltinIndex {
    #[inline]
    fn get() -> &'static BuiltinIndex {
        static INDEX: OnceLock<BuiltinIndex> = OnceLock::new();
        INDEX.get_or_init(|| BuiltinIndex::build(COMMANDS))
    }

    fn build(specs: &[CommandSpec]) -> BuiltinIndex {
        // At most half full, so probe runs stay short.
        let size = (specs.len() * 2).next_power_of_two().max(16);
        let mut index = BuiltinIndex {
            slots: vec![0; size],
            mask: size - 1,
        };
        for (at, spec) in specs.iter().enumerate() {
            let mut slot = name_hash(spec.name) & index.mask;
            while index.slots[slot] != 0 {
                slot = (slot + 1) & index.mask;
            }
            index.slots[slot] = u16::try_from(at + 1).unwrap_or(u16::MAX);
        }
        index
    }

    fn find(&self, name: &str) -> Option<&'static CommandSpec> {
        self.find_any_case(name.as_bytes())
    }

    /// [`find`](Self::find) for a name in any case. The builtin names are lowercase ASCII, so a
    /// byte-wise case-insensitive match is the same as lowercasing the name first; a name that
    /// is not ASCII (or not UTF-8) matches none of them, as before.
    #[inline]
    fn find_any_case(&self, name: &[u8]) -> Option<&'static CommandSpec> {
        if name.len() > MAX_NAME_LEN {
            return None;
        }
        let mut slot = name_hash_any_case(name) & self.mask;
        loop {
            let at = usize::from(*self.slots.get(slot)?);
            let spec = COMMANDS.get(at.checked_sub(1)?)?;
            if spec.name.len() == name.len() && spec.name.as_bytes().eq_ignore_ascii_case(name) {
                return Some(spec);
            }
            slot = (slot + 1) & self.mask;
        }
    }
}

/// FNV-1a: a few instructions per byte for names of 3–20 bytes, and no keys an attacker chooses
/// can hurt a table that only ever holds the fixed builtin names.
fn name_hash(name: &str) -> usize {
    name_hash_any_case(name.as_bytes())
}

/// [`name_hash`] of the name lowercased (ASCII), without lowercasing a copy first.
#[inline]
fn name_hash_any_case(name: &[u8]) -> usize {
    let hash = name.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b.to_ascii_lowercase())).wrapping_mul(0x0100_0000_01b3)
    });
    // Fold the high bits in: the mask keeps only the low ones.
    (hash ^ (hash >> 32)) as usize
}

/// Subcommand `sub` (lowercase, without the container prefix) of `container`.
/// Subcommands share the `container|` prefix, so sorting by full name sorts by suffix.
fn find_sub(container: &'static CommandSpec, sub: &str) -> Option<&'static CommandSpec> {
    let subs = container.subcommands;
    match subs.binary_search_by(|spec| subcommand_part(spec.name).cmp(sub)) {
        Ok(at) => subs.get(at),
        Err(_) => newer::subcommand(container.name, sub),
    }
}

fn subcommand_part(name: &str) -> &str {
    name.split_once('|').map_or(name, |(_, sub)| sub)
}

/// Picks the subcommand named by `args[1]` when `spec` is a container and it exists.
#[inline]
fn resolve(spec: &'static CommandSpec, args: Args<'_>) -> &'static CommandSpec {
    if spec.subcommands.is_empty() {
        return spec;
    }
    let mut buf = [0u8; MAX_NAME_LEN];
    args.get(1)
        .and_then(|sub| lowercase(sub, &mut buf))
        .and_then(|sub| find_sub(spec, sub))
        .unwrap_or(spec)
}

#[cfg(test)]
#[path = "lookup_tests.rs"]
mod tests;
