//! Documents, versions, chunks and content blobs.
//!
//! Storing an ingested document is one transaction: the blob row (deduplicated on the content
//! hash), the document row, its version and every chunk with its embedding and lexical row.
//! Search therefore never sees a half-ingested document.

use chrono::Utc;
use entity::prelude::*;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseBackend, DatabaseTransaction,
    EntityTrait, FromQueryResult, QueryFilter, QueryOrder, Set, TransactionTrait,
};

use super::readable::Readable;
use super::sql::Sql;
use super::vector::{f32_blob, vector_literal};
use super::{ByKey, Store, StoreError, StoreResult};
use crate::auth::Principal;
use crate::domain::Visibility;

/// One chunk ready to store.
pub struct ChunkRow {
    pub index: i32,
    pub content: String,
    pub section: Option<String>,
    pub page: Option<i32>,
    pub embedding: Vec<f32>,
}

/// The blob behind a version.
pub struct BlobRef {
    pub content_hash: String,
    pub mime_type: String,
    pub size: i64,
    pub storage_uri: String,
}

/// What the ingest job stores.
pub enum Target {
    /// A new document.
    New {
        team_id: i64,
        corpus_id: i64,
        owner_id: i64,
        visibility: Visibility,
        title: String,
        source_url: Option<String>,
    },
    /// A new version of an existing document; its chunks replace the old version's.
    NewVersion { document_id: i64 },
    /// The current version again (a previous ingest found no text).
    ReExtract { document_id: i64 },
}

pub struct StoreIngest {
    pub target: Target,
    pub blob: BlobRef,
    pub filename: Option<String>,
    pub extracted_chars: i64,
    pub chunks: Vec<ChunkRow>,
}

/// A readable document and the hash of its current version's blob.
pub struct Duplicate {
    pub document: Document,
}

/// Files no row references any more after a delete; the caller unlinks them after commit.
pub struct Orphans {
    pub storage_uris: Vec<String>,
}

/// The fields needed to record a document row directly, without an upload (tests; ingestion
/// fills the rest later).
#[cfg(any(test, feature = "testing"))]
#[derive(Clone, Debug)]
pub struct NewDocument {
    pub team_id: i64,
    pub corpus_id: i64,
    pub owner_id: i64,
    pub visibility: Visibility,
    pub title: String,
    pub mime_type: String,
}

/// A row naming one document by id (readable ids; documents about to move).
#[derive(Debug, FromQueryResult)]
struct DocumentId {
    id: i64,
}

const CHUNKS_PER_INSERT: usize = 64;

impl Store {
    /// Records a document row (no versions or chunks yet): a test's shortcut past the upload
    /// path.
    #[cfg(any(test, feature = "testing"))]
    pub async fn insert_document(&self, d: &NewDocument) -> StoreResult<Document> {
        let now = Utc::now();
        let row = DocumentActive {
            team_id: Set(d.team_id),
            corpus_id: Set(d.corpus_id),
            owner_id: Set(d.owner_id),
            visibility: Set(d.visibility.as_str().to_owned()),
            title: Set(d.title.clone()),
            mime_type: Set(d.mime_type.clone()),
            current_version: Set(1),
            chunk_count: Set(0),
            created_at: Set(now),
            updated_at: Set(now),
            ..Default::default()
        };
        Ok(row.insert(self.connection()).await?)
    }

    /// Of `ids`, those `p` may read, in ascending order. One query.
    pub async fn readable_document_ids(&self, p: &Principal, ids: &[i64]) -> StoreResult<Vec<i64>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = Sql::new(self.backend());
        q.push("SELECT d.id AS id FROM documents d WHERE d.id IN ");
        q.push_list(ids.iter().copied());
        q.push(" AND ");
        Readable::new(p).push_documents(&mut q, "d");
        q.push(" ORDER BY d.id");
        let rows = DocumentId::find_by_statement(q.build())
            .all(self.connection())
            .await?;
        Ok(rows.into_iter().map(|r| r.id).collect())
    }

    /// A document `p` may read, in `p`'s team, whose current version has this content.
    pub async fn readable_duplicate(
        &self,
        p: &Principal,
        content_hash: &str,
    ) -> StoreResult<Option<Duplicate>> {
        let mut q = Sql::new(self.backend());
        q.push("SELECT d.* FROM documents d JOIN document_versions v ON v.document_id = d.id AND v.version = d.current_version JOIN content_blobs b ON b.id = v.blob_id WHERE d.team_id = ")
            .bind(p.team_id);
        q.push(" AND b.content_hash = ")
            .bind(content_hash.to_owned());
        q.push(" AND ");
        Readable::new(p).push_documents(&mut q, "d");
        q.push(" ORDER BY d.chunk_count DESC, d.id LIMIT 1");
        let doc = Documents::find()
            .from_raw_sql(q.build())
            .one(self.connection())
            .await?;
        Ok(doc.map(|document| Duplicate { document }))
    }

    /// A document `p` may read.
    pub async fn readable_document(&self, p: &Principal, id: i64) -> StoreResult<Option<Document>> {
        Ok(self.readable_documents(p, &[id]).await?.pop())
    }

    /// Readable documents among `ids` (dataloader batch).
    pub async fn readable_documents(
        &self,
        p: &Principal,
        ids: &[i64],
    ) -> StoreResult<Vec<Document>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = Sql::new(self.backend());
        q.push("SELECT d.* FROM documents d WHERE d.id IN ")
            .push_list(ids.iter().copied());
        q.push(" AND ");
        Readable::new(p).push_documents(&mut q, "d");
        Ok(Documents::find()
            .from_raw_sql(q.build())
            .all(self.connection())
            .await?)
    }

    /// One page of the readable documents of a corpus, by id: the one-corpus reader the
    /// batched [`Store::corpora_documents`] is tested against (the server uses the batch).
    #[cfg(any(test, feature = "testing"))]
    pub async fn corpus_documents(
        &self,
        p: &Principal,
        corpus_id: i64,
        after: Option<i64>,
        limit: u64,
    ) -> StoreResult<Vec<Document>> {
        let mut q = Sql::new(self.backend());
        q.push("SELECT d.* FROM documents d WHERE d.corpus_id = ")
            .bind(corpus_id);
        if let Some(a) = after {
            q.push(" AND d.id > ").bind(a);
        }
        q.push(" AND ");
        Readable::new(p).push_documents(&mut q, "d");
        q.push(" ORDER BY d.id LIMIT ").count(limit);
        Ok(Documents::find()
            .from_raw_sql(q.build())
            .all(self.connection())
            .await?)
    }

    /// `Store::corpus_documents` (the one-corpus reader, under `testing`) for many corpora at once (a dataloader batch): of every
    /// corpus in `corpus_ids`, its first `limit` documents `p` may read with an id after
    /// `after`, by id; the whole list ordered by corpus, then id. One statement whatever the
    /// number of corpora: the readable, filtered rows are numbered per corpus
    /// (`ROW_NUMBER() OVER (PARTITION BY corpus_id ORDER BY id)`) inside a subquery, so the
    /// readable rule applies before the bound, and the outer query keeps the first `limit`.
    pub async fn corpora_documents(
        &self,
        p: &Principal,
        corpus_ids: &[i64],
        after: Option<i64>,
        limit: u64,
    ) -> StoreResult<Vec<Document>> {
        if corpus_ids.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let mut q = Sql::new(self.backend());
        q.push("SELECT r.* FROM (SELECT d.*, ROW_NUMBER() OVER (PARTITION BY d.corpus_id ORDER BY d.id) AS rn FROM documents d WHERE d.corpus_id IN ")
            .push_list(corpus_ids.iter().copied());
        if let Some(a) = after {
            q.push(" AND d.id > ").bind(a);
        }
        q.push(" AND ");
        Readable::new(p).push_documents(&mut q, "d");
        q.push(") r WHERE r.rn <= ")
            .bind(i64::try_from(limit).unwrap_or(i64::MAX));
        q.push(" ORDER BY r.corpus_id, r.id");
        Ok(Documents::find()
            .from_raw_sql(q.build())
            .all(self.connection())
            .await?)
    }

    /// Versions of the given documents (the caller has checked readability), with their
    /// blobs. Two queries whatever the number of documents.
    pub async fn versions_of(
        &self,
        document_ids: &[i64],
    ) -> StoreResult<Vec<(DocumentVersion, Option<ContentBlob>)>> {
        let versions = DocumentVersions::find()
            .filter(DocumentVersionColumn::DocumentId.is_in(document_ids.iter().copied()))
            .order_by_asc(DocumentVersionColumn::DocumentId)
            .order_by_asc(DocumentVersionColumn::Version)
            .all(self.connection())
            .await?;
        let blob_ids: Vec<i64> = versions.iter().map(|v| v.blob_id).collect();
        let blobs: std::collections::HashMap<i64, ContentBlob> = ContentBlobs::find()
            .filter(ContentBlobColumn::Id.is_in(blob_ids))
            .all(self.connection())
            .await?
            .into_iter()
            .map(|b| (b.id, b))
            .collect();
        Ok(versions
            .into_iter()
            .map(|v| {
                let b = blobs.get(&v.blob_id).cloned();
                (v, b)
            })
            .collect())
    }

    /// The current version's chunks of the readable documents among `ids`, in order. One
    /// query.
    pub async fn current_chunks(&self, p: &Principal, ids: &[i64]) -> StoreResult<Vec<Chunk>> {
        self.current_chunks_below(p, ids, None).await
    }

    /// [`Store::current_chunks`] bounded in SQL: at most the first `first` chunks (by
    /// `chunk_index`) of each readable document among `ids`, in order. One query.
    ///
    /// The bound is `chunk_index < first`, which the `(document_id, version, chunk_index)`
    /// unique index serves. It relies on this invariant: **a version's chunk indexes are
    /// dense, `0..n`**. The chunker numbers chunks by position (`cairn_extract::chunk`), the
    /// ingest job passes that number as [`ChunkRow::index`], and [`Store::store_ingest`]
    /// replaces a document's chunks as a whole; no statement deletes single chunks.
    pub async fn current_chunks_first(
        &self,
        p: &Principal,
        ids: &[i64],
        first: u32,
    ) -> StoreResult<Vec<Chunk>> {
        if first == 0 {
            return Ok(Vec::new());
        }
        self.current_chunks_below(p, ids, Some(first)).await
    }

    /// The current chunks of the readable documents among `ids`, in order, those with a
    /// `chunk_index` below `bound` when one is given.
    async fn current_chunks_below(
        &self,
        p: &Principal,
        ids: &[i64],
        bound: Option<u32>,
    ) -> StoreResult<Vec<Chunk>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = Sql::new(self.backend());
        q.push("SELECT c.id, c.team_id, c.document_id, c.version, c.corpus_id, c.chunk_index, c.content, c.section, c.page, c.metadata FROM chunks c JOIN documents d ON d.id = c.document_id AND c.version = d.current_version WHERE c.document_id IN ")
            .push_list(ids.iter().copied());
        if let Some(bound) = bound {
            q.push(" AND c.chunk_index < ").bind(i64::from(bound));
        }
        q.push(" AND ");
        Readable::new(p).push_documents(&mut q, "d");
        q.push(" ORDER BY c.document_id, c.chunk_index");
        Ok(Chunks::find()
            .from_raw_sql(q.build())
            .all(self.connection())
            .await?)
    }

    /// The chunks of one version, in order (the caller has checked readability).
    pub async fn chunks_of(&self, document_id: i64, version: i32) -> StoreResult<Vec<Chunk>> {
        Ok(Chunks::find()
            .filter(ChunkColumn::DocumentId.eq(document_id))
            .filter(ChunkColumn::Version.eq(version))
            .order_by_asc(ChunkColumn::ChunkIndex)
            .all(self.connection())
            .await?)
    }

    /// Stores an ingested document, its version and chunks in one transaction.
    pub async fn store_ingest(&self, s: StoreIngest) -> StoreResult<(Document, i32)> {
        // The lexical postings are computed before the transaction, off the async runtime.
        let texts: Vec<(i32, Option<String>, String)> = s
            .chunks
            .iter()
            .map(|c| (c.index, c.section.clone(), c.content.clone()))
            .collect();
        let lexical = tokio::task::spawn_blocking(move || {
            super::lexical::analyze_chunks(
                texts.iter().map(|(i, h, b)| (*i, h.as_deref(), b.as_str())),
            )
        })
        .await
        .map_err(|e| StoreError::Corrupt(format!("lexical analysis panicked: {e}")))?;
        let tx = self.connection().begin().await?;
        let blob_id = ensure_blob(&tx, &s.blob).await?;
        let now = Utc::now();
        let n = s.chunks.len() as i32;
        let (doc, version) = match s.target {
            Target::New {
                team_id,
                corpus_id,
                owner_id,
                visibility,
                title,
                source_url,
            } => {
                let doc = DocumentActive {
                    team_id: Set(team_id),
                    corpus_id: Set(corpus_id),
                    owner_id: Set(owner_id),
                    visibility: Set(visibility.as_str().to_owned()),
                    title: Set(title),
                    filename: Set(s.filename.clone()),
                    mime_type: Set(s.blob.mime_type.clone()),
                    source_url: Set(source_url),
                    current_version: Set(1),
                    chunk_count: Set(n),
                    created_at: Set(now),
                    updated_at: Set(now),
                    ..Default::default()
                }
                .insert(&tx)
                .await?;
                insert_version(&tx, doc.id, 1, blob_id, s.extracted_chars).await?;
                (doc, 1)
            }
            Target::NewVersion { document_id } => {
                let doc = Documents::find_by_id(document_id)
                    .unique(&tx)
                    .await?
                    .ok_or_else(|| {
                        StoreError::Corrupt(format!("document {document_id} vanished"))
                    })?;
                let version = doc.current_version + 1;
                insert_version(&tx, doc.id, version, blob_id, s.extracted_chars).await?;
                delete_chunks(&tx, doc.id).await?;
                // What the old version said leaves the graph with it (re-extraction is the
                // caller's: queued when automatic extraction is on).
                super::kg::forget_document(&tx, doc.team_id, doc.id).await?;
                let mut a: DocumentActive = doc.into();
                a.current_version = Set(version);
                a.chunk_count = Set(n);
                a.mime_type = Set(s.blob.mime_type.clone());
                if s.filename.is_some() {
                    a.filename = Set(s.filename.clone());
                }
                a.updated_at = Set(now);
                (a.update(&tx).await?, version)
            }
            Target::ReExtract { document_id } => {
                let doc = Documents::find_by_id(document_id)
                    .unique(&tx)
                    .await?
                    .ok_or_else(|| {
                        StoreError::Corrupt(format!("document {document_id} vanished"))
                    })?;
                let version = doc.current_version;
                delete_chunks(&tx, doc.id).await?;
                let mut q = Sql::new(self.backend());
                q.push("UPDATE document_versions SET extracted_chars = ")
                    .bind(s.extracted_chars);
                q.push(" WHERE document_id = ").bind(doc.id);
                q.push(" AND version = ").bind(version);
                tx.execute_raw(q.build()).await?;
                let mut a: DocumentActive = doc.into();
                a.chunk_count = Set(n);
                a.updated_at = Set(now);
                (a.update(&tx).await?, version)
            }
        };
        for batch in s.chunks.chunks(CHUNKS_PER_INSERT) {
            let mut q = Sql::new(self.backend());
            q.push("INSERT INTO chunks (team_id, document_id, version, corpus_id, chunk_index, content, section, page, metadata, embedding) VALUES ");
            for (i, c) in batch.iter().enumerate() {
                if i > 0 {
                    q.push(", ");
                }
                q.push("(")
                    .bind(doc.team_id)
                    .push(", ")
                    .bind(doc.id)
                    .push(", ")
                    .bind(version);
                q.push(", ").bind(doc.corpus_id).push(", ").bind(c.index);
                q.push(", ")
                    .bind(c.content.clone())
                    .push(", ")
                    .bind(c.section.clone());
                q.push(", ").bind(c.page).push(", ");
                match self.backend() {
                    DatabaseBackend::Postgres => {
                        q.push("'{}'::jsonb, CAST(")
                            .bind(vector_literal(&c.embedding))
                            .push(" AS vector)");
                    }
                    _ => {
                        q.push("'{}', ").bind(f32_blob(&c.embedding));
                    }
                }
                q.push(")");
            }
            tx.execute_raw(q.build()).await?;
        }
        super::lexical::index_document(&tx, doc.id, &lexical).await?;
        tx.commit().await?;
        self.sync_vector_index(&[doc.id]).await;
        Ok((doc, version))
    }

    /// Deletes a document: its chunks, versions and knowledge-graph mentions (pruning entities
    /// and relations left without one) in one transaction,
    /// then returns the blobs nothing references any more (rows already removed).
    pub async fn delete_document(&self, id: i64) -> StoreResult<Orphans> {
        let tx = self.connection().begin().await?;
        let blob_ids: Vec<i64> = DocumentVersions::find()
            .filter(DocumentVersionColumn::DocumentId.eq(id))
            .all(&tx)
            .await?
            .into_iter()
            .map(|v| v.blob_id)
            .collect();
        let team_id = Documents::find_by_id(id)
            .unique(&tx)
            .await?
            .map(|d| d.team_id);
        delete_chunks(&tx, id).await?;
        // The knowledge graph forgets the document in the same transaction: its mentions and
        // descriptions go (explicitly, not only by cascade), then what nothing supports.
        if let Some(team_id) = team_id {
            super::kg::forget_document(&tx, team_id, id).await?;
        }
        Documents::delete_by_id(id).exec(&tx).await?;
        let orphans = prune_blobs(&tx, &blob_ids).await?;
        tx.commit().await?;
        self.sync_vector_index(&[id]).await;
        Ok(orphans)
    }

    /// The blob row of this content, if any.
    pub async fn blob_by_hash(&self, content_hash: &str) -> StoreResult<Option<ContentBlob>> {
        Ok(ContentBlobs::find()
            .filter(ContentBlobColumn::ContentHash.eq(content_hash))
            .one(&self.db)
            .await?)
    }

    /// Heal-on-write: points the blob row of `content_hash` at `storage_uri` (a file the
    /// caller just wrote) when it names `missing_uri`, whose file is gone. Whether it changed.
    pub async fn repair_blob_uri(
        &self,
        content_hash: &str,
        missing_uri: &str,
        storage_uri: &str,
    ) -> StoreResult<bool> {
        let r = ContentBlobs::update_many()
            .col_expr(
                ContentBlobColumn::StorageUri,
                sea_orm::sea_query::Expr::value(storage_uri),
            )
            .filter(ContentBlobColumn::ContentHash.eq(content_hash))
            .filter(ContentBlobColumn::StorageUri.eq(missing_uri))
            .exec(&self.db)
            .await?;
        Ok(r.rows_affected > 0)
    }

    /// Every blob row, by id (tests).
    #[cfg(any(test, feature = "testing"))]
    pub async fn blob_rows(&self) -> StoreResult<Vec<ContentBlob>> {
        Ok(ContentBlobs::find()
            .order_by_asc(ContentBlobColumn::Id)
            .all(&self.db)
            .await?)
    }

    /// Points a blob row at another path (tests: a row written under an older layout whose
    /// file is gone).
    #[cfg(any(test, feature = "testing"))]
    pub async fn set_blob_uri(&self, content_hash: &str, storage_uri: &str) -> StoreResult<()> {
        ContentBlobs::update_many()
            .col_expr(
                ContentBlobColumn::StorageUri,
                sea_orm::sea_query::Expr::value(storage_uri),
            )
            .filter(ContentBlobColumn::ContentHash.eq(content_hash))
            .exec(&self.db)
            .await?;
        Ok(())
    }

    /// Whether a blob row exists for this content.
    pub async fn blob_row_exists(&self, content_hash: &str) -> StoreResult<bool> {
        Ok(ContentBlobs::find()
            .filter(ContentBlobColumn::ContentHash.eq(content_hash))
            .one(self.connection())
            .await?
            .is_some())
    }

    /// Moves documents of the team that `p` may change (readable, in one of the team's own
    /// corpora, owned by `p` unless `p` is an admin) into `to`; their chunks follow. Returns
    /// how many moved.
    pub async fn move_documents(
        &self,
        p: &Principal,
        to: i64,
        ids: Option<&[i64]>,
        from: Option<i64>,
    ) -> StoreResult<u64> {
        let tx = self.connection().begin().await?;
        let mut sel = Sql::new(self.backend());
        sel.push("SELECT d.id AS id FROM documents d WHERE d.team_id = ")
            .bind(p.team_id);
        // Only the team's own corpora are written through a team's token (never a system
        // corpus), and only documents the caller owns unless an admin (setVisibility's rule).
        sel.push(" AND d.corpus_id IN (SELECT c.id FROM corpora c WHERE c.team_id = ")
            .bind(p.team_id)
            .push(")");
        if !p.can(crate::domain::Capability::Admin) {
            sel.push(" AND d.owner_id = ").bind(p.user_id);
        }
        if let Some(ids) = ids {
            if ids.is_empty() {
                return Ok(0);
            }
            sel.push(" AND d.id IN ").push_list(ids.iter().copied());
        }
        if let Some(f) = from {
            sel.push(" AND d.corpus_id = ").bind(f);
        }
        sel.push(" AND d.corpus_id <> ").bind(to);
        sel.push(" AND ");
        Readable::new(p).push_documents(&mut sel, "d");
        let moving: Vec<i64> = DocumentId::find_by_statement(sel.build())
            .all(&tx)
            .await?
            .into_iter()
            .map(|r| r.id)
            .collect();
        if moving.is_empty() {
            return Ok(0);
        }
        let mut scopes = Vec::with_capacity(moving.len());
        for &id in &moving {
            if let Some(s) = super::lexical::scope_of(&tx, id).await? {
                scopes.push((id, s));
            }
        }
        for table in ["documents", "chunks"] {
            let mut q = Sql::new(self.backend());
            q.push("UPDATE ")
                .push(table)
                .push(" SET corpus_id = ")
                .bind(to);
            q.push(if table == "documents" {
                " WHERE id IN "
            } else {
                " WHERE document_id IN "
            });
            q.push_list(moving.iter().copied());
            tx.execute_raw(q.build()).await?;
        }
        for (id, from) in scopes {
            super::lexical::rescope_document(&tx, id, from).await?;
        }
        tx.commit().await?;
        self.sync_vector_index(&moving).await;
        Ok(moving.len() as u64)
    }

    pub async fn set_visibility(&self, id: i64, v: Visibility) -> StoreResult<Option<Document>> {
        let tx = self.connection().begin().await?;
        let Some(doc) = Documents::find_by_id(id).unique(&tx).await? else {
            return Ok(None);
        };
        let from = super::lexical::scope_of(&tx, id).await?;
        let mut a: DocumentActive = doc.into();
        a.visibility = Set(v.as_str().to_owned());
        a.updated_at = Set(Utc::now());
        let doc = a.update(&tx).await?;
        if let Some(from) = from {
            super::lexical::rescope_document(&tx, id, from).await?;
        }
        tx.commit().await?;
        self.sync_vector_index(&[id]).await;
        Ok(Some(doc))
    }
}

async fn ensure_blob(tx: &DatabaseTransaction, b: &BlobRef) -> StoreResult<i64> {
    let mut q = Sql::new(tx.get_database_backend());
    q.push("INSERT INTO content_blobs (content_hash, mime_type, size, storage_uri, created_at) VALUES (")
        .bind(b.content_hash.clone())
        .push(", ")
        .bind(b.mime_type.clone())
        .push(", ")
        .bind(b.size)
        .push(", ")
        .bind(b.storage_uri.clone())
        .push(", ")
        .bind(Utc::now())
        .push(") ON CONFLICT (content_hash) DO NOTHING");
    tx.execute_raw(q.build()).await?;
    let row = ContentBlobs::find()
        .filter(ContentBlobColumn::ContentHash.eq(b.content_hash.clone()))
        .one(tx)
        .await?
        .ok_or_else(|| StoreError::Corrupt("blob row missing after insert".into()))?;
    Ok(row.id)
}

async fn insert_version(
    tx: &DatabaseTransaction,
    document_id: i64,
    version: i32,
    blob_id: i64,
    extracted_chars: i64,
) -> StoreResult<()> {
    DocumentVersionActive {
        document_id: Set(document_id),
        version: Set(version),
        blob_id: Set(blob_id),
        extracted_chars: Set(extracted_chars),
        created_at: Set(Utc::now()),
        ..Default::default()
    }
    .insert(tx)
    .await?;
    Ok(())
}

/// Deletes a document's chunks and, first, their lexical rows.
async fn delete_chunks(tx: &DatabaseTransaction, document_id: i64) -> StoreResult<()> {
    super::lexical::forget_document(tx, document_id).await?;
    Chunks::delete_many()
        .filter(ChunkColumn::DocumentId.eq(document_id))
        .exec(tx)
        .await?;
    Ok(())
}

/// Deletes the rows of `blob_ids` that no version references; returns their files.
async fn prune_blobs(tx: &DatabaseTransaction, blob_ids: &[i64]) -> StoreResult<Orphans> {
    let mut storage_uris = Vec::new();
    for &blob_id in blob_ids {
        let used = DocumentVersions::find()
            .filter(DocumentVersionColumn::BlobId.eq(blob_id))
            .one(tx)
            .await?
            .is_some();
        if used {
            continue;
        }
        if let Some(b) = ContentBlobs::find_by_id(blob_id).unique(tx).await? {
            ContentBlobs::delete_by_id(blob_id).exec(tx).await?;
            // A queued or running job of the same content still needs the file (it writes
            // the row again when it stores); it cleans up itself if it fails.
            if !super::jobs::blob_pending(tx, &b.content_hash, None).await? {
                storage_uris.push(b.storage_uri.clone());
            }
        }
    }
    Ok(Orphans { storage_uris })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Role;
    use crate::store::EMBEDDING_DIM;

    fn ok<T, E: std::fmt::Display>(r: Result<T, E>) -> T {
        r.unwrap_or_else(|e| panic!("{e}"))
    }

    /// Document number `seq`, with `chunks` chunks, stored the way the ingest job stores one.
    async fn document(
        store: &Store,
        owner: &Principal,
        corpus_id: i64,
        visibility: Visibility,
        chunks: i32,
        seq: usize,
    ) -> Document {
        let (doc, _) = ok(store
            .store_ingest(StoreIngest {
                target: Target::New {
                    team_id: owner.team_id,
                    corpus_id,
                    owner_id: owner.user_id,
                    visibility,
                    title: format!("document {seq}"),
                    source_url: None,
                },
                blob: BlobRef {
                    content_hash: format!("{seq:064x}"),
                    mime_type: "text/plain".into(),
                    size: 1,
                    storage_uri: "test://blob".into(),
                },
                filename: None,
                extracted_chars: 0,
                chunks: (0..chunks)
                    .map(|k| ChunkRow {
                        index: k,
                        content: format!("chunk {k}"),
                        section: None,
                        page: None,
                        embedding: vec![1.0; EMBEDDING_DIM],
                    })
                    .collect(),
            })
            .await);
        doc
    }

    #[tokio::test]
    async fn batched_readers_are_one_bounded_statement() {
        let dir = ok(tempfile::tempdir());
        let store = ok(Store::connect(None, dir.path()).await);
        ok(store.migrate().await);
        let team = ok(store.create_team("t").await);
        let alice = ok(crate::store::principal_of(
            &ok(store.create_user(team.id, "alice", Role::Owner).await),
            0,
        ));
        let bob = ok(crate::store::principal_of(
            &ok(store.create_user(team.id, "bob", Role::Member).await),
            0,
        ));
        let mut corpora = Vec::new();
        for name in ["a", "b", "c"] {
            corpora.push(ok(store.create_corpus(Some(team.id), name, None).await).id);
        }
        // Per corpus: alice's team documents with 0..=4 chunks, then one private to her.
        let mut docs = Vec::new();
        for &c in &corpora {
            for n in 0..=4 {
                let seq = docs.len();
                docs.push(document(&store, &alice, c, Visibility::Team, n, seq).await);
            }
            let seq = docs.len();
            docs.push(document(&store, &alice, c, Visibility::Private, 3, seq).await);
        }
        let ids: Vec<i64> = docs.iter().map(|d| d.id).collect();

        // corpora_documents: the first `limit` readable documents of each corpus after `after`.
        let asked = [corpora[2], corpora[0], corpora[1]];
        let before = store.statement_count();
        let got = ok(store.corpora_documents(&bob, &asked, None, 2).await);
        assert_eq!(store.statement_count() - before, 1, "one statement");
        let want: Vec<i64> = corpora
            .iter()
            .flat_map(|&c| {
                docs.iter()
                    .filter(move |d| d.corpus_id == c && d.visibility == "team")
                    .take(2)
                    .map(|d| d.id)
            })
            .collect();
        assert_eq!(got.iter().map(|d| d.id).collect::<Vec<_>>(), want);
        // After an id: the window numbers only what is left, per corpus.
        let after = docs[3].id;
        let got = ok(store
            .corpora_documents(&alice, &asked, Some(after), 3)
            .await);
        let want: Vec<i64> = corpora
            .iter()
            .flat_map(|&c| {
                docs.iter()
                    .filter(move |d| d.corpus_id == c && d.id > after)
                    .take(3)
                    .map(|d| d.id)
            })
            .collect();
        assert_eq!(got.iter().map(|d| d.id).collect::<Vec<_>>(), want);
        // The private documents are alice's only (the readable rule applies before the bound).
        let all_bob = ok(store.corpora_documents(&bob, &asked, None, 100).await);
        assert_eq!(all_bob.len(), 15);
        assert!(all_bob.iter().all(|d| d.visibility == "team"));
        assert_eq!(
            ok(store.corpora_documents(&alice, &asked, None, 100).await).len(),
            18
        );

        // current_chunks_first: at most `first` chunks per document, in order.
        let before = store.statement_count();
        let got = ok(store.current_chunks_first(&bob, &ids, 2).await);
        assert_eq!(store.statement_count() - before, 1, "one statement");
        let mut want = Vec::new();
        for d in docs.iter().filter(|d| d.visibility == "team") {
            for k in 0..d.chunk_count.min(2) {
                want.push((d.id, k));
            }
        }
        let got: Vec<(i64, i32)> = got.iter().map(|c| (c.document_id, c.chunk_index)).collect();
        assert_eq!(got, want);
        let full = ok(store.current_chunks(&alice, &ids).await);
        assert_eq!(
            ok(store.current_chunks_first(&alice, &ids, 100).await),
            full
        );
        assert!(ok(store.current_chunks_first(&alice, &ids, 0).await).is_empty());
        assert!(ok(store.corpora_documents(&alice, &[], None, 5).await).is_empty());
    }
}
