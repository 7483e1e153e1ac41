//! Document processing (seed 004's `classify_document`, `extract_document`,
//! `process_document`): the work behind the service's fields and the `process_document` job.
//! The rules live in `cairn_docproc` (no database); this module reads a document's text
//! through the store (as the requester, so only what they may read), calls the team's
//! `utility` model (`crate::roles`) or the embedder, and writes the rows.
//!
//! * **Classify.** With a `utility` model (the team's, else the instance's): the taxonomy and
//!   the document's first 12,000 characters in, the strict reply validated, one retry naming
//!   the refusal. Without one: the zero-shot classifier (the mean of the first chunks'
//!   vectors against each type's "name: description" vector, softmax at a fitted
//!   temperature). The result is stored for the document's current version.
//! * **Extract.** With a schema (given, or the type's): the model's values, each with
//!   verbatim evidence, validated against the same capped text, one retry. Without a schema:
//!   the document's tables as typed rows, no model. Every result carries its measured schema.
//! * **Process** (a job: `classifying` → `suggesting` → `schema` → `extracting` →
//!   `processed`): classify; below the team's confidence threshold, ask the model for a new
//!   type and, when the team allows it, add it to the taxonomy; find the type's schema or
//!   have the model write one; extract; store a processing result.
//! * **Private text never widens.** A suggested type and a generated schema are written to
//!   the team's taxonomy (which every member reads) only when the document is visible to the
//!   team; for a private document they stay inside its result, which only its readers see.
//! * Every model call writes a `usage` row (role `utility`, the job when there is one).

use std::sync::Arc;

use async_trait::async_trait;
use cairn_docproc::{classify, fields, prompt, tables, taxonomy, Refusal};
use cairn_llm::{ChatMessage, ChatRequest, LlmClient};
use entity::prelude::{Classification, Document, DocumentType, Job};
use serde_json::{json, Value as Json};

use crate::auth::Principal;
use crate::domain::models::ModelRole;
use crate::domain::Visibility;
use crate::jobs::{
    JobContext, JobError, JobKind, JobResult, ProcessPayload, ProcessResult, Runner,
};
use crate::roles::{ModelRoles, RolesError};
use crate::store::{
    NewClassification, NewDocumentType, NewProcessingResult, NewUsage, Store, StoreError,
};

/// The default confidence under which processDocument looks for a better type.
pub const DEFAULT_MIN_CONFIDENCE: f64 = 0.5;

#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Roles(#[from] RolesError),
    /// The document is gone, unreadable, or has no text.
    #[error("{0}")]
    NoText(String),
    /// A part the request needs is missing (no model, no embedder).
    #[error("{0}")]
    Unavailable(String),
    /// The model failed; `code` is its stable client code.
    #[error("the language model failed: {message}")]
    Llm { code: &'static str, message: String },
    /// Both replies were refused.
    #[error("the model's reply was refused twice ({}, then {}): {second}", first.code(), second.code())]
    Refused { first: Refusal, second: Refusal },
    /// A schema given by the caller is not usable.
    #[error("{0}")]
    BadSchema(String),
}

pub type ProcessResultOf<T> = Result<T, ProcessError>;

/// Tokens and cost of the model calls of one operation.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Spent {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: f64,
    pub calls: u32,
}

/// What `classify` found.
#[derive(Clone, Debug)]
pub struct Classified {
    pub row: Classification,
    pub spent: Spent,
}

/// What `extract` found: the result JSON, its measured schema, counts.
#[derive(Clone, Debug)]
pub struct Extracted {
    /// `schema` or `tables`.
    pub mode: &'static str,
    pub data: Json,
    pub measured_schema: Json,
    /// The schema used (schema mode).
    pub schema: Option<Json>,
    pub filled: usize,
    pub tables: usize,
    pub spent: Spent,
}

/// The processing core: shared by the service's fields and the job runner.
#[derive(Clone)]
pub struct Processor {
    store: Store,
    embedder: Option<cairn_embed::Embedder>,
    roles: ModelRoles,
    min_confidence: f64,
}

/// Who is asking and for which job (usage rows).
#[derive(Clone, Copy)]
struct Call<'a> {
    p: &'a Principal,
    job_id: Option<i64>,
}

impl Processor {
    pub fn new(
        store: Store,
        embedder: Option<cairn_embed::Embedder>,
        roles: ModelRoles,
        min_confidence: f64,
    ) -> Processor {
        Processor {
            store,
            embedder,
            roles,
            min_confidence: min_confidence.clamp(0.0, 1.0),
        }
    }

    /// The team's types (the starter set written on first use).
    pub async fn taxonomy(&self, team_id: i64) -> ProcessResultOf<Vec<DocumentType>> {
        let starters: Vec<NewDocumentType> = taxonomy::starter_types()
            .into_iter()
            .map(|t| NewDocumentType {
                team_id,
                name: t.name,
                description: t.description,
                schema: t.schema.map(|s| s.to_json()),
                origin: "starter",
                created_by: None,
            })
            .collect();
        self.store.seed_taxonomy(team_id, &starters).await?;
        Ok(self.store.document_types(team_id).await?)
    }

    /// The document's current text as `p` may read it, and its version.
    async fn text(&self, p: &Principal, doc: &Document) -> ProcessResultOf<(String, i32)> {
        let chunks = self.store.current_chunks(p, &[doc.id]).await?;
        if chunks.is_empty() {
            return Err(ProcessError::NoText(format!(
                "document {} has no text to process (nothing was extracted from it)",
                doc.id
            )));
        }
        let version = chunks.first().map_or(doc.current_version, |c| c.version);
        let text = cairn_extract::chunk::text_of_chunks(
            chunks.into_iter().map(|c| (c.section, c.content)).collect(),
        );
        Ok((text, version))
    }

    async fn utility(&self, team_id: i64) -> ProcessResultOf<Option<LlmClient>> {
        Ok(self
            .roles
            .resolve(team_id, ModelRole::Utility)
            .await?
            .client()
            .cloned())
    }

    /// Asks, validates, asks once more naming the refusal; usage rows for each call.
    async fn ask<T>(
        &self,
        call: Call<'_>,
        client: &LlmClient,
        (system, user): (String, String),
        spent: &mut Spent,
        check: impl Fn(&str) -> Result<T, Refusal>,
    ) -> ProcessResultOf<T> {
        let mut messages = vec![ChatMessage::system(system), ChatMessage::user(user)];
        let mut first: Option<Refusal> = None;
        loop {
            let mut req = ChatRequest::new(messages.clone());
            req.json_mode = true;
            req.temperature = Some(0.0);
            let reply = client.chat(req).await.map_err(|e| ProcessError::Llm {
                code: e.code(),
                message: e.to_string(),
            })?;
            spent.input_tokens += reply.input_tokens;
            spent.output_tokens += reply.output_tokens;
            spent.cost_usd += reply.cost_usd;
            spent.calls += 1;
            self.record_usage(call, &reply).await;
            match check(&reply.content) {
                Ok(v) => return Ok(v),
                Err(r) => match first.take() {
                    Some(f) => {
                        return Err(ProcessError::Refused {
                            first: f,
                            second: r,
                        })
                    }
                    None => {
                        tracing::info!(code = r.code(), "model reply refused; asking once more");
                        messages.push(ChatMessage::assistant(reply.content));
                        messages.push(ChatMessage::user(prompt::retry_note(&r)));
                        first = Some(r);
                    }
                },
            }
        }
    }

    async fn record_usage(&self, call: Call<'_>, reply: &cairn_llm::ChatReply) {
        if let Err(e) = self
            .store
            .insert_usage(NewUsage {
                team_id: call.p.team_id,
                kind: "llm",
                role: Some(ModelRole::Utility),
                model: &reply.model,
                input_tokens: NewUsage::tokens(reply.input_tokens),
                output_tokens: NewUsage::tokens(reply.output_tokens),
                cost_usd: reply.cost_usd,
                job_id: call.job_id,
            })
            .await
        {
            tracing::warn!(error = %e, "usage row not written");
        }
    }

    fn doc_types(rows: &[DocumentType]) -> Vec<taxonomy::DocType> {
        rows.iter()
            .map(|r| taxonomy::DocType {
                name: r.name.clone(),
                description: r.description.clone(),
                schema: r
                    .schema
                    .as_ref()
                    .and_then(|s| taxonomy::FieldSchema::parse(s).ok()),
            })
            .collect()
    }

    /// Classifies the document's current version and stores the result.
    pub async fn classify(&self, p: &Principal, doc: &Document) -> ProcessResultOf<Classified> {
        let rows = self.taxonomy(p.team_id).await?;
        let (text, version) = self.text(p, doc).await?;
        let client = self.utility(p.team_id).await?;
        self.classify_in(
            Call { p, job_id: None },
            doc,
            &rows,
            (&text, version),
            client.as_ref(),
        )
        .await
    }

    /// Classifies `text` (the document's current `version`) against the taxonomy `rows` with
    /// `client`, or zero-shot without one, and stores the result.
    async fn classify_in(
        &self,
        call: Call<'_>,
        doc: &Document,
        rows: &[DocumentType],
        (text, version): (&str, i32),
        client: Option<&LlmClient>,
    ) -> ProcessResultOf<Classified> {
        if rows.is_empty() {
            return Err(ProcessError::Unavailable(
                "the team's taxonomy has no document types: an admin must add one".into(),
            ));
        }
        let types = Self::doc_types(rows);
        let mut spent = Spent::default();
        let (c, method, model) = match client {
            Some(client) => {
                let c = self
                    .ask(
                        call,
                        client,
                        prompt::classify(&types, cairn_docproc::cap_text(text)),
                        &mut spent,
                        |raw| classify::validate(raw, &types),
                    )
                    .await?;
                (c, "llm", client.model().to_owned())
            }
            None => (
                self.zero_shot(text, &types).await?,
                "zero_shot",
                self.embedder_model(),
            ),
        };
        let row = self
            .store
            .put_classification(NewClassification {
                document_id: doc.id,
                version,
                team_id: call.p.team_id,
                type_name: c.doc_type,
                confidence: c.confidence,
                reason: c.reason,
                method,
                model,
                created_by: Some(call.p.user_id),
            })
            .await?;
        Ok(Classified { row, spent })
    }

    fn embedder_model(&self) -> String {
        self.embedder
            .as_ref()
            .map_or_else(|| "none".to_owned(), |e| e.model_name().to_owned())
    }

    /// The zero-shot classification of `text` (its first chunks, as the chunker cuts them).
    async fn zero_shot(
        &self,
        text: &str,
        types: &[taxonomy::DocType],
    ) -> ProcessResultOf<classify::Classification> {
        let embedder = self.embedder.as_ref().ok_or_else(|| {
            ProcessError::Unavailable(
                "classification needs a utility model or the embedding model; neither is configured".into(),
            )
        })?;
        let pieces =
            cairn_extract::chunk::chunk(text, &cairn_extract::chunk::ChunkConfig::default());
        let mut texts: Vec<String> = pieces
            .into_iter()
            .take(classify::ZERO_SHOT_CHUNKS)
            .map(|c| c.content)
            .collect();
        let n_doc = texts.len();
        texts.extend(types.iter().map(taxonomy::DocType::anchor_text));
        let vectors = embedder
            .embed(texts, None)
            .await
            .map_err(|e| ProcessError::Unavailable(format!("the embedder failed: {e}")))?;
        let (doc_vecs, type_vecs) = vectors.split_at(n_doc.min(vectors.len()));
        let doc_vec = classify::document_vector(doc_vecs.iter().map(Vec::as_slice))
            .ok_or_else(|| ProcessError::NoText("the document has no text to classify".into()))?;
        let z = classify::zero_shot(&doc_vec, type_vecs, classify::ZERO_SHOT_TEMPERATURE)
            .ok_or_else(|| ProcessError::Unavailable("no document types".into()))?;
        let best = types
            .get(z.index)
            .ok_or_else(|| ProcessError::Unavailable("no document types".into()))?;
        let second = z
            .probabilities
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != z.index)
            .max_by(|a, b| a.1.total_cmp(b.1))
            .and_then(|(i, p)| types.get(i).map(|t| (t.name.as_str(), *p)));
        let reason = match second {
            Some((name, p)) => format!(
                "zero-shot: closest to the description of {} (cosine {:.3}); next {} ({:.2})",
                best.name,
                z.cosines.get(z.index).copied().unwrap_or_default(),
                name,
                p
            ),
            None => format!("zero-shot: the only type, {}", best.name),
        };
        Ok(classify::Classification {
            doc_type: best.name.clone(),
            confidence: z.confidence,
            reason,
        })
    }

    /// Extracts with `schema` (validated values with evidence) or, without one, the tables.
    pub async fn extract(
        &self,
        p: &Principal,
        doc: &Document,
        schema: Option<&Json>,
    ) -> ProcessResultOf<Extracted> {
        let schema = schema
            .map(|s| {
                taxonomy::FieldSchema::parse(s).map_err(|e| ProcessError::BadSchema(e.to_string()))
            })
            .transpose()?;
        let (text, _) = self.text(p, doc).await?;
        match schema {
            Some(s) => {
                let client = self.utility(p.team_id).await?.ok_or_else(|| {
                    ProcessError::Unavailable(
                        "extraction with a schema needs a utility model (setTeamModel or CAIRN_LLM_URL); without a schema, the tables are extracted without one".into(),
                    )
                })?;
                self.extract_fields(Call { p, job_id: None }, &client, &s, &text)
                    .await
            }
            None => Ok(extract_tables(&text)),
        }
    }

    async fn extract_fields(
        &self,
        call: Call<'_>,
        client: &LlmClient,
        schema: &taxonomy::FieldSchema,
        text: &str,
    ) -> ProcessResultOf<Extracted> {
        let capped = cairn_docproc::cap_text(text);
        let mut spent = Spent::default();
        let values = self
            .ask(
                call,
                client,
                prompt::extract(schema, capped),
                &mut spent,
                |raw| fields::validate(raw, schema, capped),
            )
            .await?;
        let data = json!({"mode": "schema", "fields": values.to_json()});
        Ok(Extracted {
            mode: "schema",
            measured_schema: cairn_docproc::measure_schema(&data),
            data,
            schema: Some(schema.to_json()),
            filled: values.filled(),
            tables: 0,
            spent,
        })
    }

    /// The whole processDocument flow for one document (see the module docs).
    async fn process(
        &self,
        job: &Job,
        payload: &ProcessPayload,
        ctx: &JobContext,
    ) -> Result<ProcessResult, JobError> {
        let member = self
            .store
            .member(job.team_id, payload.requested_by)
            .await?
            .ok_or_else(|| {
                JobError::Permanent("the requesting user is no longer in the team".into())
            })?;
        let p = &member;
        let call = Call {
            p,
            job_id: Some(job.id),
        };
        let doc = self
            .store
            .readable_document(p, payload.document_id)
            .await?
            .ok_or_else(|| {
                JobError::Permanent("the document is gone or no longer readable".into())
            })?;
        let team_visible = doc.visibility == Visibility::Team.as_str();
        ctx.progress("classifying", Some(1), Some(4)).await?;
        // Read once for the whole flow: the taxonomy (kept in step with what this job adds),
        // the text and the team's model.
        let mut rows = self.taxonomy(p.team_id).await.map_err(job_error)?;
        let (text, version) = self.text(p, &doc).await.map_err(job_error)?;
        let client = self.utility(p.team_id).await.map_err(job_error)?;
        let classified = self
            .classify_in(call, &doc, &rows, (&text, version), client.as_ref())
            .await
            .map_err(job_error)?;
        let mut spent = classified.spent;
        let c = classified.row;
        let mut type_name = c.type_name.clone();
        let mut extended = false;
        let mut suggested: Option<Json> = None;
        if c.confidence < self.min_confidence {
            if let Some(client) = &client {
                ctx.progress("suggesting", Some(2), Some(4)).await?;
                let s = self
                    .ask(
                        call,
                        client,
                        prompt::suggest(&Self::doc_types(&rows), cairn_docproc::cap_text(&text)),
                        &mut spent,
                        classify::validate_suggestion,
                    )
                    .await
                    .map_err(job_error)?;
                suggested = Some(json!({"name": s.name, "description": s.description}));
                let allowed = self
                    .store
                    .teams_by_ids(&[p.team_id])
                    .await?
                    .first()
                    .is_some_and(|t| t.extend_taxonomy);
                if allowed && team_visible {
                    let (row, added) = self
                        .store
                        .insert_or_get_document_type(&NewDocumentType {
                            team_id: p.team_id,
                            name: s.name.clone(),
                            description: s.description.clone(),
                            schema: None,
                            origin: "suggested",
                            created_by: Some(p.user_id),
                        })
                        .await?;
                    if added {
                        self.store
                            .audit(
                                Some(p.team_id),
                                Some(p.user_id),
                                "document_type.suggested",
                                Some(&row.name),
                            )
                            .await?;
                    }
                    extended = added;
                    type_name = row.name.clone();
                    if !rows.iter().any(|r| r.id == row.id) {
                        rows.push(row);
                    }
                }
            }
        }
        ctx.progress("schema", Some(3), Some(4)).await?;
        let type_row = rows.iter().find(|r| r.name == type_name);
        let mut schema = type_row
            .and_then(|r| r.schema.as_ref())
            .and_then(|s| taxonomy::FieldSchema::parse(s).ok());
        let mut schema_generated = false;
        if let (None, Some(client), Some(row)) = (&schema, &client, type_row) {
            let dt = taxonomy::DocType {
                name: row.name.clone(),
                description: row.description.clone(),
                schema: None,
            };
            let s = self
                .ask(
                    call,
                    client,
                    prompt::schema_for(&dt, cairn_docproc::cap_text(&text)),
                    &mut spent,
                    fields::validate_schema,
                )
                .await
                .map_err(job_error)?;
            schema_generated = true;
            if team_visible {
                self.store
                    .fill_document_type_schema(p.team_id, row.id, s.to_json())
                    .await?;
            }
            schema = Some(s);
        }
        ctx.progress("extracting", Some(4), Some(4)).await?;
        let extracted = match (&schema, &client) {
            (Some(s), Some(client)) => self
                .extract_fields(call, client, s, &text)
                .await
                .map_err(job_error)?,
            _ => extract_tables(&text),
        };
        spent.input_tokens += extracted.spent.input_tokens;
        spent.output_tokens += extracted.spent.output_tokens;
        spent.cost_usd += extracted.spent.cost_usd;
        spent.calls += extracted.spent.calls;
        let result = json!({
            "classification": {"type": c.type_name, "confidence": c.confidence,
                               "reason": c.reason, "method": c.method},
            "type": type_name,
            "suggestedType": suggested,
            "extraction": extracted.data,
        });
        let stored = self
            .store
            .insert_processing_result(NewProcessingResult {
                document_id: doc.id,
                version,
                team_id: p.team_id,
                job_id: Some(job.id),
                type_name: type_name.clone(),
                confidence: c.confidence,
                method: if c.method == "llm" {
                    "llm"
                } else {
                    "zero_shot"
                },
                extended_taxonomy: extended,
                schema_generated,
                schema: extracted.schema.clone(),
                measured_schema: cairn_docproc::measure_schema(&result),
                result,
                created_by: Some(p.user_id),
            })
            .await?;
        let mut message = format!(
            "{} is a {} ({:.0}% confident, {}).",
            doc.title,
            type_name,
            c.confidence * 100.0,
            if c.method == "llm" {
                "model"
            } else {
                "zero-shot"
            }
        );
        if extended {
            message.push_str(&format!(" The taxonomy gained the type {type_name}."));
        }
        message.push_str(&match extracted.mode {
            "schema" => format!(" {} fields extracted with evidence.", extracted.filled),
            _ => format!(" {} tables extracted.", extracted.tables),
        });
        Ok(ProcessResult {
            document_id: doc.id,
            version,
            result_id: stored.id,
            doc_type: type_name,
            confidence: c.confidence,
            method: c.method,
            extended_taxonomy: extended,
            suggested_type: suggested
                .as_ref()
                .and_then(|s| s["name"].as_str())
                .map(str::to_owned),
            schema_generated,
            mode: extracted.mode.to_owned(),
            fields: extracted.filled as u64,
            tables: extracted.tables as u64,
            llm_calls: spent.calls,
            cost_usd: spent.cost_usd,
            message,
        })
    }
}

/// The tables of `text` as the schemaless result.
pub fn extract_tables(text: &str) -> Extracted {
    let t = tables::extract(text);
    let data = json!({"mode": "tables", "tables": t});
    Extracted {
        mode: "tables",
        measured_schema: cairn_docproc::measure_schema(&data),
        tables: t.len(),
        data,
        schema: None,
        filled: 0,
        spent: Spent::default(),
    }
}

fn job_error(e: ProcessError) -> JobError {
    match e {
        ProcessError::Store(s) => s.into(),
        ProcessError::Llm {
            code: "LLM_TIMEOUT" | "LLM_UNAVAILABLE",
            message,
        } => JobError::Transient(message),
        other => JobError::Permanent(other.to_string()),
    }
}

/// Runs `process_document` jobs.
pub struct ProcessRunner {
    pub processor: Arc<Processor>,
}

#[async_trait]
impl Runner for ProcessRunner {
    async fn run(&self, job: &Job, kind: JobKind, ctx: &JobContext) -> Result<JobResult, JobError> {
        let JobKind::Process(payload) = kind else {
            return Err(JobError::Permanent(format!(
                "not a document processing job: {}",
                kind.name()
            )));
        };
        Ok(JobResult::Process(
            self.processor.process(job, &payload, ctx).await?,
        ))
    }
}
