//! Upgrades in place (docs/operations.md): `kill -USR2` or `redcar upgrade` starts the binary at
//! this process's path with the same arguments and environment; the new process reads its
//! config, fetches the slot map and, once ready (within `upgrade_timeout`), takes over the
//! listening sockets and then, one by one at their safe points, the client connections.
//!
//! - `wire.rs`: the connection between the two (frames with descriptors, SCM_RIGHTS);
//! - `old.rs`: the running process's side (start the new one, pass the listeners, wait until it
//!   is ready), then `handing.rs` (hand over the clients);
//! - `new.rs`: the new process's side (inherit the listeners, get ready, adopt the clients);
//! - `pid_file.rs`, `notify.rs`: `--pid-file` and systemd's `NOTIFY_SOCKET`;
//! - `command.rs`: `redcar upgrade --pid-file FILE`, which signals and waits for the outcome.
//!
//! A failed upgrade changes nothing: until the new process says it is ready and the old one
//! answers `Go`, the old one keeps accepting and serving as before, and it stops the new one.

mod command;
mod handing;
mod new;
mod notify;
mod old;
mod pid_file;
mod wire;

pub use command::run as upgrade_command;
pub(super) use handing::Committed;
pub(super) use new::{inherit, Takeover};
pub(super) use notify::notify;
pub(super) use old::{until_taken_over, watch, watch_sigusr2, Old, Sockets};
pub(super) use pid_file::PidFile;

use serde::{Deserialize, Serialize};

/// The environment variable that tells a new process where its predecessor waits: the name of
/// an abstract Unix socket (Linux), which only the child the old process started may use (its
/// pid is checked with SO_PEERCRED).
const FROM_ENV: &str = "REDCAR_UPGRADE_FROM";

/// For tests of version fallback only: the record versions a new process claims to read
/// (`OLDEST-NEWEST`) in its Hello, instead of the build's own. The old process always answers
/// with its own, so a process started with it (and passing it on) tests the fallback.
const VERSIONS_ENV: &str = "REDCAR_UPGRADE_TEST_VERSIONS";

/// New → old: who it is and which record versions it reads.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
struct Hello {
    /// The new process's pid, which the old one compares with the child it started.
    pid: u32,
    /// The oldest client record version the new process reads.
    oldest: u16,
    /// The newest client record version the new process reads.
    newest: u16,
    /// The release, for the log.
    release: String,
}

/// Old → new: the record version both read (0: none; clients are drained, not moved), the
/// restart generation, and which listener each passed descriptor is.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
struct Handing {
    /// Agreed by [`agree`]; 0 means the old process closes its clients at their safe points
    /// instead of moving them (only the listeners move).
    version: u16,
    /// The old process's restart generation plus one: the new process's own.
    generation: u64,
    /// Shown by the new process as `redcar_upgrade_old_pid` while clients move.
    old_pid: u32,
    /// In the order the descriptors travel in the same frame.
    listeners: Vec<Entry>,
}

/// One listening socket: `tcp`, `tls`, `unix` or `admin`, and its address or path.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
struct Entry {
    /// `tcp`, `tls`, `unix` or `admin`: which configured listener may claim the socket.
    kind: String,
    /// `IP:PORT` as bound (the real port when the config said 0), or the Unix socket's path.
    addr: String,
}

/// New → old: why it cannot take over.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
struct Failed {
    /// One line for the log and the status file (`failed <reason>`).
    reason: String,
}

/// Old → new: take over; give client ids from `next_id` on.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
struct Go {
    /// Moved clients keep their ids, all below it; the new process numbers its own clients from
    /// here, so ids stay unique across both.
    next_id: u64,
}

/// Old → new: all clients are dealt with.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
struct Done {
    /// Clients whose connection and state went to the new process.
    moved: u64,
    /// Clients that could not be moved and were closed instead.
    closed: u64,
    /// How long the hand-over took, for the log.
    millis: u64,
}

/// New → old (`Subscribed`) and old → new (`Released`): which subscribed client (see
/// `downstream::handover`, release.rs).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
struct ClientId {
    id: u64,
}

/// The record versions this build reads, as `(oldest, newest)`.
fn versions() -> (u16, u16) {
    (
        crate::downstream::HANDOVER_OLDEST,
        crate::downstream::HANDOVER_CURRENT,
    )
}

/// The record versions a new process says it reads (see [`VERSIONS_ENV`]).
fn claimed_versions() -> (u16, u16) {
    let own = versions();
    let Ok(text) = std::env::var(VERSIONS_ENV) else {
        return own;
    };
    let parsed = text
        .split_once('-')
        .and_then(|(a, b)| Some((a.trim().parse().ok()?, b.trim().parse().ok()?)));
    parsed.unwrap_or(own)
}

/// The newest record version both `(oldest, newest)` ranges hold; 0 when they share none.
fn agree(ours: (u16, u16), theirs: (u16, u16)) -> u16 {
    let newest = ours.1.min(theirs.1);
    if newest >= ours.0.max(theirs.0) {
        newest
    } else {
        0
    }
}

/// Control messages are small structs of numbers and strings, so encoding cannot fail in practice;
/// an empty body would decode as the default.
fn to_json<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
}

/// Lenient on purpose: unknown fields are ignored and garbage gives the default, so two releases
/// with different fields still talk, and a zero value reads as "nothing agreed".
fn from_json<T: for<'de> Deserialize<'de> + Default>(bytes: &[u8]) -> T {
    serde_json::from_slice(bytes).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_processes_agree_on_the_newest_version_both_read_or_none() {
        assert_eq!(agree((1, 1), (1, 1)), 1);
        assert_eq!(agree((1, 3), (2, 5)), 3);
        assert_eq!(
            agree((2, 5), (1, 3)),
            3,
            "roll back: the older release's newest"
        );
        assert_eq!(
            agree((1, 1), (2, 2)),
            0,
            "no common version: listeners only"
        );
        assert_eq!(agree((3, 4), (1, 2)), 0);
    }

    #[test]
    fn control_messages_ignore_fields_they_do_not_know() {
        let go: Go = from_json(br#"{"next_id": 7, "later": true}"#);
        assert_eq!(go.next_id, 7);
        let hello: Hello = from_json(b"not json");
        assert_eq!(hello.newest, 0);
    }
}
