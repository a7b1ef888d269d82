//! The in-flight cap and the flush window, alone and on a real connection to a fake node.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use prometheus_client::metrics::counter::Counter;

use super::{Batching, WRITE_HIGH_WATER};
use crate::metrics::Metrics;
use crate::protocol::Limits;
use crate::upstream::scripted_node::{scripted_node, NodeAction};
use crate::upstream::{UpstreamConfig, Upstreams};

fn batching(max_in_flight: usize, flush_interval: Duration) -> Batching {
    let config = UpstreamConfig {
        max_in_flight_per_connection: max_in_flight,
        flush_interval,
        ..UpstreamConfig::default()
    };
    Batching::new(&config, Counter::default())
}

// The window's timer needs a runtime.
#[tokio::test]
async fn room_ends_at_the_cap_or_the_high_water_mark() {
    let b = batching(2, Duration::ZERO);
    assert!(b.has_room(0, 0));
    assert!(b.has_room(100, 1));
    assert!(!b.has_room(100, 2), "two in flight fill a cap of 2");
    assert!(!b.has_room(WRITE_HIGH_WATER, 0), "a full write buffer");
}

// The window's timer needs a runtime.
#[tokio::test]
async fn without_a_window_every_batch_is_written_at_once() {
    let mut b = batching(4096, Duration::ZERO);
    b.queued(true, 10, 1);
    assert!(b.may_write());
}

#[tokio::test(start_paused = true)]
async fn a_window_holds_a_fresh_batch_until_it_ends_or_the_connection_is_full() {
    let mut b = batching(3, Duration::from_micros(500));
    b.queued(true, 10, 1);
    assert!(!b.may_write(), "the first batch waits for company");
    b.queued(false, 20, 2);
    assert!(b.holding(), "later batches join the open window");
    let opened = tokio::time::Instant::now();
    b.window().await;
    assert!(opened.elapsed() >= Duration::from_micros(500));
    b.release();
    assert!(b.may_write());
    b.queued(true, 10, 3);
    assert!(b.may_write(), "a full connection writes at once");
}

// The window's timer needs a runtime.
#[tokio::test]
async fn reaching_the_cap_is_counted_once_per_batch() {
    let counter = Counter::default();
    let config = UpstreamConfig {
        max_in_flight_per_connection: 2,
        ..UpstreamConfig::default()
    };
    let mut b = Batching::new(&config, counter.clone());
    b.queued(true, 10, 1);
    b.queued(false, 20, 2);
    assert_eq!(counter.get(), 1);
}

/// A node that answers `ECHO <4 bytes>` with `+<4 bytes>` after a short pause, and records the
/// most commands it ever saw unanswered.
async fn fake_node(max_outstanding: Arc<AtomicUsize>) -> String {
    // `*2\r\n$4\r\nECHO\r\n$4\r\nNNNN\r\n`
    const COMMAND: usize = 24;
    // The pause gives the proxy time to write more if it (wrongly) would.
    scripted_node(Duration::from_millis(2), move |input| {
        let complete = input.len() / COMMAND;
        max_outstanding.fetch_max(complete, Ordering::SeqCst);
        let mut reply = Vec::new();
        for command in input.chunks_exact(COMMAND) {
            reply.extend_from_slice(b"+");
            reply.extend_from_slice(&command[COMMAND - 6..COMMAND - 2]);
            reply.extend_from_slice(b"\r\n");
        }
        input.drain(..complete * COMMAND);
        NodeAction::Reply(reply)
    })
    .await
}

/// Sends 40 pipelined commands on one connection capped at `cap`; returns the replies and the
/// most the node ever had unanswered.
async fn pipeline_through(cap: usize) -> (Vec<Bytes>, usize) {
    let max_outstanding = Arc::new(AtomicUsize::new(0));
    let addr = fake_node(max_outstanding.clone()).await;
    let config = UpstreamConfig {
        connections_per_node: 1,
        max_in_flight_per_connection: cap,
        ..UpstreamConfig::default()
    };
    let metrics = Arc::new(Metrics::default());
    let upstreams =
        Upstreams::new(config, Limits::default(), metrics, false).expect("no credentials");
    let node = upstreams.node(&addr);
    let replies: Vec<_> = (0..40)
        .map(|i| {
            let command = format!("*2\r\n$4\r\nECHO\r\n$4\r\n{i:04}\r\n");
            node.send(
                Bytes::from(command),
                false,
                crate::upstream::Lane::default(),
            )
        })
        .collect();
    let mut got = Vec::new();
    for reply in replies {
        got.push(reply.await.expect("a reply"));
    }
    (got, max_outstanding.load(Ordering::SeqCst))
}

#[tokio::test]
async fn a_cap_of_one_serves_a_pipeline_in_order_one_command_at_a_time() {
    let (replies, outstanding) = pipeline_through(1).await;
    let expected: Vec<Bytes> = (0..40)
        .map(|i| Bytes::from(format!("+{i:04}\r\n")))
        .collect();
    assert_eq!(replies, expected);
    assert_eq!(outstanding, 1, "never more than one command unanswered");
}

#[tokio::test]
async fn without_a_cap_the_same_pipeline_shares_writes() {
    let (replies, outstanding) = pipeline_through(4096).await;
    assert_eq!(replies.len(), 40);
    assert!(outstanding > 1, "the pipeline is coalesced ({outstanding})");
}
