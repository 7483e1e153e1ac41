//! Trust (issue 11): one regression test per hole found by using Cairn from outside, on both
//! backends. Each was run against the code before its fix and failed there:
//!
//! 1. entity descriptions (and the anchors built from them) showed a private memo's words to a
//!    colleague, in every field that shows an entity, and outlived the memo;
//! 2. an admin could mint (and revoke) tokens of the owner;
//! 3. a WebSocket kept running queries and mutations after its token was revoked;
//! 4. one request could ask for 200 (or 5,000) searches;
//!
//! and the rest of the list: writes into system corpora through a token, moves of a
//! colleague's documents, job details of a colleague's private upload, a delete that unlinked
//! the blob a queued job still needed, NOTIFY payloads over PostgreSQL's 8,000-byte limit, and
//! GraphiQL's scripts from a CDN. The leak property test over every field is `leak.rs`.

use std::time::Duration;

use cairn::{Event, EventKind, JobEvent};
use cairn_tests::{
    both_backends, error_code, require_model, ws_next, ws_open, Backend, TestServer, Ws,
};
use futures_util::SinkExt;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

both_backends!(
    descriptions_follow_the_mention_rule,
    a_new_version_leaves_the_graph_at_once,
    tokens_by_rank,
    revoked_socket_is_refused_and_closed,
    cost_is_refused_before_any_work,
    searches_are_rate_limited,
    system_corpora_and_moves,
    job_details_of_private_uploads,
    delete_keeps_the_blob_a_queued_job_needs,
);

const MEMO: &str = "Strategy memo.\n\nHelvetron Dynamics, a maker of covert sonar drones for the navy, opened a plant in Basel.";
const LEASE: &str =
    "Office news.\n\nHelvetron Dynamics signed the office lease in Zurich last week.";

/// Every reader-facing field that shows an entity or its description, as one text.
async fn entity_views(s: &TestServer, token: &str, q: &str) -> String {
    let mut out = String::new();
    let fields = "id name description mentions { snippet document { id title } } relations { predicate subject { name description } object { name description } mentions { snippet } }";
    let d = s
        .gql(
            token,
            &format!(
                "query($q: String!) {{ byQ: entities(q: $q, first: 50) {{ edges {{ node {{ {fields} }} }} }} all: entities(first: 100) {{ edges {{ node {{ {fields} }} }} }} }}"
            ),
            json!({ "q": q }),
        )
        .await;
    out.push_str(&d.to_string());
    let ids: Vec<String> = d["data"]["all"]["edges"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|e| e["node"]["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    for id in ids {
        let e = s
            .gql(
                token,
                &format!("query($id: ID!) {{ entity(id: $id) {{ {fields} }} }}"),
                json!({ "id": id }),
            )
            .await;
        out.push_str(&e.to_string());
    }
    for name in ["Helvetron Dynamics", "Basel", "Zurich"] {
        let n = s
            .gql(
                token,
                "query($n: String!) { neighbourhood(name: $n, hops: 2) { nodes { name description } edges { predicate mentions { snippet } } } kgQuery(name: $n, hops: 2) }",
                json!({ "n": name }),
            )
            .await;
        out.push_str(&n.to_string());
    }
    let all = s
        .gql(
            token,
            "query($q: String!) { searchAll(q: $q, first: 50) { __typename ... on EntityHit { name description } ... on ChunkHit { content } ... on DocumentHit { document { title } } } }",
            json!({ "q": q }),
        )
        .await;
    out.push_str(&all.to_string());
    out
}

/// Names of the entities `entities(q:)` ranks for `token`.
async fn ranked_names(s: &TestServer, token: &str, q: &str) -> Vec<String> {
    let d = s
        .gql_ok(
            token,
            "query($q: String!) { entities(q: $q, first: 20) { edges { node { name } } } }",
            json!({ "q": q }),
        )
        .await;
    d["entities"]["edges"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|e| e["node"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Hole 1: a description belongs to the document that gave it. The colleague sees the entity
/// (through the lease) without the memo's words, in `entities`, `entity`, `neighbourhood`,
/// `kgQuery` and `searchAll`; ranking by meaning cannot find the entity through the memo's
/// words; the owner sees the description until the memo is deleted.
async fn descriptions_follow_the_mention_rule(backend: Backend) {
    require_model();
    let s = TestServer::start(backend).await;
    let (_, alice) = s.user_with_token("alice", "MEMBER").await;
    let (_, bob) = s.user_with_token("bob", "MEMBER").await;
    let corpus = s.create_corpus(&s.owner_token, "firm").await;
    let memo = s
        .ingest_text(&alice, &corpus, "Strategy memo", MEMO, "PRIVATE")
        .await;
    s.ingest_text(&s.owner_token, &corpus, "Office news", LEASE, "TEAM")
        .await;
    s.extract_all(&alice).await;

    let alice_view = entity_views(&s, &alice, "Helvetron").await;
    assert!(
        alice_view.contains("a maker of covert sonar drones for the navy"),
        "the memo's owner sees its description: {alice_view}"
    );
    let bob_view = entity_views(&s, &bob, "Helvetron").await;
    assert!(
        bob_view.contains("Helvetron Dynamics"),
        "the colleague sees the entity through the lease: {bob_view}"
    );
    for word in ["covert", "sonar", "navy", "Basel"] {
        assert!(
            !bob_view.contains(word),
            "`{word}` (only in the private memo) reached the colleague: {bob_view}"
        );
    }
    // Ranking by meaning uses only readable text: the memo's words find the entity for its
    // owner, not for the colleague.
    let q = "a maker of covert sonar drones for the navy";
    assert!(
        ranked_names(&s, &alice, q)
            .await
            .iter()
            .any(|n| n == "Helvetron Dynamics"),
        "the owner finds the entity by its description"
    );
    let bob_ranked = ranked_names(&s, &bob, q).await;
    assert!(
        !bob_ranked.iter().any(|n| n == "Helvetron Dynamics"),
        "the colleague found the entity through the private description: {bob_ranked:?}"
    );

    // Deleting the memo takes its description with it.
    s.gql_ok(
        &alice,
        "mutation($id: ID!) { deleteDocument(id: $id) }",
        json!({ "id": memo }),
    )
    .await;
    let after = entity_views(&s, &alice, "Helvetron").await;
    assert!(
        !after.contains("covert"),
        "the description outlived its document: {after}"
    );
    assert!(after.contains("Helvetron Dynamics"), "{after}");
    s.stop().await;
}

/// The graph never says what the current version no longer says: a new version's upload
/// removes the old version's mentions (and facts only it supported) in its own transaction.
async fn a_new_version_leaves_the_graph_at_once(backend: Backend) {
    require_model();
    let s = TestServer::start(backend).await;
    let corpus = s.create_corpus(&s.owner_token, "firm").await;
    let doc = s
        .ingest_text(&s.owner_token, &corpus, "Office news", LEASE, "TEAM")
        .await;
    s.extract_all(&s.owner_token).await;
    let before = entity_views(&s, &s.owner_token, "Helvetron").await;
    assert!(before.contains("Zurich"), "{before}");

    let v2 = "Office news.\n\nThe cafeteria reopens on Monday with a new menu.";
    let (status, body) = s
        .upload(
            &s.owner_token,
            &corpus,
            "news.md",
            v2.as_bytes().to_vec(),
            json!({ "d": doc }),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let job = body["data"]["uploadDocument"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let events = s.follow_job(&s.owner_token, &job).await;
    assert_eq!(
        events.last().map(|e| e["stage"].clone()),
        Some(json!("searchable")),
        "{events:?}"
    );
    // No extraction has run on version 2, yet nothing of version 1 is left.
    let after = entity_views(&s, &s.owner_token, "Helvetron").await;
    for word in ["Zurich", "lease", "Helvetron"] {
        assert!(
            !after.contains(word),
            "`{word}` (only in version 1) is still in the graph: {after}"
        );
    }
    s.stop().await;
}

async fn token_for(s: &TestServer, token: &str, user: &str) -> Value {
    s.gql(
        token,
        "mutation($u: ID!) { createToken(userId: $u) { token apiToken { id } } }",
        json!({ "u": user }),
    )
    .await
}

/// Hole 2: tokens by rank. Yourself always; an admin for members and viewers; an owner for
/// anyone; the same for revocation.
async fn tokens_by_rank(backend: Backend) {
    let s = TestServer::start(backend).await;
    let me = s
        .gql_ok(&s.owner_token, "{ me { user { id } } }", json!({}))
        .await;
    let owner_id = me["me"]["user"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let (carol_id, carol) = s.user_with_token("carol", "ADMIN").await;
    let (erin_id, _) = s.user_with_token("erin", "ADMIN").await;
    let (dave_id, dave) = s.user_with_token("dave", "MEMBER").await;
    let (vic_id, _) = s.user_with_token("vic", "VIEWER").await;

    // The admin: not for the owner, not for another admin; for members and viewers yes.
    for target in [owner_id.clone(), erin_id.to_string()] {
        let r = token_for(&s, &carol, &target).await;
        assert_eq!(error_code(&r), Some("FORBIDDEN"), "{r}");
        assert!(r["data"].is_null(), "{r}");
    }
    for target in [dave_id, vic_id, carol_id] {
        let r = token_for(&s, &carol, &target.to_string()).await;
        assert!(r.get("errors").is_none(), "{r}");
        assert!(r["data"]["createToken"]["token"].is_string(), "{r}");
    }
    // A member: only for themselves.
    let r = token_for(&s, &dave, &vic_id.to_string()).await;
    assert_eq!(error_code(&r), Some("FORBIDDEN"), "{r}");
    // The owner: for anyone in the team (an admin here).
    let r = token_for(&s, &s.owner_token, &erin_id.to_string()).await;
    assert!(r.get("errors").is_none(), "{r}");

    // Revocation follows the same rule.
    let owners = token_for(&s, &s.owner_token, &owner_id).await;
    let owners_token_id = owners["data"]["createToken"]["apiToken"]["id"].clone();
    let r = s
        .gql(
            &carol,
            "mutation($id: ID!) { revokeToken(id: $id) }",
            json!({ "id": owners_token_id }),
        )
        .await;
    assert_eq!(error_code(&r), Some("FORBIDDEN"), "{r}");
    let owners_secret = owners["data"]["createToken"]["token"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let still = s
        .gql(&owners_secret, "{ me { user { name } } }", json!({}))
        .await;
    assert!(
        still.get("errors").is_none(),
        "the owner's token survived: {still}"
    );
    let daves = token_for(&s, &carol, &dave_id.to_string()).await;
    let r = s
        .gql(
            &carol,
            "mutation($id: ID!) { revokeToken(id: $id) }",
            json!({ "id": daves["data"]["createToken"]["apiToken"]["id"] }),
        )
        .await;
    assert_eq!(r["data"]["revokeToken"], true, "{r}");
    s.stop().await;
}

async fn ws_send(ws: &mut Ws, id: &str, query: &str) {
    ws.send(Message::text(
        json!({ "id": id, "type": "subscribe", "payload": { "query": query } }).to_string(),
    ))
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

/// The messages until the socket closes; the close code.
async fn until_closed(ws: &mut Ws) -> (Vec<Value>, Option<u16>) {
    let mut seen = Vec::new();
    loop {
        match ws_next(ws).await {
            Ok(v) => seen.push(v),
            Err(code) => return (seen, code),
        }
    }
}

/// Hole 3: a socket re-checks its token. Revoked through the API, its socket closes with
/// 4401; revoked behind the bus's back (straight in the database, as another process would),
/// its next operation is refused, the socket closes, and the mutation does not happen.
async fn revoked_socket_is_refused_and_closed(backend: Backend) {
    let s = TestServer::start(backend).await;
    let (dave_id, dave) = s.user_with_token("dave", "MEMBER").await;
    let mut ws = ws_open(&s, &dave).await;
    ws_send(&mut ws, "1", "{ me { user { name } } }").await;
    let first = ws_next(&mut ws)
        .await
        .unwrap_or_else(|c| panic!("closed {c:?}"));
    assert_eq!(
        first["payload"]["data"]["me"]["user"]["name"], "dave",
        "{first}"
    );

    // Revoke the socket's own token through the API.
    let store = &s.cairn().store;
    let hash = cairn::auth::hash_token(&dave);
    let (row, _) = store
        .live_token(&hash)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("dave's token"));
    let r = s
        .gql(
            &dave,
            "mutation($id: ID!) { revokeToken(id: $id) }",
            json!({ "id": row.id.to_string() }),
        )
        .await;
    assert_eq!(r["data"]["revokeToken"], true, "{r}");
    let (_, code) = until_closed(&mut ws).await;
    assert_eq!(
        code,
        Some(4401),
        "the socket of a revoked token closes with 4401"
    );

    // Behind the bus's back: no event, so the next operation's check must catch it.
    let (_, token2) = {
        let secret = cairn::auth::generate_token();
        let row = store
            .create_token(dave_id, &secret.hash, Some("second"))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        (row, secret.secret)
    };
    let mut ws = ws_open(&s, &token2).await;
    let (row2, _) = store
        .live_token(&cairn::auth::hash_token(&token2))
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("the second token"));
    store
        .revoke_token(row2.id)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // Past the session's cache of its last check.
    tokio::time::sleep(cairn::service::RECHECK_AFTER + Duration::from_millis(300)).await;
    let corpora_before = s
        .gql_ok(
            &s.owner_token,
            "{ corpora { edges { node { name } } } }",
            json!({}),
        )
        .await;
    ws_send(
        &mut ws,
        "2",
        "mutation { createCorpus(name: \"after-revocation\") { id } }",
    )
    .await;
    let (seen, code) = until_closed(&mut ws).await;
    assert_eq!(code, Some(4401), "{seen:?}");
    for m in &seen {
        assert!(
            m["payload"]["data"]["createCorpus"].is_null(),
            "the mutation ran: {m}"
        );
    }
    let corpora_after = s
        .gql_ok(
            &s.owner_token,
            "{ corpora { edges { node { name } } } }",
            json!({}),
        )
        .await;
    assert_eq!(
        corpora_before, corpora_after,
        "a corpus was created with a revoked token"
    );
    s.stop().await;
}

/// Hole 4: cost that matches work. 200 or 5,000 aliased searches are refused with
/// QUERY_TOO_COMPLEX before any work (the request costs the statements of authenticating it,
/// like `{ __typename }`, and not one more); searches, answers and the kg fields have fixed
/// costs (25 searchAll fields pass the root cap only to fail the complexity limit); a long
/// string argument is BAD_USER_INPUT.
async fn cost_is_refused_before_any_work(backend: Backend) {
    // No workers: their polling would add statements of their own to the count.
    let s = TestServer::start_tuned(backend, |c| c.workers = 0).await;
    let (_, dave) = s.user_with_token("dave", "MEMBER").await;
    let store = s.cairn().store.clone();
    // Warm: the token's `last_used_at` write happens on the first use only.
    s.gql_ok(&dave, "{ __typename }", json!({})).await;
    let n0 = store.statement_count();
    s.gql_ok(&dave, "{ __typename }", json!({})).await;
    let baseline = store.statement_count() - n0;
    // Authenticating is one statement (the token joined to its user), paid by every request.
    assert_eq!(baseline, 1, "statements to authenticate one request");
    for n in [200usize, 5_000] {
        let q: String = (0..n)
            .map(|i| format!("s{i}: search(query: \"x\", topK: 1, mode: LEXICAL) {{ mode }} "))
            .collect();
        let before = store.statement_count();
        let r = s.gql(&dave, &format!("{{ {q} }}"), json!({})).await;
        assert_eq!(error_code(&r), Some("QUERY_TOO_COMPLEX"), "{n} aliases");
        assert_eq!(
            store.statement_count() - before,
            baseline,
            "{n} aliases cost more statements than authenticating the request"
        );
    }
    // Under the root cap but over the complexity limit: fixed costs count.
    let q: String = (0..18)
        .map(|i| format!("a{i}: searchAll(q: \"x\", first: 0) {{ __typename }} "))
        .collect();
    let r = s.gql(&dave, &format!("{{ {q} }}"), json!({})).await;
    assert_eq!(error_code(&r), Some("QUERY_TOO_COMPLEX"), "{r}");
    let q: String = (0..6)
        .map(|i| format!("a{i}: answer(question: \"x\") {{ answer }} "))
        .collect();
    let r = s.gql(&dave, &format!("{{ {q} }}"), json!({})).await;
    assert_eq!(error_code(&r), Some("QUERY_TOO_COMPLEX"), "{r}");
    // One search is fine.
    let r = s
        .gql(
            &dave,
            "{ search(query: \"x\", topK: 1, mode: LEXICAL) { mode } }",
            json!({}),
        )
        .await;
    assert!(r.get("errors").is_none(), "{r}");
    // String arguments have limits.
    let long = "x".repeat(20_000);
    let r = s
        .gql(
            &dave,
            "query($q: String!) { search(query: $q, mode: LEXICAL) { mode } }",
            json!({ "q": long }),
        )
        .await;
    assert_eq!(error_code(&r), Some("BAD_USER_INPUT"), "{r}");
    let r = s
        .gql(
            &dave,
            "query($q: String!) { entities(q: $q) { edges { cursor } } }",
            json!({ "q": "y".repeat(3_000) }),
        )
        .await;
    assert_eq!(error_code(&r), Some("BAD_USER_INPUT"), "{r}");
    s.stop().await;
}

/// A burst of searches meets RATE_LIMITED; after the bucket refills they pass again.
async fn searches_are_rate_limited(backend: Backend) {
    let s = TestServer::start_tuned(backend, |c| {
        c.search_rate = 2.0;
        c.search_burst = 3;
    })
    .await;
    let (_, dave) = s.user_with_token("dave", "MEMBER").await;
    let (_, erin) = s.user_with_token("erin", "MEMBER").await;
    let q = "{ search(query: \"turbine\", topK: 1, mode: LEXICAL) { mode } }";
    let mut codes = Vec::new();
    for _ in 0..6 {
        let r = s.gql(&dave, q, json!({})).await;
        codes.push(error_code(&r).map(str::to_owned));
    }
    assert_eq!(&codes[..3], &[None, None, None], "{codes:?}");
    assert!(
        codes[3..]
            .iter()
            .any(|c| c.as_deref() == Some("RATE_LIMITED")),
        "a burst of 6 with a bucket of 3 was never limited: {codes:?}"
    );
    // Another user has a bucket of their own; answers and searchAll draw on the same one.
    let r = s.gql(&erin, q, json!({})).await;
    assert!(r.get("errors").is_none(), "{r}");
    let r = s
        .gql(
            &dave,
            "{ searchAll(q: \"turbine\") { __typename } }",
            json!({}),
        )
        .await;
    assert_eq!(error_code(&r), Some("RATE_LIMITED"), "{r}");
    // The bucket refills (2 per second).
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let r = s.gql(&dave, q, json!({})).await;
    assert!(r.get("errors").is_none(), "the limit did not clear: {r}");
    s.stop().await;
}

/// System corpora are written by the operator only; moves follow setVisibility's rule.
async fn system_corpora_and_moves(backend: Backend) {
    require_model();
    let s = TestServer::start(backend).await;
    let (_, alice) = s.user_with_token("alice", "MEMBER").await;
    let (_, bob) = s.user_with_token("bob", "MEMBER").await;
    let store = s.cairn().store.clone();
    let system = store
        .create_corpus(None, "handbook", None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let sys_id = system.id.to_string();
    // Through a token: FORBIDDEN, for a member and for the owner.
    for token in [&alice, &s.owner_token] {
        let r = s
            .gql(
                token,
                "mutation($c: ID!) { ingestText(corpusId: $c, title: \"t\", text: \"hello\") { id } }",
                json!({ "c": sys_id }),
            )
            .await;
        assert_eq!(error_code(&r), Some("FORBIDDEN"), "{r}");
    }
    let a = s.create_corpus(&alice, "a").await;
    let b = s.create_corpus(&alice, "b").await;
    let doc = s
        .ingest_text(&alice, &a, "Plan", "The turbine plan for spring.", "TEAM")
        .await;
    let moved = |token: String, to: String| {
        let s = &s;
        let doc = doc.clone();
        async move {
            s.gql(
                &token,
                "mutation($to: ID!, $d: [ID!]) { moveDocuments(toCorpusId: $to, documentIds: $d) }",
                json!({ "to": to, "d": [doc] }),
            )
            .await
        }
    };
    let r = moved(s.owner_token.clone(), sys_id.clone()).await;
    assert_eq!(
        error_code(&r),
        Some("FORBIDDEN"),
        "into a system corpus: {r}"
    );
    // Bob can read Alice's team document, but may not move it.
    let r = moved(bob.clone(), b.clone()).await;
    assert_eq!(r["data"]["moveDocuments"], 0, "{r}");
    let r = moved(alice.clone(), b.clone()).await;
    assert_eq!(r["data"]["moveDocuments"], 1, "{r}");
    let r = moved(s.owner_token.clone(), a.clone()).await;
    assert_eq!(r["data"]["moveDocuments"], 1, "admins may: {r}");

    // The operator (the CLI's path) writes a system corpus; every team then reads it, and no
    // token can change or delete what is there.
    let owner = s
        .cairn()
        .store
        .first_owner(
            store
                .team_by_name("default")
                .await
                .unwrap_or_else(|e| panic!("{e}"))
                .unwrap_or_else(|| panic!("default team"))
                .id,
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("owner"));
    let p = cairn::auth::Principal {
        user_id: owner.id,
        team_id: owner.team_id,
        name: owner.name.clone(),
        role: cairn::domain::Role::Owner,
        token_id: 0,
    };
    let job = s
        .cairn()
        .operator_upload(
            &p,
            cairn::service::UploadRequest {
                corpus_id: system.id,
                filename: "guide.md".into(),
                visibility: None,
                document_id: None,
                title: None,
                source_url: None,
            },
            std::io::Cursor::new(b"The handbook guide to turbines.".to_vec()),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let events = s.follow_job(&s.owner_token, &job.id.to_string()).await;
    let sys_doc = events
        .last()
        .map(|e| e["result"]["documentId"].to_string())
        .unwrap_or_default();
    let r = s
        .gql(
            &s.owner_token,
            "mutation($id: ID!) { deleteDocument(id: $id) }",
            json!({ "id": sys_doc }),
        )
        .await;
    assert_eq!(error_code(&r), Some("FORBIDDEN"), "{r}");
    let r = s
        .gql(
            &s.owner_token,
            "mutation($id: ID!) { setVisibility(documentId: $id, visibility: PRIVATE) { id } }",
            json!({ "id": sys_doc }),
        )
        .await;
    assert_eq!(error_code(&r), Some("FORBIDDEN"), "{r}");
    s.stop().await;
}

/// An admin follows a colleague's private upload by state and progress, never by its
/// filename, result or error.
async fn job_details_of_private_uploads(backend: Backend) {
    require_model();
    let s = TestServer::start(backend).await;
    let (_, alice) = s.user_with_token("alice", "MEMBER").await;
    let corpus = s.create_corpus(&s.owner_token, "c").await;
    // The admin watches the team's jobs while Alice uploads.
    let mut admin_ws = ws_open(&s, &s.owner_token).await;
    ws_send(
        &mut admin_ws,
        "jobs",
        "subscription { jobs { jobId state stage error result } }",
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (status, body) = s
        .upload(
            &alice,
            &corpus,
            "quokkasecret-plan.md",
            b"# Plan\n\nThe quokkasecret expansion.".to_vec(),
            json!({ "v": "PRIVATE" }),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let job = body["data"]["uploadDocument"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let own = s.follow_job(&alice, &job).await;
    assert!(
        own.last().is_some_and(|e| e["result"].is_object()),
        "{own:?}"
    );
    let mut admin_events = Vec::new();
    loop {
        let m = ws_next(&mut admin_ws)
            .await
            .unwrap_or_else(|c| panic!("closed {c:?}"));
        let ev = m["payload"]["data"]["jobs"].clone();
        let done = ev["state"] == "SUCCEEDED";
        admin_events.push(ev);
        if done {
            break;
        }
    }
    let seen = serde_json::to_string(&admin_events).unwrap_or_default();
    assert!(!seen.contains("quokkasecret"), "{seen}");
    assert!(admin_events.iter().all(|e| e["result"].is_null()), "{seen}");
    let q = "query($id: ID!) { job(id: $id) { state filename result error } }";
    let r = s.gql_ok(&s.owner_token, q, json!({ "id": job })).await;
    assert_eq!(r["job"]["state"], "SUCCEEDED");
    assert!(!r.to_string().contains("quokkasecret"), "{r}");
    // The uploader still gets hers, once.
    let r = s.gql_ok(&alice, q, json!({ "id": job })).await;
    assert_eq!(r["job"]["filename"], "quokkasecret-plan.md", "{r}");
    assert!(
        r["job"]["result"].is_object(),
        "the admin's read consumed the result: {r}"
    );
    s.stop().await;
}

/// Deleting a document keeps the blob file while a queued job of the same content needs it.
async fn delete_keeps_the_blob_a_queued_job_needs(backend: Backend) {
    // No workers: the queued job waits for the whole test.
    let s = TestServer::start_tuned(backend, |c| c.workers = 0).await;
    let cairn = s.cairn().clone();
    let store = cairn.store.clone();
    let team = store
        .team_by_name("default")
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("team"));
    let owner = store
        .first_owner(team.id)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("owner"));
    let corpus = store
        .create_corpus(Some(team.id), "c", None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let text = b"Blob race. The same bytes twice.".to_vec();
    let blob = cairn
        .blobs
        .write(
            std::io::Cursor::new(text.clone()),
            1 << 20,
            cairn::testing::ContentKey::Shared,
        )
        .unwrap_or_else(|e| panic!("{e}"));
    let (doc, _) = store
        .store_ingest(cairn::testing::StoreIngest {
            target: cairn::testing::Target::New {
                team_id: team.id,
                corpus_id: corpus.id,
                owner_id: owner.id,
                visibility: cairn::domain::Visibility::Team,
                title: "first".into(),
                source_url: None,
            },
            blob: cairn::testing::BlobRef {
                content_hash: blob.content_hash.clone(),
                mime_type: "text/markdown".into(),
                size: blob.size as i64,
                storage_uri: blob.storage_uri.clone(),
            },
            filename: Some("first.md".into()),
            extracted_chars: text.len() as i64,
            chunks: Vec::new(),
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // The same bytes uploaded again: a queued job that will read the same file.
    let job = cairn
        .upload(
            &cairn::auth::Principal {
                user_id: owner.id,
                team_id: team.id,
                name: owner.name.clone(),
                role: cairn::domain::Role::Owner,
                token_id: 0,
            },
            cairn::service::UploadRequest {
                corpus_id: corpus.id,
                filename: "second.md".into(),
                visibility: None,
                document_id: None,
                title: None,
                source_url: None,
            },
            std::io::Cursor::new(text),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(job.state.as_str(), "queued");
    let path = cairn.blobs.path_of(&blob.storage_uri);
    assert!(path.is_file(), "{}", path.display());
    s.gql_ok(
        &s.owner_token,
        "mutation($id: ID!) { deleteDocument(id: $id) }",
        json!({ "id": doc.id.to_string() }),
    )
    .await;
    assert!(
        path.is_file(),
        "the blob a queued job needs was unlinked: {}",
        path.display()
    );
    s.stop().await;
}

/// PostgreSQL refuses NOTIFY payloads of 8,000 bytes: a job event with a long result travels
/// as a reference, and a subscriber still receives the job's (stored) terminal state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_job_events_cross_notify() {
    let s = TestServer::start_tuned(Backend::Postgres, |c| c.workers = 0).await;
    let corpus = s.create_corpus(&s.owner_token, "c").await;
    let d = s
        .gql_ok(
            &s.owner_token,
            "mutation($c: ID!) { ingestText(corpusId: $c, title: \"t\", text: \"hello\") { id } }",
            json!({ "c": corpus }),
        )
        .await;
    let job_id: i64 = d["ingestText"]["id"]
        .as_str()
        .unwrap_or_default()
        .parse()
        .unwrap_or_default();
    let cairn = s.cairn().clone();
    let job = cairn
        .store
        .job(job_id)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("job"));
    let mut rx = cairn.bus.subscribe();
    let mut ev = JobEvent::of_job(&job, false);
    ev.error = Some("e".repeat(20_000));
    cairn.bus.publish(Event {
        team_id: job.team_id,
        kind: EventKind::Job(ev),
    });
    let got = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match rx.recv().await {
                Ok(Event {
                    kind: EventKind::Job(j),
                    ..
                }) if j.job_id == job_id => return j,
                Ok(_) => continue,
                Err(e) => panic!("{e}"),
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the large event never arrived (NOTIFY refused it)"));
    assert_eq!(
        got.state.as_str(),
        "queued",
        "the stored state, read through the reference"
    );
    s.stop().await;
}

/// GraphiQL loads no third-party script: its files come from Cairn (pinned, from the npm
/// registry at build time), and the page's policy allows this origin only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graphiql_is_served_by_cairn() {
    let s = TestServer::start(Backend::Sqlite).await;
    let (status, page) = s.get("/graphql").await;
    assert_eq!(
        status, 200,
        "GraphiQL's files are not installed (scripts/fetch-graphiql.sh): {page}"
    );
    assert!(
        !page.contains("http://") && !page.contains("https://") && !page.contains("//unpkg"),
        "{page}"
    );
    let assets: Vec<&str> = page
        .split(['"', '\''])
        .filter(|p| p.starts_with("/graphiql/"))
        .collect();
    assert_eq!(assets.len(), 4, "{page}");
    for a in assets {
        let (status, body) = s.get(a).await;
        assert_eq!(status, 200, "{a}");
        assert!(body.len() > 1_000, "{a}");
    }
    s.stop().await;
}
