//! The alerting rules (examples/prometheus/) and the Grafana dashboard (examples/grafana/)
//! against a real redcar and a real promtool: every metric name their PromQL uses is a series
//! redcar exposes, promtool accepts the rules and passes their unit tests, every dashboard query
//! parses, and the dashboard has the variables and data source it is documented with.
//!
//! promtool comes from `scripts/ensure-promtool.sh` (Debian `prometheus`, run by `make test`);
//! `REDCAR_PROMTOOL` names another binary. A missing promtool fails the test with the command to
//! run: it never passes silently.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::redirects::{slot_and_another_owner, write_config};
use crate::support::{Redcar, RedisCluster, RedisServer, Value};

pub(crate) const RULES: &str = "examples/prometheus/redcar.rules.yml";
const RULE_TESTS: &str = "examples/prometheus/redcar.rules.test.yml";
const DASHBOARD: &str = "examples/grafana/redcar.json";
const INSTALL_HINT: &str = "run scripts/ensure-promtool.sh (`make test` does), which installs \
     `apt-get install -y --no-install-recommends prometheus` (it ships promtool); \
     or set REDCAR_PROMTOOL to a promtool binary";

fn repo_path(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn repo_file(path: &str) -> String {
    let full = repo_path(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("read {}: {e}", full.display()))
}

// === Metric names in PromQL ===

/// The metric names (identifiers starting with `redcar_`) in a PromQL expression, in order.
/// String literals are skipped, so a label value such as `job="redcar_x"` is not a name.
fn metric_names(expr: &str) -> Vec<String> {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut names = Vec::new();
    let mut chars = expr.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        if matches!(c, '"' | '\'' | '`') {
            let mut escaped = false;
            for (_, d) in chars.by_ref() {
                match d {
                    _ if escaped => escaped = false,
                    '\\' if c != '`' => escaped = true,
                    _ if d == c => break,
                    _ => {}
                }
            }
        } else if is_ident(c) {
            let mut end = start + c.len_utf8();
            while let Some(&(i, d)) = chars.peek() {
                if !is_ident(d) {
                    break;
                }
                end = i + d.len_utf8();
                chars.next();
            }
            let word = &expr[start..end];
            if word.starts_with("redcar_") {
                names.push(word.to_string());
            }
        }
    }
    names
}

/// Every series name a Prometheus text exposition offers: derived from its `# TYPE` lines, so
/// a family that has no sample yet (no redirect followed so far) counts too. A counter `X` is
/// stored as `X_total`, a histogram as `X_bucket`, `X_sum` and `X_count`; the family name alone
/// selects nothing. Panics if a sample's name is not derived from a `# TYPE` line, so the
/// derivation cannot silently miss a kind of series.
fn exposed_names(exposition: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in exposition.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let (family, kind) = rest.split_once(' ').expect("# TYPE NAME KIND");
        let suffixes: &[&str] = match kind.trim() {
            "counter" => &["_total"],
            "histogram" => &["_bucket", "_sum", "_count"],
            "summary" => &["", "_sum", "_count"],
            "info" => &["_info"],
            _ => &[""],
        };
        names.extend(suffixes.iter().map(|s| format!("{family}{s}")));
    }
    for line in exposition.lines().filter(|l| !l.starts_with('#')) {
        let name = line.split(['{', ' ']).next().unwrap_or("");
        assert!(
            name.is_empty() || names.contains(name),
            "sample {name} has no # TYPE line it derives from:\n{exposition}"
        );
    }
    names
}

/// `(where, name)` pairs whose name redcar does not expose, as readable lines (with a hint when
/// the name is a family name whose series carry a suffix).
fn unknown_names(used: &[(String, String)], exposed: &BTreeSet<String>) -> Vec<String> {
    let mut unknown = Vec::new();
    for (origin, name) in used {
        if exposed.contains(name) {
            continue;
        }
        let hint = if exposed.contains(&format!("{name}_total")) {
            format!(" (a counter: its series is {name}_total)")
        } else if exposed.contains(&format!("{name}_bucket")) {
            format!(" (a histogram: use {name}_bucket, {name}_sum or {name}_count)")
        } else {
            String::new()
        };
        unknown.push(format!("{origin}: {name}{hint}"));
    }
    unknown
}

// === What the examples use ===

/// Each alert's `expr` in the rules file: `(alert name, expr)`.
pub(crate) fn rule_exprs() -> Vec<(String, String)> {
    let rules: yaml_serde::Value = yaml_serde::from_str(&repo_file(RULES)).expect("rules YAML");
    let mut exprs = Vec::new();
    for group in rules["groups"].as_sequence().expect("groups") {
        for rule in group["rules"].as_sequence().expect("rules") {
            let name = rule["alert"].as_str().or(rule["record"].as_str());
            let expr = rule["expr"].as_str().expect("expr");
            exprs.push((name.unwrap_or("?").to_string(), expr.to_string()));
        }
    }
    exprs
}

/// The unit tests' input series and PromQL expressions: a test that feeds a misspelt series
/// would test nothing.
fn rule_test_exprs() -> Vec<String> {
    let tests: yaml_serde::Value =
        yaml_serde::from_str(&repo_file(RULE_TESTS)).expect("rule tests YAML");
    let mut exprs = Vec::new();
    for test in tests["tests"].as_sequence().expect("tests") {
        let series = test["input_series"].as_sequence().into_iter().flatten();
        exprs.extend(series.filter_map(|s| s["series"].as_str().map(String::from)));
        let promql = test["promql_expr_test"].as_sequence().into_iter().flatten();
        exprs.extend(promql.filter_map(|t| t["expr"].as_str().map(String::from)));
    }
    exprs
}

pub(crate) fn dashboard() -> serde_json::Value {
    serde_json::from_str(&repo_file(DASHBOARD)).expect("dashboard JSON")
}

/// Every panel of the dashboard, rows' nested panels included: `(title, panel)`.
fn panels(dashboard: &serde_json::Value) -> Vec<(String, &serde_json::Value)> {
    let mut out = Vec::new();
    let mut stack: Vec<&serde_json::Value> = dashboard["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .collect();
    while let Some(panel) = stack.pop() {
        if let Some(nested) = panel["panels"].as_array() {
            stack.extend(nested);
        }
        let title = panel["title"].as_str().unwrap_or("?").to_string();
        out.push((title, panel));
    }
    out
}

/// The PromQL of every panel target: `(panel title, expr)`.
pub(crate) fn dashboard_exprs(dashboard: &serde_json::Value) -> Vec<(String, String)> {
    let mut exprs = Vec::new();
    for (title, panel) in panels(dashboard) {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap_or_else(|| {
                panic!("dashboard panel {title:?}: a target without a PromQL expr")
            });
            exprs.push((title.clone(), expr.to_string()));
        }
    }
    exprs
}

/// The dashboard's template variables by name.
fn variable<'a>(dashboard: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    dashboard["templating"]["list"]
        .as_array()
        .expect("templating.list")
        .iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("dashboard has no `{name}` variable"))
}

/// Every metric name the rules, their tests and the dashboard use, with where it is used.
fn names_used() -> Vec<(String, String)> {
    let mut used = Vec::new();
    for (alert, expr) in rule_exprs() {
        used.extend(
            metric_names(&expr)
                .into_iter()
                .map(|n| (format!("{RULES} {alert}"), n)),
        );
    }
    for series in rule_test_exprs() {
        used.extend(
            metric_names(&series)
                .into_iter()
                .map(|n| (RULE_TESTS.to_string(), n)),
        );
    }
    let dashboard = dashboard();
    for (title, expr) in dashboard_exprs(&dashboard) {
        let origin = format!("{DASHBOARD} panel {title:?}");
        used.extend(metric_names(&expr).into_iter().map(|n| (origin.clone(), n)));
    }
    let instance = variable(&dashboard, "instance");
    let query = instance["query"]["query"]
        .as_str()
        .or(instance["query"].as_str())
        .expect("instance variable query");
    used.extend(
        metric_names(query)
            .into_iter()
            .map(|n| (format!("{DASHBOARD} variable instance"), n)),
    );
    used
}

// === promtool ===

/// The promtool to run, checked to start; fails with the install hint when there is none.
fn promtool() -> PathBuf {
    let promtool = std::env::var_os("REDCAR_PROMTOOL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("promtool"));
    let out = Command::new(&promtool)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "promtool is not installed ({}: {e}); {INSTALL_HINT}",
                promtool.display()
            )
        });
    assert!(
        out.status.success(),
        "promtool is not usable ({} --version failed: {}); {INSTALL_HINT}",
        promtool.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    promtool
}

fn run(promtool: &Path, args: &[&Path], sub: &[&str]) -> Output {
    Command::new(promtool)
        .args(sub)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run {} {sub:?}: {e}", promtool.display()))
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `promtool check rules` on a rules file holding each expression as a recording rule: promtool
/// parses every one. Grafana's variables are replaced by values Prometheus accepts first.
fn check_promql(promtool: &Path, dir: &Path, exprs: &[String]) -> Output {
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, expr) in exprs.iter().enumerate() {
        let expr = expr
            .replace("$__rate_interval", "5m")
            .replace("$__interval", "1m")
            .replace("$__range", "1h")
            .replace("$instance", ".*");
        assert!(!expr.contains('$'), "a Grafana variable left in {expr}");
        let quoted = serde_json::to_string(&expr).expect("quote");
        rules.push_str(&format!(
            "      - record: dashboard:expr_{i}\n        expr: {quoted}\n"
        ));
    }
    let file = dir.join("dashboard.rules.yml");
    std::fs::write(&file, rules).expect("write dashboard rules");
    run(promtool, &[&file], &["check", "rules"])
}

// === Tests ===

#[test]
fn metric_names_are_read_from_promql_and_checked_against_an_exposition() {
    let expr = r#"sum by (job) (rate(redcar_commands_total{job="redcar_fake",x='redcar_y'}[5m]))
        / on (job) histogram_quantile(0.9, rate(redcar_node_duration_seconds_bucket[$__rate_interval]))
        > 2 * my_redcar_other + redcar_commands"#;
    assert_eq!(
        metric_names(expr),
        [
            "redcar_commands_total",
            "redcar_node_duration_seconds_bucket",
            "redcar_commands"
        ]
    );
    let exposition = "# HELP redcar_commands Commands.\n# TYPE redcar_commands counter\n\
        redcar_commands_total{command=\"get\"} 1\n\
        # TYPE redcar_node_duration_seconds histogram\n# TYPE redcar_node_ejected gauge\n# EOF\n";
    let exposed = exposed_names(exposition);
    let used: Vec<(String, String)> = metric_names(expr)
        .into_iter()
        .chain([
            "redcar_nope_total".to_string(),
            "redcar_node_ejected".into(),
        ])
        .map(|n| ("x".to_string(), n))
        .collect();
    assert_eq!(
        unknown_names(&used, &exposed),
        [
            "x: redcar_commands (a counter: its series is redcar_commands_total)",
            "x: redcar_nope_total"
        ]
    );
}

/// The events the rules and the dashboard watch, made to happen: traffic with an error, a
/// blocking command, a reload, a followed MOVED, a slot nobody owns; and a fault rule and a
/// mirrored route are configured. (tests/it/first_scrape.rs checks that their series are there
/// at 0 before any of it.) Returns the exposition scraped at the end.
fn scrape_after_the_watched_events(cluster: &RedisCluster) -> String {
    let shadow = RedisServer::start();
    let yaml = |interval: &str| {
        format!(
            "cluster:\n  refresh_interval: {interval}\n  refresh_min_gap: 10ms\n\
             router:\n  faults:\n    - {{commands: [lindex], percentage: 0, delay: 1ms}}\n\
             backends:\n  shadow: {{kind: standalone, primary: \"{}\"}}\n\
             routes:\n  - {{prefix: \"o:\", backend: default, mirror: {{backend: shadow, percent: 100}}}}\n",
            shadow.addr()
        )
    };
    // An hour between refreshes: only a MOVED can teach redcar the migrated slot's owner.
    let config = write_config(&yaml("1h"));
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let mut c = redcar.client();
    for i in 0..20 {
        assert_eq!(c.q(&["SET", &format!("o:{i}"), "v"]), Value::simple("OK"));
        assert_eq!(c.q(&["GET", &format!("o:{i}")]), Value::bulk("v"));
    }
    assert!(c.q(&["LPUSH", "o:0", "x"]).is_error(), "WRONGTYPE");
    assert!(
        c.q(&["BLPOP", "o:list", "0.05"]).is_nil(),
        "BLPOP timed out"
    );
    assert!(!c.q(&["MGET", "o:1", "o:2", "o:3"]).is_error());

    // A reload (the old hour-long sleep still runs out first: the MOVED below ends it).
    std::fs::write(config.path_str(), yaml("100ms")).expect("rewrite config");
    let pid = redcar.pid().expect("redcar runs").to_string();
    let hup = Command::new("kill").args(["-HUP", &pid]).status();
    assert!(hup.is_ok_and(|s| s.success()), "kill -HUP {pid}");
    wait_for_series(&redcar, "redcar_config_reloads_total{result=\"ok\"}");

    let (slot, from, to) = slot_and_another_owner(cluster, "o:1");
    cluster.migrate_slot(slot, from, to);
    assert_eq!(c.q(&["GET", "o:1"]), Value::bulk("v"), "MOVED followed");
    wait_for_series(&redcar, "redcar_redirects_total{");

    // A slot without owner (its owner first, so no node hears a claim afterwards): every node
    // now answers a partial map, which redcar rejects at each refresh.
    let orphan = (slot + 1) % 16384;
    let owner = cluster.primary_port_for_slot(orphan);
    let mut nodes: Vec<&RedisServer> = cluster.nodes().iter().collect();
    nodes.sort_by_key(|n| n.port() != owner);
    for node in nodes {
        node.cmd(&["CLUSTER", "DELSLOTS", &orphan.to_string()]);
    }
    wait_for_series(
        &redcar,
        "redcar_topology_rejected_total{reason=\"partial\"}",
    );
    wait_for_series(
        &redcar,
        "redcar_topology_refreshes_total{result=\"failed\"}",
    );
    let (status, exposition) = redcar.http_get("/metrics").expect("scrape /metrics");
    assert_eq!(status, 200, "{exposition}");
    exposition
}

/// Waits up to 15 s for a sample whose line starts with `prefix` to count above 0 in
/// `/metrics` (most series are there at 0 from the start: tests/it/first_scrape.rs).
fn wait_for_series(redcar: &Redcar, prefix: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (_, metrics) = redcar.http_get("/metrics").expect("scrape /metrics");
        let counted = |l: &str| {
            let value = l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok());
            l.starts_with(prefix) && value.is_some_and(|v| v > 0.0)
        };
        if metrics.lines().any(counted) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no {prefix} series after 15 s:\n{metrics}\nlog:\n{}",
            redcar.log()
        );
        thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn alert_rules_and_dashboard_use_only_metrics_redcar_exposes() {
    let cluster = RedisCluster::start(3, 0);
    let exposition = scrape_after_the_watched_events(&cluster);
    let exposed = exposed_names(&exposition);

    let used = names_used();
    let distinct: BTreeSet<&str> = used.iter().map(|(_, n)| n.as_str()).collect();
    assert!(
        distinct.len() >= 30,
        "only {} metric names found in the examples: is the extraction broken? {distinct:?}",
        distinct.len()
    );
    let unknown = unknown_names(&used, &exposed);
    assert!(
        unknown.is_empty(),
        "names redcar does not expose:\n  {}\nredcar exposes:\n  {}",
        unknown.join("\n  "),
        exposed.iter().cloned().collect::<Vec<_>>().join("\n  ")
    );
}

#[test]
fn dashboard_has_its_variables_and_filters_every_query_by_instance() {
    let dashboard = dashboard();
    let version = dashboard["schemaVersion"].as_u64().expect("schemaVersion");
    assert!(version >= 36, "schemaVersion {version} < 36");
    let datasource = variable(&dashboard, "datasource");
    assert_eq!(datasource["type"], "datasource");
    assert_eq!(datasource["query"], "prometheus");
    assert_eq!(variable(&dashboard, "instance")["type"], "query");

    let mut queries = 0;
    for (title, panel) in panels(&dashboard) {
        if panel["type"] == "row" {
            continue;
        }
        assert_eq!(
            panel["datasource"]["uid"], "${datasource}",
            "panel {title:?} does not use the datasource variable"
        );
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap_or("");
            // Every selector of a redcar series is filtered by the instance variable.
            let selectors = metric_names(expr).len();
            let filtered = expr.matches(r#"{instance=~"$instance""#).count();
            assert!(
                selectors > 0 && filtered == selectors,
                "panel {title:?}: {selectors} series selectors, {filtered} filtered by \
                 instance=~\"$instance\": {expr}"
            );
            queries += 1;
        }
    }
    assert!(queries >= 30, "only {queries} queries in the dashboard");
}

#[test]
#[cfg_attr(
    not(feature = "toolchain-tests"),
    ignore = "needs promtool (scripts/ensure-promtool.sh): cargo test --features toolchain-tests (make test turns it on)"
)]
fn promtool_accepts_the_rules_and_their_unit_tests_pass_but_would_catch_a_change() {
    let promtool = promtool();
    let rules = repo_path(RULES);
    let tests = repo_path(RULE_TESTS);
    let out = run(&promtool, &[&rules], &["check", "rules"]);
    assert!(
        out.status.success(),
        "promtool check rules:\n{}",
        text(&out)
    );
    let out = run(&promtool, &[&tests], &["test", "rules"]);
    assert!(out.status.success(), "promtool test rules:\n{}", text(&out));

    // The unit tests can fail: with the critical alerts relabelled, the expected alerts differ.
    let dir = tempfile::tempdir().expect("temp dir");
    let mutated = repo_file(RULES).replace("severity: critical", "severity: page");
    assert_ne!(mutated, repo_file(RULES), "no critical alert to relabel");
    std::fs::write(dir.path().join("redcar.rules.yml"), mutated).expect("write rules");
    let copied = dir.path().join("redcar.rules.test.yml");
    std::fs::copy(&tests, &copied).expect("copy tests");
    let out = run(&promtool, &[&copied], &["test", "rules"]);
    assert!(
        !out.status.success() && text(&out).contains("severity=\"page\""),
        "promtool test rules passed with mutated rules:\n{}",
        text(&out)
    );
}

#[test]
#[cfg_attr(
    not(feature = "toolchain-tests"),
    ignore = "needs promtool (scripts/ensure-promtool.sh): cargo test --features toolchain-tests (make test turns it on)"
)]
fn promtool_parses_every_dashboard_query() {
    let promtool = promtool();
    let dir = tempfile::tempdir().expect("temp dir");
    let panels = dashboard_exprs(&dashboard());
    let exprs: Vec<String> = panels.iter().map(|(_, e)| e.clone()).collect();
    let out = check_promql(&promtool, dir.path(), &exprs);
    let listed: Vec<String> = panels
        .iter()
        .enumerate()
        .map(|(i, (title, expr))| format!("dashboard:expr_{i} (panel {title:?}): {expr}"))
        .collect();
    assert!(
        out.status.success(),
        "a dashboard query does not parse:\n{}\n{}",
        text(&out),
        listed.join("\n")
    );
    // ... and that check fails on a query that does not parse.
    let broken = vec!["sum(rate(redcar_commands_total[5m])".to_string()];
    let out = check_promql(&promtool, dir.path(), &broken);
    assert!(
        !out.status.success(),
        "a broken query passed:\n{}",
        text(&out)
    );
}
