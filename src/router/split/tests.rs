//! Tests for slot grouping, per-slot commands and merging split replies.

use super::*;
use crate::commands::lookup;
use crate::commands::policy::split_merge;
use crate::protocol::Request;

fn args(line: &str) -> Request {
    Request::from_args::<Vec<Bytes>, Bytes>({
        line.split(' ')
            .map(|t| Bytes::copy_from_slice(t.as_bytes()))
            .collect()
    })
}

/// Plans `args` with its keys at every `step`-th argument from 1; not encoded yet.
fn unencoded(args: Args<'_>) -> Split {
    let spec = lookup(args).expect("known command");
    let merge = split_merge(spec).expect("splittable");
    let keys: Vec<usize> = (1..args.len()).step_by(merge.step()).collect();
    plan(spec, merge, args, &keys, None).expect("valid")
}

/// [`unencoded`], then encoded with its parts in planning order.
fn planned(line: &str) -> Split {
    let args = args(line);
    let mut split = unencoded(args.args());
    let order: Vec<usize> = (0..split.parts.len()).collect();
    split.encode(args.args(), &[], &order);
    split
}

/// Merges one reply per part; a failed part's node reads `127.0.0.1:7000`.
fn merge(split: &Split, replies: &[&[u8]]) -> Bytes {
    split.merge_replies(replies, |_| "127.0.0.1:7000".to_string())
}

#[test]
fn groups_keys_by_slot_in_first_seen_order() {
    // {a} and {b} hash to different slots; same tag, same slot.
    let split = planned("MGET {a}1 {b}1 {a}2 {b}2 {c}1");
    let groups: Vec<(u16, Vec<usize>)> = split
        .parts_summary()
        .into_iter()
        .map(|(_, slot, positions)| (slot, positions))
        .collect();
    assert_eq!(groups.len(), 3);
    assert_eq!(groups[0], (key_slot(b"a"), vec![0, 2]));
    assert_eq!(groups[1], (key_slot(b"b"), vec![1, 3]));
    assert_eq!(groups[2], (key_slot(b"c"), vec![4]));
    assert!(split.parts.iter().all(|p| p.route.is_none()));
}

#[test]
fn parts_carry_the_keys_and_values_of_their_slot() {
    let split = planned("MSET {a}1 x {b}1 y {a}2 z");
    assert_eq!(split.parts.len(), 2);
    assert_eq!(
        &split.part_payload(0)[..],
        b"*5\r\n$4\r\nMSET\r\n$4\r\n{a}1\r\n$1\r\nx\r\n$4\r\n{a}2\r\n$1\r\nz\r\n"
    );
    assert_eq!(
        &split.part_payload(1)[..],
        b"*3\r\n$4\r\nMSET\r\n$4\r\n{b}1\r\n$1\r\ny\r\n"
    );
    assert!(split.write);
    assert!(!planned("MGET {a}1 {b}1").write);
}

#[test]
fn parts_encoded_in_sending_order_lie_back_to_back_in_that_order() {
    let args = args("MGET {a}1 {b}1 {c}1 {a}2");
    let mut split = unencoded(args.args());
    // As if {c} and {a} shared a node and {b} had one of its own.
    split.encode(args.args(), &[], &[2, 0, 1]);
    let (a, b, c) = (&split.parts[0], &split.parts[1], &split.parts[2]);
    assert_eq!(c.bytes.start, 0);
    assert_eq!(
        c.bytes.end, a.bytes.start,
        "{{c}} then {{a}}: one slice for their node"
    );
    assert_eq!(a.bytes.end, b.bytes.start);
    assert_eq!(b.bytes.end, split.payload.len());
    assert_eq!(
        &split.part_payload(0)[..],
        b"*3\r\n$4\r\nMGET\r\n$4\r\n{a}1\r\n$4\r\n{a}2\r\n"
    );
    assert_eq!(
        &split.part_payload(2)[..],
        b"*2\r\n$4\r\nMGET\r\n$4\r\n{c}1\r\n"
    );
}

#[test]
fn mset_with_a_missing_value_is_an_arity_error() {
    let args = args("MSET {a}1 x {b}1");
    let spec = lookup(args.args()).expect("known");
    let error = plan(spec, SplitMerge::AllOk, args.args(), &[1, 3], None).expect_err("odd");
    assert_eq!(
        &error[..],
        b"-ERR wrong number of arguments for 'mset' command\r\n"
    );
}

#[test]
fn mget_values_go_back_to_their_key_positions() {
    let split = planned("MGET {a}1 {b}1 {a}2 {b}2");
    let merged = merge(
        &split,
        &[
            b"*2\r\n$2\r\na1\r\n$-1\r\n",
            b"*2\r\n$2\r\nb1\r\n$2\r\nb2\r\n",
        ],
    );
    assert_eq!(
        &merged[..],
        b"*4\r\n$2\r\na1\r\n$2\r\nb1\r\n$-1\r\n$2\r\nb2\r\n"
    );
}

#[test]
fn a_failed_part_is_an_error_naming_its_slot_and_node() {
    let split = planned("MGET {a}1 {b}1");
    let merged = merge(
        &split,
        &[
            b"*1\r\n$2\r\na1\r\n",
            b"-ERR redcar: connection refused\r\n",
        ],
    );
    assert_eq!(
        &merged[..],
        format!(
            "-ERR redcar: MGET failed for the keys in slot {} (127.0.0.1:7000): ERR redcar: connection refused\r\n",
            key_slot(b"b")
        )
        .as_bytes()
    );
    // A short array is never passed on as an answer.
    let short = merge(&split, &[b"*0\r\n", b"*1\r\n$1\r\nb\r\n"]);
    assert!(short.starts_with(b"-ERR redcar: MGET failed"), "{short:?}");
}

#[test]
fn mset_is_ok_only_if_every_part_is() {
    let split = planned("MSET {a}1 x {b}1 y");
    let ok = merge(&split, &[b"+OK\r\n", b"+OK\r\n"]);
    assert_eq!(&ok[..], b"+OK\r\n");
    let failed = merge(&split, &[b"+OK\r\n", b"-OOM no\r\n"]);
    let text = String::from_utf8_lossy(&failed);
    assert!(text.starts_with("-ERR redcar: MSET failed"), "{text}");
    assert!(
        text.contains("OOM no; some keys may have been written"),
        "{text}"
    );
}

#[test]
fn counts_are_summed() {
    for command in ["DEL", "UNLINK", "EXISTS", "TOUCH"] {
        let split = planned(&format!("{command} {{a}}1 {{b}}1 {{a}}2"));
        let merged = merge(&split, &[b":2\r\n", b":1\r\n"]);
        assert_eq!(&merged[..], b":3\r\n", "{command}");
    }
    let split = planned("DEL {a}1 {b}1");
    let failed = merge(&split, &[b":1\r\n", b"-ERR x\r\n"]);
    assert!(String::from_utf8_lossy(&failed).contains("may have been deleted"));
}

#[test]
fn parts_copied_from_the_request_match_parts_encoded_afresh() {
    // Empty values and a part of 5 keys (an 11-argument MSET) take the other paths.
    let mut line = vec!["MSET".to_string()];
    for (i, tag) in ["a", "b", "a", "c", "a", "a", "b", "a"].iter().enumerate() {
        line.push(format!("{{{tag}}}{i}"));
        line.push(if i % 3 == 1 {
            String::new()
        } else {
            format!("v{i}")
        });
    }
    for line in [line.join(" "), "MGET {a}1 {b}1 {a}2 x {c}1".to_string()] {
        let request = crate::protocol::Request::from_args(line.split(' '));
        let args = request.args();
        let mut fresh = unencoded(args);
        let mut copied = unencoded(args);
        let order: Vec<usize> = (0..fresh.parts.len()).rev().collect();
        fresh.encode(args, &[], &order);
        copied.encode(args, request.raw(), &order);
        assert_eq!(copied.payload, fresh.payload, "{line}");
        assert_eq!(copied.parts, fresh.parts, "{line}");
    }
}

#[test]
fn part_replies_are_measured_like_the_general_scan_does() {
    let frames: [&[u8]; 14] = [
        b"+OK\r\n",
        b"+QUEUED\r\n",
        b"-MOVED 1 127.0.0.1:7001\r\n",
        b":12\r\n",
        b"*0\r\n",
        b"*-1\r\n",
        b"*2\r\n$2\r\nab\r\n$-1\r\n",
        b"*1\r\n$0\r\n\r\n",
        b"*2\r\n_\r\n$3\r\na\r\n\r\n",
        b"*1\r\n*2\r\n:1\r\n:2\r\n",
        b"*10\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n$1\r\nf\r\n$1\r\ng\r\n$1\r\nh\r\n$1\r\ni\r\n$1\r\nj\r\n",
        b"*1\r\n$12345678901\r\nx\r\n",
        b"$5\r\nhello\r\n",
        b"%1\r\n+a\r\n:1\r\n",
    ];
    for frame in frames {
        let general = reply_frame_len(frame, &reply_limits()).ok().flatten();
        assert_eq!(
            part_reply_len(frame),
            general,
            "{:?}",
            frame.escape_ascii().to_string()
        );
        // Followed by the next part's reply; cut short.
        let mut two = frame.to_vec();
        two.extend_from_slice(b"+OK\r\n");
        assert_eq!(
            part_reply_len(&two),
            general,
            "{:?}",
            frame.escape_ascii().to_string()
        );
        for cut in 1..frame.len() {
            let general = reply_frame_len(&frame[..cut], &reply_limits())
                .ok()
                .flatten();
            assert_eq!(
                part_reply_len(&frame[..cut]),
                general,
                "{frame:?} cut at {cut}"
            );
        }
    }
}
