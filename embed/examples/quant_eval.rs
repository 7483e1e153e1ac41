//! Tuning aid for the quantized embedders: ranks the retrieval test's stored chunks (its
//! offline dump, `$CAIRN_REPORT_DIR/retrieval-*-chunks.json`) by exact cosine at f32 and at
//! `CAIRN_EVAL_PRECISION` (default `int8`), and prints MRR@10 at document and passage level
//! over the labels of the **tuning** split only, plus the cosine of each vector to its f32
//! self. Three rankings: f32; the quantized embedder's passages with its queries embedded the
//! same way (`embed`, both sides rounded); and its passages with f32 queries (what its
//! `embed_query` does under int8). Each with the spread of its score errors over every
//! query's f32 top 20 (a continuous measure of how likely near-ties swap, which MRR at this
//! level mostly counts). The test split is left to `tests/tests/retrieval.rs`.
//!
//! `cargo run --release -p cairn-embed --example quant_eval -- DUMP.json...`
//! (model from `CAIRN_EMBED_MODEL`; f32 vectors cached beside the dump, keyed by the texts).
//! `QE_VERBOSE=1` prints each query's first document position and top four scores per
//! precision on stderr: how the near-ties that decide MRR at this level were found.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use cairn_embed::{EmbedConfig, Embedder, Precision};
use serde_json::Value;

fn normalized(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_alphanumeric() {
                c.to_lowercase().next().unwrap_or(c)
            } else {
                ' '
            }
        })
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

struct Chunk {
    document: String,
    indexed: String,
    content: String,
}

/// Chunk vectors and query vectors.
type Vectors = (Vec<Vec<f32>>, Vec<Vec<f32>>);

async fn vectors(e: &Embedder, chunks: &[Chunk], queries: &[String]) -> Vectors {
    let texts: Vec<String> = chunks.iter().map(|c| c.content.clone()).collect();
    let cv = e.embed(texts, None).await.unwrap_or_else(|e| panic!("{e}"));
    // Each query alone, as a search embeds it, but through the passage path: under int8 the
    // embedder's query path is f32 (`Model::bert_for`), and this measures both sides rounded.
    let mut qv = Vec::new();
    for q in queries {
        let mut v = e
            .embed(vec![q.clone()], None)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        qv.push(v.pop().unwrap_or_else(|| panic!("one vector")));
    }
    (cv, qv)
}

fn cached(path: &Path) -> Option<Vectors> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn main() {
    let model = PathBuf::from(
        std::env::var("CAIRN_EMBED_MODEL").unwrap_or_else(|_| panic!("CAIRN_EMBED_MODEL")),
    );
    let precision: Precision = std::env::var("CAIRN_EVAL_PRECISION")
        .unwrap_or_else(|_| "int8".into())
        .parse()
        .unwrap_or_else(|e| panic!("{e}"));
    let rt = tokio::runtime::Runtime::new().unwrap_or_else(|e| panic!("{e}"));
    let load = |p: Precision| {
        let mut cfg = EmbedConfig::new(model.clone());
        cfg.precision = p;
        Embedder::load(cfg).unwrap_or_else(|e| panic!("{e}"))
    };
    let f32e = load(Precision::F32);
    let qe = load(precision);
    let mut total = [0f64; 4];
    for dump in std::env::args().skip(1) {
        let v: Value =
            serde_json::from_str(&std::fs::read_to_string(&dump).unwrap_or_else(|e| panic!("{e}")))
                .unwrap_or_else(|e| panic!("{e}"));
        let mut ids: Vec<(i64, &Value)> = v["chunks"]
            .as_object()
            .unwrap_or_else(|| panic!("chunks"))
            .iter()
            .map(|(k, c)| (k.parse().unwrap_or_else(|e| panic!("{e}")), c))
            .collect();
        ids.sort_by_key(|c| c.0);
        let chunks: Vec<Chunk> = ids
            .iter()
            .map(|(_, c)| Chunk {
                document: c[0].as_str().unwrap_or_default().to_owned(),
                indexed: c[1].as_str().unwrap_or_default().to_owned(),
                content: c[2]
                    .as_str()
                    .unwrap_or_else(|| panic!("dump without content: rerun the retrieval test"))
                    .to_owned(),
            })
            .collect();
        let labels: Vec<&Value> = v["labels"]
            .as_array()
            .unwrap_or_else(|| panic!("labels"))
            .iter()
            .filter(|l| l["split"] == "tune")
            .collect();
        let queries: Vec<String> = labels
            .iter()
            .map(|l| l["query"].as_str().unwrap_or_default().to_owned())
            .collect();
        // Keyed by the texts: a later run of the test may store the same chunks in another order.
        let key = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            for c in &chunks {
                c.content.hash(&mut h);
            }
            queries.hash(&mut h);
            h.finish()
        };
        let cache = PathBuf::from(format!("{dump}.f32-{key:016x}.json"));
        let reference = match cached(&cache) {
            Some(r) if r.0.len() == chunks.len() && r.1.len() == queries.len() => r,
            _ => {
                let r = rt.block_on(vectors(&f32e, &chunks, &queries));
                let _ = std::fs::write(&cache, serde_json::to_string(&r).unwrap_or_default());
                r
            }
        };
        let t = std::time::Instant::now();
        let mine = rt.block_on(vectors(&qe, &chunks, &queries));
        let secs = t.elapsed().as_secs_f64();
        let cos: Vec<f32> = reference
            .0
            .iter()
            .zip(&mine.0)
            .map(|(a, b)| dot(a, b))
            .collect();
        let qcos: Vec<f32> = reference
            .1
            .iter()
            .zip(&mine.1)
            .map(|(a, b)| dot(a, b))
            .collect();
        let mean = |x: &[f32]| x.iter().map(|&c| f64::from(1.0 - c)).sum::<f64>() / x.len() as f64;
        let min = |x: &[f32]| x.iter().copied().fold(1f32, f32::min);
        // Chunks quantized, queries at f32: how the int8 embedder ranks (its `embed_query`).
        let mixed: Vectors = (mine.0.clone(), reference.1.clone());
        let mut rows = Vec::new();
        let qname = precision.to_string();
        let mname = format!("{precision}+f32q");
        let runs = [
            ("f32", &reference),
            (qname.as_str(), &mine),
            (mname.as_str(), &mixed),
        ];
        // Each query's f32 top 20 chunks with their f32 scores.
        let top20: Vec<Vec<(usize, f32)>> = reference
            .1
            .iter()
            .map(|q32| {
                let mut top: Vec<(usize, f32)> = reference
                    .0
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (i, dot(c, q32)))
                    .collect();
                top.sort_by(|a, b| b.1.total_cmp(&a.1));
                top.truncate(20);
                top
            })
            .collect();
        for (name, (cv, qv)) in runs {
            // The spread of score errors over each query's f32 top 20 chunks: what decides
            // whether two near-tied chunks swap (a shift common to all of them does not).
            let mut spread = 0f64;
            for (q, top) in qv.iter().zip(&top20) {
                let errs: Vec<f64> = top
                    .iter()
                    .map(|&(i, s)| f64::from(dot(&cv[i], q) - s))
                    .collect();
                let m = errs.iter().sum::<f64>() / errs.len() as f64;
                spread +=
                    (errs.iter().map(|e| (e - m).powi(2)).sum::<f64>() / errs.len() as f64).sqrt();
            }
            spread /= qv.len().max(1) as f64;
            let (mut d_rr, mut p_rr) = (0f64, 0f64);
            for (l, q) in labels.iter().zip(qv) {
                let relevant: HashSet<String> = l["relevant"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|r| r.as_str().map_or_else(|| r.to_string(), str::to_owned))
                    .collect();
                let answer = l["answer"].as_str().map(normalized);
                let mut scored: Vec<(usize, f32)> =
                    cv.iter().enumerate().map(|(i, c)| (i, dot(c, q))).collect();
                scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                let mut docs: Vec<&str> = Vec::new();
                for (i, _) in &scored {
                    let d = chunks[*i].document.as_str();
                    if !docs.contains(&d) {
                        docs.push(d);
                    }
                    if docs.len() == 10 {
                        break;
                    }
                }
                let pos = docs.iter().position(|d| relevant.contains(*d));
                if std::env::var("QE_VERBOSE").is_ok() {
                    let top: Vec<String> = scored
                        .iter()
                        .take(4)
                        .map(|(i, sc)| format!("{}:{sc:.4}", chunks[*i].document))
                        .collect();
                    eprintln!("{name} {} doc pos {pos:?} top {top:?}", l["id"]);
                }
                d_rr += pos.map_or(0.0, |p| 1.0 / (p as f64 + 1.0));
                p_rr += scored
                    .iter()
                    .take(10)
                    .position(|(i, _)| {
                        let c = &chunks[*i];
                        relevant.contains(&c.document)
                            && answer
                                .as_ref()
                                .is_none_or(|a| normalized(&c.indexed).contains(a.as_str()))
                    })
                    .map_or(0.0, |p| 1.0 / (p as f64 + 1.0));
            }
            let n = labels.len() as f64;
            rows.push((name.to_owned(), d_rr / n, p_rr / n));
            println!(
                "  {name}: doc MRR {:.4} passage MRR {:.4} | score-error spread over the f32 top 20: {spread:.2e}",
                d_rr / n,
                p_rr / n
            );
        }
        println!(
            "{}: {} chunks, {} tune queries, {secs:.1} s | doc MRR f32 {:.4} q {:.4} (Δ {:+.4}) | passage MRR f32 {:.4} q {:.4} (Δ {:+.4}) | chunk 1-cos mean {:.2e} min cos {:.5} | query 1-cos mean {:.2e} min {:.5}",
            Path::new(&dump).file_name().map(|f| f.to_string_lossy()).unwrap_or_default(),
            chunks.len(),
            labels.len(),
            rows[0].1, rows[1].1, rows[1].1 - rows[0].1,
            rows[0].2, rows[1].2, rows[1].2 - rows[0].2,
            mean(&cos), min(&cos), mean(&qcos), min(&qcos)
        );
        total[0] += (rows[1].1 - rows[0].1).abs();
        total[1] += (rows[1].2 - rows[0].2).abs();
        total[2] += mean(&cos);
        total[3] += secs;
    }
    println!(
        "sum |Δ doc| {:.4} sum |Δ passage| {:.4} sum mean(1-cos) {:.3e} secs {:.1}",
        total[0], total[1], total[2], total[3]
    );
}
