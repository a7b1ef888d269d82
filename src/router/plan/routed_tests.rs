//! Tests for planning against a route table: which backend, which slot, what bytes.

use std::sync::Arc;

use bytes::BytesMut;

use super::*;
use crate::cluster::{key_slot, ClusterState};
use crate::protocol::{parse_request, write_array_len, write_bulk, Limits};
use crate::router::{RouteTable, RouteTarget, Router, RouterConfig};
use crate::upstream::Upstreams;

fn route(prefix: &str, backend: &str, strip: bool) -> Route {
    single(prefix, backend, strip, false)
}

fn single(prefix: &str, backend: &str, strip: bool, single_node: bool) -> Route {
    Route {
        prefix: Box::from(prefix.as_bytes()),
        strip,
        target: Arc::new(RouteTarget {
            backend: Arc::from(backend),
            state: Arc::new(ClusterState::new()),
            read_policy: None,
            single_node,
        }),
        mirror: None,
    }
}

/// A router whose catch-all has no map, with `sess:` (stripped) → sessions, `raw:` → raw and
/// `one:` (stripped) → a single-node backend.
fn router() -> Router {
    let (upstreams, metrics) = Upstreams::for_tests(false);
    let router = Router::new(
        Arc::new(ClusterState::new()),
        Arc::new(upstreams),
        metrics,
        RouterConfig::default(),
    );
    let routes = vec![
        route("sess:", "sessions", true),
        route("raw:", "raw", false),
        single("one:", "standalone", true, true),
    ];
    router.planner().set_routes(RouteTable::new(routes, false));
    router
}

fn plan(router: &Router, line: &str) -> Plan {
    let args: Vec<&str> = line.split(' ').collect();
    let mut input = BytesMut::new();
    write_array_len(&mut input, args.len());
    for arg in &args {
        write_bulk(&mut input, arg.as_bytes());
    }
    let request = parse_request(&mut input, &Limits::default())
        .expect("parses")
        .expect("complete");
    router.planner().plan(&request, &mut Vec::new()).0
}

fn routed(plan: Plan) -> Routed {
    match plan {
        Plan::Compound(Compound(Job::Routed(routed))) => *routed,
        other => panic!("not routed: {other:?}"),
    }
}

#[test]
fn a_stripped_route_forwards_the_short_key_and_its_slot() {
    let r = routed(plan(&router(), "SET sess:user42 v"));
    assert_eq!(&*r.route.target.backend, "sessions");
    assert_eq!(r.slot, Some(key_slot(b"user42")));
    assert!(r.write);
    assert_eq!(
        r.payload.as_deref(),
        Some(&b"*3\r\n$3\r\nSET\r\n$6\r\nuser42\r\n$1\r\nv\r\n"[..])
    );
}

#[test]
fn a_route_without_stripping_forwards_the_client_bytes() {
    let r = routed(plan(&router(), "GET raw:k"));
    assert_eq!(&*r.route.target.backend, "raw");
    assert_eq!(
        (r.slot, r.write, r.payload),
        (Some(key_slot(b"raw:k")), false, None)
    );
}

#[test]
fn unmatched_and_keyless_commands_keep_the_catch_all_plan() {
    let router = router();
    assert_eq!(
        plan(&router, "GET plain"),
        Plan::Slot {
            slot: key_slot(b"plain"),
            write: false
        }
    );
    assert!(matches!(plan(&router, "PING"), Plan::Local(_)));
    assert!(matches!(plan(&router, "DBSIZE"), Plan::Compound(m) if !m.is_routed()));
    // Shard channels stay where the subscriptions are.
    assert!(matches!(
        plan(&router, "SPUBLISH sess:c m"),
        Plan::Slot { .. }
    ));
}

#[test]
fn keys_of_several_routes_split_by_route_and_slot_or_are_refused() {
    let router = router();
    let Plan::Compound(compound) = plan(&router, "MGET sess:a plain raw:b sess:a") else {
        panic!("not a split");
    };
    let Compound(Job::Split(split)) = compound else {
        panic!("not a split");
    };
    let parts = split.parts_summary();
    assert_eq!(
        parts,
        vec![
            (Some("sessions".to_string()), key_slot(b"a"), vec![0, 3]),
            (None, key_slot(b"plain"), vec![1]),
            (Some("raw".to_string()), key_slot(b"raw:b"), vec![2]),
        ]
    );
    let Plan::Reply(refused) = plan(&router, "RENAME sess:a plain") else {
        panic!("not refused");
    };
    let text = String::from_utf8_lossy(&refused);
    assert!(text.starts_with("-CROSSSLOT "), "{text}");
    assert!(
        text.contains("'sess:a' -> sessions, 'plain' -> catch_all"),
        "{text}"
    );
}

#[test]
fn watch_on_a_route_keeps_the_route_and_the_forwarded_key() {
    let router = router();
    let r = routed(plan(&router, "WATCH sess:k"));
    assert!(r.watch && r.blocking.is_none());
    assert_eq!(r.slot, Some(key_slot(b"k")));
    let Plan::Compound(compound) = plan(&router, "WATCH raw:k") else {
        panic!("not routed");
    };
    let (backend, slot, payload) = compound.routed_watch().expect("a routed WATCH");
    assert_eq!(
        (&*backend.backend, slot, payload),
        ("raw", key_slot(b"raw:k"), None)
    );
}

#[test]
fn route_keys_that_cannot_be_served_are_refused_with_the_reason() {
    let router = router();
    let Plan::Reply(empty) = plan(&router, "GET sess:") else {
        panic!("empty key not refused");
    };
    assert!(String::from_utf8_lossy(&empty).contains("empty key"));
    // Arity errors keep Redis's wording.
    let Plan::Reply(arity) = plan(&router, "GET sess:a b") else {
        panic!("arity");
    };
    assert!(arity.starts_with(b"-ERR wrong number of arguments"));
}

#[test]
fn a_single_node_backend_takes_keys_of_several_slots_in_one_command() {
    let router = router();
    let r = routed(plan(&router, "RENAME one:a one:b"));
    assert_eq!(&*r.route.target.backend, "standalone");
    assert_eq!((r.slot, r.write), (Some(key_slot(b"a")), true));
    assert_eq!(
        r.payload.as_deref(),
        Some(&b"*3\r\n$6\r\nRENAME\r\n$1\r\na\r\n$1\r\nb\r\n"[..])
    );
    // Not split either: one MGET, a read.
    let r = routed(plan(&router, "MGET one:a one:b one:c"));
    assert_eq!((r.slot, r.write), (Some(key_slot(b"a")), false));
    // On a cluster backend the same command is still refused.
    assert!(matches!(
        plan(&router, "RENAME raw:a raw:b"),
        Plan::Reply(_)
    ));
    // Blocking commands still need a dedicated connection: refused on a route.
    assert!(matches!(
        plan(&router, "BLPOP one:a one:b 1"),
        Plan::Reply(_)
    ));
}
