//! The SQL statement count of a nested `entities` query.

use cairn::domain::Visibility;
use cairn::testing::{StoreIngest, Target};
use cairn_kg::normalize::name_norm;
use cairn_kg::{Entity, Extraction, Mention, Relation};
use cairn_tests::{Backend, TestServer};
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::json;

use super::blob;

/// `entities(first: 50) { relations { mentions } mentions }` costs the same number of SQL
/// statements for 6 entities as for 50. Counted with `Store::statement_count` (sea-orm's
/// metric callback, set on the pool when the store opens, fires once per statement).
pub(super) async fn statement_count_does_not_grow(backend: Backend) {
    let s = TestServer::start_tuned(backend, |c| c.workers = 0).await;
    let store = s.cairn().store.clone();
    let team = s
        .gql_ok(&s.owner_token, "query { me { team { id } } }", json!({}))
        .await;
    let team_id: i64 = team["me"]["team"]["id"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("{team}"));
    let owner = s
        .gql_ok(&s.owner_token, "query { me { user { id } } }", json!({}))
        .await;
    let owner_id: i64 = owner["me"]["user"]["id"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("{owner}"));
    let corpus = store
        .create_corpus(Some(team_id), "count", None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut rng = StdRng::seed_from_u64(5);
    let q = "query { entities(first: 50) { edges { node { id relations { id mentions { snippet document { id } } } mentions { snippet document { id title } } } } } }";
    let mut made = 0usize;
    let mut counts = Vec::new();
    for target in [6usize, 50] {
        while made < target {
            // One document per pair of entities, related.
            let (doc, _) = store
                .store_ingest(StoreIngest {
                    target: Target::New {
                        team_id,
                        corpus_id: corpus.id,
                        owner_id,
                        visibility: Visibility::Team,
                        title: format!("d{made}"),
                        source_url: None,
                    },
                    blob: blob(&mut rng),
                    filename: None,
                    extracted_chars: 0,
                    chunks: Vec::new(),
                })
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let mk = |n: usize| Entity {
                entity_type: "concept".into(),
                name: format!("Thing {n}"),
                name_norm: name_norm(&format!("Thing {n}")),
                description: String::new(),
                mentions: vec![Mention {
                    snippet: format!("about thing {n}"),
                    char_offset: 0,
                }],
            };
            let x = Extraction {
                entities: vec![mk(made), mk(made + 1)],
                relations: vec![Relation {
                    subject: 0,
                    predicate: "depends_on".into(),
                    object: 1,
                    mentions: vec![Mention {
                        snippet: format!("thing {made} depends on the next"),
                        char_offset: 0,
                    }],
                }],
            };
            store
                .store_extraction(team_id, doc.id, 1, "synthetic", &x, &[])
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            made += 2;
        }
        // The fewest statements over a few runs (the job queue's poll may interleave).
        let mut best = u64::MAX;
        let mut n_entities = 0;
        for _ in 0..5 {
            let before = store.statement_count();
            let d = s.gql_ok(&s.owner_token, q, json!({})).await;
            let after = store.statement_count();
            n_entities = d["entities"]["edges"].as_array().map_or(0, Vec::len);
            best = best.min(after - before);
        }
        assert_eq!(n_entities, target);
        counts.push(best);
    }
    eprintln!("statements for 6 and 50 entities ({backend:?}): {counts:?}");
    assert!(counts[0] > 0, "the counter counts nothing: {counts:?}");
    assert!(
        counts[1] <= counts[0],
        "statement count grows with entities: {counts:?}"
    );
    s.stop().await;
}
