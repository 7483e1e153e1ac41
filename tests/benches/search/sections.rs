//! What both backends' sections share: the loaded server, ingest, recall, the channels, the
//! API per mode, throughput, and the interleaved API overhead.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn::auth::Principal;
use cairn::domain::search::SearchMode;
use cairn::domain::{Role, Visibility};
use cairn::service::search::SearchRequest;
use cairn::testing::{
    chunk_views_statement, pg_vector_channel_statement, BlobRef, ChunkView, StoreIngest, Target,
    VectorIndex,
};
use cairn::Store;
use cairn_tests::TestServer;
use futures_util::StreamExt;
use sea_orm::{ConnectionTrait, FromQueryResult, Statement};
use serde_json::{json, Value};

use super::corpus::{exact_principal, Corpus};
use super::report::{ms, time_async, CpuTimes, Report, Stats};
use super::{CHUNKS_PER_DOC, CLIENTS, DEPTH, QUERIES, RECALL_QUERIES, SEARCH_GQL, WARMUP};

pub(crate) struct Bench {
    pub(crate) corpus: Corpus,
    pub(crate) texts: Vec<String>,
    pub(crate) qvecs: Vec<Vec<f32>>,
    pub(crate) exact: VectorIndex,
    pub(crate) http: reqwest::Client,
    pub(crate) secs: u64,
    /// Measured memory bandwidth with all threads, GB/s.
    pub(crate) bandwidth_all: f64,
}

/// What one backend's section measured that the summary needs.
#[derive(Default)]
pub(crate) struct Section {
    pub(crate) vector_channel: Stats,
    pub(crate) embed: Stats,
    pub(crate) api: HashMap<&'static str, Stats>,
}

/// One GraphQL request (`{ query, variables }`); its errors are a failure named `what`.
async fn graphql(
    http: &reqwest::Client,
    s: &TestServer,
    token: &str,
    request: Value,
    what: &str,
) -> Result<Value, String> {
    let body: Value = http
        .post(format!("{}/graphql", s.url))
        .bearer_auth(token)
        .json(&request)
        .send()
        .await
        .map_err(|e| format!("{what} request: {e}"))?
        .json()
        .await
        .map_err(|e| format!("{what} reply: {e}"))?;
    match body.get("errors") {
        None => Ok(body),
        Some(_) => Err(format!("{what}: {body}")),
    }
}

async fn api_search(
    http: &reqwest::Client,
    s: &TestServer,
    token: &str,
    q: &str,
    mode: &str,
) -> Result<Value, String> {
    let request = json!({ "query": SEARCH_GQL, "variables": { "q": q, "m": mode } });
    graphql(http, s, token, request, &format!("{mode} {q:?}")).await
}

/// Counts failed API calls (a timed call that failed still counts in the latencies) and keeps
/// the first failure for the report.
#[derive(Default)]
struct Failures {
    count: Cell<usize>,
    first: RefCell<Option<String>>,
}

impl Failures {
    fn note<T>(&self, r: Result<T, String>) {
        if let Err(e) = r {
            self.count.set(self.count.get() + 1);
            self.first.borrow_mut().get_or_insert(e);
        }
    }

    fn report(&self, rep: &mut Report, what: &str) {
        if self.count.get() > 0 {
            rep.line(format!(
                "      !! {} {what} calls FAILED; first: {}",
                self.count.get(),
                self.first.borrow().as_deref().unwrap_or("?")
            ));
        }
    }
}

pub(crate) fn principal_of(s: &TestServer) -> Principal {
    let b = s
        .running
        .as_ref()
        .and_then(|r| r.bootstrap.as_ref())
        .unwrap_or_else(|| panic!("no bootstrap team"));
    Principal {
        user_id: b.owner.id,
        team_id: b.team.id,
        role: Role::Owner,
        name: b.owner.name.clone(),
        token_id: 0,
    }
}

/// Loads the corpus through `Store::store_ingest` (`parallel` documents at a time); returns
/// chunk id → row number.
pub(crate) async fn ingest(
    s: &TestServer,
    p: &Principal,
    corpus: &Corpus,
    parallel: usize,
    label: &str,
) -> HashMap<i64, usize> {
    let corpus_id: i64 = s
        .create_corpus(&s.owner_token, "bench")
        .await
        .parse()
        .unwrap_or_else(|e| panic!("corpus id: {e}"));
    let store = &s.cairn().store;
    let started = Instant::now();
    let mut done_chunks = 0usize;
    let mut doc_ids: HashMap<i64, usize> = HashMap::new();
    let mut stream = futures_util::stream::iter(0..corpus.docs)
        .map(|d| async move {
            let chunks = corpus.chunk_rows(d);
            let n = chunks.len();
            let chars: usize = chunks.iter().map(|c| c.content.len()).sum();
            let (doc, _) = store
                .store_ingest(StoreIngest {
                    target: Target::New {
                        team_id: p.team_id,
                        corpus_id,
                        owner_id: p.user_id,
                        visibility: Visibility::Team,
                        title: format!("Bench document {d}"),
                        source_url: None,
                    },
                    blob: BlobRef {
                        content_hash: format!("{:064x}", d as u128 + 0xbe4c_0000),
                        mime_type: "text/plain".into(),
                        size: chars as i64,
                        storage_uri: format!("bench://{d}"),
                    },
                    filename: Some(format!("bench-{d}.txt")),
                    extracted_chars: chars as i64,
                    chunks,
                })
                .await
                .unwrap_or_else(|e| panic!("store_ingest {d}: {e}"));
            (d, doc.id, n)
        })
        .buffer_unordered(parallel);
    let mut last_note = Instant::now();
    while let Some((d, id, n)) = stream.next().await {
        doc_ids.insert(id, d);
        done_chunks += n;
        if last_note.elapsed() > Duration::from_secs(10) || doc_ids.len() == corpus.docs {
            last_note = Instant::now();
            let secs = started.elapsed().as_secs_f64();
            let rate = done_chunks as f64 / secs.max(1e-9);
            eprintln!(
                "[{label}] ingested {}/{} documents, {done_chunks} chunks, {rate:.0} chunks/s, {secs:.0} s, eta {:.0} s",
                doc_ids.len(),
                corpus.docs,
                (corpus.chunks - done_chunks) as f64 / rate.max(1e-9)
            );
        }
    }
    drop(stream);
    let rows = store
        .connection()
        .query_all_raw(Statement::from_string(
            store.backend(),
            "SELECT id, document_id, chunk_index FROM chunks",
        ))
        .await
        .unwrap_or_else(|e| panic!("reading chunk ids: {e}"));
    let mut map = HashMap::with_capacity(rows.len());
    for r in rows {
        let id: i64 = r.try_get_by_index(0).unwrap_or_else(|e| panic!("{e}"));
        let doc: i64 = r.try_get_by_index(1).unwrap_or_else(|e| panic!("{e}"));
        let idx: i32 = r.try_get_by_index(2).unwrap_or_else(|e| panic!("{e}"));
        if let Some(&d) = doc_ids.get(&doc) {
            map.insert(id, d * CHUNKS_PER_DOC + idx as usize);
        }
    }
    assert_eq!(map.len(), corpus.chunks, "every chunk stored");
    map
}

/// Mean recall@10 of `got` (chunk ids → rows through `map`) against the exact index.
pub(crate) async fn recall_at_10(
    b: &Bench,
    store: &Store,
    p: &Principal,
    map: &HashMap<i64, usize>,
) -> (f64, f64) {
    let ep = exact_principal();
    let mut sum = 0.0;
    let mut worst: f64 = 1.0;
    for q in b.qvecs.iter().take(RECALL_QUERIES) {
        let truth: Vec<i64> = b
            .exact
            .search(&ep, None, q, 10)
            .iter()
            .map(|s| s.chunk_id)
            .collect();
        let got = store
            .vector_channel(p, None, q, DEPTH)
            .await
            .unwrap_or_else(|e| panic!("vector channel: {e}"));
        let got: Vec<i64> = got
            .iter()
            .take(10)
            .filter_map(|h| map.get(&h.chunk_id).map(|&g| g as i64))
            .collect();
        let hit = truth.iter().filter(|t| got.contains(t)).count() as f64 / 10.0;
        sum += hit;
        worst = worst.min(hit);
    }
    (sum / RECALL_QUERIES as f64, worst)
}

/// Sections shared by both backends: channels, embedder, API per mode, hybrid, throughput.
pub(crate) async fn common_section(
    b: &Bench,
    s: &TestServer,
    p: &Principal,
    rep: &mut Report,
    sec: &mut Section,
) {
    let store = &s.cairn().store;
    sec.vector_channel = time_async(QUERIES, |i| async move {
        let hits = store
            .vector_channel(p, None, &b.qvecs[i], DEPTH)
            .await
            .unwrap_or_else(|e| panic!("vector channel: {e}"));
        assert!(!hits.is_empty(), "vector channel found nothing");
        std::hint::black_box(hits);
    })
    .await;
    rep.line(
        sec.vector_channel
            .row("Store::vector_channel (k=300, noisy centroids)"),
    );
    let lexical = time_async(QUERIES, |i| async move {
        let terms = cairn::domain::lexical::Analyzer::new().query_terms(&b.texts[i]);
        let hits = store
            .lexical_channel(p, None, &terms, Default::default(), DEPTH)
            .await
            .unwrap_or_else(|e| panic!("lexical channel: {e}"));
        std::hint::black_box(hits);
    })
    .await;
    rep.line(lexical.row("Store::lexical_channel (k=300, query texts)"));
    let embedder = s
        .cairn()
        .models
        .embedder
        .clone()
        .unwrap_or_else(|| panic!("CAIRN_EMBED_MODEL is not set: the server has no embedder"));
    let embedder = &embedder;
    sec.embed = time_async(QUERIES, |i| async move {
        let v = embedder
            .embed_query(&b.texts[i])
            .await
            .unwrap_or_else(|e| panic!("embed: {e}"));
        std::hint::black_box(v);
    })
    .await;
    rep.line(sec.embed.row("embedder alone (embed_query)"));
    for mode in ["VECTOR", "LEXICAL", "HYBRID"] {
        let http = &b.http;
        let failures = Failures::default();
        let f = &failures;
        let st = time_async(QUERIES, |i| async move {
            let body = api_search(http, s, &s.owner_token, &b.texts[i], mode).await;
            f.note(std::hint::black_box(body));
        })
        .await;
        rep.line(st.row(&format!("GraphQL search over HTTP, {mode}")));
        failures.report(rep, &format!("{mode} API"));
        sec.api.insert(mode, st);
    }
    let sample = api_search(&b.http, s, &s.owner_token, &b.texts[0], "HYBRID")
        .await
        .unwrap_or_else(Value::String);
    let n = sample["data"]["search"]["results"]
        .as_array()
        .map(Vec::len)
        .unwrap_or(0);
    rep.line(format!(
        "  (sample HYBRID reply for {:?}: {n} results, relevance {})",
        b.texts[0], sample["data"]["search"]["relevance"]
    ));
}

pub(crate) async fn throughput(b: &Bench, s: &TestServer, rep: &mut Report) {
    let texts = Arc::new(b.texts.clone());
    let url = format!("{}/graphql", s.url);
    let token = s.owner_token.clone();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(b.secs);
    let mut tasks = Vec::new();
    for t in 0..CLIENTS {
        let (http, texts, url, token) = (b.http.clone(), texts.clone(), url.clone(), token.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut errors = 0usize;
            let mut j = 0usize;
            while Instant::now() < deadline {
                let q = &texts[(t * 37 + j) % texts.len()];
                j += 1;
                let t0 = Instant::now();
                let ok = match http
                    .post(&url)
                    .bearer_auth(&token)
                    .json(&json!({ "query": SEARCH_GQL, "variables": { "q": q, "m": "HYBRID" } }))
                    .send()
                    .await
                {
                    Ok(r) => r
                        .json::<Value>()
                        .await
                        .map(|v| v.get("errors").is_none())
                        .unwrap_or(false),
                    Err(_) => false,
                };
                if ok {
                    lat.push(ms(t0.elapsed()));
                } else {
                    errors += 1;
                }
            }
            (lat, errors)
        }));
    }
    let mut all = Vec::new();
    let mut errors = 0;
    for t in tasks {
        let (lat, e) = t.await.unwrap_or_else(|e| panic!("client task: {e}"));
        all.extend(lat);
        errors += e;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let done = all.len();
    let st = Stats::of(all);
    rep.line(format!(
        "  throughput, {CLIENTS} clients, HYBRID, {:.1} s: {:.1} queries/s, p50 {:.1} ms, p95 {:.1} ms ({done} ok, {errors} errors)",
        elapsed,
        done as f64 / elapsed,
        st.p50,
        st.p95
    ));
}

/// The store's own statement (`cairn::testing::pg_vector_channel_statement`, what the
/// PostgreSQL vector channel runs) as an sqlx query: its SQL with its bound values.
pub(crate) fn sqlx_query(
    stmt: &Statement,
) -> sea_orm::sqlx::query::Query<'_, sea_orm::sqlx::Postgres, sea_orm::sqlx::postgres::PgArguments>
{
    // The SQL is the store's own statement text; every value in it is bound.
    let mut q = sea_orm::sqlx::query(sea_orm::sqlx::AssertSqlSafe(stmt.sql.as_str()));
    for v in stmt.values.iter().flat_map(|v| v.0.iter()) {
        q = match v {
            sea_orm::Value::String(Some(s)) => q.bind(s.as_str()),
            sea_orm::Value::BigInt(Some(i)) => q.bind(*i),
            sea_orm::Value::Int(Some(i)) => q.bind(*i),
            other => panic!("unexpected bound value in the vector statement: {other:?}"),
        };
    }
    q
}

/// The vector channel's statements for `vectors` as principal `p`, built before any timing.
/// The vector channel's statements for `vectors`, the first `shown` rows with their text
/// (`shown` = 10: what a VECTOR search of `topK` 10 sends; 0: the bare channel, as HYBRID
/// mode sends it).
pub(crate) fn vector_statements(p: &Principal, vectors: &[Vec<f32>], shown: u64) -> Vec<Statement> {
    vectors
        .iter()
        .map(|v| pg_vector_channel_statement(p, v, DEPTH as u64, shown))
        .collect()
}

/// The vector channel's statement sent directly with sqlx; the row count.
pub(crate) async fn raw_vector_sql(pool: &sea_orm::sqlx::PgPool, stmt: &Statement) -> usize {
    let rows = sqlx_query(stmt)
        .fetch_all(pool)
        .await
        .unwrap_or_else(|e| panic!("raw vector SQL: {e}"));
    assert!(!rows.is_empty(), "raw vector SQL found nothing");
    std::hint::black_box(rows).len()
}

/// The API overhead measured per query, interleaved so that load drift on this shared machine
/// hits all three parts alike: embed the text, run the vector channel on that same embedding
/// (the raw SQL on PostgreSQL, `Store::vector_channel` on SQLite), then the VECTOR API call
/// for the text (which embeds it again and runs the same channel).
pub(crate) async fn overhead_interleaved(
    b: &Bench,
    s: &TestServer,
    p: &Principal,
    rep: &mut Report,
) {
    let store = &s.cairn().store;
    let pg = store.backend() == sea_orm::DatabaseBackend::Postgres;
    let embedder = s
        .cairn()
        .models
        .embedder
        .clone()
        .unwrap_or_else(|| panic!("CAIRN_EMBED_MODEL is not set: the server has no embedder"));
    let mut evecs = Vec::with_capacity(QUERIES);
    for t in &b.texts {
        evecs.push(
            embedder
                .embed_query(t)
                .await
                .unwrap_or_else(|e| panic!("embed: {e}")),
        );
    }
    let statements = vector_statements(p, &evecs, 10);
    let bare_statements = vector_statements(p, &evecs, 0);
    let cpu_at_start = CpuTimes::now();
    // Per stage, per query: embed; the channel (on PostgreSQL the statement a VECTOR search
    // sends, its first 10 rows with their text, and the bare channel as HYBRID sends it); the
    // hydration (`Store::chunk_views` of the channel's top 10: what a VECTOR search read in a
    // second statement before its channel brought the text, and what HYBRID and LEXICAL
    // still read); the whole service call (`Cairn::search`: checks, rate limit, embed,
    // channel, fusion, hydration); a GraphQL request that resolves nothing (`{ __typename }`:
    // HTTP, the token's check, parsing, the response); the VECTOR API call.
    let mut t_embed = Vec::new();
    let mut t_channel = Vec::new();
    let mut t_bare = Vec::new();
    let mut t_new = Vec::new();
    let mut t_old = Vec::new();
    let mut t_hydrate = Vec::new();
    let mut t_hydrate_custom = Vec::new();
    let mut t_service = Vec::new();
    let mut t_empty = Vec::new();
    let mut t_api = Vec::new();
    let mut residual = Vec::new();
    let failures = Failures::default();
    for round in 0..WARMUP + QUERIES {
        let i = if round < WARMUP {
            round
        } else {
            round - WARMUP
        };
        let t = Instant::now();
        let v = embedder
            .embed_query(&b.texts[i])
            .await
            .unwrap_or_else(|e| panic!("embed: {e}"));
        std::hint::black_box(v);
        let de = ms(t.elapsed());
        // PostgreSQL: the query's index and table pages are brought into shared buffers by
        // an untimed run of its statement first, so that no stage below pays the first touch
        // (the API call, last in the round, used to find them warm while the raw SQL, first,
        // read them); the two forms of the statement then alternate in order.
        let (top, dc, dbare) = if pg {
            let pool = store.channel_connection().get_postgres_connection_pool();
            raw_vector_sql(pool, &bare_statements[i]).await;
            let mut d = [0.0; 2];
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for which in order {
                let stmt = if which == 0 {
                    &statements[i]
                } else {
                    &bare_statements[i]
                };
                let t = Instant::now();
                raw_vector_sql(pool, stmt).await;
                d[which] = ms(t.elapsed());
            }
            (Vec::new(), d[0], d[1])
        } else {
            let t = Instant::now();
            let hits = store
                .vector_channel(p, None, &evecs[i], DEPTH)
                .await
                .unwrap_or_else(|e| panic!("vector channel: {e}"));
            std::hint::black_box(&hits);
            let dc = ms(t.elapsed());
            (hits.iter().take(10).map(|h| h.chunk_id).collect(), dc, 0.0)
        };
        // Through the store, as the service calls it, alternating: the channel bringing its
        // first 10 chunks (`Store::vector_channel_shown`, what a VECTOR search runs) against
        // the bare channel followed by a separate read (what it ran before).
        let (dnew, dold) = {
            let mut d = [0.0; 2];
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for which in order {
                let t = Instant::now();
                if which == 0 {
                    let r = store
                        .vector_channel_shown(p, None, &evecs[i], DEPTH, 10)
                        .await
                        .unwrap_or_else(|e| panic!("vector channel: {e}"));
                    std::hint::black_box(r);
                } else {
                    let hits = store
                        .vector_channel(p, None, &evecs[i], DEPTH)
                        .await
                        .unwrap_or_else(|e| panic!("vector channel: {e}"));
                    let ids: Vec<i64> = hits.iter().take(10).map(|h| h.chunk_id).collect();
                    let views = store
                        .chunk_views(p, &ids)
                        .await
                        .unwrap_or_else(|e| panic!("chunk views: {e}"));
                    std::hint::black_box(views);
                }
                d[which] = ms(t.elapsed());
            }
            (d[0], d[1])
        };
        let top = if top.is_empty() {
            store
                .vector_channel(p, None, &evecs[i], 10)
                .await
                .unwrap_or_else(|e| panic!("vector channel: {e}"))
                .iter()
                .map(|h| h.chunk_id)
                .collect()
        } else {
            top
        };
        let t = Instant::now();
        let views = store
            .chunk_views(p, &top)
            .await
            .unwrap_or_else(|e| panic!("chunk views: {e}"));
        std::hint::black_box(views);
        let dh = ms(t.elapsed());
        // PostgreSQL: the same statement on the channels' pool, whose sessions plan every
        // execution (what every statement paid before the pools were split).
        let dhc = if pg {
            let stmt = chunk_views_statement(sea_orm::DatabaseBackend::Postgres, p, &top);
            let t = Instant::now();
            let views = ChunkView::find_by_statement(stmt)
                .all(store.channel_connection())
                .await
                .unwrap_or_else(|e| panic!("chunk views, channels' pool: {e}"));
            std::hint::black_box(views);
            ms(t.elapsed())
        } else {
            0.0
        };
        let t = Instant::now();
        let outcome = s
            .cairn()
            .search(
                p,
                SearchRequest {
                    query: b.texts[i].clone(),
                    corpus_ids: None,
                    top_k: 10,
                    mode: SearchMode::Vector,
                },
            )
            .await
            .unwrap_or_else(|e| panic!("Cairn::search: {e}"));
        std::hint::black_box(outcome);
        let ds = ms(t.elapsed());
        let t = Instant::now();
        failures.note(std::hint::black_box(
            graphql(
                &b.http,
                s,
                &s.owner_token,
                json!({ "query": "{ __typename }" }),
                "{ __typename }",
            )
            .await,
        ));
        let dz = ms(t.elapsed());
        let t = Instant::now();
        failures.note(std::hint::black_box(
            api_search(&b.http, s, &s.owner_token, &b.texts[i], "VECTOR").await,
        ));
        let da = ms(t.elapsed());
        if round >= WARMUP {
            t_embed.push(de);
            t_channel.push(dc);
            t_bare.push(dbare);
            t_new.push(dnew);
            t_old.push(dold);
            t_hydrate.push(dh);
            t_hydrate_custom.push(dhc);
            t_service.push(ds);
            t_empty.push(dz);
            t_api.push(da);
            residual.push(da - de - dc);
        }
    }
    let [e, c, h, sv, z, a, r] = [
        t_embed, t_channel, t_hydrate, t_service, t_empty, t_api, residual,
    ]
    .map(Stats::of);
    let channel = if pg {
        "raw SQL (first 10 with text)"
    } else {
        "Store::vector_channel"
    };
    rep.line(format!(
        "  API overhead, interleaved per query on the same embedded vectors ({QUERIES} rounds, after {WARMUP}; {}), per stage:",
        CpuTimes::steal_since(cpu_at_start)
    ));
    rep.line(e.row("    embed"));
    rep.line(c.row(&format!("    {channel} (query = the text's embedding)")));
    let bare = Stats::of(t_bare);
    if pg {
        rep.line(bare.row("    raw SQL, bare channel (no text; HYBRID's statement)"));
    }
    rep.line(h.row("    hydration (Store::chunk_views, top 10)"));
    let (new, old) = (Stats::of(t_new), Stats::of(t_old));
    rep.line(new.row("    Store::vector_channel_shown(10) (VECTOR's read)"));
    rep.line(old.row("    Store::vector_channel + chunk_views (before)"));
    rep.line(format!(
        "    the first 10 chunks read with the channel vs after it, alternating: p50 {:.3} vs {:.3} ms ({:.3} ms saved), mean {:.3} vs {:.3} ms",
        new.p50,
        old.p50,
        old.p50 - new.p50,
        new.mean,
        old.mean
    ));
    if pg {
        rep.line(
            Stats::of(t_hydrate_custom)
                .row("    the same statement planned per execution (the channels' pool)"),
        );
    }
    rep.line(sv.row("    Cairn::search (service, in process)"));
    rep.line(z.row("    GraphQL { __typename } over HTTP"));
    rep.line(a.row("    GraphQL VECTOR over HTTP"));
    let overhead = a.p50 - e.p50 - c.p50;
    rep.line(format!(
        "    p50 shares: service beyond embed + channel {:.3} ms (of which hydration {:.3}); HTTP + token + GraphQL (empty request) {:.3} ms; the search resolver beyond service + empty request {:.3} ms",
        sv.p50 - e.p50 - c.p50,
        h.p50,
        z.p50,
        a.p50 - sv.p50 - z.p50
    ));
    rep.line(format!(
        "    overhead = API p50 - embed p50 - {channel} p50 = {overhead:.3} ms (goal <= 2 ms: {}); per-query residual API - embed - channel: p50 {:.3} ms, p95 {:.3} ms",
        if overhead <= 2.0 { "met" } else { "NOT met" },
        r.p50,
        r.p95
    ));
    if pg {
        rep.line(format!(
            "    stricter, against the bare channel's SQL (no text): API p50 - embed p50 - bare p50 = {:.3} ms",
            a.p50 - e.p50 - bare.p50
        ));
    }
    failures.report(rep, "VECTOR API");
}

impl Section {
    pub(crate) fn api_p50(&self, mode: &str) -> f64 {
        self.api.get(mode).map(|s| s.p50).unwrap_or(f64::NAN)
    }
}
