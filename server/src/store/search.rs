//! The two retrieval channels on both backends, and the reads that turn ranked chunk ids back
//! into results. Visibility is decided inside each channel, before its LIMIT.
//!
//! | channel | PostgreSQL | SQLite |
//! |---|---|---|
//! | vector | pgvector HNSW (`<=>`, `vector_cosine_ops`), iterative scan, exact re-sort | [`VectorIndex`](super::vindex::VectorIndex) in memory |
//! | lexical | BM25 over Cairn's own postings, the same SQL on both backends: [`lexical`](crate::store::lexical) | same |

use std::collections::HashMap;
use std::sync::Arc;

use sea_orm::{
    ColIdx, ConnectionTrait, DatabaseBackend, FromQueryResult, QueryResult, Statement, TryGetError,
    TryGetable,
};

use super::readable::Readable;
use super::sql::Sql;
use super::vector::{extend_from_blob, vector_literal, EMBEDDING_DIM};
use super::vindex::{DocMeta, VectorIndex};
use super::{Store, StoreError, StoreResult};
use crate::auth::{DocumentAccess, Principal};
use crate::domain::Visibility;

/// Rows per page when the SQLite index is read from the database.
const INDEX_LOAD_PAGE: i64 = 4096;
/// Index-load pages read at once (see `Store::load_into`).
const INDEX_LOAD_CONCURRENCY: usize = 2;

/// A chunk from one channel with that channel's score (cosine, or lexical rank score).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChannelHit {
    pub chunk_id: i64,
    pub score: f32,
}

/// A readable chunk with what a search result shows about its document.
#[derive(Clone, Debug, PartialEq, FromQueryResult)]
pub struct ChunkView {
    pub chunk_id: i64,
    pub document_id: i64,
    pub corpus_id: i64,
    pub version: i32,
    pub chunk_index: i32,
    pub content: String,
    pub section: Option<String>,
    pub page: Option<i32>,
    pub title: String,
}

/// A corpus line of the knowledge summary.
#[derive(Clone, Debug, PartialEq, Eq, FromQueryResult)]
pub struct CorpusDocCount {
    pub corpus_id: i64,
    pub name: String,
    pub documents: i64,
}

/// A row of PostgreSQL's vector channel: a chunk and its cosine, and for the first `shown`
/// rows (see [`pg_vector_statement`]) what a search result shows about it.
#[derive(Debug, FromQueryResult)]
struct VectorRow {
    id: i64,
    score: Real,
    document_id: Option<i64>,
    corpus_id: Option<i64>,
    version: Option<i32>,
    chunk_index: Option<i32>,
    content: Option<String>,
    section: Option<String>,
    page: Option<i32>,
    title: Option<String>,
}

impl VectorRow {
    /// The chunk's view, when the statement brought it (one of the first `shown` rows).
    fn view(&mut self) -> Option<ChunkView> {
        Some(ChunkView {
            chunk_id: self.id,
            document_id: self.document_id?,
            corpus_id: self.corpus_id?,
            version: self.version?,
            chunk_index: self.chunk_index?,
            content: self.content.take()?,
            section: self.section.take(),
            page: self.page,
            title: self.title.take()?,
        })
    }
}

/// A REAL column, which comes back as f32 from PostgreSQL and as f64 from SQLite.
#[derive(Clone, Copy, Debug)]
struct Real(f32);

impl TryGetable for Real {
    fn try_get_by<I: ColIdx>(res: &QueryResult, index: I) -> Result<Self, TryGetError> {
        match f32::try_get_by(res, index) {
            Ok(v) => Ok(Real(v)),
            Err(_) => Ok(Real(f64::try_get_by(res, index)? as f32)),
        }
    }
}

/// The last change sequence number (`index_changes.seq`) of some range.
#[derive(Debug, FromQueryResult)]
struct ChangeSeq {
    seq: i64,
}

/// A document named by a row of `index_changes`.
#[derive(Debug, FromQueryResult)]
struct ChangedDocument {
    document_id: i64,
}

/// A current-version chunk's vector, as the SQLite index reads it.
#[derive(Debug, FromQueryResult)]
struct ChunkVector {
    document_id: i64,
    id: i64,
    embedding: Vec<u8>,
}

/// What the SQLite index holds about a document: its access facts and its chunk count.
#[derive(Debug, FromQueryResult)]
struct IndexedDocument {
    id: i64,
    team_id: i64,
    corpus_id: i64,
    owner_id: i64,
    visibility: String,
    current_version: i32,
    system: bool,
    chunk_count: i32,
}

/// The statement PostgreSQL's vector channel sends for `p`, without a corpus filter: the
/// `depth` readable chunks nearest to `vector`, the first `shown` with their text. The channel
/// builds its statement with the same function (`pg_vector_statement`), so this is exactly
/// what it runs; the benches time it directly. Binds: the vector literal, the readable
/// predicate's team and user.
#[cfg(any(test, feature = "testing"))]
pub fn pg_vector_channel_statement(
    p: &Principal,
    vector: &[f32],
    depth: u64,
    shown: u64,
) -> Statement {
    pg_vector_statement(p, None, vector, depth, shown)
}

/// The statement of [`Store::chunk_views`] (the search results' hydration): what the benches
/// time on each of PostgreSQL's two pools.
pub fn chunk_views_statement(backend: DatabaseBackend, p: &Principal, ids: &[i64]) -> Statement {
    let mut q = Sql::new(backend);
    q.push("SELECT c.id AS chunk_id, c.document_id AS document_id, c.corpus_id AS corpus_id, c.version AS version, c.chunk_index AS chunk_index, c.content AS content, c.section AS section, c.page AS page, d.title AS title FROM chunks c JOIN documents d ON d.id = c.document_id AND c.version = d.current_version WHERE c.id IN ")
        .push_list(ids.iter().copied());
    q.push(" AND ");
    Readable::new(p).push_documents(&mut q, "d");
    q.build()
}

/// PostgreSQL's vector channel (see [`Store::vector_channel_shown`]). The HNSW scan runs in
/// the inner query; iterative scanning (set per connection, see `Store::connect`) keeps it
/// going until `depth` rows pass the visibility filter. Iterative scans may return rows
/// slightly out of order, so the outer query re-sorts on the exact distance.
///
/// The first `shown` rows in that order come with their chunk and their document's title
/// (`shown` = 0: none), so a search that shows the channel's order as it is (VECTOR mode)
/// needs no second statement to read its results: one round trip fewer, and the text is
/// read in the same snapshot as the visibility decided in `hits`.
fn pg_vector_statement(
    p: &Principal,
    corpora: Option<&[i64]>,
    query: &[f32],
    depth: u64,
    shown: u64,
) -> Statement {
    let mut q = Sql::new(DatabaseBackend::Postgres);
    q.push("WITH hits AS MATERIALIZED (SELECT c.id, c.embedding <=> CAST(")
        .bind(vector_literal(query))
        .push(" AS vector) AS dist FROM chunks c JOIN documents d ON d.id = c.document_id AND c.version = d.current_version WHERE c.embedding IS NOT NULL");
    push_corpora(&mut q, corpora);
    q.push(" AND ");
    Readable::new(p).push_documents(&mut q, "d");
    q.push(" ORDER BY dist LIMIT ").count(depth);
    q.push("), shown AS MATERIALIZED (SELECT t.id, c.document_id, c.corpus_id, c.version, c.chunk_index, c.content, c.section, c.page, d.title FROM (SELECT id, dist FROM hits ORDER BY dist, id LIMIT ")
        .count(shown);
    q.push(") t JOIN chunks c ON c.id = t.id JOIN documents d ON d.id = c.document_id) SELECT h.id AS id, CAST(1 - h.dist AS REAL) AS score, s.document_id AS document_id, s.corpus_id AS corpus_id, s.version AS version, s.chunk_index AS chunk_index, s.content AS content, s.section AS section, s.page AS page, s.title AS title FROM hits h LEFT JOIN shown s ON s.id = h.id ORDER BY h.dist, h.id");
    q.build()
}

/// The SQLite index slot: loaded on first use, kept in step after each commit of this
/// process, brought up to date from `index_changes` before each search (commits of other
/// processes), emptied (to be read again) when an update fails. The `i64` is the last change
/// sequence number applied.
#[derive(Debug, Default)]
pub(crate) struct IndexSlot {
    state: tokio::sync::Mutex<Option<(Arc<VectorIndex>, i64)>>,
}

/// Change rows kept for processes that lag behind; one further behind reads the index afresh.
const KEEP_CHANGES: i64 = 100_000;
/// How often (in change sequence numbers) old change rows are pruned.
const PRUNE_EVERY: i64 = 4_096;

impl Store {
    // ---- vector channel --------------------------------------------------------------------

    /// The `depth` chunks nearest to `query` by cosine among those `p` may read (in `corpora`
    /// when given), best first.
    pub async fn vector_channel(
        &self,
        p: &Principal,
        corpora: Option<&[i64]>,
        query: &[f32],
        depth: usize,
    ) -> StoreResult<Vec<ChannelHit>> {
        Ok(self
            .vector_channel_shown(p, corpora, query, depth, 0)
            .await?
            .0)
    }

    /// [`Store::vector_channel`], and the views of its first `shown` hits (any order): on
    /// PostgreSQL in the channel's own statement, on SQLite (whose channel is the in-memory
    /// index) with [`Store::chunk_views`] (none when `shown` = 0).
    pub async fn vector_channel_shown(
        &self,
        p: &Principal,
        corpora: Option<&[i64]>,
        query: &[f32],
        depth: usize,
        shown: usize,
    ) -> StoreResult<(Vec<ChannelHit>, Vec<ChunkView>)> {
        if depth == 0 || corpora.is_some_and(|c| c.is_empty()) {
            return Ok((Vec::new(), Vec::new()));
        }
        let shown = shown.min(depth);
        match self.backend() {
            DatabaseBackend::Postgres => {
                let stmt = pg_vector_statement(p, corpora, query, depth as u64, shown as u64);
                let rows = VectorRow::find_by_statement(stmt)
                    .all(self.channel_connection())
                    .await?;
                let mut views = Vec::with_capacity(shown);
                let hits = rows
                    .into_iter()
                    .map(|mut r| {
                        views.extend(r.view());
                        ChannelHit {
                            chunk_id: r.id,
                            score: r.score.0,
                        }
                    })
                    .collect();
                Ok((hits, views))
            }
            _ => {
                let index = self.vector_index().await?;
                // Owned copies for the blocking thread; `p` is needed again for the views.
                let searcher = p.clone();
                let scope = corpora.map(<[i64]>::to_vec);
                let query = query.to_vec();
                let found = tokio::task::spawn_blocking(move || {
                    index.search(&searcher, scope.as_deref(), &query, depth)
                })
                .await
                .map_err(|e| StoreError::Corrupt(format!("vector scan panicked: {e}")))?;
                let hits: Vec<ChannelHit> = found
                    .into_iter()
                    .map(|s| ChannelHit {
                        chunk_id: s.chunk_id,
                        score: s.score,
                    })
                    .collect();
                let ids: Vec<i64> = hits.iter().take(shown).map(|h| h.chunk_id).collect();
                let views = self.chunk_views(p, &ids).await?;
                Ok((hits, views))
            }
        }
    }

    // ---- results ---------------------------------------------------------------------------

    /// The readable chunks among `ids` with their documents' titles (any order). One query.
    pub async fn chunk_views(&self, p: &Principal, ids: &[i64]) -> StoreResult<Vec<ChunkView>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        Ok(
            ChunkView::find_by_statement(chunk_views_statement(self.backend(), p, ids))
                .all(self.connection())
                .await?,
        )
    }

    /// Readable documents whose title contains every word of `q` (case-insensitive), exact
    /// titles first, then shorter titles, then newer documents.
    pub async fn documents_by_title(
        &self,
        p: &Principal,
        q: &str,
        limit: u64,
    ) -> StoreResult<Vec<entity::prelude::Document>> {
        use sea_orm::EntityTrait;
        let words: Vec<String> = q
            .split_whitespace()
            .map(|w| w.to_lowercase())
            .take(crate::domain::lexical::MAX_QUERY_TERMS)
            .collect();
        if words.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        // Both backends take (haystack, needle); SQLite's lower() folds ASCII only.
        let contains = match self.backend() {
            DatabaseBackend::Postgres => " AND strpos(lower(d.title), ",
            _ => " AND instr(lower(d.title), ",
        };
        let mut s = Sql::new(self.backend());
        s.push("SELECT d.* FROM documents d WHERE ");
        Readable::new(p).push_documents(&mut s, "d");
        for w in &words {
            s.push(contains).bind(w.clone()).push(") > 0");
        }
        s.push(" ORDER BY CASE WHEN lower(d.title) = ")
            .bind(words.join(" "))
            .push(" THEN 0 ELSE 1 END, length(d.title), d.id DESC LIMIT ")
            .count(limit);
        Ok(entity::prelude::Documents::find()
            .from_raw_sql(s.build())
            .all(self.connection())
            .await?)
    }

    /// The team's own (non-system) corpora with how many documents `p` may read in each, by
    /// name.
    pub async fn team_corpus_doc_counts(&self, p: &Principal) -> StoreResult<Vec<CorpusDocCount>> {
        let mut q = Sql::new(self.backend());
        q.push("SELECT k.id AS corpus_id, k.name AS name, (SELECT COUNT(*) FROM documents d WHERE d.corpus_id = k.id AND ");
        Readable::new(p).push_documents(&mut q, "d");
        q.push(") AS documents FROM corpora k WHERE k.team_id = ")
            .bind(p.team_id)
            .push(" ORDER BY k.name, k.id");
        Ok(CorpusDocCount::find_by_statement(q.build())
            .all(self.connection())
            .await?)
    }

    // ---- the SQLite index ------------------------------------------------------------------

    /// The in-memory index (SQLite), read from the database on first use, and brought up to
    /// date with every change any process committed since (one indexed `MAX(seq)` per search
    /// when nothing changed; the changed documents only, otherwise).
    pub async fn vector_index(&self) -> StoreResult<Arc<VectorIndex>> {
        let mut state = self.index.state.lock().await;
        if let Some((ix, seen)) = state.as_ref().map(|(ix, seen)| (Arc::clone(ix), *seen)) {
            let latest = self.change_seq().await?;
            if latest <= seen {
                return Ok(ix);
            }
            match self.catch_up(&ix, seen, latest).await {
                Ok(true) => {
                    *state = Some((Arc::clone(&ix), latest));
                    return Ok(ix);
                }
                // Too far behind (the change rows it needs were pruned), or the update failed:
                // read it afresh.
                Ok(false) => {}
                Err(e) => {
                    tracing::error!(error = %e, "vector index catch-up failed; reading it afresh");
                    *state = None;
                }
            }
        }
        // The sequence number first: a change committed while the index is read is applied
        // (again, harmlessly) by the next search.
        let seen = self.change_seq().await?;
        let ix = Arc::new(self.load_index().await?);
        tracing::info!(rows = ix.len(), "vector index loaded");
        *state = Some((Arc::clone(&ix), seen));
        Ok(ix)
    }

    /// The last change sequence number (SQLite's `index_changes`).
    async fn change_seq(&self) -> StoreResult<i64> {
        let mut q = Sql::new(self.backend());
        q.push("SELECT COALESCE(MAX(seq), 0) AS seq FROM index_changes");
        Ok(ChangeSeq::find_by_statement(q.build())
            .one(self.connection())
            .await?
            .map_or(0, |r| r.seq))
    }

    /// Applies the changes `(seen, latest]` to `ix`. `false`: some of them were pruned.
    async fn catch_up(&self, ix: &VectorIndex, seen: i64, latest: i64) -> StoreResult<bool> {
        let mut q = Sql::new(self.backend());
        q.push("SELECT COALESCE(MIN(seq), 0) AS seq FROM index_changes WHERE seq > ")
            .bind(seen);
        let first: i64 = ChangeSeq::find_by_statement(q.build())
            .one(self.connection())
            .await?
            .map_or(0, |r| r.seq);
        if first > seen + 1 {
            return Ok(false);
        }
        let mut q = Sql::new(self.backend());
        q.push("SELECT DISTINCT document_id FROM index_changes WHERE seq > ")
            .bind(seen)
            .push(" AND seq <= ")
            .bind(latest);
        let ids: Vec<i64> = ChangedDocument::find_by_statement(q.build())
            .all(self.connection())
            .await?
            .into_iter()
            .map(|r| r.document_id)
            .collect();
        for batch in ids.chunks(500) {
            self.sync_locked(ix, batch).await?;
        }
        if latest / PRUNE_EVERY > seen / PRUNE_EVERY {
            let mut q = Sql::new(self.backend());
            q.push("DELETE FROM index_changes WHERE seq <= ")
                .bind(latest - KEEP_CHANGES);
            self.connection().execute_raw(q.build()).await?;
        }
        tracing::debug!(
            documents = ids.len(),
            seen,
            latest,
            "vector index caught up"
        );
        Ok(true)
    }

    /// Brings the index in step with the database for these documents, after a commit that
    /// changed their chunks or access facts. A no-op on PostgreSQL or before first use. If the
    /// update fails, the index is dropped and read afresh on the next search.
    pub(crate) async fn sync_vector_index(&self, doc_ids: &[i64]) {
        if self.backend() == DatabaseBackend::Postgres || doc_ids.is_empty() {
            return;
        }
        let mut state = self.index.state.lock().await;
        let Some(ix) = state.as_ref().map(|(ix, _)| Arc::clone(ix)) else {
            return;
        };
        if let Err(e) = self.sync_locked(&ix, doc_ids).await {
            tracing::error!(error = %e, "vector index update failed; it will be reloaded");
            *state = None;
        }
    }

    async fn sync_locked(&self, ix: &VectorIndex, doc_ids: &[i64]) -> StoreResult<()> {
        let metas: HashMap<i64, (DocMeta, i32)> = self
            .index_metas(Some(doc_ids))
            .await?
            .into_iter()
            .map(|m| (m.0.id, m))
            .collect();
        let mut reload = Vec::new();
        for &id in doc_ids {
            match metas.get(&id) {
                None => ix.remove(id),
                Some(&(meta, chunk_count)) => match ix.held(id) {
                    Some((v, rows)) if v == meta.version && rows == chunk_count as usize => {
                        ix.set_meta(meta);
                    }
                    _ => reload.push(id),
                },
            }
        }
        if !reload.is_empty() {
            // Documents with no embedded chunks simply hold no block.
            for &id in &reload {
                ix.remove(id);
            }
            self.load_into(ix, Some(&reload)).await?;
        }
        Ok(())
    }

    /// Reads the access facts and current-version vectors of all documents.
    async fn load_index(&self) -> StoreResult<VectorIndex> {
        let ix = VectorIndex::new(EMBEDDING_DIM);
        self.load_into(&ix, None).await?;
        Ok(ix)
    }

    /// Installs the current-version vectors of all documents (or of `only`) into `ix`, a page
    /// of documents at a time: each page names its documents (`document_id IN (…)`, at most
    /// [`INDEX_LOAD_PAGE`] chunks by their counts), so every page is a run of lookups on the
    /// `(document_id, version, chunk_index)` key, and the whole load reads each row once. (The
    /// keyset predicate it replaces, `document_id > ? OR (document_id = ? AND chunk_index > ?)`,
    /// is an OR no index serves: each of its pages scanned and sorted the whole table.)
    ///
    /// [`INDEX_LOAD_CONCURRENCY`] pages are read at once, on as many pooled connections: on
    /// SQLite each connection steps its statement on its own thread, so reading one page
    /// overlaps decoding and installing the one before.
    async fn load_into(&self, ix: &VectorIndex, only: Option<&[i64]>) -> StoreResult<()> {
        use futures_util::{StreamExt, TryStreamExt};

        let mut metas = self.index_metas(only).await?;
        metas.sort_by_key(|(m, _)| m.id);
        let mut pages: Vec<(usize, usize)> = Vec::new();
        let mut start = 0;
        while start < metas.len() {
            let mut end = start;
            let mut rows: i64 = 0;
            while end < metas.len()
                && (end == start || rows + i64::from(metas[end].1) <= INDEX_LOAD_PAGE)
            {
                rows += i64::from(metas[end].1);
                end += 1;
            }
            pages.push((start, end));
            start = end;
        }
        let backend = self.backend();
        let statements: Vec<((usize, usize), sea_orm::Statement)> = pages
            .into_iter()
            .map(|(a, b)| {
                let mut q = Sql::new(backend);
                q.push("SELECT c.document_id AS document_id, c.id AS id, c.embedding AS embedding FROM chunks c JOIN documents d ON d.id = c.document_id AND c.version = d.current_version WHERE c.embedding IS NOT NULL AND c.document_id IN ")
                    .push_list(metas[a..b].iter().map(|(m, _)| m.id))
                    .push(" ORDER BY c.document_id, c.chunk_index");
                ((a, b), q.build())
            })
            .collect();
        let conn = self.connection();
        let mut loaded = futures_util::stream::iter(statements)
            .map(|(range, stmt)| async move {
                let found = ChunkVector::find_by_statement(stmt).all(conn).await?;
                Ok::<_, StoreError>((range, found))
            })
            .buffered(INDEX_LOAD_CONCURRENCY);
        while let Some(((a, b), found)) = loaded.try_next().await? {
            let page = &metas[a..b];
            let by_id: HashMap<i64, DocMeta> = page.iter().map(|(m, _)| (m.id, *m)).collect();
            let mut current: Option<(i64, Vec<i64>, Vec<f32>)> = None;
            for r in found {
                if current.as_ref().is_some_and(|c| c.0 != r.document_id) {
                    if let Some((d, ids, vecs)) = current.take() {
                        install(ix, &by_id, d, ids, vecs)?;
                    }
                }
                let entry = current.get_or_insert_with(|| (r.document_id, Vec::new(), Vec::new()));
                entry.1.push(r.id);
                push_f32_blob(&mut entry.2, &r.embedding, EMBEDDING_DIM)?;
            }
            if let Some((d, ids, vecs)) = current.take() {
                install(ix, &by_id, d, ids, vecs)?;
            }
        }
        Ok(())
    }

    /// (access facts, chunk count) of every document, or of `only`.
    async fn index_metas(&self, only: Option<&[i64]>) -> StoreResult<Vec<(DocMeta, i32)>> {
        let mut q = Sql::new(self.backend());
        q.push("SELECT d.id AS id, d.team_id AS team_id, d.corpus_id AS corpus_id, d.owner_id AS owner_id, d.visibility AS visibility, d.current_version AS current_version, k.system AS system, d.chunk_count AS chunk_count FROM documents d JOIN corpora k ON k.id = d.corpus_id");
        if let Some(ids) = only {
            if ids.is_empty() {
                return Ok(Vec::new());
            }
            q.push(" WHERE d.id IN ").push_list(ids.iter().copied());
        }
        let rows = IndexedDocument::find_by_statement(q.build())
            .all(self.connection())
            .await?;
        rows.into_iter()
            .map(|r| {
                let visibility: Visibility = r
                    .visibility
                    .parse()
                    .map_err(|_| StoreError::Corrupt(format!("visibility {:?}", r.visibility)))?;
                Ok((
                    DocMeta {
                        id: r.id,
                        corpus_id: r.corpus_id,
                        version: r.current_version,
                        access: DocumentAccess {
                            team_id: r.team_id,
                            owner_id: r.owner_id,
                            visibility,
                            in_system_corpus: r.system,
                        },
                    },
                    r.chunk_count,
                ))
            })
            .collect()
    }
}

fn install(
    ix: &VectorIndex,
    metas: &HashMap<i64, DocMeta>,
    doc: i64,
    ids: Vec<i64>,
    vecs: Vec<f32>,
) -> StoreResult<()> {
    let meta = metas
        .get(&doc)
        .ok_or_else(|| StoreError::Corrupt(format!("chunks of unknown document {doc}")))?;
    if !ix.upsert(*meta, ids, vecs) {
        return Err(StoreError::Corrupt(format!(
            "document {doc} has embeddings of the wrong size"
        )));
    }
    Ok(())
}

fn push_f32_blob(out: &mut Vec<f32>, blob: &[u8], dim: usize) -> StoreResult<()> {
    if blob.len() != dim * 4 {
        return Err(StoreError::Corrupt(format!(
            "embedding of {} bytes, expected {}",
            blob.len(),
            dim * 4
        )));
    }
    extend_from_blob(out, blob);
    Ok(())
}

fn push_corpora(q: &mut Sql, corpora: Option<&[i64]>) {
    if let Some(c) = corpora {
        q.push(" AND c.corpus_id IN ").push_list(c.iter().copied());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Role;

    #[test]
    fn pg_vector_statement_is_the_channels() {
        let p = Principal {
            user_id: 7,
            team_id: 3,
            role: Role::Member,
            name: "m".into(),
            token_id: 0,
        };
        let s = pg_vector_channel_statement(&p, &[0.5, -1.0], 300, 10);
        assert_eq!(
            s.sql,
            "WITH hits AS MATERIALIZED (SELECT c.id, c.embedding <=> CAST($1 AS vector) AS dist FROM chunks c JOIN documents d ON d.id = c.document_id AND c.version = d.current_version WHERE c.embedding IS NOT NULL AND ((d.team_id = $2 OR d.corpus_id IN (SELECT sc.id FROM corpora sc WHERE sc.system)) AND (d.visibility = 'team' OR d.owner_id = $3)) ORDER BY dist LIMIT 300), shown AS MATERIALIZED (SELECT t.id, c.document_id, c.corpus_id, c.version, c.chunk_index, c.content, c.section, c.page, d.title FROM (SELECT id, dist FROM hits ORDER BY dist, id LIMIT 10) t JOIN chunks c ON c.id = t.id JOIN documents d ON d.id = c.document_id) SELECT h.id AS id, CAST(1 - h.dist AS REAL) AS score, s.document_id AS document_id, s.corpus_id AS corpus_id, s.version AS version, s.chunk_index AS chunk_index, s.content AS content, s.section AS section, s.page AS page, s.title AS title FROM hits h LEFT JOIN shown s ON s.id = h.id ORDER BY h.dist, h.id"
        );
        assert_eq!(s.values.map(|v| v.0.len()), Some(3));
        // With a corpus filter, the channel's statement only gains the filter.
        let filtered = pg_vector_statement(&p, Some(&[11, 12]), &[0.5, -1.0], 300, 0);
        assert!(filtered
            .sql
            .contains("IS NOT NULL AND c.corpus_id IN ($2, $3) AND (("));
    }
}
