//! The SQLite server: the exact in-memory index inside the store.

use std::time::Instant;

use cairn_tests::{Backend, TestServer};

use super::report::{ms, Report};
use super::sections::{
    common_section, ingest, overhead_interleaved, principal_of, recall_at_10, throughput, Bench,
    Section,
};
use super::{DEPTH, DIM, RECALL_QUERIES};

pub(crate) async fn sqlite_section(b: &Bench, rep: &mut Report) -> Section {
    rep.line("");
    rep.line("== SQLite server (exact in-memory index inside the store) ==");
    let rss_before = rss_mb();
    let s = TestServer::start_tuned(Backend::Sqlite, |_| {}).await;
    let rss_started = rss_mb();
    let p = principal_of(&s);
    let t = Instant::now();
    let map = ingest(&s, &p, &b.corpus, 1, "sqlite").await;
    rep.line(format!(
        "  ingest via Store::store_ingest: {} chunks in {:.1} s",
        b.corpus.chunks,
        t.elapsed().as_secs_f64()
    ));
    let store = &s.cairn().store;
    let t = Instant::now();
    let first = store
        .vector_channel(&p, None, &b.qvecs[0], DEPTH)
        .await
        .unwrap_or_else(|e| panic!("vector channel: {e}"));
    rep.line(format!(
        "  first vector_channel call (lazy index load of {} rows + search): {:.0} ms, {} hits",
        store.vector_index().await.map(|i| i.len()).unwrap_or(0),
        ms(t.elapsed()),
        first.len()
    ));
    let rss_loaded = rss_mb();
    rep.line(format!(
        "  memory (this process's VmRSS; the generated corpus and the bench's own exact index were already resident): before the server {rss_before:.0} MB, server started with the model {rss_started:.0} MB (+{:.0}), {} chunks stored and the index loaded {rss_loaded:.0} MB (+{:.0} over the bench's own data; goal <= 1024 MB), peak so far {:.0} MB",
        rss_started - rss_before,
        b.corpus.chunks,
        rss_loaded - rss_before,
        peak_mb()
    ));
    let mut sec = Section::default();
    common_section(b, &s, &p, rep, &mut sec).await;
    let gbs = (b.corpus.chunks * DIM * 4) as f64 / (sec.vector_channel.p50 / 1e3) / 1e9;
    rep.line(format!(
        "      Store::vector_channel scans at p50 = {gbs:.2} GB/s = {:.0}% of measured all-thread bandwidth (includes spawn_blocking and the query copy)",
        100.0 * gbs / b.bandwidth_all
    ));
    let (recall, worst) = recall_at_10(b, store, &p, &map).await;
    rep.line(format!(
        "  recall@10 of Store::vector_channel vs exact ({RECALL_QUERIES} queries): mean {recall:.3}, worst {worst:.2}"
    ));
    let overhead = sec.api_p50("VECTOR") - sec.embed.p50 - sec.vector_channel.p50;
    rep.line(format!(
        "  API overhead from the separate runs above (VECTOR API p50 - embed p50 - vector_channel p50): {overhead:.3} ms"
    ));
    overhead_interleaved(b, &s, &p, rep).await;
    throughput(b, &s, rep).await;
    s.stop().await;
    sec
}

/// A line of /proc/self/status in MB (`VmRSS`, `VmHWM`), NaN where there is none.
fn status_mb(key: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn rss_mb() -> f64 {
    status_mb("VmRSS:")
}

fn peak_mb() -> f64 {
    status_mb("VmHWM:")
}
