//! The synthetic corpus: topic centroids, noisy chunk vectors, Zipf texts, queries, and an
//! exact index over the same matrix.

use cairn::auth::{DocumentAccess, Principal};
use cairn::domain::{Role, Visibility};
use cairn::testing::ChunkRow;
use cairn::testing::{normalize, DocMeta, VectorIndex};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{CHUNKS_PER_DOC, DIM, NOISE, QUERIES, SEED, TOPICS, VOCAB};

fn gaussian(rng: &mut StdRng) -> f32 {
    // Box–Muller; 1 - u keeps the logarithm's argument in (0, 1].
    let u1: f64 = 1.0 - rng.random::<f64>();
    let u2: f64 = rng.random::<f64>();
    ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32
}

fn unit_gaussian(rng: &mut StdRng) -> Vec<f32> {
    let mut v: Vec<f32> = (0..DIM).map(|_| gaussian(rng)).collect();
    normalize(&mut v);
    v
}

/// `normalize(centroid + NOISE · unit Gaussian direction)`.
fn noisy(centroid: &[f32], rng: &mut StdRng) -> Vec<f32> {
    let g = unit_gaussian(rng);
    let mut v: Vec<f32> = centroid
        .iter()
        .zip(&g)
        .map(|(c, n)| c + NOISE * n)
        .collect();
    normalize(&mut v);
    v
}

pub(crate) struct Corpus {
    pub(crate) chunks: usize,
    pub(crate) docs: usize,
    centroids: Vec<Vec<f32>>,
    /// `chunks × DIM`, row `g = doc · CHUNKS_PER_DOC + chunk_index`, unit rows.
    pub(crate) matrix: Vec<f32>,
    /// Topic of each row.
    topic_of: Vec<u16>,
    vocab: Vec<String>,
    /// Cumulative Zipf weights over ranks.
    zipf_cdf: Vec<f64>,
}

fn vocabulary(rng: &mut StdRng) -> Vec<String> {
    const ONSETS: &[&str] = &[
        "b", "br", "c", "ch", "d", "dr", "f", "fl", "g", "gr", "h", "j", "k", "kl", "l", "m", "n",
        "p", "pl", "r", "s", "sh", "st", "t", "tr", "v", "w", "z",
    ];
    const VOWELS: &[&str] = &["a", "e", "i", "o", "u", "ai", "ou", "ea"];
    const CODAS: &[&str] = &["", "", "", "n", "r", "l", "s", "m", "x", "nd", "rt"];
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(VOCAB);
    while out.len() < VOCAB {
        let syllables = rng.random_range(2..=3);
        let mut w = String::new();
        for _ in 0..syllables {
            w.push_str(ONSETS[rng.random_range(0..ONSETS.len())]);
            w.push_str(VOWELS[rng.random_range(0..VOWELS.len())]);
        }
        w.push_str(CODAS[rng.random_range(0..CODAS.len())]);
        if seen.insert(w.clone()) {
            out.push(w);
        }
    }
    out
}

impl Corpus {
    pub(crate) fn generate(chunks: usize) -> Corpus {
        let mut rng = StdRng::seed_from_u64(SEED);
        let vocab = vocabulary(&mut rng);
        let mut acc = 0.0;
        let zipf_cdf: Vec<f64> = (0..VOCAB)
            .map(|r| {
                acc += 1.0 / (r as f64 + 1.0);
                acc
            })
            .collect();
        let centroids: Vec<Vec<f32>> = (0..TOPICS).map(|_| unit_gaussian(&mut rng)).collect();
        let docs = chunks.div_ceil(CHUNKS_PER_DOC);
        let mut matrix = Vec::with_capacity(chunks * DIM);
        let mut topic_of = Vec::with_capacity(chunks);
        for d in 0..docs {
            let doc_topic = rng.random_range(0..TOPICS);
            for _ in 0..Corpus::rows_of(chunks, d) {
                let t = if rng.random_bool(0.8) {
                    doc_topic
                } else {
                    rng.random_range(0..TOPICS)
                };
                matrix.extend(noisy(&centroids[t], &mut rng));
                topic_of.push(t as u16);
            }
        }
        Corpus {
            chunks,
            docs,
            centroids,
            matrix,
            topic_of,
            vocab,
            zipf_cdf,
        }
    }

    fn rows_of(chunks: usize, doc: usize) -> usize {
        CHUNKS_PER_DOC.min(chunks - doc * CHUNKS_PER_DOC)
    }

    fn row(&self, g: usize) -> &[f32] {
        &self.matrix[g * DIM..(g + 1) * DIM]
    }

    /// A word: Zipf rank from the global ranking (half the time) or the topic's own ranking.
    fn word(&self, topic: usize, rng: &mut StdRng) -> &str {
        let total = self.zipf_cdf[VOCAB - 1];
        let u = rng.random::<f64>() * total;
        let rank = self.zipf_cdf.partition_point(|&c| c < u).min(VOCAB - 1);
        let i = if rng.random_bool(0.5) {
            rank
        } else {
            (rank + topic * 7_919) % VOCAB
        };
        &self.vocab[i]
    }

    fn words(&self, topic: usize, n: usize, rng: &mut StdRng) -> String {
        let mut s = String::new();
        for i in 0..n {
            if i > 0 {
                s.push(' ');
            }
            s.push_str(self.word(topic, rng));
        }
        s
    }

    /// A document's chunks (deterministic per document).
    pub(crate) fn chunk_rows(&self, doc: usize) -> Vec<ChunkRow> {
        let mut rng =
            StdRng::seed_from_u64(SEED ^ (doc as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        (0..Corpus::rows_of(self.chunks, doc))
            .map(|i| {
                let g = doc * CHUNKS_PER_DOC + i;
                let topic = usize::from(self.topic_of[g]);
                let section_words = rng.random_range(2..=4);
                let section = self.words(topic, section_words, &mut rng);
                let mut content = String::new();
                let n: usize = rng.random_range(100..=140);
                for s in 0..n.div_ceil(15) {
                    let len = 15.min(n - s * 15);
                    if s > 0 {
                        content.push(' ');
                    }
                    content.push_str(&self.words(topic, len, &mut rng));
                    content.push('.');
                }
                ChunkRow {
                    index: i as i32,
                    content,
                    section: Some(section),
                    page: None,
                    embedding: self.row(g).to_vec(),
                }
            })
            .collect()
    }

    /// `QUERIES` texts of 3–6 words, each from one topic.
    pub(crate) fn query_texts(&self) -> Vec<String> {
        let mut rng = StdRng::seed_from_u64(SEED + 1);
        (0..QUERIES)
            .map(|_| {
                let topic = rng.random_range(0..TOPICS);
                let n = rng.random_range(3..=6);
                self.words(topic, n, &mut rng)
            })
            .collect()
    }

    /// `QUERIES` noisy centroids.
    pub(crate) fn query_vectors(&self) -> Vec<Vec<f32>> {
        let mut rng = StdRng::seed_from_u64(SEED + 2);
        (0..QUERIES)
            .map(|_| {
                let t = rng.random_range(0..TOPICS);
                noisy(&self.centroids[t], &mut rng)
            })
            .collect()
    }

    /// An exact index over the matrix; chunk ids are row numbers, all in team 1.
    pub(crate) fn exact_index(&self, threads: usize) -> VectorIndex {
        let ix = VectorIndex::with_threads(DIM, threads);
        for d in 0..self.docs {
            let from = d * CHUNKS_PER_DOC;
            let n = Corpus::rows_of(self.chunks, d);
            let meta = DocMeta {
                id: d as i64 + 1,
                corpus_id: 1,
                version: 1,
                access: DocumentAccess {
                    team_id: 1,
                    owner_id: 1,
                    visibility: Visibility::Team,
                    in_system_corpus: false,
                },
            };
            let ids: Vec<i64> = (from..from + n).map(|g| g as i64).collect();
            let ok = ix.upsert(
                meta,
                ids,
                self.matrix[from * DIM..(from + n) * DIM].to_vec(),
            );
            assert!(ok, "upsert refused");
        }
        ix
    }
}

pub(crate) fn exact_principal() -> Principal {
    Principal {
        user_id: 1,
        team_id: 1,
        role: Role::Owner,
        name: "bench".into(),
        token_id: 0,
    }
}
