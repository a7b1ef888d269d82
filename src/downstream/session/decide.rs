//! What one request is, decided once for either kind of client (a worker's event loop or a
//! session task): the router's plan, then the stages that may answer it or hold it back, in
//! this order: the cluster facade's own answer, the auth gate (command, key and channel rules),
//! whether it must run alone, and its user's rate. The session task's further stages (client
//! tracking, the near cache) apply to the decision's plan in `spell_start.rs`.

use tokio::time::Instant;

use super::super::facade::Endpoint;
use super::super::local::ClientState;
use super::stamp::key_position;
use crate::auth::Admit;
use crate::protocol::Request;
use crate::router::{Plan, Router};

/// What to do with a request.
pub(in crate::downstream) enum Decided {
    /// Start it.
    Go(Decision),
    /// It must run alone and replies are still owed: it waits for them (its rate is charged
    /// once it is decided again).
    Parked,
    /// Over its user's rate (`auth.users[].limits`, `when_over: slow`): it waits until then.
    Throttled(Instant),
}

/// A request, decided.
pub(in crate::downstream) struct Decision {
    pub(in crate::downstream) plan: Plan,
    /// The command's name, for the figures.
    pub(in crate::downstream) command: &'static str,
    /// Its key's position for the hot keys (0: no key, or not a one-slot command).
    pub(in crate::downstream) key_arg: usize,
    /// It runs with nothing else owed (see `Transaction::is_exclusive`).
    pub(in crate::downstream) alone: bool,
}

/// Decides what `request` is. `owes`: replies are still owed to the client.
#[inline]
pub(in crate::downstream) fn decide(
    router: &Router,
    request: &Request,
    scratch: &mut Vec<usize>,
    facade: Option<&Endpoint>,
    state: &mut ClientState,
    owes: bool,
    now: Instant,
) -> Decided {
    let (plan, command) = router.planner().plan(request, scratch);
    let key_arg = key_position(&plan, scratch);
    let plan = match facade {
        Some(facade) => facade_plan(facade, plan, command, request, router, state),
        None => plan,
    };
    let plan = state.gate(
        plan,
        || router.planner().lookup(request.args()),
        request.args(),
    );
    let alone = state.tx.is_exclusive(&plan);
    if alone && owes {
        return Decided::Parked;
    }
    let plan = match state.admit(now) {
        Admit::Now => plan,
        Admit::After(wait) => return Decided::Throttled(now + wait),
        Admit::Refuse(reply) => Plan::Reply(reply),
    };
    Decided::Go(Decision {
        plan,
        command,
        key_arg,
        alone,
    })
}

/// On a cluster-facade listener, the facade's own reply replaces the plan of the commands it
/// answers (still subject to authentication, which runs after). Inside MULTI the usual plan
/// stands: those commands cannot be queued through redcar.
fn facade_plan(
    facade: &Endpoint,
    plan: Plan,
    command: &str,
    request: &Request,
    router: &Router,
    state: &ClientState,
) -> Plan {
    if state.tx.is_open() {
        return plan;
    }
    let ready = || router.cluster().is_ready();
    match facade.answer(command, request.args(), ready, state.protocol) {
        Some(reply) => Plan::Reply(reply),
        None => plan,
    }
}
