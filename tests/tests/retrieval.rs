//! Retrieval quality over a real text collection: the 300 news documents of gensim's
//! `lee_background.cor` (fetched at test time by scripts/fetch-eval-texts.sh, never committed)
//! and 60 queries labeled by hand (tests/fixtures/retrieval/lee_queries.json).
//!
//! Reports recall@10 and MRR (document level) for VECTOR, LEXICAL and HYBRID on each backend,
//! per query kind, into `$CAIRN_REPORT_DIR` (default: the system temp dir) and stderr; fails
//! if HYBRID does worse than either channel alone.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::Duration;

use cairn_tests::{both_backends, repo_root, require_model, Backend, TestServer};
use serde_json::{json, Value};

both_backends!(lee_background_quality);

#[derive(Default, Clone, Copy)]
struct Score {
    recall: f64,
    rr: f64,
    n: usize,
}

impl Score {
    fn add(&mut self, recall: f64, rr: f64) {
        self.recall += recall;
        self.rr += rr;
        self.n += 1;
    }
    fn recall(&self) -> f64 {
        self.recall / self.n.max(1) as f64
    }
    fn mrr(&self) -> f64 {
        self.rr / self.n.max(1) as f64
    }
}

async fn lee_background_quality(backend: Backend) {
    require_model();
    let path = std::env::var("CAIRN_TEST_LEE_CORPUS").unwrap_or_else(|_| {
        panic!("CAIRN_TEST_LEE_CORPUS is not set: run scripts/fetch-eval-texts.sh (the README's test command does)")
    });
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let docs: Vec<&str> = text.split('\n').filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(docs.len(), 300, "{path}");
    let labels: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("tests/fixtures/retrieval/lee_queries.json"))
            .unwrap_or_else(|e| panic!("labels: {e}")),
    )
    .unwrap_or_else(|e| panic!("labels: {e}"));
    let queries = labels["queries"].as_array().cloned().unwrap_or_default();
    assert!(queries.len() >= 50);

    let s = TestServer::start_tuned(backend, |c| c.workers = 2).await;
    let corpus = s.create_corpus(&s.owner_token, "lee").await;
    let mut jobs: Vec<String> = Vec::new();
    for (i, d) in docs.iter().enumerate() {
        let j = s
            .gql_ok(
                &s.owner_token,
                "mutation($c: ID!, $t: String!, $x: String!) { ingestText(corpusId: $c, title: $t, text: $x) { id } }",
                json!({ "c": corpus, "t": format!("lee-{i:03}"), "x": d }),
            )
            .await;
        jobs.push(
            j["ingestText"]["id"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        );
    }
    // Wait for every job (bounded). A few lines of the file are exact duplicates: their jobs
    // end as `duplicate: true` with the first copy's document, so the labels are compared as
    // documents, not lines.
    let started = tokio::time::Instant::now();
    let mut doc_of_line: Vec<Option<String>> = vec![None; jobs.len()];
    for (i, job) in jobs.iter().enumerate() {
        loop {
            let j = s
                .gql_ok(
                    &s.owner_token,
                    "query($j: ID!) { job(id: $j) { state result } }",
                    json!({ "j": job }),
                )
                .await;
            let state = j["job"]["state"].as_str().unwrap_or_default().to_owned();
            if state == "SUCCEEDED" {
                doc_of_line[i] = Some(match &j["job"]["result"]["documentId"] {
                    Value::Number(n) => n.to_string(),
                    other => panic!("line {i}: no document in {other}"),
                });
                break;
            }
            assert!(state != "FAILED" && state != "CANCELLED", "line {i}: {j}");
            assert!(
                started.elapsed() < Duration::from_secs(1200),
                "ingest stalled at line {i}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    eprintln!("{backend:?}: 300 lines ingested in {:?}", started.elapsed());
    let doc_of = |line: usize| doc_of_line[line].clone().unwrap_or_default();

    let mut table: HashMap<(&str, String), Score> = HashMap::new();
    // Per-query rankings (document ids, 100 deep), written next to the report for analysis.
    let mut dump: Vec<Value> = Vec::new();
    for q in &queries {
        let query = q["query"].as_str().unwrap_or_default();
        let kind = q["kind"].as_str().unwrap_or("?").to_owned();
        let mut relevant: Vec<String> = q["relevant"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_u64().map(|x| doc_of(x as usize)))
            .collect();
        relevant.sort();
        relevant.dedup();
        let mut per_mode = serde_json::Map::new();
        for mode in ["VECTOR", "LEXICAL", "HYBRID"] {
            let r = s
                .gql_ok(
                    &s.owner_token,
                    "query($q: String!, $m: SearchMode) { search(query: $q, mode: $m, topK: 100) { results { documentId } } }",
                    json!({ "q": query, "m": mode }),
                )
                .await;
            // Chunks → documents, first occurrence wins, top 10 documents.
            let mut ranked: Vec<String> = Vec::new();
            for h in r["search"]["results"].as_array().into_iter().flatten() {
                let d = h["documentId"].as_str().unwrap_or_default().to_owned();
                if !ranked.contains(&d) {
                    ranked.push(d);
                }
            }
            per_mode.insert(mode.to_owned(), json!(ranked.clone()));
            ranked.truncate(10);
            let found = relevant.iter().filter(|d| ranked.contains(d)).count();
            let recall = found as f64 / relevant.len().max(1) as f64;
            let rr = ranked
                .iter()
                .position(|d| relevant.contains(d))
                .map_or(0.0, |p| 1.0 / (p as f64 + 1.0));
            table
                .entry((mode, kind.clone()))
                .or_default()
                .add(recall, rr);
            table
                .entry((mode, "all".into()))
                .or_default()
                .add(recall, rr);
        }
        dump.push(json!({
            "id": q["id"],
            "kind": kind,
            "query": query,
            "relevant": relevant,
            "ranked": per_mode,
        }));
    }

    let mut report = format!(
        "retrieval quality, {backend:?}, lee_background.cor (300 docs), {} labeled queries\n{:<8} {:<11} {:>10} {:>7}\n",
        queries.len(),
        "mode",
        "kind",
        "recall@10",
        "MRR"
    );
    for kind in ["all", "paraphrase", "keyword", "question"] {
        for mode in ["VECTOR", "LEXICAL", "HYBRID"] {
            if let Some(sc) = table.get(&(mode, kind.to_owned())) {
                let _ = writeln!(
                    report,
                    "{mode:<8} {kind:<11} {:>10.3} {:>7.3}",
                    sc.recall(),
                    sc.mrr()
                );
            }
        }
    }
    eprintln!("{report}");
    let dir = std::env::var_os("CAIRN_REPORT_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("cairn-reports"));
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(
        dir.join(format!("retrieval-{backend:?}.txt").to_lowercase()),
        &report,
    );
    let _ = std::fs::write(
        dir.join(format!("retrieval-{backend:?}.json").to_lowercase()),
        json!(dump).to_string(),
    );

    let all = |m: &str| table[&(m, "all".to_owned())];
    let (v, l, h) = (all("VECTOR"), all("LEXICAL"), all("HYBRID"));
    for (name, other) in [("VECTOR", v), ("LEXICAL", l)] {
        assert!(
            h.mrr() + 1e-9 >= other.mrr(),
            "HYBRID MRR {:.3} is worse than {name} {:.3}\n{report}",
            h.mrr(),
            other.mrr()
        );
        assert!(
            h.recall() + 1e-9 >= other.recall(),
            "HYBRID recall@10 {:.3} is worse than {name} {:.3}\n{report}",
            h.recall(),
            other.recall()
        );
    }
    s.stop().await;
}
