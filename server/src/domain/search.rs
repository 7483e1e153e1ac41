//! Retrieval rules with no I/O: Reciprocal Rank Fusion and the relevance banner (seed 004,
//! "Hybrid retrieval (RRF fusion)" and the first load-bearing behaviour of `search_documents`).

use std::collections::HashMap;

/// RRF's constant: a rank-r hit in a channel contributes `1 / (RRF_K + r)`.
pub const RRF_K: f64 = 60.0;
/// How deep each channel is pulled before fusion.
pub const CHANNEL_DEPTH: usize = 300;

/// A cosine at or above this for the top hit (and [`HIGH_MEAN`] over the top three) is HIGH.
pub const HIGH_TOP: f32 = 0.55;
/// Mean cosine of the top three hits needed for HIGH.
pub const HIGH_MEAN: f32 = 0.40;
/// A top cosine under this is LOW: the corpus does not contain the content.
pub const MODERATE_TOP: f32 = 0.35;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SearchMode {
    Hybrid,
    Vector,
    Lexical,
}

/// The in-band relevance signal: LOW tells the caller (a person or an agent) not to re-search
/// with other words, because the corpus does not hold the content.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Relevance {
    Low,
    Moderate,
    High,
    /// The top hit is there because its words match, not its meaning: a lexical-only hit, or
    /// the lexical channel's first hit with a cosine under [`MODERATE_TOP`]. Showing its low
    /// cosine as "LOW" would be misleading.
    LexicalMatch,
}

/// One chunk after fusion. Ranks are 1-based; `score` is the plain cosine (0.0 when the chunk
/// never entered the vector channel's top [`CHANNEL_DEPTH`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fused {
    pub chunk_id: i64,
    pub score: f32,
    pub vector_rank: Option<u32>,
    pub lexical_rank: Option<u32>,
    pub fused_score: f64,
}

/// How the two channels are fused: a rank-r hit adds `weight / (k + r)` from its channel.
/// The default is the seed's plain RRF (k = 60 for both, equal weights); a deployment may set
/// per-channel constants and a lexical weight (`CAIRN_RRF_*`), which the retrieval test
/// chose on its tuning halves (README, "Retrieval quality").
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fusion {
    pub k_vector: f64,
    pub k_lexical: f64,
    pub lexical_weight: f64,
}

impl Default for Fusion {
    fn default() -> Fusion {
        Fusion {
            k_vector: RRF_K,
            k_lexical: RRF_K,
            lexical_weight: 1.0,
        }
    }
}

/// Fuses two ranked channels (best first) by plain RRF (k = 60). `vector` carries each
/// chunk's cosine. The result is ordered by fused score, then by the better of the two ranks,
/// then by chunk id, so equal inputs always give the same order.
pub fn rrf(vector: &[(i64, f32)], lexical: &[i64]) -> Vec<Fused> {
    fuse(Fusion::default(), vector, lexical)
}

/// [`rrf`] with these constants and weight.
pub fn fuse(f: Fusion, vector: &[(i64, f32)], lexical: &[i64]) -> Vec<Fused> {
    let mut by_id: HashMap<i64, Fused> = HashMap::with_capacity(vector.len() + lexical.len());
    for (i, &(chunk_id, score)) in vector.iter().enumerate() {
        let rank = i as u32 + 1;
        let e = by_id.entry(chunk_id).or_insert(Fused {
            chunk_id,
            score,
            vector_rank: None,
            lexical_rank: None,
            fused_score: 0.0,
        });
        if e.vector_rank.is_none() {
            e.vector_rank = Some(rank);
            e.score = score;
            e.fused_score += 1.0 / (f.k_vector + f64::from(rank));
        }
    }
    for (i, &chunk_id) in lexical.iter().enumerate() {
        let rank = i as u32 + 1;
        let e = by_id.entry(chunk_id).or_insert(Fused {
            chunk_id,
            score: 0.0,
            vector_rank: None,
            lexical_rank: None,
            fused_score: 0.0,
        });
        if e.lexical_rank.is_none() {
            e.lexical_rank = Some(rank);
            e.fused_score += f.lexical_weight / (f.k_lexical + f64::from(rank));
        }
    }
    let mut out: Vec<Fused> = by_id.into_values().collect();
    out.sort_by(|a, b| {
        b.fused_score
            .total_cmp(&a.fused_score)
            .then_with(|| best_rank(a).cmp(&best_rank(b)))
            .then_with(|| a.chunk_id.cmp(&b.chunk_id))
    });
    out
}

fn best_rank(f: &Fused) -> u32 {
    f.vector_rank
        .unwrap_or(u32::MAX)
        .min(f.lexical_rank.unwrap_or(u32::MAX))
}

/// One channel alone, in the shape fusion produces (single-channel modes).
pub fn single_channel(vector: &[(i64, f32)], lexical: &[i64]) -> Vec<Fused> {
    if !vector.is_empty() {
        return vector
            .iter()
            .enumerate()
            .map(|(i, &(chunk_id, score))| Fused {
                chunk_id,
                score,
                vector_rank: Some(i as u32 + 1),
                lexical_rank: None,
                fused_score: 1.0 / (RRF_K + i as f64 + 1.0),
            })
            .collect();
    }
    lexical
        .iter()
        .enumerate()
        .map(|(i, &chunk_id)| Fused {
            chunk_id,
            score: 0.0,
            vector_rank: None,
            lexical_rank: Some(i as u32 + 1),
            fused_score: 1.0 / (RRF_K + i as f64 + 1.0),
        })
        .collect()
}

/// The banner for a result list (best first), with the top cosine and the mean cosine of the
/// top three that decided it.
pub fn relevance(hits: &[Fused]) -> (Relevance, f32, f32) {
    let Some(top) = hits.first() else {
        return (Relevance::Low, 0.0, 0.0);
    };
    let top_score = hits.iter().map(|h| h.score).fold(0.0_f32, f32::max);
    let head: Vec<f32> = hits.iter().take(3).map(|h| h.score).collect();
    let mean = head.iter().sum::<f32>() / head.len() as f32;
    let lexical_top = top.lexical_rank.is_some()
        && (top.vector_rank.is_none() || (top.lexical_rank == Some(1) && top.score < MODERATE_TOP));
    let banner = if lexical_top {
        Relevance::LexicalMatch
    } else if top_score >= HIGH_TOP && mean >= HIGH_MEAN {
        Relevance::High
    } else if top_score >= MODERATE_TOP {
        Relevance::Moderate
    } else {
        Relevance::Low
    };
    (banner, top_score, mean)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(f: &[Fused]) -> Vec<i64> {
        f.iter().map(|x| x.chunk_id).collect()
    }

    #[test]
    fn rrf_by_hand() {
        // vector: 10, 20, 30; lexical: 30, 40, 10.
        // 10: 1/61 + 1/63 = 0.032267; 30: 1/63 + 1/61 = same; 20: 1/62; 40: 1/62.
        let f = rrf(&[(10, 0.9), (20, 0.8), (30, 0.7)], &[30, 40, 10]);
        assert_eq!(ids(&f), vec![10, 30, 20, 40]);
        let ten = f[0];
        assert_eq!(ten.vector_rank, Some(1));
        assert_eq!(ten.lexical_rank, Some(3));
        assert!((ten.fused_score - (1.0 / 61.0 + 1.0 / 63.0)).abs() < 1e-12);
        assert_eq!(ten.score, 0.9);
        let forty = f[3];
        assert_eq!(forty.score, 0.0, "lexical-only hits carry no cosine");
        assert_eq!(forty.vector_rank, None);
        assert!((forty.fused_score - 1.0 / 62.0).abs() < 1e-12);
    }

    #[test]
    fn rrf_rewards_agreement() {
        // 5 is second in both channels and beats each channel's winner.
        let f = rrf(&[(1, 0.9), (5, 0.8), (6, 0.7)], &[2, 5, 7]);
        assert_eq!(f[0].chunk_id, 5);
    }

    #[test]
    fn duplicate_ids_count_once() {
        let f = rrf(&[(1, 0.9), (1, 0.1)], &[1, 1]);
        assert_eq!(f.len(), 1);
        assert!((f[0].fused_score - 2.0 / 61.0).abs() < 1e-12);
        assert_eq!(f[0].score, 0.9);
    }

    fn hit(score: f32, v: Option<u32>, l: Option<u32>) -> Fused {
        Fused {
            chunk_id: 1,
            score,
            vector_rank: v,
            lexical_rank: l,
            fused_score: 0.0,
        }
    }

    #[test]
    fn banners() {
        assert_eq!(relevance(&[]).0, Relevance::Low);
        let high = [
            hit(0.8, Some(1), None),
            hit(0.5, Some(2), None),
            hit(0.45, Some(3), None),
        ];
        assert_eq!(relevance(&high).0, Relevance::High);
        let one_good = [
            hit(0.6, Some(1), None),
            hit(0.1, Some(2), None),
            hit(0.1, Some(3), None),
        ];
        assert_eq!(relevance(&one_good).0, Relevance::Moderate);
        assert_eq!(relevance(&[hit(0.2, Some(1), Some(2))]).0, Relevance::Low);
        assert_eq!(
            relevance(&[hit(0.0, None, Some(1))]).0,
            Relevance::LexicalMatch
        );
        assert_eq!(
            relevance(&[hit(0.2, Some(4), Some(1))]).0,
            Relevance::LexicalMatch
        );
        assert_eq!(relevance(&[hit(0.7, Some(1), Some(1))]).0, Relevance::High);
    }
}
