//! The HTTP admin endpoint (loopback by default):
//! - `GET /`: the status page (HTML + CSS + JS built into the binary, `page`), which polls
//!   `/status.json` every second;
//! - `GET /status.json`: what the page draws, in one document: slot ranges by shard, per-node
//!   role, health, p50/p99 latency, request and error rates, in-flight and connections, command
//!   rates, recent events (topology changes, ejections) and slow commands (`status`; rates come
//!   from counters sampled every second by `sampler`);
//! - `GET /healthz`: 200 while the process runs;
//! - `GET /readyz`: 200 once a slot map covering all 16384 slots is known, else 503;
//! - `GET /metrics`: Prometheus text exposition;
//! - `GET /topology`: slot ranges → primary and replicas, with per-node connections, latency and health (JSON);
//! - `GET /clients`: connected clients, the user each is logged in as, per-user figures (JSON);
//! - `GET /slowlog`: the slow log, newest first (JSON);
//! - `GET /hotkeys`: the hottest keys per command and node over a sliding window, and the
//!   biggest requests and replies (JSON; `hotkeys`);
//! - `GET /config`: the effective configuration (JSON; secrets redacted).
//!
//! With `admin.token` set, every endpoint except `/healthz` and `/readyz` needs
//! `Authorization: Bearer <token>` (`access`).
//!
//! The admin server runs on the main runtime, never on the workers, so a slow scrape cannot hold up
//! a client; each handler reads shared state (atomics, `ArcSwap` snapshots, short locks) and
//! allocates its answer. What each endpoint returns, `/readyz`'s rule included, is in
//! docs/observability.md.
#![warn(unreachable_pub, missing_docs)]

mod access;
mod config;
mod departed;
mod page;
mod readiness;
mod sampler;
mod state;
mod status;
mod topology;

pub(crate) use config::AdminConfig;
pub(crate) use readiness::ReadinessGauges;
pub(crate) use state::{AdminState, BackendStates};

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Json};
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::auth::TenantMetrics;

/// Serves the admin API on `listener` until `shutdown` fires.
///
/// Started by `app::run` when `admin.listen` is set; the bound socket comes from `Listeners`, so an
/// upgrade in place passes it on. The per-second sampler behind the rates is started here and ends
/// with the server. Errors serving are logged; they never stop the proxy.
pub(crate) async fn serve(
    listener: TcpListener,
    state: AdminState,
    mut shutdown: watch::Receiver<bool>,
) {
    tokio::spawn(state.sampler.clone().run(
        state.cluster.clone(),
        state.metrics.clone(),
        shutdown.clone(),
    ));
    let token = state.token;
    let protected = axum::Router::new()
        .route("/", get(page::index))
        .route("/status.css", get(page::css))
        .route("/status.js", get(page::js))
        .route("/status.json", get(status::status))
        .route("/metrics", get(metrics))
        .route("/topology", get(topology::topology))
        .route("/clients", get(clients))
        .route("/slowlog", get(slowlog))
        .route("/hotkeys", get(hotkeys))
        .route("/config", get(config));
    let protected = match token {
        Some(token) => {
            protected.route_layer(axum::middleware::from_fn_with_state(token, access::require))
        }
        None => protected,
    };
    // Added after the layer: probes (kubelet, load balancers) never need the token.
    let app = protected
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .with_state(Arc::new(state));
    let stop = async move {
        let _ = shutdown.changed().await;
    };
    if let Err(error) = axum::serve(listener, app)
        .with_graceful_shutdown(stop)
        .await
    {
        tracing::error!(%error, "admin server failed");
    }
}

/// 200 once every slot has had an owner, in every backend; 503 before, so a sidecar is not sent
/// traffic it would have to refuse.
async fn readyz(State(state): State<Arc<AdminState>>) -> (StatusCode, String) {
    let backends = state.backends.load();
    if let Some((name, _)) = backends.iter().find(|(_, b)| !b.is_ready()) {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: backend {name} has no complete map yet\n"),
        );
    }
    if !state.cluster.is_ready() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: no complete slot map yet\n".to_string(),
        );
    }
    let owned = state.cluster.topology().map_or(0, |t| t.owned_slots());
    let others = match backends.len() {
        0 | 1 => String::new(),
        n => format!(" ({n} backends ready)"),
    };
    (
        StatusCode::OK,
        format!("ready: {owned} of 16384 slots owned{others}\n"),
    )
}

/// Sets the gauges read from state first, then encodes every group; the version in the content type
/// is the Prometheus text format 0.0.4 that scrapers expect.
async fn metrics(State(state): State<Arc<AdminState>>) -> impl IntoResponse {
    let content_type = "text/plain; version=0.0.4; charset=utf-8";
    set_readiness_gauges(&state);
    (
        [(header::CONTENT_TYPE, content_type)],
        state.metrics.encode(),
    )
}

/// The gauges read from state rather than counted: every backend's owned slots and readiness
/// (as `/readyz` judges it), and `client.max_connections` from the config in effect.
fn set_readiness_gauges(state: &AdminState) {
    let backends = state.backends.load();
    let readiness = state.metrics.group::<ReadinessGauges>();
    readiness.set_backends(backends.iter().map(|(name, cluster)| {
        let owned = cluster.topology().map_or(0, |t| t.owned_slots());
        (name.as_str(), owned, cluster.is_ready())
    }));
    let config = state.config.load();
    if let Some(limit) = config["client"]["max_connections"].as_u64() {
        readiness.set_client_max_connections(limit);
    }
}

/// `/clients`: every client (with the user it is logged in as), and per listener, address and
/// user how many; each configured user's figures.
async fn clients(State(state): State<Arc<AdminState>>) -> Json<serde_json::Value> {
    let clients = state.downstream.clients();
    // Per listener and per client address (host without port): who holds the connections.
    let mut by_listener = std::collections::BTreeMap::<&str, usize>::new();
    let mut by_host = std::collections::BTreeMap::<String, usize>::new();
    for client in &clients {
        *by_listener.entry(client.listener).or_default() += 1;
        let host = client
            .addr
            .rsplit_once(':')
            .map_or(client.addr.as_str(), |(host, _)| host);
        *by_host.entry(host.to_string()).or_default() += 1;
    }
    // Who each client is logged in as (configured users only), and each user's figures.
    let tenants = state.metrics.group::<TenantMetrics>();
    let mut by_user = std::collections::BTreeMap::<String, usize>::new();
    let clients: Vec<serde_json::Value> = clients
        .iter()
        .map(|client| {
            let user = tenants.user_of(client.id);
            if let Some(user) = &user {
                *by_user.entry(user.to_string()).or_default() += 1;
            }
            let mut shown = serde_json::to_value(client).unwrap_or_default();
            shown["user"] = serde_json::json!(user.as_deref());
            shown
        })
        .collect();
    Json(serde_json::json!({
        "connected": clients.len(),
        "by_listener": by_listener,
        "by_address": by_host,
        "by_user": by_user,
        "users": tenants.summaries(),
        "clients": clients,
    }))
}

/// The slow log's entries, newest first, as `metrics.slowlog` keeps them (bounded by its config).
async fn slowlog(State(state): State<Arc<AdminState>>) -> Json<serde_json::Value> {
    Json(serde_json::json!({ "entries": state.metrics.slowlog.entries() }))
}

/// The hottest keys over the window and the biggest values seen (docs/observability.md).
async fn hotkeys(State(state): State<Arc<AdminState>>) -> Json<crate::hotkeys::HotKeysReport> {
    Json(state.downstream.hotkeys.report(tokio::time::Instant::now()))
}

/// The redacted copy of the config in effect; a reload replaces it, so this shows what runs.
async fn config(State(state): State<Arc<AdminState>>) -> Json<serde_json::Value> {
    Json(serde_json::Value::clone(&state.config.load()))
}
