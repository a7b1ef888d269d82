//! Unit tests of `registry.rs`: what a known node costs before it is used
//! (a big map's nodes that redcar never sends to must stay cheap; docs/scale.md).

use std::net::TcpListener;

use bytes::Bytes;

use super::Upstreams;
use crate::upstream::Lane;

/// A 1,000-node map's nodes are all made (the slot map holds them), but a node redcar never
/// sends to starts no connection (no task, no loop connection, no buffer) and makes no metric
/// series; the first command to one makes both, for that node only.
#[tokio::test]
async fn known_nodes_get_connections_and_series_only_at_their_first_command() {
    let (upstreams, metrics) = Upstreams::for_tests(false);
    let runtime = tokio::runtime::Handle::current().metrics();
    let tasks = runtime.num_alive_tasks();
    // Nothing listens on these, and nothing is sent to them.
    let known: Vec<_> = (0..1000)
        .map(|i| upstreams.node(&format!("127.0.0.1:{}", 20_000 + i)))
        .collect();
    assert!(known.iter().all(|n| n.metrics().is_none() && !n.started()));
    assert_eq!(runtime.num_alive_tasks(), tasks, "no task per known node");
    let text = metrics.encode();
    assert!(
        !text.contains("node=\"127.0.0.1:2"),
        "series of unused nodes:\n{text}"
    );

    // A listener of this test's own (it accepts nothing): the first command starts the node's
    // connections and makes its series.
    let listener = TcpListener::bind("127.0.0.1:0").expect("a port");
    let addr = listener.local_addr().expect("its address").to_string();
    let used = upstreams.node(&addr);
    assert!(used.metrics().is_none() && !used.started());
    drop(used.send(
        Bytes::from_static(b"*1\r\n$4\r\nPING\r\n"),
        false,
        Lane::default(),
    ));
    assert!(used.metrics().is_some() && used.started());
    assert!(
        runtime.num_alive_tasks() > tasks,
        "its connection tasks run"
    );
    let text = metrics.encode();
    assert!(
        text.contains(&format!("redcar_node_requests_total{{node=\"{addr}\"}}")),
        "{text}"
    );
    assert!(known.iter().all(|n| n.metrics().is_none() && !n.started()));
}

/// A big map's new nodes are made at once on a thread of their own: they are registered like
/// those [`Upstreams::node`] makes (the same handle afterwards), and, with the shared runtime,
/// their connections still start as tasks on the runtime of the caller.
#[tokio::test]
async fn nodes_made_at_once_are_the_registrys_and_start_on_the_callers_runtime() {
    let (upstreams, _metrics) = Upstreams::for_tests(false);
    let runtime = tokio::runtime::Handle::current().metrics();
    let listener = TcpListener::bind("127.0.0.1:0").expect("a port");
    let used = listener.local_addr().expect("its address").to_string();
    let mut addrs: Vec<String> = (0..200)
        .map(|i| format!("127.0.0.1:{}", 30_000 + i))
        .collect();
    addrs.push(used.clone());
    let before = upstreams.node("127.0.0.1:30000");
    upstreams.make_nodes(addrs.iter().map(String::as_str));
    assert_eq!(upstreams.all().len(), addrs.len());
    assert!(
        std::sync::Arc::ptr_eq(&before, &upstreams.node("127.0.0.1:30000")),
        "a node registered before is kept"
    );
    let node = upstreams.node(&used);
    assert!(!node.started());
    let tasks = runtime.num_alive_tasks();
    drop(node.send(
        Bytes::from_static(b"*1\r\n$4\r\nPING\r\n"),
        false,
        Lane::default(),
    ));
    assert!(node.started());
    assert!(
        runtime.num_alive_tasks() > tasks,
        "its connection tasks run on this runtime"
    );
}
