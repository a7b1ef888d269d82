//! Frame parsing, encoding and accessors.

use bytes::{Bytes, BytesMut};

use crate::protocol::{Frame, Limits, ProtocolError};

fn parse(input: &[u8]) -> (Result<Option<Frame>, ProtocolError>, Vec<u8>) {
    let mut buf = BytesMut::from(input);
    let result = Frame::parse(&mut buf, &Limits::default());
    (result, buf.to_vec())
}

fn bytes(b: &'static [u8]) -> Bytes {
    Bytes::from_static(b)
}

fn cases() -> Vec<(&'static [u8], Frame)> {
    vec![
        (b"+OK\r\n", Frame::Simple(bytes(b"OK"))),
        (
            b"-MOVED 3999 127.0.0.1:6381\r\n",
            Frame::Error(bytes(b"MOVED 3999 127.0.0.1:6381")),
        ),
        (b":0\r\n", Frame::Integer(0)),
        (b":-2\r\n", Frame::Integer(-2)),
        (b":-9223372036854775808\r\n", Frame::Integer(i64::MIN)),
        (b"$5\r\nhe\r\nl\r\n", Frame::Bulk(bytes(b"he\r\nl"))),
        (b"$0\r\n\r\n", Frame::Bulk(bytes(b""))),
        (b"$-1\r\n", Frame::Null),
        (b"*-1\r\n", Frame::NullArray),
        (b"*0\r\n", Frame::Array(vec![])),
        (
            b"*3\r\n:1\r\n$-1\r\n*2\r\n+a\r\n-b\r\n",
            Frame::Array(vec![
                Frame::Integer(1),
                Frame::Null,
                Frame::Array(vec![Frame::Simple(bytes(b"a")), Frame::Error(bytes(b"b"))]),
            ]),
        ),
    ]
}

#[test]
fn parses_every_type_and_encodes_it_back_identically() {
    for (wire, frame) in cases() {
        let (result, rest) = parse(wire);
        assert_eq!(
            result,
            Ok(Some(frame.clone())),
            "{:?}",
            wire.escape_ascii().to_string()
        );
        assert!(rest.is_empty());
        assert_eq!(&frame.to_bytes()[..], wire);
        assert_eq!(frame.encoded_len(), wire.len());
        let mut out = BytesMut::from(&b"prefix"[..]);
        frame.encode(&mut out);
        assert_eq!(&out[6..], wire);
        assert_eq!(
            Frame::from_bytes(Bytes::from_static(wire), &Limits::default()),
            Ok(frame)
        );
    }
}

#[test]
fn payloads_are_zero_copy_slices() {
    let input = Bytes::from_static(b"*2\r\n$3\r\nabc\r\n+OK\r\n");
    let frame = Frame::from_bytes(input.clone(), &Limits::default()).expect("valid");
    let items = frame.as_array().expect("array");
    let base = input.as_ptr() as usize;
    assert_eq!(
        items[0].as_bytes().expect("bulk").as_ptr() as usize,
        base + 8
    );
    assert_eq!(
        items[1].as_bytes().expect("simple").as_ptr() as usize,
        base + 14
    );
}

#[test]
fn incomplete_input_is_left_untouched() {
    let (result, rest) = parse(b"*2\r\n:1\r\n");
    assert_eq!(result, Ok(None));
    assert_eq!(rest, b"*2\r\n:1\r\n");
}

#[test]
fn parse_removes_one_frame_and_leaves_the_rest() {
    let (result, rest) = parse(b":1\r\n:2\r\n");
    assert_eq!(result, Ok(Some(Frame::Integer(1))));
    assert_eq!(rest, b":2\r\n");
}

#[test]
fn from_bytes_wants_exactly_one_frame() {
    let limits = Limits::default();
    assert_eq!(
        Frame::from_bytes(bytes(b"$3\r\nab"), &limits),
        Err(ProtocolError::Incomplete)
    );
    assert_eq!(
        Frame::from_bytes(bytes(b""), &limits),
        Err(ProtocolError::Incomplete)
    );
    assert_eq!(
        Frame::from_bytes(bytes(b":1\r\n:2\r\n"), &limits),
        Err(ProtocolError::TrailingBytes)
    );
    assert_eq!(
        Frame::from_bytes(bytes(b"?\r\n"), &limits),
        Err(ProtocolError::InvalidReplyType(b'?'))
    );
}

#[test]
fn resp3_is_framed_but_not_represented() {
    let (result, rest) = parse(b"%1\r\n+a\r\n:1\r\n+OK\r\n");
    assert_eq!(result, Err(ProtocolError::Resp3Unsupported(b'%')));
    assert_eq!(
        rest, b"+OK\r\n",
        "the RESP3 frame is consumed so the stream stays in sync"
    );
    let (nested, _) = parse(b"*2\r\n:1\r\n_\r\n");
    assert_eq!(nested, Err(ProtocolError::Resp3Unsupported(b'_')));
}

#[test]
fn errors_from_the_scan_leave_the_buffer_untouched() {
    let (result, rest) = parse(b"*1\r\n:x\r\n");
    assert_eq!(result, Err(ProtocolError::InvalidInteger));
    assert_eq!(rest, b"*1\r\n:x\r\n");
}

#[test]
fn accessors_match_only_their_variant() {
    let simple = Frame::Simple(bytes(b"OK"));
    let bulk = Frame::Bulk(bytes(b"v"));
    let error = Frame::Error(bytes(b"ERR x"));
    let array = Frame::Array(vec![Frame::Integer(-1)]);
    assert_eq!(simple.as_bytes(), Some(&bytes(b"OK")));
    assert_eq!(bulk.as_bytes(), Some(&bytes(b"v")));
    assert_eq!(error.as_bytes(), None);
    assert_eq!(Frame::Null.as_bytes(), None);
    assert_eq!(Frame::Integer(-7).as_integer(), Some(-7));
    assert_eq!(bulk.as_integer(), None);
    assert_eq!(array.as_array(), Some(&[Frame::Integer(-1)][..]));
    assert_eq!(Frame::NullArray.as_array(), None);
    assert!(error.is_error());
    assert!(!simple.is_error() && !Frame::Null.is_error());
}
