//! Subscribers when the node holding their subscriptions dies: the client keeps its connection;
//! redcar subscribes again itself — channels and patterns at once on another primary (they hear the
//! whole cluster from any node), shard channels on their slot's new primary once the cluster has
//! promoted it — and messages reach the client again. Before, the client got `-ERR redcar:
//! subscription connection to … lost; reconnect and subscribe again` and its connection was closed.

use std::time::Duration;

use crate::chaos_topology::wait_for;
use crate::support::{Redcar, RedisCluster, RespClient, Value};

fn subscribe(client: &mut RespClient, args: &[&str], confirmations: usize) {
    client.send(args).expect("send");
    client.set_timeout(Duration::from_secs(5)).expect("timeout");
    for _ in 0..confirmations {
        let frame = client.read_reply().expect("a confirmation");
        assert!(!frame.is_error(), "{args:?}: {frame:?}");
    }
}

/// Reads what the node pushed until `wanted` arrives, for at most `wait`: `Ok(true)` when it
/// came, `Ok(false)` when it did not in time; an error frame or a closed connection fails the
/// test (the subscriber must keep its connection).
fn heard(client: &mut RespClient, wanted: &Value, wait: Duration) -> bool {
    client.set_timeout(wait).expect("timeout");
    loop {
        match client.read_reply() {
            Ok(frame) if &frame == wanted => return true,
            Ok(frame) => assert!(!frame.is_error(), "the subscriber was told {frame:?}"),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return false
            }
            Err(e) => panic!("the subscriber's connection broke: {e}"),
        }
    }
}

fn message(kind: &str, parts: &[&str]) -> Value {
    let mut items = vec![Value::bulk(kind)];
    items.extend(parts.iter().copied().map(Value::bulk));
    Value::Array(Some(items))
}

/// The primary holding `channel`'s subscription (PUBSUB NUMSUB counts a node's own clients).
fn holder(cluster: &RedisCluster, channel: &str) -> u16 {
    let numsub = |port: u16| {
        let v = cluster
            .node_by_port(port)
            .cmd(&["PUBSUB", "NUMSUB", channel]);
        v.as_array().and_then(|a| a.get(1)?.as_int()).unwrap_or(0)
    };
    cluster
        .primary_ports()
        .into_iter()
        .find(|&port| numsub(port) == 1)
        .expect("one primary holds the subscription")
}

/// A channel subscriber, a pattern subscriber and a shard-channel subscriber all hold their
/// subscriptions on the primary that is then killed. Each keeps its connection; the channel
/// and pattern subscriptions hear messages again as soon as redcar has subscribed elsewhere,
/// the shard channel once the cluster promoted the dead primary's replica. The test waits for
/// those messages (publishing until one arrives), not for a time.
#[test]
fn subscribers_keep_their_connections_and_hear_again_after_their_primary_is_killed() {
    let mut cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start(&cluster.seeds());
    let mut channel = redcar.client();
    subscribe(&mut channel, &["SUBSCRIBE", "loss:news"], 1);
    let victim = holder(&cluster, "loss:news");
    let mut pattern = redcar.client();
    // Another client may be placed on another primary: subscribe until one lands on the victim.
    let mut tries = 0;
    loop {
        subscribe(&mut pattern, &["PSUBSCRIBE", "loss:log.*"], 1);
        let numpat = cluster.node_by_port(victim).cmd(&["PUBSUB", "NUMPAT"]);
        if numpat == Value::Int(1) {
            break;
        }
        tries += 1;
        assert!(tries < 20, "no pattern subscriber landed on {victim}");
        pattern = redcar.client();
    }
    let shard_channel = cluster.key_on_node("loss:shard:", victim);
    let mut shard = redcar.client();
    subscribe(&mut shard, &["SSUBSCRIBE", &shard_channel], 1);
    let mut publisher = redcar.client();
    assert!(publisher
        .q(&["PUBLISH", "loss:news", "before"])
        .as_int()
        .is_some());
    assert!(heard(
        &mut channel,
        &message("message", &["loss:news", "before"]),
        Duration::from_secs(5)
    ));

    cluster.node_by_port_mut(victim).kill();

    // Channels and patterns: published on a live node, heard once redcar subscribed elsewhere.
    let live = cluster
        .primary_ports()
        .into_iter()
        .find(|&p| p != victim)
        .expect("a live primary");
    let mut n = 0;
    wait_for(
        Duration::from_secs(30),
        "the channel subscriber hears again",
        || {
            n += 1;
            let text = format!("after-{n}");
            cluster
                .node_by_port(live)
                .cmd(&["PUBLISH", "loss:news", &text]);
            heard(
                &mut channel,
                &message("message", &["loss:news", &text]),
                Duration::from_millis(200),
            )
        },
    );
    wait_for(
        Duration::from_secs(30),
        "the pattern subscriber hears again",
        || {
            n += 1;
            let text = format!("after-{n}");
            cluster
                .node_by_port(live)
                .cmd(&["PUBLISH", "loss:log.web", &text]);
            let wanted = message("pmessage", &["loss:log.*", "loss:log.web", &text]);
            heard(&mut pattern, &wanted, Duration::from_millis(200))
        },
    );
    // The shard channel: through redcar, which reaches the slot's new primary once promoted.
    wait_for(
        Duration::from_secs(60),
        "the shard subscriber hears again",
        || {
            n += 1;
            let text = format!("after-{n}");
            let sent = publisher
                .cmd(&["SPUBLISH", &shard_channel, &text])
                .expect("SPUBLISH");
            sent == Value::Int(1)
                && heard(
                    &mut shard,
                    &message("smessage", &[&shard_channel, &text]),
                    Duration::from_secs(2),
                )
        },
    );

    eprintln!(
        "pubsub_node_loss: {} re-subscriptions, gaps summing to {:.3} s",
        redcar.metric_sum("redcar_pubsub_resubscribe_gap_seconds_count"),
        redcar.metric_sum("redcar_pubsub_resubscribe_gap_seconds_sum")
    );
    assert!(redcar.metric_sum("redcar_pubsub_resubscribes_total{kind=\"channel\"") >= 2.0);
    assert!(redcar.metric_sum("redcar_pubsub_resubscribes_total{kind=\"shard\"") >= 1.0);
    assert!(redcar.metric_sum("redcar_pubsub_resubscribe_gap_seconds_count") >= 3.0);
    // The subscriptions are still the client's: leaving them returns it to normal mode.
    channel.send(&["UNSUBSCRIBE"]).expect("send");
    assert_eq!(
        channel.read_reply().expect("confirmation"),
        Value::Array(Some(vec![
            Value::bulk("unsubscribe"),
            Value::bulk("loss:news"),
            Value::Int(0)
        ]))
    );
    assert_eq!(channel.q(&["PING"]), Value::simple("PONG"));
}

/// After its node is lost, the node holding a subscriber's channels next may deliver messages
/// the lost one had already delivered (the cluster bus reaches each node in its own time):
/// redcar drops a message equal to one of the lost connection's last ones, once, for a moment
/// after the new node confirmed. The test makes such an echo itself, publishing the last
/// message again on the new node, and checks it is dropped while new messages pass.
#[test]
fn a_message_the_lost_node_delivered_is_not_delivered_again_by_the_next() {
    let mut cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start(&cluster.seeds());
    let mut subscriber = redcar.client();
    subscribe(&mut subscriber, &["SUBSCRIBE", "loss:echo"], 1);
    let victim = holder(&cluster, "loss:echo");
    let live = cluster
        .primary_ports()
        .into_iter()
        .find(|&p| p != victim)
        .expect("a live primary");
    let mut publisher = cluster.node_by_port(live).client();
    let mut publish = |text: &str| publisher.q(&["PUBLISH", "loss:echo", text]);
    publish("last");
    let last = message("message", &["loss:echo", "last"]);
    assert!(heard(&mut subscriber, &last, Duration::from_secs(5)));

    cluster.node_by_port_mut(victim).kill();
    let mut n = 0;
    wait_for(
        Duration::from_secs(30),
        "redcar subscribes again elsewhere",
        || {
            n += 1;
            let text = format!("probe-{n}");
            publish(&text);
            heard(
                &mut subscriber,
                &message("message", &["loss:echo", &text]),
                Duration::from_millis(50),
            )
        },
    );
    // The echo, then a new message: only the new one comes, and it comes after the echo's
    // place, so nothing was merely late.
    publish("last");
    publish("next");
    subscriber
        .set_timeout(Duration::from_secs(5))
        .expect("timeout");
    loop {
        let frame = subscriber.read_reply().expect("a message");
        assert_ne!(
            frame, last,
            "the echo of the lost node's last message reached the client"
        );
        if frame == message("message", &["loss:echo", "next"]) {
            break;
        }
    }
    assert_eq!(
        redcar.metric_sum("redcar_pubsub_echoes_dropped_total"),
        1.0,
        "one echo dropped"
    );
    // Each remembered message matches once: the same text again is a new message.
    publish("last");
    assert!(heard(&mut subscriber, &last, Duration::from_secs(5)));
}
