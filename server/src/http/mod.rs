//! The axum router: `/graphql` (POST, GET = GraphiQL), `/graphql/ws`, health, metrics, and
//! the console (static files with an index.html fallback so client routes survive a reload).
//! Knows HTTP; calls `graphql` and `service`, nothing below them.

pub mod metrics;

use std::path::PathBuf;

use async_graphql::http::MultipartOptions;
use async_graphql::http::{GraphiQLSource, ALL_WEBSOCKET_PROTOCOLS};
use async_graphql::ParseRequestError;
use async_graphql_axum::{GraphQLProtocol, GraphQLResponse, GraphQLWebSocket};
use axum::body::Body;
use axum::extract::ws::{CloseFrame, Message, WebSocketUpgrade};
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
use crate::service::{Cairn, ServiceError};
use metrics::Metrics;

#[derive(Clone)]
pub struct HttpState {
    pub cairn: Cairn,
    pub schema: CairnSchema,
    pub metrics: Metrics,
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
    Router::new()
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

async fn graphiql() -> Html<String> {
    Html(
        GraphiQLSource::build()
            .endpoint("/graphql")
            .subscription_endpoint("/graphql/ws")
            .title("Cairn GraphQL")
            .finish(),
    )
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
    protocol: GraphQLProtocol,
    upgrade: WebSocketUpgrade,
) -> Response {
    upgrade
        .protocols(ALL_WEBSOCKET_PROTOCOLS)
        .on_upgrade(move |socket| {
            let cairn = s.cairn.clone();
            let (sink, stream) = socket.split();
            let sink = sink.with(|msg| future::ready(Ok::<_, axum::Error>(forbidden_close(msg))));
            GraphQLWebSocket::new_with_pair(sink, stream, s.schema.clone(), protocol)
                .on_connection_init(
                    move |payload| async move { ws_authenticate(cairn, payload).await },
                )
                .serve()
        })
}

/// The close reason our `connection_init` refusal carries.
const WS_AUTH_REFUSED: &str = "Forbidden: missing, invalid or revoked token";

/// async-graphql closes a refused `connection_init` with 1002; graphql-transport-ws asks for
/// 4403 (Forbidden), which clients treat as "do not retry with these credentials".
fn forbidden_close(msg: Message) -> Message {
    match msg {
        Message::Close(Some(frame)) if frame.reason.as_str() == WS_AUTH_REFUSED => {
            Message::Close(Some(CloseFrame {
                code: 4403,
                reason: frame.reason,
            }))
        }
        other => other,
    }
}

/// `connection_init` must carry `{"authorization": "Bearer …"}` (or `{"token": "…"}`);
/// anything else closes the socket with 4403.
async fn ws_authenticate(
    cairn: Cairn,
    payload: serde_json::Value,
) -> async_graphql::Result<async_graphql::Data> {
    let field = |k: &str| payload.get(k).and_then(|v| v.as_str());
    let token = field("authorization")
        .or_else(|| field("Authorization"))
        .and_then(auth::bearer)
        .or_else(|| field("token"))
        .ok_or_else(|| async_graphql::Error::new(WS_AUTH_REFUSED))?;
    let principal = cairn.authenticate(token).await.map_err(|e| {
        if !matches!(e, ServiceError::Auth(_)) {
            tracing::error!(error = %e, "WebSocket authentication failed");
        }
        async_graphql::Error::new(WS_AUTH_REFUSED)
    })?;
    Ok(graphql::request_data(&cairn, principal))
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
