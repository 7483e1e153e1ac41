//! The lexical channel: BM25 over Cairn's own postings, the same SQL on both backends.
//!
//! Tables (migration 4):
//! - `lexical_postings`: one row per (term, chunk) of every current chunk, with the term's
//!   count in the body and in the heading and the chunk's analyzed length;
//! - `lexical_documents`: per document, its chunk count and total length;
//! - `lexical_terms`: per term and readability scope (a corpus; the owner of private documents,
//!   0 for team-visible ones), how many chunks hold the term. A searcher's document frequency
//!   is the sum over the corpora searched and the scopes 0 and their own id: exactly the
//!   readable rule, so statistics never reflect text the searcher cannot read, and never need
//!   a scan of postings.
//!
//! Terms come from [`Analyzer`](crate::domain::lexical::Analyzer), so both backends hold the
//! same terms. Every row is written in the transaction that stores the chunks, and leaves (or
//! moves scope) in the transaction that deletes, replaces, moves or re-scopes them.
//!
//! A search: the statistics (one statement), idf computed here (SQLite has no `ln`),
//! then BM25 summed per chunk over the query terms' postings. No term is required: a chunk
//! that holds any query term is a candidate. The sum is pruned the MaxScore way (Turtle and
//! Flood, 1995) and stays exact: the rarest terms whose postings fit
//! [`Bm25::essential_share`] of the readable chunks are *essential*; only chunks holding an essential term are scored
//! (in full, the other terms looked up per chunk), and the result is kept only when no chunk
//! without an essential term could reach it (its score is below the common terms' bound
//! `Σ idf · (k1 + 1)`, under the `depth`-th score found); otherwise every posting is summed.

use std::collections::HashMap;

use sea_orm::{ConnectionTrait, DatabaseTransaction, QueryResult, TransactionTrait};

use super::readable::Readable;
use super::search::ChannelHit;
use super::sql::Sql;
use super::{Store, StoreError, StoreResult};
use crate::auth::Principal;
use crate::domain::lexical::{Analyzer, Bm25, Posting};
use crate::domain::Visibility;

/// Posting rows per INSERT (6 values each: well under both backends' parameter limits).
const POSTINGS_PER_INSERT: usize = 2_000;
/// `lexical_terms` rows per upsert (4 values each).
const TERMS_PER_UPSERT: usize = 2_000;
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

/// A document's readability scope in `lexical_terms`: (corpus, owner when private else 0).
pub(crate) type Scope = (i64, i64);

/// The scope a document row has now.
pub(crate) async fn scope_of(
    tx: &DatabaseTransaction,
    document_id: i64,
) -> StoreResult<Option<Scope>> {
    let mut q = Sql::new(tx.get_database_backend());
    q.push("SELECT corpus_id, visibility, owner_id FROM documents WHERE id = ")
        .bind(document_id);
    let Some(r) = tx.query_one_raw(q.build()).await? else {
        return Ok(None);
    };
    let corpus: i64 = r.try_get("", "corpus_id")?;
    let visibility: String = r.try_get("", "visibility")?;
    let owner: i64 = r.try_get("", "owner_id")?;
    Ok(Some((corpus, owner_key(&visibility, owner))))
}

/// 0 for a team-visible document, its owner's id for a private one.
fn owner_key(visibility: &str, owner_id: i64) -> i64 {
    if visibility == Visibility::Private.as_str() {
        owner_id
    } else {
        0
    }
}

/// How many of the document's chunks hold each term, by term.
async fn term_counts(
    tx: &DatabaseTransaction,
    document_id: i64,
) -> StoreResult<Vec<(String, i64)>> {
    let mut q = Sql::new(tx.get_database_backend());
    q.push("SELECT term, COUNT(*) AS n FROM lexical_postings WHERE document_id = ")
        .bind(document_id);
    q.push(" GROUP BY term ORDER BY term");
    tx.query_all_raw(q.build())
        .await?
        .iter()
        .map(|r| Ok((r.try_get("", "term")?, r.try_get("", "n")?)))
        .collect()
}

/// Adds `sign × count` to each term's df in `scope` (terms in order, so concurrent writers
/// on PostgreSQL lock rows in the same order), dropping rows that reach zero.
async fn add_df(
    tx: &DatabaseTransaction,
    scope: Scope,
    counts: &[(String, i64)],
    sign: i64,
) -> StoreResult<()> {
    let backend = tx.get_database_backend();
    for batch in counts.chunks(TERMS_PER_UPSERT) {
        let mut q = Sql::new(backend);
        q.push("INSERT INTO lexical_terms (term, corpus_id, owner_key, df) VALUES ");
        for (i, (term, n)) in batch.iter().enumerate() {
            if i > 0 {
                q.push(", ");
            }
            q.push("(").bind(term.clone()).push(", ").bind(scope.0);
            q.push(", ")
                .bind(scope.1)
                .push(", ")
                .bind(sign * n)
                .push(")");
        }
        q.push(" ON CONFLICT (term, corpus_id, owner_key) DO UPDATE SET df = lexical_terms.df + excluded.df");
        tx.execute_raw(q.build()).await?;
    }
    if sign < 0 && !counts.is_empty() {
        let mut q = Sql::new(backend);
        q.push("DELETE FROM lexical_terms WHERE corpus_id = ")
            .bind(scope.0)
            .push(" AND owner_key = ")
            .bind(scope.1)
            .push(" AND df <= 0");
        tx.execute_raw(q.build()).await?;
    }
    Ok(())
}

/// Writes the postings of a document's current chunks (`terms` by `chunk_index`), its
/// `lexical_documents` row and its share of `lexical_terms`. The document has no postings
/// yet ([`forget_document`] ran when its chunks were replaced).
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
    let mut df: std::collections::BTreeMap<&str, i64> = std::collections::BTreeMap::new();
    let mut total = 0i64;
    for r in &chunk_rows {
        let chunk_id: i64 = r.try_get("", "id")?;
        let index: i32 = r.try_get("", "chunk_index")?;
        let Some(t) = by_index.get(&index) else {
            return Err(StoreError::Corrupt(format!(
                "document {document_id}: chunk {index} has no lexical entry"
            )));
        };
        total += i64::from(t.len);
        for p in &t.postings {
            rows.push((chunk_id, p, t.len));
            *df.entry(p.term.as_str()).or_default() += 1;
        }
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
    let counts: Vec<(String, i64)> = df.into_iter().map(|(t, n)| (t.to_owned(), n)).collect();
    if let Some(scope) = scope_of(tx, document_id).await? {
        add_df(tx, scope, &counts, 1).await?;
    }
    let mut q = Sql::new(backend);
    q.push("DELETE FROM lexical_documents WHERE document_id = ")
        .bind(document_id);
    tx.execute_raw(q.build()).await?;
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

/// Removes a document's lexical rows (before its chunks are deleted or replaced): its share
/// of `lexical_terms`, its postings, its totals.
pub(crate) async fn forget_document(tx: &DatabaseTransaction, document_id: i64) -> StoreResult<()> {
    let counts = term_counts(tx, document_id).await?;
    if let Some(scope) = scope_of(tx, document_id).await? {
        add_df(tx, scope, &counts, -1).await?;
    }
    for table in ["lexical_postings", "lexical_documents"] {
        let mut q = Sql::new(tx.get_database_backend());
        q.push("DELETE FROM ")
            .push(table)
            .push(" WHERE document_id = ")
            .bind(document_id);
        tx.execute_raw(q.build()).await?;
    }
    Ok(())
}

/// Moves a document's share of `lexical_terms` from `from` to its scope now (after a move
/// or a visibility change in the same transaction).
pub(crate) async fn rescope_document(
    tx: &DatabaseTransaction,
    document_id: i64,
    from: Scope,
) -> StoreResult<()> {
    let Some(to) = scope_of(tx, document_id).await? else {
        return Ok(());
    };
    if to == from {
        return Ok(());
    }
    let counts = term_counts(tx, document_id).await?;
    add_df(tx, from, &counts, -1).await?;
    add_df(tx, to, &counts, 1).await
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

/// One query term with its statistics.
#[derive(Clone, Debug)]
struct QueryTerm {
    term: String,
    df: i64,
    idf: f64,
}

/// `idf · tf · (k1 + 1) / (tf + k1 · (1 - b + b · len / avg))` over a posting aliased `lp`,
/// with `idf` bound (or taken from the column `idf_col`).
fn push_term_score(q: &mut Sql, idf: Result<f64, &str>, bm25: Bm25, avg_len: f64) {
    let dp = " AS DOUBLE PRECISION)";
    q.push("(");
    match idf {
        Ok(v) => {
            q.push("CAST(").bind(v).push(dp);
        }
        Err(col) => {
            q.push(col);
        }
    }
    q.push(" * (CAST(lp.tf_body AS DOUBLE PRECISION) + CAST(")
        .bind(bm25.heading_weight)
        .push(dp)
        .push(" * lp.tf_heading) * CAST(")
        .bind(bm25.k1 + 1.0)
        .push(dp)
        .push(" / ((CAST(lp.tf_body AS DOUBLE PRECISION) + CAST(")
        .bind(bm25.heading_weight)
        .push(dp)
        .push(" * lp.tf_heading) + CAST(")
        .bind(bm25.k1 * (1.0 - bm25.b))
        .push(dp)
        .push(" + CAST(")
        .bind(bm25.k1 * bm25.b / avg_len.max(1e-9))
        .push(dp)
        .push(" * lp.len))");
}

/// `qt (term, idf) AS (VALUES …)`, preceded by a comma.
fn push_term_values(q: &mut Sql, name: &str, terms: &[&QueryTerm]) {
    q.push(", ").push(name).push(" (term, idf) AS (VALUES ");
    for (i, t) in terms.iter().enumerate() {
        if i > 0 {
            q.push(", ");
        }
        q.push("(")
            .bind(t.term.clone())
            .push(", CAST(")
            .bind(t.idf)
            .push(" AS DOUBLE PRECISION))");
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
        // 1. Statistics over what `p` may read, in one statement: each term's df (from the
        //    scoped counts), and a last row (term NULL) with the chunks and their total length.
        let mut q = Sql::new(self.backend());
        push_readable_documents(&mut q, p, corpora);
        q.push(" SELECT lt.term AS term, SUM(lt.df) AS df, 0 AS t FROM lexical_terms lt WHERE lt.term IN ")
            .push_list(terms.iter().cloned());
        q.push(" AND lt.owner_key IN (0, ").bind(p.user_id);
        q.push(") AND lt.corpus_id IN (SELECT c.id FROM corpora c WHERE c.team_id = ")
            .bind(p.team_id)
            .push(" OR c.system)");
        if let Some(c) = corpora {
            q.push(" AND lt.corpus_id IN ").push_list(c.iter().copied());
        }
        q.push(" GROUP BY lt.term UNION ALL SELECT CAST(NULL AS TEXT), COALESCE(SUM(l.chunks), 0), COALESCE(SUM(l.terms), 0) FROM lexical_documents l WHERE l.document_id IN (SELECT id FROM rd)");
        let mut stats: Vec<QueryTerm> = Vec::new();
        let (mut n, mut total) = (0i64, 0i64);
        for r in self.connection().query_all_raw(q.build()).await? {
            let df: i64 = r.try_get_by_index(1)?;
            match r.try_get_by_index::<Option<String>>(0)? {
                Some(term) if df > 0 => stats.push(QueryTerm { term, df, idf: 0.0 }),
                Some(_) => {}
                None => (n, total) = (df, r.try_get_by_index(2)?),
            }
        }
        if stats.is_empty() || n == 0 {
            return Ok(Vec::new());
        }
        let avg_len = total as f64 / n as f64;
        for t in &mut stats {
            t.idf = Bm25::idf(n as f64, t.df as f64);
        }
        // Rarest first (then by term, so the split is the same everywhere).
        stats.sort_by(|a, b| a.df.cmp(&b.df).then_with(|| a.term.cmp(&b.term)));

        // 2. The essential terms: the rarest whose postings fit the budget (at least one). The
        //    budget scales with the corpus: `as` saturates (an infinite share: every term).
        let budget = (bm25.essential_share * n as f64).max(0.0) as i64;
        let mut essential = 0;
        let mut postings = 0i64;
        for t in &stats {
            if essential > 0 && postings + t.df > budget {
                break;
            }
            essential += 1;
            postings += t.df;
        }
        // 3. Pruned, then (when that was not provably exact) pruned again with every term but
        //    the most common one essential: the smallest bound a pruned evaluation can have.
        //    That second try is made only when the most common term holds at least half of
        //    the query's postings, so it reads at most half of what the full sum would.
        let total_postings: i64 = stats.iter().map(|t| t.df).sum();
        let mut tries = vec![essential];
        if let Some(last) = stats.last() {
            if stats.len() > essential + 1 && 2 * last.df >= total_postings {
                tries.push(stats.len() - 1);
            }
        }
        for essential in tries {
            let (ess, rest) = stats.split_at(essential);
            if rest.is_empty() {
                break;
            }
            let ess: Vec<&QueryTerm> = ess.iter().collect();
            let bound: f64 = rest.iter().map(|t| t.idf * (bm25.k1 + 1.0)).sum();
            let hits = self
                .lexical_pruned(p, corpora, &ess, rest, bm25, avg_len, bound, depth)
                .await?;
            // Exact when the list is full and no chunk outside it (holding only common
            // terms, so scoring under `bound`) could reach its last score.
            if hits.len() == depth && hits.last().is_some_and(|h| f64::from(h.score) > bound) {
                self.count_lexical_pruned();
                return Ok(hits);
            }
        }
        let all: Vec<&QueryTerm> = stats.iter().collect();
        self.lexical_full(p, corpora, &all, bm25, avg_len, depth)
            .await
    }

    /// Every posting of `terms` summed per chunk.
    async fn lexical_full(
        &self,
        p: &Principal,
        corpora: Option<&[i64]>,
        terms: &[&QueryTerm],
        bm25: Bm25,
        avg_len: f64,
        depth: usize,
    ) -> StoreResult<Vec<ChannelHit>> {
        let mut q = Sql::new(self.backend());
        push_readable_documents(&mut q, p, corpora);
        push_term_values(&mut q, "qt", terms);
        q.push(" SELECT lp.chunk_id AS chunk_id, SUM(");
        push_term_score(&mut q, Err("qt.idf"), bm25, avg_len);
        q.push(") AS score FROM lexical_postings lp JOIN qt ON qt.term = lp.term WHERE lp.document_id IN (SELECT id FROM rd) GROUP BY lp.chunk_id ORDER BY score DESC, lp.chunk_id LIMIT ")
            .count(depth as u64);
        self.lexical_rows(q).await
    }

    /// MaxScore: chunks holding an essential term, scored in full; a chunk whose essential
    /// score cannot reach the `depth`-th essential score plus the other terms' `bound` is
    /// dropped before the other terms are looked up.
    #[allow(clippy::too_many_arguments)]
    async fn lexical_pruned(
        &self,
        p: &Principal,
        corpora: Option<&[i64]>,
        essential: &[&QueryTerm],
        rest: &[QueryTerm],
        bm25: Bm25,
        avg_len: f64,
        bound: f64,
        depth: usize,
    ) -> StoreResult<Vec<ChannelHit>> {
        let mut q = Sql::new(self.backend());
        push_readable_documents(&mut q, p, corpora);
        push_term_values(&mut q, "qe", essential);
        q.push(", es AS MATERIALIZED (SELECT lp.chunk_id AS chunk_id, SUM(");
        push_term_score(&mut q, Err("qe.idf"), bm25, avg_len);
        q.push(") AS s FROM lexical_postings lp JOIN qe ON qe.term = lp.term WHERE lp.document_id IN (SELECT id FROM rd) GROUP BY lp.chunk_id)");
        q.push(", th AS (SELECT s FROM es ORDER BY s DESC LIMIT 1 OFFSET ")
            .count((depth as u64).saturating_sub(1))
            .push(")");
        q.push(", cand AS (SELECT chunk_id, s FROM es WHERE s >= COALESCE((SELECT s FROM th), 0) - CAST(")
            .bind(bound)
            .push(" AS DOUBLE PRECISION))");
        q.push(" SELECT cand.chunk_id AS chunk_id, cand.s");
        for t in rest {
            q.push(" + COALESCE((SELECT ");
            push_term_score(&mut q, Ok(t.idf), bm25, avg_len);
            q.push(" FROM lexical_postings lp WHERE lp.term = ")
                .bind(t.term.clone())
                .push(" AND lp.chunk_id = cand.chunk_id), 0)");
        }
        q.push(" AS score FROM cand ORDER BY score DESC, cand.chunk_id LIMIT ")
            .count(depth as u64);
        self.lexical_rows(q).await
    }

    async fn lexical_rows(&self, q: Sql) -> StoreResult<Vec<ChannelHit>> {
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
                .count(BACKFILL_BATCH);
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
