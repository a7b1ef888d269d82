//! Every series the shipped Grafana dashboard (examples/grafana/) and alerting rules
//! (examples/prometheus/) query has a sample in a fresh redcar's first scrape, so a healthy
//! proxy shows 0 rather than "No data", and `rate()`/`increase()` see the first event (a series
//! born at 1 hides it). A selector's exact label matchers (`result="error"`) must match a sample
//! too: the rules watch `{result="error"}` and `{reason="partial"}`, not the family alone.
//!
//! The per-command families (`command` label) are the one exception: their label values are the
//! commands clients send, so each command's series appear with its first call. The test checks
//! them after one `PING`.

use std::collections::BTreeMap;

use crate::observability_examples::{dashboard, dashboard_exprs, rule_exprs, RULES};
use crate::support::{Redcar, RedisCluster, Value};

const DASHBOARD: &str = "examples/grafana/redcar.json";

/// Families labelled by the command clients sent: no series before the first command.
const PER_COMMAND: &[&str] = &[
    "redcar_commands_total",
    "redcar_command_errors_total",
    "redcar_command_duration_seconds_bucket",
    "redcar_command_duration_seconds_sum",
    "redcar_command_duration_seconds_count",
];

/// A series selector in PromQL: the metric name and its exact (`=`) label matchers. Regex and
/// negative matchers (`=~`, `!=`, `!~`) are left out: `instance=~"$instance"` matches anything.
#[derive(Debug, PartialEq)]
struct Selector {
    name: String,
    labels: Vec<(String, String)>,
}

/// The `redcar_*` selectors of a PromQL expression, in order (names inside string literals are
/// label values, not selectors).
fn selectors(expr: &str) -> Vec<Selector> {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let chars: Vec<char> = expr.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if matches!(c, '"' | '\'' | '`') {
            i = skip_string(&chars, i).1;
        } else if is_ident(c) {
            let start = i;
            while i < chars.len() && is_ident(chars[i]) {
                i += 1;
            }
            let name: String = chars[start..i].iter().collect();
            if !name.starts_with("redcar_") {
                continue;
            }
            let mut labels = Vec::new();
            if chars.get(i) == Some(&'{') {
                let (matchers, end) = matchers(&chars, i + 1);
                labels = matchers;
                i = end;
            }
            out.push(Selector { name, labels });
        } else {
            i += 1;
        }
    }
    out
}

/// The string literal starting at `chars[start]` (a quote): its text and the index after it.
fn skip_string(chars: &[char], start: usize) -> (String, usize) {
    let quote = chars[start];
    let mut text = String::new();
    let mut i = start + 1;
    while i < chars.len() {
        match chars[i] {
            '\\' if quote != '`' => {
                if let Some(&next) = chars.get(i + 1) {
                    text.push(next);
                }
                i += 2;
                continue;
            }
            c if c == quote => return (text, i + 1),
            c => text.push(c),
        }
        i += 1;
    }
    (text, i)
}

/// The `label="value"` matchers of a `{...}` block starting after its `{`, and the index after
/// its `}`.
fn matchers(chars: &[char], mut i: usize) -> (Vec<(String, String)>, usize) {
    let mut exact = Vec::new();
    loop {
        while i < chars.len() && (chars[i].is_whitespace() || chars[i] == ',') {
            i += 1;
        }
        if i >= chars.len() || chars[i] == '}' {
            return (exact, i + 1);
        }
        let start = i;
        while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
            i += 1;
        }
        let label: String = chars[start..i].iter().collect();
        let op_start = i;
        while i < chars.len() && matches!(chars[i], '=' | '!' | '~' | ' ') {
            i += 1;
        }
        let op: String = chars[op_start..i].iter().filter(|c| **c != ' ').collect();
        if label.is_empty() || chars.get(i).is_none_or(|c| !matches!(c, '"' | '\'' | '`')) {
            panic!(
                "cannot read the label matchers in {:?}",
                chars.iter().collect::<String>()
            );
        }
        let (value, end) = skip_string(chars, i);
        i = end;
        if op == "=" {
            exact.push((label, value));
        }
    }
}

/// The samples of a text exposition: `(name, labels)` per line.
fn samples(exposition: &str) -> Vec<(String, BTreeMap<String, String>)> {
    let mut out = Vec::new();
    for line in exposition.lines().filter(|l| !l.starts_with('#')) {
        let Some(name_end) = line.find(['{', ' ']) else {
            continue;
        };
        let name = line[..name_end].to_string();
        let mut labels = BTreeMap::new();
        if line[name_end..].starts_with('{') {
            let chars: Vec<char> = line[name_end + 1..].chars().collect();
            labels.extend(matchers(&chars, 0).0);
        }
        out.push((name, labels));
    }
    out
}

/// Every selector the rules and the dashboard's panels and `instance` variable use, with where.
fn selectors_used() -> Vec<(String, Selector)> {
    let mut used = Vec::new();
    for (alert, expr) in rule_exprs() {
        let origin = format!("{RULES} {alert}");
        used.extend(selectors(&expr).into_iter().map(|s| (origin.clone(), s)));
    }
    let dashboard = dashboard();
    for (title, expr) in dashboard_exprs(&dashboard) {
        let origin = format!("{DASHBOARD} panel {title:?}");
        used.extend(selectors(&expr).into_iter().map(|s| (origin.clone(), s)));
    }
    used
}

/// The selectors in `used` no sample of `exposition` matches, as readable lines.
fn missing(used: &[(String, Selector)], exposition: &str) -> Vec<String> {
    let samples = samples(exposition);
    used.iter()
        .filter(|(_, s)| {
            !samples.iter().any(|(name, labels)| {
                *name == s.name && s.labels.iter().all(|(k, v)| labels.get(k) == Some(v))
            })
        })
        .map(|(origin, s)| format!("{origin}: {} {:?}", s.name, s.labels))
        .collect()
}

#[test]
fn selectors_and_samples_are_read_with_their_exact_label_matchers() {
    let expr = r#"sum(increase(redcar_x_total{instance=~"$instance", result="failed"}[5m]))
        unless on (job) redcar_y{kind = "a\"b",node!="n"} > 0 or label_replace(up, "d", "redcar_z", "", "")"#;
    assert_eq!(
        selectors(expr),
        [
            Selector {
                name: "redcar_x_total".into(),
                labels: vec![("result".into(), "failed".into())],
            },
            Selector {
                name: "redcar_y".into(),
                labels: vec![("kind".into(), "a\"b".into())],
            },
        ]
    );
    let exposition = "# TYPE redcar_x counter\nredcar_x_total{result=\"ok\"} 0\n\
        redcar_y{kind=\"a\\\"b\",node=\"\"} 0\n# EOF\n";
    let used: Vec<(String, Selector)> = selectors(expr)
        .into_iter()
        .map(|s| ("here".to_string(), s))
        .collect();
    assert_eq!(
        missing(&used, exposition),
        ["here: redcar_x_total [(\"result\", \"failed\")]"]
    );
}

/// A fresh redcar (default config, `--admin`), scraped once it is ready: every series the
/// examples query is there; the per-command ones after one command.
#[test]
fn every_series_the_dashboard_and_rules_query_is_in_the_first_scrape() {
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start(&cluster.seeds());
    let (status, first) = redcar.http_get("/metrics").expect("scrape /metrics");
    assert_eq!(status, 200, "{first}");

    let used = selectors_used();
    assert!(
        used.len() >= 40,
        "only {} selectors found in the examples: is the extraction broken?",
        used.len()
    );
    let (per_command, the_rest): (Vec<_>, Vec<_>) = used
        .into_iter()
        .partition(|(_, s)| PER_COMMAND.contains(&s.name.as_str()));
    assert!(
        !per_command.is_empty(),
        "the dashboard queries no per-command series"
    );
    let absent = missing(&the_rest, &first);
    assert!(
        absent.is_empty(),
        "series the examples query but a fresh redcar does not expose:\n  {}\n\
         first scrape:\n{first}",
        absent.join("\n  ")
    );

    assert_eq!(redcar.client().q(&["PING"]), Value::simple("PONG"));
    let (_, after_ping) = redcar.http_get("/metrics").expect("scrape /metrics");
    let absent = missing(&per_command, &after_ping);
    assert!(
        absent.is_empty(),
        "per-command series missing after a PING:\n  {}\n{after_ping}",
        absent.join("\n  ")
    );
}
