//! Mounting the MCP server (`crate::mcp`) on `/mcp`: every request (POST, the GET stream,
//! DELETE) is authenticated here, by its `Authorization: Bearer` token, through the service
//! function GraphQL uses, so a revoked token fails on its very next request. A missing or
//! invalid token gets 401 with a JSON-RPC error body and never reaches a tool. A valid token's `Principal` travels to the tools in the request's extensions.
//!
//! **A session belongs to the user who opened it.** The `initialize` reply names the new
//! session; from then on a request naming it with another user's valid token gets 404, as
//! an unknown session would: rmcp replays a session's cached replies to a GET that
//! resumes with `Last-Event-ID`, so a session id in another user's hands must open nothing.
//! A bad token never ends a session (whoever sent it); a revoked one ends its own through
//! the watcher below.
//!
//! Each MCP session is also watched, from its `initialize` on, by a `service::Session` on
//! the token that opened it: its revocation (the bus's
//! `TokenRevoked`, here and on the other instances on PostgreSQL; a re-check every
//! [`RECHECK_IDLE`] otherwise) ends the session at once, open streams included.

use std::collections::HashMap;
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
    /// Each open MCP session's user (the one whose token initialized it); a session is in
    /// here exactly while its watcher runs.
    pub owners: Arc<Mutex<HashMap<String, i64>>>,
}

impl McpState {
    pub fn new(cairn: Cairn, endpoint: McpEndpoint) -> McpState {
        McpState {
            cairn,
            endpoint,
            owners: Arc::default(),
        }
    }

    fn owners(&self) -> std::sync::MutexGuard<'_, HashMap<String, i64>> {
        self.owners
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The user session `id` belongs to, if it is open.
    fn owner_of(&self, id: &str) -> Option<i64> {
        self.owners().get(id).copied()
    }

    /// Follows MCP session `id`, opened by `user` with `token`, until it is gone; ends it
    /// when the token is revoked or stops authenticating.
    fn watch(&self, id: String, user: i64, token: String) {
        if self.owners().insert(id.clone(), user).is_some() {
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
                }
            }
            s.endpoint.end_session(&id).await;
            s.owners().remove(&id);
        });
    }
}

/// What rmcp answers for a session it does not know.
fn unknown_session() -> Response {
    (StatusCode::NOT_FOUND, "Not Found: Session not found").into_response()
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
            if let Some(id) = &session {
                if s.owner_of(id) != Some(p.user_id) {
                    return unknown_session();
                }
            }
            let user = p.user_id;
            req.extensions_mut().insert(p);
            let response = next.run(req).await;
            // An `initialize` reply names the session it opened: it is this user's.
            if session.is_none() {
                let opened = response
                    .headers()
                    .get(SESSION_HEADER)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                if let Some(id) = opened {
                    s.watch(id, user, token);
                }
            }
            response
        }
        Err(ServiceError::Auth(_)) => unauthorized("invalid or revoked token"),
        Err(e) => {
            tracing::error!(error = %e, "MCP authentication failed");
            (StatusCode::INTERNAL_SERVER_ERROR, "internal error").into_response()
        }
    }
}
