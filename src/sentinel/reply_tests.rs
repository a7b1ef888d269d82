//! Tests of parsing Sentinel's replies and `+switch-master` messages.

use bytes::Bytes;

use super::*;
use crate::protocol::Limits;

fn frame(raw: &str) -> Frame {
    Frame::from_bytes(Bytes::from(raw.to_string()), &Limits::default()).expect("valid frame")
}

/// A flat field/value array as Sentinel sends it.
fn fields(pairs: &[(&str, &str)]) -> String {
    let mut out = format!("*{}\r\n", pairs.len() * 2);
    for (k, v) in pairs {
        out.push_str(&format!("${}\r\n{k}\r\n${}\r\n{v}\r\n", k.len(), v.len()));
    }
    out
}

fn replica(port: &str, flags: &str, link: &str) -> String {
    fields(&[
        ("name", &format!("127.0.0.1:{port}")),
        ("ip", "127.0.0.1"),
        ("port", port),
        ("flags", flags),
        ("master-link-status", link),
    ])
}

#[test]
fn a_view_has_the_primary_its_epoch_and_the_healthy_replicas() {
    let addr = frame("*2\r\n$9\r\n127.0.0.1\r\n$4\r\n6379\r\n");
    let master = frame(&fields(&[
        ("name", "mymaster"),
        ("flags", "master"),
        ("config-epoch", "3"),
    ]));
    let replicas = format!(
        "*5\r\n{}{}{}{}{}",
        replica("6382", "slave", "ok"),
        replica("6381", "slave", "ok"),
        replica("6383", "s_down,slave", "ok"),
        replica("6384", "slave,disconnected", "err"),
        replica("6385", "slave", "err"),
    );
    let view = view("mymaster", &addr, &master, &frame(&replicas)).expect("a view");
    assert_eq!(view.primary, "127.0.0.1:6379");
    assert_eq!(view.epoch, 3);
    assert_eq!(view.replicas, ["127.0.0.1:6381", "127.0.0.1:6382"]);
}

#[test]
fn an_unknown_master_and_error_replies_are_errors() {
    let master = frame(&fields(&[("config-epoch", "0")]));
    let none = frame("*0\r\n");
    let unknown = view("nope", &frame("*-1\r\n"), &master, &none).expect_err("unknown");
    assert!(unknown.contains("`nope`"), "{unknown}");
    let noauth = frame("-NOAUTH Authentication required.\r\n");
    let error = view("m", &noauth, &noauth, &noauth).expect_err("noauth");
    assert_eq!(error, "NOAUTH Authentication required.");
    let addr = frame("*2\r\n$9\r\n127.0.0.1\r\n$4\r\n6379\r\n");
    let no_epoch = frame(&fields(&[("name", "m")]));
    assert!(view("m", &addr, &no_epoch, &none).is_err());
}

#[test]
fn switch_master_messages_name_the_new_primary_of_this_master_only() {
    let message = |payload: &str| {
        frame(&format!(
            "*3\r\n$7\r\nmessage\r\n$14\r\n+switch-master\r\n${}\r\n{payload}\r\n",
            payload.len()
        ))
    };
    let ours = message("mymaster 127.0.0.1 6379 127.0.0.1 6380");
    assert_eq!(
        switched("mymaster", &ours).as_deref(),
        Some("127.0.0.1:6380")
    );
    assert_eq!(switched("other", &ours), None);
    assert_eq!(switched("mymaster", &message("garbage")), None);
    let confirmation = frame("*3\r\n$9\r\nsubscribe\r\n$14\r\n+switch-master\r\n:1\r\n");
    assert_eq!(switched("mymaster", &confirmation), None);
}
