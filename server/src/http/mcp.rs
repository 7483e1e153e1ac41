//! Mounting the MCP server (`crate::mcp`) on `/mcp`: every request (POST, the GET stream,
//! DELETE) is authenticated here, by its `Authorization: Bearer` token, through the service
//! function GraphQL uses, so a revoked token fails on its very next request. A missing or
//! invalid token gets 401 with a JSON-RPC error body and never reaches a tool; when the
//! request names an MCP session, that session is ended too. A valid token's `Principal`
//! travels to the tools in the request's extensions.

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::mcp::McpEndpoint;
use crate::service::{self, Cairn, ServiceError};

/// The MCP session header (Streamable HTTP).
const SESSION_HEADER: &str = "mcp-session-id";

#[derive(Clone)]
pub(super) struct McpState {
    pub cairn: Cairn,
    pub endpoint: McpEndpoint,
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
            next.run(req).await
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
