//! The PostgreSQL + pgvector server: a database of the benchmark's own, the raw SQL, and the
//! plan.

use std::fmt::Write as _;
use std::time::Instant;

use cairn_tests::{Backend, TestServer};
use rand::Rng;
use sea_orm::sqlx::Row as _;
use sea_orm::{ConnectionTrait, Statement};

use super::report::{time_async, Report};
use super::sections::{
    common_section, ingest, overhead_interleaved, principal_of, raw_vector_sql, recall_at_10,
    sqlx_query, throughput, vector_statements, Bench, Section,
};
use super::{QUERIES, RECALL_QUERIES};

/// Creates `cairn_bench_<random>` on the PostgreSQL of `CAIRN_TEST_PG_URL` (after dropping
/// any left by an interrupted run of this benchmark); returns its URL and name.
async fn bench_pg_database() -> (String, String) {
    let admin = cairn_tests::pg_admin_url();
    let conn = sea_orm::Database::connect(admin.as_str())
        .await
        .unwrap_or_else(|e| panic!("cannot reach PostgreSQL at CAIRN_TEST_PG_URL: {e}"));
    let stale = conn
        .query_all_raw(Statement::from_string(
            conn.get_database_backend(),
            "SELECT datname FROM pg_database WHERE datname LIKE 'cairn\\_bench\\_%'",
        ))
        .await
        .unwrap_or_default();
    for r in stale {
        if let Ok(name) = r.try_get_by_index::<String>(0) {
            eprintln!("[postgres] dropping {name}, left by an earlier run");
            let _ = conn
                .execute_unprepared(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .await;
        }
    }
    let name = format!("cairn_bench_{:016x}", rand::rng().random::<u64>());
    conn.execute_unprepared(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap_or_else(|e| panic!("CREATE DATABASE failed: {e}"));
    let _ = conn.close().await;
    let base = admin.rsplit_once('/').map(|(b, _)| b).unwrap_or(&admin);
    (format!("{base}/{name}"), name)
}

pub(crate) async fn postgres_section(b: &Bench, rep: &mut Report) -> Section {
    rep.line("");
    rep.line("== PostgreSQL + pgvector server ==");
    // A database of our own: scripts/test.sh drops every `cairn_t_%` database when it starts,
    // and may run while this benchmark does.
    let (db_url, db_name) = bench_pg_database().await;
    let s = TestServer::start_tuned(Backend::Postgres, |cfg| {
        cfg.database_url = Some(db_url.clone());
    })
    .await;
    let p = principal_of(&s);
    let store = &s.cairn().store;
    let conn = store.connection();
    let parallel = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 4);
    let t = Instant::now();
    let map = ingest(&s, &p, &b.corpus, parallel, "postgres").await;
    rep.line(format!(
        "  ingest via Store::store_ingest ({parallel} documents at a time, HNSW maintained on insert): {} chunks in {:.1} s",
        b.corpus.chunks,
        t.elapsed().as_secs_f64()
    ));
    let t = Instant::now();
    // Autovacuum (PostgreSQL >= 13) vacuums a table after inserts as well as analyzing it:
    // the visibility map it sets lets the lexical channel read its blocks from the index
    // alone. Run here so the measurement does not depend on when autovacuum wakes.
    conn.execute_unprepared("VACUUM (ANALYZE)")
        .await
        .unwrap_or_else(|e| panic!("VACUUM (ANALYZE): {e}"));
    rep.line(format!(
        "  VACUUM (ANALYZE) after the load (what autovacuum does after inserts): {:.1} s",
        t.elapsed().as_secs_f64()
    ));
    // The channels' own pool (its sessions plan each execution for its parameters, as the
    // channels run): the raw SQL below is timed on it, and the settings read from it.
    let pool = store.channel_connection().get_postgres_connection_pool();
    for q in [
        "SELECT current_setting('plan_cache_mode')",
        "SELECT extversion FROM pg_extension WHERE extname = 'vector'",
        "SELECT indexdef FROM pg_indexes WHERE indexname = 'chunks_embedding_hnsw'",
        "SELECT current_setting('hnsw.ef_search') || ' / ' || current_setting('hnsw.iterative_scan')",
        "SELECT pg_size_pretty(pg_relation_size('chunks_embedding_hnsw'))",
    ] {
        let v: String = sea_orm::sqlx::query(q)
            .fetch_one(pool)
            .await
            .and_then(|r| r.try_get::<String, _>(0))
            .unwrap_or_else(|e| format!("({e})"));
        rep.line(format!("  {q}\n      -> {v}"));
    }
    let mut sec = Section::default();
    let statements = vector_statements(&p, &b.qvecs, 10);
    let statements = &statements;
    let raw = time_async(QUERIES, |i| async move {
        raw_vector_sql(pool, &statements[i]).await;
    })
    .await;
    rep.line(raw.row("raw vector-channel SQL via sqlx (k=300, first 10 with text)"));
    rep.line(
        "      (the SQL of store::search::pg_vector_channel as a VECTOR search of topK 10 sends it, readable predicate included, sent with sqlx on the channels' pool: same session settings)",
    );
    common_section(b, &s, &p, rep, &mut sec).await;
    let (recall, worst) = recall_at_10(b, store, &p, &map).await;
    rep.line(format!(
        "  recall@10 of the pgvector channel vs exact ({RECALL_QUERIES} queries, ef_search as configured): mean {recall:.3}, worst {worst:.2}"
    ));
    let overhead = sec.api_p50("VECTOR") - sec.embed.p50 - raw.p50;
    let overhead_mean =
        sec.api.get("VECTOR").map(|s| s.mean).unwrap_or(f64::NAN) - sec.embed.mean - raw.mean;
    rep.line(format!(
        "  API overhead from the separate runs above (VECTOR API p50 {:.3} - embed p50 {:.3} - raw SQL p50 {:.3}, noisy centroids vs embedded texts): {overhead:.3} ms (goal <= 2 ms: {}); same with means: {overhead_mean:.3} ms",
        sec.api_p50("VECTOR"),
        sec.embed.p50,
        raw.p50,
        if overhead <= 2.0 { "met" } else { "NOT met" }
    ));
    overhead_interleaved(b, &s, &p, rep).await;
    let explain = Statement {
        sql: format!("EXPLAIN (ANALYZE, BUFFERS) {}", statements[0].sql),
        ..statements[0].clone()
    };
    let plan: Vec<String> = sqlx_query(&explain)
        .fetch_all(pool)
        .await
        .map(|rows| {
            rows.iter()
                .map(|r| r.try_get::<String, _>(0).unwrap_or_default())
                .collect()
        })
        .unwrap_or_else(|e| vec![format!("EXPLAIN failed: {e}")]);
    rep.line("  EXPLAIN (ANALYZE, BUFFERS) of the raw vector SQL (query vector 0):");
    for l in plan {
        rep.line(format!("    {}", elide_vectors(&l)));
    }
    throughput(b, &s, rep).await;
    s.stop().await;
    if std::env::var("CAIRN_BENCH_KEEP_DB").is_ok_and(|v| v == "1") {
        rep.line(format!("  database kept (CAIRN_BENCH_KEEP_DB=1): {db_url}"));
    } else {
        cairn_tests::drop_pg_database(&db_name).await;
    }
    sec
}

/// Replaces each quoted vector literal (`'[…]'`) in a plan line with a short marker.
fn elide_vectors(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find("'[") {
        let Some(len) = rest[start..].find("]'") else {
            break;
        };
        let values = rest[start..start + len].matches(',').count() + 1;
        out.push_str(&rest[..start]);
        let _ = write!(out, "'[{values} values]'");
        rest = &rest[start + len + 2..];
    }
    out.push_str(rest);
    out
}
