//! The lexical channel's analyzer and its BM25 parameters, with no I/O.
//!
//! One analyzer serves both backends, at index time and at query time, so SQLite and
//! PostgreSQL hold the same terms and rank the same chunks in the same order: Unicode words
//! (letters and digits), lowercased, English stopwords dropped, Snowball (Porter 2) English
//! stems (the `rust-stemmers` crate, tantivy's). The store keeps one posting per (term,
//! chunk) with the term's count in the chunk's body and in its heading; BM25 is computed over
//! them with [`Bm25::term_score`] (see `store::lexical`).
//!
//! BM25 follows Lucene's `BM25Similarity`:
//! `idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))`, and a term's part of a chunk's score is
//! `idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avglen))`, where `tf` counts a heading
//! occurrence [`Bm25::heading_weight`] times (FTS5's column weights do the same), `len` is the
//! chunk's analyzed length (heading and body) and `N`, `df`, `avglen` are taken over the
//! chunks the searcher may read in the corpora searched: statistics never reflect text the
//! searcher cannot read.

use std::collections::HashMap;

use rust_stemmers::{Algorithm, Stemmer};

/// At most this many distinct query terms reach the lexical channel.
pub const MAX_QUERY_TERMS: usize = 32;
/// Longer "words" (hashes, base64, run-together junk) are not indexed.
pub const MAX_TERM_CHARS: usize = 40;

/// BM25's parameters. Defaults: Lucene's `k1 = 1.2`, `b = 0.75`; the heading weight keeps the
/// seed's "a heading match outranks a body match".
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bm25 {
    /// Term-frequency saturation.
    pub k1: f64,
    /// Length normalization: 0 ignores a chunk's length, 1 normalizes fully.
    pub b: f64,
    /// How many body occurrences one occurrence in the chunk's heading counts as.
    pub heading_weight: f64,
}

impl Default for Bm25 {
    fn default() -> Bm25 {
        Bm25 {
            k1: 1.2,
            b: 0.75,
            heading_weight: 2.0,
        }
    }
}

impl Bm25 {
    /// Lucene's idf: always positive, so a term in most chunks still adds a little.
    pub fn idf(n: f64, df: f64) -> f64 {
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
    }

    /// One term's contribution to a chunk's score.
    pub fn term_score(&self, idf: f64, tf: f64, len: f64, avg_len: f64) -> f64 {
        let norm = self.k1 * (1.0 - self.b + self.b * len / avg_len.max(1e-9));
        idf * tf * (self.k1 + 1.0) / (tf + norm)
    }
}

/// English words that carry no lexical signal (Lucene's English stop set, the auxiliaries and
/// pronouns of questions, and the pieces that contractions split into).
const STOPWORDS: &[&str] = &[
    "a", "about", "an", "and", "are", "as", "at", "be", "been", "but", "by", "can", "could", "d",
    "did", "do", "does", "for", "from", "had", "has", "have", "he", "her", "his", "how", "i", "if",
    "in", "into", "is", "it", "its", "ll", "m", "me", "my", "no", "not", "of", "on", "or", "our",
    "re", "s", "she", "should", "so", "such", "t", "than", "that", "the", "their", "them", "then",
    "there", "these", "they", "this", "those", "to", "us", "ve", "was", "we", "were", "what",
    "when", "where", "which", "who", "whom", "why", "will", "with", "would", "you", "your",
];

/// The analyzer. Building one is cheap; it holds the stemmer.
pub struct Analyzer {
    stemmer: Stemmer,
}

impl Default for Analyzer {
    fn default() -> Analyzer {
        Analyzer::new()
    }
}

impl Analyzer {
    pub fn new() -> Analyzer {
        Analyzer {
            stemmer: Stemmer::create(Algorithm::English),
        }
    }

    /// Every term of `text` in order (repeats kept).
    pub fn terms<'a>(&'a self, text: &'a str) -> impl Iterator<Item = String> + 'a {
        text.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty() && w.chars().count() <= MAX_TERM_CHARS)
            .filter_map(move |w| {
                let w = w.to_lowercase();
                if STOPWORDS.binary_search(&w.as_str()).is_ok() {
                    return None;
                }
                Some(self.stemmer.stem(&w).into_owned())
            })
    }

    /// The query's distinct terms, in order, at most [`MAX_QUERY_TERMS`]. Only these reach
    /// the lexical query (as bound values), so no user text is ever parsed as query syntax.
    pub fn query_terms(&self, query: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for t in self.terms(query) {
            if !out.contains(&t) {
                out.push(t);
                if out.len() == MAX_QUERY_TERMS {
                    break;
                }
            }
        }
        out
    }

    /// A chunk's postings: each distinct term with its counts in the body and in the heading,
    /// sorted by term, and the chunk's analyzed length (heading and body terms).
    pub fn postings(&self, heading: Option<&str>, body: &str) -> (Vec<Posting>, u32) {
        let mut by_term: HashMap<String, (u32, u32)> = HashMap::new();
        let mut len = 0u32;
        for t in self.terms(body) {
            by_term.entry(t).or_default().0 += 1;
            len += 1;
        }
        for t in heading.into_iter().flat_map(|h| self.terms(h)) {
            by_term.entry(t).or_default().1 += 1;
            len += 1;
        }
        let mut out: Vec<Posting> = by_term
            .into_iter()
            .map(|(term, (body, heading))| Posting {
                term,
                body,
                heading,
            })
            .collect();
        out.sort_by(|a, b| a.term.cmp(&b.term));
        (out, len)
    }
}

/// One term of one chunk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Posting {
    pub term: String,
    /// Occurrences in the body.
    pub body: u32,
    /// Occurrences in the heading.
    pub heading: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stopwords_are_sorted_for_binary_search() {
        assert!(STOPWORDS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn query_terms_are_stems_without_stopwords() {
        let a = Analyzer::new();
        assert_eq!(
            a.query_terms("What fraction of incoming sunlight does a surface reflect?"),
            vec!["fraction", "incom", "sunlight", "surfac", "reflect"]
        );
        // Repeats count once; case and punctuation do not matter; syntax is just words.
        assert_eq!(
            a.query_terms("Running RUNS run; \"OR\" NEAR(x) -y*"),
            vec!["run", "near", "x", "y"]
        );
        assert_eq!(a.query_terms("QZV-0093"), vec!["qzv", "0093"]);
        assert!(a.query_terms("the of and to").is_empty());
        let many: String = (0..100).map(|i| format!("w{i} ")).collect();
        assert_eq!(a.query_terms(&many).len(), MAX_QUERY_TERMS);
    }

    #[test]
    fn postings_count_body_and_heading_apart() {
        let a = Analyzer::new();
        let (p, len) = a.postings(Some("Glaciers"), "The glacier melts. Glaciers retreat.");
        assert_eq!(len, 5);
        let g = p.iter().find(|p| p.term == "glacier").cloned();
        assert_eq!(
            g,
            Some(Posting {
                term: "glacier".into(),
                body: 2,
                heading: 1
            })
        );
        assert!(p.windows(2).all(|w| w[0].term < w[1].term));
        let long = "x".repeat(MAX_TERM_CHARS + 1);
        assert_eq!(a.postings(None, &long), (Vec::new(), 0));
    }

    #[test]
    fn bm25_by_hand() {
        let b = Bm25::default();
        // N = 10, df = 1: ln(1 + 9.5 / 1.5).
        let idf = Bm25::idf(10.0, 1.0);
        assert!((idf - (1.0f64 + 9.5 / 1.5).ln()).abs() < 1e-12);
        // tf = 1 at the average length: idf * 2.2 / (1 + 1.2).
        assert!((b.term_score(idf, 1.0, 100.0, 100.0) - idf).abs() < 1e-12);
        // Saturation: ten occurrences are worth less than ten times one.
        assert!(b.term_score(idf, 10.0, 100.0, 100.0) < 3.0 * idf);
        // A longer chunk scores lower for the same count.
        assert!(b.term_score(idf, 1.0, 200.0, 100.0) < b.term_score(idf, 1.0, 50.0, 100.0));
        // A term in every chunk still counts a little.
        assert!(Bm25::idf(10.0, 10.0) > 0.0);
    }
}
