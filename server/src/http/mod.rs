//! The axum router: `/graphql` (POST, GET = GraphiQL), `/graphql/ws`, health, metrics, and
//! the console (static files with an index.html fallback so client routes survive a reload).
//! Knows HTTP; calls `graphql` and `service`, nothing below them.

pub mod metrics;

use std::path::PathBuf;

use async_graphql::http::MultipartOptions;
use std::str::FromStr;
use std::time::Duration;

use async_graphql::http::{WebSocketProtocols, WsMessage, ALL_WEBSOCKET_PROTOCOLS};
use async_graphql::ParseRequestError;
use async_graphql_axum::GraphQLResponse;
use axum::body::Body;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{middleware, Router};
use futures_util::{future, SinkExt, StreamExt};
use tokio_util::compat::TokioAsyncReadCompatExt;
use tokio_util::io::StreamReader;
use tower_http::services::{ServeDir, ServeFile};
use tower_http::trace::TraceLayer;

use crate::auth::{self, AuthError};
use crate::graphql::{self, error, CairnSchema};
use crate::service::{Cairn, ServiceError, Session};
use metrics::Metrics;

#[derive(Clone)]
pub struct HttpState {
    pub cairn: Cairn,
    pub schema: CairnSchema,
    pub metrics: Metrics,
    /// Whether `<console>/graphiql/` holds GraphiQL's files (see [`graphiql`]).
    pub graphiql_installed: bool,
}

pub fn router(state: HttpState, console_dir: PathBuf, max_body: u64) -> Router {
    let index = console_dir.join("index.html");
    let console = if index.is_file() {
        // `scripts/build-console.sh` writes `.gz` twins of the wasm, JS and CSS; a browser that
        // accepts gzip gets those (the wasm shrinks to about 40%).
        Router::new().fallback_service(
            ServeDir::new(&console_dir)
                .precompressed_gzip()
                .fallback(ServeFile::new(index)),
        )
    } else {
        tracing::warn!(dir = %console_dir.display(), "console not built: run scripts/build-console.sh");
        Router::new().fallback(get(console_missing))
    };
    let metrics_state = state.metrics.clone();
    // GraphiQL's own files, whether or not the console is built.
    let graphiql_files = ServeDir::new(console_dir.join("graphiql")).precompressed_gzip();
    Router::new()
        .nest_service("/graphiql", graphiql_files)
        .route("/graphql", get(graphiql).post(graphql_http))
        .route("/graphql/ws", get(graphql_ws))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .layer(DefaultBodyLimit::max(
            usize::try_from(max_body).unwrap_or(usize::MAX),
        ))
        .with_state(state)
        .merge(console)
        .layer(middleware::from_fn_with_state(
            metrics_state,
            metrics::track,
        ))
        .layer(TraceLayer::new_for_http())
}

/// GraphiQL, from files Cairn serves itself (`/graphiql/*`, put into the console's folder by
/// `scripts/fetch-graphiql.sh` from the npm registry, pinned): no CDN, so it works offline and
/// no third-party script runs on the console's origin. The page's CSP says the same.
const GRAPHIQL_PAGE: &str = r#"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="robots" content="noindex">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Cairn GraphQL</title>
<style>body{height:100%;margin:0;width:100%;overflow:hidden}#graphiql{height:100vh}</style>
<link rel="stylesheet" href="/graphiql/graphiql.min.css">
<script src="/graphiql/react.production.min.js"></script>
<script src="/graphiql/react-dom.production.min.js"></script>
<script src="/graphiql/graphiql.min.js"></script>
</head>
<body>
<div id="graphiql">Loading…</div>
<script>
const wsUrl = new URL('/graphql/ws', window.location.origin);
wsUrl.protocol = wsUrl.protocol === 'https:' ? 'wss:' : 'ws:';
ReactDOM.createRoot(document.getElementById('graphiql')).render(
  React.createElement(GraphiQL, {
    fetcher: GraphiQL.createFetcher({ url: '/graphql', subscriptionUrl: wsUrl.toString() }),
    defaultEditorToolsVisibility: true,
  })
);
</script>
</body>
</html>"#;

/// The GraphiQL page's policy: scripts, styles and connections from this origin only.
const GRAPHIQL_CSP: &str = "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; connect-src 'self' ws: wss:";

async fn graphiql(State(s): State<HttpState>) -> Response {
    if !s.graphiql_installed {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Html("<!doctype html><title>Cairn GraphQL</title><p>GraphiQL's files are not installed. Run <code>scripts/build-console.sh</code> (it runs <code>scripts/fetch-graphiql.sh</code>), or POST queries to <code>/graphql</code>.</p>"),
        )
            .into_response();
    }
    (
        [(header::CONTENT_SECURITY_POLICY, GRAPHIQL_CSP)],
        Html(GRAPHIQL_PAGE),
    )
        .into_response()
}

/// The error body for a request refused before GraphQL runs.
fn refusal(status: StatusCode, code: &'static str, message: &str) -> Response {
    let body = serde_json::json!({
        "data": null,
        "errors": [{ "message": message, "extensions": { "code": code } }],
    });
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// Bytes allowed beyond the upload cap for the multipart envelope (operations, map, headers).
const ENVELOPE_SLACK: u64 = 1024 * 1024;

async fn graphql_http(State(s): State<HttpState>, headers: HeaderMap, body: Body) -> Response {
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(auth::bearer);
    let principal = match presented {
        Some(token) => match s.cairn.authenticate(token).await {
            Ok(p) => Some(p),
            Err(ServiceError::Auth(AuthError::InvalidToken)) => {
                return refusal(
                    StatusCode::UNAUTHORIZED,
                    error::UNAUTHENTICATED,
                    "invalid or revoked token",
                );
            }
            Err(e) => {
                tracing::error!(error = %e, "authentication failed");
                return refusal(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    error::INTERNAL,
                    "internal error",
                );
            }
        },
        None => None,
    };
    let cap = s.cairn.settings.max_upload_bytes;
    let too_large = || {
        refusal(
            StatusCode::PAYLOAD_TOO_LARGE,
            error::PAYLOAD_TOO_LARGE,
            &format!("the request is larger than the limit of {cap} bytes"),
        )
    };
    // Refuse on the declared length before reading anything.
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > cap + ENVELOPE_SLACK) {
        return too_large();
    }
    // And count what actually arrives: the stream fails past the cap, whatever was declared.
    let limit = cap + ENVELOPE_SLACK;
    let stream = body.into_data_stream().scan(0u64, move |seen, chunk| {
        let item = chunk.map_err(std::io::Error::other).and_then(|bytes| {
            *seen += bytes.len() as u64;
            if *seen > limit {
                Err(std::io::Error::new(
                    std::io::ErrorKind::FileTooLarge,
                    "request body over the cap",
                ))
            } else {
                Ok(bytes)
            }
        });
        future::ready(Some(item))
    });
    let reader = StreamReader::new(stream).compat();
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let opts = MultipartOptions::default()
        .max_file_size(usize::try_from(cap).unwrap_or(usize::MAX))
        .max_num_files(4);
    let mut req = match async_graphql::http::receive_body(content_type, reader, opts).await {
        Ok(r) => r,
        Err(ParseRequestError::PayloadTooLarge) => return too_large(),
        Err(ParseRequestError::Io(e)) if e.kind() == std::io::ErrorKind::FileTooLarge => {
            return too_large()
        }
        Err(e) => {
            return refusal(
                StatusCode::BAD_REQUEST,
                error::BAD_USER_INPUT,
                &format!("malformed request: {e}"),
            )
        }
    };
    if let Some(p) = principal {
        req = req
            .data(graphql::loaders::Loaders::new(&s.cairn, &p))
            .data(p);
    }
    // Without a token, every field that needs a principal answers UNAUTHENTICATED.
    GraphQLResponse::from(s.schema.execute(req).await).into_response()
}

async fn graphql_ws(
    State(s): State<HttpState>,
    headers: HeaderMap,
    upgrade: WebSocketUpgrade,
) -> Response {
    // The subprotocol the client asked for (graphql-transport-ws or the older graphql-ws).
    let Some(protocol) = headers
        .get(header::SEC_WEBSOCKET_PROTOCOL)
        .and_then(|v| v.to_str().ok())
        .and_then(|list| {
            list.split(',')
                .find_map(|p| WebSocketProtocols::from_str(p.trim()).ok())
        })
    else {
        return refusal(
            StatusCode::BAD_REQUEST,
            error::BAD_USER_INPUT,
            "ask for the graphql-transport-ws (or graphql-ws) subprotocol",
        );
    };
    upgrade
        .protocols(ALL_WEBSOCKET_PROTOCOLS)
        .on_upgrade(move |socket| serve_ws(s, protocol, socket))
}

/// How often an idle socket checks its token again on its own (a revocation in another
/// process on SQLite reaches no bus; operations check every time anyway).
const WS_RECHECK_EVERY: Duration = Duration::from_secs(5);

/// The close code for a socket whose token was revoked (or became invalid) while open.
const WS_REVOKED: u16 = 4401;

/// One socket: the GraphQL protocol over it; it closes with [`WS_REVOKED`] when its session
/// ends: an operation found the token revoked ([`Session::principal`]), or the session's
/// watch did ([`Session::watch`]: the bus's revocation event, or the periodic re-check).
async fn serve_ws(s: HttpState, protocol: WebSocketProtocols, socket: WebSocket) {
    let session = Session::new();
    let (mut sink, stream) = socket.split();
    let input = stream
        .take_while(|m| future::ready(m.is_ok()))
        .filter_map(|m| {
            future::ready(match m {
                Ok(Message::Text(t)) => Some(t.as_str().as_bytes().to_vec()),
                Ok(Message::Binary(b)) => Some(b.to_vec()),
                _ => None,
            })
        });
    let cairn = s.cairn.clone();
    let init = session.clone();
    let mut ws = Box::pin(
        async_graphql::http::WebSocket::new(s.schema.clone(), input, protocol).on_connection_init(
            move |payload| async move { ws_authenticate(cairn, init, payload).await },
        ),
    );
    // The session's token, watched while the socket is open (see `Session::watch`).
    let (stop_watch, watch_stopped) = tokio::sync::oneshot::channel::<()>();
    {
        let session = session.clone();
        let cairn = s.cairn.clone();
        tokio::spawn(async move {
            session
                .watch(&cairn, WS_RECHECK_EVERY, async {
                    let _ = watch_stopped.await;
                })
                .await;
        });
    }
    let _stop_watch = stop_watch;
    loop {
        tokio::select! {
            out = ws.next() => match out {
                Some(WsMessage::Text(t)) => {
                    if sink.send(Message::Text(t.into())).await.is_err() {
                        return;
                    }
                }
                Some(WsMessage::Close(code, reason)) => {
                    // async-graphql closes a refused `connection_init` with 1002;
                    // graphql-transport-ws asks for 4403 (Forbidden), which clients treat as
                    // "do not retry with these credentials".
                    let code = if reason == WS_AUTH_REFUSED { 4403 } else { code };
                    let _ = sink
                        .send(Message::Close(Some(CloseFrame { code, reason: reason.into() })))
                        .await;
                    return;
                }
                None => return,
            },
            () = session.closed() => {
                let _ = sink
                    .send(Message::Close(Some(CloseFrame {
                        code: WS_REVOKED,
                        reason: "Unauthorized: the token was revoked".into(),
                    })))
                    .await;
                return;
            }
        }
    }
}

/// The close reason our `connection_init` refusal carries.
const WS_AUTH_REFUSED: &str = "Forbidden: missing, invalid or revoked token";

/// `connection_init` must carry `{"authorization": "Bearer …"}` (or `{"token": "…"}`);
/// anything else closes the socket with 4403. The connection keeps the [`Session`] only; each
/// operation checks its token again.
async fn ws_authenticate(
    cairn: Cairn,
    session: Session,
    payload: serde_json::Value,
) -> async_graphql::Result<async_graphql::Data> {
    let field = |k: &str| payload.get(k).and_then(|v| v.as_str());
    let token = field("authorization")
        .or_else(|| field("Authorization"))
        .and_then(auth::bearer)
        .or_else(|| field("token"))
        .ok_or_else(|| async_graphql::Error::new(WS_AUTH_REFUSED))?;
    session.open(&cairn, token).await.map_err(|e| {
        if !matches!(e, ServiceError::Auth(_)) {
            tracing::error!(error = %e, "WebSocket authentication failed");
        }
        async_graphql::Error::new(WS_AUTH_REFUSED)
    })?;
    Ok(graphql::session_data(session))
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(s): State<HttpState>) -> Response {
    match s.cairn.store.ping().await {
        Ok(()) => (StatusCode::OK, "ready").into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "readiness check failed");
            (StatusCode::SERVICE_UNAVAILABLE, "database unavailable").into_response()
        }
    }
}

async fn metrics_text(State(s): State<HttpState>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        s.metrics.render(),
    )
        .into_response()
}

async fn console_missing() -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        Html("<!doctype html><title>Cairn</title><p>The console is not built. Run <code>scripts/build-console.sh</code>, or use the API at <a href=\"/graphql\">/graphql</a>.</p>"),
    )
        .into_response()
}
