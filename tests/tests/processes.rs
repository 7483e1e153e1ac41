//! Several processes on one data directory (issue 12), modelled by two server instances on
//! the same SQLite file and blob directory: each has its own connection pool, workers, event
//! bus and in-memory vector index, as two processes do (the real binaries side by side are
//! `durability.rs::cli_ingest_beside_a_running_server`).
//!
//! - Every instance's search reflects what the other committed (new documents, visibility,
//!   deletes), without a restart: the index catches up from `index_changes` before a search.
//! - `jobProgress` and `jobs` on one instance follow a job the other instance's workers run
//!   (SQLite's bus does not cross processes; the subscriptions read the stored state too).

use cairn_tests::{require_model, Backend, TestServer};
use serde_json::json;

const SEARCH: &str =
    "query($q: String!) { search(query: $q, mode: VECTOR, topK: 5) { results { documentTitle } } }";

async fn titles(s: &TestServer, token: &str, q: &str) -> Vec<String> {
    let d = s.gql_ok(token, SEARCH, json!({ "q": q })).await;
    d["search"]["results"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|r| r["documentTitle"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_instance_sees_what_the_other_committed() {
    require_model();
    let a = TestServer::start(Backend::Sqlite).await;
    let b = a.second_instance().await;
    let (_, bob) = a.user_with_token("bob", "MEMBER").await;
    let corpus = a.create_corpus(&a.owner_token, "wiki").await;
    a.ingest_text(
        &a.owner_token,
        &corpus,
        "glaciers",
        "Glaciers carve deep valleys as the ice slowly flows downhill.",
        "TEAM",
    )
    .await;
    // A's index is loaded now.
    assert_eq!(
        titles(&a, &a.owner_token, "ice flowing down valleys")
            .await
            .first()
            .map(String::as_str),
        Some("glaciers")
    );
    // B stores a document; A finds it at once.
    let volcano = b
        .ingest_text(
            &b.owner_token,
            &corpus,
            "volcanoes",
            "Volcanoes erupt molten lava and ash from the mantle.",
            "TEAM",
        )
        .await;
    let lava = "molten lava erupting";
    assert_eq!(
        titles(&a, &bob, lava).await.first().map(String::as_str),
        Some("volcanoes"),
        "A's index missed B's document"
    );
    // B makes it private: Bob (on A) no longer finds it; its owner still does.
    b.gql_ok(
        &b.owner_token,
        "mutation($id: ID!) { setVisibility(documentId: $id, visibility: PRIVATE) { id } }",
        json!({ "id": volcano }),
    )
    .await;
    assert!(
        !titles(&a, &bob, lava)
            .await
            .iter()
            .any(|t| t == "volcanoes"),
        "A still showed Bob a document B made private"
    );
    assert_eq!(
        titles(&a, &a.owner_token, lava)
            .await
            .first()
            .map(String::as_str),
        Some("volcanoes")
    );
    // B deletes it: gone from A's search.
    b.gql_ok(
        &b.owner_token,
        "mutation($id: ID!) { deleteDocument(id: $id) }",
        json!({ "id": volcano }),
    )
    .await;
    assert!(
        !titles(&a, &a.owner_token, lava)
            .await
            .iter()
            .any(|t| t == "volcanoes"),
        "A still found a document B deleted"
    );
    b.stop().await;
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_progress_follows_a_job_another_instance_runs() {
    require_model();
    // A has no workers: every job runs on B.
    let a = TestServer::start_tuned(Backend::Sqlite, |c| c.workers = 0).await;
    let b = a.second_instance_tuned(|c| c.workers = 2).await;
    let corpus = a.create_corpus(&a.owner_token, "wiki").await;
    // `jobs` on A, then an upload on A that B's workers run; `jobProgress` on A follows it.
    let events = a
        .upload_watched(
            &a.owner_token,
            &corpus,
            "tides.md",
            b"# Tides\n\nThe moon raises the tides twice a day.".to_vec(),
        )
        .await;
    assert_eq!(
        events.last().map(|e| e["stage"].clone()),
        Some(json!("searchable")),
        "{events:?}"
    );
    let doc = a
        .ingest_text(
            &a.owner_token,
            &corpus,
            "bees",
            "Honey bees dance to tell the hive where flowers are.",
            "TEAM",
        )
        .await;
    assert!(!doc.is_empty());
    b.stop().await;
    a.stop().await;
}

/// Dedup by content, not by name: the same bytes uploaded as `notes.txt` and as `notes` are
/// one document and one file on disk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_bytes_under_another_name_are_one_document() {
    require_model();
    let s = TestServer::start(Backend::Sqlite).await;
    let corpus = s.create_corpus(&s.owner_token, "notes").await;
    let bytes = b"Quarterly notes.\n\nThe turbine inspection moved to March.".to_vec();
    let mut results = Vec::new();
    for name in ["notes.txt", "notes"] {
        let events = s
            .upload_watched(&s.owner_token, &corpus, name, bytes.clone())
            .await;
        let last = events.last().cloned().unwrap_or_default();
        assert_eq!(last["stage"], "searchable", "{name}: {events:?}");
        results.push(last["result"].clone());
    }
    assert_eq!(results[0]["duplicate"], false, "{results:?}");
    assert_eq!(results[1]["duplicate"], true, "{results:?}");
    assert_eq!(
        results[0]["documentId"], results[1]["documentId"],
        "{results:?}"
    );
    // One file for the two uploads.
    let mut files = Vec::new();
    let mut dirs = vec![s.config.data_dir.join("blobs")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d)
            .unwrap_or_else(|e| panic!("{e}"))
            .flatten()
        {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else {
                files.push(p);
            }
        }
    }
    assert_eq!(files.len(), 1, "{files:?}");
    s.stop().await;
}
