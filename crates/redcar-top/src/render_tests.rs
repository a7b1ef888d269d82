//! Tests for the text layout.

use super::*;
use crate::stats::Latency;

fn command(name: &str, calls: f64, p50: f64, p99: f64) -> CommandRow {
    CommandRow {
        command: name.to_string(),
        calls_per_sec: Some(calls),
        errors_per_sec: Some(0.0),
        latency: Latency {
            p50_ms: Some(p50),
            p99_ms: Some(p99),
        },
    }
}

fn sample_frame() -> Frame {
    Frame {
        admin: "127.0.0.1:9190".to_string(),
        uptime_secs: Some(3.0 * 3600.0 + 12.0 * 60.0 + 5.0),
        window_secs: Some(1.0),
        commands_per_sec: Some(15234.0),
        errors_per_sec: Some(1.5),
        client_connections: Some(42.0),
        bytes_in_per_sec: Some(1.5 * 1024.0 * 1024.0),
        bytes_out_per_sec: Some(512.0),
        moved_per_sec: Some(0.0),
        ask_per_sec: None,
        slow_per_sec: Some(0.0),
        refresh_failures: Some(0.0),
        commands: vec![
            command("get", 12000.0, 0.12, 0.87),
            command("set", 3000.0, 0.15, 1.25),
            command("del", 234.0, 0.11, 250.0),
        ],
        nodes: vec![NodeRow {
            node: "127.0.0.1:7000".to_string(),
            requests_per_sec: Some(5078.0),
            errors_per_sec: Some(0.0),
            latency: Latency {
                p50_ms: Some(0.1),
                p99_ms: Some(0.5),
            },
            in_flight: Some(2.0),
            connections: Some(2.0),
        }],
        notice: None,
        hotkeys: None,
        near_cache: None,
        workers: None,
        users: Vec::new(),
    }
}

fn row_starting_with(text: &str, prefix: &str) -> usize {
    text.lines()
        .position(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting with {prefix:?} in\n{text}"))
}

#[test]
fn shows_the_header_and_the_rows_in_rate_order() {
    let text = render(&sample_frame(), 80);
    assert!(
        text.starts_with("redcar 127.0.0.1:9190   up 3h12m   rates over 1.0s\n"),
        "{text}"
    );
    assert!(text.contains("cmds/s 15234   errors/s 1.5   clients 42   in 1.5 MiB/s   out 512 B/s"));
    assert!(text.contains("ask/s -"), "missing metric shows -");
    assert!(
        !text.contains("near cache"),
        "no line while the cache is off"
    );
    let (get, set, del) = (
        row_starting_with(&text, "get "),
        row_starting_with(&text, "set "),
        row_starting_with(&text, "del "),
    );
    assert!(row_starting_with(&text, "COMMAND") < get && get < set && set < del);
    let get_row = &text.lines().nth(get).expect("row");
    assert_eq!(
        get_row.split_whitespace().collect::<Vec<_>>(),
        ["get", "12000", "0.0", "0.120", "0.870"]
    );
    let del_row = &text.lines().nth(del).expect("row");
    assert!(del_row.ends_with(" 250"), "{del_row}");
    let node = row_starting_with(&text, "127.0.0.1:7000");
    assert!(row_starting_with(&text, "NODE") < node);
    let node_row = text.lines().nth(node).expect("row");
    assert_eq!(
        node_row.split_whitespace().collect::<Vec<_>>(),
        ["127.0.0.1:7000", "5078", "0.0", "0.100", "0.500", "2", "2"]
    );
}

#[test]
fn every_line_fits_the_width() {
    let mut frame = sample_frame();
    frame
        .commands
        .push(command(&"x".repeat(200), 1.0, 1.0, 1.0));
    frame.nodes[0].node = "a-very-long-hostname.redis.example.internal:7000".to_string();
    frame.notice = Some("last scrape failed: ".to_string() + &"e".repeat(300));
    for width in [20, 40, 60, 80, 100, 200] {
        let text = render(&frame, width);
        for line in text.lines() {
            assert!(line.chars().count() <= width, "width {width}: {line:?}");
        }
    }
    let wide = render(&frame, 200);
    assert!(wide.contains("a-very-long-hostname.redis.example.internal:7000 "));
    let narrow = render(&frame, 80);
    assert!(narrow.contains("a-very-long-hostname.re… "));
}

#[test]
fn at_80_columns_numbers_are_not_cut() {
    let text = render(&sample_frame(), 80);
    assert!(!text.contains('…'), "{text}");
}

#[test]
fn many_commands_are_summarised() {
    let mut frame = sample_frame();
    frame.commands = (0..25)
        .map(|i| command(&format!("cmd{i:02}"), 100.0 - i as f64, 0.1, 0.2))
        .collect();
    let text = render(&frame, 80);
    assert!(text.contains("cmd19 "));
    assert!(!text.contains("cmd20 "));
    assert!(text.contains("… 5 more"));
}

#[test]
fn an_empty_frame_renders_dashes_and_placeholders() {
    let frame = Frame {
        admin: "127.0.0.1:9190".to_string(),
        ..Frame::default()
    };
    let text = render(&frame, 80);
    assert!(text.contains("up -   rates since start"));
    assert!(text.contains("cmds/s -   errors/s -   clients -   in -   out -"));
    assert!(text.contains("(no command metrics)"));
    assert!(text.contains("(no node metrics)"));
}

#[test]
fn notice_and_units() {
    let mut frame = sample_frame();
    frame.notice = Some("last scrape failed: connection refused; retrying".to_string());
    assert!(render(&frame, 80).contains("\n! last scrape failed: connection refused; retrying\n"));
    assert_eq!(uptime(59.0), "59s");
    assert_eq!(uptime(61.0), "1m01s");
    assert_eq!(uptime(2.0 * 86400.0 + 3600.0), "2d01h");
    assert_eq!(
        bytes_rate(3.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0),
        "3072.0 GiB/s"
    );
    assert_eq!(millis(12.345), "12.35");
}

#[test]
fn the_hot_key_panel_fits_the_width() {
    use crate::hotkeys::{BigRow, HotPanel, HotRow};
    let mut frame = sample_frame();
    frame.hotkeys = Some(HotPanel {
        enabled: true,
        sample_rate: 16,
        window_seconds: 10.0,
        hot: vec![HotRow {
            key: "k".repeat(300),
            command: "get".into(),
            node: "127.0.0.1:7000".into(),
            rate: 52_000.0,
        }],
        big: vec![BigRow {
            key: "blob".into(),
            command: "set".into(),
            node: "".into(),
            direction: "request".into(),
            size: 1 << 20,
        }],
    });
    for width in [40, 80, 200] {
        let text = render(&frame, width);
        assert!(text.contains("HOT KEY"), "{text}");
        assert!(text.contains("BIG KEY"), "{text}");
        for line in text.lines() {
            assert!(line.chars().count() <= width, "{width}: {line}");
        }
    }
}

#[test]
fn the_near_cache_line_shows_hits_ratio_and_size() {
    let frame = Frame {
        near_cache: Some(crate::stats::NearCacheLine {
            hits_per_sec: Some(9000.0),
            hit_ratio: Some(0.815),
            bytes: Some(3.0 * 1024.0 * 1024.0),
        }),
        ..sample_frame()
    };
    let text = render(&frame, 100);
    assert!(
        text.contains("near cache: hits/s 9000   hit ratio 82%   held 3.0 MiB"),
        "{text}"
    );
}

#[test]
fn the_workers_line_shows_each_workers_clients_and_busy_share_and_the_placement() {
    let frame = Frame {
        workers: Some(crate::stats::WorkersLine {
            workers: vec![(Some(48.0), Some(0.643)), (Some(2.0), None)],
            packing: Some(true),
        }),
        ..sample_frame()
    };
    let text = render(&frame, 120);
    assert!(
        text.contains("workers  0: 48 clients 64% busy · 1: 2 clients - busy   new clients packed"),
        "{text}"
    );
    assert!(!render(&sample_frame(), 120).contains("workers "));
}

#[test]
fn configured_users_get_a_table_of_their_own() {
    let mut frame = sample_frame();
    assert!(
        !render(&frame, 100).contains("USER"),
        "no table without users"
    );
    frame.users = vec![crate::users::UserRow {
        user: "batch".to_string(),
        connections: Some(3.0),
        commands_per_sec: Some(1000.0),
        errors_per_sec: Some(0.0),
        refused_per_sec: Some(2.0),
        limited_per_sec: Some(150.0),
        bytes_in_per_sec: Some(2048.0),
        bytes_out_per_sec: None,
        latency: Latency {
            p50_ms: Some(0.2),
            p99_ms: Some(1.5),
        },
    }];
    let text = render(&frame, 100);
    let header = row_starting_with(&text, "USER");
    let row = text.lines().nth(header + 1).expect("a row");
    assert!(row.starts_with("batch"), "{text}");
    for cell in ["3", "1000", "150", "2.0 KiB/s", "1.50"] {
        assert!(row.contains(cell), "{cell} in {row}");
    }
    assert!(text.lines().all(|l| l.chars().count() <= 100));
}
