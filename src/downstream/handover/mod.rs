//! One client connection crossing from one redcar process to the next (upgrades in place,
//! docs/operations.md): what the connection carries, as a versioned record that does not depend
//! on either session implementation's internals, and the two ends of its journey.
//!
//! - [`HandedOver`]: the record. Built at a safe point by [`HandedOver::from_parts`] from the
//!   client's [`ClientState`](super::client_state::ClientState), its facade endpoint, its age and the input bytes read but not yet
//!   parsed; [`encode`](HandedOver::encode) and [`decode`](HandedOver::decode) with a version
//!   (`codec.rs`). The socket itself travels beside it (SCM_RIGHTS, `app::upgrade`).
//! - `leave.rs`: the old process's side. While an upgrade hands clients over, a session at its
//!   next safe point gives its record and socket to the [`Handover`] sink (one call; a plain
//!   flag read per turn otherwise), or is closed and counted by reason when it cannot move.
//! - `adopt.rs`: the new process's side, [`adopt`](fn@adopt): a session started from a record and a
//!   socket, as if the client had always been here.
//! - `release.rs`: the two-step crossing of a subscribed client, subscribed in the new process
//!   before the old one lets go.

use std::time::Duration;

use bytes::Bytes;

use crate::protocol::Protocol;

mod adopt;
mod codec;
mod leave;
mod parts;
mod release;

pub(crate) use adopt::adopt;
pub(crate) use codec::{CURRENT, OLDEST};
pub(crate) use leave::{Handover, Leaving, Outgoing};
pub(crate) use release::Arrivals;

/// One client connection, as the next process needs it. Every field is plain data: the
/// socket goes beside it, and nothing here points into a session's internals.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct HandedOver {
    /// The client id: kept, so `CLIENT ID` answers the same and `CLIENT TRACKING ... REDIRECT
    /// <id>` still points at the right client.
    pub(crate) id: u64,
    /// How `/clients` and the slow log name the peer (`127.0.0.1:52114`, `unix`).
    pub(crate) peer: String,
    /// The listener it came in on: `tcp` or `unix` (the socket's kind follows from it).
    pub(crate) listener: String,
    /// The authenticated user; `None` when not logged in (authentication required).
    pub(crate) login: Option<Login>,
    /// 2 or 3.
    pub(crate) protocol: u8,
    /// `CLIENT SETNAME`, so `CLIENT GETNAME` and `/clients` show the same name after the upgrade.
    pub(crate) name: Option<Bytes>,
    /// `CLIENT SETINFO LIB-NAME` / `LIB-VER`, when the session keeps them.
    pub(crate) lib_name: Option<Bytes>,
    /// See `lib_name`.
    pub(crate) lib_ver: Option<Bytes>,
    /// The selected database (always 0 in a cluster; carried for what is not a cluster).
    pub(crate) db: u32,
    /// Failed logins so far on this connection (`auth.max_failures` goes on counting).
    pub(crate) failed_logins: u16,
    /// The cluster-facade endpoint the client was told it talks to.
    pub(crate) facade: Option<FacadeRecord>,
    /// `CLIENT TRACKING` while it is on.
    pub(crate) tracking: Option<TrackingRecord>,
    /// What the client is subscribed to (empty outside subscribe mode).
    pub(crate) subscriptions: Subscriptions,
    /// How long the client has been connected (for `client.max_age` and `/clients`).
    pub(crate) age: Duration,
    /// How long since its last activity (for `client.idle_timeout`).
    pub(crate) idle: Duration,
    /// Bytes read from the client but not yet parsed: the start of its next request.
    pub(crate) input: Bytes,
}

/// A logged-in user: its name and the SHA-256 of the password that logged it in (never the
/// password), so the next process keeps the login only if that user still has that password.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Login {
    /// The configured user's name.
    pub(crate) user: String,
    /// SHA-256 of the password used; `None` for a `nopass` user.
    pub(crate) credential: Option<[u8; 32]>,
}

/// The facade endpoint, field for field (see `facade_reply::Endpoint`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FacadeRecord {
    /// The host announced in `CLUSTER SLOTS` / `SHARDS` replies.
    pub(crate) host: String,
    /// The IP announced.
    pub(crate) ip: String,
    /// The host name announced, if the listener has one.
    pub(crate) hostname: Option<String>,
    /// The port announced.
    pub(crate) port: u16,
    /// Whether the announced port is a TLS one.
    pub(crate) tls: bool,
    /// The facade's node id, stable for the client's life.
    pub(crate) id: String,
}

/// `CLIENT TRACKING on` with its options.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TrackingRecord {
    /// The client id invalidations are redirected to; 0 when they go to the client itself.
    pub(crate) redirect: u64,
    /// `BCAST`: invalidations by prefix, not by keys read.
    pub(crate) bcast: bool,
    /// `OPTIN`: only keys read after `CLIENT CACHING yes` are tracked.
    pub(crate) optin: bool,
    /// `OPTOUT`: keys read after `CLIENT CACHING no` are not tracked.
    pub(crate) optout: bool,
    /// `NOLOOP`: no invalidations for the client's own writes.
    pub(crate) noloop: bool,
    /// The `BCAST` prefixes; empty means every key.
    pub(crate) prefixes: Vec<Bytes>,
}

/// SUBSCRIBE, PSUBSCRIBE and SSUBSCRIBE names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Subscriptions {
    /// SUBSCRIBE channels.
    pub(crate) channels: Vec<Bytes>,
    /// PSUBSCRIBE patterns.
    pub(crate) patterns: Vec<Bytes>,
    /// SSUBSCRIBE shard channels.
    pub(crate) shard_channels: Vec<Bytes>,
}

impl Subscriptions {
    /// No subscription of any kind: the client is not in subscribe mode.
    pub(crate) fn is_empty(&self) -> bool {
        self.channels.is_empty() && self.patterns.is_empty() && self.shard_channels.is_empty()
    }
}

// === impl HandedOver ===

impl HandedOver {
    /// The RESP version the client speaks.
    ///
    /// Anything but 3 is read as RESP2, the default a client starts in.
    pub(crate) fn resp(&self) -> Protocol {
        if self.protocol == 3 {
            Protocol::Resp3
        } else {
            Protocol::Resp2
        }
    }
}

#[cfg(test)]
mod tests;
