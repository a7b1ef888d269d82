//! `/hotkeys` against known traffic on a real cluster: a key read far more than the others is
//! named first, for its command and node, at about the rate it was sent; a 1 MB value written
//! and read back is listed as a big request and a big reply.

use std::time::Instant;

use crate::redirects::write_config;
use crate::support::{Redcar, RedisCluster, Value};

fn hotkeys(redcar: &Redcar) -> serde_json::Value {
    let (status, body) = redcar.http_get("/hotkeys").expect("admin reachable");
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

#[test]
fn the_hot_key_is_named_first_with_a_plausible_rate() {
    let cluster = RedisCluster::start(3, 0);
    // The default sampling (1 in 16): the estimate is scaled back up.
    let redcar = Redcar::start(&cluster.seeds());
    let mut c = redcar.client();
    assert_eq!(c.q(&["SET", "hot:key", "v"]), Value::simple("OK"));
    let started = Instant::now();
    let (pipelines, depth) = (200, 100);
    let mut hot_sent = 0u64;
    for p in 0..pipelines {
        let batch: Vec<Vec<String>> = (0..depth)
            .map(|i| {
                let key = if i % 10 == 9 {
                    format!("cold:{p}:{i}")
                } else {
                    "hot:key".to_string()
                };
                vec!["GET".to_string(), key]
            })
            .collect();
        hot_sent += batch.iter().filter(|cmd| cmd[1] == "hot:key").count() as u64;
        let replies = c.pipeline(&batch).expect("pipeline");
        assert_eq!(replies.len(), depth);
    }
    let sending = started.elapsed().as_secs_f64();
    let report = hotkeys(&redcar);
    assert_eq!(report["enabled"], true, "{report}");
    let first = &report["hot"][0];
    assert_eq!(first["key"], "hot:key", "{report}");
    assert_eq!(first["command"], "get", "{report}");
    let node = format!("127.0.0.1:{}", cluster.primary_for_key("hot:key").port());
    assert_eq!(first["node"], node.as_str(), "{report}");
    // 18,000 GETs of the hot key, estimated from about 1,100 samples: within 20 %.
    let count = first["count"].as_f64().expect("count");
    let sent = hot_sent as f64;
    assert!(
        (count - sent).abs() / sent < 0.2,
        "{count} vs {sent}: {report}"
    );
    // The rate is over the window covered so far (since start-up, under 10 s): at most what
    // the traffic's own rate was, and the count over that window.
    let window = report["window_seconds"].as_f64().expect("window");
    let rate = first["rate"].as_f64().expect("rate");
    assert!(
        window >= sending * 0.9 && window <= 10.0,
        "{window}: {report}"
    );
    assert!(rate <= 1.25 * sent / sending, "{rate}: {report}");
    assert!((rate * window - count).abs() <= count * 0.01, "{report}");
    // The cold keys, each read once, are far behind.
    let second = report["hot"][1]["count"].as_f64().unwrap_or(0.0);
    assert!(second < count / 10.0, "{report}");
}

#[test]
fn a_1mb_value_is_listed_as_a_big_request_and_a_big_reply() {
    let cluster = RedisCluster::start(3, 0);
    let redcar = Redcar::start(&cluster.seeds());
    let mut c = redcar.client();
    let value = "x".repeat(1 << 20);
    assert_eq!(c.q(&["SET", "big:blob", &value]), Value::simple("OK"));
    assert_eq!(c.q(&["GET", "big:blob"]), Value::bulk(&value));
    assert_eq!(c.q(&["SET", "small", "v"]), Value::simple("OK"));
    let report = hotkeys(&redcar);
    let big = report["big"].as_array().expect("big list");
    assert_eq!(big.len(), 2, "{report}");
    let node = format!("127.0.0.1:{}", cluster.primary_for_key("big:blob").port());
    let set = big
        .iter()
        .find(|b| b["direction"] == "request")
        .expect("the SET");
    assert_eq!(set["key"], "big:blob");
    assert_eq!(set["command"], "set");
    assert_eq!(set["node"], node.as_str());
    assert!(set["size"].as_u64().expect("size") > 1 << 20, "{report}");
    let get = big
        .iter()
        .find(|b| b["direction"] == "reply")
        .expect("the GET");
    assert_eq!(
        (&get["key"], &get["command"]),
        (&"big:blob".into(), &"get".into())
    );
    assert!(get["size"].as_u64().expect("size") > 1 << 20, "{report}");
    assert!(get["at_ms"].as_u64().expect("when") > 1_700_000_000_000);
    // The status page's document carries the same lists.
    let (status, body) = redcar.http_get("/status.json").expect("status");
    assert_eq!(status, 200);
    assert!(body.contains("\"big:blob\""), "{body}");
}

#[test]
fn off_means_empty_lists() {
    let cluster = RedisCluster::start(3, 0);
    let config = write_config("hotkeys:\n  enabled: false\n");
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let mut c = redcar.client();
    let value = "x".repeat(1 << 20);
    assert_eq!(c.q(&["SET", "big:blob", &value]), Value::simple("OK"));
    let report = hotkeys(&redcar);
    assert_eq!(report["enabled"], false, "{report}");
    assert_eq!(report["hot"].as_array().map(Vec::len), Some(0));
    assert_eq!(report["big"].as_array().map(Vec::len), Some(0));
}
