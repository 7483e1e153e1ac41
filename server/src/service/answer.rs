//! `answer`: hybrid retrieval, then either an LLM synthesis through the `chat` role or, with
//! no LLM configured, an extractive answer (the sentences that best match, quoted).
//!
//! Privacy (seed 004, search_documents behaviour 3): the question is anonymized before it
//! leaves the process and the reply is de-anonymized after. The same placeholder map is
//! applied to the source excerpts sent along, so a value the question hides is not sent in
//! clear through the context either. Sources shown to the caller are never altered.

use std::sync::OnceLock;

use cairn_llm::{Anonymizer, ChatMessage, ChatRequest, LlmClient};

use super::search::{SearchHit, SearchRequest};
use super::{Cairn, ServiceError, ServiceResult};
use crate::auth::Principal;
use crate::domain::lexical::Analyzer;
use crate::domain::models::ModelRole;
use crate::domain::search::{Relevance, SearchMode};
use crate::store::search::ChunkView;
use crate::store::vector::normalize;
use crate::store::NewUsage;

/// How many retrieved chunks an answer draws on.
pub const ANSWER_SOURCES: usize = 6;
/// Sentences quoted by an extractive answer.
const EXTRACTIVE_SENTENCES: usize = 3;
/// Sentences considered for an extractive answer (from the best chunks, in order).
const EXTRACTIVE_CANDIDATES: usize = 80;

const SYSTEM_PROMPT: &str = "You answer questions using only the numbered sources you are given. \
Cite every claim with the number of its source in square brackets, like [1] or [2][3]. \
If the sources do not contain the answer, say that they do not. \
Tokens such as [NAME_1], [EMAIL_1], [PHONE_1] or [IBAN_1] stand for withheld values: \
keep them exactly as written.";

/// A numbered source the answer cites.
#[derive(Clone, Debug)]
pub struct Citation {
    pub number: usize,
    pub chunk: ChunkView,
    /// The quoted sentence (extractive) or the whole chunk the model was given.
    pub excerpt: String,
}

/// What an LLM answer cost.
#[derive(Clone, Debug)]
pub struct LlmUsage {
    pub model: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: f64,
}

#[derive(Clone, Debug)]
pub struct AnswerOutcome {
    pub answer: String,
    /// True when no LLM wrote it: the answer quotes the best-matching sentences.
    pub extractive: bool,
    pub relevance: Relevance,
    pub citations: Vec<Citation>,
    pub usage: Option<LlmUsage>,
}

impl Cairn {
    pub async fn answer(
        &self,
        p: &Principal,
        question: &str,
        corpus_ids: Option<Vec<i64>>,
    ) -> ServiceResult<AnswerOutcome> {
        let found = self
            .search(
                p,
                SearchRequest {
                    query: question.to_owned(),
                    corpus_ids,
                    top_k: ANSWER_SOURCES,
                    mode: SearchMode::Hybrid,
                },
            )
            .await?;
        let chat = self.roles.resolve(p.team_id, ModelRole::Chat).await?;
        let extractive = chat.client().is_none();
        if found.hits.is_empty() {
            return Ok(AnswerOutcome {
                answer: "None of the documents you can read match this question.".into(),
                extractive,
                relevance: found.relevance,
                citations: Vec::new(),
                usage: None,
            });
        }
        match chat.client() {
            Some(llm) => {
                self.llm_answer(p, llm, question.trim(), found.hits, found.relevance)
                    .await
            }
            None => {
                self.extractive_answer(question.trim(), found.hits, found.relevance)
                    .await
            }
        }
    }

    /// The synthesis over hits already retrieved (the MCP `search_documents` tool): the same
    /// anonymized LLM exchange as [`Cairn::answer`] over the first [`ANSWER_SOURCES`] hits,
    /// without a second retrieval. `None` when no `chat` model is configured or nothing was
    /// found.
    pub async fn synthesize(
        &self,
        p: &Principal,
        question: &str,
        hits: &[SearchHit],
        relevance: Relevance,
    ) -> ServiceResult<Option<AnswerOutcome>> {
        if hits.is_empty() {
            return Ok(None);
        }
        let chat = self.roles.resolve(p.team_id, ModelRole::Chat).await?;
        let Some(llm) = chat.client() else {
            return Ok(None);
        };
        let sources: Vec<SearchHit> = hits.iter().take(ANSWER_SOURCES).cloned().collect();
        self.llm_answer(p, llm, question.trim(), sources, relevance)
            .await
            .map(Some)
    }

    async fn llm_answer(
        &self,
        p: &Principal,
        llm: &LlmClient,
        question: &str,
        hits: Vec<SearchHit>,
        relevance: Relevance,
    ) -> ServiceResult<AnswerOutcome> {
        // Never send the question without anonymizing it.
        let pii: &Anonymizer = match self.models.pii.as_ref() {
            Some(a) => a,
            None => default_anonymizer().ok_or_else(|| {
                ServiceError::Internal("the PII anonymizer is unavailable".into())
            })?,
        };
        let (anon_question, map) = pii.anonymize(question);
        let mut sources = String::new();
        for (i, h) in hits.iter().enumerate() {
            sources.push_str(&format!("[{}] {}\n", i + 1, source_label(&h.chunk)));
            sources.push_str(&map.apply(&h.chunk.content));
            sources.push_str("\n\n");
        }
        let reply = llm
            .chat(ChatRequest {
                messages: vec![
                    ChatMessage::system(SYSTEM_PROMPT),
                    ChatMessage::user(format!("Sources:\n\n{sources}Question: {anon_question}")),
                ],
                json_mode: false,
                max_tokens: Some(800),
                temperature: Some(0.1),
            })
            .await
            .map_err(|e| ServiceError::Upstream {
                code: e.code(),
                message: format!("the language model failed: {e}"),
            })?;
        self.store
            .insert_usage(NewUsage {
                team_id: p.team_id,
                kind: "llm",
                role: Some(ModelRole::Chat),
                model: &reply.model,
                input_tokens: NewUsage::tokens(reply.input_tokens),
                output_tokens: NewUsage::tokens(reply.output_tokens),
                cost_usd: reply.cost_usd,
                job_id: None,
            })
            .await?;
        let answer = map.restore(&reply.content);
        let cited = cited_numbers(&answer, hits.len());
        let numbers: Vec<usize> = if cited.is_empty() {
            (1..=hits.len()).collect()
        } else {
            cited
        };
        let citations = numbers
            .into_iter()
            .filter_map(|n| {
                hits.get(n - 1).map(|h| Citation {
                    number: n,
                    excerpt: h.chunk.content.clone(),
                    chunk: h.chunk.clone(),
                })
            })
            .collect();
        Ok(AnswerOutcome {
            answer,
            extractive: false,
            relevance,
            citations,
            usage: Some(LlmUsage {
                model: reply.model,
                input_tokens: reply.input_tokens,
                output_tokens: reply.output_tokens,
                cost_usd: reply.cost_usd,
            }),
        })
    }

    /// The sentences of the retrieved chunks closest to the question (by embedding, or by
    /// shared words without a model), each quoted with its numbered source.
    async fn extractive_answer(
        &self,
        question: &str,
        hits: Vec<SearchHit>,
        relevance: Relevance,
    ) -> ServiceResult<AnswerOutcome> {
        let mut candidates: Vec<(usize, String)> = Vec::new();
        for (i, h) in hits.iter().enumerate() {
            for s in sentences(&h.chunk.content) {
                if candidates.len() < EXTRACTIVE_CANDIDATES {
                    candidates.push((i, s));
                }
            }
        }
        let scores: Vec<f32> = match &self.models.embedder {
            Some(embedder) => {
                let mut q = self.embed_query(question).await?;
                normalize(&mut q);
                let texts = candidates.iter().map(|c| c.1.clone()).collect();
                let vecs = embedder
                    .embed(texts, None)
                    .await
                    .map_err(|e| ServiceError::Internal(format!("embedding sentences: {e}")))?;
                vecs.into_iter()
                    .map(|mut v| {
                        normalize(&mut v);
                        v.iter().zip(&q).map(|(a, b)| a * b).sum()
                    })
                    .collect()
            }
            None => {
                let analyzer = Analyzer::new();
                let terms = analyzer.query_terms(question);
                candidates
                    .iter()
                    .map(|(_, s)| {
                        let words = analyzer.query_terms(s);
                        terms.iter().filter(|t| words.contains(t)).count() as f32
                    })
                    .collect()
            }
        };
        let mut order: Vec<usize> = (0..candidates.len()).collect();
        order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
        order.truncate(EXTRACTIVE_SENTENCES);
        let mut citations: Vec<Citation> = Vec::new();
        let mut body = String::from(
            "Extractive answer (no language model is configured): the passages that best match the question.\n",
        );
        for idx in order {
            let (hit, sentence) = &candidates[idx];
            let number = citations.len() + 1;
            body.push_str(&format!("\n> {sentence} [{number}]\n"));
            citations.push(Citation {
                number,
                chunk: hits[*hit].chunk.clone(),
                excerpt: sentence.clone(),
            });
        }
        Ok(AnswerOutcome {
            answer: body,
            extractive: true,
            relevance,
            citations,
            usage: None,
        })
    }
}

/// The anonymizer with no name list (emails, phone numbers, IBANs), for cores built without
/// one.
fn default_anonymizer() -> Option<&'static Anonymizer> {
    static DEFAULT: OnceLock<Option<Anonymizer>> = OnceLock::new();
    DEFAULT
        .get_or_init(|| Anonymizer::new(Vec::new()).ok())
        .as_ref()
}

/// "Title — Section (page N)".
fn source_label(c: &ChunkView) -> String {
    let mut s = c.title.clone();
    if let Some(sec) = &c.section {
        s.push_str(" — ");
        s.push_str(sec);
    }
    if let Some(p) = c.page {
        s.push_str(&format!(" (page {p})"));
    }
    s
}

/// `[n]` markers in order of first appearance, within 1..=max.
fn cited_numbers(text: &str, max: usize) -> Vec<usize> {
    static RE: OnceLock<Option<regex::Regex>> = OnceLock::new();
    let Some(re) = RE
        .get_or_init(|| regex::Regex::new(r"\[(\d{1,3})\]").ok())
        .as_ref()
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for c in re.captures_iter(text) {
        if let Some(n) = c.get(1).and_then(|m| m.as_str().parse::<usize>().ok()) {
            if (1..=max).contains(&n) && !out.contains(&n) {
                out.push(n);
            }
        }
    }
    out
}

/// The prose sentences of a chunk: heading lines dropped, whitespace folded, very short
/// fragments skipped.
fn sentences(text: &str) -> Vec<String> {
    use unicode_segmentation::UnicodeSegmentation;
    let prose: String = text
        .lines()
        .filter(|l| {
            let t = l.trim_start();
            !t.starts_with('#') && !t.starts_with("[Page ") && !t.starts_with('|')
        })
        .collect::<Vec<_>>()
        .join("\n");
    prose
        .unicode_sentences()
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|s| s.chars().count() >= 20)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn citations_in_order_of_appearance() {
        assert_eq!(
            cited_numbers("A [2] and B [1][2], C [9] [NAME_1]", 3),
            vec![2, 1]
        );
        assert!(cited_numbers("no markers", 3).is_empty());
    }

    #[test]
    fn sentences_skip_headings_and_fragments() {
        let s = sentences("# Title\n\nGlaciers move slowly downhill. Ok.\nThey carve valleys over time!\n[Page 2]\n| a | b |");
        assert_eq!(
            s,
            vec![
                "Glaciers move slowly downhill.",
                "They carve valleys over time!"
            ]
        );
    }
}
