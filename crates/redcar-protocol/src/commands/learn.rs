//! Building command specs at runtime from a node's `COMMAND INFO` reply (module commands).
//!
//! The wire decoder lives elsewhere; callers convert its frames into [`InfoValue`] so
//! this module stays independent of the protocol types.
//!
//! What holds: a spec is built all or nothing. Every parse step returns `Option`, and any field
//! missing or of the wrong shape makes the whole entry (with its subcommands) unlearnable rather
//! than half-learned, because a spec with wrong key positions would route a module command's keys
//! to the wrong node. Unknown flag, category or key-spec names are ignored (a newer server may add
//! some), and unknown begin/find types become `Unknown`, which the router treats as "keys not
//! known" instead of guessing. Only a complete spec is leaked into `'static`.

use bytes::Bytes;

use super::spec::{self, BeginSearch, CommandSpec, FindKeys, KeySpec};

/// A decoded reply tree, as much of RESP as `COMMAND INFO` needs.
///
/// Conversion rules for callers: integers → `Int`; simple and bulk strings (and RESP3
/// verbatim strings) → `Str`; arrays and sets → `Array`; RESP3 maps → `Array` of
/// alternating key, value (exactly the RESP2 shape); null / nil → `Nil`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InfoValue {
    /// An integer.
    Int(i64),
    /// A simple, bulk or verbatim string.
    Str(Bytes),
    /// An array or set, or a map as alternating key, value.
    Array(Vec<InfoValue>),
    /// A null.
    Nil,
}

impl InfoValue {
    /// A string holding a decimal integer is read as one too.
    fn as_int(&self) -> Option<i64> {
        match self {
            InfoValue::Int(n) => Some(*n),
            InfoValue::Str(s) => std::str::from_utf8(s).ok()?.parse().ok(),
            _ => None,
        }
    }

    /// As [`InfoValue::as_int`], refused outside the `i32` range Redis uses for arity and
    /// positions.
    fn as_i32(&self) -> Option<i32> {
        i32::try_from(self.as_int()?).ok()
    }

    /// Only strings, and only valid UTF-8 (command names, field names and tips always are).
    fn as_str(&self) -> Option<&str> {
        match self {
            InfoValue::Str(s) => std::str::from_utf8(s).ok(),
            _ => None,
        }
    }

    /// Arrays, sets and maps (already flattened by the caller).
    fn as_array(&self) -> Option<&[InfoValue]> {
        match self {
            InfoValue::Array(items) => Some(items),
            _ => None,
        }
    }

    /// Value for `key` in a flat key/value array (RESP2 map shape).
    fn field(&self, key: &str) -> Option<&InfoValue> {
        let items = self.as_array()?;
        items
            .chunks_exact(2)
            .find(|pair| {
                pair[0]
                    .as_str()
                    .is_some_and(|k| k.eq_ignore_ascii_case(key))
            })
            .map(|pair| &pair[1])
    }

    /// Byte strings of an array of strings (flags, categories, tips).
    fn strings(&self) -> impl Iterator<Item = &[u8]> {
        self.as_array()
            .unwrap_or(&[])
            .iter()
            .filter_map(|v| match v {
                InfoValue::Str(s) => Some(s.as_ref()),
                _ => None,
            })
    }
}

/// Owned form of a spec being learned; leaked only once it parsed completely.
#[derive(Debug)]
pub(crate) struct Learned {
    /// Lowercase, as Redis reports it; subcommands as `container|sub`.
    name: String,
    /// Redis arity: positive is exact, negative is a minimum.
    arity: i32,
    /// Bits of [`spec::flags`].
    flags: u32,
    /// Bits of [`spec::acl`].
    acl_categories: u32,
    /// Sorted, as in the generated table.
    tips: Vec<String>,
    /// In Redis's order.
    key_specs: Vec<LearnedKeySpec>,
    /// Each learned the same way, recursively.
    subcommands: Vec<Learned>,
}

/// A key spec as learned, before its keyword is leaked.
#[derive(Debug)]
struct LearnedKeySpec {
    /// Bits of [`spec::key_flags`].
    flags: u32,
    /// Where the search starts.
    begin: LearnedBegin,
    /// How keys are found.
    find: FindKeys,
}

/// [`BeginSearch`] with an owned keyword.
#[derive(Debug)]
enum LearnedBegin {
    Index(i32),
    Keyword { keyword: String, start_from: i32 },
    Unknown,
}

/// Lowercased name of a `COMMAND INFO` entry, if it has one.
pub(crate) fn entry_name(entry: &InfoValue) -> Option<String> {
    Some(entry.as_array()?.first()?.as_str()?.to_ascii_lowercase())
}

/// Parses one entry: `[name, arity, flags, first, last, step, acl, tips, key_specs, subs]`.
/// Pre-7 nodes send only the first 7 fields; their legacy first/last/step become a range spec.
pub(crate) fn parse_entry(entry: &InfoValue) -> Option<Learned> {
    let fields = entry.as_array()?;
    let name = entry_name(entry)?;
    let flags = spec::bits_of(spec::flags::NAMES, fields.get(2)?.strings());
    let acl_categories = fields
        .get(6)
        .map_or(0, |v| spec::bits_of(spec::acl::NAMES, v.strings()));
    let key_specs = match fields.get(8) {
        Some(specs) => parse_key_specs(specs)?,
        None => legacy_key_spec(fields)?.into_iter().collect(),
    };
    let subcommands = match fields.get(9).and_then(InfoValue::as_array) {
        Some(subs) => subs.iter().map(parse_entry).collect::<Option<Vec<_>>>()?,
        None => Vec::new(),
    };
    let mut tips: Vec<String> = fields.get(7).map_or_else(Vec::new, |v| {
        v.strings()
            .map(|t| String::from_utf8_lossy(t).into_owned())
            .collect()
    });
    // Same order as the generated table, so learned and builtin specs compare equal.
    tips.sort();
    Some(Learned {
        name,
        arity: fields.get(1)?.as_i32()?,
        flags,
        acl_categories,
        tips,
        key_specs,
        subcommands,
    })
}

/// All or nothing: one bad key spec makes the command unlearnable.
fn parse_key_specs(specs: &InfoValue) -> Option<Vec<LearnedKeySpec>> {
    specs.as_array()?.iter().map(parse_key_spec).collect()
}

/// `flags` may be absent (no flags); `begin_search` and `find_keys` are required.
fn parse_key_spec(ks: &InfoValue) -> Option<LearnedKeySpec> {
    let flags = ks
        .field("flags")
        .map_or(0, |v| spec::bits_of(spec::key_flags::NAMES, v.strings()));
    Some(LearnedKeySpec {
        flags,
        begin: parse_begin(ks.field("begin_search")?)?,
        find: parse_find(ks.field("find_keys")?)?,
    })
}

/// `type` is required; an `index` or `keyword` spec must carry its numbers.
fn parse_begin(bs: &InfoValue) -> Option<LearnedBegin> {
    let spec = bs.field("spec");
    let int = |key: &str| spec.and_then(|s| s.field(key)).and_then(InfoValue::as_i32);
    Some(match bs.field("type")?.as_str()? {
        "index" => LearnedBegin::Index(int("index")?),
        "keyword" => LearnedBegin::Keyword {
            keyword: spec?.field("keyword")?.as_str()?.to_owned(),
            start_from: int("startfrom")?,
        },
        // Unknown types from newer servers degrade to "unknown" (keys incomplete).
        _ => LearnedBegin::Unknown,
    })
}

/// `type` is required; `range` and `keynum` must carry all their numbers.
fn parse_find(fk: &InfoValue) -> Option<FindKeys> {
    let spec = fk.field("spec");
    let int = |key: &str| spec.and_then(|s| s.field(key)).and_then(InfoValue::as_i32);
    Some(match fk.field("type")?.as_str()? {
        "range" => FindKeys::Range {
            last_key: int("lastkey")?,
            step: int("keystep")?,
            limit: int("limit")?,
        },
        "keynum" => FindKeys::KeyNum {
            key_num_idx: int("keynumidx")?,
            first_key: int("firstkey")?,
            step: int("keystep")?,
        },
        _ => FindKeys::Unknown,
    })
}

/// Redis derives the same range spec from legacy first/last/step (`legacy_range_key_spec`).
///
/// `Some(None)` when the command has no keys (`first` 0); `None` when the fields are malformed. A
/// negative `last` counts from the end and is kept as is; otherwise it becomes relative to `first`,
/// as key specs are.
fn legacy_key_spec(fields: &[InfoValue]) -> Option<Option<LearnedKeySpec>> {
    let first = fields.get(3)?.as_i32()?;
    let last = fields.get(4)?.as_i32()?;
    let step = fields.get(5)?.as_i32()?;
    if first <= 0 {
        return Some(None);
    }
    let last_key = if last < 0 { last } else { last - first };
    Some(Some(LearnedKeySpec {
        flags: 0,
        begin: LearnedBegin::Index(first),
        find: FindKeys::Range {
            last_key,
            step,
            limit: 0,
        },
    }))
}

/// Turns a fully parsed spec into a `'static` one. Called once per new name (bounded by
/// the table's `MAX_LEARNED`), so the leak is a fixed, small cost.
pub(crate) fn leak(learned: Learned) -> &'static CommandSpec {
    Box::leak(Box::new(into_static(learned)))
}

/// Subcommands are sorted by name, because look-up binary-searches them.
fn into_static(learned: Learned) -> CommandSpec {
    let mut subcommands: Vec<CommandSpec> =
        learned.subcommands.into_iter().map(into_static).collect();
    // Lookup binary-searches subcommands by name.
    subcommands.sort_by_key(|sub| sub.name);
    let tips: Vec<&'static str> = learned.tips.into_iter().map(leak_str).collect();
    let key_specs: Vec<KeySpec> = learned
        .key_specs
        .into_iter()
        .map(|ks| KeySpec {
            flags: ks.flags,
            begin: static_begin(ks.begin),
            find: ks.find,
        })
        .collect();
    CommandSpec {
        name: leak_str(learned.name),
        arity: learned.arity,
        flags: learned.flags,
        acl_categories: learned.acl_categories,
        tips: tips.leak(),
        key_specs: key_specs.leak(),
        subcommands: subcommands.leak(),
    }
}

/// [`LearnedBegin`] with its keyword leaked.
fn static_begin(begin: LearnedBegin) -> BeginSearch {
    match begin {
        LearnedBegin::Index(i) => BeginSearch::Index(i),
        LearnedBegin::Keyword {
            keyword,
            start_from,
        } => BeginSearch::Keyword {
            keyword: leak_str(keyword),
            start_from,
        },
        LearnedBegin::Unknown => BeginSearch::Unknown,
    }
}

/// Leaks the string's buffer: learned specs live as long as the process (bounded by the table).
fn leak_str(s: String) -> &'static str {
    s.leak()
}

#[cfg(test)]
#[path = "learn_tests.rs"]
mod tests;
