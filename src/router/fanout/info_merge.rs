//! Merging every primary's `INFO` text into one INFO reply: counters summed over the primaries,
//! per-node sections taken from one named primary.
//!
//! Why not one rule for everything: `connected_clients` or `keyspace_hits` only mean something for
//! the cluster as a sum, while `process_id`, `role` or `rdb_last_save_time` are facts about one
//! process that no arithmetic makes true for the cluster. Redis's own line format is kept (no
//! comment lines beyond the `# Section` headers: Predis, for one, warns on a line without `:`).

use std::fmt::Write as _;

/// Sections whose counters are summed over the primaries.
const SUMMED: &[&str] = &[
    "clients",
    "memory",
    "stats",
    "cpu",
    "commandstats",
    "errorstats",
    "keyspace",
];

/// Sections made of `name:k=v,...` entries that tools iterate: no `redcar_source` line there.
const LISTS: &[&str] = &[
    "keyspace",
    "commandstats",
    "errorstats",
    "latencystats",
    "modules",
];

/// Numeric fields of summed sections that are levels, limits or facts about one host rather than
/// counters: the largest value among the primaries (the "worst" one) is reported.
const LARGEST: &[&str] = &[
    "client_recent_max_input_buffer",
    "client_recent_max_output_buffer",
    "latest_fork_usec",
    "total_system_memory",
];

/// One primary's INFO text, with the address it came from.
pub(super) struct NodeInfo<'a> {
    /// The primary's address, named in the `redcar_source` line of per-node sections.
    pub(crate) addr: &'a str,
    /// The INFO bulk string as text (lossily decoded: INFO is ASCII in practice).
    pub(crate) text: &'a str,
}

/// One `# Name` section: its header name and its `field:value` lines (a line without `:` keeps
/// its text as the field and `None` as the value).
struct Section<'a> {
    /// The header as the node wrote it (`Memory`); sections are matched by name without regard to
    /// case.
    name: &'a str,
    /// In the order the node listed them; duplicates are kept as they came.
    lines: Vec<(&'a str, Option<&'a str>)>,
}

/// The merged INFO text: `own` (redcar's section, already rendered) first, then every section the
/// primaries returned, in the order the first primary listed them.
pub(super) fn merge_info(nodes: &[NodeInfo<'_>], own: Option<&str>) -> String {
    let parsed: Vec<(&str, Vec<Section>)> = nodes.iter().map(|n| (n.addr, parse(n.text))).collect();
    let mut names: Vec<&str> = Vec::new();
    for (_, sections) in &parsed {
        for section in sections {
            if !names.iter().any(|n| n.eq_ignore_ascii_case(section.name)) {
                names.push(section.name);
            }
        }
    }
    let mut out: Vec<String> = own.map(str::to_string).into_iter().collect();
    for name in names {
        let found: Vec<(&str, &Section)> = parsed
            .iter()
            .filter_map(|(addr, sections)| {
                let section = sections
                    .iter()
                    .find(|s| s.name.eq_ignore_ascii_case(name))?;
                Some((*addr, section))
            })
            .collect();
        out.push(merge_section(name, &found, nodes.len()));
    }
    out.join("\r\n")
}

/// Splits one node's INFO text into its sections. Blank lines separate sections in Redis's output
/// and are dropped; a trailing `\r` is stripped from every line.
fn parse(text: &str) -> Vec<Section<'_>> {
    let mut sections: Vec<Section> = Vec::new();
    for line in text.lines().map(|l| l.trim_end_matches('\r')) {
        if line.is_empty() {
            continue;
        }
        if let Some(name) = line.strip_prefix("# ") {
            sections.push(Section {
                name: name.trim(),
                lines: Vec::new(),
            });
            continue;
        }
        let entry = match line.split_once(':') {
            Some((field, value)) => (field, Some(value)),
            None => (line, None),
        };
        match sections.last_mut() {
            Some(section) => section.lines.push(entry),
            // Text before any header (not something Redis sends): keep it in a nameless section.
            None => sections.push(Section {
                name: "",
                lines: vec![entry],
            }),
        }
    }
    sections
}

/// One merged section: summed sections (see `SUMMED`) add up their fields over every primary that
/// has the section; any other section is the first primary's, with `redis_version` lowered to the
/// oldest in `server`. Every section but the list-shaped ones opens with a `redcar_source` line
/// saying which it is, so nobody mistakes one primary's `role` for the cluster's. `primaries` is
/// how many were asked, for the `1 of N` note.
fn merge_section(name: &str, found: &[(&str, &Section)], primaries: usize) -> String {
    let lower = name.to_ascii_lowercase();
    let summed = SUMMED.contains(&lower.as_str());
    let mut lines: Vec<(String, Option<String>)> = Vec::new();
    if !LISTS.contains(&lower.as_str()) {
        let source = match found.first() {
            Some(_) if summed => format!("sum of {} primaries", found.len()),
            Some((addr, _)) => format!("primary {addr} (1 of {primaries})"),
            None => String::new(),
        };
        lines.push(("redcar_source".to_string(), Some(source)));
    }
    if summed {
        lines.extend(sum_fields(found));
    } else if let Some((_, first)) = found.first() {
        lines.extend(
            first
                .lines
                .iter()
                .map(|(f, v)| (f.to_string(), v.map(str::to_string))),
        );
        if lower == "server" {
            lowest_version(&mut lines, found);
        }
    }
    let mut text = format!("# {name}\r\n");
    for (field, value) in lines {
        match value {
            Some(value) => {
                let _ = write!(text, "{field}:{value}\r\n");
            }
            None => {
                let _ = write!(text, "{field}\r\n");
            }
        }
    }
    text
}

/// Every field of the section on any primary, in first-seen order, with its merged value.
fn sum_fields(found: &[(&str, &Section)]) -> Vec<(String, Option<String>)> {
    let mut fields: Vec<&str> = Vec::new();
    for (_, section) in found {
        for (field, _) in &section.lines {
            if !fields.contains(field) {
                fields.push(field);
            }
        }
    }
    let mut merged: Vec<(String, Option<String>)> = fields
        .iter()
        .map(|&field| {
            let values: Vec<&str> = found
                .iter()
                .filter_map(|(_, s)| s.lines.iter().find(|(f, _)| *f == field)?.1)
                .collect();
            let value = (!values.is_empty()).then(|| merge_values(field, &values));
            (field.to_string(), value)
        })
        .collect();
    // `used_memory_human` is the summed `used_memory`, not a sum of "1.2M" strings.
    for i in 0..merged.len() {
        let Some(base) = merged[i].0.strip_suffix("_human") else {
            continue;
        };
        let bytes = merged
            .iter()
            .find(|(f, _)| f == base)
            .and_then(|(_, v)| v.as_deref()?.parse::<u64>().ok());
        if let Some(bytes) = bytes {
            merged[i].1 = Some(bytes_to_human(bytes));
        }
    }
    merged
}

/// One field's values (one per primary that has it) as one value.
fn merge_values(field: &str, values: &[&str]) -> String {
    if values.len() == 1 {
        return values[0].to_string();
    }
    if is_level(field) {
        return largest(values);
    }
    if field == "maxmemory" && values.contains(&"0") {
        // 0 is "no limit": one unlimited primary makes the cluster unlimited, not smaller.
        return "0".to_string();
    }
    if values.iter().all(|v| v.contains('=')) {
        return merge_subfields(values);
    }
    sum(values).unwrap_or_else(|| values[0].to_string())
}

/// Ratios, percentages and "current"/"max" levels are not additive.
fn is_level(field: &str) -> bool {
    LARGEST.contains(&field)
        || field.ends_with("_ratio")
        || field.ends_with("_perc")
        || field.starts_with("current_")
}

/// The value with the largest number (a trailing `%` allowed); the first one if none parse.
fn largest(values: &[&str]) -> String {
    let number = |v: &&str| v.trim_end_matches('%').parse::<f64>().ok();
    values
        .iter()
        .filter(|v| number(v).is_some())
        .max_by(|a, b| {
            number(a)
                .partial_cmp(&number(b))
                .unwrap_or(std::cmp::Ordering::Equal)
        })
        .unwrap_or(&values[0])
        .to_string()
}

/// Integers summed as integers; decimals summed and printed with the most decimals seen;
/// `None` when any value is not a number.
fn sum(values: &[&str]) -> Option<String> {
    if let Some(ints) = values
        .iter()
        .map(|v| v.parse::<i64>().ok())
        .collect::<Option<Vec<i64>>>()
    {
        return Some(
            ints.iter()
                .fold(0i64, |a, b| a.saturating_add(*b))
                .to_string(),
        );
    }
    let floats = values
        .iter()
        .map(|v| v.parse::<f64>().ok().filter(|f| f.is_finite()))
        .collect::<Option<Vec<f64>>>()?;
    let decimals = values
        .iter()
        .map(|v| v.split_once('.').map_or(0, |(_, d)| d.len()))
        .max()
        .unwrap_or(0);
    Some(format!("{:.*}", decimals, floats.iter().sum::<f64>()))
}

/// `k=v,k=v` values (`db0:`, `cmdstat_*:`, `errorstat_*:`): each subfield summed, except
/// `avg_ttl` (weighted by each primary's `expires`) and `usec_per_call` (recomputed).
fn merge_subfields(values: &[&str]) -> String {
    let parsed: Vec<Vec<(&str, &str)>> = values
        .iter()
        .map(|v| v.split(',').filter_map(|kv| kv.split_once('=')).collect())
        .collect();
    let total = |key: &str| -> i64 { parsed.iter().filter_map(|f| sub_int(f, key)).sum() };
    let mut keys: Vec<&str> = Vec::new();
    for fields in &parsed {
        for (k, _) in fields {
            if !keys.contains(k) {
                keys.push(k);
            }
        }
    }
    let merged: Vec<String> = keys
        .iter()
        .map(|&key| {
            let value = match key {
                "avg_ttl" => weighted_ttl(&parsed).to_string(),
                "usec_per_call" => {
                    let calls = total("calls");
                    let per_call = if calls > 0 {
                        total("usec") as f64 / calls as f64
                    } else {
                        0.0
                    };
                    format!("{per_call:.2}")
                }
                _ => {
                    let own: Vec<&str> = parsed
                        .iter()
                        .filter_map(|f| Some(f.iter().find(|(k, _)| *k == key)?.1))
                        .collect();
                    sum(&own).unwrap_or_else(|| own.first().copied().unwrap_or("").to_string())
                }
            };
            format!("{key}={value}")
        })
        .collect();
    merged.join(",")
}

/// Redis's `avg_ttl` is per node over its keys with a TTL, so the cluster's is the mean of the
/// nodes' weighted by how many such keys (`expires`) each holds.
fn weighted_ttl(parsed: &[Vec<(&str, &str)>]) -> i64 {
    let (mut weighted, mut expires) = (0i128, 0i128);
    for fields in parsed {
        let (Some(ttl), Some(n)) = (sub_int(fields, "avg_ttl"), sub_int(fields, "expires")) else {
            continue;
        };
        weighted += i128::from(ttl) * i128::from(n);
        expires += i128::from(n);
    }
    if expires > 0 {
        i64::try_from(weighted / expires).unwrap_or(i64::MAX)
    } else {
        0
    }
}

/// The integer value of subfield `key` in one primary's `k=v,...` list.
fn sub_int(fields: &[(&str, &str)], key: &str) -> Option<i64> {
    fields.iter().find(|(k, _)| *k == key)?.1.parse().ok()
}

/// `redis_version` becomes the lowest among the primaries, so a client's feature check stays
/// safe while the cluster is being upgraded.
fn lowest_version(lines: &mut [(String, Option<String>)], found: &[(&str, &Section)]) {
    let version = |v: &str| -> Vec<u64> { v.split('.').map(|p| p.parse().unwrap_or(0)).collect() };
    let lowest = found
        .iter()
        .filter_map(|(_, s)| s.lines.iter().find(|(f, _)| *f == "redis_version")?.1)
        .min_by_key(|v| version(v));
    if let (Some(lowest), Some(line)) =
        (lowest, lines.iter_mut().find(|(f, _)| f == "redis_version"))
    {
        line.1 = Some(lowest.to_string());
    }
}

/// Redis's own `bytesToHuman`: `512B`, `1.50K`, `12.00M`, ...
fn bytes_to_human(n: u64) -> String {
    const UNITS: [(u64, &str); 5] = [
        (1 << 50, "P"),
        (1 << 40, "T"),
        (1 << 30, "G"),
        (1 << 20, "M"),
        (1 << 10, "K"),
    ];
    if n >= 1024 << 50 {
        return format!("{n}B");
    }
    match UNITS.iter().find(|(unit, _)| n >= *unit) {
        Some((unit, suffix)) => format!("{:.2}{suffix}", n as f64 / *unit as f64),
        None => format!("{n}B"),
    }
}

#[cfg(test)]
#[path = "info_merge_tests.rs"]
mod tests;
