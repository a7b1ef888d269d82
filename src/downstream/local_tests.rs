//! Unit tests of the locally answered commands (HELLO, CLIENT, SELECT, AUTH).

use std::sync::Arc;

use super::*;
use crate::auth::Users;
use crate::protocol::Request;

fn args(parts: &[&str]) -> Request {
    Request::from_args::<Vec<Bytes>, Bytes>({
        parts.iter().map(|p| Bytes::from(p.to_string())).collect()
    })
}

#[test]
fn ping_echo_and_select() {
    let mut state = ClientState::new(7, Arc::new(Users::open()));
    assert_eq!(
        &state.answer(Local::Ping, args(&["PING"]).args())[..],
        b"+PONG\r\n"
    );
    assert_eq!(
        &state.answer(Local::Ping, args(&["PING", "hi"]).args())[..],
        b"$2\r\nhi\r\n"
    );
    assert_eq!(
        &state.answer(Local::Echo, args(&["ECHO", "x y"]).args())[..],
        b"$3\r\nx y\r\n"
    );
    assert_eq!(
        &state.answer(Local::Select, args(&["SELECT", "0"]).args())[..],
        b"+OK\r\n"
    );
    assert!(state
        .answer(Local::Select, args(&["SELECT", "1"]).args())
        .starts_with(b"-ERR redcar: "));
}

#[test]
fn client_setinfo_is_checked_and_accepted() {
    let mut state = ClientState::new(1, Arc::new(Users::open()));
    let mut ask = |words: &[&str]| state.answer(Local::ClientSetInfo, args(words).args());
    assert_eq!(
        &ask(&["CLIENT", "SETINFO", "LIB-NAME", "redis-py"])[..],
        b"+OK\r\n"
    );
    assert_eq!(
        &ask(&["client", "setinfo", "lib-ver", "5.0.1"])[..],
        b"+OK\r\n"
    );
    assert_eq!(
        &ask(&["CLIENT", "SETINFO", "LIB-COLOUR", "red"])[..],
        b"-ERR Unrecognized option 'LIB-COLOUR'\r\n"
    );
    assert!(ask(&["CLIENT", "SETINFO", "LIB-NAME", "a b"]).starts_with(b"-ERR lib-name cannot"));
    assert!(ask(&["CLIENT", "SETINFO", "LIB-NAME"]).starts_with(b"-ERR wrong number"));
}

#[test]
fn client_name_round_trip_and_validation() {
    let mut state = ClientState::new(1, Arc::new(Users::open()));
    assert_eq!(
        &state.answer(Local::ClientGetName, args(&["CLIENT", "GETNAME"]).args())[..],
        b"$-1\r\n"
    );
    assert_eq!(
        &state.answer(
            Local::ClientSetName,
            args(&["CLIENT", "SETNAME", "web1"]).args()
        )[..],
        b"+OK\r\n"
    );
    assert_eq!(
        &state.answer(Local::ClientGetName, args(&["CLIENT", "GETNAME"]).args())[..],
        b"$4\r\nweb1\r\n"
    );
    let bad = state.answer(
        Local::ClientSetName,
        args(&["CLIENT", "SETNAME", "a b"]).args(),
    );
    assert!(bad.starts_with(b"-ERR Client names"));
    assert_eq!(
        &state.answer(Local::ClientId, args(&["CLIENT", "ID"]).args())[..],
        b":1\r\n"
    );
}

#[test]
fn hello_switches_between_resp2_and_resp3() {
    let mut state = ClientState::new(3, Arc::new(Users::open()));
    let reply = state.answer(Local::Hello, args(&["HELLO", "2", "SETNAME", "app"]).args());
    assert!(reply.starts_with(b"*16\r\n"), "{reply:?}");
    assert_eq!(state.name.as_deref(), Some(&b"app"[..]));
    let three = state.answer(Local::Hello, args(&["HELLO", "3"]).args());
    assert!(three.starts_with(b"%8\r\n$6\r\nserver\r\n"), "{three:?}");
    assert!(three.windows(11).any(|w| w == b"proto\r\n:3\r\n"));
    assert_eq!(state.protocol, Protocol::Resp3);
    assert_eq!(state.lane().protocol(), Protocol::Resp3);
    // No version: the reply describes the current one.
    assert!(state
        .answer(Local::Hello, args(&["HELLO"]).args())
        .starts_with(b"%8\r\n"));
    assert_eq!(
        &state.answer(
            Local::ClientSetName,
            args(&["CLIENT", "SETNAME", ""]).args()
        )[..],
        b"+OK\r\n"
    );
    assert_eq!(
        &state.answer(Local::ClientGetName, args(&["CLIENT", "GETNAME"]).args())[..],
        b"_\r\n"
    );
    assert!(state
        .answer(Local::Hello, args(&["HELLO", "2"]).args())
        .starts_with(b"*16\r\n"));
    assert_eq!(state.protocol, Protocol::Resp2);
}

#[test]
fn hello_refuses_like_redis_and_then_keeps_the_protocol() {
    let mut state = ClientState::new(3, Arc::new(Users::open()));
    let four = state.answer(Local::Hello, args(&["HELLO", "4"]).args());
    assert_eq!(&four[..], b"-NOPROTO unsupported protocol version\r\n");
    let word = state.answer(Local::Hello, args(&["HELLO", "x"]).args());
    assert!(word.starts_with(b"-ERR Protocol version is not an integer"));
    let bad = state.answer(Local::Hello, args(&["HELLO", "3", "SETNAME"]).args());
    assert_eq!(&bad[..], b"-ERR Syntax error in HELLO option 'SETNAME'\r\n");
    let name = state.answer(Local::Hello, args(&["HELLO", "3", "SETNAME", "a b"]).args());
    assert!(name.starts_with(b"-ERR Client names"));
    assert_eq!(
        state.protocol,
        Protocol::Resp2,
        "a refused HELLO switches nothing"
    );
}

#[test]
fn quit_marks_the_session_for_closing() {
    let mut state = ClientState::new(1, Arc::new(Users::open()));
    assert_eq!(
        &state.answer(Local::Quit, args(&["QUIT"]).args())[..],
        b"+OK\r\n"
    );
    assert!(state.quit);
}
