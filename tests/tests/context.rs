//! `suggestedContext(message)`: the `[SUGGESTED CONTEXT]` pre-fetch from the system corpora
//! (seed 004, "Pre-fetch context"), with the model, without it (keyword fallback, provisional
//! chunks skipped), with the catalog gate on, and with a failing store (empty block).

use std::collections::BTreeSet;

use cairn::auth::Principal;
use cairn::service::UploadRequest;
use cairn_tests::{both_backends, require_model, Backend, TestServer};
use sea_orm::ConnectionTrait;
use serde_json::{json, Value};

both_backends!(suggested_context_from_the_system_corpora);

const MESSAGE: &str = "schedule turbine maintenance for the wind farm";
const CANARY: &str = "zanzibarite";

const PATTERNS: [&str; 5] = [
    "Turbine maintenance: when a user asks to schedule turbine maintenance, list the open work orders of the wind farm first, then propose a date outside the storm season.",
    "Quarterly reports: when a user asks for a quarterly report, pull the revenue table and compare it with the same quarter of last year.",
    "Invoice disputes: when a customer disputes an invoice, fetch the contract terms and the delivery receipts before answering.",
    "Onboarding: new employees need a laptop, a badge and an account in the HR system on their first day.",
    "[PROVISIONAL] please schedule turbine maintenance, turbine maintenance for the wind farm turbine, schedule it",
];
const BEHAVIOUR: [&str; 3] = [
    "Dana prefers answers as short bullet lists with the numbers first.",
    "Dana works in the wind farm operations team and asks about turbines every week.",
    "Evan writes in German and wants replies in German.",
];
const CATALOG: [&str; 4] = [
    "Dataset turbine_work_orders: open and closed work orders per wind turbine.",
    "Dataset revenue_quarterly: revenue per product line and quarter.",
    "Dataset hr_accounts: employee accounts and badges.",
    "Dataset storm_calendar: storm season forecasts per wind farm.",
];

/// Loads `text` into a system corpus as the operator (`p`); the new document's id.
async fn load(s: &TestServer, p: &Principal, corpus_id: i64, name: &str, text: &str) -> i64 {
    let job = s
        .cairn()
        .operator_upload(
            p,
            UploadRequest {
                corpus_id,
                filename: format!("{name}.md"),
                visibility: None,
                document_id: None,
                title: None,
                source_url: None,
            },
            std::io::Cursor::new(text.as_bytes().to_vec()),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let events = s.follow_job(&s.owner_token, &job.id.to_string()).await;
    let id = &events.last().unwrap_or_else(|| panic!("no events"))["result"]["documentId"];
    id.as_i64()
        .or_else(|| id.as_str().and_then(|s| s.parse().ok()))
        .unwrap_or_else(|| panic!("no document id in {events:?}"))
}

async fn suggested(s: &TestServer, message: &str) -> String {
    let d = s
        .gql_ok(
            &s.owner_token,
            "query($m: String!) { suggestedContext(message: $m) }",
            json!({ "m": message }),
        )
        .await;
    d["suggestedContext"]
        .as_str()
        .unwrap_or_else(|| panic!("not a string: {d}"))
        .to_owned()
}

/// The block's sections: heading line → its item lines, in order.
fn sections(block: &str) -> Vec<(String, Vec<String>)> {
    let lines: Vec<&str> = block.lines().collect();
    assert_eq!(lines.first(), Some(&"[SUGGESTED CONTEXT]"), "{block}");
    assert_eq!(lines.last(), Some(&"[/SUGGESTED CONTEXT]"), "{block}");
    assert!(block.ends_with('\n'), "{block:?}");
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for l in &lines[1..lines.len() - 1] {
        if let Some(item) = l.strip_prefix("- ") {
            out.last_mut()
                .unwrap_or_else(|| panic!("an item before any heading: {block}"))
                .1
                .push(item.to_owned());
        } else {
            out.push(((*l).to_owned(), Vec::new()));
        }
    }
    out
}

/// `text (document_id=N)` → (text, N).
fn item(line: &str) -> (String, i64) {
    let (text, id) = line
        .rsplit_once(" (document_id=")
        .unwrap_or_else(|| panic!("no document id: {line}"));
    let id = id
        .strip_suffix(')')
        .and_then(|i| i.parse().ok())
        .unwrap_or_else(|| panic!("bad document id: {line}"));
    (text.to_owned(), id)
}

async fn suggested_context_from_the_system_corpora(b: Backend) {
    require_model();
    let s = TestServer::start(b).await;
    let store = &s.cairn().store;
    let p = s.owner_principal().await;

    // No system corpora yet: the empty block, not an error.
    assert_eq!(suggested(&s, MESSAGE).await, "");

    let mut ids = Vec::new();
    for (corpus, texts) in [
        ("operational_patterns", &PATTERNS[..]),
        ("user_behavior", &BEHAVIOUR[..]),
        ("data_catalog", &CATALOG[..]),
    ] {
        let c = store
            .create_corpus(None, corpus, None)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let mut docs = Vec::new();
        for (i, t) in texts.iter().enumerate() {
            docs.push(load(&s, &p, c.id, &format!("{corpus}-{i}"), t).await);
        }
        ids.push(docs);
    }
    let (pattern_ids, behaviour_ids, catalog_ids) = (&ids[0], &ids[1], &ids[2]);
    // A team document that matches the message as well: the pre-fetch never offers it.
    let corpus = s.create_corpus(&s.owner_token, "ops").await;
    s.upload_ok(
        &s.owner_token,
        &corpus,
        "team.md",
        format!("Turbine maintenance for the wind farm, the team's own {CANARY} notes.")
            .into_bytes(),
    )
    .await;

    // With the model: vector-ranked, 3 patterns and 2 preferences, no catalog (gated off).
    let block = suggested(&s, MESSAGE).await;
    eprintln!("with the model:\n{block}");
    assert!(
        !block.contains(CANARY),
        "a team document in the block: {block}"
    );
    let parts = sections(&block);
    let headings: Vec<&str> = parts.iter().map(|(h, _)| h.as_str()).collect();
    assert_eq!(
        headings,
        [
            "Patterns (operational_patterns):",
            "Preferences (user_behavior):"
        ],
        "{block}"
    );
    assert_eq!(parts[0].1.len(), 3, "{block}");
    assert_eq!(parts[1].1.len(), 2, "{block}");
    let patterns: Vec<(String, i64)> = parts[0].1.iter().map(|l| item(l)).collect();
    for (text, id) in &patterns {
        let i = pattern_ids
            .iter()
            .position(|d| d == id)
            .unwrap_or_else(|| panic!("document {id} is not a pattern: {block}"));
        assert_eq!(text, PATTERNS[i], "a pattern's text, whole and in order");
    }
    assert!(
        patterns.iter().any(|(t, _)| t == PATTERNS[0]),
        "the turbine pattern is among the top 3: {block}"
    );
    for l in &parts[1].1 {
        let (text, id) = item(l);
        let i = behaviour_ids
            .iter()
            .position(|d| *d == id)
            .unwrap_or_else(|| panic!("document {id} is not a preference: {block}"));
        assert_eq!(text, BEHAVIOUR[i]);
    }
    assert!(
        parts[1].1.iter().any(|l| item(l).0 == BEHAVIOUR[1]),
        "the wind-farm preference is among the top 2: {block}"
    );

    // The catalog gate on: its entries as ids (4 entries, fewer than its 25).
    let gated = s
        .second_instance_tuned(|c| c.prefetch_data_catalog = true)
        .await;
    let block = suggested(&gated, MESSAGE).await;
    let catalog = block
        .lines()
        .find_map(|l| l.strip_prefix("Catalog entries (data_catalog): relevant_entry_ids=["))
        .and_then(|l| l.strip_suffix(']'))
        .unwrap_or_else(|| panic!("no catalog line: {block}"));
    let got: BTreeSet<i64> = catalog
        .split(", ")
        .map(|i| i.parse().unwrap_or_else(|e| panic!("{i}: {e}")))
        .collect();
    assert_eq!(got, catalog_ids.iter().copied().collect(), "{block}");
    gated.stop().await;

    // Without the model: the keyword fallback. The provisional chunk is the best lexical
    // match (plain LEXICAL search puts it first), and the fallback drops it.
    let keyword = s.second_instance_without_model().await;
    let lexical = keyword
        .gql_ok(
            &keyword.owner_token,
            "query($q: String!, $c: [ID!]) { search(query: $q, corpusIds: $c, mode: LEXICAL, topK: 5) { results { content } } }",
            json!({ "q": MESSAGE, "c": [store.system_corpus_by_name("operational_patterns").await.ok().flatten().map(|c| c.id.to_string())] }),
        )
        .await;
    let first: &Value = &lexical["search"]["results"][0]["content"];
    assert!(
        first.as_str().is_some_and(|t| t.contains("[PROVISIONAL]")),
        "the provisional chunk leads the plain lexical ranking: {lexical}"
    );
    let block = suggested(&keyword, MESSAGE).await;
    eprintln!("keyword fallback:\n{block}");
    assert!(!block.contains("[PROVISIONAL]"), "{block}");
    let parts = sections(&block);
    assert_eq!(
        parts,
        vec![
            (
                "Patterns (operational_patterns):".to_owned(),
                vec![format!("{} (document_id={})", PATTERNS[0], pattern_ids[0])]
            ),
            (
                "Preferences (user_behavior):".to_owned(),
                vec![format!(
                    "{} (document_id={})",
                    BEHAVIOUR[1], behaviour_ids[1]
                )]
            ),
        ],
        "only the chunks that share the message's words, provisional ones left out: {block}"
    );
    keyword.stop().await;

    // A failing store: the empty block, never an error (while search itself fails).
    store
        .connection()
        .execute_unprepared("ALTER TABLE corpora RENAME TO corpora_away")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let r = s
        .gql(
            &s.owner_token,
            "query($m: String!) { suggestedContext(message: $m) }",
            json!({ "m": MESSAGE }),
        )
        .await;
    assert!(r.get("errors").is_none(), "{r}");
    assert_eq!(r["data"]["suggestedContext"], "", "{r}");
    let r = s
        .gql(
            &s.owner_token,
            "query($c: [ID!]) { search(query: \"turbine\", corpusIds: $c) { relevance } }",
            json!({ "c": [corpus] }),
        )
        .await;
    assert!(r.get("errors").is_some(), "the store really fails: {r}");
    s.stop().await;
}
