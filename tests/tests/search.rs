//! Retrieval end to end on SQLite and PostgreSQL, with the real embedding model: visibility
//! inside both channels, heading weighting, fusion computed by hand, the relevance banner,
//! searchAll, the knowledge summary, and the index following deletes, moves, visibility
//! changes and new versions.

use std::collections::HashMap;

use cairn_tests::{both_backends, error_code, require_model, Backend, TestServer};
use serde_json::{json, Value};

both_backends!(
    private_documents_never_surface,
    heading_terms_rank_first_lexically,
    fused_order_is_rrf_by_hand,
    banners_on_fixtures,
    search_all_and_knowledge_summary,
    index_follows_every_change,
    bad_search_input_is_refused,
    lexical_channel_ranks_by_bm25,
    lexical_channel_is_bm25_over_what_the_searcher_reads,
    vector_search_reads_its_results_with_the_channel,
);

const SEARCH: &str = "query($q: String!, $m: SearchMode! = HYBRID, $k: Int! = 10, $c: [ID!]) { search(query: $q, mode: $m, topK: $k, corpusIds: $c) { mode relevance topScore meanScore notices results { chunkId documentId corpusId documentTitle version chunkIndex section page content score vectorRank lexicalRank fusedScore document { id title } } } }";

async fn search(s: &TestServer, token: &str, q: &str, mode: &str, k: i64) -> Value {
    let d = s
        .gql_ok(token, SEARCH, json!({ "q": q, "m": mode, "k": k }))
        .await;
    d["search"].clone()
}

fn doc_ids(r: &Value) -> Vec<String> {
    r["results"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|h| h["documentId"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn chunk_ids(r: &Value) -> Vec<String> {
    r["results"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|h| h["chunkId"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

const GLACIER: &str = "# Glaciers\n\nA glacier is a persistent body of dense ice that is constantly moving under its own weight. Glaciers form where the accumulation of snow exceeds its ablation over many years.\n\n## Moraines\n\nMoraines are ridges of debris deposited by a glacier as it advances and retreats. Terminal moraines mark the furthest advance of the ice.\n\n## Calving\n\nCalving is the breaking off of ice chunks at the edge of a glacier that ends in water, producing icebergs.";
const BREAD: &str = "# Sourdough baking\n\nSourdough bread is leavened by a culture of wild yeast and lactic acid bacteria. The starter is fed with flour and water every day.\n\n## Proofing\n\nThe shaped dough proofs slowly in a cool place overnight, which develops a sour flavour and an open crumb.\n\n## Baking\n\nBake the loaf in a very hot Dutch oven, covered for the first twenty minutes so that steam lets the crust expand.";
const ROCKETS: &str = "# Rocket engines\n\nA liquid-propellant rocket engine burns a fuel and an oxidizer in a combustion chamber and expels the hot exhaust through a nozzle.\n\n## Staged combustion\n\nIn a staged combustion cycle, propellant first passes through a preburner that drives the turbopumps, and the exhaust then enters the main chamber.\n\n## Nozzles\n\nA bell nozzle expands the exhaust gases to convert their thermal energy into thrust.";

/// A private document never appears in a colleague's (or another team's) results, in any
/// mode, including the lexical-only hits its rare words would produce.
async fn private_documents_never_surface(backend: Backend) {
    require_model();
    let s = TestServer::start(backend).await;
    let (_, alice) = s.user_with_token("alice", "MEMBER").await;
    let (_, bob) = s.user_with_token("bob", "MEMBER").await;
    let corpus = s.create_corpus(&s.owner_token, "field notes").await;
    let secret_text = "# Zanzibarite assay\n\nThe zanzibarite vein at the northern adit assayed at 41 grams per tonne; keep this private until the claim is filed.";
    let secret = s
        .ingest_text(&alice, &corpus, "Assay memo", secret_text, "PRIVATE")
        .await;
    let public = s
        .ingest_text(&bob, &corpus, "Glaciers", GLACIER, "TEAM")
        .await;
    let (_, _, stranger) = s.other_team("elsewhere").await;

    let queries = [
        "zanzibarite",
        "zanzibarite vein assay grams per tonne",
        "mineral assay results of a gold vein",
        "glacier",
    ];
    for mode in ["HYBRID", "VECTOR", "LEXICAL"] {
        for q in queries {
            let mine = search(&s, &alice, q, mode, 50).await;
            let theirs = search(&s, &bob, q, mode, 50).await;
            assert!(
                !doc_ids(&theirs).contains(&secret),
                "{mode} {q:?}: bob sees alice's private document: {theirs}"
            );
            let body = theirs.to_string();
            assert!(!body.contains("zanzibarite vein"), "{mode} {q:?}: {body}");
            let other = search(&s, &stranger, q, mode, 50).await;
            assert!(doc_ids(&other).is_empty(), "{mode} {q:?}: {other}");
            if q.starts_with("zanzibarite") {
                assert_eq!(
                    doc_ids(&mine).first(),
                    Some(&secret),
                    "{mode} {q:?}: the owner finds her own memo first: {mine}"
                );
            }
        }
    }
    // The lexical channel finds nothing at all for bob on the memo's unique word.
    let lex = search(&s, &bob, "zanzibarite", "LEXICAL", 50).await;
    assert_eq!(lex["results"], json!([]), "{lex}");
    assert_eq!(lex["relevance"], "LOW");
    // searchAll neither: no chunk, no document title.
    let all = s
        .gql_ok(
            &bob,
            "query { searchAll(q: \"assay memo zanzibarite\") { __typename ... on DocumentHit { document { id } } ... on ChunkHit { documentId } } }",
            json!({}),
        )
        .await;
    assert!(!all.to_string().contains(&format!("\"{secret}\"")), "{all}");
    // Bob still finds the team document.
    let g = search(&s, &bob, "glacier moraines", "HYBRID", 5).await;
    assert_eq!(doc_ids(&g).first(), Some(&public), "{g}");
    s.stop().await;
}

/// A query whose words occur only in a chunk's heading ranks that chunk first lexically, above
/// chunks that use the words in their body.
async fn heading_terms_rank_first_lexically(backend: Backend) {
    require_model();
    let s = TestServer::start(backend).await;
    let corpus = s.create_corpus(&s.owner_token, "manuals").await;
    let text = "# Field manual\n\nGeneral remarks about the expedition and its equipment.\n\n## Crevasse rescue\n\nAnchor the rope to two buried ice axes, then build a pulley with the spare carabiners and haul steadily.\n\n## Camp routine\n\nEvery evening the team discussed crevasse rescue drills. Crevasse rescue practice happened daily; a crevasse rescue kit hung by the tent, and crevasse rescue was on everyone's mind.";
    let doc = s
        .ingest_text(&s.owner_token, &corpus, "Manual", text, "TEAM")
        .await;
    let r = search(&s, &s.owner_token, "crevasse rescue", "LEXICAL", 10).await;
    let hits = r["results"].as_array().cloned().unwrap_or_default();
    assert!(hits.len() >= 2, "both chunks match: {r}");
    assert_eq!(hits[0]["documentId"], json!(doc));
    assert_eq!(
        hits[0]["section"], "Crevasse rescue",
        "the heading match ranks first: {r}"
    );
    assert!(
        !hits[0]["content"]
            .as_str()
            .unwrap_or_default()
            .to_lowercase()
            .replace("crevasse rescue\n", "")
            .contains("crevasse"),
        "fixture: the heading chunk's body must not repeat the words: {}",
        hits[0]["content"]
    );
    assert_eq!(hits[0]["lexicalRank"], 1);
    assert_eq!(hits[0]["vectorRank"], Value::Null);
    assert_eq!(hits[0]["score"], 0.0);
    assert_eq!(r["relevance"], "LEXICAL_MATCH");
    s.stop().await;
}

/// HYBRID's order is exactly Reciprocal Rank Fusion (K = 60) of the VECTOR and LEXICAL lists,
/// computed here by hand; scores and ranks ride along unchanged.
async fn fused_order_is_rrf_by_hand(backend: Backend) {
    require_model();
    let s = TestServer::start(backend).await;
    let corpus = s.create_corpus(&s.owner_token, "mixed").await;
    for (t, x) in [
        ("Glaciers", GLACIER),
        ("Bread", BREAD),
        ("Rockets", ROCKETS),
    ] {
        s.ingest_text(&s.owner_token, &corpus, t, x, "TEAM").await;
    }
    for q in [
        "ice moving under its own weight",
        "hot exhaust through a nozzle",
        "oven steam crust",
        "the chamber",
    ] {
        let v = search(&s, &s.owner_token, q, "VECTOR", 100).await;
        let l = search(&s, &s.owner_token, q, "LEXICAL", 100).await;
        let h = search(&s, &s.owner_token, q, "HYBRID", 100).await;
        let mut fused: HashMap<String, (f64, u32, f64)> = HashMap::new();
        let mut cos: HashMap<String, f64> = HashMap::new();
        for (i, hit) in v["results"].as_array().into_iter().flatten().enumerate() {
            let id = hit["chunkId"].as_str().unwrap_or_default().to_owned();
            cos.insert(id.clone(), hit["score"].as_f64().unwrap_or(-1.0));
            let e = fused.entry(id).or_insert((0.0, u32::MAX, 0.0));
            e.0 += 1.0 / (60.0 + i as f64 + 1.0);
            e.1 = e.1.min(i as u32 + 1);
        }
        for (i, hit) in l["results"].as_array().into_iter().flatten().enumerate() {
            let id = hit["chunkId"].as_str().unwrap_or_default().to_owned();
            let e = fused.entry(id).or_insert((0.0, u32::MAX, 0.0));
            e.0 += 1.0 / (60.0 + i as f64 + 1.0);
            e.1 = e.1.min(i as u32 + 1);
        }
        let mut want: Vec<(String, (f64, u32, f64))> = fused.into_iter().collect();
        want.sort_by(|a, b| {
            b.1 .0.total_cmp(&a.1 .0).then(a.1 .1.cmp(&b.1 .1)).then(
                a.0.parse::<i64>()
                    .unwrap_or_default()
                    .cmp(&b.0.parse::<i64>().unwrap_or_default()),
            )
        });
        let want_ids: Vec<String> = want.iter().map(|w| w.0.clone()).collect();
        assert_eq!(chunk_ids(&h), want_ids, "{q:?}: {h}");
        for (hit, (id, (f, _, _))) in h["results"].as_array().into_iter().flatten().zip(&want) {
            let got = hit["fusedScore"].as_f64().unwrap_or_default();
            assert!((got - f).abs() < 1e-9, "{q:?} {id}: {got} vs {f}");
            let c = cos.get(id).copied().unwrap_or(0.0);
            let score = hit["score"].as_f64().unwrap_or(-1.0);
            assert!(
                (score - c).abs() < 1e-6,
                "{q:?} {id}: score {score} vs cosine {c}"
            );
        }
        assert!(
            l["results"]
                .as_array()
                .is_some_and(|a| a.len() < v["results"].as_array().map_or(0, Vec::len)),
            "{q:?}: the fixture needs lexical misses so that fusion is not trivial"
        );
    }
    s.stop().await;
}

/// Each banner value comes out on a fixture made for it.
async fn banners_on_fixtures(backend: Backend) {
    require_model();
    let s = TestServer::start(backend).await;
    let corpus = s.create_corpus(&s.owner_token, "banners").await;
    for (t, x) in [
        ("Glaciers", GLACIER),
        ("Bread", BREAD),
        ("Rockets", ROCKETS),
    ] {
        s.ingest_text(&s.owner_token, &corpus, t, x, "TEAM").await;
    }
    s.ingest_text(
        &s.owner_token,
        &corpus,
        "Parts list",
        "# Parts\n\nReplacement part XK-7741 fits the left hinge; order code QZV-0093.",
        "TEAM",
    )
    .await;
    let cases = [
        (
            "HIGH",
            "How do glaciers form from snow accumulation and move under their own weight?",
        ),
        ("MODERATE", "How are icebergs produced?"),
        ("LOW", "quarterly tax filing deadlines for small businesses"),
        ("LEXICAL_MATCH", "QZV-0093"),
    ];
    for (want, q) in cases {
        let r = search(&s, &s.owner_token, q, "HYBRID", 5).await;
        assert_eq!(
            r["relevance"], want,
            "{q:?}: top {} mean {}: {}",
            r["topScore"], r["meanScore"], r["results"][0]
        );
    }
    // LOW also when nothing at all matches.
    let none = search(&s, &s.owner_token, "QZV0093X", "LEXICAL", 5).await;
    assert_eq!(none["relevance"], "LOW");
    s.stop().await;
}

/// searchAll returns documents by title and chunks; the knowledge summary counts what the
/// caller may read across the team's corpora.
async fn search_all_and_knowledge_summary(backend: Backend) {
    require_model();
    let s = TestServer::start(backend).await;
    let none = s
        .gql_ok(&s.owner_token, "query { knowledgeSummary }", json!({}))
        .await;
    assert_eq!(none["knowledgeSummary"], Value::Null, "no corpora: omitted");
    let a = s.create_corpus(&s.owner_token, "geology").await;
    let b = s.create_corpus(&s.owner_token, "kitchen").await;
    let (_, carol) = s.user_with_token("carol", "MEMBER").await;
    let glacier = s
        .ingest_text(&s.owner_token, &a, "Glacier handbook", GLACIER, "TEAM")
        .await;
    s.ingest_text(&s.owner_token, &b, "Sourdough notes", BREAD, "TEAM")
        .await;
    s.ingest_text(
        &s.owner_token,
        &b,
        "Secret recipe",
        "# Recipe\n\nMy grandmother's secret.",
        "PRIVATE",
    )
    .await;
    let all = s
        .gql_ok(
            &carol,
            "query { searchAll(q: \"glacier handbook\", first: 5) { __typename ... on DocumentHit { document { id title } } ... on ChunkHit { documentId section } ... on EntityHit { id name } } }",
            json!({}),
        )
        .await;
    let hits = all["searchAll"].as_array().cloned().unwrap_or_default();
    assert_eq!(hits[0]["__typename"], "DocumentHit", "{all}");
    assert_eq!(hits[0]["document"]["id"], json!(glacier));
    assert!(hits.iter().any(|h| h["__typename"] == "ChunkHit"), "{all}");
    assert!(hits.len() <= 5);

    let srv = &s;
    let sum = |t: String| async move {
        srv.gql_ok(&t, "query { knowledgeSummary }", json!({}))
            .await["knowledgeSummary"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(
        sum(s.owner_token.clone()).await,
        format!("Knowledge: 3 documents across 2 corpora: geology (corpus_id={a}), kitchen (corpus_id={b}). Use `search` to find content.")
    );
    assert_eq!(
        sum(carol.clone()).await,
        format!("Knowledge: 2 documents across 2 corpora: geology (corpus_id={a}), kitchen (corpus_id={b}). Use `search` to find content."),
        "carol cannot read the private recipe"
    );
    let (_, _, stranger) = s.other_team("elsewhere").await;
    let other = s
        .gql_ok(&stranger, "query { knowledgeSummary }", json!({}))
        .await;
    assert_eq!(other["knowledgeSummary"], Value::Null);
    s.stop().await;
}

/// Deletes, visibility changes, moves and new versions are reflected in the next search, in
/// every mode (on SQLite this is the in-memory index being kept in step).
async fn index_follows_every_change(backend: Backend) {
    require_model();
    let s = TestServer::start(backend).await;
    let (_, dave) = s.user_with_token("dave", "MEMBER").await;
    let a = s.create_corpus(&s.owner_token, "one").await;
    let b = s.create_corpus(&s.owner_token, "two").await;
    // Search once first, so the index exists before the changes (SQLite loads it lazily).
    search(&s, &s.owner_token, "anything", "VECTOR", 5).await;
    let glacier = s
        .ingest_text(&s.owner_token, &a, "Glaciers", GLACIER, "TEAM")
        .await;
    let rockets = s
        .ingest_text(&s.owner_token, &a, "Rockets", ROCKETS, "TEAM")
        .await;
    let q = "glacier ice moraines";
    let sees = |token: String, mode: &'static str, corpora: Option<Vec<String>>| {
        let s = &s;
        async move {
            let d = s
                .gql_ok(
                    &token,
                    SEARCH,
                    json!({ "q": q, "m": mode, "k": 50, "c": corpora }),
                )
                .await;
            doc_ids(&d["search"])
        }
    };
    for mode in ["VECTOR", "HYBRID"] {
        assert_eq!(sees(dave.clone(), mode, None).await.first(), Some(&glacier));
    }
    // Visibility: private → dave loses it in every mode.
    s.gql_ok(
        &s.owner_token,
        "mutation($d: ID!) { setVisibility(documentId: $d, visibility: PRIVATE) { id } }",
        json!({ "d": glacier }),
    )
    .await;
    for mode in ["VECTOR", "HYBRID", "LEXICAL"] {
        assert!(
            !sees(dave.clone(), mode, None).await.contains(&glacier),
            "{mode}"
        );
        assert!(
            sees(s.owner_token.clone(), mode, None)
                .await
                .contains(&glacier),
            "{mode}"
        );
    }
    s.gql_ok(
        &s.owner_token,
        "mutation($d: ID!) { setVisibility(documentId: $d, visibility: TEAM) { id } }",
        json!({ "d": glacier }),
    )
    .await;
    // Move: the corpus filter follows.
    s.gql_ok(
        &s.owner_token,
        "mutation($to: ID!, $d: [ID!]) { moveDocuments(toCorpusId: $to, documentIds: $d) }",
        json!({ "to": b, "d": [glacier] }),
    )
    .await;
    for mode in ["VECTOR", "HYBRID", "LEXICAL"] {
        assert!(
            !sees(dave.clone(), mode, Some(vec![a.clone()]))
                .await
                .contains(&glacier),
            "{mode}"
        );
        let in_b = sees(dave.clone(), mode, Some(vec![b.clone()])).await;
        assert!(
            !in_b.is_empty() && in_b.iter().all(|d| d == &glacier),
            "{mode}: {in_b:?}"
        );
    }
    // New version: old chunks gone, new text found.
    let (status, body) = s
        .upload(
            &s.owner_token,
            &b,
            "glaciers.md",
            b"# Glaciers\n\nPiedmont lobes spread out where valley ice reaches a plain.".to_vec(),
            json!({ "d": glacier }),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let job = body["data"]["uploadDocument"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let ev = s.follow_job(&s.owner_token, &job).await;
    assert_eq!(
        ev.last().map(|e| e["stage"].clone()),
        Some(json!("searchable")),
        "{ev:?}"
    );
    let r = search(&s, &dave, "piedmont lobes on a plain", "VECTOR", 50).await;
    let hits = r["results"].as_array().cloned().unwrap_or_default();
    assert_eq!(hits[0]["documentId"], json!(glacier), "{r}");
    assert_eq!(hits[0]["version"], 2);
    assert!(
        hits.iter()
            .all(|h| h["documentId"] != json!(glacier) || h["version"] == 2),
        "no chunk of version 1 is left: {r}"
    );
    // Delete: gone from every mode.
    s.gql_ok(
        &s.owner_token,
        "mutation($d: ID!) { deleteDocument(id: $d) }",
        json!({ "d": glacier }),
    )
    .await;
    for mode in ["VECTOR", "HYBRID", "LEXICAL"] {
        let ids = sees(s.owner_token.clone(), mode, None).await;
        assert!(!ids.contains(&glacier), "{mode}: {ids:?}");
    }
    assert!(sees(s.owner_token.clone(), "VECTOR", None)
        .await
        .contains(&rockets));
    s.stop().await;
}

async fn bad_search_input_is_refused(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (_, viewer) = s.user_with_token("vera", "VIEWER").await;
    let (_, _, stranger) = s.other_team("elsewhere").await;
    let theirs = s.create_corpus(&stranger, "theirs").await;
    for (vars, code) in [
        (json!({ "q": "   ", "m": "LEXICAL" }), "BAD_USER_INPUT"),
        (
            json!({ "q": "x", "m": "LEXICAL", "k": 0 }),
            "BAD_USER_INPUT",
        ),
        (
            json!({ "q": "x", "m": "LEXICAL", "k": 101 }),
            "BAD_USER_INPUT",
        ),
        (
            json!({ "q": "x".repeat(2001), "m": "LEXICAL" }),
            "BAD_USER_INPUT",
        ),
        (
            json!({ "q": "x", "m": "LEXICAL", "c": [theirs] }),
            "NOT_FOUND",
        ),
        (
            json!({ "q": "x", "m": "LEXICAL", "c": ["not-an-id"] }),
            "NOT_FOUND",
        ),
        (
            json!({ "q": "x", "m": "LEXICAL", "c": [] }),
            "BAD_USER_INPUT",
        ),
    ] {
        let body = s.gql(&viewer, SEARCH, vars.clone()).await;
        assert_eq!(error_code(&body), Some(code), "{vars}: {body}");
    }
    // FTS and tsquery syntax in a query is just words.
    let ok = s
        .gql(
            &viewer,
            SEARCH,
            json!({ "q": "\"unbalanced OR NEAR( -x* 'a' | !b &", "m": "LEXICAL" }),
        )
        .await;
    assert!(ok.get("errors").is_none(), "{ok}");
    s.stop().await;
}

/// The lexical channel is BM25 with no required term: a 4-word query ranks the chunk that
/// holds all four words first, then the one with three, and still finds the chunk that shares
/// one word (it is a candidate, ranked last); a stopword-only query finds nothing.
async fn lexical_channel_ranks_by_bm25(backend: Backend) {
    require_model();
    let s = TestServer::start(backend).await;
    let corpus = s.create_corpus(&s.owner_token, "marmots").await;
    let all_four = "The granite marmot whistles at dawn near the cairn.";
    let three = "A granite marmot whistles loudly every evening.";
    let one = "A marmot sleeps through the long winter.";
    let none = "Ibex climb the scree above the glacier.";
    for (title, text) in [
        ("all four", all_four),
        ("three", three),
        ("one", one),
        ("none", none),
    ] {
        s.ingest_text(&s.owner_token, &corpus, title, text, "TEAM")
            .await;
    }
    let titles = |r: &Value| -> Vec<String> {
        r["results"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|h| h["documentTitle"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    let r = search(
        &s,
        &s.owner_token,
        "granite marmot whistles dawn",
        "LEXICAL",
        10,
    )
    .await;
    assert_eq!(titles(&r), vec!["all four", "three", "one"], "{r}");
    let r = search(&s, &s.owner_token, "marmots", "LEXICAL", 10).await;
    assert_eq!(titles(&r).len(), 3, "the stem matches every marmot: {r}");
    let r = search(&s, &s.owner_token, "what is the", "LEXICAL", 10).await;
    assert_eq!(titles(&r), Vec::<String>::new(), "{r}");
    s.stop().await;
}

/// Both backends hold the same postings and compute the same BM25, so the same documents
/// ingested in the same order rank the same chunks in the same order, with the same scores'
/// order (texts: the first 40 stories of lee_background.cor when it is there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lexical_ranking_is_the_same_on_both_backends() {
    require_model();
    let texts = lee_texts(40);
    let queries = [
        "hospital staff suspended",
        "bomb shoes flight",
        "fire fireworks shopping centre",
        "Australian cricket test match",
        "government minister said today",
        "glacier ice",
        "rocket nozzle exhaust",
        "the police said a man was arrested",
    ];
    let mut rankings: Vec<Vec<Vec<(String, i64)>>> = Vec::new();
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let s = TestServer::start(backend).await;
        let corpus = s.create_corpus(&s.owner_token, "same").await;
        for (i, t) in texts.iter().enumerate() {
            s.ingest_text(&s.owner_token, &corpus, &format!("doc-{i:02}"), t, "TEAM")
                .await;
        }
        let mut per_query = Vec::new();
        for q in queries {
            let r = search(&s, &s.owner_token, q, "LEXICAL", 50).await;
            let ranked: Vec<(String, i64)> = r["results"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|h| {
                    (
                        h["documentTitle"].as_str().unwrap_or_default().to_owned(),
                        h["chunkIndex"].as_i64().unwrap_or(-1),
                    )
                })
                .collect();
            per_query.push(ranked);
        }
        rankings.push(per_query);
        s.stop().await;
    }
    let mut compared = 0;
    for (i, q) in queries.iter().enumerate() {
        assert_eq!(rankings[0][i], rankings[1][i], "{q}: SQLite vs PostgreSQL");
        compared += rankings[0][i].len();
    }
    assert!(compared >= 20, "too few hits to compare ({compared})");
}

/// The lexical channel is BM25 by the formula (Lucene's, as documented), computed here from
/// the chunks' own text with the analyzer, over exactly the chunks the searcher may read in
/// the corpora searched: N, df and the average length included. Checked for the owner and for
/// a member, over all corpora and one corpus, at depth 10 and 300, on fresh documents and
/// after a move, a private document and a delete: every score the channel returns is the
/// reference's score for that chunk, and the scores at each rank are the reference's (so no
/// better chunk was left out; equal scores may come in either order only if they tie).
async fn lexical_channel_is_bm25_over_what_the_searcher_reads(backend: Backend) {
    require_model();
    let texts = lee_texts(60);
    let s = TestServer::start(backend).await;
    let corpus = s.create_corpus(&s.owner_token, "bm25").await;
    let other = s.create_corpus(&s.owner_token, "elsewhere").await;
    let mut docs = Vec::new();
    for (i, t) in texts.iter().enumerate() {
        docs.push(
            s.ingest_text(&s.owner_token, &corpus, &format!("doc-{i:02}"), t, "TEAM")
                .await,
        );
    }
    let (_, member_token) = s.user_with_token("reader", "MEMBER").await;
    let owner = s
        .cairn()
        .authenticate(&s.owner_token)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let member = s
        .cairn()
        .authenticate(&member_token)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let store = &s.cairn().store;
    let analyzer = cairn::domain::lexical::Analyzer::new();
    let bm25 = cairn::domain::lexical::Bm25::default();
    let id = |d: &str| -> i64 { d.parse().unwrap_or_else(|e| panic!("{d}: {e}")) };
    let (corpus_id, other_id) = (id(&corpus), id(&other));
    // Per document: its corpus, whether it is private, whether it is deleted.
    let mut state: Vec<(i64, bool, bool)> = vec![(corpus_id, false, false); docs.len()];
    let queries = [
        "the government said today it would act",
        "police arrested a man after the attack",
        "Australian cricket team wins the test match",
        "fire hospital suspended staff bomb",
        "people year new world",
        "australian said",
        "government said",
    ];
    let check = |label: &'static str, state: Vec<(i64, bool, bool)>| {
        let (docs, queries, analyzer, owner, member) =
            (&docs, &queries, &analyzer, &owner, &member);
        async move {
            let mut compared = 0;
            for (who, p) in [("owner", owner), ("member", member)] {
                for corpora in [None, Some(vec![corpus_id]), Some(vec![other_id])] {
                    // The chunks this searcher reads: (chunk id, analyzed length, postings).
                    let mut chunks = Vec::new();
                    for (d, &(c, private, deleted)) in docs.iter().zip(&state) {
                        if deleted || (private && who == "member") {
                            continue;
                        }
                        if corpora.as_ref().is_some_and(|cs| !cs.contains(&c)) {
                            continue;
                        }
                        for ch in store
                            .chunks_of(id(d), 1)
                            .await
                            .unwrap_or_else(|e| panic!("{e}"))
                        {
                            let (postings, len) =
                                analyzer.postings(ch.section.as_deref(), &ch.content);
                            let tf: HashMap<String, f64> = postings
                                .into_iter()
                                .map(|p| {
                                    let tf = f64::from(p.body)
                                        + bm25.heading_weight * f64::from(p.heading);
                                    (p.term, tf)
                                })
                                .collect();
                            chunks.push((ch.id, f64::from(len), tf));
                        }
                    }
                    let n = chunks.len() as f64;
                    let avg = chunks.iter().map(|c| c.1).sum::<f64>() / n.max(1.0);
                    for q in queries {
                        let terms = analyzer.query_terms(q);
                        let mut reference: Vec<(i64, f64)> = chunks
                            .iter()
                            .filter_map(|(chunk, len, tf)| {
                                let mut score = 0.0;
                                let mut any = false;
                                for t in &terms {
                                    let Some(&f) = tf.get(t) else { continue };
                                    any = true;
                                    let df = chunks.iter().filter(|c| c.2.contains_key(t)).count()
                                        as f64;
                                    let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                                    score += idf * f * (bm25.k1 + 1.0)
                                        / (f + bm25.k1 * (1.0 - bm25.b + bm25.b * len / avg));
                                }
                                any.then_some((*chunk, score))
                            })
                            .collect();
                        reference.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                        let by_chunk: HashMap<i64, f64> = reference.iter().copied().collect();
                        for depth in [10usize, 300] {
                            let got = store
                                .lexical_channel(p, corpora.as_deref(), &terms, bm25, depth)
                                .await
                                .unwrap_or_else(|e| panic!("{e}"));
                            let at = format!(
                                "{label}, {who}, corpora {corpora:?}, {q:?}, depth {depth}"
                            );
                            assert_eq!(got.len(), reference.len().min(depth), "{at}");
                            let close = |a: f64, b: f64| (a - b).abs() <= 1e-4 * b.abs().max(1.0);
                            for (i, h) in got.iter().enumerate() {
                                let own = by_chunk.get(&h.chunk_id).copied().unwrap_or_else(|| {
                                    panic!("{at}: chunk {} is not a candidate", h.chunk_id)
                                });
                                assert!(
                                    close(f64::from(h.score), own),
                                    "{at}: chunk {} scored {} (reference {own})",
                                    h.chunk_id,
                                    h.score
                                );
                                assert!(
                                    close(f64::from(h.score), reference[i].1),
                                    "{at}: rank {i} scored {} (reference {})",
                                    h.score,
                                    reference[i].1
                                );
                            }
                            compared += got.len();
                        }
                    }
                }
            }
            assert!(compared > 500, "{label}: too few hits ({compared})");
        }
    };
    check("fresh", state.clone()).await;
    // Statistics move with the documents: a move, a private document, a delete.
    let move_q =
        "mutation($ids: [ID!], $to: ID!) { moveDocuments(documentIds: $ids, toCorpusId: $to) }";
    let moved = s
        .gql(
            &s.owner_token,
            move_q,
            json!({ "ids": &docs[..10], "to": other }),
        )
        .await;
    assert!(moved.get("errors").is_none(), "{moved}");
    for d in &mut state[..10] {
        d.0 = other_id;
    }
    let vis = s
        .gql(
            &s.owner_token,
            "mutation($id: ID!) { setVisibility(documentId: $id, visibility: PRIVATE) { id } }",
            json!({ "id": docs[20] }),
        )
        .await;
    assert!(vis.get("errors").is_none(), "{vis}");
    state[20].1 = true;
    let del = s
        .gql(
            &s.owner_token,
            "mutation($id: ID!) { deleteDocument(id: $id) }",
            json!({ "id": docs[30] }),
        )
        .await;
    assert!(del.get("errors").is_none(), "{del}");
    state[30].2 = true;
    check("after changes", state).await;
    s.stop().await;
}

/// The first `n` stories of lee_background.cor when it is there, else the three fixtures.
fn lee_texts(n: usize) -> Vec<String> {
    match std::env::var("CAIRN_TEST_LEE_CORPUS") {
        Ok(path) => std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{path}: {e}"))
            .lines()
            .filter(|l| !l.trim().is_empty())
            .take(n)
            .map(str::to_owned)
            .collect(),
        Err(_) => vec![GLACIER.into(), BREAD.into(), ROCKETS.into()],
    }
}

/// PostgreSQL: the channels' statements run on a pool whose sessions plan every execution for
/// its parameters (a generic plan loses the HNSW index and cannot see which terms are rare),
/// while every other statement keeps PostgreSQL's default and reuses its plan; both pools
/// carry pgvector's scan settings. Then both channels, run more than the five times after
/// which PostgreSQL would switch to a generic plan, still rank the right document first (the
/// plan itself is not observed here: the search bench's EXPLAIN shows the index scan).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_channels_plan_per_execution() {
    require_model();
    let s = TestServer::start(Backend::Postgres).await;
    let store = &s.cairn().store;
    let setting = |conn: &sea_orm::DatabaseConnection, name: &'static str| {
        let conn = conn.clone();
        async move {
            use sea_orm::ConnectionTrait;
            let row = conn
                .query_one_raw(sea_orm::Statement::from_string(
                    sea_orm::DatabaseBackend::Postgres,
                    format!("SELECT current_setting('{name}') AS v"),
                ))
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"))
                .unwrap_or_else(|| panic!("{name}: no row"));
            row.try_get::<String>("", "v")
                .unwrap_or_else(|e| panic!("{name}: {e}"))
        }
    };
    let main = store.connection();
    let channels = store.channel_connection();
    assert_eq!(
        setting(channels, "plan_cache_mode").await,
        "force_custom_plan"
    );
    assert_eq!(setting(main, "plan_cache_mode").await, "auto");
    for conn in [main, channels] {
        assert_eq!(setting(conn, "hnsw.iterative_scan").await, "relaxed_order");
        assert_eq!(setting(conn, "hnsw.ef_search").await, "100");
    }
    let corpus = s.create_corpus(&s.owner_token, "plans").await;
    for (title, text) in [
        (
            "glaciers",
            "Glaciers carve valleys as the ice moves slowly downhill.",
        ),
        (
            "rockets",
            "A rocket nozzle accelerates the exhaust to supersonic speed.",
        ),
    ] {
        s.ingest_text(&s.owner_token, &corpus, title, text, "TEAM")
            .await;
    }
    for round in 0..8 {
        for (q, want) in [("ice valleys", "glaciers"), ("rocket exhaust", "rockets")] {
            for mode in ["VECTOR", "LEXICAL"] {
                let r = search(&s, &s.owner_token, q, mode, 1).await;
                assert_eq!(
                    r["results"][0]["documentTitle"].as_str(),
                    Some(want),
                    "round {round}, {mode} {q:?}: {r}"
                );
            }
        }
    }
    s.stop().await;
}

/// A VECTOR search reads its results with its channel: on PostgreSQL the channel's statement
/// brings the first `topK` chunks' text, so the whole search is one statement; on SQLite the
/// in-memory channel is followed by one read (two statements: the index's change check and
/// the read), counted on an instance without workers. The results are exactly what the bare channel and a separate read give (same
/// chunks in the same order, same scores, text, titles, sections), at every `topK`; and a
/// private document's text reaches its owner through it, never a colleague.
async fn vector_search_reads_its_results_with_the_channel(backend: Backend) {
    use cairn::domain::search::{SearchMode, CHANNEL_DEPTH};
    use cairn::domain::Role;
    use cairn::service::search::SearchRequest;

    require_model();
    let s = TestServer::start(backend).await;
    let corpus = s.create_corpus(&s.owner_token, "shown").await;
    for (title, text) in [
        ("Glaciers", GLACIER),
        ("Sourdough", BREAD),
        ("Rockets", ROCKETS),
    ] {
        s.ingest_text(&s.owner_token, &corpus, title, text, "TEAM")
            .await;
    }
    s.ingest_text(
        &s.owner_token,
        &corpus,
        "Survey memo",
        "# Survey memo\n\nThe quillwort survey along the glacier moraines stays private until spring.",
        "PRIVATE",
    )
    .await;
    // Searches are counted on a second instance without workers (theirs would add
    // statements of their own to the count).
    let quiet = s.second_instance_tuned(|c| c.workers = 0).await;
    let cairn = quiet.cairn();
    let store = &cairn.store;
    let owner = quiet.owner_principal().await;
    let member = cairn_tests::new_principal(store, owner.team_id, "carol", Role::Member).await;
    let embedder = cairn
        .models
        .embedder
        .clone()
        .unwrap_or_else(|| panic!("no embedder"));
    let search = |p: &cairn::auth::Principal, q: &str, k: usize| {
        let p = p.clone();
        let q = q.to_owned();
        async move {
            cairn
                .search(
                    &p,
                    SearchRequest {
                        query: q,
                        corpus_ids: None,
                        top_k: k,
                        mode: SearchMode::Vector,
                    },
                )
                .await
                .unwrap_or_else(|e| panic!("search: {e}"))
        }
    };
    // The first search on SQLite reads the index into memory.
    search(&owner, "glacier", 1).await;
    let mut owner_saw_canary = false;
    for q in [
        "quillwort survey of the moraines",
        "how is sourdough bread leavened",
        "rocket nozzle exhaust",
    ] {
        let v = embedder
            .embed_query(q)
            .await
            .unwrap_or_else(|e| panic!("embed: {e}"));
        for p in [&owner, &member] {
            for k in [1, 3, 10] {
                let before = store.statement_count();
                let outcome = search(p, q, k).await;
                let statements = store.statement_count() - before;
                let want_statements = match backend {
                    Backend::Postgres => 1,
                    Backend::Sqlite => 2,
                };
                assert_eq!(statements, want_statements, "{q:?} top {k}: statements");
                // The bare channel, then a separate read of its first k chunks.
                let channel = store
                    .vector_channel(p, None, &v, CHANNEL_DEPTH)
                    .await
                    .unwrap_or_else(|e| panic!("channel: {e}"));
                let ids: Vec<i64> = channel.iter().take(k).map(|h| h.chunk_id).collect();
                let mut views: HashMap<i64, _> = store
                    .chunk_views(p, &ids)
                    .await
                    .unwrap_or_else(|e| panic!("chunk views: {e}"))
                    .into_iter()
                    .map(|c| (c.chunk_id, c))
                    .collect();
                let want: Vec<_> = channel
                    .iter()
                    .take(k)
                    .map(|h| (views.remove(&h.chunk_id), h.score))
                    .collect();
                let got: Vec<_> = outcome
                    .hits
                    .iter()
                    .map(|h| (Some(h.chunk.clone()), h.rank.score))
                    .collect();
                assert_eq!(got, want, "{q:?} top {k}");
                assert_eq!(got.len(), k.min(channel.len()), "{q:?} top {k}");
                let canary = outcome
                    .hits
                    .iter()
                    .any(|h| h.chunk.content.contains("quillwort"));
                if p.user_id == member.user_id {
                    assert!(!canary, "a colleague read the private memo: {q:?} top {k}");
                } else {
                    owner_saw_canary |= canary;
                }
            }
        }
    }
    assert!(owner_saw_canary, "the owner never found their own memo");
    quiet.stop().await;
    s.stop().await;
}
