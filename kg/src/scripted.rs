//! A scripted backend for tests: a queue of canned replies (or errors), answered in order; it
//! records every text and attempt it was asked about.

use std::collections::VecDeque;
use std::sync::Mutex;

use async_trait::async_trait;

use crate::extractor::{Extractor, ExtractorError, Reply};

/// Answers from a queue; an empty queue answers [`ExtractorError::Permanent`].
///
/// Usage is estimated at one token per four bytes of text and of reply; cost is 0.
#[derive(Debug, Default)]
pub struct Scripted {
    queue: Mutex<VecDeque<Result<String, ExtractorError>>>,
    asked: Mutex<Vec<(String, u32)>>,
}

impl Scripted {
    /// A backend that answers `replies` in order.
    pub fn new<I, S>(replies: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let s = Scripted::default();
        for r in replies {
            s.push(r);
        }
        s
    }

    /// Queue one more reply.
    pub fn push(&self, raw: impl Into<String>) {
        lock(&self.queue).push_back(Ok(raw.into()));
    }

    /// Queue a backend error.
    pub fn push_error(&self, error: ExtractorError) {
        lock(&self.queue).push_back(Err(error));
    }

    /// The texts and attempt numbers asked so far, in order.
    pub fn asked(&self) -> Vec<(String, u32)> {
        lock(&self.asked).clone()
    }

    /// The texts asked so far, in order.
    pub fn texts(&self) -> Vec<String> {
        lock(&self.asked).iter().map(|(t, _)| t.clone()).collect()
    }

    /// Replies not yet used.
    pub fn remaining(&self) -> usize {
        lock(&self.queue).len()
    }
}

/// A poisoned lock only means another test thread panicked; the data is still usable.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[async_trait]
impl Extractor for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }

    fn model(&self) -> &str {
        "scripted"
    }

    async fn reply(&self, text: &str, attempt: u32) -> Result<Reply, ExtractorError> {
        lock(&self.asked).push((text.to_string(), attempt));
        let next = lock(&self.queue).pop_front();
        let raw = next.unwrap_or_else(|| {
            Err(ExtractorError::Permanent(
                "scripted extractor has no reply left".into(),
            ))
        })?;
        Ok(Reply {
            input_tokens: text.len().div_ceil(4) as u64,
            output_tokens: raw.len().div_ceil(4) as u64,
            cost_usd: 0.0,
            raw,
        })
    }
}
