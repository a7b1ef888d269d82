//! What an idle client costs: the session's lasting state is small (the busy state is boxed
//! separately and freed when the client goes idle).

use super::Client;

#[test]
fn an_idle_sessions_lasting_state_stays_small() {
    // The figure that `bench/crowd.sh` reads as RSS per idle client is this state, the task and
    // the socket's registration (docs/architecture.md, "The cost of one client"). Growing it is
    // a choice to make knowingly, with the bench run again.
    let size = std::mem::size_of::<Client<'static, tokio::net::TcpStream>>();
    assert!(size <= 448, "Client is {size} bytes");
}
