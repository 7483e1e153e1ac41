//! A scripted OpenAI-compatible server for tests (feature `stub`).
//!
//! [`StubServer::start`] binds `127.0.0.1:0` and serves `POST /v1/chat/completions`. Every
//! request body is recorded ([`StubServer::requests`]) with its `Authorization` header
//! ([`StubServer::authorizations`]). A request is then checked, in this order:
//!
//! 1. the bearer key, when the server was started with one: otherwise 401, as OpenAI answers;
//! 2. the OpenAI request shape: otherwise 400, and the reason is kept in
//!    [`StubServer::shape_errors`]. The shape: a JSON object with a non-empty string `model`,
//!    a non-empty `messages` array of `{role: system|user|assistant, content: string}`,
//!    optional `temperature` (a number in 0..=2), `max_tokens` (a positive integer),
//!    `response_format` (`{"type": "text" | "json_object"}`; `json_object` needs the word
//!    "json" in some message, as OpenAI demands), `stream` only `false`, and no parameter
//!    OpenAI does not know;
//!
//! and answered with the next [`StubReply`] of the script (the last one repeats; an empty
//! script answers 500). Rejected requests do not use up a scripted reply.
//!
//! A [`StubReply::Content`] answer carries a `usage` object with deterministic counts: the
//! whitespace-separated words of all request messages as `prompt_tokens`, those of the reply
//! as `completion_tokens`.
//!
//! [`StubServer::max_in_flight`] is the most requests it was answering at once (from the
//! request's arrival to its response), for tests of a client's concurrency limits.
//!
//! The server stops when the [`StubServer`] is dropped.

use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};

/// What the stub answers to one request.
#[derive(Clone)]
pub enum StubReply {
    /// A normal completion with this content and a `usage` object.
    Content(String),
    /// This HTTP status with an OpenAI-style error body whose `error.message` is the string.
    Status(u16, String),
    /// Waits, then answers with the inner reply (for timeouts).
    Delay(Duration, Box<StubReply>),
    /// This raw body with status 200 and `Content-Type: application/json` (any text: invalid
    /// JSON, or JSON without `choices`).
    Garbage(String),
    /// A completion whose content is computed from the request body (e.g. echoing the
    /// placeholders it was sent).
    Fn(Arc<dyn Fn(&Value) -> String + Send + Sync>),
    /// Status 200 and the first bytes of a completion, then nothing for this long before the
    /// rest (for timeouts while reading the body).
    StallBody(Duration),
}

impl StubReply {
    /// `StubReply::Content` from anything string-like.
    pub fn content(text: impl Into<String>) -> Self {
        StubReply::Content(text.into())
    }

    /// `StubReply::Fn` from a closure.
    pub fn from_fn(f: impl Fn(&Value) -> String + Send + Sync + 'static) -> Self {
        StubReply::Fn(Arc::new(f))
    }

    /// `StubReply::Delay` without the `Box`.
    pub fn delay(by: Duration, then: StubReply) -> Self {
        StubReply::Delay(by, Box::new(then))
    }
}

impl fmt::Debug for StubReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StubReply::Content(c) => f.debug_tuple("Content").field(c).finish(),
            StubReply::Status(s, m) => f.debug_tuple("Status").field(s).field(m).finish(),
            StubReply::Delay(d, r) => f.debug_tuple("Delay").field(d).field(r).finish(),
            StubReply::Garbage(g) => f.debug_tuple("Garbage").field(g).finish(),
            StubReply::Fn(_) => f.write_str("Fn(..)"),
            StubReply::StallBody(d) => f.debug_tuple("StallBody").field(d).finish(),
        }
    }
}

#[derive(Default)]
struct Log {
    requests: Vec<Value>,
    authorizations: Vec<Option<String>>,
    shape_errors: Vec<String>,
    next: usize,
}

struct Shared {
    script: Vec<StubReply>,
    api_key: Option<String>,
    log: Mutex<Log>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

/// Counts a request as in flight until it is dropped (when its response is ready).
struct InFlight(Arc<Shared>);

impl InFlight {
    fn enter(shared: &Arc<Shared>) -> InFlight {
        let now = shared.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        shared.max_in_flight.fetch_max(now, Ordering::SeqCst);
        InFlight(Arc::clone(shared))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Shared {
    fn log(&self) -> MutexGuard<'_, Log> {
        // A panicking test thread must not hide what was recorded.
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running stub server; stops on drop.
pub struct StubServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl fmt::Debug for StubServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StubServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl StubServer {
    /// Starts a stub that accepts any (or no) bearer key.
    ///
    /// # Panics
    ///
    /// When no loopback port can be bound (it is test support).
    pub async fn start(script: Vec<StubReply>) -> StubServer {
        Self::launch(script, None).await
    }

    /// Starts a stub that answers 401 unless the request carries `Authorization: Bearer <key>`.
    ///
    /// # Panics
    ///
    /// When no loopback port can be bound (it is test support).
    pub async fn start_with_key(script: Vec<StubReply>, key: &str) -> StubServer {
        Self::launch(script, Some(key.to_owned())).await
    }

    async fn launch(script: Vec<StubReply>, api_key: Option<String>) -> StubServer {
        let shared = Arc::new(Shared {
            script,
            api_key,
            log: Mutex::new(Log::default()),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .fallback(not_found)
            .with_state(Arc::clone(&shared));
        let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
            Ok(l) => l,
            Err(e) => panic!("stub server: cannot bind 127.0.0.1:0: {e}"),
        };
        let addr = match listener.local_addr() {
            Ok(a) => a,
            Err(e) => panic!("stub server: no local address: {e}"),
        };
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::warn!(error = %e, "stub server stopped");
            }
        });
        StubServer { addr, shared, task }
    }

    /// `http://127.0.0.1:PORT/v1`, to use as [`crate::LlmConfig::base_url`].
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The address the stub listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request body received, in order (a body that is not JSON is recorded as a JSON
    /// string of its text).
    pub fn requests(&self) -> Vec<Value> {
        self.shared.log().requests.clone()
    }

    /// The `Authorization` header of every request, in order (`None` where absent).
    pub fn authorizations(&self) -> Vec<Option<String>> {
        self.shared.log().authorizations.clone()
    }

    /// The most requests answered at once so far.
    pub fn max_in_flight(&self) -> usize {
        self.shared.max_in_flight.load(Ordering::SeqCst)
    }

    /// Why requests were refused as not OpenAI-shaped, in order.
    pub fn shape_errors(&self) -> Vec<String> {
        self.shared.log().shape_errors.clone()
    }
}

impl Drop for StubServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn not_found() -> Response {
    error_response(
        StatusCode::NOT_FOUND,
        "stub: unknown path",
        "invalid_request_error",
    )
}

async fn chat(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let _in_flight = InFlight::enter(&shared);
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let parsed: Option<Value> = serde_json::from_slice(&body).ok();
    let recorded = parsed
        .clone()
        .unwrap_or_else(|| Value::String(String::from_utf8_lossy(&body).into_owned()));
    let reply = {
        let mut log = shared.log();
        log.requests.push(recorded);
        log.authorizations.push(authorization.clone());
        if let Some(key) = &shared.api_key {
            if authorization.as_deref() != Some(format!("Bearer {key}").as_str()) {
                return error_response(
                    StatusCode::UNAUTHORIZED,
                    "Incorrect API key provided.",
                    "invalid_request_error",
                );
            }
        }
        let shape = match &parsed {
            Some(v) => check_shape(v),
            None => Err("the body is not JSON".to_owned()),
        };
        if let Err(why) = shape {
            log.shape_errors.push(why.clone());
            return error_response(StatusCode::BAD_REQUEST, &why, "invalid_request_error");
        }
        let Some(last) = shared.script.len().checked_sub(1) else {
            return error_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                "stub: the script is empty",
                "stub_error",
            );
        };
        let index = log.next.min(last);
        log.next += 1;
        shared.script[index].clone()
    };
    respond(reply, &parsed.unwrap_or(Value::Null)).await
}

async fn respond(mut reply: StubReply, request: &Value) -> Response {
    loop {
        match reply {
            StubReply::Delay(by, then) => {
                tokio::time::sleep(by).await;
                reply = *then;
            }
            StubReply::Content(content) => return completion(request, &content),
            StubReply::Fn(f) => return completion(request, &f(request)),
            StubReply::Status(status, message) => {
                let status =
                    StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                return error_response(status, &message, "stub_error");
            }
            StubReply::Garbage(body) => {
                return ([(header::CONTENT_TYPE, "application/json")], body).into_response();
            }
            StubReply::StallBody(by) => {
                let rest = completion_body(request, "stalled").to_string();
                let stream = futures_util::stream::unfold(0u8, move |step| {
                    let rest = rest.clone();
                    async move {
                        match step {
                            0 => Some((Ok::<_, std::io::Error>(Bytes::from_static(b" ")), 1)),
                            1 => {
                                tokio::time::sleep(by).await;
                                Some((Ok(Bytes::from(rest)), 2))
                            }
                            _ => None,
                        }
                    }
                });
                return (
                    [(header::CONTENT_TYPE, "application/json")],
                    Body::from_stream(stream),
                )
                    .into_response();
            }
        }
    }
}

fn words(s: &str) -> u64 {
    s.split_whitespace().count() as u64
}

fn completion_body(request: &Value, content: &str) -> Value {
    let prompt_tokens: u64 = request
        .get("messages")
        .and_then(Value::as_array)
        .map(|messages| {
            messages
                .iter()
                .filter_map(|m| m.get("content").and_then(Value::as_str))
                .map(words)
                .sum()
        })
        .unwrap_or(0);
    let completion_tokens = words(content);
    json!({
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 0,
        "model": request.get("model").and_then(Value::as_str).unwrap_or("stub"),
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": "stop"
        }],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens
        }
    })
}

fn completion(request: &Value, content: &str) -> Response {
    Json(completion_body(request, content)).into_response()
}

fn error_response(status: StatusCode, message: &str, kind: &str) -> Response {
    (
        status,
        Json(json!({"error": {"message": message, "type": kind, "code": null}})),
    )
        .into_response()
}

/// The parameters OpenAI's chat completions accept that a client of this crate might send.
const KNOWN_PARAMETERS: &[&str] = &[
    "model",
    "messages",
    "temperature",
    "max_tokens",
    "max_completion_tokens",
    "response_format",
    "stream",
    "top_p",
    "n",
    "stop",
    "seed",
    "user",
    "presence_penalty",
    "frequency_penalty",
];

/// Why a request body is not an OpenAI chat-completions request, if it is not.
fn check_shape(body: &Value) -> Result<(), String> {
    let Some(object) = body.as_object() else {
        return Err("the body is not a JSON object".into());
    };
    for key in object.keys() {
        if !KNOWN_PARAMETERS.contains(&key.as_str()) {
            return Err(format!("unrecognized request argument: {key}"));
        }
    }
    match object.get("model") {
        Some(Value::String(m)) if !m.trim().is_empty() => {}
        _ => return Err("`model` must be a non-empty string".into()),
    }
    let messages = match object.get("messages") {
        Some(Value::Array(m)) if !m.is_empty() => m,
        _ => return Err("`messages` must be a non-empty array".into()),
    };
    for (i, message) in messages.iter().enumerate() {
        match message.get("role").and_then(Value::as_str) {
            Some("system" | "user" | "assistant") => {}
            _ => {
                return Err(format!(
                    "messages[{i}].role must be system, user or assistant"
                ))
            }
        }
        if !message.get("content").is_some_and(Value::is_string) {
            return Err(format!("messages[{i}].content must be a string"));
        }
    }
    if let Some(t) = object.get("temperature") {
        if !t.as_f64().is_some_and(|t| (0.0..=2.0).contains(&t)) {
            return Err("`temperature` must be a number between 0 and 2".into());
        }
    }
    if let Some(m) = object.get("max_tokens") {
        if m.as_u64().is_none_or(|m| m == 0) {
            return Err("`max_tokens` must be a positive integer".into());
        }
    }
    if let Some(stream) = object.get("stream") {
        if stream != &Value::Bool(false) {
            return Err("the stub does not stream".into());
        }
    }
    if let Some(format) = object.get("response_format") {
        match format.get("type").and_then(Value::as_str) {
            Some("text") => {}
            Some("json_object") => {
                let mentions_json = messages.iter().any(|m| {
                    m.get("content")
                        .and_then(Value::as_str)
                        .is_some_and(|c| c.to_lowercase().contains("json"))
                });
                if !mentions_json {
                    return Err(
                        "'messages' must contain the word 'json' in some form, to use \
                                'response_format' of type 'json_object'"
                            .into(),
                    );
                }
            }
            _ => return Err("`response_format.type` must be text or json_object".into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        let ok = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        assert_eq!(check_shape(&ok), Ok(()));
        let ok = json!({"model": "m", "messages": [{"role": "system", "content": "answer in JSON"}],
                        "response_format": {"type": "json_object"}, "temperature": 0.2,
                        "max_tokens": 10, "stream": false});
        assert_eq!(check_shape(&ok), Ok(()));
        for bad in [
            json!([]),
            json!({"messages": [{"role": "user", "content": "hi"}]}),
            json!({"model": "", "messages": [{"role": "user", "content": "hi"}]}),
            json!({"model": 3, "messages": [{"role": "user", "content": "hi"}]}),
            json!({"model": "m", "messages": []}),
            json!({"model": "m", "messages": [{"role": "tool", "content": "hi"}]}),
            json!({"model": "m", "messages": [{"role": "user", "content": null}]}),
            json!({"model": "m", "messages": [{"role": "user"}]}),
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 3}),
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": null}),
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 0}),
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": true}),
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "temprature": 1}),
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}],
                   "response_format": {"type": "json_object"}}),
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}],
                   "response_format": {"type": "yaml"}}),
        ] {
            assert!(check_shape(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn usage_counts_words() {
        let req = json!({"model": "m", "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "what is  it?"}
        ]});
        let body = completion_body(&req, "a b c d");
        assert_eq!(body["usage"]["prompt_tokens"], 5);
        assert_eq!(body["usage"]["completion_tokens"], 4);
        assert_eq!(body["model"], "m");
    }
}
