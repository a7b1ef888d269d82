//! What one client connection carries for the user it is logged in as: its seat among the
//! user's connections, its own rate buckets, and where its figures go; before it logs in, its
//! place among its address's unauthenticated connections. The session asks it, per command,
//! whether the command may start ([`Tenancy::admit`]) and tells it what it read and wrote.

use std::sync::Arc;

use bytes::Bytes;
use tokio::time::Instant;

use super::limits::{Admit, ClientRates};
use super::tenant::{Seat, Waiting};
use super::user::User;
use super::users::Users;
use crate::metrics::UserSeries;

/// A client's side of its user's limits and figures (made only when authentication is on).
#[derive(Default)]
pub(crate) struct Tenancy {
    /// Counted against its address until it logs in.
    waiting: Option<Waiting>,
    /// The user it is logged in as, when that is a configured one.
    login: Option<LoggedIn>,
}

struct LoggedIn {
    /// Who the client is logged in as, with its rules and limits.
    user: Arc<User>,
    /// The client's place in its user's connection count, given back on logout.
    seat: Seat,
    /// The client's own rate buckets (`limits.per_client`).
    rates: ClientRates,
}

impl Tenancy {
    /// A new connection from `peer`: `Err` with the reply to send before closing it when its
    /// address has too many unauthenticated connections already.
    pub(crate) fn connect(users: &Users, peer: &str) -> Result<Tenancy, Bytes> {
        Ok(Tenancy {
            waiting: users.connect(peer)?,
            login: None,
        })
    }

    /// The client logged in as `user` (client `id`): takes one of the user's connections
    /// (`limits.max_connections`). `Err` with the refusal when they are all taken; the client
    /// then stays as it was.
    pub(crate) fn log_in(&mut self, user: &Arc<User>, users: &Users, id: u64) -> Result<(), Bytes> {
        let Some(tenant) = &user.tenant else {
            self.login = None;
            return Ok(());
        };
        match &mut self.login {
            // The same user again (or renewed by a reload): its seat stays.
            Some(login) if Arc::ptr_eq(&login.seat.tenant, tenant) => {
                login.user = user.clone();
            }
            _ => {
                let Some(seat) = tenant.seat(users.metrics(), id, user.limits.max_connections)
                else {
                    return Err(Bytes::from(format!(
                        "-ERR redcar: user '{}' has {} connections already \
                         (auth.users[].limits.max_connections)\r\n",
                        user.name, user.limits.max_connections
                    )));
                };
                self.login = Some(LoggedIn {
                    user: user.clone(),
                    seat,
                    rates: ClientRates::default(),
                });
            }
        }
        self.waiting = None;
        Ok(())
    }

    /// Logged out (RESET, or a reload removed its user or changed its passwords).
    pub(crate) fn log_out(&mut self) {
        self.login = None;
    }

    /// Whether the client's next command may start now (per-user and per-client rates).
    #[inline]
    pub(crate) fn admit(&mut self, now: Instant) -> Admit {
        let Some(login) = &mut self.login else {
            return Admit::Now;
        };
        let limits = &login.user.limits;
        if limits.per_client.is_off() && limits.per_user.is_off() {
            return Admit::Now;
        }
        let tenant = &login.seat.tenant;
        let name = &login.user.name;
        let held_already = login.rates.is_waiting();
        let admit = login.rates.admit(limits, &tenant.buckets, now, || {
            Bytes::from(format!(
                "-ERR redcar: rate limit of user '{name}' reached \
                 (auth.users[].limits, when_over: fail); slow down\r\n"
            ))
        });
        // Counted once a command: not again when the client is looked at before its time.
        if admit != Admit::Now && !held_already {
            tenant.figures.rate_limited.inc();
        }
        admit
    }

    /// `n` bytes read from the client.
    pub(crate) fn note_read(&mut self, n: usize) {
        if let Some(login) = &mut self.login {
            let tenant = &login.seat.tenant;
            tenant.figures.bytes_received.inc_by(n as u64);
            let limits = &login.user.limits;
            if limits.counts_bytes() {
                (login.rates).take_bytes(limits, &tenant.buckets, Instant::now(), n);
            }
        }
    }

    /// `n` bytes written to the client.
    pub(crate) fn note_written(&mut self, n: usize) {
        if let Some(login) = &mut self.login {
            let tenant = &login.seat.tenant;
            tenant.figures.bytes_sent.inc_by(n as u64);
            let limits = &login.user.limits;
            if limits.counts_bytes() {
                (login.rates).take_bytes(limits, &tenant.buckets, Instant::now(), n);
            }
        }
    }

    /// `n` bytes written to the client, counted only (subscribe mode: messages are never held
    /// back by a rate).
    pub(crate) fn count_sent(&self, n: usize) {
        if let Some(login) = &self.login {
            login.seat.tenant.figures.bytes_sent.inc_by(n as u64);
        }
    }

    /// A command of the client was refused by its user's rules.
    pub(crate) fn note_refused(&self) {
        if let Some(login) = &self.login {
            login.seat.tenant.figures.refusals.inc();
        }
    }

    /// Where the client's commands count (its user's calls, errors and latency).
    #[inline]
    pub(crate) fn user_series(&self) -> Option<&Arc<UserSeries>> {
        self.login.as_ref().map(|l| &l.seat.tenant.figures.series)
    }
}
