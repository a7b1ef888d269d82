//! A session's life: idle waits and busy spells in turn, from the accepted connection until the
//! client is done (see `mod.rs` on the two states).

use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};

use super::super::clients::Downstream;
use super::super::facade::Endpoint;
use super::busy;
use super::{Busy, Client, Wake};

/// Serves one client until it disconnects, sends QUIT, breaks the protocol, idles out, or the
/// proxy drains. `facade`: the client came in on a cluster-facade listener.
pub(crate) async fn serve<S>(
    stream: S,
    downstream: &Downstream,
    id: u64,
    peer: &Arc<str>,
    facade: Option<Box<Endpoint>>,
) where
    S: AsyncRead + AsyncWrite + Send + Unpin,
{
    let mut client = Client::new(stream, downstream, id, peer, facade);
    loop {
        match client.wait_for_request().await {
            Wake::Request => {}
            Wake::Close => return client.close().await,
        }
        // Boxed: its state exists only while the client is busy.
        let busy = Box::pin(busy::serve_busy(&mut client)).await;
        // A quiet moment (the busy state is freed, and the client too if it is done): if a
        // large value went through, its memory goes back to the system; otherwise this costs
        // a load and a compare.
        let large = client.input.take_large() | client.out.take_large();
        match busy {
            Busy::Idle => crate::memory::give_back(large),
            Busy::Done => {
                drop(client);
                crate::memory::give_back(large);
                return;
            }
        }
    }
}
