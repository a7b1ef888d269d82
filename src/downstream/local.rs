//! Commands redcar answers itself, because they concern the client's own connection (PING, ECHO,
//! SELECT, HELLO, CLIENT SETNAME/GETNAME/ID, QUIT) rather than data on a node.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use super::local_args::{hello_options, hello_version, select, set_info, Field, HelloOptions};
use super::tracking::ClientTracking;
use crate::auth::{self, Admit, Tenancy, User, Users};
use crate::commands::{CommandSpec, Local};
use crate::metrics::UserSeries;
use crate::near_cache::Admitted;
use crate::protocol::{
    write_array_len, write_bulk, write_error, write_integer, write_map_len, write_null_in,
    write_simple, Args, Protocol,
};
use crate::router::Plan;
use crate::router::Transaction;
use crate::router::{redcar_error, Written};
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
    failed_logins: u16,
    failed_now: bool,
    /// MULTI … EXEC and WATCH.
    pub(crate) tx: Transaction,
    /// Where this client wrote (for WAIT).
    pub(crate) written: Written,
    /// Who may connect and what they may run.
    users: Arc<Users>,
    /// The authenticated user; `None` until AUTH when authentication is required.
    user: Option<Arc<User>>,
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
    fn log_in(&mut self, user: Arc<User>) -> Result<(), Bytes> {
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

    /// `AUTH [user] password`.
    fn auth(&mut self, args: Args<'_>) -> Bytes {
        let (user, password) = match (args.len(), args.get(1), args.get(2)) {
            (2, Some(password), _) => (None, password),
            (3, Some(user), Some(password)) => (Some(user), password),
            _ => return Bytes::from_static(b"-ERR syntax error\r\n"),
        };
        match self.users.login(user, password) {
            Ok(user) => match self.log_in(user) {
                Ok(()) => Bytes::from_static(b"+OK\r\n"),
                Err(refusal) => refusal,
            },
            Err(refusal) => self.failed(refusal),
        }
    }

    /// Counts a refused login and passes its refusal on.
    fn failed(&mut self, refusal: Bytes) -> Bytes {
        self.failed_logins = self.failed_logins.saturating_add(1);
        self.failed_now = true;
        refusal
    }

    /// After each command: `Some(failures so far)` when it was a refused login (once), and
    /// whether they reached `auth.max_failures`, so the connection must close.
    pub(crate) fn take_failed_login(&mut self) -> Option<(u16, bool)> {
        if !std::mem::take(&mut self.failed_now) {
            return None;
        }
        let limit = self.users.max_failures();
        Some((
            self.failed_logins,
            limit > 0 && u32::from(self.failed_logins) >= limit,
        ))
    }

    /// The reply to a locally served command (`args[0]` is the command name).
    pub(crate) fn answer(&mut self, local: Local, args: Args<'_>) -> Bytes {
        let mut out = BytesMut::with_capacity(64);
        match local {
            Local::Auth => return self.auth(args),
            Local::Ping => match args.get(1) {
                Some(message) => write_bulk(&mut out, message),
                None => write_simple(&mut out, b"PONG"),
            },
            Local::Echo => write_bulk(&mut out, args.get(1).map_or(&b""[..], |a| a)),
            Local::Quit => {
                self.quit = true;
                write_simple(&mut out, b"OK");
            }
            Local::Select => return select(args),
            Local::Hello => return self.hello(args),
            Local::ClientSetName => return self.set_name(args.get(2)),
            Local::ClientSetInfo => return set_info(args),
            Local::ClientGetName => match &self.name {
                Some(name) => write_bulk(&mut out, name),
                None => write_null_in(&mut out, self.protocol),
            },
            Local::ClientId => write_integer(&mut out, self.id as i64),
            Local::Reset => {
                self.name = None;
                write_simple(&mut out, b"RESET");
            }
            other => return redcar_error(format_args!("{other:?} cannot be answered locally")),
        }
        out.freeze()
    }

    /// `HELLO [protover [AUTH u p] [SETNAME n]]`, in Redis 7's order: the version is checked,
    /// then the options, then the login, then the name; the connection switches to the
    /// version only when all of that succeeded. Describes redcar as a standalone Redis (or a
    /// cluster node, on a cluster-facade listener).
    fn hello(&mut self, args: Args<'_>) -> Bytes {
        let mut out = BytesMut::with_capacity(256);
        let protocol = match args.get(1) {
            Some(version) => match hello_version(version, &mut out) {
                Some(asked) => asked,
                None => return out.freeze(),
            },
            None => self.protocol,
        };
        let Some(HelloOptions { login, name }) = hello_options(args, &mut out) else {
            return out.freeze();
        };
        if let Some((user, password)) = login {
            match self.users.login(Some(user), password) {
                Ok(user) => {
                    if let Err(refusal) = self.log_in(user) {
                        return refusal;
                    }
                }
                Err(refusal) => return self.failed(refusal),
            }
        }
        if self.user.is_none() {
            write_error(
                &mut out,
                b"NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time",
            );
            return out.freeze();
        }
        if name.is_some() {
            let reply = self.set_name(name);
            if reply.first() == Some(&b'-') {
                return reply;
            }
        }
        self.protocol = protocol;
        self.write_hello_map(&mut out, protocol);
        out.freeze()
    }

    /// HELLO's reply: the server's description as a map, in the version just agreed on.
    fn write_hello_map(&self, out: &mut BytesMut, protocol: Protocol) {
        let fields: [(&[u8], Field); 8] = [
            (b"server", Field::Text(b"redis")),
            (b"version", Field::Text(b"7.0.0")),
            (b"proto", Field::Int(protocol.number())),
            (b"id", Field::Int(self.id as i64)),
            (
                b"mode",
                Field::Text(if self.cluster_mode {
                    b"cluster"
                } else {
                    b"standalone"
                }),
            ),
            (b"role", Field::Text(b"master")),
            (b"modules", Field::EmptyArray),
            (
                b"proxy",
                Field::Text(concat!("redcar ", env!("CARGO_PKG_VERSION")).as_bytes()),
            ),
        ];
        write_map_len(out, fields.len(), protocol);
        for (key, value) in fields {
            write_bulk(out, key);
            match value {
                Field::Text(text) => write_bulk(out, text),
                Field::Int(n) => write_integer(out, n),
                Field::EmptyArray => write_array_len(out, 0),
            }
        }
    }

    fn set_name(&mut self, name: Option<&[u8]>) -> Bytes {
        let mut out = BytesMut::with_capacity(96);
        let Some(name) = name else {
            write_error(
                &mut out,
                b"ERR wrong number of arguments for 'client|setname' command",
            );
            return out.freeze();
        };
        // Redis's rule: names are printable ASCII without spaces (they appear in CLIENT LIST).
        if name.iter().any(|&b| !(b'!'..=b'~').contains(&b)) {
            write_error(
                &mut out,
                b"ERR Client names cannot contain spaces, newlines or special characters.",
            );
            return out.freeze();
        }
        self.name = (!name.is_empty()).then(|| Bytes::copy_from_slice(name));
        write_simple(&mut out, b"OK");
        out.freeze()
    }
}

#[cfg(test)]
#[path = "local_tests.rs"]
mod tests;
