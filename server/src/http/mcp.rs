//! Mounting the MCP server (`crate::mcp`) on `/mcp`: every request (POST, the GET stream,
//! DELETE) is authenticated here, by its `Authorization: Bearer` token, through the service
//! function GraphQL uses, so a revoked token fails on its very next request. A missing or
//! invalid token gets 401 with a JSON-RPC error body and never reaches a tool; when the
//! request names an MCP session, that session is ended too. A valid token's `Principal`
//! travels to the tools in the request's extensions.
//!
//! Each MCP session is also watched, from its first authenticated request that names it, by
//! a `service::Session` on the token that request carried: its revocation (the bus's
//! `TokenRevoked`, here and on the other instances on PostgreSQL; a re-check every
//! [`RECHECK_IDLE`] otherwise) ends the session at once, open streams included.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::mcp::McpEndpoint;
use crate::service::{self, Cairn, ServiceError};

/// The MCP session header (Streamable HTTP).
const SESSION_HEADER: &str = "mcp-session-id";
/// How often an idle session's token is checked again (a revocation by another process on
/// SQLite reaches no bus).
const RECHECK_IDLE: Duration = Duration::from_secs(30);
/// How often a watcher looks whether its MCP session still exists.
const SESSION_POLL: Duration = Duration::from_secs(5);

#[derive(Clone)]
pub(super) struct McpState {
    pub cairn: Cairn,
    pub endpoint: McpEndpoint,
    /// The MCP sessions a watcher follows.
    pub watched: Arc<Mutex<HashSet<String>>>,
}

impl McpState {
    pub fn new(cairn: Cairn, endpoint: McpEndpoint) -> McpState {
        McpState {
            cairn,
            endpoint,
            watched: Arc::default(),
        }
    }

    /// Marks `id` watched; false when it already was.
    fn start_watching(&self, id: &str) -> bool {
        match self.watched.lock() {
            Ok(mut w) => w.insert(id.to_owned()),
            Err(poisoned) => poisoned.into_inner().insert(id.to_owned()),
        }
    }

    fn stop_watching(&self, id: &str) {
        match self.watched.lock() {
            Ok(mut w) => w.remove(id),
            Err(poisoned) => poisoned.into_inner().remove(id),
        };
    }

    /// Follows MCP session `id` opened with `token` until it is gone; ends it when the token
    /// is revoked or stops authenticating.
    async fn watch(&self, id: String, token: String) {
        if !self.start_watching(&id) {
            return;
        }
        let s = self.clone();
        tokio::spawn(async move {
            let session = service::Session::new();
            if session.open(&s.cairn, &token).await.is_ok() {
                session
                    .watch(
                        &s.cairn,
                        RECHECK_IDLE,
                        s.endpoint.session_gone(&id, SESSION_POLL),
                    )
                    .await;
                if session.is_closed() {
                    tracing::info!("MCP session ended: its token was revoked");
                    s.endpoint.end_session(&id).await;
                }
            }
            s.stop_watching(&id);
        });
    }
}

/// 401 with the JSON-RPC error the MCP client surfaces (`id` null: the request is refused
/// before it is read).
fn unauthorized(message: &str) -> Response {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": { "code": -32001, "message": format!("UNAUTHENTICATED: {message}") },
    });
    (
        StatusCode::UNAUTHORIZED,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer")),
        ],
        body.to_string(),
    )
        .into_response()
}

pub(super) async fn authenticate(
    State(s): State<McpState>,
    mut req: Request,
    next: Next,
) -> Response {
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(service::bearer)
        .map(str::to_owned);
    let session = req
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let Some(token) = presented else {
        return unauthorized("send Authorization: Bearer <token>");
    };
    match s.cairn.authenticate(&token).await {
        Ok(p) => {
            req.extensions_mut().insert(p);
            let response = next.run(req).await;
            if let Some(id) = session {
                if s.endpoint.has_session(&id).await {
                    s.watch(id, token).await;
                }
            }
            response
        }
        Err(ServiceError::Auth(_)) => {
            if let Some(id) = session {
                s.endpoint.end_session(&id).await;
            }
            unauthorized("invalid or revoked token")
        }
        Err(e) => {
            tracing::error!(error = %e, "MCP authentication failed");
            (StatusCode::INTERNAL_SERVER_ERROR, "internal error").into_response()
        }
    }
}
