//! The HTTP admin endpoint: `/healthz` (the process runs) and `/readyz` (a full slot map is known).

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::cluster::ClusterState;

/// Serves the admin API on `listener` until `shutdown` fires.
pub async fn serve(
    listener: TcpListener,
    cluster: Arc<ClusterState>,
    mut shutdown: watch::Receiver<bool>,
) {
    let app = axum::Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .with_state(cluster);
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

/// 200 once every slot has had an owner; 503 before, so a sidecar is not sent traffic it would
/// have to refuse.
async fn readyz(State(cluster): State<Arc<ClusterState>>) -> (StatusCode, String) {
    if !cluster.is_ready() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: no complete slot map yet\n".to_string(),
        );
    }
    let owned = cluster.topology().map_or(0, |t| t.owned_slots());
    (
        StatusCode::OK,
        format!("ready: {owned} of 16384 slots owned\n"),
    )
}
