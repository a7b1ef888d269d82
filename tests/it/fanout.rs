//! Keyless commands over the whole keyspace (DBSIZE, KEYS, SCAN, RANDOMKEY, FLUSHALL, INFO)
//! fanned out to every primary, scripts loaded everywhere, and NOSCRIPT healing.

use std::collections::{BTreeSet, HashSet};

use crate::support::{Redcar, RedisCluster, Value};

fn error_of(v: &Value) -> String {
    v.error()
        .map(str::to_string)
        .unwrap_or_else(|| panic!("expected an error, got {v:?}"))
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("expected an array, got {v:?}"))
        .iter()
        .map(|k| k.as_str().expect("string element").to_string())
        .collect()
}

/// Every key returned by a full SCAN with `extra` options; panics on a runaway loop.
fn scan_all(c: &mut crate::support::RespClient, extra: &[&str]) -> Vec<String> {
    let mut cursor = "0".to_string();
    let mut keys = Vec::new();
    for _ in 0..10_000 {
        let mut args = vec!["SCAN", cursor.as_str()];
        args.extend_from_slice(extra);
        let reply = c.q(&args);
        let parts = reply
            .as_array()
            .unwrap_or_else(|| panic!("SCAN: {reply:?}"));
        assert_eq!(parts.len(), 2, "{reply:?}");
        keys.extend(strings(&parts[1]));
        cursor = parts[0].as_str().expect("cursor").to_string();
        if cursor == "0" {
            return keys;
        }
    }
    panic!("SCAN did not come back to cursor 0");
}

#[test]
fn keyspace_commands_cover_every_primary_exactly_once() {
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start(&cluster.seeds());
    let mut c = redcar.client();
    let written: BTreeSet<String> = (0..300).map(|i| format!("fan:{i}")).collect();
    for key in &written {
        assert_eq!(c.q(&["SET", key, "v"]), Value::simple("OK"));
    }
    assert_eq!(c.q(&["HSET", "fan:hash", "f", "v"]), Value::Int(1));
    let mut all = written.clone();
    all.insert("fan:hash".to_string());
    for &port in &cluster.primary_ports() {
        let n = cluster
            .node_by_port(port)
            .cmd(&["DBSIZE"])
            .as_int()
            .expect("DBSIZE");
        assert!(n > 0, "every primary holds some keys ({port}: {n})");
    }

    assert_eq!(c.q(&["DBSIZE"]), Value::Int(cluster.primaries_dbsize()));
    assert_eq!(c.q(&["DBSIZE"]), Value::Int(all.len() as i64));

    let keys: Vec<String> = strings(&c.q(&["KEYS", "*"]));
    assert_eq!(keys.len(), all.len(), "no duplicates");
    assert_eq!(keys.into_iter().collect::<BTreeSet<_>>(), all);
    let some: BTreeSet<String> = strings(&c.q(&["KEYS", "fan:1?"])).into_iter().collect();
    let want: BTreeSet<String> = (10..20).map(|i| format!("fan:{i}")).collect();
    assert_eq!(some, want);

    let scanned = scan_all(&mut c, &["COUNT", "10"]);
    let unique: HashSet<&String> = scanned.iter().collect();
    // Redis SCAN may repeat a key while a node rehashes; the set must still be exact.
    assert!(
        scanned.len() >= all.len(),
        "{} < {}",
        scanned.len(),
        all.len()
    );
    assert_eq!(unique.len(), all.len());
    assert_eq!(scanned.into_iter().collect::<BTreeSet<_>>(), all);
    let matched: BTreeSet<String> = scan_all(&mut c, &["MATCH", "fan:1?", "COUNT", "50"])
        .into_iter()
        .collect();
    assert_eq!(matched, want);
    let hashes = scan_all(&mut c, &["COUNT", "100", "TYPE", "hash"]);
    assert_eq!(hashes, vec!["fan:hash".to_string()]);
    let invalid = error_of(&c.q(&["SCAN", "notanumber"]));
    assert_eq!(invalid, "ERR invalid cursor");
    let foreign = error_of(&c.q(&["SCAN", "7"]));
    assert!(foreign.contains("start again from cursor 0"), "{foreign}");

    for _ in 0..5 {
        let key = c.q(&["RANDOMKEY"]);
        let key = key.as_str().unwrap_or_else(|| panic!("RANDOMKEY: {key:?}"));
        assert!(all.contains(key), "{key} exists");
    }

    // Another redcar on the same cluster refuses flushes by configuration.
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("redcar.yaml");
    std::fs::write(&config, "router:\n  allow_flush: false\n").expect("write config");
    let config = config.display().to_string();
    let guarded = Redcar::start_with(&cluster.seeds(), &["--config", &config]);
    let mut g = guarded.client();
    for flush in ["FLUSHALL", "FLUSHDB"] {
        assert_eq!(
            error_of(&g.q(&[flush])),
            format!("ERR redcar: {flush} is disabled (router.allow_flush: false)")
        );
    }
    assert_eq!(g.q(&["DBSIZE"]), Value::Int(all.len() as i64));

    assert_eq!(c.q(&["FLUSHALL"]), Value::simple("OK"));
    assert_eq!(cluster.primaries_dbsize(), 0);
    assert_eq!(c.q(&["DBSIZE"]), Value::Int(0));
    assert_eq!(c.q(&["RANDOMKEY"]), Value::Bulk(None));
    assert_eq!(c.q(&["KEYS", "*"]), Value::Array(Some(vec![])));
    assert_eq!(c.q(&["SET", "fan:again", "1"]), Value::simple("OK"));
    assert_eq!(c.q(&["FLUSHDB"]), Value::simple("OK"));
    assert_eq!(c.q(&["DBSIZE"]), Value::Int(0));
    assert_eq!(c.q(&["PING"]), Value::simple("PONG"));
}

#[test]
fn scripts_and_functions_reach_every_primary_and_noscript_heals() {
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start(&cluster.seeds());
    let mut c = redcar.client();
    let ports = cluster.primary_ports();
    let keys: Vec<String> = ports
        .iter()
        .map(|&p| cluster.key_on_node("sc:", p))
        .collect();

    let script = "return redis.call('INCR', KEYS[1])";
    let sha = c.q(&["SCRIPT", "LOAD", script]);
    let sha = sha
        .as_str()
        .unwrap_or_else(|| panic!("SCRIPT LOAD: {sha:?}"))
        .to_string();
    assert_eq!(sha.len(), 40);
    for key in &keys {
        assert_eq!(c.q(&["EVALSHA", &sha, "1", key]), Value::Int(1), "{key}");
    }
    let unknown = "0000000000000000000000000000000000000000";
    assert_eq!(
        c.q(&["SCRIPT", "EXISTS", &sha, unknown]),
        Value::Array(Some(vec![Value::Int(1), Value::Int(0)]))
    );
    // Flushed on one primary only: SCRIPT EXISTS is an AND across primaries.
    let flushed = cluster.node_by_port(ports[0]);
    assert_eq!(flushed.cmd(&["SCRIPT", "FLUSH"]), Value::simple("OK"));
    assert_eq!(
        c.q(&["SCRIPT", "EXISTS", &sha]),
        Value::Array(Some(vec![Value::Int(0)]))
    );
    // NOSCRIPT healing: redcar saw the body in SCRIPT LOAD, loads it again and retries.
    assert_eq!(c.q(&["EVALSHA", &sha, "1", &keys[0]]), Value::Int(2));
    assert_eq!(
        flushed.cmd(&["SCRIPT", "EXISTS", &sha]),
        Value::Array(Some(vec![Value::Int(1)]))
    );

    // Learned from EVAL this time.
    let body = "return redis.call('GET', KEYS[1])";
    assert_eq!(c.q(&["EVAL", body, "1", &keys[1]]), Value::bulk("1"));
    let victim = cluster.node_by_port(ports[1]);
    assert_eq!(victim.cmd(&["SCRIPT", "FLUSH"]), Value::simple("OK"));
    let sha2 = victim.cmd(&["SCRIPT", "LOAD", body]);
    let sha2 = sha2.as_str().expect("sha").to_string();
    assert_eq!(victim.cmd(&["SCRIPT", "FLUSH"]), Value::simple("OK"));
    assert_eq!(c.q(&["EVALSHA", &sha2, "1", &keys[1]]), Value::bulk("1"));
    assert_eq!(c.q(&["EVALSHA_RO", &sha2, "1", &keys[1]]), Value::bulk("1"));
    // A script redcar never saw still gets the node's NOSCRIPT.
    let e = error_of(&c.q(&["EVALSHA", unknown, "1", &keys[2]]));
    assert!(e.starts_with("NOSCRIPT"), "{e}");
    let cross = error_of(&c.q(&["EVAL", body, "2", &keys[0], &keys[1]]));
    assert!(cross.starts_with("CROSSSLOT "), "{cross}");

    assert_eq!(c.q(&["SCRIPT", "FLUSH"]), Value::simple("OK"));
    for &port in &ports {
        assert_eq!(
            cluster.node_by_port(port).cmd(&["SCRIPT", "EXISTS", &sha]),
            Value::Array(Some(vec![Value::Int(0)])),
            "flushed on {port}"
        );
    }

    let library = "#!lua name=redcarlib\nredis.register_function('rc_get', function(keys) return redis.call('GET', keys[1]) end)";
    assert_eq!(
        c.q(&["FUNCTION", "LOAD", library]),
        Value::bulk("redcarlib")
    );
    for key in &keys {
        assert!(!c.q(&["FCALL", "rc_get", "1", key]).is_error(), "{key}");
    }
    let again = error_of(&c.q(&["FUNCTION", "LOAD", library]));
    assert!(
        again.starts_with("ERR redcar: FUNCTION LOAD failed on 127.0.0.1:"),
        "{again}"
    );
    assert!(again.contains("already exists"), "{again}");
    assert_eq!(
        c.q(&["FUNCTION", "DELETE", "redcarlib"]),
        Value::simple("OK")
    );
    let gone = error_of(&c.q(&["FCALL", "rc_get", "1", &keys[0]]));
    assert!(gone.contains("Function not found"), "{gone}");
    assert_eq!(c.q(&["FUNCTION", "FLUSH"]), Value::simple("OK"));
}

/// The value of `field` in an INFO text (first occurrence, any section).
fn info_field(info: &str, field: &str) -> Option<String> {
    info.lines().find_map(|line| {
        let value = line.trim_end().strip_prefix(field)?.strip_prefix(':')?;
        Some(value.to_string())
    })
}

/// `keys=` or `expires=` of an INFO keyspace line such as `db0:keys=3,expires=1,avg_ttl=0`.
fn keyspace_count(info: &str, what: &str) -> i64 {
    let db0 = info_field(info, "db0").unwrap_or_else(|| panic!("no db0 line in {info}"));
    db0.split(',')
        .find_map(|kv| kv.strip_prefix(what)?.strip_prefix('=')?.parse().ok())
        .unwrap_or_else(|| panic!("no {what}= in {db0}"))
}

#[test]
fn info_sums_the_keyspace_and_adds_redcars_own_section() {
    let cluster = RedisCluster::start(3, 0);
    let redcar = Redcar::start(&cluster.seeds());
    let mut c = redcar.client();
    for i in 0..200 {
        let key = format!("info:{i}");
        let set = if i % 4 == 0 {
            c.q(&["SET", &key, "v", "EX", "1000"])
        } else {
            c.q(&["SET", &key, "v"])
        };
        assert_eq!(set, Value::simple("OK"), "{key}");
    }
    for &port in &cluster.primary_ports() {
        let n = cluster.node_by_port(port).cmd(&["DBSIZE"]).as_int();
        assert!(n.is_some_and(|n| n > 0), "keys on every primary ({port})");
    }

    let keyspace = c.q(&["INFO", "keyspace"]).to_text();
    assert!(keyspace.starts_with("# Keyspace"), "{keyspace}");
    assert!(!keyspace.contains("# Redcar"), "{keyspace}");
    let dbsize = c.q(&["DBSIZE"]).as_int().expect("DBSIZE");
    assert_eq!(dbsize, 200);
    assert_eq!(keyspace_count(&keyspace, "keys"), dbsize);
    assert_eq!(keyspace_count(&keyspace, "expires"), 50);

    let all = c.q(&["INFO"]).to_text();
    assert!(all.starts_with("# Redcar\r\n"), "{all}");
    assert_eq!(info_field(&all, "cluster_primaries").as_deref(), Some("3"));
    assert_eq!(
        info_field(&all, "cluster_slots_covered").as_deref(),
        Some("16384")
    );
    assert_eq!(info_field(&all, "connected_clients").as_deref(), Some("1"));
    for section in ["# Server", "# Clients", "# Stats", "# Keyspace"] {
        assert!(all.contains(section), "{section} in {all}");
    }
    let source = info_field(&all, "redcar_source").expect("Server names its primary");
    assert!(source.starts_with("primary 127.0.0.1:"), "{source}");
    assert_eq!(keyspace_count(&all, "keys"), dbsize);

    let own = c.q(&["INFO", "redcar"]).to_text();
    assert!(own.starts_with("# Redcar\r\nredcar_version:"), "{own}");
    assert!(!own.contains("# Server"), "{own}");
    let stats = c.q(&["INFO", "commandstats"]).to_text();
    let set = info_field(&stats, "cmdstat_set").expect("cmdstat_set");
    assert!(
        set.starts_with("calls=200,"),
        "summed over primaries: {set}"
    );
    assert_eq!(c.q(&["INFO", "nosuchsection"]), Value::bulk(""));
}
