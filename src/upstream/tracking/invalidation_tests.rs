//! Tests of the invalidation connection's pure parts: the BCAST commands to send and the
//! parse of an invalidation push.

use super::{bcast_commands, parse_invalidation};
use bytes::Bytes;

fn list(p: &[&str]) -> Vec<Bytes> {
    p.iter()
        .map(|p| Bytes::copy_from_slice(p.as_bytes()))
        .collect()
}

#[test]
fn bcast_prefixes_are_added_or_registered_again_when_they_overlap() {
    assert_eq!(bcast_commands(&list(&["a"]), &list(&["a"])), None);
    let (added, now, 1) = bcast_commands(&list(&["a"]), &list(&["a", "b"])).expect("adds b") else {
        panic!("one reply owed");
    };
    assert_eq!(
        &added[..],
        b"*6\r\n$6\r\nCLIENT\r\n$8\r\nTRACKING\r\n$2\r\non\r\n$5\r\nBCAST\r\n$6\r\nPREFIX\r\n$1\r\nb\r\n"
    );
    assert_eq!(now, list(&["a", "b"]));
    // "" covers "a": off, then on for every key.
    let (again, now, 2) = bcast_commands(&list(&["a"]), &list(&[""])).expect("again") else {
        panic!("two replies owed");
    };
    assert_eq!(
        &again[..],
        &b"*3\r\n$6\r\nCLIENT\r\n$8\r\nTRACKING\r\n$3\r\noff\r\n\
           *4\r\n$6\r\nCLIENT\r\n$8\r\nTRACKING\r\n$2\r\non\r\n$5\r\nBCAST\r\n"[..]
    );
    assert_eq!(now, list(&[""]));
}

#[test]
fn invalidation_pushes_are_read_as_keys_or_a_flush() {
    let keys = parse_invalidation(b">2\r\n$10\r\ninvalidate\r\n*2\r\n$2\r\nk4\r\n$0\r\n\r\n");
    assert_eq!(keys, Some(Some(vec!["k4".into(), "".into()])));
    assert_eq!(
        parse_invalidation(b">2\r\n$10\r\ninvalidate\r\n_\r\n"),
        Some(None)
    );
    assert_eq!(
        parse_invalidation(b">3\r\n$7\r\nmessage\r\n$1\r\na\r\n$1\r\nb\r\n"),
        None
    );
    assert_eq!(parse_invalidation(b"+OK\r\n"), None);
    assert_eq!(
        parse_invalidation(b">2\r\n$10\r\ninvalidate\r\n*1\r\n$5\r\nk\r\n"),
        None,
        "a key longer than the frame"
    );
}
