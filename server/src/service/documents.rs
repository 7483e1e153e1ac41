//! Document use cases: upload and ingestText (the synchronous safety steps, then a job),
//! jobs, reading, paging text, moving, visibility, deleting.

use std::collections::HashMap;
use std::io::Read;

use futures_util::stream::BoxStream;
use futures_util::Stream;
use tokio_stream::wrappers::BroadcastStream;
use tokio_stream::StreamExt;

use entity::prelude::{ContentBlob, Corpus, Document, DocumentVersion, Job, JobState};
use serde_json::Value as Json;

use super::{Cairn, ServiceError, ServiceResult};
use crate::auth;
use crate::auth::{AuthError, Principal};
use crate::domain::{self, Capability, InvalidInput, Visibility};
use crate::events::{Event, EventKind, JobEvent};
use crate::ingest::blobs::{sanitize_filename, BlobError};
use crate::jobs::snapshot;
use crate::jobs::{IngestPayload, JobKind, JobResult};

/// How often a subscription reads the stored jobs where the event bus does not cross
/// processes (SQLite).
pub const JOB_POLL: std::time::Duration = std::time::Duration::from_millis(500);
/// The most changed jobs one poll reads.
const JOB_POLL_PAGE: u64 = 500;

/// Ends a stream right after its first terminal event (without waiting for another).
fn until_terminal(
    events: impl Stream<Item = JobEvent> + Send + Unpin + 'static,
) -> impl Stream<Item = JobEvent> + Send {
    futures_util::stream::unfold((events, false), |(mut events, ended)| async move {
        if ended {
            return None;
        }
        let e = events.next().await?;
        let terminal = e.is_terminal();
        Some((e, (events, terminal)))
    })
}

/// What a job's error says to an admin who may not read the private upload it concerns.
const REDACTED_ERROR: &str = "failed (the details concern a private document)";

/// `documentText` pages hold at most this many characters of text (seed 004: 25,000).
pub const DOC_PAGE_CHARS: usize = 25_000;

/// Who writes: a team's principal (through a token) or the instance operator (the CLI).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Writer {
    Team,
    Operator,
}

/// An upload's metadata (the bytes come separately, as a reader).
pub struct UploadRequest {
    pub corpus_id: i64,
    pub filename: String,
    pub visibility: Option<Visibility>,
    pub document_id: Option<i64>,
    pub title: Option<String>,
    pub source_url: Option<String>,
}

/// One page of a document's text.
pub struct DocumentPage {
    pub document: Document,
    pub version: i32,
    pub page: usize,
    pub page_count: usize,
    pub text: String,
}

impl Cairn {
    /// The upload path (seed 004 steps 1–4), then a queued job. Into one of the caller's
    /// team's corpora only: a system corpus answers FORBIDDEN (see [`Cairn::operator_upload`]).
    pub async fn upload(
        &self,
        p: &Principal,
        req: UploadRequest,
        content: impl Read + Send + 'static,
    ) -> ServiceResult<Job> {
        self.upload_into(p, req, content, Writer::Team).await
    }

    /// The instance operator's upload (the `cairn` command line, never a token): the same
    /// path, and it may write into a system corpus, which every team reads.
    pub async fn operator_upload(
        &self,
        p: &Principal,
        req: UploadRequest,
        content: impl Read + Send + 'static,
    ) -> ServiceResult<Job> {
        self.upload_into(p, req, content, Writer::Operator).await
    }

    /// A corpus `p` may write into: the team's own (NOT_FOUND for another team's, FORBIDDEN
    /// for a system corpus).
    async fn writable_corpus(&self, p: &Principal, corpus_id: i64) -> ServiceResult<Corpus> {
        let corpus = self
            .store
            .visible_corpus(p.team_id, corpus_id)
            .await?
            .ok_or(ServiceError::NotFound("corpus"))?;
        if corpus.team_id != Some(p.team_id) {
            return Err(AuthError::SystemCorpus.into());
        }
        Ok(corpus)
    }

    async fn upload_into(
        &self,
        p: &Principal,
        req: UploadRequest,
        content: impl Read + Send + 'static,
        writer: Writer,
    ) -> ServiceResult<Job> {
        p.require(Capability::DocumentUpload)?;
        let filename = sanitize_filename(&req.filename);
        let corpus = match writer {
            Writer::Team => self.writable_corpus(p, req.corpus_id).await?,
            Writer::Operator => self
                .store
                .visible_corpus(p.team_id, req.corpus_id)
                .await?
                .ok_or(ServiceError::NotFound("corpus"))?,
        };
        if let Some(doc_id) = req.document_id {
            // A new version: the caller must own (or administer) a document of this corpus.
            self.store
                .readable_document(p, doc_id)
                .await?
                .filter(|d| auth::may_replace(p, d.team_id, d.owner_id) && d.corpus_id == corpus.id)
                .ok_or(ServiceError::NotFound("document"))?;
        }
        let key = self.content_key(p.team_id).await?;
        let blobs = self.blobs.clone();
        let limit = self.settings.max_upload_bytes;
        let stored = tokio::task::spawn_blocking(move || blobs.write(content, limit, key))
            .await
            .map_err(|e| ServiceError::Internal(e.to_string()))?
            .map_err(|e| match e {
                BlobError::TooLarge { .. } => ServiceError::TooLarge(e.to_string()),
                BlobError::Io(io) => ServiceError::Internal(io.to_string()),
            })?;
        let title = match req.title {
            Some(t) => domain::clean_name(&t, "title")?,
            None => filename
                .rsplit_once('.')
                .map(|(stem, _)| stem)
                .filter(|s| !s.is_empty())
                .unwrap_or(&filename)
                .to_owned(),
        };
        let payload = IngestPayload {
            content_hash: stored.content_hash,
            storage_uri: stored.storage_uri,
            size: stored.size,
            filename,
            title,
            corpus_id: corpus.id,
            owner_id: p.user_id,
            visibility: req.visibility.unwrap_or(Visibility::Team),
            document_id: req.document_id,
            source_url: req.source_url,
        };
        let new_job = JobKind::Ingest(payload)
            .new_job(p.team_id, p.user_id)
            .map_err(|e| ServiceError::Internal(e.to_string()))?;
        Ok(self.queue.submit(&self.store, &self.bus, new_job).await?)
    }

    /// The web-page path: text given inline, stored as a Markdown blob, same job.
    pub async fn ingest_text(
        &self,
        p: &Principal,
        corpus_id: i64,
        title: &str,
        text: String,
        source_url: Option<String>,
        visibility: Option<Visibility>,
    ) -> ServiceResult<Job> {
        let title = domain::clean_name(title, "title")?;
        if let Some(u) = &source_url {
            if !(u.starts_with("http://") || u.starts_with("https://")) || u.len() > 2000 {
                return Err(InvalidInput("sourceUrl must be an http(s) URL".into()).into());
            }
        }
        let filename = format!("{}.md", sanitize_filename(&title));
        self.upload(
            p,
            UploadRequest {
                corpus_id,
                filename,
                visibility,
                document_id: None,
                title: Some(title),
                source_url,
            },
            std::io::Cursor::new(text.into_bytes()),
        )
        .await
    }

    /// A job the caller may see: their own, or any of the team's for admins; what it says
    /// about someone else's document the caller cannot read (a private upload; filename,
    /// title, result, error) is removed.
    pub async fn visible_job(&self, p: &Principal, id: i64) -> ServiceResult<Job> {
        let mut job = self
            .store
            .team_job(p.team_id, id)
            .await?
            .filter(|j| auth::can_see_job(p, j.created_by))
            .ok_or(ServiceError::NotFound("job"))?;
        // The readable rule for the job's document as it is now (it may have turned private
        // or been deleted since: then nobody, its uploader included, reads its filename any
        // more); before the document exists, the visibility the upload asked for.
        let kind = JobKind::of(&job).ok();
        let document = JobResult::of(&job.kind, job.result.as_ref())
            .and_then(|r| r.document_id())
            .or_else(|| kind.as_ref().and_then(JobKind::document_id));
        // A row that does not parse shows nothing to others.
        let private = kind.as_ref().is_none_or(JobKind::is_private);
        let details = match document {
            Some(d) => self.store.readable_document(p, d).await?.is_some(),
            None => auth::can_see_job_details(p, job.created_by, private),
        };
        if !details {
            if let Some(o) = job.payload.as_object_mut() {
                for k in [
                    "filename",
                    "title",
                    "source_url",
                    "storage_uri",
                    "content_hash",
                ] {
                    o.remove(k);
                }
            }
            job.result = None;
            job.error = job.error.as_ref().map(|_| REDACTED_ERROR.to_owned());
        }
        Ok(job)
    }

    /// One job's events for `p`: its stored state first, then every newer stage until the
    /// terminal event, then the end. Live events come from the bus; where the bus does not
    /// cross processes (SQLite), the stored state is also read every [`JOB_POLL`], so a job
    /// that another process (`cairn ingest`, a second server) runs is followed too.
    pub async fn job_progress(
        &self,
        p: &Principal,
        id: i64,
    ) -> ServiceResult<BoxStream<'static, JobEvent>> {
        // Subscribe before reading the state, so nothing falls between the two.
        let rx = self.bus.subscribe();
        let job = self.visible_job(p, id).await?;
        let first = snapshot(&job);
        let mut last = first.seq;
        let newer = self.job_stream(p, rx, Some(id)).filter(move |e| {
            let pass = e.job_id == id && (e.seq > last || e.is_terminal());
            if pass {
                last = last.max(e.seq);
            }
            pass
        });
        let events = tokio_stream::once(first).chain(newer);
        Ok(Box::pin(until_terminal(Box::pin(events))))
    }

    /// Every job event `p` may follow from now on (own jobs; the team's for admins),
    /// optionally of one corpus; each stage once, however it arrived (bus or poll).
    pub fn job_events(&self, p: &Principal, corpus: Option<i64>) -> BoxStream<'static, JobEvent> {
        let rx = self.bus.subscribe();
        let mut seen: HashMap<i64, i64> = HashMap::new();
        Box::pin(self.job_stream(p, rx, None).filter(move |e| {
            if corpus.is_some() && e.corpus_id != corpus {
                return false;
            }
            let last = seen.entry(e.job_id).or_insert(i64::MIN);
            if e.seq > *last {
                *last = e.seq;
                true
            } else {
                false
            }
        }))
    }

    /// Live events (the bus) merged, on SQLite, with the stored state polled: of one job, or
    /// of every job of the team changed since the stream began. Each event as `p` may see it.
    fn job_stream(
        &self,
        p: &Principal,
        rx: tokio::sync::broadcast::Receiver<Event>,
        job: Option<i64>,
    ) -> BoxStream<'static, JobEvent> {
        let cairn = self.clone();
        let who = p.clone();
        let live = BroadcastStream::new(rx).filter_map(move |ev| match ev {
            Ok(ev) => cairn.job_event_for(&who, &ev),
            Err(_) => None,
        });
        if self.store.supports_notify() {
            return Box::pin(live);
        }
        let cairn = self.clone();
        let who = p.clone();
        let since = chrono::Utc::now() - chrono::Duration::seconds(1);
        let polled = futures_util::stream::unfold(since, move |since| {
            let cairn = cairn.clone();
            let who = who.clone();
            async move {
                tokio::time::sleep(JOB_POLL).await;
                let now = chrono::Utc::now();
                let mut next = now - chrono::Duration::seconds(1);
                let jobs = match job {
                    Some(id) => cairn
                        .store
                        .team_job(who.team_id, id)
                        .await
                        .map(|j| j.into_iter().collect::<Vec<_>>()),
                    None => {
                        let page = cairn
                            .store
                            .team_jobs_changed_since(who.team_id, since, JOB_POLL_PAGE)
                            .await;
                        // A full page: the next poll goes on from its last change rather
                        // than skipping what did not fit.
                        if let Ok(jobs) = &page {
                            if jobs.len() as u64 == JOB_POLL_PAGE {
                                if let Some(last) = jobs.last() {
                                    next = last.updated_at;
                                }
                            }
                        }
                        page
                    }
                };
                let events: Vec<JobEvent> = match jobs {
                    Ok(jobs) => jobs
                        .iter()
                        .filter_map(|j| {
                            cairn.job_event_for(
                                &who,
                                &Event {
                                    team_id: j.team_id,
                                    kind: EventKind::Job(snapshot(j)),
                                },
                            )
                        })
                        .collect(),
                    Err(e) => {
                        tracing::warn!(error = %e, "job poll failed; retrying");
                        Vec::new()
                    }
                };
                // A little overlap (`next` is a second back): a change committed with an
                // older clock is not missed.
                Some((events, next))
            }
        });
        let polled =
            futures_util::StreamExt::flat_map(Box::pin(polled), futures_util::stream::iter);
        Box::pin(live.merge(polled))
    }

    /// A job event as `p` may receive it: `None` for a job `p` may not follow; a private
    /// upload's result and error removed for anyone but its creator (the subscriptions'
    /// single rule, the same as [`Cairn::visible_job`]).
    pub fn job_event_for(&self, p: &Principal, ev: &Event) -> Option<JobEvent> {
        let EventKind::Job(j) = &ev.kind else {
            return None;
        };
        if ev.team_id != p.team_id || !auth::can_see_job(p, j.created_by) {
            return None;
        }
        let mut j = j.clone();
        if !auth::can_see_job_details(p, j.created_by, j.private) {
            j.result = None;
            j.error = j.error.as_ref().map(|_| REDACTED_ERROR.to_owned());
        }
        Some(j)
    }

    /// `job(id)`: the state, plus the result the first time it is asked for after success
    /// (seed 004: delivered exactly once, then state only).
    pub async fn job_once(&self, p: &Principal, id: i64) -> ServiceResult<(Job, Option<Json>)> {
        let job = self.visible_job(p, id).await?;
        // A redacted job (someone else's private upload) never consumes the one delivery.
        let result = if job.state == JobState::Succeeded
            && job.result.is_some()
            && self.store.take_job_result(id).await?
        {
            job.result.clone()
        } else {
            None
        };
        Ok((job, result))
    }

    pub async fn cancel_job(&self, p: &Principal, id: i64) -> ServiceResult<Job> {
        self.visible_job(p, id).await?;
        let job = self
            .store
            .cancel_job(p.team_id, id)
            .await?
            .ok_or(ServiceError::NotFound("job"))?;
        self.bus.publish(Event {
            team_id: p.team_id,
            kind: EventKind::Job(snapshot(&job)),
        });
        Ok(job)
    }

    pub async fn document(&self, p: &Principal, id: i64) -> ServiceResult<Document> {
        p.require(Capability::CorpusRead)?;
        self.store
            .readable_document(p, id)
            .await?
            .ok_or(ServiceError::NotFound("document"))
    }

    pub async fn documents_by_ids(
        &self,
        p: &Principal,
        ids: &[i64],
    ) -> ServiceResult<Vec<Document>> {
        Ok(self.store.readable_documents(p, ids).await?)
    }

    /// The readable documents of several corpora (dataloader batch for `Corpus.documents`):
    /// for each corpus, oldest first, its first `limit` with an id above `after`.
    pub async fn corpora_documents(
        &self,
        p: &Principal,
        corpus_ids: &[i64],
        after: Option<i64>,
        limit: u64,
    ) -> ServiceResult<Vec<Document>> {
        p.require(Capability::CorpusRead)?;
        Ok(self
            .store
            .corpora_documents(p, corpus_ids, after, limit)
            .await?)
    }

    /// Versions of documents the caller can read (ids not readable yield nothing).
    pub async fn versions_of(
        &self,
        p: &Principal,
        ids: &[i64],
    ) -> ServiceResult<Vec<(DocumentVersion, Option<ContentBlob>)>> {
        let readable: Vec<i64> = self.store.readable_document_ids(p, ids).await?;
        Ok(self.store.versions_of(&readable).await?)
    }

    /// The first `first` current chunks of each readable document, in order (dataloader
    /// batch for `Document.chunks`; the bound is applied in SQL).
    pub async fn current_chunks_first(
        &self,
        p: &Principal,
        ids: &[i64],
        first: u32,
    ) -> ServiceResult<Vec<entity::prelude::Chunk>> {
        Ok(self.store.current_chunks_first(p, ids, first).await?)
    }

    /// Page `page` (1-based) of a document's current text, 25,000 characters a page; a page
    /// that starts inside a section opens with `## section (continued)`.
    pub async fn document_text(
        &self,
        p: &Principal,
        id: i64,
        page: usize,
    ) -> ServiceResult<DocumentPage> {
        let document = self.document(p, id).await?;
        let chunks = self.store.chunks_of(id, document.current_version).await?;
        let pieces: Vec<(Option<String>, String)> = cairn_extract::chunk::dedupe_overlap(
            chunks.into_iter().map(|c| (c.section, c.content)).collect(),
        );
        let pages = paginate(&pieces, DOC_PAGE_CHARS);
        let page_count = pages.len().max(1);
        if page == 0 || page > page_count {
            return Err(InvalidInput(format!("page must be between 1 and {page_count}")).into());
        }
        let text = pages.into_iter().nth(page - 1).unwrap_or_default();
        Ok(DocumentPage {
            version: document.current_version,
            document,
            page,
            page_count,
            text,
        })
    }

    pub async fn delete_document(&self, p: &Principal, id: i64) -> ServiceResult<bool> {
        let doc = self.changeable_document(p, id).await?;
        let orphans = self.store.delete_document(doc.id).await?;
        for uri in &orphans.storage_uris {
            self.blobs.remove(uri);
        }
        self.store
            .audit(
                Some(p.team_id),
                Some(p.user_id),
                "document.delete",
                Some(&id.to_string()),
            )
            .await?;
        Ok(true)
    }

    pub async fn move_documents(
        &self,
        p: &Principal,
        to: i64,
        ids: Option<&[i64]>,
        from: Option<i64>,
    ) -> ServiceResult<u64> {
        p.require(Capability::DocumentUpload)?;
        self.writable_corpus(p, to).await?;
        Ok(self.store.move_documents(p, to, ids, from).await?)
    }

    pub async fn set_visibility(
        &self,
        p: &Principal,
        id: i64,
        v: Visibility,
    ) -> ServiceResult<Document> {
        let doc = self.changeable_document(p, id).await?;
        self.store
            .set_visibility(doc.id, v)
            .await?
            .ok_or(ServiceError::NotFound("document"))
    }

    /// A document `p` may change (delete, re-classify): readable, its own or any of the team's
    /// for admins (`auth::may_replace`), in a corpus a token may write. NOT_FOUND otherwise,
    /// as for a missing one; FORBIDDEN in a system corpus.
    async fn changeable_document(&self, p: &Principal, id: i64) -> ServiceResult<Document> {
        p.require(Capability::DocumentUpload)?;
        let doc = self
            .store
            .readable_document(p, id)
            .await?
            .filter(|d| auth::may_replace(p, d.team_id, d.owner_id))
            .ok_or(ServiceError::NotFound("document"))?;
        self.writable_corpus(p, doc.corpus_id).await?;
        Ok(doc)
    }
}

/// Splits the document into pages of at most `size` characters (a single piece larger than
/// a page is cut at char boundaries).
fn paginate(pieces: &[(Option<String>, String)], size: usize) -> Vec<String> {
    let mut pages: Vec<String> = Vec::new();
    let mut cur = String::new();
    let mut cur_chars = 0usize;
    for (section, content) in pieces {
        let mut rest: &str = content;
        while !rest.is_empty() {
            if cur_chars >= size {
                pages.push(std::mem::take(&mut cur));
                cur_chars = 0;
            }
            if cur_chars == 0 && !pages.is_empty() {
                if let Some(s) = section {
                    if !rest.trim_start().starts_with('#') {
                        let header = format!("## {s} (continued)\n\n");
                        cur_chars += header.chars().count();
                        cur.push_str(&header);
                    }
                }
            } else if cur_chars > 0 {
                cur.push_str("\n\n");
                cur_chars += 2;
            }
            let room = size.saturating_sub(cur_chars).max(1);
            let take: usize = match rest.char_indices().nth(room) {
                Some((limit, _)) => split_point(&rest[..limit], room),
                None => rest.len(),
            };
            cur.push_str(&rest[..take]);
            cur_chars += rest[..take].chars().count();
            rest = &rest[take..];
            if !rest.is_empty() {
                // The piece runs on: this page is done (it may end before the limit, at a
                // boundary).
                pages.push(std::mem::take(&mut cur));
                cur_chars = 0;
            }
        }
    }
    if !cur.is_empty() || pages.is_empty() {
        pages.push(cur);
    }
    pages
}

/// Where to cut `head` (the `room` characters that fit on the page) when a piece runs past the
/// page: after its last paragraph break, else its last line break, else its last space, when
/// that keeps at least half of the room; else at the limit. A page never ends mid-word when
/// a word boundary is near.
fn split_point(head: &str, room: usize) -> usize {
    let half = room / 2;
    for sep in ["\n\n", "\n", " "] {
        if let Some(i) = head.rfind(sep) {
            let end = i + sep.len();
            if head[..end].chars().count() >= half {
                return end;
            }
        }
    }
    head.len()
}

/// The uploaded file's name of a job the caller may see, when it has one: read from the typed
/// payload (a job [`Cairn::visible_job`] redacted has none).
pub fn job_filename(job: &Job) -> Option<String> {
    JobKind::of(job)
        .ok()
        .and_then(|k| k.filename().map(str::to_owned))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_bounded_and_continued() {
        let body = "x".repeat(30_000);
        let pieces = vec![(Some("Big".to_owned()), body)];
        let pages = paginate(&pieces, DOC_PAGE_CHARS);
        assert_eq!(pages.len(), 2);
        assert!(pages
            .iter()
            .all(|p| p.chars().count() <= DOC_PAGE_CHARS + 40));
        assert!(
            pages[1].starts_with("## Big (continued)\n\n"),
            "{}",
            &pages[1][..30]
        );
        assert!(!pages[0].starts_with("##"));
        assert_eq!(paginate(&[], 10), vec![String::new()]);
    }

    #[test]
    fn pages_end_at_a_paragraph_or_word_boundary() {
        let body = (0..400)
            .map(|i| format!("Paragraph {i} says a few words about the harbour."))
            .collect::<Vec<_>>()
            .join("\n\n");
        let pages = paginate(&[(Some("Part".to_owned()), body.clone())], 1_000);
        assert!(pages.len() > 1);
        for p in &pages[..pages.len() - 1] {
            assert!(p.ends_with("harbour.\n\n"), "{:?}", &p[p.len() - 40..]);
            assert!(p.chars().count() <= 1_000);
        }
        // Nothing lost: the pages, less their continuation headers, are the text.
        let joined: String = pages
            .iter()
            .map(|p| p.trim_start_matches("## Part (continued)\n\n"))
            .collect();
        assert_eq!(joined, body);
        // One long word: cut at the limit.
        let pages = paginate(&[(None, "x".repeat(25))], 10);
        assert_eq!(pages, vec!["x".repeat(10), "x".repeat(10), "x".repeat(5)]);
    }
}
