//! A scripted node for the upstream unit tests: one accepted connection, whose every read is
//! answered by the test's own function (the integration tests use real redis-servers).

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// What the scripted node does after a read.
pub(crate) enum NodeAction {
    /// Nothing yet: read more.
    Wait,
    /// Write these bytes, then read more.
    Reply(Vec<u8>),
    /// Write these bytes and close the connection.
    ReplyAndClose(Vec<u8>),
}

/// Listens on a free loopback port (returned) and serves one connection: after each read,
/// `respond` gets every byte not yet consumed (it drains what it answers) and says what to do;
/// the reply is written `pause` later. Ends when the peer closes.
pub(crate) async fn scripted_node(
    pause: Duration,
    mut respond: impl FnMut(&mut Vec<u8>) -> NodeAction + Send + 'static,
) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    tokio::spawn(async move {
        let Ok((mut socket, _)) = listener.accept().await else {
            return;
        };
        let mut input = Vec::new();
        let mut chunk = [0u8; 4096];
        while let Ok(n @ 1..) = socket.read(&mut chunk).await {
            input.extend_from_slice(&chunk[..n]);
            let (reply, close) = match respond(&mut input) {
                NodeAction::Wait => continue,
                NodeAction::Reply(reply) => (reply, false),
                NodeAction::ReplyAndClose(reply) => (reply, true),
            };
            if !pause.is_zero() {
                tokio::time::sleep(pause).await;
            }
            if socket.write_all(&reply).await.is_err() || close {
                let _ = socket.shutdown().await;
                return;
            }
        }
    });
    addr
}
