//! The connection task against a scripted node: what commands still in flight are told when
//! the node closes the connection.

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::upstream::{Lane, Upstreams};

const WAIT: &[u8] = b"*3\r\n$4\r\nWAIT\r\n$1\r\n1\r\n$2\r\n10\r\n";
const SET: &[u8] = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n";

/// A node that reads a WAIT and a SET, answers the first with `first_reply` and closes.
async fn node_answering(first_reply: &'static [u8]) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    tokio::spawn(async move {
        let Ok((mut socket, _)) = listener.accept().await else {
            return;
        };
        let mut input = Vec::new();
        let mut chunk = [0u8; 1024];
        while input.len() < WAIT.len() + SET.len() {
            match socket.read(&mut chunk).await {
                Ok(n @ 1..) => input.extend_from_slice(&chunk[..n]),
                _ => return,
            }
        }
        let _ = socket.write_all(first_reply).await;
        let _ = socket.shutdown().await;
    });
    addr
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
