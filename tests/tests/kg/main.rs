//! The knowledge graph end to end on SQLite and PostgreSQL: the seed's mention-rule cases,
//! supersession and delete, a randomized property test of the mention rule (≥ 10,000 checks
//! per backend), the SQL statement count of a nested `entities` query, the extraction job
//! (rules extractor, progress, cancellation, the `llm` backend against the stub), the per-team
//! quota and concurrency cap, `entities(q)` paging, and (ignored) the precision harness.

use std::collections::BTreeSet;

use cairn::testing::BlobRef;
use cairn::Store;
use cairn_tests::{both_backends, TestServer};
use rand::rngs::StdRng;
use rand::Rng;
use serde_json::{json, Value};

mod jobs;
mod mention_rule;
mod paging;
mod precision;
mod property;
mod statements;

use jobs::{
    auto_extract_after_ingest, extraction_job_progress_and_cancel, extraction_quota,
    llm_backend_against_stub, team_concurrency_is_shared_across_runs,
};
use mention_rule::{seed_cases_mention_rule, supersession_and_delete};
use paging::entities_q_paging;
use precision::local_backend_end_to_end;
use property::mention_rule_property;
use statements::statement_count_does_not_grow;

both_backends!(
    seed_cases_mention_rule,
    supersession_and_delete,
    mention_rule_property,
    statement_count_does_not_grow,
    extraction_job_progress_and_cancel,
    llm_backend_against_stub,
    auto_extract_after_ingest,
    local_backend_end_to_end,
    extraction_quota,
    team_concurrency_is_shared_across_runs,
    entities_q_paging,
);

const ENTITY_FIELDS: &str = "id name type description mentions { document { id title } version snippet offset } relations { id predicate subject { id name } object { id name } mentions { document { id } version snippet offset } }";

async fn extract(s: &TestServer, token: &str, vars: Value) -> Vec<Value> {
    let d = s
        .gql_ok(
            token,
            "mutation($c: ID, $d: [ID!]) { extractKnowledge(corpusId: $c, documentIds: $d) { id state } }",
            vars,
        )
        .await;
    let job = d["extractKnowledge"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let events = s.follow_job(token, &job).await;
    assert_eq!(
        events.last().map(|e| e["state"].clone()),
        Some(json!("SUCCEEDED")),
        "{events:?}"
    );
    // The knowledge-extraction kind ends in its own stage (ingest ends `searchable`).
    assert_eq!(
        events.last().map(|e| e["stage"].clone()),
        Some(json!("extracted")),
        "{events:?}"
    );
    events
}

async fn entities(s: &TestServer, token: &str) -> Vec<Value> {
    let q =
        format!("query {{ entities(first: 100) {{ edges {{ node {{ {ENTITY_FIELDS} }} }} }} }}");
    let d = s.gql_ok(token, &q, json!({})).await;
    d["entities"]["edges"]
        .as_array()
        .map(|a| a.iter().map(|e| e["node"].clone()).collect())
        .unwrap_or_default()
}

fn by_name<'a>(list: &'a [Value], name: &str) -> Option<&'a Value> {
    list.iter().find(|e| e["name"] == name)
}

fn mention_docs(e: &Value) -> BTreeSet<String> {
    e["mentions"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|m| m["document"]["id"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn predicates(e: &Value) -> BTreeSet<String> {
    e["relations"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|r| r["predicate"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

const NEWS: &str = "Team news.\n\nAcme Robotics is based in Berlin. The Acme Robotics team ships warehouse robots.";

async fn count(store: &Store, sql: &str) -> i64 {
    use sea_orm::ConnectionTrait;
    let row = store
        .connection()
        .query_one_raw(sea_orm::Statement::from_string(
            store.backend(),
            sql.to_owned(),
        ))
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("no row"));
    row.try_get_by_index::<i64>(0)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// (entities without a mention, relations without a mention, mentions of a non-current version)
async fn orphan_counts(store: &Store) -> (i64, i64, i64) {
    (
        count(store, "SELECT COUNT(*) FROM kg_entities e WHERE NOT EXISTS (SELECT 1 FROM kg_mentions m WHERE m.entity_id = e.id)").await,
        count(store, "SELECT COUNT(*) FROM kg_relations r WHERE NOT EXISTS (SELECT 1 FROM kg_mentions m WHERE m.relation_id = r.id)").await,
        count(store, "SELECT COUNT(*) FROM kg_mentions m JOIN documents d ON d.id = m.document_id WHERE m.version <> d.current_version").await,
    )
}

fn blob(rng: &mut StdRng) -> BlobRef {
    let hash: String = (0..64)
        .map(|_| char::from_digit(rng.random_range(0..16), 16).unwrap_or('0'))
        .collect();
    BlobRef {
        storage_uri: format!("blobs/{}/{hash}.txt", &hash[..2]),
        content_hash: hash,
        mime_type: "text/plain".into(),
        size: 1,
    }
}
