//! The lexical channel: BM25 over Cairn's own postings, the same SQL on both backends.
//!
//! `lexical_postings` holds one row per (term, chunk) of every current chunk: the term's count
//! in the body and in the heading, and the chunk's analyzed length; `lexical_documents` one
//! row per document with its chunk count and total length. Terms come from
//! [`Analyzer`](crate::domain::lexical::Analyzer), so both backends hold the same terms. Rows
//! are written in the transaction that stores the chunks and leave with them (foreign keys,
//! `ON DELETE CASCADE`).
//!
//! A search is two statements, each scoped to the documents the searcher may read (in the
//! corpora searched): the first counts the chunks and their length and each query term's
//! document frequency; idf is computed here (SQLite has no `ln`); the second sums BM25 per
//! chunk over the query terms' postings, best first. No term is required: a chunk that holds
//! any query term is a candidate, and IDF and length normalization rank them.

use std::collections::HashMap;

use sea_orm::{ConnectionTrait, DatabaseTransaction, QueryResult, TransactionTrait};

use super::readable::Readable;
use super::search::ChannelHit;
use super::sql::Sql;
use super::{Store, StoreError, StoreResult};
use crate::auth::Principal;
use crate::domain::lexical::{Analyzer, Bm25, Posting};

/// Posting rows per INSERT (6 values each: well under both backends' parameter limits).
const POSTINGS_PER_INSERT: usize = 2_000;
/// Documents indexed per transaction when an older database is brought up to date.
const BACKFILL_BATCH: u64 = 50;

/// One chunk's lexical entry, computed before the transaction that stores it.
#[derive(Clone, Debug, Default)]
pub(crate) struct ChunkTerms {
    pub postings: Vec<Posting>,
    pub len: u32,
}

/// The postings of each chunk, keyed by its `chunk_index` (CPU work: callers run it off the
/// async runtime).
pub(crate) fn analyze_chunks<'a>(
    chunks: impl IntoIterator<Item = (i32, Option<&'a str>, &'a str)>,
) -> Vec<(i32, ChunkTerms)> {
    let a = Analyzer::new();
    chunks
        .into_iter()
        .map(|(index, heading, body)| {
            let (postings, len) = a.postings(heading, body);
            (index, ChunkTerms { postings, len })
        })
        .collect()
}

/// Writes the postings of a document's current chunks (`terms` by `chunk_index`) and its
/// `lexical_documents` row, replacing an earlier row.
pub(crate) async fn index_document(
    tx: &DatabaseTransaction,
    document_id: i64,
    terms: &[(i32, ChunkTerms)],
) -> StoreResult<()> {
    let backend = tx.get_database_backend();
    let by_index: HashMap<i32, &ChunkTerms> = terms.iter().map(|(i, t)| (*i, t)).collect();
    let mut q = Sql::new(backend);
    q.push("SELECT id, chunk_index FROM chunks WHERE document_id = ")
        .bind(document_id);
    q.push(" ORDER BY chunk_index");
    let chunk_rows = tx.query_all_raw(q.build()).await?;
    let mut rows: Vec<(i64, &Posting, u32)> = Vec::new();
    for r in &chunk_rows {
        let chunk_id: i64 = r.try_get("", "id")?;
        let index: i32 = r.try_get("", "chunk_index")?;
        let Some(t) = by_index.get(&index) else {
            return Err(StoreError::Corrupt(format!(
                "document {document_id}: chunk {index} has no lexical entry"
            )));
        };
        rows.extend(t.postings.iter().map(|p| (chunk_id, p, t.len)));
    }
    for batch in rows.chunks(POSTINGS_PER_INSERT) {
        let mut q = Sql::new(backend);
        q.push("INSERT INTO lexical_postings (term, chunk_id, document_id, tf_body, tf_heading, len) VALUES ");
        for (i, (chunk_id, p, len)) in batch.iter().enumerate() {
            if i > 0 {
                q.push(", ");
            }
            q.push("(").bind(p.term.clone()).push(", ").bind(*chunk_id);
            q.push(", ")
                .bind(document_id)
                .push(", ")
                .bind(i64::from(p.body));
            q.push(", ")
                .bind(i64::from(p.heading))
                .push(", ")
                .bind(i64::from(*len))
                .push(")");
        }
        tx.execute_raw(q.build()).await?;
    }
    let mut q = Sql::new(backend);
    q.push("DELETE FROM lexical_documents WHERE document_id = ")
        .bind(document_id);
    tx.execute_raw(q.build()).await?;
    let total: i64 = terms.iter().map(|(_, t)| i64::from(t.len)).sum();
    let mut q = Sql::new(backend);
    q.push("INSERT INTO lexical_documents (document_id, chunks, terms) VALUES (")
        .bind(document_id)
        .push(", ")
        .bind(chunk_rows.len() as i64)
        .push(", ")
        .bind(total)
        .push(")");
    tx.execute_raw(q.build()).await?;
    Ok(())
}

/// The documents `p` may read (in `corpora` when given), as a CTE named `rd`.
fn push_readable_documents(q: &mut Sql, p: &Principal, corpora: Option<&[i64]>) {
    q.push("WITH rd AS MATERIALIZED (SELECT d.id FROM documents d WHERE ");
    Readable::new(p).push_documents(q, "d");
    if let Some(c) = corpora {
        q.push(" AND d.corpus_id IN ").push_list(c.iter().copied());
    }
    q.push(")");
}

impl Store {
    /// The `depth` chunks `p` may read (in `corpora` when given) that score best under BM25
    /// for `terms` (the analyzer's query terms), best first; ties by chunk id.
    pub async fn lexical_channel(
        &self,
        p: &Principal,
        corpora: Option<&[i64]>,
        terms: &[String],
        bm25: Bm25,
        depth: usize,
    ) -> StoreResult<Vec<ChannelHit>> {
        if depth == 0 || terms.is_empty() || corpora.is_some_and(<[i64]>::is_empty) {
            return Ok(Vec::new());
        }
        // 1. Statistics over what `p` may read: chunks, total length, each term's df.
        let mut q = Sql::new(self.backend());
        push_readable_documents(&mut q, p, corpora);
        q.push(", st AS (SELECT COALESCE(SUM(l.chunks), 0) AS n, COALESCE(SUM(l.terms), 0) AS t FROM lexical_documents l JOIN rd ON rd.id = l.document_id)");
        q.push(" SELECT lp.term AS term, COUNT(*) AS df, MAX(st.n) AS n, MAX(st.t) AS t FROM lexical_postings lp JOIN rd ON rd.id = lp.document_id CROSS JOIN st WHERE lp.term IN ")
            .push_list(terms.iter().cloned());
        q.push(" GROUP BY lp.term");
        let rows = self.connection().query_all_raw(q.build()).await?;
        let mut idf: Vec<(String, f64)> = Vec::with_capacity(rows.len());
        let (mut n, mut total) = (0i64, 0i64);
        for r in &rows {
            let df: i64 = r.try_get("", "df")?;
            n = r.try_get("", "n")?;
            total = r.try_get("", "t")?;
            idf.push((r.try_get("", "term")?, df as f64));
        }
        if idf.is_empty() || n == 0 {
            return Ok(Vec::new());
        }
        let avg_len = total as f64 / n as f64;
        for (_, v) in &mut idf {
            *v = Bm25::idf(n as f64, *v);
        }
        idf.sort_by(|a, b| a.0.cmp(&b.0));

        // 2. BM25 per chunk over the query terms' postings.
        let mut q = Sql::new(self.backend());
        push_readable_documents(&mut q, p, corpora);
        q.push(", qt (term, idf) AS (VALUES ");
        for (i, (term, v)) in idf.iter().enumerate() {
            if i > 0 {
                q.push(", ");
            }
            q.push("(")
                .bind(term.clone())
                .push(", CAST(")
                .bind(*v)
                .push(" AS DOUBLE PRECISION))");
        }
        q.push("), po AS (SELECT lp.chunk_id, qt.idf, CAST(lp.tf_body AS DOUBLE PRECISION) + CAST(")
            .bind(bm25.heading_weight)
            .push(" AS DOUBLE PRECISION) * lp.tf_heading AS tf, CAST(lp.len AS DOUBLE PRECISION) AS len FROM lexical_postings lp JOIN qt ON qt.term = lp.term JOIN rd ON rd.id = lp.document_id)");
        q.push(" SELECT po.chunk_id AS chunk_id, SUM(po.idf * po.tf * CAST(")
            .bind(bm25.k1 + 1.0)
            .push(" AS DOUBLE PRECISION) / (po.tf + CAST(")
            .bind(bm25.k1 * (1.0 - bm25.b))
            .push(" AS DOUBLE PRECISION) + CAST(")
            .bind(bm25.k1 * bm25.b / avg_len.max(1e-9))
            .push(" AS DOUBLE PRECISION) * po.len)) AS score FROM po GROUP BY po.chunk_id ORDER BY score DESC, po.chunk_id LIMIT ")
            .bind(depth as i64);
        let rows = self.connection().query_all_raw(q.build()).await?;
        let mut hits = rows
            .iter()
            .map(|r| {
                Ok(ChannelHit {
                    chunk_id: r.try_get("", "chunk_id")?,
                    score: score_of(r)?,
                })
            })
            .collect::<StoreResult<Vec<ChannelHit>>>()?;
        // Scores equal to f32 precision are ties on both backends alike (their sums may
        // differ in the last bits of an f64): the chunk id decides.
        hits.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then(a.chunk_id.cmp(&b.chunk_id))
        });
        Ok(hits)
    }

    /// Indexes every document whose chunks have no lexical entry yet (a database written
    /// before the lexical tables existed), a batch per transaction; returns how many.
    pub async fn backfill_lexical(&self) -> StoreResult<u64> {
        let mut done = 0u64;
        loop {
            let mut q = Sql::new(self.backend());
            q.push("SELECT d.id AS id FROM documents d WHERE EXISTS (SELECT 1 FROM chunks c WHERE c.document_id = d.id) AND NOT EXISTS (SELECT 1 FROM lexical_documents l WHERE l.document_id = d.id) ORDER BY d.id LIMIT ")
                .bind(BACKFILL_BATCH as i64);
            let ids = self
                .connection()
                .query_all_raw(q.build())
                .await?
                .iter()
                .map(|r| r.try_get::<i64>("", "id"))
                .collect::<Result<Vec<i64>, _>>()?;
            if ids.is_empty() {
                return Ok(done);
            }
            let tx = self.connection().begin().await?;
            for &id in &ids {
                let mut q = Sql::new(self.backend());
                q.push("SELECT chunk_index, section, content FROM chunks WHERE document_id = ")
                    .bind(id);
                let texts = tx
                    .query_all_raw(q.build())
                    .await?
                    .iter()
                    .map(|r| {
                        Ok((
                            r.try_get::<i32>("", "chunk_index")?,
                            r.try_get::<Option<String>>("", "section")?,
                            r.try_get::<String>("", "content")?,
                        ))
                    })
                    .collect::<StoreResult<Vec<(i32, Option<String>, String)>>>()?;
                let terms = tokio::task::spawn_blocking(move || {
                    analyze_chunks(texts.iter().map(|(i, s, c)| (*i, s.as_deref(), c.as_str())))
                })
                .await
                .map_err(|e| StoreError::Corrupt(format!("lexical analysis panicked: {e}")))?;
                index_document(&tx, id, &terms).await?;
            }
            tx.commit().await?;
            done += ids.len() as u64;
        }
    }
}

/// A score column: DOUBLE PRECISION on both backends.
fn score_of(r: &QueryResult) -> StoreResult<f32> {
    let v: f64 = r.try_get("", "score")?;
    Ok(v as f32)
}
