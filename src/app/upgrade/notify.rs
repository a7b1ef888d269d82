//! systemd's readiness protocol (`Type=notify`): a datagram to `$NOTIFY_SOCKET`. A new process
//! sends `MAINPID=<its pid>` and `READY=1` when it takes over, before the old one exits, which
//! the unit allows with `NotifyAccess=all` (examples/systemd/redcar.service). Without the
//! variable (not under systemd) nothing is sent.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// Sends `state` (lines such as `READY=1`) to systemd, when redcar runs under it.
/// A failure is logged and otherwise ignored: systemd then times the unit out, which is the right
/// signal for an operator. `@name` addresses an abstract socket.
pub(crate) fn notify(state: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let path = path.to_string_lossy().into_owned();
    let sent = (|| -> std::io::Result<()> {
        let socket = UnixDatagram::unbound()?;
        let addr = match path.strip_prefix('@') {
            Some(abstract_name) => SocketAddr::from_abstract_name(abstract_name.as_bytes())?,
            None => SocketAddr::from_pathname(&path)?,
        };
        socket.send_to_addr(state.as_bytes(), &addr)?;
        Ok(())
    })();
    if let Err(error) = sent {
        tracing::warn!(%error, socket = %path, "cannot notify systemd");
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::net::UnixDatagram;

    #[test]
    fn a_state_reaches_the_notify_socket() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("notify");
        let socket = UnixDatagram::bind(&path).expect("bind");
        // The variable is read, never set, by redcar: the test sends through the same path.
        let addr = std::os::unix::net::SocketAddr::from_pathname(&path).expect("addr");
        UnixDatagram::unbound()
            .expect("socket")
            .send_to_addr(b"READY=1", &addr)
            .expect("send");
        let mut buf = [0u8; 16];
        let n = socket.recv(&mut buf).expect("recv");
        assert_eq!(&buf[..n], b"READY=1");
    }
}
