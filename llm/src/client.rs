//! The chat-completions client: configuration, request and reply types, and the HTTP exchange.

use std::fmt;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::LlmError;

/// The most bytes of a reply body read before giving up with [`LlmError::Malformed`].
const MAX_REPLY_BYTES: usize = 16 * 1024 * 1024;
/// The most characters of an error body kept in [`LlmError::Status`].
const MAX_EXCERPT_CHARS: usize = 300;

/// Where and how to reach an OpenAI-compatible chat-completions endpoint.
///
/// `base_url` is everything before `/chat/completions`: `http://127.0.0.1:8000/v1` for a local
/// vLLM or llama.cpp server, `https://api.openai.com/v1` for OpenAI. A trailing `/` is
/// ignored. The client never guesses a missing `/v1` (some servers mount the API elsewhere);
/// a URL that already ends in `/chat/completions` is refused with [`LlmError::Config`] rather
/// than doubled.
///
/// `Debug` prints the key as `<redacted>`.
#[derive(Clone)]
pub struct LlmConfig {
    /// The URL right before `/chat/completions`, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// The model name sent with every request.
    pub model: String,
    /// Sent as `Authorization: Bearer <key>` when set (an empty key counts as none).
    pub api_key: Option<String>,
    /// Bounds one whole exchange: connect, send, status and reading the body.
    pub timeout: Duration,
    /// USD per million prompt tokens, for [`ChatReply::cost_usd`].
    pub price_in_per_mtok: f64,
    /// USD per million completion tokens, for [`ChatReply::cost_usd`].
    pub price_out_per_mtok: f64,
}

impl fmt::Debug for LlmConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LlmConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("timeout", &self.timeout)
            .field("price_in_per_mtok", &self.price_in_per_mtok)
            .field("price_out_per_mtok", &self.price_out_per_mtok)
            .finish()
    }
}

/// Who speaks in a [`ChatMessage`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: Role,
    pub content: String,
}

impl ChatMessage {
    pub fn system(content: impl Into<String>) -> Self {
        Self {
            role: Role::System,
            content: content.into(),
        }
    }

    pub fn user(content: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: content.into(),
        }
    }

    pub fn assistant(content: impl Into<String>) -> Self {
        Self {
            role: Role::Assistant,
            content: content.into(),
        }
    }
}

/// One chat-completion request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatRequest {
    /// The conversation; must not be empty.
    pub messages: Vec<ChatMessage>,
    /// Asks for `response_format: {"type": "json_object"}`. OpenAI answers 400 unless some
    /// message contains the word "json"; say so in the system prompt.
    pub json_mode: bool,
    /// Sent as `max_tokens` when set; omitted otherwise.
    pub max_tokens: Option<u32>,
    /// Sent as `temperature` when set; omitted otherwise (the server's default applies).
    pub temperature: Option<f32>,
}

impl ChatRequest {
    pub fn new(messages: Vec<ChatMessage>) -> Self {
        Self {
            messages,
            ..Self::default()
        }
    }
}

/// A completion, with its token usage and price.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatReply {
    /// The first choice's message content.
    pub content: String,
    /// The model that answered, as the server names it (the configured one if it does not say).
    pub model: String,
    /// `usage.prompt_tokens`, 0 when the server does not report it.
    pub input_tokens: u64,
    /// `usage.completion_tokens`, 0 when the server does not report it.
    pub output_tokens: u64,
    /// From the tokens and the configured prices.
    pub cost_usd: f64,
}

/// A client for one OpenAI-compatible endpoint and model. Cheap to clone (the connection pool
/// is shared).
#[derive(Clone)]
pub struct LlmClient {
    http: reqwest::Client,
    url: reqwest::Url,
    model: String,
    api_key: Option<String>,
    timeout: Duration,
    price_in_per_mtok: f64,
    price_out_per_mtok: f64,
}

impl fmt::Debug for LlmClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LlmClient")
            .field("url", &redacted_url(&self.url))
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("timeout", &self.timeout)
            .finish()
    }
}

#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    messages: &'a [ChatMessage],
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<ResponseFormat>,
}

#[derive(Serialize)]
struct ResponseFormat {
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Deserialize)]
struct WireReply {
    model: Option<String>,
    choices: Option<Vec<WireChoice>>,
    usage: Option<WireUsage>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct WireChoice {
    message: Option<WireMessage>,
}

#[derive(Deserialize)]
struct WireMessage {
    content: Option<Value>,
}

#[derive(Deserialize)]
struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
}

impl LlmClient {
    /// Checks the configuration and builds the HTTP client (rustls, no request sent).
    pub fn new(cfg: LlmConfig) -> Result<LlmClient, LlmError> {
        let base = cfg.base_url.trim().trim_end_matches('/');
        if base.is_empty() {
            return Err(LlmError::Config("base_url is empty".into()));
        }
        if base.ends_with("/chat/completions") {
            return Err(LlmError::Config(
                "base_url must end before /chat/completions (e.g. https://api.openai.com/v1)"
                    .into(),
            ));
        }
        let url = reqwest::Url::parse(&format!("{base}/chat/completions"))
            .map_err(|e| LlmError::Config(format!("base_url is not a valid URL: {e}")))?;
        if url.scheme() != "http" && url.scheme() != "https" {
            return Err(LlmError::Config(format!(
                "base_url must be http or https, not {}",
                url.scheme()
            )));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(LlmError::Config(
                "base_url must not carry a query or a fragment".into(),
            ));
        }
        let model = cfg.model.trim().to_owned();
        if model.is_empty() {
            return Err(LlmError::Config("model is empty".into()));
        }
        if cfg.timeout.is_zero() {
            return Err(LlmError::Config("timeout must be positive".into()));
        }
        for (name, price) in [
            ("price_in_per_mtok", cfg.price_in_per_mtok),
            ("price_out_per_mtok", cfg.price_out_per_mtok),
        ] {
            if !price.is_finite() || price < 0.0 {
                return Err(LlmError::Config(format!(
                    "{name} must be a finite, non-negative number"
                )));
            }
        }
        let api_key = cfg.api_key.filter(|k| !k.trim().is_empty());
        if let Some(key) = &api_key {
            if reqwest::header::HeaderValue::from_str(&format!("Bearer {key}")).is_err() {
                return Err(LlmError::Config(
                    "api_key holds characters not allowed in an HTTP header".into(),
                ));
            }
        }
        let http = reqwest::Client::builder()
            .timeout(cfg.timeout)
            .connect_timeout(cfg.timeout)
            .user_agent(concat!("cairn-llm/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| LlmError::Config(format!("cannot build the HTTP client: {e}")))?;
        Ok(LlmClient {
            http,
            url,
            model,
            api_key,
            timeout: cfg.timeout,
            price_in_per_mtok: cfg.price_in_per_mtok,
            price_out_per_mtok: cfg.price_out_per_mtok,
        })
    }

    /// The configured model name.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The full endpoint URL requests go to (`…/chat/completions`).
    pub fn endpoint(&self) -> &str {
        self.url.as_str()
    }

    /// Sends one chat-completion request and returns the first choice.
    ///
    /// The whole exchange is bounded by the configured timeout ([`LlmError::Timeout`]); it
    /// never hangs on a slow body.
    pub async fn chat(&self, req: ChatRequest) -> Result<ChatReply, LlmError> {
        if req.messages.is_empty() {
            return Err(LlmError::Config(
                "a chat request needs at least one message".into(),
            ));
        }
        if let Some(t) = req.temperature {
            if !t.is_finite() || t < 0.0 {
                return Err(LlmError::Config(
                    "temperature must be a finite, non-negative number".into(),
                ));
            }
        }
        let started = Instant::now();
        let outcome = tokio::time::timeout(self.timeout, self.exchange(&req)).await;
        let result = match outcome {
            Ok(result) => result,
            Err(_) => Err(LlmError::Timeout),
        };
        let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        match &result {
            Ok(reply) => tracing::debug!(
                model = %reply.model,
                input_tokens = reply.input_tokens,
                output_tokens = reply.output_tokens,
                cost_usd = reply.cost_usd,
                elapsed_ms,
                "llm chat completed"
            ),
            Err(e) => tracing::warn!(
                model = %self.model,
                code = e.code(),
                error = %e,
                elapsed_ms,
                "llm chat failed"
            ),
        }
        result
    }

    async fn exchange(&self, req: &ChatRequest) -> Result<ChatReply, LlmError> {
        let body = WireRequest {
            model: &self.model,
            messages: &req.messages,
            temperature: req.temperature,
            max_tokens: req.max_tokens,
            response_format: req.json_mode.then_some(ResponseFormat {
                kind: "json_object",
            }),
        };
        let mut builder = self.http.post(self.url.clone()).json(&body);
        if let Some(key) = &self.api_key {
            builder = builder.bearer_auth(key);
        }
        let mut response = builder.send().await.map_err(transport_error)?;
        let status = response.status();
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(transport_error)? {
            if bytes.len() + chunk.len() > MAX_REPLY_BYTES {
                if !status.is_success() {
                    break;
                }
                return Err(LlmError::Malformed(format!(
                    "the reply body is over {MAX_REPLY_BYTES} bytes"
                )));
            }
            bytes.extend_from_slice(&chunk);
        }
        if !status.is_success() {
            return Err(LlmError::Status {
                status: status.as_u16(),
                message: excerpt(&bytes, self.api_key.as_deref()),
            });
        }
        self.parse_reply(&bytes)
    }

    fn parse_reply(&self, bytes: &[u8]) -> Result<ChatReply, LlmError> {
        let wire: WireReply = serde_json::from_slice(bytes).map_err(|e| {
            LlmError::Malformed(format!(
                "not a JSON chat completion ({e}); body starts: {}",
                excerpt(bytes, self.api_key.as_deref())
            ))
        })?;
        let choice = match wire.choices.as_deref() {
            Some([first, ..]) => first,
            _ => {
                let why = match &wire.error {
                    Some(err) => format!(
                        "no choices; error: {}",
                        excerpt(err.to_string().as_bytes(), self.api_key.as_deref())
                    ),
                    None => "no choices".to_owned(),
                };
                return Err(LlmError::Malformed(why));
            }
        };
        let content = choice
            .message
            .as_ref()
            .and_then(|m| m.content.as_ref())
            .and_then(content_text)
            .ok_or_else(|| LlmError::Malformed("the first choice has no text content".into()))?;
        let (input_tokens, output_tokens) = wire
            .usage
            .map(|u| {
                (
                    u.prompt_tokens.unwrap_or(0),
                    u.completion_tokens.unwrap_or(0),
                )
            })
            .unwrap_or((0, 0));
        Ok(ChatReply {
            content,
            model: wire
                .model
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| self.model.clone()),
            input_tokens,
            output_tokens,
            cost_usd: cost_usd(
                input_tokens,
                output_tokens,
                self.price_in_per_mtok,
                self.price_out_per_mtok,
            ),
        })
    }
}

/// USD for the given token counts at per-million-token prices.
pub fn cost_usd(input_tokens: u64, output_tokens: u64, price_in: f64, price_out: f64) -> f64 {
    // u64 → f64 loses precision only past 2^53 tokens.
    (input_tokens as f64 * price_in + output_tokens as f64 * price_out) / 1_000_000.0
}

/// The text of a message `content`: a string, or (as some servers send) an array of parts
/// whose `text` fields are concatenated. `None` for null or anything else.
fn content_text(content: &Value) -> Option<String> {
    match content {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => {
            let mut text = String::new();
            let mut any = false;
            for part in parts {
                if let Some(t) = part.get("text").and_then(Value::as_str) {
                    text.push_str(t);
                    any = true;
                }
            }
            any.then_some(text)
        }
        _ => None,
    }
}

fn transport_error(e: reqwest::Error) -> LlmError {
    if e.is_timeout() {
        return LlmError::Timeout;
    }
    // The URL is left out: a base_url may carry user:password.
    let e = e.without_url();
    let mut message = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(inner) = source {
        message.push_str(": ");
        message.push_str(&inner.to_string());
        source = inner.source();
    }
    // Connect, TLS, and a connection lost mid-exchange are all "could not talk to it".
    LlmError::Unreachable(message)
}

/// A short, log-safe excerpt of an error body: the OpenAI-style `error.message` when there is
/// one, else the body; control characters flattened, whitespace collapsed, the key redacted,
/// at most [`MAX_EXCERPT_CHARS`] characters.
fn excerpt(body: &[u8], api_key: Option<&str>) -> String {
    let raw = String::from_utf8_lossy(body);
    let from_json = serde_json::from_str::<Value>(&raw).ok().and_then(|v| {
        match v.get("error") {
            Some(Value::Object(o)) => o.get("message").and_then(Value::as_str).map(str::to_owned),
            Some(Value::String(s)) => Some(s.clone()),
            _ => None,
        }
        .or_else(|| v.get("message").and_then(Value::as_str).map(str::to_owned))
        .or_else(|| v.get("detail").and_then(Value::as_str).map(str::to_owned))
    });
    let text = from_json.unwrap_or_else(|| raw.into_owned());
    let text = match api_key {
        Some(key) if !key.is_empty() => text.replace(key, "<redacted>"),
        _ => text,
    };
    let flat: String = text
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    if flat.is_empty() {
        return "(empty body)".to_owned();
    }
    if flat.chars().count() <= MAX_EXCERPT_CHARS {
        return flat;
    }
    let mut cut: String = flat.chars().take(MAX_EXCERPT_CHARS - 1).collect();
    cut.push('…');
    cut
}

fn redacted_url(url: &reqwest::Url) -> String {
    let mut url = url.clone();
    if !url.username().is_empty() || url.password().is_some() {
        let _ = url.set_username("");
        let _ = url.set_password(None);
    }
    url.to_string()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn cfg(base_url: &str) -> LlmConfig {
        LlmConfig {
            base_url: base_url.into(),
            model: "m".into(),
            api_key: Some("sk-secret".into()),
            timeout: Duration::from_secs(5),
            price_in_per_mtok: 1.0,
            price_out_per_mtok: 2.0,
        }
    }

    #[test]
    fn endpoint_is_base_url_plus_chat_completions() {
        let c = LlmClient::new(cfg("http://127.0.0.1:8000/v1/")).unwrap();
        assert_eq!(c.endpoint(), "http://127.0.0.1:8000/v1/chat/completions");
        let c = LlmClient::new(cfg("https://api.openai.com/v1")).unwrap();
        assert_eq!(c.endpoint(), "https://api.openai.com/v1/chat/completions");
        let c = LlmClient::new(cfg("http://host:9000/openai/v1")).unwrap();
        assert_eq!(c.endpoint(), "http://host:9000/openai/v1/chat/completions");
    }

    #[test]
    fn bad_configs_are_refused() {
        for url in [
            "",
            "   ",
            "not a url",
            "ftp://x/v1",
            "http://x/v1/chat/completions",
            "http://x/v1?a=b",
        ] {
            let err = LlmClient::new(cfg(url)).unwrap_err();
            assert_eq!(err.code(), "LLM_CONFIG", "{url}: {err}");
        }
        let mut c = cfg("http://x/v1");
        c.model = " ".into();
        assert!(matches!(LlmClient::new(c), Err(LlmError::Config(_))));
        let mut c = cfg("http://x/v1");
        c.timeout = Duration::ZERO;
        assert!(matches!(LlmClient::new(c), Err(LlmError::Config(_))));
        let mut c = cfg("http://x/v1");
        c.price_out_per_mtok = f64::NAN;
        assert!(matches!(LlmClient::new(c), Err(LlmError::Config(_))));
        let mut c = cfg("http://x/v1");
        c.price_in_per_mtok = -1.0;
        assert!(matches!(LlmClient::new(c), Err(LlmError::Config(_))));
        let mut c = cfg("http://x/v1");
        c.api_key = Some("bad\nkey".into());
        let err = LlmClient::new(c).unwrap_err();
        assert!(!err.to_string().contains("bad\nkey"));
    }

    #[test]
    fn debug_never_shows_the_key() {
        let c = cfg("http://user:pw@x/v1");
        assert!(!format!("{c:?}").contains("sk-secret"));
        let client = LlmClient::new(c).unwrap();
        let shown = format!("{client:?}");
        assert!(!shown.contains("sk-secret"), "{shown}");
        assert!(!shown.contains("pw"), "{shown}");
    }

    #[test]
    fn request_wire_shape() {
        let messages = vec![ChatMessage::system("s"), ChatMessage::user("u")];
        let body = WireRequest {
            model: "m",
            messages: &messages,
            temperature: None,
            max_tokens: Some(5),
            response_format: Some(ResponseFormat {
                kind: "json_object",
            }),
        };
        let v = serde_json::to_value(&body).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "model": "m",
                "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
                "max_tokens": 5,
                "response_format": {"type": "json_object"}
            })
        );
    }

    #[test]
    fn excerpt_prefers_error_message_and_redacts() {
        let body = br#"{"error":{"message":"Incorrect API key provided: sk-secret","type":"x"}}"#;
        assert_eq!(
            excerpt(body, Some("sk-secret")),
            "Incorrect API key provided: <redacted>"
        );
        assert_eq!(
            excerpt(b"line one\n\r\tline\x07two", None),
            "line one line two"
        );
        assert_eq!(excerpt(b"", None), "(empty body)");
        let long = "é".repeat(1000);
        let e = excerpt(long.as_bytes(), None);
        assert_eq!(e.chars().count(), MAX_EXCERPT_CHARS);
        assert!(e.ends_with('…'));
        assert_eq!(excerpt(br#"{"detail":"Not Found"}"#, None), "Not Found");
    }

    #[test]
    fn content_parts_are_joined() {
        let v = serde_json::json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]);
        assert_eq!(content_text(&v).as_deref(), Some("ab"));
        assert_eq!(content_text(&Value::Null), None);
        assert_eq!(content_text(&serde_json::json!([{"type": "image"}])), None);
    }

    #[test]
    fn cost_is_per_million_tokens() {
        let c = cost_usd(1_000_000, 500_000, 0.15, 0.60);
        assert!((c - 0.45).abs() < 1e-12);
        assert_eq!(cost_usd(0, 0, 1.0, 1.0), 0.0);
    }
}
