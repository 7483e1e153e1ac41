//! The typed job model (meilisearch's `Task { status, kind: KindWithContent }`): a job row's
//! `kind` and `payload` columns are one [`JobKind`], each variant carrying its typed payload;
//! its `result` column is one [`JobResult`]. Nothing outside this module reads payload or
//! result JSON: a row whose payload does not parse is a [`JobError::Permanent`] (the job fails
//! with a clear message and never runs on defaults).
//!
//! The JSON shapes are the stored ones (payloads snake_case, results camelCase, as the API's
//! `Job.result` shows them), so rows written before the types existed still read.

use entity::prelude::Job;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::JobError;
use crate::domain::Visibility;
use crate::store::jobs::NewJob;

/// The `kind` column of an ingest job.
pub const INGEST: &str = "ingest";
/// The `kind` column of a knowledge-extraction job.
pub const KG_EXTRACT: &str = "kg_extract";
/// The `kind` column of a document-processing job.
pub const PROCESS_DOCUMENT: &str = "process_document";

/// Attempts before a job fails for good (retries back off exponentially).
const MAX_ATTEMPTS: i32 = 3;

/// What a job does, with what it needs.
#[derive(Clone, Debug, PartialEq)]
pub enum JobKind {
    Ingest(IngestPayload),
    KgExtract(KgPayload),
    Process(ProcessPayload),
}

/// What the upload hands to an ingest job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IngestPayload {
    pub content_hash: String,
    pub storage_uri: String,
    pub size: u64,
    pub filename: String,
    pub title: String,
    pub corpus_id: i64,
    pub owner_id: i64,
    /// Required: a payload without it fails (a private upload is never widened to the team).
    pub visibility: Visibility,
    /// A new version of this document (else a new document).
    pub document_id: Option<i64>,
    pub source_url: Option<String>,
}

/// What `extractKnowledge` (or an ingest with automatic extraction) hands to the job.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KgPayload {
    pub requested_by: i64,
    pub corpus_id: Option<i64>,
    pub document_ids: Option<Vec<i64>>,
}

/// What `processDocument` hands to the job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessPayload {
    pub requested_by: i64,
    pub document_id: i64,
    pub corpus_id: i64,
    /// The document was private when the job was queued: its details are for its creator.
    pub private: bool,
}

/// How a job ended well.
#[derive(Clone, Debug, PartialEq)]
pub enum JobResult {
    Ingest(IngestResult),
    KgExtract(KgResult),
    Process(ProcessResult),
}

/// An ingest's outcome.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IngestResult {
    pub document_id: i64,
    pub version: i32,
    pub chunk_count: i64,
    /// The content was already readable as `document_id`: nothing new was stored.
    pub duplicate: bool,
    pub re_extracted: bool,
    /// Whether any text came out (a scan without a text layer has none unless OCR read it).
    pub extractable: bool,
    /// Pages (or images) whose text came from OCR (absent in rows written before OCR).
    #[serde(default)]
    pub ocr_pages: u64,
    pub message: String,
}

/// A knowledge extraction's outcome.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KgResult {
    pub documents: u64,
    pub extracted: u64,
    /// The documents whose extraction failed, with why.
    pub failed: Vec<KgFailure>,
    /// Documents left for a later run (the team's quota was spent).
    pub left: u64,
    pub quota_reached: bool,
    pub entities: u64,
    pub relations: u64,
    pub extractor: String,
    pub message: String,
}

/// A document processing's outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessResult {
    pub document_id: i64,
    pub version: i32,
    /// The stored processing result.
    pub result_id: i64,
    /// The type the document was processed as.
    #[serde(rename = "type")]
    pub doc_type: String,
    pub confidence: f64,
    /// `llm` or `zero_shot`.
    pub method: String,
    /// The taxonomy gained the suggested type.
    pub extended_taxonomy: bool,
    /// The type the model suggested, when the classification was not confident.
    pub suggested_type: Option<String>,
    pub schema_generated: bool,
    /// `schema` or `tables`.
    pub mode: String,
    pub fields: u64,
    pub tables: u64,
    pub llm_calls: u32,
    pub cost_usd: f64,
    pub message: String,
}

/// One document a knowledge extraction could not do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KgFailure {
    pub document_id: i64,
    pub reason: String,
}

impl JobKind {
    /// A stored job's kind and payload. An unknown kind or a payload that does not parse is a
    /// permanent failure naming the kind.
    pub fn of(job: &Job) -> Result<JobKind, JobError> {
        fn parse<T: serde::de::DeserializeOwned>(job: &Job) -> Result<T, JobError> {
            serde_json::from_value(job.payload.clone())
                .map_err(|e| JobError::Permanent(format!("invalid {} payload: {e}", job.kind)))
        }
        match job.kind.as_str() {
            INGEST => Ok(JobKind::Ingest(parse(job)?)),
            KG_EXTRACT => Ok(JobKind::KgExtract(parse(job)?)),
            PROCESS_DOCUMENT => Ok(JobKind::Process(parse(job)?)),
            other => Err(JobError::Permanent(format!("unknown job kind `{other}`"))),
        }
    }

    /// The `kind` column.
    pub fn name(&self) -> &'static str {
        match self {
            JobKind::Ingest(_) => INGEST,
            JobKind::KgExtract(_) => KG_EXTRACT,
            JobKind::Process(_) => PROCESS_DOCUMENT,
        }
    }

    /// The job row to queue for this kind, on behalf of `created_by`.
    pub fn new_job(&self, team_id: i64, created_by: i64) -> Result<NewJob, serde_json::Error> {
        let (corpus_id, payload) = match self {
            JobKind::Ingest(p) => (Some(p.corpus_id), serde_json::to_value(p)?),
            JobKind::KgExtract(p) => (p.corpus_id, serde_json::to_value(p)?),
            JobKind::Process(p) => (Some(p.corpus_id), serde_json::to_value(p)?),
        };
        Ok(NewJob {
            team_id,
            corpus_id,
            kind: self.name().to_owned(),
            payload,
            created_by: Some(created_by),
            max_attempts: MAX_ATTEMPTS,
        })
    }

    /// The document the job writes (a new version's), when it names one.
    pub fn document_id(&self) -> Option<i64> {
        match self {
            JobKind::Ingest(p) => p.document_id,
            JobKind::Process(p) => Some(p.document_id),
            JobKind::KgExtract(_) => None,
        }
    }

    /// The uploaded file's name (ingest).
    pub fn filename(&self) -> Option<&str> {
        match self {
            JobKind::Ingest(p) => Some(&p.filename),
            JobKind::KgExtract(_) | JobKind::Process(_) => None,
        }
    }

    /// Whether the job concerns a private upload: its details are for its creator only.
    pub fn is_private(&self) -> bool {
        match self {
            JobKind::Ingest(p) => p.visibility == Visibility::Private,
            JobKind::Process(p) => p.private,
            JobKind::KgExtract(_) => false,
        }
    }

    /// The stage a succeeded job of this kind ends in.
    pub fn succeeded_stage(&self) -> &'static str {
        match self {
            JobKind::Ingest(_) => "searchable",
            JobKind::KgExtract(_) => "extracted",
            JobKind::Process(_) => "processed",
        }
    }
}

impl JobResult {
    /// A stored result of a job of kind `kind`; `None` when there is none or it does not
    /// parse (the row then reads as having no result).
    pub fn of(kind: &str, result: Option<&Json>) -> Option<JobResult> {
        let r = result?.clone();
        match kind {
            INGEST => serde_json::from_value(r).ok().map(JobResult::Ingest),
            KG_EXTRACT => serde_json::from_value(r).ok().map(JobResult::KgExtract),
            PROCESS_DOCUMENT => serde_json::from_value(r).ok().map(JobResult::Process),
            _ => None,
        }
    }

    /// The JSON the `result` column and the API carry.
    pub fn to_json(&self) -> Json {
        let v = match self {
            JobResult::Ingest(r) => serde_json::to_value(r),
            JobResult::KgExtract(r) => serde_json::to_value(r),
            JobResult::Process(r) => serde_json::to_value(r),
        };
        v.unwrap_or(Json::Null)
    }

    /// The document an ingest stored (or found as a duplicate).
    pub fn document_id(&self) -> Option<i64> {
        match self {
            JobResult::Ingest(r) => Some(r.document_id),
            JobResult::Process(r) => Some(r.document_id),
            JobResult::KgExtract(_) => None,
        }
    }

    pub fn message(&self) -> &str {
        match self {
            JobResult::Ingest(r) => &r.message,
            JobResult::KgExtract(r) => &r.message,
            JobResult::Process(r) => &r.message,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(kind: &str, payload: Json) -> Job {
        let now = chrono::Utc::now();
        Job {
            id: 1,
            team_id: 1,
            corpus_id: None,
            kind: kind.into(),
            payload,
            state: entity::prelude::JobState::Running,
            stage: None,
            progress: json!({}),
            attempts: 1,
            max_attempts: 3,
            run_after: now,
            error: None,
            result: None,
            result_delivered_at: None,
            lease_owner: None,
            lease_until: None,
            created_by: Some(1),
            created_at: now,
            updated_at: now,
        }
    }

    fn refused(j: &Job) -> String {
        match JobKind::of(j) {
            Err(JobError::Permanent(m)) => m,
            Err(e) => panic!("a bad payload must fail for good, not {e:?}"),
            Ok(k) => panic!("a bad payload was accepted: {} as {k:?}", j.payload),
        }
    }

    fn good_ingest() -> IngestPayload {
        IngestPayload {
            content_hash: "ab".repeat(32),
            storage_uri: "blobs/ab/x".into(),
            size: 3,
            filename: "x.md".into(),
            title: "x".into(),
            corpus_id: 1,
            owner_id: 1,
            visibility: Visibility::Private,
            document_id: None,
            source_url: None,
        }
    }

    /// An ingest payload that does not parse fails the job, naming the kind; it never runs
    /// with defaults (a missing owner, visibility or blob is not filled in, and a visibility
    /// that is not `team` or `private` is not read as `team`).
    #[test]
    fn a_bad_ingest_payload_fails_the_job() {
        let good = good_ingest();
        let ok = job(INGEST, serde_json::to_value(&good).unwrap_or_default());
        assert_eq!(JobKind::of(&ok).ok(), Some(JobKind::Ingest(good.clone())));
        assert_eq!(ok.payload["visibility"], "private", "stored as before");
        let mut bads = vec![
            json!(null),
            json!("x"),
            json!({}),
            json!({ "content_hash": "ab", "filename": "x.md" }),
            json!({ "owner_id": "one" }),
        ];
        for (key, value) in [
            ("visibility", Json::Null),
            ("visibility", json!("everyone")),
            ("visibility", json!("Team")),
            ("owner_id", json!("1")),
            ("storage_uri", Json::Null),
        ] {
            let mut v = serde_json::to_value(&good).unwrap_or_default();
            v[key] = value;
            bads.push(v);
        }
        let mut missing = serde_json::to_value(&good).unwrap_or_default();
        if let Some(o) = missing.as_object_mut() {
            o.remove("visibility");
        }
        bads.push(missing);
        for bad in bads {
            let msg = refused(&job(INGEST, bad));
            assert!(msg.starts_with("invalid ingest payload"), "{msg}");
        }
    }

    /// The same for knowledge extraction: no requester, no run.
    #[test]
    fn a_bad_kg_extract_payload_fails_the_job() {
        let ok = job(
            KG_EXTRACT,
            json!({ "requested_by": 3, "corpus_id": null, "document_ids": [1, 2] }),
        );
        assert_eq!(
            JobKind::of(&ok).ok(),
            Some(JobKind::KgExtract(KgPayload {
                requested_by: 3,
                corpus_id: None,
                document_ids: Some(vec![1, 2]),
            }))
        );
        for bad in [
            json!(null),
            json!({}),
            json!({ "requested_by": "admin" }),
            json!({ "requested_by": 3, "document_ids": "all" }),
        ] {
            let msg = refused(&job(KG_EXTRACT, bad));
            assert!(msg.starts_with("invalid kg_extract payload"), "{msg}");
        }
    }

    #[test]
    fn an_unknown_kind_fails_the_job() {
        let msg = refused(&job("reindex", json!({})));
        assert_eq!(msg, "unknown job kind `reindex`");
    }

    #[test]
    fn kinds_queue_as_their_rows_and_results_round_trip() {
        let k = JobKind::Ingest(good_ingest());
        let row = k.new_job(7, 9).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (row.kind.as_str(), row.corpus_id, row.created_by),
            (INGEST, Some(1), Some(9))
        );
        assert!(k.is_private());
        let r = JobResult::Ingest(IngestResult {
            document_id: 4,
            version: 1,
            chunk_count: 1,
            duplicate: false,
            re_extracted: false,
            extractable: true,
            ocr_pages: 0,
            message: "x.md is searchable: 1 chunk.".into(),
        });
        let v = r.to_json();
        assert_eq!(v["documentId"], 4, "camelCase as the API shows it: {v}");
        assert_eq!(JobResult::of(INGEST, Some(&v)), Some(r));
        assert_eq!(JobResult::of(KG_EXTRACT, Some(&v)), None);
        assert_eq!(JobResult::of(INGEST, None), None);
    }
}
