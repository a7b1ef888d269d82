//! A record made from a session's parts, and the facade endpoint both ways.

use std::time::Duration;

use bytes::Bytes;

use super::super::client_state::ClientState;
use super::super::facade::Endpoint;
use super::{FacadeRecord, HandedOver, Login, Subscriptions};

// === impl HandedOver ===

impl HandedOver {
    /// The record of a client at a safe point: its lasting `state`, the facade endpoint it was
    /// given, the `input` read but not parsed, and its `age` and `idle` time. `peer` and
    /// `listener` name it as `/clients` does.
    pub(crate) fn from_parts(
        state: &ClientState,
        facade: Option<&Endpoint>,
        input: &[u8],
        peer: &str,
        listener: &str,
        (age, idle): (Duration, Duration),
    ) -> HandedOver {
        HandedOver {
            id: state.id,
            peer: peer.to_string(),
            listener: listener.to_string(),
            login: state.user().map(|user| Login {
                user: user.name.clone(),
                credential: user.credential(),
            }),
            protocol: u8::try_from(state.protocol.number()).unwrap_or(2),
            name: state.name.clone(),
            lib_name: None,
            lib_ver: None,
            db: 0,
            failed_logins: state.failed_logins(),
            facade: facade.map(FacadeRecord::from),
            tracking: state.tracking.as_deref().and_then(|t| t.record()),
            subscriptions: Subscriptions::default(),
            age,
            idle,
            input: Bytes::copy_from_slice(input),
        }
    }
}

impl From<&Endpoint> for FacadeRecord {
    fn from(e: &Endpoint) -> FacadeRecord {
        FacadeRecord {
            host: e.host.clone(),
            ip: e.ip.clone(),
            hostname: e.hostname.clone(),
            port: e.port,
            tls: e.tls,
            id: e.id.clone(),
        }
    }
}

impl From<FacadeRecord> for Endpoint {
    fn from(r: FacadeRecord) -> Endpoint {
        Endpoint {
            host: r.host,
            ip: r.ip,
            hostname: r.hostname,
            port: r.port,
            tls: r.tls,
            id: r.id,
        }
    }
}
