//! The extraction job: the rules extractor, progress, cancellation, the `llm` backend against
//! the stub, extraction after ingest, the per-team quota and concurrency cap.

use std::time::Duration;

use cairn_llm::stub::{StubReply, StubServer};
use cairn_tests::{error_code, require_model, Backend, TestServer};
use serde_json::{json, Value};

use super::{by_name, entities, extract, predicates, NEWS};

/// The rules extractor through `extractKnowledge`: progress `extracting k/n` on the job's
/// subscription, the ≤ 40 cap, markers so a second run finds nothing, an unreadable document
/// list is not an error, and cancellation between documents (with a slow `llm` stub).
pub(super) async fn extraction_job_progress_and_cancel(backend: Backend) {
    require_model();
    let s = TestServer::start(backend).await;
    let corpus = s.create_corpus(&s.owner_token, "kg").await;
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(
            s.ingest_text(
                &s.owner_token,
                &corpus,
                &format!("n{i}"),
                &format!("Report {i}.\n\nAcme Robotics acquired Globex Media {i}. Jane Doe works at Initech Labs."),
                "TEAM",
            )
            .await,
        );
    }
    let events = extract(&s, &s.owner_token, json!({ "c": corpus })).await;
    let progress: Vec<(i64, i64)> = events
        .iter()
        .filter(|e| e["stage"] == "extracting" && e["done"].is_number())
        .map(|e| {
            (
                e["done"].as_i64().unwrap_or(-1),
                e["total"].as_i64().unwrap_or(-1),
            )
        })
        .collect();
    assert!(progress.contains(&(3, 3)), "{events:?}");
    let last = events.last().cloned().unwrap_or_default();
    assert_eq!(last["result"]["extracted"], 3, "{last}");
    assert_eq!(last["result"]["extractor"], "rules", "{last}");
    assert!(
        last["result"]["entities"].as_i64().unwrap_or(0) >= 3,
        "{last}"
    );
    // Nothing left: a second run has no work.
    let again = extract(&s, &s.owner_token, json!({ "c": corpus })).await;
    assert_eq!(
        again.last().cloned().unwrap_or_default()["result"]["documents"],
        0
    );
    // Another team's corpus: NOT_FOUND.
    let (_, _, stranger) = s.other_team("elsewhere").await;
    let r = s
        .gql(
            &stranger,
            "mutation($c: ID) { extractKnowledge(corpusId: $c) { id } }",
            json!({ "c": corpus }),
        )
        .await;
    assert_eq!(error_code(&r), Some("NOT_FOUND"), "{r}");
    // A colleague asking for a private document of someone else: nothing readable, no wedge.
    let (_, zoe) = s.user_with_token("zoe", "MEMBER").await;
    let secret = s
        .ingest_text(
            &zoe,
            &corpus,
            "secret",
            "Umbrella Labs acquired Initech Labs.",
            "PRIVATE",
        )
        .await;
    let ev = extract(&s, &s.owner_token, json!({ "d": [secret] })).await;
    assert_eq!(
        ev.last().cloned().unwrap_or_default()["result"]["documents"],
        0
    );
    s.stop().await;

    // Cancellation between documents: a slow `llm` extractor, cancelled mid-run.
    let stub = StubServer::start(vec![StubReply::delay(
        Duration::from_millis(1500),
        StubReply::content(r#"{"entities":[],"relations":[]}"#),
    )])
    .await;
    let base = stub.base_url();
    let s = TestServer::start_tuned(backend, |c| {
        c.llm_url = Some(base);
        c.kg_extractor = "llm".into();
    })
    .await;
    let corpus = s.create_corpus(&s.owner_token, "slow").await;
    let mut docs = Vec::new();
    for i in 0..5 {
        docs.push(
            s.ingest_text(
                &s.owner_token,
                &corpus,
                &format!("s{i}"),
                &format!("Slow document {i}."),
                "TEAM",
            )
            .await,
        );
    }
    let d = s
        .gql_ok(
            &s.owner_token,
            "mutation($c: ID) { extractKnowledge(corpusId: $c) { id } }",
            json!({ "c": corpus }),
        )
        .await;
    let job = d["extractKnowledge"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    // Wait for it to start, then cancel.
    for _ in 0..100 {
        let j = s
            .gql_ok(
                &s.owner_token,
                "query($id: ID!) { job(id: $id) { state } }",
                json!({ "id": job }),
            )
            .await;
        if j["job"]["state"] == "RUNNING" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let c = s
        .gql_ok(
            &s.owner_token,
            "mutation($id: ID!) { cancelJob(id: $id) { state } }",
            json!({ "id": job }),
        )
        .await;
    assert_eq!(c["cancelJob"]["state"], "CANCELLED", "{c}");
    let events = s.follow_job(&s.owner_token, &job).await;
    assert_eq!(
        events.last().map(|e| e["state"].clone()),
        Some(json!("CANCELLED")),
        "{events:?}"
    );
    // Let any in-flight document finish, then count what was extracted: not all five.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let store = &s.cairn().store;
    let mut marked = 0;
    for d in &docs {
        let id: i64 = d.parse().unwrap_or_default();
        if !store
            .extraction_markers(id)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .is_empty()
        {
            marked += 1;
        }
    }
    assert!(
        marked < 5,
        "the cancelled run went on: {marked} documents extracted"
    );
    s.stop().await;
}

/// The `llm` backend against the stub: JSON mode, the kg prompts, a refused first reply and
/// the retry, usage rows on the job.
pub(super) async fn llm_backend_against_stub(backend: Backend) {
    require_model();
    let good = r#"{"entities":[{"type":"organization","name":"Acme Robotics","description":"a robot maker","snippet":"Acme Robotics acquired Globex Media"},{"type":"organization","name":"Globex Media","snippet":"Globex Media"}],"relations":[{"subject":"Acme Robotics","predicate":"acquired","object":"Globex Media","snippet":"Acme Robotics acquired Globex Media"}]}"#;
    let stub = StubServer::start(vec![
        // Refused: the snippet is not in the text.
        StubReply::content(
            r#"{"entities":[{"type":"organization","name":"Acme","snippet":"not in the text"}],"relations":[]}"#,
        ),
        StubReply::content(good),
    ])
    .await;
    let base = stub.base_url();
    let s = TestServer::start_tuned(backend, |c| {
        c.llm_url = Some(base);
        c.kg_extractor = "llm".into();
    })
    .await;
    let corpus = s.create_corpus(&s.owner_token, "llm").await;
    s.ingest_text(
        &s.owner_token,
        &corpus,
        "deal",
        "Acme Robotics acquired Globex Media last year.",
        "TEAM",
    )
    .await;
    let events = extract(&s, &s.owner_token, json!({ "c": corpus })).await;
    let last = events.last().cloned().unwrap_or_default();
    assert_eq!(last["result"]["extracted"], 1, "{last}");
    assert_eq!(last["result"]["extractor"], "llm", "{last}");
    let list = entities(&s, &s.owner_token).await;
    let acme = by_name(&list, "Acme Robotics").unwrap_or_else(|| panic!("{list:?}"));
    assert_eq!(acme["description"], "a robot maker");
    assert!(predicates(acme).contains("acquired"));
    let reqs = stub.requests();
    assert_eq!(reqs.len(), 2, "one refusal, one retry");
    for r in &reqs {
        assert_eq!(r["response_format"]["type"], "json_object", "{r}");
    }
    let job_id: i64 = last["jobId"]
        .as_str()
        .and_then(|j| j.parse().ok())
        .unwrap_or_default();
    let usage = s
        .cairn()
        .store
        .job_usage(job_id)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        usage.iter().any(|u| u.kind == "llm" && u.input_tokens > 0),
        "{usage:?}"
    );
    s.stop().await;
}

/// `CAIRN_KG_AUTO_EXTRACT`: an ingest queues the document's extraction; its entities appear
/// without any `extractKnowledge` call.
pub(super) async fn auto_extract_after_ingest(backend: Backend) {
    require_model();
    let s = TestServer::start_tuned(backend, |c| c.kg_auto_extract = true).await;
    let corpus = s.create_corpus(&s.owner_token, "auto").await;
    s.ingest_text(&s.owner_token, &corpus, "news", NEWS, "TEAM")
        .await;
    let mut found = Vec::new();
    for _ in 0..100 {
        found = entities(&s, &s.owner_token).await;
        if by_name(&found, "Acme Robotics").is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(by_name(&found, "Acme Robotics").is_some(), "{found:?}");
    s.stop().await;
}

async fn start_extraction(s: &TestServer, token: &str, vars: Value) -> String {
    let d = s
        .gql_ok(
            token,
            "mutation($c: ID, $d: [ID!]) { extractKnowledge(corpusId: $c, documentIds: $d) { id } }",
            vars,
        )
        .await;
    d["extractKnowledge"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// `CAIRN_KG_DAILY_DOCS`: a run that reaches the team's quota stops taking documents and
/// reports them as left (not failed); the next `extractKnowledge` is refused with
/// QUOTA_EXCEEDED; another team's quota is its own.
pub(super) async fn extraction_quota(backend: Backend) {
    require_model();
    let s = TestServer::start_tuned(backend, |c| c.kg_daily_docs = 2).await;
    let corpus = s.create_corpus(&s.owner_token, "quota").await;
    let mut docs = Vec::new();
    for i in 0..3 {
        docs.push(
            s.ingest_text(
                &s.owner_token,
                &corpus,
                &format!("q{i}"),
                &format!("Quota note {i}.\n\nAcme Robotics acquired Globex Media {i}."),
                "TEAM",
            )
            .await,
        );
    }
    let events = extract(&s, &s.owner_token, json!({ "c": corpus })).await;
    let result = events.last().cloned().unwrap_or_default()["result"].clone();
    assert_eq!(result["documents"], 3, "{result}");
    assert_eq!(result["extracted"], 2, "{result}");
    assert_eq!(result["left"], 1, "{result}");
    assert_eq!(result["quotaReached"], true, "{result}");
    assert_eq!(result["failed"], json!([]), "{result}");
    assert!(
        result["message"]
            .as_str()
            .unwrap_or_default()
            .contains("quota"),
        "{result}"
    );
    let store = &s.cairn().store;
    let mut marked = 0;
    for d in &docs {
        let id: i64 = d.parse().unwrap_or_default();
        marked += store
            .extraction_markers(id)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .len();
    }
    assert_eq!(marked, 2, "exactly the quota was extracted");
    // Spent: refused up front, with its own code.
    let r = s
        .gql(
            &s.owner_token,
            "mutation($c: ID) { extractKnowledge(corpusId: $c) { id } }",
            json!({ "c": corpus }),
        )
        .await;
    assert_eq!(error_code(&r), Some("QUOTA_EXCEEDED"), "{r}");
    assert!(r["errors"][0]["message"]
        .as_str()
        .unwrap_or_default()
        .contains("2 of 2 documents"));
    // Another team is not affected.
    let (_, _, stranger) = s.other_team("elsewhere").await;
    let other = extract(&s, &stranger, json!({})).await;
    assert_eq!(
        other.last().cloned().unwrap_or_default()["result"]["quotaReached"],
        false
    );
    s.stop().await;
}

/// `CAIRN_KG_TEAM_CONCURRENCY`: two runs of one team at the same time share the team's cap.
/// Counted at a slow `llm` stub (the most requests it answered at once), never timed.
pub(super) async fn team_concurrency_is_shared_across_runs(backend: Backend) {
    require_model();
    let stub = StubServer::start(vec![StubReply::delay(
        Duration::from_millis(300),
        StubReply::content(r#"{"entities":[],"relations":[]}"#),
    )])
    .await;
    let base = stub.base_url();
    let s = TestServer::start_tuned(backend, |c| {
        c.llm_url = Some(base);
        c.kg_extractor = "llm".into();
        c.kg_team_concurrency = 2;
        c.workers = 2;
    })
    .await;
    let corpus = s.create_corpus(&s.owner_token, "cap").await;
    let mut runs: Vec<Vec<String>> = vec![Vec::new(), Vec::new()];
    for (r, run) in runs.iter_mut().enumerate() {
        for i in 0..6 {
            run.push(
                s.ingest_text(
                    &s.owner_token,
                    &corpus,
                    &format!("r{r}d{i}"),
                    &format!("Run {r} document {i}."),
                    "TEAM",
                )
                .await,
            );
        }
    }
    let a = start_extraction(&s, &s.owner_token, json!({ "d": runs[0] })).await;
    let b = start_extraction(&s, &s.owner_token, json!({ "d": runs[1] })).await;
    for job in [a, b] {
        let events = s.follow_job(&s.owner_token, &job).await;
        let last = events.last().cloned().unwrap_or_default();
        assert_eq!(last["state"], "SUCCEEDED", "{events:?}");
        assert_eq!(last["result"]["extracted"], 6, "{last}");
    }
    let reqs = stub.requests();
    assert_eq!(reqs.len(), 12, "one reply per document");
    assert!(
        stub.max_in_flight() <= 2,
        "the team had {} documents in extraction at once (cap 2)",
        stub.max_in_flight()
    );
    // The runs did overlap (so the cap was shared, not merely never reached): in arrival
    // order, the two runs' requests interleave.
    let runs_in_order: Vec<usize> = reqs
        .iter()
        .map(|r| usize::from(r.to_string().contains("Run 1 document")))
        .collect();
    let switches = runs_in_order.windows(2).filter(|w| w[0] != w[1]).count();
    assert!(
        switches >= 2,
        "the two runs did not overlap: {runs_in_order:?}"
    );
    s.stop().await;
}
