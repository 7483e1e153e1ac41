//! The lexical channel: BM25 over Cairn's own postings, the same SQL on both backends.
//!
//! Tables (migrations 4 and 8):
//! - `lexical_blocks`: per (term, document), every posting of the term in the document's
//!   current chunks, packed ([`POSTING_BYTES`] each: the chunk's id, its analyzed length, the
//!   term's count in the body and in the heading, little-endian), and how many there are;
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
//! A search is two statements: the statistics, then the blocks of the query terms in the
//! documents the searcher may read (the readable rule inside the statement). idf and every
//! chunk's BM25 sum are computed here, off the async runtime, the terms summed in term order
//! so both backends produce the same bits. No term is required: a chunk that holds any query
//! term is a candidate. A term costs one row per readable document that holds it, not one
//! per chunk: the per-row cost of the database, not the arithmetic, was the channel's cost
//! (ARCHITECTURE.md, "Search").

use std::collections::HashMap;

use sea_orm::{ConnectionTrait, DatabaseTransaction, TransactionTrait};

use super::readable::Readable;
use super::search::ChannelHit;
use super::sql::Sql;
use super::{Store, StoreError, StoreResult};
use crate::auth::Principal;
use crate::domain::lexical::{Analyzer, Bm25, Posting};
use crate::domain::Visibility;

/// Bytes per posting in a block: the chunk's id (i64), its analyzed length, the term's count
/// in its body and in its heading (u32 each), little-endian.
const POSTING_BYTES: usize = 20;
/// Block rows per INSERT (4 values each: well under both backends' parameter limits) ...
const BLOCKS_PER_INSERT: usize = 1_000;
/// ... and at most about this many posting bytes per INSERT (a large document's blocks).
const BLOCK_BYTES_PER_INSERT: usize = 4 << 20;
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
    q.push("SELECT term, CAST(chunks AS BIGINT) AS n FROM lexical_blocks WHERE document_id = ")
        .bind(document_id);
    q.push(" ORDER BY term");
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

/// Writes the blocks of a document's current chunks (`terms` by `chunk_index`), its
/// `lexical_documents` row and its share of `lexical_terms`. The document has no blocks yet
/// ([`forget_document`] ran when its chunks were replaced).
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
    // Per term (in order, so concurrent writers lock `lexical_terms` rows in the same order):
    // its block and how many chunks it holds.
    let mut blocks: std::collections::BTreeMap<&str, (Vec<u8>, i64)> =
        std::collections::BTreeMap::new();
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
            let (block, n) = blocks.entry(p.term.as_str()).or_default();
            encode_posting(block, chunk_id, t.len, p);
            *n += 1;
        }
    }
    let blocks: Vec<(String, Vec<u8>, i64)> = blocks
        .into_iter()
        .map(|(t, (b, n))| (t.to_owned(), b, n))
        .collect();
    let mut start = 0;
    while start < blocks.len() {
        let mut end = start;
        let mut bytes = 0usize;
        while end < blocks.len()
            && end - start < BLOCKS_PER_INSERT
            && bytes < BLOCK_BYTES_PER_INSERT
        {
            bytes += blocks[end].1.len();
            end += 1;
        }
        let mut q = Sql::new(backend);
        q.push("INSERT INTO lexical_blocks (term, document_id, chunks, postings) VALUES ");
        for (i, (term, block, n)) in blocks[start..end].iter().enumerate() {
            if i > 0 {
                q.push(", ");
            }
            q.push("(").bind(term.clone()).push(", ").bind(document_id);
            q.push(", ")
                .bind(*n)
                .push(", ")
                .bind(block.clone())
                .push(")");
        }
        tx.execute_raw(q.build()).await?;
        start = end;
    }
    let counts: Vec<(String, i64)> = blocks.into_iter().map(|(t, _, n)| (t, n)).collect();
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

/// Appends one posting to a block.
fn encode_posting(block: &mut Vec<u8>, chunk_id: i64, len: u32, p: &Posting) {
    block.extend_from_slice(&chunk_id.to_le_bytes());
    block.extend_from_slice(&len.to_le_bytes());
    block.extend_from_slice(&p.body.to_le_bytes());
    block.extend_from_slice(&p.heading.to_le_bytes());
}

/// A block's postings: (chunk id, analyzed length, count in the body, count in the heading).
fn decode_block(block: &[u8]) -> StoreResult<impl Iterator<Item = (i64, u32, u32, u32)> + '_> {
    if !block.len().is_multiple_of(POSTING_BYTES) {
        return Err(StoreError::Corrupt(format!(
            "a lexical block of {} bytes (not a multiple of {POSTING_BYTES})",
            block.len()
        )));
    }
    Ok(block.chunks_exact(POSTING_BYTES).map(|p| {
        let mut id = [0u8; 8];
        id.copy_from_slice(&p[..8]);
        let u32_at = |i: usize| {
            let mut v = [0u8; 4];
            v.copy_from_slice(&p[i..i + 4]);
            u32::from_le_bytes(v)
        };
        (i64::from_le_bytes(id), u32_at(8), u32_at(12), u32_at(16))
    }))
}

/// Removes a document's lexical rows (before its chunks are deleted or replaced): its share
/// of `lexical_terms`, its postings, its totals.
pub(crate) async fn forget_document(tx: &DatabaseTransaction, document_id: i64) -> StoreResult<()> {
    let counts = term_counts(tx, document_id).await?;
    if let Some(scope) = scope_of(tx, document_id).await? {
        add_df(tx, scope, &counts, -1).await?;
    }
    for table in ["lexical_blocks", "lexical_documents"] {
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
        let mut idf: HashMap<String, f64> = HashMap::new();
        let (mut n, mut total) = (0i64, 0i64);
        let mut dfs: Vec<(String, i64)> = Vec::new();
        for r in self.connection().query_all_raw(q.build()).await? {
            let df: i64 = r.try_get_by_index(1)?;
            match r.try_get_by_index::<Option<String>>(0)? {
                Some(term) if df > 0 => dfs.push((term, df)),
                Some(_) => {}
                None => (n, total) = (df, r.try_get_by_index(2)?),
            }
        }
        if dfs.is_empty() || n == 0 {
            return Ok(Vec::new());
        }
        let avg_len = total as f64 / n as f64;
        dfs.sort_unstable();
        let found: Vec<String> = dfs.iter().map(|(t, _)| t.clone()).collect();
        for (term, df) in dfs {
            idf.insert(term, Bm25::idf(n as f64, df as f64));
        }
        // 2. The blocks of those terms in the documents `p` may read. The term's blocks are
        //    taken first (its index), then kept when their document is readable (a hash of
        //    the readable documents): the planner, left to itself, probed every readable
        //    document per term instead, 5x slower at 1,000 documents on PostgreSQL.
        let mut q = Sql::new(self.backend());
        push_readable_documents(&mut q, p, corpora);
        q.push(", bl AS MATERIALIZED (SELECT b.term AS term, b.document_id AS document_id, b.postings AS postings FROM lexical_blocks b WHERE b.term IN ")
            .push_list(found);
        q.push(") SELECT bl.term AS term, bl.postings AS postings FROM bl WHERE bl.document_id IN (SELECT id FROM rd)");
        let rows = self.connection().query_all_raw(q.build()).await?;
        let blocks = rows
            .iter()
            .map(|r| {
                Ok((
                    r.try_get::<String>("", "term")?,
                    r.try_get::<Vec<u8>>("", "postings")?,
                ))
            })
            .collect::<StoreResult<Vec<(String, Vec<u8>)>>>()?;
        drop(rows);
        // 3. BM25 per chunk (CPU work, off the async runtime).
        tokio::task::spawn_blocking(move || score_blocks(blocks, &idf, bm25, avg_len, depth))
            .await
            .map_err(|e| StoreError::Corrupt(format!("lexical scoring panicked: {e}")))?
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

/// The `depth` best chunks of `blocks` (term, packed postings) under BM25 with the terms'
/// `idf`, best first; scores equal to f32 precision are ties, which the chunk id decides.
/// Each chunk's sum adds its terms in term order, so the same blocks give the same bits
/// whatever order they arrive in.
fn score_blocks(
    mut blocks: Vec<(String, Vec<u8>)>,
    idf: &HashMap<String, f64>,
    bm25: Bm25,
    avg_len: f64,
    depth: usize,
) -> StoreResult<Vec<ChannelHit>> {
    blocks.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let postings: usize = blocks.iter().map(|(_, b)| b.len() / POSTING_BYTES).sum();
    let mut sums: HashMap<i64, f64> = HashMap::with_capacity(postings);
    for (term, block) in &blocks {
        let Some(&w) = idf.get(term) else {
            continue;
        };
        for (chunk_id, len, body, heading) in decode_block(block)? {
            let tf = f64::from(body) + bm25.heading_weight * f64::from(heading);
            *sums.entry(chunk_id).or_insert(0.0) += bm25.term_score(w, tf, f64::from(len), avg_len);
        }
    }
    let mut hits: Vec<ChannelHit> = sums
        .into_iter()
        .map(|(chunk_id, s)| ChannelHit {
            chunk_id,
            score: s as f32,
        })
        .collect();
    let order = |a: &ChannelHit, b: &ChannelHit| {
        b.score
            .total_cmp(&a.score)
            .then(a.chunk_id.cmp(&b.chunk_id))
    };
    if hits.len() > depth {
        hits.select_nth_unstable_by(depth, order);
        hits.truncate(depth);
    }
    hits.sort_unstable_by(order);
    Ok(hits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn posting(term: &str, body: u32, heading: u32) -> Posting {
        Posting {
            term: term.to_owned(),
            body,
            heading,
        }
    }

    #[test]
    fn a_block_decodes_to_what_was_encoded() {
        let mut block = Vec::new();
        encode_posting(&mut block, 7, 120, &posting("x", 3, 0));
        encode_posting(&mut block, i64::MAX - 1, u32::MAX, &posting("x", 0, 2));
        assert_eq!(block.len(), 2 * POSTING_BYTES);
        let got: Vec<_> = decode_block(&block).unwrap().collect();
        assert_eq!(got, vec![(7, 120, 3, 0), (i64::MAX - 1, u32::MAX, 0, 2)]);
        assert!(matches!(
            decode_block(&block[..POSTING_BYTES + 3]),
            Err(StoreError::Corrupt(_))
        ));
    }

    #[test]
    fn scores_do_not_depend_on_block_order_and_depth_cuts_the_full_ranking() {
        // Three documents' blocks of two terms; chunk 5 holds both terms.
        let block = |rows: &[(i64, u32, u32, u32)]| {
            let mut b = Vec::new();
            for &(id, len, body, heading) in rows {
                encode_posting(&mut b, id, len, &posting("t", body, heading));
            }
            b
        };
        let blocks = vec![
            ("alpha".to_owned(), block(&[(1, 10, 1, 0), (5, 30, 2, 1)])),
            ("beta".to_owned(), block(&[(5, 30, 1, 0), (9, 8, 1, 0)])),
            ("alpha".to_owned(), block(&[(12, 12, 1, 0)])),
        ];
        let idf: HashMap<String, f64> = [("alpha".to_owned(), 0.7), ("beta".to_owned(), 1.9)]
            .into_iter()
            .collect();
        let bm25 = Bm25::default();
        let full = score_blocks(blocks.clone(), &idf, bm25, 15.0, 100).unwrap();
        assert_eq!(full.len(), 4);
        let mut reversed = blocks.clone();
        reversed.reverse();
        assert_eq!(score_blocks(reversed, &idf, bm25, 15.0, 100).unwrap(), full);
        for depth in 1..4 {
            assert_eq!(
                score_blocks(blocks.clone(), &idf, bm25, 15.0, depth).unwrap(),
                full[..depth]
            );
        }
        // Chunk 5's score is the sum of its two terms, heading weighted.
        let tf_alpha = 2.0 + bm25.heading_weight;
        let want =
            bm25.term_score(0.7, tf_alpha, 30.0, 15.0) + bm25.term_score(1.9, 1.0, 30.0, 15.0);
        let five = full.iter().find(|h| h.chunk_id == 5).unwrap();
        assert_eq!(five.score, want as f32);
        assert!(full.windows(2).all(|w| w[0].score >= w[1].score));
    }
}
