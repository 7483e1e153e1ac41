//! Mounting the schema: `/graphql` (POST, JSON or multipart) and `/graphql/ws`
//! (graphql-transport-ws and graphql-ws). The one file of `http` that knows async-graphql:
//! it authenticates the bearer token through `service`, caps the body, and hands the request
//! with its principal and dataloaders to [`crate::graphql`].

use std::str::FromStr;
use std::time::Duration;

use async_graphql::http::MultipartOptions;
use async_graphql::http::{WebSocketProtocols, WsMessage, ALL_WEBSOCKET_PROTOCOLS};
use async_graphql::ParseRequestError;
use async_graphql_axum::GraphQLResponse;
use axum::body::Body;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::{future, SinkExt, StreamExt};
use tokio_util::compat::TokioAsyncReadCompatExt;
use tokio_util::io::StreamReader;

use super::HttpState;
use crate::graphql::{self, error};
use crate::service::{self, AuthError, Cairn, ServiceError, Session};

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

pub(super) async fn graphql_http(
    State(s): State<HttpState>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(service::bearer);
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

pub(super) async fn graphql_ws(
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
        .and_then(service::bearer)
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
