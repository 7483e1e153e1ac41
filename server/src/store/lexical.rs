//! The lexical channel: BM25 over Cairn's own postings, the same SQL on both backends.
//!
//! Tables (migrations 4 and 8):
//! - `lexical_blocks`: per (term, document, part), the postings of the term in the document's
//!   current chunks, packed (see [`encode_part`]: four LEB128 varints per posting, about 5
//!   bytes), parts of at most [`PART_BYTES`], and how many postings each part holds. Both
//!   backends keep the rows in key order (PostgreSQL: in the primary key's index, which
//!   includes the postings; SQLite: `WITHOUT ROWID`), so a term's rows are neighbours;
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

/// The most posting bytes in one `lexical_blocks` row: small enough to stay inside a b-tree
/// page on SQLite (no overflow pages below about 1,000 bytes of row at 4 KiB pages) and
/// inside an index entry on PostgreSQL (at most 2,704 bytes).
const PART_BYTES: usize = 900;
/// The longest posting: a 64-bit varint and three 32-bit ones.
const MAX_POSTING_BYTES: usize = 10 + 3 * 5;
/// Block rows per INSERT (5 values each: well under both backends' parameter limits) ...
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
    q.push(
        "SELECT term, CAST(SUM(chunks) AS BIGINT) AS n FROM lexical_blocks WHERE document_id = ",
    )
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
    // its postings as (chunk id, length, body, heading).
    let mut by_term: std::collections::BTreeMap<&str, Vec<(i64, u32, u32, u32)>> =
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
            by_term
                .entry(p.term.as_str())
                .or_default()
                .push((chunk_id, t.len, p.body, p.heading));
        }
    }
    let mut counts: Vec<(String, i64)> = Vec::with_capacity(by_term.len());
    // (term, part, postings in the part, bytes)
    let mut rows: Vec<(&str, i64, i64, Vec<u8>)> = Vec::new();
    for (term, mut postings) in by_term {
        postings.sort_unstable();
        counts.push((term.to_owned(), postings.len() as i64));
        for (part, (n, bytes)) in encode_parts(&postings).into_iter().enumerate() {
            rows.push((term, part as i64, n, bytes));
        }
    }
    let mut start = 0;
    while start < rows.len() {
        let mut end = start;
        let mut bytes = 0usize;
        while end < rows.len() && end - start < BLOCKS_PER_INSERT && bytes < BLOCK_BYTES_PER_INSERT
        {
            bytes += rows[end].3.len();
            end += 1;
        }
        let mut q = Sql::new(backend);
        q.push("INSERT INTO lexical_blocks (term, document_id, part, chunks, postings) VALUES ");
        for (i, (term, part, n, block)) in rows[start..end].iter().enumerate() {
            if i > 0 {
                q.push(", ");
            }
            q.push("(")
                .bind((*term).to_owned())
                .push(", ")
                .bind(document_id);
            q.push(", ").bind(*part).push(", ").bind(*n);
            q.push(", ").bind(block.clone()).push(")");
        }
        tx.execute_raw(q.build()).await?;
        start = end;
    }
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

/// Appends `v` as an unsigned LEB128 varint.
fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads an unsigned LEB128 varint at `*at`, advancing it; `None` when the bytes end inside
/// one or it overflows 64 bits.
fn get_varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    let mut shift = 0u32;
    loop {
        let b = *bytes.get(*at)?;
        *at += 1;
        if shift > 63 {
            return None;
        }
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(v);
        }
        shift += 7;
    }
}

/// A term's postings in one document, (chunk id, analyzed length, count in the body, count
/// in the heading) in ascending chunk id order, as parts of at most [`PART_BYTES`] (one
/// posting at least), each with how many postings it holds. A posting is four varints: the
/// chunk id's distance from the part's previous one (from 0 for its first), the length, the
/// two counts.
fn encode_parts(postings: &[(i64, u32, u32, u32)]) -> Vec<(i64, Vec<u8>)> {
    let mut parts: Vec<(i64, Vec<u8>)> = Vec::new();
    let mut part: Vec<u8> = Vec::new();
    let (mut n, mut prev) = (0i64, 0i64);
    let mut one = Vec::with_capacity(32);
    for &(id, len, body, heading) in postings {
        if n > 0 && part.len() + MAX_POSTING_BYTES > PART_BYTES {
            parts.push((n, std::mem::take(&mut part)));
            (n, prev) = (0, 0);
        }
        one.clear();
        // Ascending ids (sorted, distinct, positive): the distance is never negative.
        put_varint(&mut one, id.abs_diff(prev));
        put_varint(&mut one, u64::from(len));
        put_varint(&mut one, u64::from(body));
        put_varint(&mut one, u64::from(heading));
        part.extend_from_slice(&one);
        (n, prev) = (n + 1, id);
    }
    if n > 0 {
        parts.push((n, part));
    }
    parts
}

/// Calls `f` with each posting of an encoded part: (chunk id, analyzed length, count in the
/// body, count in the heading).
fn decode_part(bytes: &[u8], mut f: impl FnMut(i64, u32, u32, u32)) -> StoreResult<()> {
    let corrupt = || StoreError::Corrupt(format!("a lexical block of {} bytes", bytes.len()));
    let (mut at, mut id) = (0usize, 0i64);
    while at < bytes.len() {
        let mut next = || get_varint(bytes, &mut at).ok_or_else(corrupt);
        let delta = i64::try_from(next()?).map_err(|_| corrupt())?;
        id = id.checked_add(delta).ok_or_else(corrupt)?;
        let len = u32::try_from(next()?).map_err(|_| corrupt())?;
        let body = u32::try_from(next()?).map_err(|_| corrupt())?;
        let heading = u32::try_from(next()?).map_err(|_| corrupt())?;
        f(id, len, body, heading);
    }
    Ok(())
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
        for r in self.channel_connection().query_all_raw(q.build()).await? {
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
        // 2. The blocks of those terms in the documents `p` may read. The terms' rows are
        //    read first, in key order (on PostgreSQL from the primary key's index alone),
        //    then kept when their document is readable (a hash of the readable documents):
        //    the planner, left to itself, probed every readable document per term instead,
        //    5x slower at 1,000 documents on PostgreSQL.
        let mut q = Sql::new(self.backend());
        push_readable_documents(&mut q, p, corpora);
        q.push(", bl AS MATERIALIZED (SELECT b.term AS term, b.document_id AS document_id, b.postings AS postings FROM lexical_blocks b WHERE b.term IN ")
            .push_list(found);
        q.push(") SELECT bl.term AS term, bl.postings AS postings FROM bl WHERE bl.document_id IN (SELECT id FROM rd)");
        let rows = self.channel_connection().query_all_raw(q.build()).await?;
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
    // Every posting's term score, in term order.
    let mut scored: Vec<(i64, f64)> = Vec::new();
    let (mut lo, mut hi) = (i64::MAX, i64::MIN);
    for (term, block) in &blocks {
        let Some(&w) = idf.get(term) else {
            continue;
        };
        decode_part(block, |chunk_id, len, body, heading| {
            let tf = f64::from(body) + bm25.heading_weight * f64::from(heading);
            scored.push((chunk_id, bm25.term_score(w, tf, f64::from(len), avg_len)));
            (lo, hi) = (lo.min(chunk_id), hi.max(chunk_id));
        })?;
    }
    drop(blocks);
    if scored.is_empty() {
        return Ok(Vec::new());
    }
    let mut hits: Vec<ChannelHit> = Vec::new();
    let span = usize::try_from(hi.wrapping_sub(lo)).unwrap_or(usize::MAX);
    if span < 8 * scored.len() + (1 << 16) {
        // Ids close together (the usual case): a dense array of sums. Slots start at -0.0,
        // which no sum of term scores (all >= 0) leaves negative: a slot whose sign bit is
        // clear was touched, and -0.0 + x == x, so the bits equal the sparse sum's.
        let mut sums = vec![-0.0f64; span + 1];
        for &(chunk_id, v) in &scored {
            if let Some(slot) = usize::try_from(chunk_id - lo)
                .ok()
                .and_then(|i| sums.get_mut(i))
            {
                *slot += v;
            }
        }
        hits.extend(
            sums.iter()
                .enumerate()
                .filter(|(_, s)| !s.is_sign_negative())
                .map(|(i, s)| ChannelHit {
                    chunk_id: lo + i as i64,
                    score: *s as f32,
                }),
        );
    } else {
        let mut sums: HashMap<i64, f64> = HashMap::with_capacity(scored.len());
        for &(chunk_id, v) in &scored {
            *sums.entry(chunk_id).or_insert(0.0) += v;
        }
        hits.extend(sums.into_iter().map(|(chunk_id, s)| ChannelHit {
            chunk_id,
            score: s as f32,
        }));
    }
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

    fn decode(bytes: &[u8]) -> StoreResult<Vec<(i64, u32, u32, u32)>> {
        let mut got = Vec::new();
        decode_part(bytes, |a, b, c, d| got.push((a, b, c, d)))?;
        Ok(got)
    }

    #[test]
    fn parts_decode_to_what_was_encoded() {
        let postings: Vec<(i64, u32, u32, u32)> = (0..1_000i64)
            .map(|i| (1 + i * i, (i * 7) as u32, (i % 5) as u32, (i % 3) as u32))
            .chain([(i64::MAX - 1, u32::MAX, u32::MAX, 0), (i64::MAX, 0, 1, 1)])
            .collect();
        let parts = encode_parts(&postings);
        assert!(parts.len() > 1, "a thousand postings take several parts");
        let mut got = Vec::new();
        for (n, bytes) in &parts {
            assert!(bytes.len() <= PART_BYTES, "{}", bytes.len());
            let one = decode(bytes).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(one.len() as i64, *n);
            got.extend(one);
        }
        assert_eq!(got, postings);
        // Small ids and counts take a byte each: about 5 bytes a posting.
        let small = encode_parts(&[(3, 120, 1, 0), (4, 90, 2, 1)]);
        assert_eq!(small, vec![(2, vec![3, 120, 1, 0, 1, 90, 2, 1])]);
        // Truncated inside a varint, or a value past u32: corrupt, not a wrong posting.
        let (_, bytes) = &parts[0];
        assert!(matches!(
            decode(&bytes[..bytes.len() - 1]),
            Err(StoreError::Corrupt(_))
        ));
        assert!(matches!(decode(&[1, 0x80]), Err(StoreError::Corrupt(_))));
        assert!(matches!(
            decode(&[1, 0xff, 0xff, 0xff, 0xff, 0x7f, 0, 0]),
            Err(StoreError::Corrupt(_))
        ));
    }

    #[test]
    fn scores_do_not_depend_on_block_order_and_depth_cuts_the_full_ranking() {
        // Three documents' blocks of two terms; chunk 5 holds both terms.
        let block = |rows: &[(i64, u32, u32, u32)]| {
            let parts = encode_parts(rows);
            assert_eq!(parts.len(), 1);
            parts[0].1.clone()
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
        let full =
            score_blocks(blocks.clone(), &idf, bm25, 15.0, 100).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(full.len(), 4);
        let mut reversed = blocks.clone();
        reversed.reverse();
        assert_eq!(
            score_blocks(reversed, &idf, bm25, 15.0, 100).unwrap_or_else(|e| panic!("{e}")),
            full
        );
        for depth in 1..4 {
            assert_eq!(
                score_blocks(blocks.clone(), &idf, bm25, 15.0, depth)
                    .unwrap_or_else(|e| panic!("{e}")),
                full[..depth]
            );
        }
        // Chunk 5's score is the sum of its two terms, heading weighted.
        let tf_alpha = 2.0 + bm25.heading_weight;
        let want =
            bm25.term_score(0.7, tf_alpha, 30.0, 15.0) + bm25.term_score(1.9, 1.0, 30.0, 15.0);
        let five = full
            .iter()
            .find(|h| h.chunk_id == 5)
            .unwrap_or_else(|| panic!("chunk 5 is ranked"));
        assert_eq!(five.score, want as f32);
        assert!(full.windows(2).all(|w| w[0].score >= w[1].score));
        // Ids far apart take the sparse sum: the same scores, bit for bit.
        let far = |id: i64| if id == 12 { 5_000_000_000 } else { id };
        let spread: Vec<(String, Vec<u8>)> = vec![
            ("alpha".to_owned(), block(&[(1, 10, 1, 0), (5, 30, 2, 1)])),
            ("beta".to_owned(), block(&[(5, 30, 1, 0), (9, 8, 1, 0)])),
            ("alpha".to_owned(), block(&[(far(12), 12, 1, 0)])),
        ];
        let sparse = score_blocks(spread, &idf, bm25, 15.0, 100).unwrap_or_else(|e| panic!("{e}"));
        let mapped: Vec<ChannelHit> = full
            .iter()
            .map(|h| ChannelHit {
                chunk_id: far(h.chunk_id),
                score: h.score,
            })
            .collect();
        assert_eq!(sparse, mapped);
    }
}
