//! Tests for slot grouping, per-slot commands and merging split replies.

use super::*;
use crate::commands::lookup;
use crate::commands::policy::split_merge;

fn args(line: &str) -> Vec<Bytes> {
    line.split(' ')
        .map(|t| Bytes::copy_from_slice(t.as_bytes()))
        .collect()
}

/// Plans `args` with its keys at every `step`-th argument from 1; not encoded yet.
fn unencoded(args: &[Bytes]) -> Split {
    let spec = lookup(args).expect("known command");
    let merge = split_merge(spec).expect("splittable");
    let keys: Vec<usize> = (1..args.len()).step_by(merge.step()).collect();
    plan(spec, merge, args, &keys).expect("valid")
}

/// [`unencoded`], then encoded with its parts in planning order.
fn planned(line: &str) -> Split {
    let args = args(line);
    let mut split = unencoded(&args);
    let order: Vec<usize> = (0..split.parts.len()).collect();
    split.encode(&args, &order);
    split
}

/// Merges one reply per part; a failed part's node reads `127.0.0.1:7000`.
fn merge(split: &Split, replies: &[&[u8]]) -> Bytes {
    let replies: Vec<Bytes> = replies.iter().map(|r| Bytes::copy_from_slice(r)).collect();
    split.merge_replies(&replies, |_| "127.0.0.1:7000".to_string())
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
    let mut split = unencoded(&args);
    // As if {c} and {a} shared a node and {b} had one of its own.
    split.encode(&args, &[2, 0, 1]);
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
    let spec = lookup(&args).expect("known");
    let error = plan(spec, SplitMerge::AllOk, &args, &[1, 3]).expect_err("odd");
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
