//! Inline commands: line endings, sdssplitargs quoting and escapes, and the line limit.

use bytes::BytesMut;

use crate::protocol::inline::split_args;
use crate::protocol::{parse_request, Limits, ProtocolError};

/// The arguments parsed (or the error), and what is left in the buffer.
type Parsed = (Result<Option<Vec<Vec<u8>>>, ProtocolError>, Vec<u8>);

fn parse_with(input: &[u8], limits: &Limits) -> Parsed {
    let mut buf = BytesMut::from(input);
    let result = parse_request(&mut buf, limits)
        .map(|r| r.map(|r| r.args().iter().map(|a| a.to_vec()).collect()));
    (result, buf.to_vec())
}

fn args_of(input: &[u8]) -> Vec<Vec<u8>> {
    parse_with(input, &Limits::default())
        .0
        .expect("parse error")
        .expect("incomplete")
}

fn split(line: &[u8]) -> Result<Vec<Vec<u8>>, ProtocolError> {
    split_args(line)
}

fn owned(args: &[&[u8]]) -> Vec<Vec<u8>> {
    args.iter().map(|a| a.to_vec()).collect()
}

#[test]
fn ping_with_crlf_or_lf_is_encoded_as_multibulk() {
    for input in [&b"PING\r\n"[..], b"PING\n"] {
        let mut buf = BytesMut::from(input);
        let request = parse_request(&mut buf, &Limits::default())
            .expect("ok")
            .expect("complete");
        assert_eq!(request.raw(), &b"*1\r\n$4\r\nPING\r\n"[..]);
        assert_eq!(&request.args()[0], b"PING");
        assert!(buf.is_empty());
    }
}

#[test]
fn incomplete_line_leaves_buffer_untouched() {
    let (result, rest) = parse_with(b"PING\r", &Limits::default());
    assert_eq!(result, Ok(None));
    assert_eq!(rest, b"PING\r");
}

#[test]
fn empty_and_blank_lines_are_skipped() {
    let (result, rest) = parse_with(b"\r\n\n  \t \r\n", &Limits::default());
    assert_eq!(result, Ok(None));
    assert!(rest.is_empty());
    assert_eq!(args_of(b"\r\n\n   \r\nPING\r\n"), owned(&[b"PING"]));
}

#[test]
fn inline_then_multibulk_in_one_buffer() {
    let mut buf = BytesMut::from(&b"GET a\r\n*1\r\n$4\r\nPING\r\n"[..]);
    let first = parse_request(&mut buf, &Limits::default())
        .expect("ok")
        .expect("complete");
    assert_eq!(first.raw(), &b"*2\r\n$3\r\nGET\r\n$1\r\na\r\n"[..]);
    assert_eq!(&buf[..], b"*1\r\n$4\r\nPING\r\n");
}

#[test]
fn whitespace_separates_arguments() {
    assert_eq!(args_of(b"  SET\tk   v \r\n"), owned(&[b"SET", b"k", b"v"]));
    // \v and \f are skipped between arguments but do not end an unquoted one (as in Redis).
    assert_eq!(split(b"\x0b a\x0bb\x0c"), Ok(owned(&[b"a\x0bb\x0c"])));
}

#[test]
fn double_quotes_understand_escapes() {
    assert_eq!(
        split(br#"SET "hello world" "a\nb\r\t\b\a\\\"\x41\x4a\x4A\q""#),
        Ok(owned(&[
            b"SET",
            b"hello world",
            b"a\nb\r\t\x08\x07\\\"AJJq"
        ]))
    );
    // \x without two hex digits is just an escaped 'x'.
    assert_eq!(split(br#""\xzz" "\x4""#), Ok(owned(&[b"xzz", b"x4"])));
    assert_eq!(split(br#""" ''"#), Ok(owned(&[b"", b""])));
}

#[test]
fn single_quotes_only_escape_the_quote() {
    assert_eq!(split(br"'it\'s' 'a\nb'"), Ok(owned(&[b"it's", br"a\nb"])));
}

#[test]
fn quote_inside_a_word_continues_it_and_then_ends_it() {
    assert_eq!(
        split(br#"foo"bar baz" qux"#),
        Ok(owned(&[b"foobar baz", b"qux"]))
    );
    assert_eq!(split(b"\"a\"\tb"), Ok(owned(&[b"a", b"b"])));
}

#[test]
fn unbalanced_quotes_are_rejected() {
    for line in [
        &br#""abc"#[..],
        b"'abc",
        br#""a"b"#,
        b"'a'b",
        br#""abc\"#,
        br"'abc\'",
        b"\"a\0\"",
    ] {
        assert_eq!(
            split(line),
            Err(ProtocolError::UnbalancedQuotes),
            "{line:?}"
        );
    }
    let (result, rest) = parse_with(b"SET \"k v\r\n", &Limits::default());
    assert_eq!(
        result.map_err(|e| e.to_string()),
        Err("unbalanced quotes in request".into())
    );
    assert_eq!(rest, b"SET \"k v\r\n");
}

#[test]
fn nul_ends_the_line_as_in_c() {
    assert_eq!(args_of(b"GET a\0b c\r\n"), owned(&[b"GET", b"a"]));
}

#[test]
fn inline_length_limit_edge() {
    let limits = Limits {
        max_inline_len: 8,
        ..Limits::default()
    };
    for ok in [&b"12345678\n"[..], b"12345678\r\n"] {
        assert_eq!(parse_with(ok, &limits).0, Ok(Some(owned(&[b"12345678"]))));
    }
    for pending in [&b"12345678"[..], b"12345678\r"] {
        assert_eq!(parse_with(pending, &limits).0, Ok(None));
    }
    for over in [
        &b"123456789\n"[..],
        b"123456789\r\n",
        b"123456789",
        b"123456789\r",
    ] {
        assert_eq!(
            parse_with(over, &limits).0,
            Err(ProtocolError::InlineTooBig),
            "{over:?}"
        );
    }
    assert_eq!(
        ProtocolError::InlineTooBig.to_string(),
        "too big inline request"
    );
}
