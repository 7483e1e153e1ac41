//! Search benchmark over a synthetic corpus (default 100,000 chunks × 384 dimensions), on both
//! backends, against this machine's memory bandwidth and a numpy peer.
//!
//! ```text
//! CAIRN_TEST_PG_URL=$(bash scripts/pgvector.sh url) \
//! CAIRN_EMBED_MODEL=/root/.cache/cairn/models/all-MiniLM-L6-v2 \
//! cargo bench -p cairn-tests --bench search
//! ```
//!
//! Optional: `CAIRN_BENCH_CHUNKS` (default 100000), `CAIRN_BENCH_SECS` (throughput window per
//! backend, default 20), `CAIRN_REPORT_DIR` (where `search-bench.txt` goes; default
//! `<tmp>/cairn-reports`), `CAIRN_BENCH_ONLY` (`sqlite` or `postgres`: run that server section
//! alone), `CAIRN_BENCH_KEEP_DB=1` (leave the PostgreSQL database in place and print its URL, to
//! study plans with psql afterwards). Progress goes to stderr, the report to stdout and the file.
//!
//! The data: 256 random unit topic centroids; each chunk's vector is
//! `normalize(centroid + 0.6 · g)` where `g` is a Gaussian direction of unit length (so a chunk's
//! cosine to its centroid is about 0.86); texts of about 120 words drawn Zipf-like from a
//! generated 5,000-word vocabulary, half from the global ranking and half from the chunk's
//! topic's own ranking, under a 2–4 word section heading. Everything is seeded.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use serde_json::Value;

const DIM: usize = 384;
const CHUNKS_PER_DOC: usize = 100;
const TOPICS: usize = 256;
const VOCAB: usize = 5_000;
const NOISE: f32 = 0.6;
const QUERIES: usize = 200;
const WARMUP: usize = 20;
const DEPTH: usize = 300;
const RECALL_QUERIES: usize = 50;
const CLIENTS: usize = 32;
const SEED: u64 = 0x00ca_14b0;

const SEARCH_GQL: &str = "query($q: String!, $m: SearchMode!) { search(query: $q, topK: 10, mode: $m) { relevance results { chunkId score } } }";

mod bandwidth;
mod corpus;
mod peer;
mod postgres;
mod report;
mod sections;
mod sqlite;

use bandwidth::measure_bandwidth;
use corpus::{exact_principal, Corpus};
use peer::{python, run_peer, write_npy};
use postgres::postgres_section;
use report::{loadavg, time_sync, CpuTimes, Report};
use sections::Bench;
use sqlite::sqlite_section;

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("tokio runtime: {e}"));
    rt.block_on(run());
}

async fn run() {
    // Server-side warnings and internal errors (their details are logged, not sent) to stderr.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("warn,sqlx=error"))
        .with_writer(std::io::stderr)
        .try_init();
    let run_started = Instant::now();
    let chunks: usize = std::env::var("CAIRN_BENCH_CHUNKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let secs: u64 = std::env::var("CAIRN_BENCH_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let mut rep = Report {
        text: String::new(),
    };
    rep.line(format!(
        "Cairn search benchmark: {chunks} chunks x {DIM} dims ({} documents x {CHUNKS_PER_DOC}), {TOPICS} topics, {QUERIES} queries after {WARMUP} warm-up",
        chunks.div_ceil(CHUNKS_PER_DOC)
    ));
    rep.line(format!(
        "data: chunk vector = normalize(centroid + {NOISE} x unit-length Gaussian direction); ~120 Zipf words per chunk from a {VOCAB}-word generated vocabulary (half global ranking, half topic ranking), 2-4 word sections; query vectors for raw paths = noisy centroids, query texts = 3-6 words of one topic (the API embeds them with the real model)"
    ));
    rep.line(format!(
        "machine: {cores} cores (available_parallelism); load average at start: {}",
        loadavg()
    ));
    let cpu_at_start = CpuTimes::now();

    // 1. Memory bandwidth, then the exact index.
    eprintln!("[bench] measuring memory bandwidth (1 GiB buffer)");
    let bw_before = measure_bandwidth(cores);
    eprintln!("[bench] generating {chunks} chunks");
    let t = Instant::now();
    let corpus = Corpus::generate(chunks);
    let texts = corpus.query_texts();
    let qvecs = corpus.query_vectors();
    eprintln!("[bench] generated in {:.1} s", t.elapsed().as_secs_f64());
    let scanned = (chunks * DIM * 4) as f64;
    let ep = exact_principal();
    let mut index_stats = Vec::new();
    let mut exact = None;
    for threads in [1, cores] {
        eprintln!("[bench] VectorIndex::search, {threads} thread(s)");
        let ix = corpus.exact_index(threads);
        let st = time_sync(QUERIES, |i| {
            std::hint::black_box(ix.search(&ep, None, &qvecs[i], DEPTH));
        });
        index_stats.push((threads, st));
        if threads == cores {
            exact = Some(ix);
            break; // cores == 1: one row is enough
        }
    }
    let exact = exact.unwrap_or_else(|| corpus.exact_index(cores));
    eprintln!("[bench] measuring memory bandwidth again");
    let bw_after = measure_bandwidth(cores);
    let (bw1, bwn) = (bw_before.0.max(bw_after.0), bw_before.1.max(bw_after.1));
    rep.line("");
    rep.line("== 1. SQLite exact path (VectorIndex) vs memory bandwidth ==");
    rep.line(format!(
        "  measured memory bandwidth (sum of a 1 GiB f32 buffer, best of 7, before and after the index runs): 1 thread {:.2} / {:.2} GB/s, {cores} threads {:.2} / {:.2} GB/s; reference = the better: {bw1:.2} and {bwn:.2} GB/s",
        bw_before.0, bw_after.0, bw_before.1, bw_after.1
    ));
    let mut index_p50 = HashMap::new();
    for (threads, st) in index_stats {
        let gbs = scanned / (st.p50 / 1e3) / 1e9;
        let measured = if threads == 1 { bw1 } else { bwn };
        rep.line(st.row(&format!("VectorIndex::search k=300, threads={threads}")));
        rep.line(format!(
            "      scanned {:.1} MB at p50 = {gbs:.2} GB/s = {:.0}% of measured {threads}-thread bandwidth ({:.0}% of the best measured) (goal >= 70%)",
            scanned / 1e6,
            100.0 * gbs / measured,
            100.0 * gbs / bw1.max(bwn)
        ));
        index_p50.insert(threads, st.p50);
    }

    // 5 (run here, next to the exact path, on the same matrix and queries).
    rep.line("");
    rep.line("== 5. Peer: numpy exact search on the same matrix ==");
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let mpath = dir.path().join("matrix.npy");
    let qpath = dir.path().join("queries.npy");
    write_npy(&mpath, &corpus.matrix, chunks, DIM);
    let qflat: Vec<f32> = qvecs.iter().flatten().copied().collect();
    write_npy(&qpath, &qflat, QUERIES, DIM);
    let py = python();
    let has_numpy = std::process::Command::new(&py)
        .args(["-c", "import numpy"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !has_numpy {
        rep.line(format!(
            "  SKIPPED: {py} has no numpy (create /var/tmp/cairn-bench-venv with numpy)"
        ));
    } else {
        let truth: Vec<i64> = exact
            .search(&ep, None, &qvecs[0], 10)
            .iter()
            .map(|s| s.chunk_id)
            .collect();
        for threads in [1, cores] {
            match run_peer(&py, &mpath, &qpath, threads) {
                Ok(v) => {
                    let p50 = v["p50_ms"].as_f64().unwrap_or(f64::NAN);
                    let p95 = v["p95_ms"].as_f64().unwrap_or(f64::NAN);
                    let top: Vec<i64> = v["top10_q0"]
                        .as_array()
                        .map(|a| a.iter().filter_map(Value::as_i64).collect())
                        .unwrap_or_default();
                    let cairn = index_p50.get(&threads).copied().unwrap_or(f64::NAN);
                    rep.line(format!(
                        "  numpy {} (BLAS threads={threads}): p50 {p50:.3} ms  p95 {p95:.3} ms  (n={}); top-10 of query 0 {} the exact index's",
                        v["numpy"].as_str().unwrap_or("?"),
                        v["n"],
                        if top == truth { "equals" } else { "DIFFERS from" }
                    ));
                    rep.line(format!(
                        "      cairn/peer p50 latency ratio at {threads} thread(s): {:.2} (VectorIndex {cairn:.3} ms / numpy {p50:.3} ms; < 1 means cairn is faster)",
                        cairn / p50
                    ));
                }
                Err(e) => rep.line(format!("  peer with {threads} thread(s) failed: {e}")),
            }
            if threads == cores {
                break;
            }
        }
    }
    drop(dir);

    let bench = Bench {
        corpus,
        texts,
        qvecs,
        exact,
        http: reqwest::Client::new(),
        secs,
        bandwidth_all: bwn,
    };

    // 1 (cont.), 3, 4 on SQLite; 2, 3, 4 on PostgreSQL.
    let only = std::env::var("CAIRN_BENCH_ONLY").unwrap_or_default();
    let mut sections = Vec::new();
    if only.is_empty() || only == "sqlite" {
        sections.push(("SQLite", sqlite_section(&bench, &mut rep).await));
        rep.line(format!("  load average after SQLite: {}", loadavg()));
    }
    if only.is_empty() || only == "postgres" {
        sections.push(("PostgreSQL", postgres_section(&bench, &mut rep).await));
    }

    rep.line("");
    rep.line("== 3. Hybrid vs its channels (API p50) ==");
    for (name, sec) in &sections {
        let (v, l, h) = (
            sec.api_p50("VECTOR"),
            sec.api_p50("LEXICAL"),
            sec.api_p50("HYBRID"),
        );
        rep.line(format!(
            "  {name:<11} HYBRID {h:.3} ms vs max(VECTOR {v:.3}, LEXICAL {l:.3}) = {:.3} ms: hybrid costs {:+.3} ms over the slower channel (sum would be {:.3})",
            v.max(l),
            h - v.max(l),
            v + l
        ));
    }
    rep.line("");
    rep.line(format!(
        "load average at end: {}; during the run: {}",
        loadavg(),
        CpuTimes::steal_since(cpu_at_start)
    ));
    rep.line(format!(
        "total run time: {:.0} s",
        run_started.elapsed().as_secs_f64()
    ));

    let dir = std::env::var_os("CAIRN_REPORT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("cairn-reports"));
    let path = dir.join("search-bench.txt");
    let written = std::fs::create_dir_all(&dir)
        .and_then(|_| std::fs::write(&path, &rep.text))
        .map(|_| format!("report written to {}", path.display()))
        .unwrap_or_else(|e| format!("could not write {}: {e}", path.display()));
    println!("{}", rep.text);
    println!("{written}");
}
