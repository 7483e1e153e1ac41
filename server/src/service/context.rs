//! The `[SUGGESTED CONTEXT]` pre-fetch (seed 004, "Pre-fetch context"): before an agent
//! builds its prompt for a user's message, the best chunks of the instance's system corpora
//! for that message, as one block of text.
//!
//! - `operational_patterns` (top 3) and `user_behavior` (top 2) always; `data_catalog`
//!   (top 25, rendered as `relevant_entry_ids`) only with `CAIRN_PREFETCH_DATA_CATALOG`.
//!   A corpus that does not exist is skipped.
//! - Ranked by the vector channel when the model is loaded; otherwise (or when embedding
//!   fails) by the keyword fallback, the lexical channel without the chunks marked
//!   [`PROVISIONAL_MARK`] (verbatim copies of past user messages, which would otherwise win
//!   every overlap ranking for a task like an earlier one).
//! - Never an error: any failure (store, rate limit, capability) is logged and answers the
//!   empty block, so a broken corpus cannot break the agent's request.

use super::search::{SearchHit, MAX_TOP_K};
use super::{Cairn, ServiceResult};
use crate::auth::Principal;
use crate::domain::search::SearchMode;
use crate::domain::{Capability, MAX_QUERY_CHARS};

/// A system corpus the pre-fetch consults: its name, what its hits are in the block, how many.
#[derive(Clone, Copy, Debug)]
pub struct Prefetch {
    pub corpus: &'static str,
    pub label: &'static str,
    pub top_k: usize,
}

/// The corpora consulted, in the block's order (seed 004's table).
pub const PREFETCH: [Prefetch; 3] = [
    Prefetch {
        corpus: "operational_patterns",
        label: "Patterns",
        top_k: 3,
    },
    Prefetch {
        corpus: "user_behavior",
        label: "Preferences",
        top_k: 2,
    },
    Prefetch {
        corpus: DATA_CATALOG,
        label: "Catalog entries",
        top_k: 25,
    },
];

/// The catalog corpus, consulted only when the instance enables it.
pub const DATA_CATALOG: &str = "data_catalog";

/// Marks a chunk the keyword fallback never offers.
pub const PROVISIONAL_MARK: &str = "[PROVISIONAL]";

impl Cairn {
    /// The `[SUGGESTED CONTEXT]` block for `message`, or the empty string when nothing
    /// applies or anything fails (see the module docs).
    pub async fn suggested_context(&self, p: &Principal, message: &str) -> String {
        match self.try_suggested_context(p, message).await {
            Ok(block) => block,
            Err(e) => {
                tracing::warn!(error = %e, user = p.user_id, "suggested context failed: empty block");
                String::new()
            }
        }
    }

    async fn try_suggested_context(&self, p: &Principal, message: &str) -> ServiceResult<String> {
        p.require(Capability::Search)?;
        let message: String = message.trim().chars().take(MAX_QUERY_CHARS).collect();
        if message.is_empty() {
            return Ok(String::new());
        }
        // One token of the caller's search bucket for the whole block.
        self.rate_limit_search(p)?;
        let mut sections = Vec::new();
        for slot in PREFETCH {
            if slot.corpus == DATA_CATALOG && !self.prefetch_data_catalog {
                continue;
            }
            let Some(corpus) = self.store.system_corpus_by_name(slot.corpus).await? else {
                continue;
            };
            let hits = self.prefetch(p, &message, corpus.id, slot.top_k).await?;
            if !hits.is_empty() {
                sections.push(render(slot, &hits));
            }
        }
        if sections.is_empty() {
            return Ok(String::new());
        }
        Ok(format!(
            "[SUGGESTED CONTEXT]\n{}[/SUGGESTED CONTEXT]\n",
            sections.concat()
        ))
    }

    /// The best `k` chunks of one system corpus for `message`.
    async fn prefetch(
        &self,
        p: &Principal,
        message: &str,
        corpus_id: i64,
        k: usize,
    ) -> ServiceResult<Vec<SearchHit>> {
        let scope = [corpus_id];
        if self.models.embedder.is_some() {
            match self
                .retrieve(p, message, Some(&scope), k, SearchMode::Vector)
                .await
            {
                Ok(outcome) => return Ok(outcome.hits),
                Err(e) => {
                    tracing::warn!(error = %e, "suggested context: vector search failed, keyword fallback")
                }
            }
        }
        // The keyword fallback: provisional chunks leave before the top `k` are taken (the
        // channel's best MAX_TOP_K are read, then filtered).
        let outcome = self
            .retrieve(p, message, Some(&scope), MAX_TOP_K, SearchMode::Lexical)
            .await?;
        Ok(outcome
            .hits
            .into_iter()
            .filter(|h| !h.chunk.content.contains(PROVISIONAL_MARK))
            .take(k)
            .collect())
    }
}

/// One corpus's part of the block: a heading line, then a line per hit (its text on one
/// line, then its document id); the catalog as its entries' document ids.
fn render(slot: Prefetch, hits: &[SearchHit]) -> String {
    if slot.corpus == DATA_CATALOG {
        let ids: Vec<String> = hits
            .iter()
            .map(|h| h.chunk.document_id.to_string())
            .collect();
        return format!(
            "{} ({}): relevant_entry_ids=[{}]\n",
            slot.label,
            slot.corpus,
            ids.join(", ")
        );
    }
    let mut out = format!("{} ({}):\n", slot.label, slot.corpus);
    for h in hits {
        let text = h
            .chunk
            .content
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        out.push_str(&format!("- {text} (document_id={})\n", h.chunk.document_id));
    }
    out
}
