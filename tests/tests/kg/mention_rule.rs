//! The seed's mention-rule cases; supersession and delete.

use std::collections::BTreeSet;

use cairn_tests::{error_code, require_model, stages, Backend, TestServer};
use serde_json::{json, Value};

use super::{
    by_name, count, entities, extract, mention_docs, orphan_counts, predicates, ENTITY_FIELDS, NEWS,
};

const MEMO: &str = "Board memo.\n\nAcme Robotics acquired Globex Media in March. The deal stays confidential until the announcement.";

/// Seed 001: a fact stated in a private and a team document is visible to the team without
/// the private snippet; a relation stated only in a private memo is absent for a colleague and
/// present for its owner; `entity(id)` is null for no readable mention and for a missing id.
pub(super) async fn seed_cases_mention_rule(backend: Backend) {
    require_model();
    let s = TestServer::start(backend).await;
    let (_, alice) = s.user_with_token("alice", "MEMBER").await;
    let (_, carol) = s.user_with_token("carol", "MEMBER").await;
    let corpus = s.create_corpus(&s.owner_token, "kg").await;
    let memo = s
        .ingest_text(&alice, &corpus, "Memo", MEMO, "PRIVATE")
        .await;
    let news = s
        .ingest_text(&s.owner_token, &corpus, "News", NEWS, "TEAM")
        .await;
    // Alice can read both documents: her run extracts both.
    let events = extract(&s, &alice, json!({ "c": corpus })).await;
    assert!(
        stages(&events).contains(&"extracting".to_owned()),
        "{events:?}"
    );
    let last = events.last().cloned().unwrap_or_default();
    assert_eq!(last["result"]["extracted"], 2, "{last}");
    assert!(
        events
            .iter()
            .any(|e| e["stage"] == "extracting" && e["done"] == 2 && e["total"] == 2),
        "{events:?}"
    );

    // The owner of the memo sees the acquisition and Globex.
    let mine = entities(&s, &alice).await;
    let acme = by_name(&mine, "Acme Robotics").unwrap_or_else(|| panic!("{mine:?}"));
    assert_eq!(
        mention_docs(acme),
        BTreeSet::from([memo.clone(), news.clone()])
    );
    assert!(predicates(acme).contains("acquired"), "{acme}");
    let globex = by_name(&mine, "Globex Media").unwrap_or_else(|| panic!("{mine:?}"));
    let globex_id = globex["id"].as_str().unwrap_or_default().to_owned();

    // A colleague: Acme without the memo's snippet, no acquisition, no Globex.
    let theirs = entities(&s, &carol).await;
    let acme = by_name(&theirs, "Acme Robotics").unwrap_or_else(|| panic!("{theirs:?}"));
    assert_eq!(mention_docs(acme), BTreeSet::from([news.clone()]), "{acme}");
    assert!(!acme.to_string().contains("acquired Globex"), "{acme}");
    assert!(!predicates(acme).contains("acquired"), "{acme}");
    assert!(by_name(&theirs, "Globex Media").is_none(), "{theirs:?}");
    for e in &theirs {
        assert!(!mention_docs(e).contains(&memo), "{e}");
    }
    let q = format!("query($id: ID!) {{ entity(id: $id) {{ {ENTITY_FIELDS} }} }}");
    let d = s.gql_ok(&carol, &q, json!({ "id": globex_id })).await;
    assert_eq!(d["entity"], Value::Null);
    let d = s.gql_ok(&alice, &q, json!({ "id": globex_id })).await;
    assert_eq!(d["entity"]["name"], "Globex Media");
    let d = s.gql_ok(&alice, &q, json!({ "id": "987654321" })).await;
    assert_eq!(d["entity"], Value::Null);
    let d = s.gql_ok(&alice, &q, json!({ "id": "not-an-id" })).await;
    assert_eq!(d["entity"], Value::Null);

    // Neighbourhood and kgQuery under the same rule.
    let nq = "query($n: String, $h: Int) { neighbourhood(name: $n, hops: $h) { nodes { id name } edges { predicate subject { name } object { name } mentions { document { id } snippet } } } }";
    let d = s
        .gql_ok(&carol, nq, json!({ "n": "acme robotics", "h": 2 }))
        .await;
    let g = &d["neighbourhood"];
    assert!(!g.to_string().contains("Globex"), "{g}");
    assert!(g["nodes"].as_array().is_some_and(|n| !n.is_empty()), "{g}");
    let d = s
        .gql_ok(&alice, nq, json!({ "n": "Acme Robotics", "h": 1 }))
        .await;
    assert!(
        d["neighbourhood"].to_string().contains("Globex Media"),
        "{d}"
    );
    let bad = s
        .gql(&alice, nq, json!({ "n": "Acme Robotics", "h": 3 }))
        .await;
    assert_eq!(error_code(&bad), Some("BAD_USER_INPUT"), "{bad}");

    let kq = "query($n: String, $h: Int) { kgQuery(name: $n, hops: $h) }";
    let d = s
        .gql_ok(&carol, kq, json!({ "n": "Acme Robotics", "h": 2 }))
        .await;
    let text = d["kgQuery"].as_str().unwrap_or_default().to_owned();
    assert!(!text.is_empty());
    for line in text.lines() {
        assert!(line.ends_with(']'), "uncited line {line:?}");
        assert!(line.contains(&format!("[doc {news} v1: ")), "{line:?}");
        assert!(!line.contains(&format!("[doc {memo} ")), "{line:?}");
        assert!(!line.contains("Globex"), "{line:?}");
    }
    let d = s
        .gql_ok(&alice, kq, json!({ "n": "Acme Robotics", "h": 1 }))
        .await;
    let text = d["kgQuery"].as_str().unwrap_or_default();
    assert!(
        text.lines()
            .any(|l| l.starts_with("Acme Robotics acquired Globex Media [doc ")),
        "{text}"
    );

    // searchAll's entity kind follows the rule too.
    let sa = "query($q: String!) { searchAll(q: $q, first: 20) { __typename ... on EntityHit { id name } } }";
    let d = s.gql_ok(&carol, sa, json!({ "q": "Globex Media" })).await;
    assert!(!d.to_string().contains("Globex Media\""), "{d}");
    let d = s.gql_ok(&carol, sa, json!({ "q": "Acme Robotics" })).await;
    assert!(d.to_string().contains("\"name\":\"Acme Robotics\""), "{d}");
    let d = s.gql_ok(&alice, sa, json!({ "q": "Globex Media" })).await;
    assert!(d.to_string().contains("\"name\":\"Globex Media\""), "{d}");

    // Another team sees nothing.
    let (_, _, stranger) = s.other_team("elsewhere").await;
    assert!(entities(&s, &stranger).await.is_empty());

    // A viewer may not queue extractions.
    let (_, viewer) = s.user_with_token("vic", "VIEWER").await;
    let r = s
        .gql(
            &viewer,
            "mutation($c: ID) { extractKnowledge(corpusId: $c) { id } }",
            json!({ "c": corpus }),
        )
        .await;
    assert_eq!(error_code(&r), Some("FORBIDDEN"), "{r}");
    s.stop().await;
}

/// A new version supersedes the old one's mentions (orphans pruned); a delete forgets them.
pub(super) async fn supersession_and_delete(backend: Backend) {
    require_model();
    let s = TestServer::start(backend).await;
    let corpus = s.create_corpus(&s.owner_token, "kg").await;
    let doc = s
        .ingest_text(&s.owner_token, &corpus, "Deal", MEMO, "TEAM")
        .await;
    let keep = s
        .ingest_text(
            &s.owner_token,
            &corpus,
            "Other",
            "Initech Labs is based in Berlin.",
            "TEAM",
        )
        .await;
    extract(&s, &s.owner_token, json!({ "c": corpus })).await;
    let before = entities(&s, &s.owner_token).await;
    assert!(by_name(&before, "Globex Media").is_some(), "{before:?}");

    // Version 2 no longer mentions Globex.
    let (status, body) = s
        .upload(
            &s.owner_token,
            &corpus,
            "deal.md",
            b"Deal update.\n\nAcme Robotics partnered with Umbrella Labs on sensors.".to_vec(),
            json!({ "d": doc }),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let job = body["data"]["uploadDocument"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    s.follow_job(&s.owner_token, &job).await;
    extract(&s, &s.owner_token, json!({ "d": [doc] })).await;
    let after = entities(&s, &s.owner_token).await;
    assert!(by_name(&after, "Globex Media").is_none(), "{after:?}");
    for e in &after {
        for m in e["mentions"].as_array().cloned().unwrap_or_default() {
            if m["document"]["id"] == json!(doc) {
                assert_eq!(m["version"], 2, "{e}");
            }
        }
        for r in e["relations"].as_array().cloned().unwrap_or_default() {
            assert_ne!(r["predicate"], "acquired", "{r}");
            for m in r["mentions"].as_array().cloned().unwrap_or_default() {
                assert!(
                    m["document"]["id"] != json!(doc) || m["version"] == 2,
                    "{r}"
                );
            }
        }
    }
    let acme = by_name(&after, "Acme Robotics").unwrap_or_else(|| panic!("{after:?}"));
    assert!(acme["mentions"]
        .as_array()
        .is_some_and(|m| m.iter().all(|m| m["version"] == 2)));
    // The store holds no row of version 1 and no orphan.
    let orphans = orphan_counts(&s.cairn().store).await;
    assert_eq!(orphans, (0, 0, 0), "orphan entities/relations, v1 mentions");

    // Delete: its mentions go, and what only it supported.
    let d = s
        .gql_ok(
            &s.owner_token,
            "mutation($id: ID!) { deleteDocument(id: $id) }",
            json!({ "id": doc }),
        )
        .await;
    assert_eq!(d["deleteDocument"], true);
    let gone = entities(&s, &s.owner_token).await;
    assert!(by_name(&gone, "Acme Robotics").is_none(), "{gone:?}");
    assert!(by_name(&gone, "Umbrella Labs").is_none(), "{gone:?}");
    assert!(by_name(&gone, "Initech Labs").is_some(), "{gone:?}");
    for e in &gone {
        assert_eq!(mention_docs(e), BTreeSet::from([keep.clone()]), "{e}");
    }
    assert_eq!(orphan_counts(&s.cairn().store).await, (0, 0, 0));
    let rows = count(
        &s.cairn().store,
        &format!("SELECT COUNT(*) FROM kg_mentions WHERE document_id = {doc}"),
    )
    .await;
    assert_eq!(rows, 0);
    s.stop().await;
}
