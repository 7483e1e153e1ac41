//! Ingestion: the synchronous upload safety steps and the durable ingest job.
//!
//! Upload (in the request, before anything is queued; seed 004 "Upload is job-based"):
//! sanitize the filename → the body was streamed under the cap by the HTTP layer, and is
//! streamed again into the blob store under the same cap → the corpus must be the caller's
//! team's or a system corpus (else NOT_FOUND) → the bytes land content-addressed and
//! atomically → the job is queued and returned.
//!
//! The job (`ingest` kind): dedup on the content hash → extract (bounded in time; the
//! format parsers bound decompression and output) → chunk → embed (progress `embedding k/n`,
//! a usage row per batch) → store document, version and chunks in one transaction →
//! searchable. A job that fails for good removes the blob it brought if nothing else uses it.

pub mod blobs;
pub mod isolate;

use std::time::Duration;

use cairn_embed::{BatchDone, Embedder};
use cairn_extract::chunk::{chunk, ChunkConfig};
use cairn_extract::ocr::Ocr;
use cairn_extract::{detect, extract_with_ocr, Limits};
use entity::prelude::Job;

use crate::auth::Principal;
use crate::jobs::{
    IngestPayload, IngestResult, JobContext, JobError, JobKind, JobResult, KgPayload, Runner,
};
use crate::store::documents::{BlobRef, ChunkRow, StoreIngest, Target};
use crate::store::{NewUsage, Store};
use blobs::BlobStore;

/// Runs `ingest` jobs.
pub struct IngestRunner {
    pub store: Store,
    pub blobs: BlobStore,
    pub embedder: Option<Embedder>,
    pub chunking: ChunkConfig,
    pub limits: Limits,
    pub extract_timeout: Duration,
    /// The `cairn` binary to run extraction in (see [`isolate`]); `None` extracts on a
    /// blocking thread (in-process test servers).
    pub extract_bin: Option<std::path::PathBuf>,
    /// The child's address-space limit.
    pub extract_memory_mb: u64,
    /// OCR for pages without a text layer and images (`None`: they are stored without text).
    pub ocr: Option<Ocr>,
    /// Queue a knowledge extraction of the document after a successful ingest.
    pub auto_kg: bool,
}

impl IngestRunner {
    async fn owner(&self, job: &Job, p: &IngestPayload) -> Result<Principal, JobError> {
        self.store
            .member(job.team_id, p.owner_id)
            .await?
            .ok_or_else(|| {
                JobError::Permanent("the uploading user is no longer in the team".into())
            })
    }

    /// Heal-on-write (seed 004): when the blob row of this content names a file that is gone
    /// (a row from an older layout, a lost disk) and this upload's file is there, the row is
    /// pointed at it, so every document of that content has its bytes again.
    async fn heal_blob(&self, p: &IngestPayload) -> Result<(), JobError> {
        let Some(row) = self.store.blob_by_hash(&p.content_hash).await? else {
            return Ok(());
        };
        if row.storage_uri != p.storage_uri
            && !self.blobs.exists(&row.storage_uri)
            && self.blobs.exists(&p.storage_uri)
            && self
                .store
                .repair_blob_uri(&p.content_hash, &row.storage_uri, &p.storage_uri)
                .await?
        {
            tracing::info!(
                content_hash = %p.content_hash,
                missing = %row.storage_uri,
                now = %p.storage_uri,
                "blob row healed: its file was missing"
            );
        }
        Ok(())
    }

    /// Extraction off the async runtime, bounded in time: the media type sniffed from the bytes
    /// (a PDF named `.txt` is a PDF; a DOCX is told from other zips by its parts) and the text.
    async fn extract_text(&self, p: &IngestPayload) -> Result<isolate::ExtractedText, JobError> {
        let path = self.blobs.path_of(&p.storage_uri);
        if let Some(bin) = &self.extract_bin {
            return isolate::extract_in_child(
                bin,
                &path,
                &p.filename,
                self.extract_memory_mb,
                self.ocr.as_ref(),
                self.extract_timeout,
            )
            .await
            .map_err(|e| match e {
                isolate::IsolateError::Io(m) => {
                    JobError::Transient(format!("text extraction could not run: {m}"))
                }
                isolate::IsolateError::Refused(m) => {
                    JobError::Permanent(format!("text extraction failed: {m}"))
                }
                other => JobError::Permanent(other.to_string()),
            });
        }
        let filename = p.filename.clone();
        let limits = self.limits;
        let ocr = self.ocr.clone();
        let work = tokio::task::spawn_blocking(move || {
            let bytes = std::fs::read(&path)
                .map_err(|e| JobError::Transient(format!("cannot read the stored file: {e}")))?;
            let format = detect(&filename, &bytes);
            extract_with_ocr(&bytes, format, &limits, ocr.as_ref())
                .map(|x| isolate::ExtractedText {
                    mime: format.mime_type().to_owned(),
                    text: x.text,
                    ocr_pages: x.ocr_pages,
                })
                .map_err(|e| JobError::Permanent(format!("text extraction failed: {e}")))
        });
        match tokio::time::timeout(self.extract_timeout, work).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => Err(JobError::Permanent(format!("text extraction crashed: {e}"))),
            Err(_) => Err(JobError::Permanent(format!(
                "text extraction took longer than {} s",
                self.extract_timeout.as_secs()
            ))),
        }
    }
}

/// "1 chunk", "3 chunks".
fn chunk_count(n: usize) -> String {
    if n == 1 {
        "1 chunk".to_owned()
    } else {
        format!("{n} chunks")
    }
}

fn result_message(filename: &str, re_extracted: bool, chunks: usize, ocr_pages: u32) -> String {
    let message = match (re_extracted, chunks > 0) {
        (false, true) => format!("Ingested {filename}: {}, now searchable.", chunk_count(chunks)),
        (false, false) => format!(
            "Stored {filename}, but no text could be extracted (a scanned PDF or an image?). The document exists with 0 chunks."
        ),
        (true, true) => format!(
            "Re-extracted {filename} (an earlier ingest found no text): {}, now searchable.",
            chunk_count(chunks)
        ),
        (true, false) => format!(
            "Re-extracted {filename}, but still no text could be extracted; the document keeps 0 chunks."
        ),
    };
    match ocr_pages {
        0 => message,
        1 => format!("{message} 1 page was read by OCR."),
        n => format!("{message} {n} pages were read by OCR."),
    }
}

#[async_trait::async_trait]
impl Runner for IngestRunner {
    async fn run(&self, job: &Job, kind: JobKind, ctx: &JobContext) -> Result<JobResult, JobError> {
        let JobKind::Ingest(p) = kind else {
            return Err(JobError::Permanent(format!(
                "not an ingest job: {}",
                kind.name()
            )));
        };
        let owner = self.owner(job, &p).await?;
        self.heal_blob(&p).await?;

        // Dedup on content: a readable document with this content and chunks is the answer.
        let mut target = match p.document_id {
            Some(document_id) => Target::NewVersion { document_id },
            None => Target::New {
                team_id: job.team_id,
                corpus_id: p.corpus_id,
                owner_id: p.owner_id,
                // Typed in the payload: one that does not parse failed the job already.
                visibility: p.visibility,
                title: p.title.clone(),
                source_url: p.source_url.clone(),
            },
        };
        if p.document_id.is_none() {
            if let Some(dup) = self
                .store
                .readable_duplicate(&owner, &p.content_hash)
                .await?
            {
                if dup.document.chunk_count > 0 {
                    let d = dup.document;
                    return Ok(JobResult::Ingest(IngestResult {
                        document_id: d.id,
                        version: d.current_version,
                        chunk_count: i64::from(d.chunk_count),
                        duplicate: true,
                        re_extracted: false,
                        extractable: true,
                        ocr_pages: 0,
                        message: format!(
                            "{} is already in Cairn as document {} ({}): search it or read it there.",
                            p.filename,
                            d.id,
                            chunk_count(usize::try_from(d.chunk_count).unwrap_or(0))
                        ),
                    }));
                }
                target = Target::ReExtract {
                    document_id: dup.document.id,
                };
            }
        }
        let re_extracted = matches!(target, Target::ReExtract { .. });

        ctx.progress("extracting", None, None).await?;
        let isolate::ExtractedText {
            mime,
            text,
            ocr_pages,
        } = self.extract_text(&p).await?;

        ctx.progress("chunking", None, None).await?;
        let chunks = chunk(&text, &self.chunking);
        let total = chunks.len() as i64;

        ctx.progress("embedding", Some(0), Some(total)).await?;
        let embeddings = if chunks.is_empty() {
            Vec::new()
        } else {
            let embedder = self.embedder.as_ref().ok_or_else(|| {
                JobError::Permanent(
                    "no embedding model is loaded: set CAIRN_EMBED_MODEL or run scripts/fetch-model.sh".into(),
                )
            })?;
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<BatchDone>();
            let texts: Vec<String> = chunks.iter().map(|c| c.content.clone()).collect();
            let model = embedder.model_name().to_owned();
            let fut = embedder.embed(texts, Some(tx));
            tokio::pin!(fut);
            let vectors = loop {
                tokio::select! {
                    biased;
                    Some(b) = rx.recv() => {
                        self.store.insert_usage(embed_usage(job, &model, b.tokens)).await?;
                        ctx.progress("embedding", Some(b.done as i64), Some(total)).await?;
                    }
                    r = &mut fut => break r.map_err(embed_failed)?,
                }
            };
            // Batches that finished together with the last one.
            while let Ok(b) = rx.try_recv() {
                self.store
                    .insert_usage(embed_usage(job, &model, b.tokens))
                    .await?;
            }
            ctx.progress("embedding", Some(total), Some(total)).await?;
            vectors
        };

        ctx.progress("storing", None, None).await?;
        let rows: Vec<ChunkRow> = chunks
            .into_iter()
            .zip(embeddings)
            .map(|(c, embedding)| ChunkRow {
                index: c.index as i32,
                content: c.content,
                section: c.section,
                page: c.page.map(|p| p as i32),
                embedding,
            })
            .collect();
        let n = rows.len();
        let (doc, version) = self
            .store
            .store_ingest(StoreIngest {
                target,
                blob: BlobRef {
                    content_hash: p.content_hash.clone(),
                    mime_type: mime,
                    size: p.size as i64,
                    storage_uri: p.storage_uri.clone(),
                },
                filename: Some(p.filename.clone()),
                extracted_chars: text.chars().count() as i64,
                chunks: rows,
            })
            .await?;
        if self.auto_kg && n > 0 {
            let kg = KgPayload {
                requested_by: p.owner_id,
                corpus_id: None,
                document_ids: Some(vec![doc.id]),
            };
            match JobKind::KgExtract(kg).new_job(job.team_id, p.owner_id) {
                Ok(j) => {
                    if let Err(e) = ctx.submit(j).await {
                        tracing::warn!(error = %e, "automatic knowledge extraction not queued");
                    }
                }
                Err(e) => tracing::warn!(error = %e, "automatic knowledge extraction not queued"),
            }
        }
        Ok(JobResult::Ingest(IngestResult {
            document_id: doc.id,
            version,
            chunk_count: n as i64,
            duplicate: false,
            re_extracted,
            extractable: n > 0,
            ocr_pages: u64::from(ocr_pages),
            message: result_message(&p.filename, re_extracted, n, ocr_pages),
        }))
    }

    async fn on_failed(&self, job: &Job, kind: &JobKind) {
        let JobKind::Ingest(p) = kind else { return };
        // The blob stays while a row or another pending job uses it.
        match self.store.blob_row_exists(&p.content_hash).await {
            Ok(false) => {}
            Ok(true) => return,
            Err(e) => {
                tracing::warn!(error = %e, "blob cleanup skipped");
                return;
            }
        }
        match self
            .store
            .blob_pending_elsewhere(&p.content_hash, job.id)
            .await
        {
            Ok(false) => self.blobs.remove(&p.storage_uri),
            Ok(true) => {}
            Err(e) => tracing::warn!(error = %e, "blob cleanup skipped"),
        }
    }
}

/// Everything the ingest side of the service needs.
#[derive(Clone, Debug)]
pub struct IngestSettings {
    pub max_upload_bytes: u64,
}

/// A model that did not load fails the job for good (retrying cannot help, and the server's
/// log says why); anything else may pass.
fn embed_failed(e: cairn_embed::EmbedError) -> JobError {
    match e {
        cairn_embed::EmbedError::ModelLoad(why) => JobError::Permanent(format!(
            "the embedding model did not load ({why}): fix CAIRN_EMBED_MODEL or run scripts/fetch-model.sh, then upload again"
        )),
        other => JobError::Transient(format!("embedding failed: {other}")),
    }
}

/// The `usage` row of one embedded batch of an ingest job.
fn embed_usage<'a>(job: &Job, model: &'a str, tokens: usize) -> NewUsage<'a> {
    NewUsage {
        team_id: job.team_id,
        kind: "embed",
        role: None,
        model,
        input_tokens: NewUsage::tokens(tokens as u64),
        output_tokens: 0,
        cost_usd: 0.0,
        job_id: Some(job.id),
    }
}
