//! Tests of the hot-key and big-key monitor: sampling, windows, the biggest requests.

use super::*;

fn request(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

fn config() -> HotKeysConfig {
    HotKeysConfig {
        sample_rate: 8,
        big_value_threshold: 1000,
        ..HotKeysConfig::default()
    }
}

#[test]
fn the_sampler_takes_one_in_rate_on_average_at_random_gaps() {
    let hot = HotKeys::new(&config(), 2);
    let mut sampler = hot.sampler(42);
    let mut picked = Vec::new();
    for i in 0..80_000u32 {
        if sampler.sample() != 0 {
            picked.push(i);
        }
    }
    let share = picked.len() as f64 / 80_000.0;
    assert!((share - 1.0 / 8.0).abs() < 0.01, "{share}");
    // Not every 8th: a pipeline repeating 8 commands is not always sampled at the same one.
    let phases: std::collections::HashSet<u32> = picked.iter().map(|i| i % 8).collect();
    assert_eq!(phases.len(), 8);
    // A client sending one command per busy spell is sampled in about one spell in eight
    // (unbiased, so its commands still count eight each).
    let sampled = (0..8_000).filter(|_| hot.sampler(42).sample() != 0).count();
    assert!((850..=1150).contains(&sampled), "{sampled}");
    let off = HotKeys::new(
        &HotKeysConfig {
            enabled: false,
            ..config()
        },
        2,
    );
    let mut sampler = off.sampler(1);
    assert!((0..10_000).all(|_| sampler.sample() == 0));
    assert!(!off.wants(0, 1 << 30, 1 << 30));
}

#[test]
fn sampled_commands_are_scaled_back_to_rates_per_command_and_node() {
    let hot = HotKeys::new(&config(), 4);
    let now = Instant::now() + Duration::from_secs(10);
    let get_hot = request(&[b"GET", b"hot"]);
    let get_cold = request(&[b"GET", b"cold"]);
    let mut sampler = hot.sampler(7);
    for client in 0..8u64 {
        for i in 0..10_000 {
            let raw = if i % 10 == 0 { &get_cold } else { &get_hot };
            let weight = sampler.sample();
            if hot.wants(weight, raw.len(), 5) {
                hot.observe(Observed {
                    client,
                    command: "get",
                    raw,
                    key_arg: 1,
                    node: "127.0.0.1:7000",
                    weight,
                    reply_len: 5,
                    now,
                });
            }
        }
    }
    let report = hot.report(now);
    assert_eq!(report.hot[0].key, "hot");
    assert_eq!(report.hot[0].node, "127.0.0.1:7000");
    assert_eq!(report.hot[0].command, "get");
    // 72,000 commands for `hot`, estimated from about 9,000 samples.
    let count = report.hot[0].count as f64;
    assert!((count - 72_000.0).abs() / 72_000.0 < 0.05, "{count}");
    assert!(report.hot[0].rate > 0.0);
    assert_eq!(report.hot[1].key, "cold");
    assert!(report.big.is_empty());
}

#[test]
fn big_requests_and_replies_are_kept_with_their_key_and_node() {
    let hot = HotKeys::new(&config(), 1);
    let value = vec![b'x'; 5000];
    let set = request(&[b"SET", b"big:1", &value]);
    let get = request(&[b"GET", b"big:1"]);
    let now = Instant::now();
    assert!(hot.wants(0, set.len(), 5));
    for (raw, reply_len) in [(&set, 5), (&get, 5011), (&get, 5011)] {
        hot.observe(Observed {
            client: 3,
            command: if raw == &set { "set" } else { "get" },
            raw,
            key_arg: 1,
            node: "127.0.0.1:7001",
            weight: 0,
            reply_len,
            now,
        });
    }
    let report = hot.report(now);
    assert!(report.hot.is_empty(), "nothing was sampled");
    assert_eq!(report.big.len(), 2);
    assert_eq!(report.big[0].key, "big:1");
    assert_eq!(report.big[0].command, "set");
    assert_eq!(report.big[0].direction, Direction::Request);
    assert_eq!(report.big[0].size, set.len() as u64);
    assert_eq!(report.big[1].command, "get");
    assert_eq!(report.big[1].direction, Direction::Reply);
    assert_eq!((report.big[1].size, report.big[1].seen), (5011, 2));
    assert_eq!(report.big[1].node, "127.0.0.1:7001");
    assert!(report.big[1].at_ms > 0);
}

#[test]
fn a_shard_with_the_defaults_stays_near_its_documented_size() {
    // docs/configuration.md: about 190 bytes per counter with its index, heap and place
    // entries; 4 × top_k counters in 5 sub-windows, plus the big list: about 125 KB a shard.
    let config = HotKeysConfig::default();
    let per_counter = std::mem::size_of::<sketch::Counter>() + 2 * 4 + 4 + 4 * 2;
    let per_big = std::mem::size_of::<big::Big>();
    let shard =
        per_counter * config.counters() * config::BUCKETS as usize + per_big * config.big_top_n;
    assert!(per_counter <= 200, "{per_counter}");
    assert!((100_000..=140_000).contains(&shard), "{shard}");
}
