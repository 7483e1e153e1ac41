//! The crate's one error type and its stable codes.

/// Everything that can go wrong talking to an LLM endpoint (or configuring this crate).
///
/// Messages never carry the API key, the prompt or the completion: they are safe to log. The
/// [`code`](LlmError::code) is the stable part meant for clients.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    /// The whole exchange (connect, send, status, body) did not finish within the configured
    /// timeout.
    #[error("the LLM endpoint did not answer within the timeout")]
    Timeout,
    /// The endpoint could not be reached (DNS, connection refused, TLS, connection lost).
    #[error("the LLM endpoint is unreachable: {0}")]
    Unreachable(String),
    /// The endpoint answered with a non-2xx status. `message` is a short excerpt of its body
    /// (at most 300 characters, control characters flattened, the API key redacted).
    #[error("the LLM endpoint answered HTTP {status}: {message}")]
    Status { status: u16, message: String },
    /// A 2xx answer that is not a usable completion: not JSON, no `choices`, no content.
    #[error("the LLM endpoint sent an unusable reply: {0}")]
    Malformed(String),
    /// Invalid configuration or request, detected before anything is sent.
    #[error("invalid LLM configuration: {0}")]
    Config(String),
}

impl LlmError {
    /// A stable, machine-readable code for this error, for API clients and metrics.
    ///
    /// | variant | code |
    /// | --- | --- |
    /// | `Timeout` | `LLM_TIMEOUT` |
    /// | `Unreachable` | `LLM_UNAVAILABLE` |
    /// | `Status` | `LLM_ERROR` |
    /// | `Malformed` | `LLM_BAD_REPLY` |
    /// | `Config` | `LLM_CONFIG` |
    pub fn code(&self) -> &'static str {
        match self {
            LlmError::Timeout => "LLM_TIMEOUT",
            LlmError::Unreachable(_) => "LLM_UNAVAILABLE",
            LlmError::Status { .. } => "LLM_ERROR",
            LlmError::Malformed(_) => "LLM_BAD_REPLY",
            LlmError::Config(_) => "LLM_CONFIG",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_stable() {
        assert_eq!(LlmError::Timeout.code(), "LLM_TIMEOUT");
        assert_eq!(LlmError::Unreachable("x".into()).code(), "LLM_UNAVAILABLE");
        let status = LlmError::Status {
            status: 500,
            message: "boom".into(),
        };
        assert_eq!(status.code(), "LLM_ERROR");
        assert_eq!(
            status.to_string(),
            "the LLM endpoint answered HTTP 500: boom"
        );
        assert_eq!(LlmError::Malformed("x".into()).code(), "LLM_BAD_REPLY");
        assert_eq!(LlmError::Config("x".into()).code(), "LLM_CONFIG");
    }
}
