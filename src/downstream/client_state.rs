//! A client connection's own state, the part Redis would keep for it: its id, name, protocol,
//! login and per-user rates, transaction, client tracking and near-cache lanes.

use std::sync::Arc;

use bytes::Bytes;

use super::tracking::ClientTracking;
use crate::auth::{self, Admit, Tenancy, User, Users};
use crate::commands::CommandSpec;
use crate::metrics::UserSeries;
use crate::near_cache::Admitted;
use crate::protocol::{Args, Protocol};
use crate::router::Plan;
use crate::router::Transaction;
use crate::router::Written;
use crate::upstream::Lane;

/// Per-connection state that Redis would keep for the client.
pub(crate) struct ClientState {
    pub(crate) id: u64,
    pub(crate) name: Option<Bytes>,
    /// Set by QUIT: reply, then close.
    pub(crate) quit: bool,
    /// On a cluster-facade listener: HELLO says `mode: cluster`, as a cluster node would.
    pub(crate) cluster_mode: bool,
    /// RESP2 until `HELLO 3`; the RESP version of every reply this client gets.
    pub(crate) protocol: Protocol,
    /// Failed logins on this connection (`auth.max_failures`), and whether the command just
    /// answered was one (the session logs and counts it, knowing the client's address).
    pub(super) failed_logins: u16,
    pub(super) failed_now: bool,
    /// MULTI … EXEC and WATCH.
    pub(crate) tx: Transaction,
    /// Where this client wrote (for WAIT).
    pub(crate) written: Written,
    /// Who may connect and what they may run.
    pub(super) users: Arc<Users>,
    /// The authenticated user; `None` until AUTH when authentication is required.
    pub(super) user: Option<Arc<User>>,
    /// The user's limits and figures as this client carries them (boxed, and only when
    /// authentication is on: part of every session's lasting state).
    tenancy: Option<Box<Tenancy>>,
    /// Client-side caching (`CLIENT TRACKING`), made the first time it is used.
    pub(crate) tracking: Option<Box<ClientTracking>>,
    /// The client's commands take the nodes' tracked or near lanes because a near-cache fill
    /// or write-through went there (see `session/near.rs`): set by those, cleared only when
    /// nothing of the client's is in flight, so its commands never change connection while
    /// some are on the way.
    pub(crate) near_lanes: Option<Admitted>,
}

impl ClientState {
    pub(crate) fn new(id: u64, users: Arc<Users>) -> ClientState {
        ClientState {
            id,
            name: None,
            quit: false,
            cluster_mode: false,
            protocol: Protocol::Resp2,
            failed_logins: 0,
            failed_now: false,
            tx: Transaction::default(),
            written: Written::default(),
            user: users.anonymous(),
            users,
            tenancy: None,
            tracking: None,
            near_lanes: None,
        }
    }

    /// Failed logins so far on this connection.
    pub(crate) fn failed_logins(&self) -> u16 {
        self.failed_logins
    }

    /// A client carried over by an upgrade: its login as the previous process had it (`None`:
    /// the anonymous user of this process, if any) and its failed logins so far.
    pub(crate) fn restore(&mut self, user: Option<Arc<User>>, failed_logins: u16) {
        self.user = user.or_else(|| self.users.anonymous());
        self.failed_logins = failed_logins;
    }

    /// This client's connection to every node (see `Node::send`): its id spreads clients over
    /// a node's connections, its protocol picks the RESP2 or the RESP3 ones.
    pub(crate) fn lane(&self) -> Lane {
        let tracking = self.tracking.as_ref().is_some_and(|t| t.is_on());
        Lane::new(self.id as usize, self.protocol)
            .tracked(tracking || self.near_lanes == Some(Admitted::Tracked))
            .near(self.near_lanes == Some(Admitted::Bcast))
    }

    /// RESET: back to a fresh connection's state (the router ends a WATCH separately), which
    /// includes logging out when authentication is required, as in Redis.
    pub(crate) fn reset(&mut self) {
        if let Some(tracking) = &mut self.tracking {
            tracking.off();
        }
        self.name = None;
        self.tx.reset();
        self.user = self.users.anonymous();
        if let Some(tenancy) = &mut self.tenancy {
            tenancy.log_out();
        }
    }

    /// A new connection from `peer`: `Err` with the reply to send before closing it when its
    /// address already has `auth.max_unauthenticated_per_address` connections not logged in.
    pub(crate) fn connect(&mut self, peer: &str) -> Result<(), Bytes> {
        if self.user.is_none() {
            self.tenancy = Some(Box::new(Tenancy::connect(&self.users, peer)?));
        }
        Ok(())
    }

    /// Logs the client in as `user`; `Err` with the refusal when the user has all the
    /// connections its limits allow (the client then stays as it was).
    pub(super) fn log_in(&mut self, user: Arc<User>) -> Result<(), Bytes> {
        if user.tenant.is_some() {
            let tenancy = self.tenancy.get_or_insert_with(Box::default);
            tenancy.log_in(&user, &self.users, self.id)?;
        } else if let Some(tenancy) = &mut self.tenancy {
            tenancy.log_out();
        }
        self.user = Some(user);
        Ok(())
    }

    /// Whether the client's next command may start now (its user's rates).
    #[inline]
    pub(crate) fn admit(&mut self, now: tokio::time::Instant) -> Admit {
        match &mut self.tenancy {
            Some(tenancy) => tenancy.admit(now),
            None => Admit::Now,
        }
    }

    /// `n` bytes read from the client (its user's figures and byte rates).
    #[inline]
    pub(crate) fn note_read(&mut self, n: usize) {
        if let Some(tenancy) = &mut self.tenancy {
            tenancy.note_read(n);
        }
    }

    /// `n` bytes written to the client.
    #[inline]
    pub(crate) fn note_written(&mut self, n: usize) {
        if let Some(tenancy) = &mut self.tenancy {
            tenancy.note_written(n);
        }
    }

    /// Where the client's commands count besides the per-command series: its user's figures.
    #[inline]
    pub(crate) fn user_series(&self) -> Option<&Arc<UserSeries>> {
        self.tenancy.as_deref()?.user_series()
    }

    /// The user, when it asked for KEYS, SCAN and RANDOMKEY to show only keys it may read.
    pub(crate) fn key_filter(&self) -> Option<&Arc<User>> {
        self.user.as_ref().filter(|u| u.filter_keys)
    }

    /// The user the client is logged in as.
    pub(crate) fn user(&self) -> Option<&Arc<User>> {
        self.user.as_ref()
    }

    /// The users the client's login comes from.
    pub(crate) fn users(&self) -> &Arc<Users> {
        &self.users
    }

    /// `n` bytes written to the client in subscribe mode (its user's figures; the rates do not
    /// hold back messages).
    pub(crate) fn count_sent(&self, n: usize) {
        if let Some(tenancy) = &self.tenancy {
            tenancy.count_sent(n);
        }
    }

    /// After a reload: the client keeps its login only if its user still exists with the same
    /// password (then with the user's new rules); a user that was removed, or whose password
    /// changed, is logged out, so its next command gets `-NOAUTH` until it authenticates again
    /// (or it becomes the open default user when authentication was turned off). A login must
    /// not outlive the credential that granted it.
    pub(crate) fn reauthorize(&mut self, users: Arc<Users>) {
        let renewed = self.user.as_deref().and_then(|user| users.renewed(user));
        if renewed.is_none() && self.user.is_some() && users.anonymous().is_none() {
            tracing::info!(
                client = self.id,
                "client logged out by a config reload: its user was removed or its password changed"
            );
        }
        self.users = users;
        match renewed {
            Some(user) => {
                if self.log_in(user).is_err() {
                    self.log_out();
                }
            }
            None => self.log_out(),
        }
    }

    /// Back to the identity of a client that has not authenticated.
    fn log_out(&mut self) {
        if let Some(tenancy) = &mut self.tenancy {
            tenancy.log_out();
        }
        self.user = self.users.anonymous();
    }

    /// Authentication and per-user rules, before routing: a command the client may not run
    /// (the command, one of its keys or channels) becomes its refusal (inside MULTI that also
    /// makes EXEC abort, as in Redis). `spec` is looked up only for restricted users, so open
    /// proxies pay one branch per command. `args`: the command line.
    pub(crate) fn gate(
        &self,
        plan: Plan,
        spec: impl FnOnce() -> Option<&'static CommandSpec>,
        args: Args<'_>,
    ) -> Plan {
        self.gate_as(self.user.as_ref(), plan, spec, args)
    }

    /// [`gate`](Self::gate) for `user` rather than the one the client logged in as (subscribe
    /// mode after a reload renewed it).
    pub(crate) fn gate_as(
        &self,
        user: Option<&Arc<User>>,
        plan: Plan,
        spec: impl FnOnce() -> Option<&'static CommandSpec>,
        args: Args<'_>,
    ) -> Plan {
        match user {
            Some(user) if user.is_unrestricted() => plan,
            Some(user) => match spec().map(|spec| user.check(spec, args)) {
                Some(Err(refusal)) => {
                    if let Some(tenancy) = &self.tenancy {
                        tenancy.note_refused();
                    }
                    Plan::Reply(refusal)
                }
                _ => plan,
            },
            None => match spec() {
                Some(spec) if auth::allowed_before_auth(spec) => plan,
                _ => Plan::Reply(Bytes::from_static(auth::NOAUTH)),
            },
        }
    }
}
