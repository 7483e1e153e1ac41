//! `cairn-llm`: a client for any OpenAI-compatible `/v1/chat/completions` endpoint (OpenAI,
//! vLLM, llama.cpp, Ollama, LiteLLM, …), a PII anonymizer for what is sent to it, and a
//! scripted stub server for tests. It knows nothing of GraphQL, of Cairn's HTTP server or of
//! databases: the server decides what to ask and what to do with the answer.
//!
//! # Layout
//!
//! ```text
//! client.rs  LlmConfig, LlmClient::chat, ChatRequest/ChatMessage/Role, ChatReply, cost_usd
//! error.rs   LlmError and its stable codes (LLM_TIMEOUT, LLM_UNAVAILABLE, LLM_ERROR,
//!            LLM_BAD_REPLY, LLM_CONFIG)
//! pii/       Anonymizer → (text with [EMAIL_1]/[PHONE_1]/[IBAN_1]/[NAME_1], PiiMap);
//!            PiiMap::apply (hide the same values in other text), PiiMap::restore
//!   detect.rs  the detectors (e-mail, IBAN, phone, configured names) and value keys
//!   iban.rs    the registry lengths and the ISO 7064 MOD 97-10 check
//! stub.rs    StubServer (feature `stub`): scripted replies, recorded requests, shape checks
//! ```
//!
//! # Decisions
//!
//! - **The base URL** is everything before `/chat/completions` (`http://127.0.0.1:8000/v1`,
//!   `https://api.openai.com/v1`); a trailing `/` is ignored, `/v1` is never guessed, and a URL
//!   already ending in `/chat/completions` is refused as a configuration error.
//! - **One bound per call.** The configured timeout covers connect, send, status and the whole
//!   body (a `tokio::time::timeout` around the exchange, plus reqwest's own): a server that
//!   stalls mid-body yields [`LlmError::Timeout`], never a hang. Bodies over 16 MiB are refused.
//! - **Optional parameters are omitted, not null**: `temperature` and `max_tokens` are sent
//!   only when set (some servers reject `null`); `response_format: {"type": "json_object"}`
//!   only in JSON mode. No retries here: the caller knows whether a retry is worth its cost.
//! - **Errors are log-safe.** The API key is never in a message or a `Debug` output (it is
//!   redacted from echoed error bodies too); status errors keep at most 300 characters of
//!   the body, preferring the OpenAI-style `error.message`; transport errors omit the URL
//!   (it may carry credentials). Prompts and completions are never logged.
//! - **Usage and cost**: tokens from `usage.prompt_tokens`/`completion_tokens` (0 when
//!   absent), cost from the configured USD-per-million-token prices.
//! - **Content** is the first choice's `message.content`; an array of text parts (as some
//!   servers send) is joined; `null` content (e.g. only tool calls) is [`LlmError::Malformed`].
//! - **TLS** is rustls with the webpki roots (no system OpenSSL needed).
//! - **PII**: see [`pii`] for what is detected and how placeholders behave.

mod client;
mod error;
pub mod pii;
#[cfg(feature = "stub")]
pub mod stub;

pub use client::{cost_usd, ChatMessage, ChatReply, ChatRequest, LlmClient, LlmConfig, Role};
pub use error::LlmError;
pub use pii::{Anonymizer, PiiKind, PiiMap};
