//! The LLM roles a team may point at its own endpoint (seed 001, KG-7): `chat` writes
//! answers, `utility` extracts knowledge. The rules an endpoint setting must meet live here;
//! sealing its key and resolving a role at run time live in `crate::roles`.

use std::fmt;
use std::str::FromStr;

use super::{InvalidInput, ParseEnumError, MAX_NAME_CHARS};

/// An LLM role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ModelRole {
    /// Answers (`answer`, the MCP `search_documents` synthesis).
    Chat,
    /// Knowledge extraction (`extractKnowledge`).
    Utility,
}

impl ModelRole {
    pub const ALL: [ModelRole; 2] = [ModelRole::Chat, ModelRole::Utility];

    pub fn as_str(self) -> &'static str {
        match self {
            ModelRole::Chat => "chat",
            ModelRole::Utility => "utility",
        }
    }
}

impl FromStr for ModelRole {
    type Err = ParseEnumError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ModelRole::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| ParseEnumError {
                kind: "model role",
                value: s.to_owned(),
            })
    }
}

impl fmt::Display for ModelRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The longest endpoint URL, in characters.
pub const MAX_URL_CHARS: usize = 2_000;
/// The longest API key, in bytes.
pub const MAX_KEY_BYTES: usize = 4_096;
/// The highest price per million tokens (USD) a setting may name: far above any real price,
/// low enough that a typo (a price per token typed as per million) is not silently kept.
pub const MAX_PRICE_PER_MTOK: f64 = 10_000.0;

/// A team's endpoint for one role, as an admin typed it, checked.
#[derive(Clone, PartialEq)]
pub struct EndpointSetting {
    /// Everything before `/chat/completions`, without a trailing slash.
    pub url: String,
    pub model: String,
    pub price_input: f64,
    pub price_output: f64,
}

impl fmt::Debug for EndpointSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EndpointSetting")
            .field("url", &self.url)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl EndpointSetting {
    /// Checks an admin's input: an `http` or `https` URL with a host and no user info, query
    /// or fragment (the key has its own write-only field; a key in the URL would be shown back),
    /// a model name, and prices that are finite, ≥ 0 and ≤ [`MAX_PRICE_PER_MTOK`].
    pub fn new(
        url: &str,
        model: &str,
        price_input: f64,
        price_output: f64,
    ) -> Result<EndpointSetting, InvalidInput> {
        let url = url.trim().trim_end_matches('/');
        super::bounded(url, "url", MAX_URL_CHARS)?;
        let rest = url
            .strip_prefix("https://")
            .or_else(|| url.strip_prefix("http://"))
            .ok_or_else(|| InvalidInput::new("url", "must start with http:// or https://"))?;
        let host = rest.split('/').next().unwrap_or_default();
        if host.is_empty() {
            return Err(InvalidInput::new("url", "must name a host"));
        }
        if host.contains('@') {
            return Err(InvalidInput::new(
                "url",
                "must not carry credentials (use apiKey, which is never shown back)",
            ));
        }
        if rest.contains('?') || rest.contains('#') {
            return Err(InvalidInput::new(
                "url",
                "must not have a query or fragment",
            ));
        }
        if url.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(InvalidInput::new("url", "must not contain spaces"));
        }
        let model = super::clean_name(model, "model")?;
        super::bounded(&model, "model", MAX_NAME_CHARS)?;
        for (field, p) in [("priceInput", price_input), ("priceOutput", price_output)] {
            if !p.is_finite() || !(0.0..=MAX_PRICE_PER_MTOK).contains(&p) {
                return Err(InvalidInput::new(
                    field,
                    format!("must be between 0 and {MAX_PRICE_PER_MTOK} USD per million tokens"),
                ));
            }
        }
        Ok(EndpointSetting {
            url: url.to_owned(),
            model,
            price_input,
            price_output,
        })
    }
}

/// Checks an API key an admin typed (`None` after trimming: no key).
pub fn clean_key(raw: &str) -> Result<Option<String>, InvalidInput> {
    let key = raw.trim();
    if key.is_empty() {
        return Ok(None);
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(InvalidInput::new(
            "apiKey",
            format!("is longer than {MAX_KEY_BYTES} bytes"),
        ));
    }
    if key.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(InvalidInput::new("apiKey", "must not contain spaces"));
    }
    Ok(Some(key.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_round_trip() {
        for r in ModelRole::ALL {
            assert_eq!(r.as_str().parse::<ModelRole>().ok(), Some(r));
        }
        assert!("embed".parse::<ModelRole>().is_err());
    }

    #[test]
    fn endpoint_rules() {
        let ok = EndpointSetting::new(" https://llm.example/v1/ ", " m ", 0.15, 0.6);
        let ok = ok.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ok.url, "https://llm.example/v1");
        assert_eq!(ok.model, "m");
        for bad in [
            "ftp://x/v1",
            "llm.example/v1",
            "https:///v1",
            "https://user:pw@llm.example/v1",
            "https://llm.example/v1?key=1",
            "https://llm.example/v 1",
        ] {
            assert!(EndpointSetting::new(bad, "m", 0.0, 0.0).is_err(), "{bad}");
        }
        assert!(EndpointSetting::new("http://h/v1", "", 0.0, 0.0).is_err());
        for p in [-1.0, f64::NAN, f64::INFINITY, 20_000.0] {
            assert!(EndpointSetting::new("http://h/v1", "m", p, 0.0).is_err());
            assert!(EndpointSetting::new("http://h/v1", "m", 0.0, p).is_err());
        }
    }

    #[test]
    fn key_rules() {
        assert_eq!(clean_key("  ").ok(), Some(None));
        assert_eq!(clean_key(" sk-1 ").ok(), Some(Some("sk-1".into())));
        assert!(clean_key("sk 1").is_err());
        assert!(clean_key(&"k".repeat(MAX_KEY_BYTES + 1)).is_err());
    }
}
