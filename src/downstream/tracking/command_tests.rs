//! Redis 7.0.15's replies to CLIENT TRACKING / CACHING / TRACKINGINFO, as measured.

use bytes::Bytes;

use super::super::command::TrackingMode;
use super::*;
use crate::protocol::Request;

fn args(line: &str) -> Request {
    Request::from_args::<Vec<Bytes>, Bytes>({
        line.split(' ')
            .map(|a| Bytes::copy_from_slice(a.as_bytes()))
            .collect()
    })
}

fn refused(line: &str, mode: Option<&TrackingMode>) -> String {
    let err = parse(args(line).args(), mode, |id| id == 7).expect_err(line);
    String::from_utf8(err).unwrap_or_default()
}

#[test]
fn options_are_checked_as_redis_does() {
    let cases = [
        ("CLIENT TRACKING foo", "ERR syntax error"),
        ("CLIENT TRACKING on foo", "ERR syntax error"),
        ("CLIENT TRACKING on redirect", "ERR syntax error"),
        ("CLIENT TRACKING on prefix", "ERR syntax error"),
        ("CLIENT TRACKING maybe", "ERR syntax error"),
        ("CLIENT TRACKING on redirect 999", "ERR The client ID you want redirect to does not exist"),
        ("CLIENT TRACKING on redirect 0", "ERR The client ID you want redirect to does not exist"),
        ("CLIENT TRACKING off redirect 5", "ERR The client ID you want redirect to does not exist"),
        ("CLIENT TRACKING on redirect abc", "ERR value is not an integer or out of range"),
        ("CLIENT TRACKING on redirect 7 redirect 7", "ERR A client can only redirect to a single other client"),
        ("CLIENT TRACKING on prefix a", "ERR PREFIX option requires BCAST mode to be enabled"),
        ("CLIENT TRACKING on optin optout", "ERR You can't specify both OPTIN mode and OPTOUT mode"),
        ("CLIENT TRACKING on bcast optin", "ERR OPTIN and OPTOUT are not compatible with BCAST"),
        (
            "CLIENT TRACKING on bcast prefix a prefix ab",
            "ERR Prefix 'a' overlaps with another provided prefix 'ab'. Prefixes for a single client must not overlap.",
        ),
        (
            "CLIENT TRACKING on bcast prefix a prefix b prefix a",
            "ERR Prefix 'a' overlaps with another provided prefix 'a'. Prefixes for a single client must not overlap.",
        ),
    ];
    for (line, error) in cases {
        assert_eq!(refused(line, None), error, "{line}");
    }
    let on = parse(
        args("CLIENT TRACKING ON OPTIN noloop REDIRECT 7").args(),
        None,
        |id| id == 7,
    );
    assert_eq!(
        on,
        Ok(Switch {
            on: true,
            redirect: 7,
            optin: true,
            noloop: true,
            ..Switch::default()
        })
    );
    assert!(parse(args("CLIENT TRACKING off bcast").args(), None, |_| false).is_ok_and(|s| !s.on));
}

#[test]
fn a_mode_in_force_limits_what_may_change() {
    let optin = TrackingMode {
        optin: true,
        ..TrackingMode::default()
    };
    assert_eq!(
        refused("CLIENT TRACKING on optout", Some(&optin)),
        "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode."
    );
    assert_eq!(
        refused("CLIENT TRACKING on bcast", Some(&optin)),
        "ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode."
    );
    let bcast = TrackingMode {
        bcast: true,
        prefixes: vec![Bytes::from_static(b"a")],
        ..TrackingMode::default()
    };
    assert_eq!(
        refused("CLIENT TRACKING on bcast prefix ab", Some(&bcast)),
        "ERR Prefix 'ab' overlaps with an existing prefix 'a'. Prefixes for a single client must not overlap."
    );
    assert!(parse(
        args("CLIENT TRACKING on bcast prefix b").args(),
        Some(&bcast),
        |_| false
    )
    .is_ok());
    // BCAST without a prefix is not checked against the ones in force (Redis adds "").
    assert!(parse(
        args("CLIENT TRACKING on bcast").args(),
        Some(&bcast),
        |_| false
    )
    .is_ok());
}

#[test]
fn caching_needs_the_matching_mode() {
    assert_eq!(
        caching(b"yes", None),
        Err(&b"ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled"[..])
    );
    let mut optin = TrackingMode {
        optin: true,
        ..TrackingMode::default()
    };
    assert_eq!(
        caching(b"no", Some(&mut optin)),
        Err(&b"ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode."[..])
    );
    assert_eq!(caching(b"maybe", Some(&mut optin)), Err(SYNTAX));
    assert_eq!(caching(b"YES", Some(&mut optin)), Ok(()));
    assert!(optin.caching);
    let mut optout = TrackingMode {
        optout: true,
        ..TrackingMode::default()
    };
    assert_eq!(
        caching(b"yes", Some(&mut optout)),
        Err(&b"ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode."[..])
    );
}

#[test]
fn trackinginfo_matches_redis_in_both_protocols() {
    assert_eq!(
        &info(None, false, Protocol::Resp2)[..],
        b"*6\r\n$5\r\nflags\r\n*1\r\n$3\r\noff\r\n$8\r\nredirect\r\n:-1\r\n$8\r\nprefixes\r\n*0\r\n"
    );
    let optin = TrackingMode {
        optin: true,
        caching: true,
        noloop: true,
        ..TrackingMode::default()
    };
    assert_eq!(
        &info(Some(&optin), false, Protocol::Resp3)[..],
        &b"%3\r\n$5\r\nflags\r\n~4\r\n$2\r\non\r\n$5\r\noptin\r\n$11\r\ncaching-yes\r\n$6\r\nnoloop\r\n\
           $8\r\nredirect\r\n:0\r\n$8\r\nprefixes\r\n*0\r\n"[..]
    );
    let bcast = TrackingMode {
        bcast: true,
        redirect: 9,
        prefixes: vec![Bytes::new(), Bytes::from_static(b"a")],
        ..TrackingMode::default()
    };
    assert_eq!(
        &info(Some(&bcast), false, Protocol::Resp2)[..],
        &b"*6\r\n$5\r\nflags\r\n*2\r\n$2\r\non\r\n$5\r\nbcast\r\n$8\r\nredirect\r\n:9\r\n\
           $8\r\nprefixes\r\n*2\r\n$0\r\n\r\n$1\r\na\r\n"[..]
    );
    assert_eq!(redirect(None), -1);
    assert_eq!(redirect(Some(&bcast)), 9);
}
