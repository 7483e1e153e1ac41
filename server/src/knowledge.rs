//! The `kg_extract` job (seed 001's index-knowledge workflow): up to [`MAX_DOCS_PER_RUN`]
//! unextracted documents of the requester's team that the requester can read, each extracted
//! by the configured [`cairn_kg::Extractor`] (validated, one retry, 12k cap) and stored with
//! [`Store::store_extraction`]. Progress is `extracting k/n` on the job events; cancellation
//! is noticed at the next progress report (after each document). A document that cannot be
//! read or extracted is recorded in the result as failed and never stops the run; a
//! succeeded run ends in stage `extracted` ([`JobKind::succeeded_stage`]).
//!
//! Per-team limits ([`KgLimits`]):
//! - **Concurrency.** A team has at most `team_concurrency` documents in extraction at once,
//!   across all its runs in this process (a semaphore per team, shared by the runs).
//! - **Quota.** At most `daily_docs` documents per team in a rolling 24 hours, counted from
//!   durable data: the team's `kg_extractions` markers written in the window
//!   ([`Store::kg_extractions_since`]), plus the documents this process has in flight for the
//!   team. Before each document a run takes a reservation under the team's ledger lock; the
//!   marker is written and the reservation released under the same lock, so concurrent runs
//!   in one process never overshoot. (Instances sharing a PostgreSQL database may overshoot
//!   by their in-flight documents.) A run that finds the quota spent stops taking documents
//!   and reports them as `left` (not failed); `extractKnowledge` refuses with QUOTA_EXCEEDED
//!   when nothing is left of it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use cairn_kg::{Extractor, ExtractorError, Reply};
use entity::prelude::Job;
use futures_util::stream::{self, StreamExt};

use crate::auth::Principal;
use crate::domain::models::ModelRole;
use crate::jobs::{
    JobContext, JobError, JobKind, JobResult, KgFailure, KgPayload, KgResult, Runner,
};
use crate::roles::{ModelRoles, Resolved, RolesError};
use crate::store::{NewUsage, Store};

/// Documents per run (seed 001: "≤ 40 objects/run").
pub const MAX_DOCS_PER_RUN: u64 = 40;
/// The window of the per-team document quota.
pub const QUOTA_WINDOW_HOURS: i64 = 24;

/// Per-team limits on knowledge extraction (`CAIRN_KG_TEAM_CONCURRENCY`,
/// `CAIRN_KG_DAILY_DOCS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KgLimits {
    /// Documents of one team in extraction at once, across its runs (at least 1).
    pub team_concurrency: usize,
    /// Documents of one team extracted per rolling 24 hours; 0 = unlimited.
    pub daily_docs: u64,
}

impl Default for KgLimits {
    fn default() -> Self {
        KgLimits {
            team_concurrency: 2,
            daily_docs: 2000,
        }
    }
}

impl KgLimits {
    /// The start of the quota window that ends now.
    pub fn window_start() -> chrono::DateTime<chrono::Utc> {
        chrono::Utc::now() - chrono::Duration::hours(QUOTA_WINDOW_HOURS)
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
    store: Store,
    embedder: Option<cairn_embed::Embedder>,
    /// The instance's extractor (`CAIRN_KG_EXTRACTOR`), for teams without their own
    /// `utility` endpoint.
    extractor: Arc<dyn Extractor>,
    roles: ModelRoles,
    limits: KgLimits,
    /// One gate per team, shared by all of the team's runs in this process.
    gates: std::sync::Mutex<HashMap<i64, Arc<TeamGate>>>,
}

/// A team's extraction limits in this process: the concurrency permits, and the ledger of
/// documents in flight against the quota.
struct TeamGate {
    permits: Arc<tokio::sync::Semaphore>,
    /// Held while the quota is read and a reservation taken, and while a marker is written
    /// and its reservation released, so the two never interleave.
    ledger: tokio::sync::Mutex<()>,
    /// Documents reserved against the quota whose marker is not written yet.
    pending: AtomicU64,
}

/// A document's place in the quota; released (the pending count decremented) on drop, which
/// also covers a run dropped mid-document (cancellation, lost lease).
struct Reservation(Option<Arc<TeamGate>>);

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Some(g) = self.0.take() {
            g.pending.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// One document's outcome within a run.
enum DocOutcome {
    Stored {
        entities: usize,
        relations: usize,
    },
    Failed {
        document_id: i64,
        reason: String,
    },
    /// Not taken: the team's quota was spent.
    Left,
}

impl KgRunner {
    pub fn new(
        store: Store,
        embedder: Option<cairn_embed::Embedder>,
        extractor: Arc<dyn Extractor>,
        roles: ModelRoles,
        limits: KgLimits,
    ) -> KgRunner {
        KgRunner {
            store,
            embedder,
            extractor,
            roles,
            limits: KgLimits {
                team_concurrency: limits.team_concurrency.max(1),
                ..limits
            },
            gates: std::sync::Mutex::new(HashMap::new()),
        }
    }

    fn gate(&self, team_id: i64) -> Arc<TeamGate> {
        let mut gates = self.gates.lock().unwrap_or_else(|e| e.into_inner());
        gates
            .entry(team_id)
            .or_insert_with(|| {
                Arc::new(TeamGate {
                    permits: Arc::new(tokio::sync::Semaphore::new(self.limits.team_concurrency)),
                    ledger: tokio::sync::Mutex::new(()),
                    pending: AtomicU64::new(0),
                })
            })
            .clone()
    }

    /// Takes a place in the team's quota: `None` when it is spent (markers in the window plus
    /// documents in flight).
    async fn reserve(
        &self,
        team_id: i64,
        gate: &Arc<TeamGate>,
    ) -> Result<Option<Reservation>, String> {
        if self.limits.daily_docs == 0 {
            return Ok(Some(Reservation(None)));
        }
        let _ledger = gate.ledger.lock().await;
        let used = self
            .store
            .kg_extractions_since(team_id, KgLimits::window_start())
            .await
            .map_err(|e| e.to_string())?;
        if used + gate.pending.load(Ordering::SeqCst) >= self.limits.daily_docs {
            return Ok(None);
        }
        gate.pending.fetch_add(1, Ordering::SeqCst);
        Ok(Some(Reservation(Some(gate.clone()))))
    }

    /// Writes an extraction and releases the document's reservation under the team's ledger
    /// lock (when a quota applies).
    #[allow(clippy::too_many_arguments)]
    async fn store_counted(
        &self,
        gate: &TeamGate,
        reservation: Reservation,
        team_id: i64,
        document_id: i64,
        version: i32,
        extractor: &str,
        x: &cairn_kg::Extraction,
        anchors: &[Option<Vec<f32>>],
    ) -> Result<crate::store::kg::StoredExtraction, String> {
        let _ledger = match self.limits.daily_docs {
            0 => None,
            _ => Some(gate.ledger.lock().await),
        };
        let stored = self
            .store
            .store_extraction(team_id, document_id, version, extractor, x, anchors)
            .await
            .map_err(|e| e.to_string());
        drop(reservation);
        stored
    }

    /// The team's extractor: its own `utility` endpoint when it set one (the `llm` backend
    /// on that endpoint), else the instance's.
    async fn extractor_for(&self, team_id: i64) -> Result<Arc<dyn Extractor>, JobError> {
        match self.roles.resolve(team_id, ModelRole::Utility).await {
            Ok(Resolved::Team(client)) => Ok(Arc::new(LlmExtractor { client })),
            Ok(Resolved::Instance(_) | Resolved::None) => Ok(self.extractor.clone()),
            Err(RolesError::Store(e)) => Err(e.into()),
            Err(e) => Err(JobError::Permanent(e.to_string())),
        }
    }

    async fn requester(&self, job: &Job, p: &KgPayload) -> Result<Principal, JobError> {
        self.store
            .member(job.team_id, p.requested_by)
            .await?
            .ok_or_else(|| {
                JobError::Permanent("the requesting user is no longer in the team".into())
            })
    }

    /// One document under the team's limits: a concurrency permit, then a place in the
    /// quota (once the quota is found spent, the run's later documents are left at once).
    #[allow(clippy::too_many_arguments)]
    async fn one(
        &self,
        job: &Job,
        extractor: &dyn Extractor,
        p: &Principal,
        gate: &Arc<TeamGate>,
        quota_spent: &AtomicBool,
        document_id: i64,
        version: i32,
    ) -> DocOutcome {
        if quota_spent.load(Ordering::SeqCst) {
            return DocOutcome::Left;
        }
        let permit = gate.permits.clone().acquire_owned().await;
        let failed = |reason: String| DocOutcome::Failed {
            document_id,
            reason,
        };
        let Ok(_permit) = permit else {
            return failed("the team's extraction gate is closed".into());
        };
        if quota_spent.load(Ordering::SeqCst) {
            return DocOutcome::Left;
        }
        let reservation = match self.reserve(job.team_id, gate).await {
            Ok(Some(r)) => r,
            Ok(None) => {
                quota_spent.store(true, Ordering::SeqCst);
                return DocOutcome::Left;
            }
            Err(reason) => return failed(reason),
        };
        match self
            .try_one(job, extractor, p, gate, reservation, document_id, version)
            .await
        {
            Ok(o) => o,
            Err(reason) => failed(reason),
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn try_one(
        &self,
        job: &Job,
        extractor: &dyn Extractor,
        p: &Principal,
        gate: &TeamGate,
        reservation: Reservation,
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
        let text = cairn_extract::chunk::text_of_chunks(
            chunks.into_iter().map(|c| (c.section, c.content)).collect(),
        );
        let (extraction, usage, extractor_name) = match cairn_kg::extract(extractor, &text).await {
            Ok(o) => (o.extraction, o.usage, extractor.name().to_owned()),
            Err(cairn_kg::ExtractError::Refused {
                first,
                second,
                usage,
            }) => {
                self.record_usage(job, extractor, usage).await;
                // Recorded as extracted without facts, so the run moves on next time.
                self.store_counted(
                    gate,
                    reservation,
                    job.team_id,
                    document_id,
                    version,
                    &format!("refused:{}", extractor.name()),
                    &cairn_kg::Extraction::default(),
                    &[],
                )
                .await?;
                return Err(format!(
                    "reply refused twice ({}, then {})",
                    first.code(),
                    second.code()
                ));
            }
            Err(cairn_kg::ExtractError::Backend(e)) => return Err(e.to_string()),
        };
        self.record_usage(job, extractor, usage).await;
        let anchors = self.anchors(&extraction).await;
        let stored = self
            .store_counted(
                gate,
                reservation,
                job.team_id,
                document_id,
                version,
                &extractor_name,
                &extraction,
                &anchors,
            )
            .await?;
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

    async fn record_usage(&self, job: &Job, extractor: &dyn Extractor, u: cairn_kg::Usage) {
        if u.input_tokens == 0 && u.output_tokens == 0 {
            return;
        }
        if let Err(e) = self
            .store
            .insert_usage(NewUsage {
                team_id: job.team_id,
                kind: "llm",
                role: Some(ModelRole::Utility),
                model: extractor.model(),
                input_tokens: NewUsage::tokens(u.input_tokens),
                output_tokens: NewUsage::tokens(u.output_tokens),
                cost_usd: u.cost_usd,
                job_id: Some(job.id),
            })
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
    async fn run(&self, job: &Job, kind: JobKind, ctx: &JobContext) -> Result<JobResult, JobError> {
        let JobKind::KgExtract(payload) = kind else {
            return Err(JobError::Permanent(format!(
                "not a knowledge extraction: {}",
                kind.name()
            )));
        };
        let p = self.requester(job, &payload).await?;
        let extractor = self.extractor_for(job.team_id).await?;
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
        let gate = self.gate(job.team_id);
        let quota_spent = AtomicBool::new(false);
        let mut outcomes = stream::iter(docs)
            .map(|(id, version)| {
                self.one(
                    job,
                    extractor.as_ref(),
                    &p,
                    &gate,
                    &quota_spent,
                    id,
                    version,
                )
            })
            .buffer_unordered(self.limits.team_concurrency);
        let (mut done, mut left, mut entities, mut relations) = (0i64, 0i64, 0usize, 0usize);
        let mut failed: Vec<KgFailure> = Vec::new();
        while let Some(o) = outcomes.next().await {
            done += 1;
            match o {
                DocOutcome::Left => left += 1,
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
                } => failed.push(KgFailure {
                    document_id,
                    reason,
                }),
            }
            // Also the cancellation check between documents.
            ctx.progress("extracting", Some(done), Some(total)).await?;
        }
        let extracted = done - left - failed.len() as i64;
        let mut message = format!(
            "Extracted knowledge from {extracted} of {total} documents: {entities} entities, {relations} relations."
        );
        if left > 0 {
            message.push_str(&format!(
                " The team's quota of {} documents per {QUOTA_WINDOW_HOURS} hours is spent: {left} documents left for a later run.",
                self.limits.daily_docs
            ));
        }
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        Ok(JobResult::KgExtract(KgResult {
            documents: count(total),
            extracted: count(extracted),
            failed,
            left: count(left),
            quota_reached: left > 0,
            entities: entities as u64,
            relations: relations as u64,
            extractor: extractor.name().to_owned(),
            message,
        }))
    }
}
