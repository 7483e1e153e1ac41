//! The SQLite vector channel: exact cosine search over in-memory matrices of normalized
//! vectors, one partition per team, one contiguous block per document.
//!
//! Why this shape:
//! - **Exact, not approximate.** SQLite has no vector index; a full scan of 100k × 384 f32
//!   (154 MB) is memory-bound, so the kernel's job is to stream rows at memory bandwidth:
//!   each document's rows are one contiguous `Vec<f32>`, scored by an explicit SIMD kernel
//!   (fused multiply-adds into four accumulators, [`Scores`]) that `pulp` dispatches to the
//!   CPU's best instruction set at run time (AVX-512, AVX2+FMA, NEON),
//!   and large scans are split across threads.
//! - **Visibility before top-k.** Every block carries the facts that decide readability
//!   ([`DocumentAccess`]); the scan skips unreadable blocks with [`auth::can_read_document`],
//!   the same rule the SQL predicate implements (a property test keeps the two equal). Nothing
//!   unreadable is ever scored, so it can never take a top-k slot.
//! - **Kept in step, never reloaded per query.** The store updates the index after every commit
//!   that changes chunks or a document's access facts (ingest, new version, delete, move,
//!   visibility); see `Store::sync_vector_index`. The whole index is read from the database
//!   once, on first use (or again after a failed update, which marks it stale).
//!
//! Another process writing the same database file (for example `cairn ingest` while
//! `cairn serve` runs) is seen through `index_changes` before each search (see
//! `Store::vector_index`).

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::sync::RwLock;

use super::vector::normalize;
use crate::auth::{self, DocumentAccess, Principal};

/// Scans with fewer rows than this stay on the calling thread.
const PARALLEL_MIN_ROWS: usize = 16_384;

/// What the index knows about one document.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DocMeta {
    pub id: i64,
    pub corpus_id: i64,
    pub version: i32,
    pub access: DocumentAccess,
}

struct Block {
    meta: DocMeta,
    chunk_ids: Vec<i64>,
    /// `chunk_ids.len() × dim` normalized f32s, row-major.
    vecs: Vec<f32>,
}

#[derive(Default)]
struct Inner {
    /// team id → document id → block.
    teams: HashMap<i64, HashMap<i64, Block>>,
    /// document id → team id (to find a block from a document id).
    team_of: HashMap<i64, i64>,
    /// Documents in system corpora, readable across teams: document id → team id.
    system: HashMap<i64, i64>,
    rows: usize,
}

/// The in-memory matrix set. Shared by `Arc`; readers scan under a read lock.
pub struct VectorIndex {
    dim: usize,
    threads: usize,
    arch: pulp::Arch,
    inner: RwLock<Inner>,
}

impl std::fmt::Debug for VectorIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VectorIndex")
            .field("dim", &self.dim)
            .field("rows", &self.len())
            .finish()
    }
}

/// A scored chunk: higher is better.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scored {
    pub chunk_id: i64,
    pub score: f32,
}

/// Heap order: "greater" means worse (lower score; on ties, higher chunk id), so a
/// `BinaryHeap` keeps the worst of the current top-k on top.
#[derive(PartialEq)]
struct Worst(Scored);
impl Eq for Worst {}
impl PartialOrd for Worst {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Worst {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .0
            .score
            .total_cmp(&self.0.score)
            .then(self.0.chunk_id.cmp(&other.0.chunk_id))
    }
}

struct TopK {
    k: usize,
    heap: BinaryHeap<Worst>,
}

impl TopK {
    fn new(k: usize) -> TopK {
        TopK {
            k,
            heap: BinaryHeap::with_capacity(k + 1),
        }
    }

    #[inline]
    fn offer(&mut self, s: Scored) {
        if self.heap.len() < self.k {
            self.heap.push(Worst(s));
        } else if let Some(top) = self.heap.peek() {
            if Worst(s).cmp(top) == Ordering::Less {
                self.heap.pop();
                self.heap.push(Worst(s));
            }
        }
    }

    fn merge(mut self, other: TopK) -> TopK {
        for w in other.heap {
            self.offer(w.0);
        }
        self
    }

    /// Best first.
    fn into_sorted(self) -> Vec<Scored> {
        let mut v: Vec<Scored> = self.heap.into_iter().map(|w| w.0).collect();
        v.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then(a.chunk_id.cmp(&b.chunk_id))
        });
        v
    }
}

impl VectorIndex {
    pub fn new(dim: usize) -> VectorIndex {
        let threads = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .clamp(1, 8);
        VectorIndex::with_threads(dim, threads)
    }

    pub fn with_threads(dim: usize, threads: usize) -> VectorIndex {
        VectorIndex {
            dim,
            threads: threads.max(1),
            arch: pulp::Arch::new(),
            inner: RwLock::new(Inner::default()),
        }
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Rows (chunks) held.
    pub fn len(&self) -> usize {
        self.inner.read().map(|i| i.rows).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The version and row count held for a document, if any.
    pub fn held(&self, doc_id: i64) -> Option<(i32, usize)> {
        let inner = self.inner.read().ok()?;
        let team = inner.team_of.get(&doc_id)?;
        let b = inner.teams.get(team)?.get(&doc_id)?;
        Some((b.meta.version, b.chunk_ids.len()))
    }

    /// Replaces a document's block. `vecs` holds `chunk_ids.len()` rows of `dim` floats; each
    /// row is normalized here. Rows of the wrong length are refused (returns false).
    pub fn upsert(&self, meta: DocMeta, chunk_ids: Vec<i64>, mut vecs: Vec<f32>) -> bool {
        if vecs.len() != chunk_ids.len() * self.dim {
            return false;
        }
        for row in vecs.chunks_exact_mut(self.dim) {
            normalize(row);
        }
        let Ok(mut inner) = self.inner.write() else {
            return false;
        };
        remove_locked(&mut inner, meta.id);
        if chunk_ids.is_empty() {
            return true;
        }
        let team = meta.access.team_id;
        inner.rows += chunk_ids.len();
        inner.team_of.insert(meta.id, team);
        if meta.access.in_system_corpus {
            inner.system.insert(meta.id, team);
        }
        inner.teams.entry(team).or_default().insert(
            meta.id,
            Block {
                meta,
                chunk_ids,
                vecs,
            },
        );
        true
    }

    /// Updates a document's access facts and corpus (a move or a visibility change) without
    /// touching its vectors. Returns false when the index holds no block for it.
    pub fn set_meta(&self, meta: DocMeta) -> bool {
        let Ok(mut inner) = self.inner.write() else {
            return false;
        };
        let Some(&old_team) = inner.team_of.get(&meta.id) else {
            return false;
        };
        let Some(mut block) = inner
            .teams
            .get_mut(&old_team)
            .and_then(|t| t.remove(&meta.id))
        else {
            return false;
        };
        block.meta = meta;
        let team = meta.access.team_id;
        inner.team_of.insert(meta.id, team);
        if meta.access.in_system_corpus {
            inner.system.insert(meta.id, team);
        } else {
            inner.system.remove(&meta.id);
        }
        inner.teams.entry(team).or_default().insert(meta.id, block);
        true
    }

    pub fn remove(&self, doc_id: i64) {
        if let Ok(mut inner) = self.inner.write() {
            remove_locked(&mut inner, doc_id);
        }
    }

    /// The `k` best chunks by cosine among the blocks `p` may read (in `corpora` when given).
    /// CPU-bound: call it from a blocking thread.
    pub fn search(
        &self,
        p: &Principal,
        corpora: Option<&[i64]>,
        query: &[f32],
        k: usize,
    ) -> Vec<Scored> {
        if query.len() != self.dim || k == 0 {
            return Vec::new();
        }
        let mut q = query.to_vec();
        normalize(&mut q);
        let Ok(inner) = self.inner.read() else {
            return Vec::new();
        };
        let wanted = |b: &Block| {
            auth::can_read_document(p, &b.meta.access)
                && corpora.is_none_or(|c| c.contains(&b.meta.corpus_id))
        };
        let mut blocks: Vec<&Block> = Vec::new();
        if let Some(own) = inner.teams.get(&p.team_id) {
            blocks.extend(own.values().filter(|b| wanted(b)));
        }
        for (doc, team) in &inner.system {
            if *team == p.team_id {
                continue; // already scanned with the team's own blocks
            }
            if let Some(b) = inner.teams.get(team).and_then(|t| t.get(doc)) {
                if wanted(b) {
                    blocks.push(b);
                }
            }
        }
        let rows: usize = blocks.iter().map(|b| b.chunk_ids.len()).sum();
        let parts = if rows < PARALLEL_MIN_ROWS {
            1
        } else {
            self.threads
        };
        if parts == 1 {
            let mut top = TopK::new(k);
            let mut scratch = Vec::new();
            for b in &blocks {
                self.scan(b, 0, b.chunk_ids.len(), &q, &mut top, &mut scratch);
            }
            return top.into_sorted();
        }
        let work = split(&blocks, rows, parts);
        let merged = std::thread::scope(|s| {
            let handles: Vec<_> = work
                .iter()
                .map(|slices| {
                    let q = &q;
                    s.spawn(move || {
                        let mut top = TopK::new(k);
                        let mut scratch = Vec::new();
                        for &(b, from, to) in slices {
                            self.scan(b, from, to, q, &mut top, &mut scratch);
                        }
                        top
                    })
                })
                .collect();
            let mut all = TopK::new(k);
            for h in handles {
                if let Ok(t) = h.join() {
                    all = all.merge(t);
                }
            }
            all
        });
        merged.into_sorted()
    }

    /// Scores rows `from..to` of a block into `top`. `scores` is the caller's scratch buffer,
    /// reused across blocks so the scan allocates once per thread, not once per document.
    fn scan(
        &self,
        b: &Block,
        from: usize,
        to: usize,
        q: &[f32],
        top: &mut TopK,
        scores: &mut Vec<f32>,
    ) {
        let dim = self.dim;
        let rows = &b.vecs[from * dim..to * dim];
        let ids = &b.chunk_ids[from..to];
        scores.clear();
        scores.resize(ids.len(), 0.0);
        self.arch.dispatch(Scores {
            q,
            rows,
            out: scores,
        });
        for (&chunk_id, &score) in ids.iter().zip(scores.iter()) {
            top.offer(Scored { chunk_id, score });
        }
    }
}

/// The exact scan's kernel: the dot product of `q` with each row of `rows` (rows of
/// `q.len()` floats) into `out`, in the vector width `pulp` dispatched to (AVX-512 where the
/// CPU has it, else AVX2 with FMA), with four independent accumulators per row so the fused
/// multiply-adds do not wait on each other's latency. It replaced a loop over `vector::dot` that the compiler
/// vectorized only 128 bits wide and that ran at 7.5 GB/s where a plain sum of the same
/// matrix streams at 17-18 GB/s (ARCHITECTURE.md, "Search"). The sums are reassociated and
/// fused, so a score may differ from `vector::dot`'s in its last bits.
struct Scores<'a> {
    q: &'a [f32],
    rows: &'a [f32],
    out: &'a mut [f32],
}

impl pulp::WithSimd for Scores<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, simd: S) {
        let dim = self.q.len();
        if dim == 0 {
            self.out.fill(0.0);
            return;
        }
        let (qh, qt) = S::as_simd_f32s(self.q);
        for (out, row) in self.out.iter_mut().zip(self.rows.chunks_exact(dim)) {
            let (rh, rt) = S::as_simd_f32s(row);
            let zero = simd.splat_f32s(0.0);
            let mut acc = [zero; 4];
            let mut qc = qh.chunks_exact(4);
            let mut rc = rh.chunks_exact(4);
            for (x, y) in (&mut qc).zip(&mut rc) {
                for i in 0..4 {
                    acc[i] = simd.mul_add_f32s(x[i], y[i], acc[i]);
                }
            }
            for (x, y) in qc.remainder().iter().zip(rc.remainder()) {
                acc[0] = simd.mul_add_f32s(*x, *y, acc[0]);
            }
            let sum = simd.add_f32s(simd.add_f32s(acc[0], acc[1]), simd.add_f32s(acc[2], acc[3]));
            let mut total = simd.reduce_sum_f32s(sum);
            for (x, y) in qt.iter().zip(rt) {
                total += x * y;
            }
            *out = total;
        }
    }
}

fn remove_locked(inner: &mut Inner, doc_id: i64) {
    if let Some(team) = inner.team_of.remove(&doc_id) {
        inner.system.remove(&doc_id);
        if let Some(t) = inner.teams.get_mut(&team) {
            if let Some(b) = t.remove(&doc_id) {
                inner.rows -= b.chunk_ids.len();
            }
        }
    }
}

type Slice<'a> = (&'a Block, usize, usize);

/// Splits the blocks into `parts` runs of about equal row counts, cutting blocks where needed.
fn split<'a>(blocks: &[&'a Block], rows: usize, parts: usize) -> Vec<Vec<Slice<'a>>> {
    let share = rows.div_ceil(parts).max(1);
    let mut out: Vec<Vec<Slice<'a>>> = vec![Vec::new()];
    let mut filled = 0usize;
    for &b in blocks {
        let n = b.chunk_ids.len();
        let mut from = 0;
        while from < n {
            if filled == share {
                out.push(Vec::new());
                filled = 0;
            }
            let take = (share - filled).min(n - from);
            if let Some(last) = out.last_mut() {
                last.push((b, from, from + take));
            }
            filled += take;
            from += take;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Role, Visibility};
    use rand::{Rng, SeedableRng};

    fn principal(team: i64, user: i64) -> Principal {
        Principal {
            user_id: user,
            team_id: team,
            role: Role::Member,
            name: "t".into(),
            token_id: 0,
        }
    }

    fn meta(id: i64, team: i64, owner: i64, vis: Visibility, corpus: i64, sys: bool) -> DocMeta {
        DocMeta {
            id,
            corpus_id: corpus,
            version: 1,
            access: DocumentAccess {
                team_id: team,
                owner_id: owner,
                visibility: vis,
                in_system_corpus: sys,
            },
        }
    }

    fn random_rows(rng: &mut rand::rngs::StdRng, n: usize, dim: usize) -> Vec<f32> {
        (0..n * dim).map(|_| rng.random_range(-1.0..1.0)).collect()
    }

    /// The plain definition: normalize both, dot, sort.
    fn brute(q: &[f32], rows: &[(i64, Vec<f32>)], k: usize) -> Vec<i64> {
        let mut q = q.to_vec();
        normalize(&mut q);
        let mut s: Vec<(f32, i64)> = rows
            .iter()
            .map(|(id, v)| {
                let mut v = v.clone();
                normalize(&mut v);
                (q.iter().zip(&v).map(|(a, b)| a * b).sum::<f32>(), *id)
            })
            .collect();
        s.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        s.into_iter().take(k).map(|x| x.1).collect()
    }

    #[test]
    fn matches_brute_force_single_and_multi_threaded() {
        let dim = 37; // not a multiple of the lane count: exercises the tail
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for threads in [1, 3] {
            let ix = VectorIndex::with_threads(dim, threads);
            let mut all = Vec::new();
            let mut next_chunk = 0;
            for doc in 0..40 {
                let n = 1 + (doc * 997) % 900; // 20k+ rows in all: the parallel path runs
                let vecs = random_rows(&mut rng, n, dim);
                let ids: Vec<i64> = (next_chunk..next_chunk + n as i64).collect();
                next_chunk += n as i64;
                for (i, id) in ids.iter().enumerate() {
                    all.push((*id, vecs[i * dim..(i + 1) * dim].to_vec()));
                }
                assert!(ix.upsert(
                    meta(doc as i64, 1, 1, Visibility::Team, 1, false),
                    ids,
                    vecs
                ));
            }
            assert!(ix.len() > PARALLEL_MIN_ROWS);
            let q = random_rows(&mut rng, 1, dim);
            let got: Vec<i64> = ix
                .search(&principal(1, 1), None, &q, 25)
                .iter()
                .map(|s| s.chunk_id)
                .collect();
            assert_eq!(got, brute(&q, &all, 25), "threads={threads}");
        }
    }

    #[test]
    fn unreadable_blocks_never_take_a_slot() {
        let dim = 8;
        let ix = VectorIndex::with_threads(dim, 1);
        let q = vec![1.0; dim];
        // The private document is the perfect match; the team one is orthogonal-ish.
        ix.upsert(
            meta(1, 1, 10, Visibility::Private, 1, false),
            vec![100],
            vec![1.0; dim],
        );
        let mut other = vec![0.0; dim];
        other[0] = 1.0;
        ix.upsert(
            meta(2, 1, 10, Visibility::Team, 1, false),
            vec![200],
            other.clone(),
        );
        ix.upsert(
            meta(3, 2, 30, Visibility::Team, 5, false),
            vec![300],
            vec![1.0; dim],
        );
        ix.upsert(meta(4, 2, 30, Visibility::Team, 6, true), vec![400], other);
        let ids = |p: &Principal, c: Option<&[i64]>| -> Vec<i64> {
            ix.search(p, c, &q, 10).iter().map(|s| s.chunk_id).collect()
        };
        // Owner sees the private doc first; a colleague never sees it.
        assert_eq!(ids(&principal(1, 10), None), vec![100, 200, 400]);
        assert_eq!(ids(&principal(1, 11), None), vec![200, 400]);
        // Another team sees its own and the system corpus only.
        assert_eq!(ids(&principal(2, 30), None), vec![300, 400]);
        assert_eq!(ids(&principal(2, 30), Some(&[6])), vec![400]);
        // A visibility change follows without touching vectors.
        assert!(ix.set_meta(meta(1, 1, 10, Visibility::Team, 1, false)));
        assert_eq!(ids(&principal(1, 11), None), vec![100, 200, 400]);
        // A move into another corpus follows the corpus filter.
        assert!(ix.set_meta(meta(2, 1, 10, Visibility::Team, 9, false)));
        assert_eq!(ids(&principal(1, 11), Some(&[9])), vec![200]);
        // Removal.
        ix.remove(1);
        assert_eq!(ids(&principal(1, 10), None), vec![200, 400]);
        assert_eq!(ix.len(), 3);
        // A new version replaces the block.
        ix.upsert(
            meta(2, 1, 10, Visibility::Team, 9, false),
            vec![201, 202],
            vec![0.5; 2 * dim],
        );
        assert_eq!(ix.held(2), Some((1, 2)));
        assert_eq!(ix.len(), 4);
    }

    #[test]
    fn wrong_lengths_are_refused() {
        let ix = VectorIndex::with_threads(4, 1);
        assert!(!ix.upsert(
            meta(1, 1, 1, Visibility::Team, 1, false),
            vec![1],
            vec![1.0; 3]
        ));
        assert!(ix.search(&principal(1, 1), None, &[1.0; 3], 5).is_empty());
    }

    #[test]
    fn scan_kernel_matches_the_exact_dot_product() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        for dim in [1, 5, 8, 16, 37, 64, 384, 385] {
            let q = random_rows(&mut rng, 1, dim);
            let rows = random_rows(&mut rng, 9, dim);
            let mut out = vec![f32::NAN; 9];
            pulp::Arch::new().dispatch(Scores {
                q: &q,
                rows: &rows,
                out: &mut out,
            });
            for (r, got) in out.iter().enumerate() {
                let want: f64 = q
                    .iter()
                    .zip(&rows[r * dim..(r + 1) * dim])
                    .map(|(a, b)| f64::from(*a) * f64::from(*b))
                    .sum();
                assert!(
                    (f64::from(*got) - want).abs() <= 1e-5,
                    "dim {dim} row {r}: {got} vs {want}"
                );
                let plain = crate::store::vector::dot(&q, &rows[r * dim..(r + 1) * dim]);
                assert!((got - plain).abs() <= 1e-5);
            }
        }
    }

    #[test]
    fn split_covers_every_row_once() {
        let dim = 2;
        let ix = VectorIndex::with_threads(dim, 1);
        for d in 0..5 {
            let n = [3usize, 10, 1, 7, 4][d];
            ix.upsert(
                meta(d as i64, 1, 1, Visibility::Team, 1, false),
                (0..n as i64).map(|i| d as i64 * 100 + i).collect(),
                vec![1.0; n * dim],
            );
        }
        let inner = ix.inner.read().unwrap_or_else(|e| panic!("lock: {e}"));
        let blocks: Vec<&Block> = inner.teams[&1].values().collect();
        for parts in 1..6 {
            let work = split(&blocks, 25, parts);
            assert!(work.len() <= parts);
            let mut seen: Vec<i64> = work
                .iter()
                .flatten()
                .flat_map(|(b, f, t)| b.chunk_ids[*f..*t].to_vec())
                .collect();
            seen.sort();
            assert_eq!(seen.len(), 25);
            seen.dedup();
            assert_eq!(seen.len(), 25);
        }
    }
}
