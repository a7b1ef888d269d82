//! The connection task against a scripted node: what commands still in flight are told when
//! the node closes the connection.

use std::time::Duration;

use bytes::Bytes;

use crate::upstream::scripted_node::{scripted_node, NodeAction};
use crate::upstream::{Lane, Upstreams};

const WAIT: &[u8] = b"*3\r\n$4\r\nWAIT\r\n$1\r\n1\r\n$2\r\n10\r\n";
const SET: &[u8] = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n";

/// A node that reads a WAIT and a SET, answers the first with `first_reply` and closes.
async fn node_answering(first_reply: &'static [u8]) -> String {
    scripted_node(Duration::ZERO, move |input| {
        if input.len() < WAIT.len() + SET.len() {
            NodeAction::Wait
        } else {
            NodeAction::ReplyAndClose(first_reply.to_vec())
        }
    })
    .await
}

/// Sends WAIT then SET on one connection; returns whether the SET's error says it never ran.
async fn set_never_ran_after(first_reply: &'static [u8]) -> bool {
    let (upstreams, _metrics) = Upstreams::for_tests(false);
    let node = upstreams.node(&node_answering(first_reply).await);
    let wait = node.send(Bytes::from_static(WAIT), false, Lane::default());
    let set = node.send(Bytes::from_static(SET), false, Lane::default());
    assert_eq!(&wait.await.expect("the WAIT's reply")[..], first_reply);
    set.await.expect_err("the node closed").never_sent()
}

#[tokio::test]
async fn commands_behind_a_role_change_unblock_never_ran() {
    assert!(
        set_never_ran_after(
            b"-UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)\r\n"
        )
        .await
    );
}

#[tokio::test]
async fn commands_behind_any_other_reply_may_have_run() {
    assert!(!set_never_ran_after(b":0\r\n").await);
    assert!(!set_never_ran_after(b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n").await);
}
