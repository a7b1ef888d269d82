//! What an idle client costs: the session's lasting state is small (the busy state is boxed
//! separately and freed when the client goes idle).

use super::Client;

#[test]
fn an_idle_sessions_lasting_state_stays_small() {
    // The figure that `bench/crowd.sh` reads as RSS per idle client is this state, the task and
    // the socket's registration (docs/decisions/0007-the-cost-of-an-idle-client.md). Growing
    // it is a choice to make knowingly, with the bench run again.
    let size = std::mem::size_of::<Client<'static, tokio::net::TcpStream>>();
    assert!(size <= 448, "Client is {size} bytes");
}

#[test]
fn a_busy_spell_is_boxed_in_another_size_class_than_an_idle_session() {
    // mimalloc's size classes around here are 640, 768 and 896 bytes; an idle session's task box
    // is in the 640 one (see `Client`). A busy spell of 640 bytes or less would share its pages,
    // and clients going idle in a burst would leave them half used.
    fn future_size<'a, F>(
        _: impl FnOnce(&'a mut Client<'static, tokio::net::TcpStream>) -> F,
    ) -> usize {
        std::mem::size_of::<F>()
    }
    let size = future_size(|c| super::busy::serve_busy(c, None, None));
    assert!((641..=1024).contains(&size), "a busy spell is {size} bytes");
}

#[test]
fn an_idle_sessions_whole_future_stays_small() {
    // The session's future holds the client and the idle loop's state for the client's whole
    // life. Moving the client into a nested `async fn` once made it 904 bytes (an argument
    // moved in is kept twice) and the RSS per idle client 1.72 KB instead of 1.32: the loop
    // borrows it instead (life.rs).
    use super::super::clients::Downstream;
    use super::super::facade::Endpoint;
    use std::sync::Arc;
    fn future_size<'d, F>(
        _: impl FnOnce(
            tokio::net::TcpStream,
            &'d Downstream,
            u64,
            &'d Arc<str>,
            Option<Box<Endpoint>>,
        ) -> F,
    ) -> usize {
        std::mem::size_of::<F>()
    }
    let size = future_size(super::life::serve);
    assert!(size <= 576, "the session's future is {size} bytes");
}
