//! The `kg_extract` job (seed 001's index-knowledge workflow): up to [`MAX_DOCS_PER_RUN`]
//! unextracted documents of the requester's team that the requester can read, each extracted
//! by the configured [`cairn_kg::Extractor`] (validated, one retry, 12k cap) and stored with
//! [`Store::store_extraction`], [`CONCURRENCY`] at a time. Progress is `extracting k/n` on the
//! job events; cancellation is noticed at the next progress report (after each document). A
//! document that cannot be read or extracted is recorded in the result as failed and never
//! stops the run.

use std::sync::Arc;

use async_trait::async_trait;
use cairn_kg::{Extractor, ExtractorError, Reply};
use entity::prelude::Job;
use futures_util::stream::{self, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value as Json};

use crate::auth::Principal;
use crate::jobs::{JobContext, JobError, Runner};
use crate::store::jobs::NewJob;
use crate::store::Store;

pub const KIND: &str = "kg_extract";
/// Documents per run (seed 001: "≤ 40 objects/run").
pub const MAX_DOCS_PER_RUN: u64 = 40;
/// The stage a succeeded run ends in (ingest ends `searchable`).
pub const SUCCEEDED_STAGE: &str = "extracted";
/// Documents extracted at once within a run.
pub const CONCURRENCY: usize = 2;

/// What `extractKnowledge` hands to the job.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct KgPayload {
    pub requested_by: i64,
    pub corpus_id: Option<i64>,
    pub document_ids: Option<Vec<i64>>,
}

impl KgPayload {
    pub fn new_job(&self, team_id: i64) -> Result<NewJob, serde_json::Error> {
        Ok(NewJob {
            team_id,
            corpus_id: self.corpus_id,
            kind: KIND.to_owned(),
            payload: serde_json::to_value(self)?,
            created_by: Some(self.requested_by),
            max_attempts: 3,
        })
    }
}

/// The `llm` backend: an OpenAI-compatible endpoint (the `utility` role) in JSON mode.
pub struct LlmExtractor {
    pub client: cairn_llm::LlmClient,
}

#[async_trait]
impl Extractor for LlmExtractor {
    fn name(&self) -> &str {
        "llm"
    }

    fn model(&self) -> &str {
        self.client.model()
    }

    async fn reply(&self, text: &str, attempt: u32) -> Result<Reply, ExtractorError> {
        let mut req = cairn_llm::ChatRequest::new(vec![
            cairn_llm::ChatMessage::system(cairn_kg::prompt::system_prompt()),
            cairn_llm::ChatMessage::user(cairn_kg::prompt::prompt_for_attempt(text, attempt)),
        ]);
        req.json_mode = true;
        req.temperature = Some(0.0);
        let r = self.client.chat(req).await.map_err(|e| match e {
            cairn_llm::LlmError::Timeout | cairn_llm::LlmError::Unreachable(_) => {
                ExtractorError::Transient(e.to_string())
            }
            cairn_llm::LlmError::Status { status, .. } if status == 429 || status >= 500 => {
                ExtractorError::Transient(e.to_string())
            }
            other => ExtractorError::Permanent(other.to_string()),
        })?;
        Ok(Reply {
            raw: r.content,
            input_tokens: r.input_tokens,
            output_tokens: r.output_tokens,
            cost_usd: r.cost_usd,
        })
    }
}

/// Runs `kg_extract` jobs.
pub struct KgRunner {
    pub store: Store,
    pub embedder: Option<cairn_embed::Embedder>,
    pub extractor: Arc<dyn Extractor>,
}

/// One document's outcome within a run.
enum DocOutcome {
    Stored { entities: usize, relations: usize },
    Failed { document_id: i64, reason: String },
}

impl KgRunner {
    async fn requester(&self, job: &Job, p: &KgPayload) -> Result<Principal, JobError> {
        let user = self
            .store
            .user(p.requested_by)
            .await?
            .filter(|u| u.team_id == job.team_id)
            .ok_or_else(|| JobError::Permanent("the requesting user no longer exists".into()))?;
        Ok(Principal {
            user_id: user.id,
            team_id: job.team_id,
            role: crate::store::role_of(&user).map_err(|e| JobError::Permanent(e.to_string()))?,
            name: user.name,
            token_id: 0,
        })
    }

    async fn one(&self, job: &Job, p: &Principal, document_id: i64, version: i32) -> DocOutcome {
        match self.try_one(job, p, document_id, version).await {
            Ok(o) => o,
            Err(reason) => DocOutcome::Failed {
                document_id,
                reason,
            },
        }
    }

    async fn try_one(
        &self,
        job: &Job,
        p: &Principal,
        document_id: i64,
        version: i32,
    ) -> Result<DocOutcome, String> {
        let chunks = self
            .store
            .current_chunks(p, &[document_id])
            .await
            .map_err(|e| e.to_string())?;
        if chunks.is_empty() || chunks.iter().any(|c| c.version != version) {
            return Err("not readable, or changed since the run began".into());
        }
        let text = crate::service::document_text_of(chunks);
        let (extraction, usage, extractor_name) =
            match cairn_kg::extract(self.extractor.as_ref(), &text).await {
                Ok(o) => (o.extraction, o.usage, self.extractor.name().to_owned()),
                Err(cairn_kg::ExtractError::Refused {
                    first,
                    second,
                    usage,
                }) => {
                    self.record_usage(job, usage).await;
                    // Recorded as extracted without facts, so the run moves on next time.
                    self.store
                        .store_extraction(
                            job.team_id,
                            document_id,
                            version,
                            &format!("refused:{}", self.extractor.name()),
                            &cairn_kg::Extraction::default(),
                            &[],
                        )
                        .await
                        .map_err(|e| e.to_string())?;
                    return Err(format!(
                        "reply refused twice ({}, then {})",
                        first.code(),
                        second.code()
                    ));
                }
                Err(cairn_kg::ExtractError::Backend(e)) => return Err(e.to_string()),
            };
        self.record_usage(job, usage).await;
        let anchors = self.anchors(&extraction).await;
        let stored = self
            .store
            .store_extraction(
                job.team_id,
                document_id,
                version,
                &extractor_name,
                &extraction,
                &anchors,
            )
            .await
            .map_err(|e| e.to_string())?;
        if !stored.stored {
            return Err("a newer version arrived meanwhile".into());
        }
        Ok(DocOutcome::Stored {
            entities: stored.entities,
            relations: stored.relations,
        })
    }

    /// "name: description" of each entity, embedded (none without an embedder or on error).
    async fn anchors(&self, x: &cairn_kg::Extraction) -> Vec<Option<Vec<f32>>> {
        let Some(embedder) = &self.embedder else {
            return vec![None; x.entities.len()];
        };
        let texts: Vec<String> = x.entities.iter().map(anchor_text).collect();
        match embedder.embed(texts, None).await {
            Ok(v) => v.into_iter().map(Some).collect(),
            Err(e) => {
                tracing::warn!(error = %e, "entity anchors not embedded");
                vec![None; x.entities.len()]
            }
        }
    }

    async fn record_usage(&self, job: &Job, u: cairn_kg::Usage) {
        if u.input_tokens == 0 && u.output_tokens == 0 {
            return;
        }
        if let Err(e) = self
            .store
            .insert_usage(
                job.team_id,
                "llm",
                self.extractor.model(),
                u.input_tokens as i64,
                u.output_tokens as i64,
                u.cost_usd,
                Some(job.id),
            )
            .await
        {
            tracing::warn!(error = %e, "usage row not written");
        }
    }
}

/// The text an entity's anchor embeds.
pub fn anchor_text(e: &cairn_kg::Entity) -> String {
    if e.description.is_empty() {
        e.name.clone()
    } else {
        format!("{}: {}", e.name, e.description)
    }
}

#[async_trait]
impl Runner for KgRunner {
    fn succeeded_stage(&self) -> &'static str {
        SUCCEEDED_STAGE
    }

    async fn run(&self, job: &Job, ctx: &JobContext) -> Result<Json, JobError> {
        let payload: KgPayload = serde_json::from_value(job.payload.clone())
            .map_err(|e| JobError::Permanent(format!("invalid kg_extract payload: {e}")))?;
        let p = self.requester(job, &payload).await?;
        let docs = self
            .store
            .unextracted_documents(
                &p,
                payload.corpus_id,
                payload.document_ids.as_deref(),
                MAX_DOCS_PER_RUN,
            )
            .await?;
        let total = docs.len() as i64;
        ctx.progress("extracting", Some(0), Some(total)).await?;
        let mut outcomes = stream::iter(docs)
            .map(|(id, version)| self.one(job, &p, id, version))
            .buffer_unordered(CONCURRENCY);
        let (mut done, mut entities, mut relations) = (0i64, 0usize, 0usize);
        let mut failed: Vec<Json> = Vec::new();
        while let Some(o) = outcomes.next().await {
            done += 1;
            match o {
                DocOutcome::Stored {
                    entities: e,
                    relations: r,
                } => {
                    entities += e;
                    relations += r;
                }
                DocOutcome::Failed {
                    document_id,
                    reason,
                } => failed.push(json!({ "documentId": document_id, "reason": reason })),
            }
            // Also the cancellation check between documents.
            ctx.progress("extracting", Some(done), Some(total)).await?;
        }
        let extracted = done - failed.len() as i64;
        Ok(json!({
            "documents": total,
            "extracted": extracted,
            "failed": failed,
            "entities": entities,
            "relations": relations,
            "extractor": self.extractor.name(),
            "message": format!(
                "Extracted knowledge from {extracted} of {total} documents: {entities} entities, {relations} relations."
            ),
        }))
    }
}
