//! Tests for merging the primaries' INFO texts.

use super::*;

fn node<'a>(addr: &'a str, text: &'a str) -> NodeInfo<'a> {
    NodeInfo { addr, text }
}

/// The value of `field` in section `section` of a merged INFO text.
fn field(info: &str, section: &str, field: &str) -> Option<String> {
    let mut inside = false;
    for line in info.split("\r\n") {
        if let Some(name) = line.strip_prefix("# ") {
            inside = name == section;
        } else if inside {
            if let Some(value) = line.strip_prefix(field).and_then(|r| r.strip_prefix(':')) {
                return Some(value.to_string());
            }
        }
    }
    None
}

#[test]
fn keyspace_sums_keys_and_weights_avg_ttl_by_expires() {
    let a = "# Keyspace\r\ndb0:keys=10,expires=2,avg_ttl=1000\r\n";
    let b = "# Keyspace\r\ndb0:keys=5,expires=6,avg_ttl=3000\r\n";
    let c = "# Keyspace\r\n";
    let d = "# Keyspace\r\ndb0:keys=1,expires=0,avg_ttl=0\r\ndb1:keys=1,expires=0,avg_ttl=0\r\n";
    let merged = merge_info(
        &[
            node("a:1", a),
            node("b:1", b),
            node("c:1", c),
            node("d:1", d),
        ],
        None,
    );
    assert_eq!(
        merged,
        "# Keyspace\r\ndb0:keys=16,expires=8,avg_ttl=2500\r\ndb1:keys=1,expires=0,avg_ttl=0\r\n"
    );
    let empty = merge_info(&[node("a:1", c), node("b:1", c)], None);
    assert_eq!(empty, "# Keyspace\r\n");
}

#[test]
fn command_and_error_stats_are_summed_per_entry() {
    let a = "# Commandstats\r\ncmdstat_get:calls=3,usec=30,usec_per_call=10.00,rejected_calls=1,failed_calls=0\r\n\r\n# Errorstats\r\nerrorstat_MOVED:count=2\r\n";
    let b = "# Commandstats\r\ncmdstat_get:calls=1,usec=50,usec_per_call=50.00,rejected_calls=0,failed_calls=1\r\ncmdstat_set:calls=2,usec=3,usec_per_call=1.50,rejected_calls=0,failed_calls=0\r\n\r\n# Errorstats\r\nerrorstat_ERR:count=1\r\n";
    let merged = merge_info(&[node("a:1", a), node("b:1", b)], None);
    assert_eq!(
        field(&merged, "Commandstats", "cmdstat_get").as_deref(),
        Some("calls=4,usec=80,usec_per_call=20.00,rejected_calls=1,failed_calls=1")
    );
    assert_eq!(
        field(&merged, "Commandstats", "cmdstat_set").as_deref(),
        Some("calls=2,usec=3,usec_per_call=1.50,rejected_calls=0,failed_calls=0")
    );
    assert_eq!(
        field(&merged, "Errorstats", "errorstat_MOVED").as_deref(),
        Some("count=2")
    );
    assert_eq!(
        field(&merged, "Errorstats", "errorstat_ERR").as_deref(),
        Some("count=1")
    );
    assert_eq!(field(&merged, "Commandstats", "redcar_source"), None);
}

#[test]
fn counters_sum_even_when_equal_and_levels_take_the_largest() {
    let a = "# Clients\r\nconnected_clients:2\r\nclient_recent_max_input_buffer:20480\r\n\r\n# Memory\r\nused_memory:1048576\r\nused_memory_human:1.00M\r\nmem_fragmentation_ratio:1.50\r\nused_memory_peak_perc:92.07%\r\nmaxmemory:0\r\nmaxmemory_human:0B\r\nmem_allocator:jemalloc-5.3.0\r\n\r\n# Stats\r\ninstantaneous_input_kbps:0.25\r\nexpired_stale_perc:0.00\r\n";
    let b = "# Clients\r\nconnected_clients:2\r\nclient_recent_max_input_buffer:8\r\n\r\n# Memory\r\nused_memory:2097152\r\nused_memory_human:2.00M\r\nmem_fragmentation_ratio:7.27\r\nused_memory_peak_perc:100.00%\r\nmaxmemory:1000\r\nmaxmemory_human:1000B\r\nmem_allocator:jemalloc-5.3.0\r\n\r\n# Stats\r\ninstantaneous_input_kbps:1.5\r\nexpired_stale_perc:3.10\r\n";
    let merged = merge_info(&[node("a:1", a), node("b:1", b)], None);
    let get = |section, name| field(&merged, section, name);
    assert_eq!(get("Clients", "connected_clients").as_deref(), Some("4"));
    assert_eq!(
        get("Clients", "client_recent_max_input_buffer").as_deref(),
        Some("20480")
    );
    assert_eq!(
        get("Clients", "redcar_source").as_deref(),
        Some("sum of 2 primaries")
    );
    assert_eq!(get("Memory", "used_memory").as_deref(), Some("3145728"));
    assert_eq!(get("Memory", "used_memory_human").as_deref(), Some("3.00M"));
    assert_eq!(
        get("Memory", "mem_fragmentation_ratio").as_deref(),
        Some("7.27")
    );
    assert_eq!(
        get("Memory", "used_memory_peak_perc").as_deref(),
        Some("100.00%")
    );
    assert_eq!(get("Memory", "maxmemory").as_deref(), Some("0"));
    assert_eq!(get("Memory", "maxmemory_human").as_deref(), Some("0B"));
    assert_eq!(
        get("Memory", "mem_allocator").as_deref(),
        Some("jemalloc-5.3.0")
    );
    assert_eq!(
        get("Stats", "instantaneous_input_kbps").as_deref(),
        Some("1.75")
    );
    assert_eq!(get("Stats", "expired_stale_perc").as_deref(), Some("3.10"));
}

#[test]
fn per_node_sections_come_from_the_first_primary_with_the_lowest_version() {
    let a = "# Server\r\nredis_version:7.2.4\r\nprocess_id:11\r\ntcp_port:7000\r\n\r\n# Replication\r\nrole:master\r\nconnected_slaves:1\r\n";
    let b = "# Server\r\nredis_version:7.0.15\r\nprocess_id:22\r\ntcp_port:7001\r\n\r\n# Replication\r\nrole:master\r\nconnected_slaves:2\r\n";
    let merged = merge_info(
        &[node("127.0.0.1:7000", a), node("127.0.0.1:7001", b)],
        None,
    );
    let get = |section, name| field(&merged, section, name);
    assert_eq!(
        get("Server", "redcar_source").as_deref(),
        Some("primary 127.0.0.1:7000 (1 of 2)")
    );
    assert_eq!(get("Server", "redis_version").as_deref(), Some("7.0.15"));
    assert_eq!(get("Server", "process_id").as_deref(), Some("11"));
    assert_eq!(get("Server", "tcp_port").as_deref(), Some("7000"));
    assert_eq!(get("Replication", "connected_slaves").as_deref(), Some("1"));
}

#[test]
fn own_section_comes_first_in_redis_layout() {
    let a =
        "# Server\r\nredis_version:7.0.15\r\n\r\n# Keyspace\r\ndb0:keys=1,expires=0,avg_ttl=0\r\n";
    let own = "# Redcar\r\nredcar_version:0.1.0\r\n";
    let merged = merge_info(&[node("a:1", a)], Some(own));
    assert_eq!(
        merged,
        "# Redcar\r\nredcar_version:0.1.0\r\n\r\n\
         # Server\r\nredcar_source:primary a:1 (1 of 1)\r\nredis_version:7.0.15\r\n\r\n\
         # Keyspace\r\ndb0:keys=1,expires=0,avg_ttl=0\r\n"
    );
    // Sections no primary knows (`INFO redcar` sent on) leave only redcar's own.
    assert_eq!(merge_info(&[node("a:1", "")], Some(own)), own);
    assert_eq!(merge_info(&[node("a:1", "")], None), "");
}

#[test]
fn numbers_and_sizes_format_like_redis() {
    assert_eq!(bytes_to_human(512), "512B");
    assert_eq!(bytes_to_human(1536), "1.50K");
    assert_eq!(bytes_to_human(3 << 30), "3.00G");
    assert_eq!(sum(&["1", "2"]).as_deref(), Some("3"));
    assert_eq!(sum(&["0.001", "0.1"]).as_deref(), Some("0.101"));
    assert_eq!(sum(&["1", "x"]), None);
    assert_eq!(largest(&["x", "y"]), "x");
}
