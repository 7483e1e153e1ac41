//! The model seam ([`Extractor`]) and the one extraction procedure every backend goes through
//! ([`extract`]): cap the text, ask, validate against the capped text, retry once on refusal.

use async_trait::async_trait;
use serde::Serialize;

use crate::reply::{validate, Extraction, Refusal};

/// The most characters of a document an extractor is given (seed 001: "a 7B model's window,
/// and where a document's named things live").
pub const MAX_CHARS: usize = 12_000;

/// What a backend answered for one document, with its cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The reply text, expected to be the contract's JSON (validation is not the backend's job).
    pub raw: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: f64,
}

/// A backend could not produce a reply at all (as opposed to producing a refused one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExtractorError {
    /// Worth retrying later: a timeout, a busy or unreachable server, a rate limit.
    #[error("extractor temporarily unavailable: {0}")]
    Transient(String),
    /// Retrying will not help: bad configuration, a model that cannot load, a closed backend.
    #[error("extractor failed: {0}")]
    Permanent(String),
}

impl ExtractorError {
    pub fn is_transient(&self) -> bool {
        matches!(self, ExtractorError::Transient(_))
    }
}

/// The model seam: one document in, one raw reply out.
///
/// `attempt` is 1 for the first ask and 2 for the single retry after a refusal; a backend may
/// phrase the retry more insistently ([`crate::prompt::retry_prompt`]).
#[async_trait]
pub trait Extractor: Send + Sync {
    /// The backend's kind ("scripted", "rules", "local", "llm"…): recorded per extraction.
    fn name(&self) -> &str;
    /// The model (or rule set) identifier, recorded with the extraction.
    fn model(&self) -> &str;
    /// Ask for the contract's JSON about `text` (already capped at [`MAX_CHARS`]).
    async fn reply(&self, text: &str, attempt: u32) -> Result<Reply, ExtractorError>;
}

/// Token and cost totals over every attempt of one extraction.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: f64,
}

impl Usage {
    fn add(&mut self, r: &Reply) {
        self.input_tokens += r.input_tokens;
        self.output_tokens += r.output_tokens;
        self.cost_usd += r.cost_usd;
    }
}

/// A successful extraction.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub extraction: Extraction,
    /// 0 when the text was blank (nothing was asked), 1, or 2 after a refused first reply.
    pub attempts: u32,
    pub usage: Usage,
    /// The refusals of earlier attempts (empty, or the first attempt's).
    pub refusals: Vec<Refusal>,
    /// The number of characters of the document the extractor was given.
    pub chars: usize,
    /// Whether the document was longer than [`MAX_CHARS`] and was cut.
    pub truncated: bool,
}

/// Why an extraction produced no facts.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExtractError {
    /// Both attempts were refused; the document is recorded as failed without facts.
    #[error("extraction refused twice: {first}; then: {second}")]
    Refused {
        first: Refusal,
        second: Refusal,
        usage: Usage,
    },
    /// The backend could not answer.
    #[error(transparent)]
    Backend(#[from] ExtractorError),
}

/// The prefix of `text` an extractor is given: all of it up to [`MAX_CHARS`] characters;
/// beyond that, cut on a char boundary at the last paragraph break before the cap, else the
/// last sentence end, else the last whitespace, as long as that keeps at least half the cap;
/// otherwise exactly at the cap.
pub fn cap_text(text: &str) -> &str {
    cap_text_at(text, MAX_CHARS)
}

/// [`cap_text`] with another cap (in characters).
pub fn cap_text_at(text: &str, max_chars: usize) -> &str {
    let Some((cap, _)) = text.char_indices().nth(max_chars) else {
        return text;
    };
    let head = &text[..cap];
    let floor = head.char_indices().nth(max_chars / 2).map_or(0, |(b, _)| b);
    // A paragraph break: cut before it.
    if let Some(i) = head.rfind("\n\n").filter(|&i| i >= floor) {
        return head[..i].trim_end();
    }
    // A sentence end followed by whitespace: keep the punctuation.
    let sentence_end = head
        .char_indices()
        .rev()
        .take_while(|&(i, _)| i >= floor)
        .find(|&(i, c)| {
            matches!(c, '.' | '!' | '?' | '。')
                && head[i + c.len_utf8()..]
                    .chars()
                    .next()
                    .is_some_and(char::is_whitespace)
        });
    if let Some((i, c)) = sentence_end {
        return &head[..i + c.len_utf8()];
    }
    if let Some((i, _)) = head
        .char_indices()
        .rev()
        .take_while(|&(i, _)| i >= floor)
        .find(|&(_, c)| c.is_whitespace())
    {
        return head[..i].trim_end();
    }
    head
}

/// Extract one document: cap it ([`cap_text`]), ask the extractor, validate the reply against
/// the capped text, and on a refusal ask once more (attempt 2). A blank document is not sent:
/// it yields an empty extraction with `attempts == 0`.
pub async fn extract(extractor: &dyn Extractor, text: &str) -> Result<Outcome, ExtractError> {
    let capped = cap_text(text);
    let chars = capped.chars().count();
    let truncated = capped.len() < text.len();
    let mut usage = Usage::default();
    if capped.trim().is_empty() {
        return Ok(Outcome {
            extraction: Extraction::default(),
            attempts: 0,
            usage,
            refusals: Vec::new(),
            chars,
            truncated,
        });
    }
    let mut refusals: Vec<Refusal> = Vec::new();
    for attempt in 1..=2u32 {
        let reply = extractor.reply(capped, attempt).await?;
        usage.add(&reply);
        match validate(&reply.raw, capped) {
            Ok(extraction) => {
                return Ok(Outcome {
                    extraction,
                    attempts: attempt,
                    usage,
                    refusals,
                    chars,
                    truncated,
                })
            }
            Err(refusal) => {
                tracing::debug!(
                    extractor = extractor.name(),
                    model = extractor.model(),
                    attempt,
                    code = refusal.code(),
                    "extraction reply refused: {refusal}"
                );
                refusals.push(refusal);
            }
        }
    }
    let mut it = refusals.into_iter();
    match (it.next(), it.next()) {
        (Some(first), Some(second)) => Err(ExtractError::Refused {
            first,
            second,
            usage,
        }),
        // Unreachable: the loop pushes one refusal per attempt.
        _ => Err(ExtractError::Backend(ExtractorError::Permanent(
            "extraction ended without a reply".into(),
        ))),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_not_cut() {
        assert_eq!(cap_text("hello"), "hello");
        let exact = "a".repeat(MAX_CHARS);
        assert_eq!(cap_text(&exact), exact);
    }

    #[test]
    fn cut_prefers_paragraph_then_sentence_then_space() {
        let para = format!("{}\n\n{}", "word ".repeat(15), "x".repeat(30));
        assert_eq!(cap_text_at(&para, 90), "word ".repeat(15).trim_end());
        let sent = format!("{}. {}", "a b".repeat(12), "c d ".repeat(20));
        assert_eq!(cap_text_at(&sent, 60), format!("{}.", "a b".repeat(12)));
        let words = "abc ".repeat(40);
        let cut = cap_text_at(&words, 50);
        assert!(cut.len() <= 50 && cut.ends_with("abc"), "{cut:?}");
        // A break before half the cap is ignored: hard cut at the cap.
        let early = format!("Hi. {}", "x".repeat(100));
        assert_eq!(cap_text_at(&early, 50).chars().count(), 50);
    }

    #[test]
    fn cut_respects_char_boundaries() {
        let s = "é".repeat(MAX_CHARS + 10);
        let cut = cap_text(&s);
        assert_eq!(cut.chars().count(), MAX_CHARS);
        let s = "日本語".repeat(5000);
        assert_eq!(cap_text(&s).chars().count(), MAX_CHARS);
    }
}
