//! GraphQL types and resolvers for documents and jobs. Thin: parse, call `service`, convert.

use async_graphql::connection::{Connection, EmptyFields};
use async_graphql::{ComplexObject, Context, Enum, Json, Object, SimpleObject, Upload, ID};
use chrono::{DateTime, Utc};
use futures_util::Stream;
use tokio_stream::StreamExt;

use super::error::api;
use super::loaders::{load, load_list, CorpusPage, FirstChunks};
use super::{cairn_of, loaders_of, page, parse_cursor, parse_id, principal_of};
use crate::service::{JobEvent, UploadRequest};
use entity::prelude::{Chunk, ContentBlob, DocumentVersion};

#[derive(Enum, Clone, Copy, PartialEq, Eq, Debug)]
#[graphql(name = "Visibility", remote = "crate::domain::Visibility")]
pub enum GqlVisibility {
    /// Everyone in the team.
    Team,
    /// The owner only.
    Private,
}

fn visibility_of(s: &str) -> GqlVisibility {
    if s == "private" {
        GqlVisibility::Private
    } else {
        GqlVisibility::Team
    }
}

/// A named collection of documents. System corpora are readable by every team.
#[derive(SimpleObject)]
#[graphql(name = "Corpus", complex)]
pub struct GqlCorpus {
    pub id: ID,
    pub name: String,
    pub description: Option<String>,
    pub system: bool,
    pub created_at: DateTime<Utc>,
    #[graphql(skip)]
    pub raw_id: i64,
}

impl From<entity::prelude::Corpus> for GqlCorpus {
    fn from(c: entity::prelude::Corpus) -> Self {
        GqlCorpus {
            id: ID(c.id.to_string()),
            raw_id: c.id,
            name: c.name,
            description: c.description,
            system: c.system,
            created_at: c.created_at,
        }
    }
}

#[ComplexObject]
impl GqlCorpus {
    /// Documents in this corpus that the caller may read.
    async fn document_count(&self, ctx: &Context<'_>) -> async_graphql::Result<i64> {
        Ok(self.counts(ctx).await?.documents)
    }

    /// The documents of this corpus the caller may read, oldest first.
    async fn documents(
        &self,
        ctx: &Context<'_>,
        first: Option<i32>,
        after: Option<String>,
    ) -> async_graphql::Result<Connection<String, GqlDocument, EmptyFields, EmptyFields>> {
        corpus_documents(ctx, self.raw_id, first, after).await
    }

    /// Chunks of the documents in this corpus that the caller may read.
    async fn chunk_count(&self, ctx: &Context<'_>) -> async_graphql::Result<i64> {
        Ok(self.counts(ctx).await?.chunks)
    }
}

impl GqlCorpus {
    async fn counts(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<crate::service::CorpusCounts> {
        Ok(load(&loaders_of(ctx)?.corpus_counts, self.raw_id)
            .await?
            .unwrap_or_default())
    }
}

/// A document the caller may read.
#[derive(SimpleObject)]
#[graphql(name = "Document", complex)]
pub struct GqlDocument {
    pub id: ID,
    pub title: String,
    pub filename: Option<String>,
    pub mime_type: String,
    pub source_url: Option<String>,
    pub visibility: GqlVisibility,
    pub current_version: i32,
    pub chunk_count: i32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    #[graphql(skip)]
    pub raw_id: i64,
    #[graphql(skip)]
    pub corpus_id: i64,
    #[graphql(skip)]
    pub owner_id: i64,
}

impl From<entity::prelude::Document> for GqlDocument {
    fn from(d: entity::prelude::Document) -> Self {
        GqlDocument {
            id: ID(d.id.to_string()),
            raw_id: d.id,
            visibility: visibility_of(&d.visibility),
            title: d.title,
            filename: d.filename,
            mime_type: d.mime_type,
            source_url: d.source_url,
            current_version: d.current_version,
            chunk_count: d.chunk_count,
            created_at: d.created_at,
            updated_at: d.updated_at,
            corpus_id: d.corpus_id,
            owner_id: d.owner_id,
        }
    }
}

/// One stored version of a document.
#[derive(SimpleObject, Clone)]
#[graphql(name = "DocumentVersion")]
pub struct GqlDocumentVersion {
    pub version: i32,
    pub extracted_chars: i64,
    pub created_at: DateTime<Utc>,
    pub content_hash: Option<String>,
    pub size: Option<i64>,
}

#[ComplexObject]
impl GqlDocument {
    async fn corpus(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<GqlCorpus>> {
        Ok(load(&loaders_of(ctx)?.corpora, self.corpus_id)
            .await?
            .map(GqlCorpus::from))
    }

    /// Who uploaded it.
    async fn owner_name(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<String>> {
        Ok(load(&loaders_of(ctx)?.users, self.owner_id)
            .await?
            .map(|u| u.name))
    }

    /// The current version's chunks, in order (`first` of them, at most 1000).
    #[graphql(complexity = "first.unwrap_or(100).clamp(0, 1000) as usize * child_complexity")]
    async fn chunks(
        &self,
        ctx: &Context<'_>,
        first: Option<i32>,
    ) -> async_graphql::Result<Vec<GqlChunk>> {
        let key = FirstChunks {
            document_id: self.raw_id,
            first: first.unwrap_or(100).clamp(0, 1000) as u32,
        };
        load_list(&loaders_of(ctx)?.chunks, key).await
    }

    /// Every version, oldest first.
    async fn versions(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<GqlDocumentVersion>> {
        load_list(&loaders_of(ctx)?.versions, self.raw_id).await
    }

    /// The current version's type (`classifyDocument`, `processDocument`), if classified.
    async fn classification(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<Option<super::types::GqlClassification>> {
        Ok(load(&loaders_of(ctx)?.classifications, self.raw_id)
            .await?
            .map(Into::into))
    }

    /// The newest `processDocument` result of the current version, if any.
    async fn processing(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<Option<super::types::GqlProcessingResult>> {
        Ok(load(&loaders_of(ctx)?.processing, self.raw_id)
            .await?
            .map(Into::into))
    }
}

impl From<(DocumentVersion, Option<ContentBlob>)> for GqlDocumentVersion {
    fn from((v, blob): (DocumentVersion, Option<ContentBlob>)) -> Self {
        GqlDocumentVersion {
            version: v.version,
            extracted_chars: v.extracted_chars,
            created_at: v.created_at,
            content_hash: blob.as_ref().map(|b| b.content_hash.clone()),
            size: blob.map(|b| b.size),
        }
    }
}

impl From<Chunk> for GqlChunk {
    fn from(c: Chunk) -> Self {
        GqlChunk {
            index: c.chunk_index,
            section: c.section,
            page: c.page,
            content: c.content,
            version: c.version,
        }
    }
}

/// A chunk of a document's current version: the unit search returns.
#[derive(SimpleObject, Clone)]
#[graphql(name = "Chunk")]
pub struct GqlChunk {
    pub index: i32,
    pub version: i32,
    pub section: Option<String>,
    pub page: Option<i32>,
    /// The full chunk text.
    pub content: String,
}

/// A page of a document's text.
#[derive(SimpleObject)]
pub struct DocumentPage {
    pub document: GqlDocument,
    pub version: i32,
    pub page: i32,
    pub page_count: i32,
    pub text: String,
}

#[derive(SimpleObject)]
pub struct JobProgress {
    pub done: Option<i64>,
    pub total: Option<i64>,
}

/// Where a job is in its life (lowercase in the database).
#[derive(Enum, Copy, Clone, Debug, PartialEq, Eq)]
#[graphql(name = "JobState", remote = "entity::prelude::JobState")]
pub enum GqlJobState {
    Queued,
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

/// A durable background job (ingestion, extraction).
pub struct GqlJob {
    pub job: entity::prelude::Job,
    /// The result, when this read is the one that delivers it.
    pub result: Option<serde_json::Value>,
}

#[Object(name = "Job")]
impl GqlJob {
    async fn id(&self) -> ID {
        ID(self.job.id.to_string())
    }
    async fn kind(&self) -> &str {
        &self.job.kind
    }
    async fn state(&self) -> GqlJobState {
        self.job.state.into()
    }
    /// Ingest: extracting → chunking → embedding → storing → searchable; knowledge extraction:
    /// extracting → extracted (either may end failed or cancelled).
    async fn stage(&self) -> Option<&str> {
        self.job.stage.as_deref()
    }
    async fn progress(&self) -> JobProgress {
        let num = |k: &str| self.job.progress.get(k).and_then(serde_json::Value::as_i64);
        JobProgress {
            done: num("done"),
            total: num("total"),
        }
    }
    async fn error(&self) -> Option<&str> {
        self.job.error.as_deref()
    }
    async fn attempts(&self) -> i32 {
        self.job.attempts
    }
    async fn corpus_id(&self) -> Option<ID> {
        self.job.corpus_id.map(|c| ID(c.to_string()))
    }
    async fn filename(&self) -> Option<String> {
        crate::service::job_filename(&self.job)
    }
    /// The outcome (documentId, chunkCount, duplicate, reExtracted, extractable, message):
    /// delivered once, by the first `job` query after success; null afterwards.
    async fn result(&self) -> Option<Json<serde_json::Value>> {
        self.result.clone().map(Json)
    }
    async fn created_at(&self) -> DateTime<Utc> {
        self.job.created_at
    }
    async fn updated_at(&self) -> DateTime<Utc> {
        self.job.updated_at
    }
}

/// A job's progress as subscriptions deliver it.
#[derive(SimpleObject, Clone)]
#[graphql(name = "JobEvent")]
pub struct GqlJobEvent {
    pub job_id: ID,
    pub kind: String,
    pub corpus_id: Option<ID>,
    pub state: GqlJobState,
    pub stage: String,
    pub done: Option<i64>,
    pub total: Option<i64>,
    pub error: Option<String>,
    /// On the final succeeded event (stage `searchable` or `extracted`): the job's result.
    pub result: Option<Json<serde_json::Value>>,
}

impl From<JobEvent> for GqlJobEvent {
    fn from(e: JobEvent) -> Self {
        GqlJobEvent {
            job_id: ID(e.job_id.to_string()),
            kind: e.kind,
            corpus_id: e.corpus_id.map(|c| ID(c.to_string())),
            state: e.state.into(),
            stage: e.stage,
            done: e.done,
            total: e.total,
            error: e.error,
            result: e.result.map(Json),
        }
    }
}

fn ids(list: &[ID], what: &'static str) -> async_graphql::Result<Vec<i64>> {
    list.iter().map(|i| parse_id(i, what)).collect()
}

#[derive(Default)]
pub struct DocumentQuery;

#[Object]
impl DocumentQuery {
    /// A document the caller may read (NOT_FOUND otherwise).
    async fn document(
        &self,
        ctx: &Context<'_>,
        id: ID,
    ) -> async_graphql::Result<Option<GqlDocument>> {
        let p = principal_of(ctx)?;
        let id = parse_id(&id, "document")?;
        Ok(Some(
            cairn_of(ctx)?.document(p, id).await.map_err(api)?.into(),
        ))
    }

    /// The document's current text in pages of 25,000 characters; a page that starts inside
    /// a section opens with `## section (continued)`.
    #[graphql(complexity = "crate::graphql::cost::DOCUMENT_TEXT + child_complexity")]
    async fn document_text(
        &self,
        ctx: &Context<'_>,
        id: ID,
        #[graphql(default = 1)] page: i32,
    ) -> async_graphql::Result<DocumentPage> {
        let p = principal_of(ctx)?;
        let id = parse_id(&id, "document")?;
        let page = usize::try_from(page).unwrap_or(0);
        let dp = cairn_of(ctx)?
            .document_text(p, id, page)
            .await
            .map_err(api)?;
        Ok(DocumentPage {
            document: dp.document.into(),
            version: dp.version,
            page: i32::try_from(dp.page).unwrap_or(i32::MAX),
            page_count: i32::try_from(dp.page_count).unwrap_or(i32::MAX),
            text: dp.text,
        })
    }

    /// A job's state; its result is delivered the first time it is read after success.
    async fn job(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<Option<GqlJob>> {
        let p = principal_of(ctx)?;
        let id = parse_id(&id, "job")?;
        let (job, result) = cairn_of(ctx)?.job_once(p, id).await.map_err(api)?;
        Ok(Some(GqlJob { job, result }))
    }
}

#[derive(Default)]
pub struct DocumentMutation;

#[Object]
impl DocumentMutation {
    /// Uploads a file (GraphQL multipart request). Sanitizes the name, streams it under the
    /// size cap, checks the corpus, stores it content-addressed, and returns the ingest job.
    /// With `documentId`, the file becomes that document's next version.
    async fn upload_document(
        &self,
        ctx: &Context<'_>,
        corpus_id: ID,
        file: Upload,
        visibility: Option<GqlVisibility>,
        document_id: Option<ID>,
    ) -> async_graphql::Result<GqlJob> {
        let p = principal_of(ctx)?;
        let corpus_id = parse_id(&corpus_id, "corpus")?;
        let document_id = document_id
            .as_ref()
            .map(|d| parse_id(d, "document"))
            .transpose()?;
        let value = file.value(ctx)?;
        let job = cairn_of(ctx)?
            .upload(
                p,
                UploadRequest {
                    corpus_id,
                    filename: value.filename.clone(),
                    visibility: visibility.map(Into::into),
                    document_id,
                    title: None,
                    source_url: None,
                },
                value.content,
            )
            .await
            .map_err(api)?;
        Ok(GqlJob { job, result: None })
    }

    /// Ingests text given inline (the web-page path), with its source URL.
    async fn ingest_text(
        &self,
        ctx: &Context<'_>,
        corpus_id: ID,
        title: String,
        text: String,
        source_url: Option<String>,
        visibility: Option<GqlVisibility>,
    ) -> async_graphql::Result<GqlJob> {
        let p = principal_of(ctx)?;
        let corpus_id = parse_id(&corpus_id, "corpus")?;
        let job = cairn_of(ctx)?
            .ingest_text(
                p,
                corpus_id,
                &title,
                text,
                source_url,
                visibility.map(Into::into),
            )
            .await
            .map_err(api)?;
        Ok(GqlJob { job, result: None })
    }

    async fn cancel_job(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<GqlJob> {
        let p = principal_of(ctx)?;
        let id = parse_id(&id, "job")?;
        let job = cairn_of(ctx)?.cancel_job(p, id).await.map_err(api)?;
        Ok(GqlJob { job, result: None })
    }

    /// Deletes a document (its owner or an admin): chunks, versions, and the blob once
    /// nothing references it.
    async fn delete_document(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<bool> {
        let p = principal_of(ctx)?;
        let id = parse_id(&id, "document")?;
        cairn_of(ctx)?.delete_document(p, id).await.map_err(api)
    }

    /// Moves documents (by id, or every readable one of `fromCorpusId`) into a corpus.
    async fn move_documents(
        &self,
        ctx: &Context<'_>,
        to_corpus_id: ID,
        document_ids: Option<Vec<ID>>,
        from_corpus_id: Option<ID>,
    ) -> async_graphql::Result<i64> {
        let p = principal_of(ctx)?;
        let to = parse_id(&to_corpus_id, "corpus")?;
        let doc_ids = document_ids
            .as_deref()
            .map(|d| ids(d, "document"))
            .transpose()?;
        let from = from_corpus_id
            .as_ref()
            .map(|f| parse_id(f, "corpus"))
            .transpose()?;
        if doc_ids.is_none() && from.is_none() {
            return Err(api(crate::domain::InvalidInput(
                "give documentIds or fromCorpusId".into(),
            )
            .into()));
        }
        let n = cairn_of(ctx)?
            .move_documents(p, to, doc_ids.as_deref(), from)
            .await
            .map_err(api)?;
        Ok(i64::try_from(n).unwrap_or(i64::MAX))
    }

    async fn set_visibility(
        &self,
        ctx: &Context<'_>,
        document_id: ID,
        visibility: GqlVisibility,
    ) -> async_graphql::Result<GqlDocument> {
        let p = principal_of(ctx)?;
        let id = parse_id(&document_id, "document")?;
        Ok(cairn_of(ctx)?
            .set_visibility(p, id, visibility.into())
            .await
            .map_err(api)?
            .into())
    }
}

#[derive(Default)]
pub struct JobSubscription;

#[async_graphql::Subscription]
impl JobSubscription {
    /// One job's progress: its current state first, then every stage in order until it
    /// ends (succeeded, failed or cancelled).
    async fn job_progress(
        &self,
        ctx: &Context<'_>,
        id: ID,
    ) -> async_graphql::Result<impl Stream<Item = GqlJobEvent>> {
        let p = principal_of(ctx)?;
        let id = parse_id(&id, "job")?;
        let events = cairn_of(ctx)?.job_progress(p, id).await.map_err(api)?;
        Ok(events.map(GqlJobEvent::from))
    }

    /// Progress of every job the caller may see (their own; the team's for admins),
    /// optionally of one corpus.
    async fn jobs(
        &self,
        ctx: &Context<'_>,
        corpus_id: Option<ID>,
    ) -> async_graphql::Result<impl Stream<Item = GqlJobEvent>> {
        let p = principal_of(ctx)?;
        let corpus = corpus_id
            .as_ref()
            .map(|c| parse_id(c, "corpus"))
            .transpose()?;
        Ok(cairn_of(ctx)?.job_events(p, corpus).map(GqlJobEvent::from))
    }
}

/// `Corpus.documents`: the readable documents of a corpus, oldest first.
pub async fn corpus_documents(
    ctx: &Context<'_>,
    corpus_id: i64,
    first: Option<i32>,
    after: Option<String>,
) -> async_graphql::Result<Connection<String, GqlDocument, EmptyFields, EmptyFields>> {
    let limit = first.unwrap_or(50).clamp(0, 200) as usize;
    let after = parse_cursor(after)?;
    let key = CorpusPage {
        corpus_id,
        after,
        limit: limit as u64 + 1,
    };
    let rows = load(&loaders_of(ctx)?.corpus_documents, key)
        .await?
        .unwrap_or_default();
    Ok(page(
        rows,
        limit,
        after.is_some(),
        |d| d.id,
        GqlDocument::from,
    ))
}
