//! Errors, layered the way text-embeddings-inference layers them: what failed (loading,
//! tokenizing, running the model) and the worker being gone, each with the lower layer's message.

/// Everything the embedder can fail with.
///
/// The messages carry the underlying candle / tokenizers / I/O error as text so the type stays
/// `Clone` (one failure can be reported to several waiting callers) and free of those crates'
/// types in the public API.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EmbedError {
    /// The model directory could not be loaded: missing or unreadable files, a config that is not
    /// a BERT config, weights that do not fit it, an unsupported pooling mode, a bad setting.
    #[error("model load failed: {0}")]
    ModelLoad(String),
    /// The tokenizer could not be loaded or configured, or failed on an input.
    #[error("tokenizer error: {0}")]
    Tokenizer(String),
    /// The forward pass or pooling failed (or panicked) for a batch.
    #[error("inference failed: {0}")]
    Inference(String),
    /// The worker thread(s) are gone (every worker exited or dropped the request).
    #[error("embedding worker is gone")]
    WorkerGone,
}

impl EmbedError {
    pub(crate) fn load(context: impl std::fmt::Display, err: impl std::fmt::Display) -> Self {
        Self::ModelLoad(format!("{context}: {err}"))
    }

    pub(crate) fn inference(err: impl std::fmt::Display) -> Self {
        Self::Inference(err.to_string())
    }
}
