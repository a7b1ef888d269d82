//! The record's wire form: every field round-trips, versions are checked, damage is refused.

use std::time::Duration;

use bytes::Bytes;

use super::codec::DecodeError;
use super::*;

fn full() -> HandedOver {
    HandedOver {
        id: 42,
        peer: "127.0.0.1:51234".into(),
        listener: "tcp".into(),
        login: Some(Login {
            user: "app".into(),
            credential: Some([7; 32]),
        }),
        protocol: 3,
        name: Some(Bytes::from_static(b"worker-1")),
        lib_name: Some(Bytes::from_static(b"redis-py")),
        lib_ver: Some(Bytes::from_static(b"5.0")),
        db: 0,
        failed_logins: 2,
        facade: Some(FacadeRecord {
            host: "redcar.example".into(),
            ip: "10.0.0.5".into(),
            hostname: Some("redcar.example".into()),
            port: 6380,
            tls: true,
            id: "ab".repeat(20),
        }),
        tracking: Some(TrackingRecord {
            redirect: 9,
            bcast: true,
            optin: false,
            optout: true,
            noloop: true,
            prefixes: vec![Bytes::from_static(b"user:"), Bytes::from_static(b"s:")],
        }),
        subscriptions: Subscriptions {
            channels: vec![Bytes::from_static(b"news")],
            patterns: vec![Bytes::from_static(b"n*")],
            shard_channels: vec![Bytes::from_static(b"{a}s")],
        },
        age: Duration::from_millis(123_456),
        idle: Duration::from_millis(789),
        input: Bytes::from_static(b"*2\r\n$3\r\nGET\r\n$1\r\n"),
    }
}

#[test]
fn every_field_round_trips() {
    let record = full();
    assert_eq!(HandedOver::decode(&record.encode(CURRENT)), Ok(record));
    let bare = HandedOver {
        id: 1,
        listener: "unix".into(),
        protocol: 2,
        ..HandedOver::default()
    };
    assert_eq!(HandedOver::decode(&bare.encode(CURRENT)), Ok(bare));
}

#[test]
fn a_version_this_build_does_not_read_is_refused_by_number() {
    let bytes = full().encode(CURRENT + 1);
    assert_eq!(
        HandedOver::decode(&bytes),
        Err(DecodeError::Version(CURRENT + 1))
    );
    assert_eq!(
        HandedOver::decode(&full().encode(0)),
        Err(DecodeError::Version(0))
    );
}

#[test]
fn unknown_fields_are_skipped_so_a_later_release_may_add_some() {
    let bytes = full().encode(CURRENT);
    // A field of a later release, before the end marker.
    let end = bytes.len() - 5;
    let mut later = bytes[..end].to_vec();
    later.extend_from_slice(&[200, 0, 0, 0, 3, b'x', b'y', b'z']);
    later.extend_from_slice(&bytes[end..]);
    assert_eq!(HandedOver::decode(&later), Ok(full()));
}

#[test]
fn a_cut_or_damaged_record_is_refused_never_misread() {
    let bytes = full().encode(CURRENT);
    for cut in 0..bytes.len() {
        let result = HandedOver::decode(&bytes[..cut]);
        assert!(result.is_err(), "cut at {cut} of {} was read", bytes.len());
    }
    assert_eq!(HandedOver::decode(b"XXXX\0\x01"), Err(DecodeError::Magic));
    let mut no_id = Vec::from(&b"RCHO\0\x01"[..]);
    no_id.extend_from_slice(&[
        6, 0, 0, 0, 1, 2, 3, 0, 0, 0, 3, b't', b'c', b'p', 255, 0, 0, 0, 0,
    ]);
    assert_eq!(HandedOver::decode(&no_id), Err(DecodeError::Missing("id")));
    let mut bad_protocol = full();
    bad_protocol.protocol = 4;
    assert_eq!(
        HandedOver::decode(&bad_protocol.encode(CURRENT)),
        Err(DecodeError::Field(6))
    );
}
