//! The foundation's API behaviour, on SQLite and on PostgreSQL.

use cairn::auth::{can_read_document, DocumentAccess};
use cairn::domain::{Role, Visibility};
use cairn::testing::NewDocument;
use cairn_tests::{
    both_backends, error_code, new_principal, ws_init, ws_next, Backend, TestServer,
};
use futures_util::SinkExt;
use rand::{Rng, SeedableRng};
use sea_orm::ConnectionTrait;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

both_backends!(
    me_and_paginated_corpora,
    cross_team_is_not_found,
    revoked_token_is_unauthenticated,
    viewer_cannot_create_corpus,
    abusive_queries_are_refused_with_codes,
    websocket_authenticates_and_scopes_events,
    health_ready_and_metrics,
    readable_predicate_matches_the_rule,
    database_enforces_constraints,
    counts_cover_only_readable_documents,
    corpus_documents_cost_the_same_for_many_corpora,
);

const CREATE_CORPUS: &str =
    "mutation($n: String!) { createCorpus(name: $n, description: \"d\") { id name system } }";

async fn create_corpus(s: &TestServer, token: &str, name: &str) -> String {
    let data = s.gql_ok(token, CREATE_CORPUS, json!({ "n": name })).await;
    data["createCorpus"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

async fn me_and_paginated_corpora(b: Backend) {
    let s = TestServer::start(b).await;
    let data = s
        .gql_ok(
            &s.owner_token,
            "{ me { user { name role team { name } } team { id name } capabilities } }",
            json!({}),
        )
        .await;
    assert_eq!(data["me"]["user"]["name"], "admin");
    assert_eq!(data["me"]["user"]["role"], "OWNER");
    assert_eq!(data["me"]["user"]["team"]["name"], "default");
    assert_eq!(data["me"]["team"]["name"], "default");
    let caps: Vec<&str> = data["me"]["capabilities"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert!(
        caps.contains(&"admin") && caps.contains(&"corpus.create"),
        "{caps:?}"
    );

    for name in ["alpha", "beta", "gamma", "delta", "epsilon"] {
        create_corpus(&s, &s.owner_token, name).await;
    }
    let q = "query($a: String) { corpora(first: 2, after: $a) { edges { cursor node { name documentCount chunkCount } } pageInfo { hasNextPage endCursor } } }";
    let mut names = Vec::new();
    let mut after = Value::Null;
    let mut pages = 0;
    loop {
        let d = s.gql_ok(&s.owner_token, q, json!({ "a": after })).await;
        let conn = &d["corpora"];
        for e in conn["edges"].as_array().into_iter().flatten() {
            names.push(e["node"]["name"].as_str().unwrap_or_default().to_owned());
            assert_eq!(e["node"]["documentCount"], 0);
            assert_eq!(e["node"]["chunkCount"], 0);
        }
        pages += 1;
        if conn["pageInfo"]["hasNextPage"] != true {
            break;
        }
        after = conn["pageInfo"]["endCursor"].clone();
        assert!(pages < 10, "pagination does not end");
    }
    assert_eq!(names, ["alpha", "beta", "gamma", "delta", "epsilon"]);
    assert_eq!(pages, 3);

    // The same name twice in one team is a conflict; a blank name is bad input.
    let dup = s
        .gql(&s.owner_token, CREATE_CORPUS, json!({ "n": "alpha" }))
        .await;
    assert_eq!(error_code(&dup), Some("CONFLICT"), "{dup}");
    let blank = s
        .gql(&s.owner_token, CREATE_CORPUS, json!({ "n": "   " }))
        .await;
    assert_eq!(error_code(&blank), Some("BAD_USER_INPUT"), "{blank}");
    s.stop().await;
}

async fn cross_team_is_not_found(b: Backend) {
    let s = TestServer::start(b).await;
    let a_corpus = create_corpus(&s, &s.owner_token, "team-a-notes").await;
    let (_, _, b_token) = s.other_team("team-b").await;
    let b_corpus = create_corpus(&s, &b_token, "team-b-notes").await;

    // Team B asking for team A's corpus: NOT_FOUND, exactly like an id that does not exist.
    let q = "query($id: ID!) { corpus(id: $id) { id name } }";
    let theirs = s.gql(&b_token, q, json!({ "id": a_corpus })).await;
    assert_eq!(error_code(&theirs), Some("NOT_FOUND"), "{theirs}");
    assert_eq!(theirs["data"]["corpus"], Value::Null);
    let missing = s.gql(&b_token, q, json!({ "id": "987654" })).await;
    assert_eq!(error_code(&missing), Some("NOT_FOUND"));
    assert_eq!(
        theirs["errors"][0]["message"], missing["errors"][0]["message"],
        "another team's corpus must look exactly like a missing one"
    );
    // Their own is found; listings never show the other team's.
    let own = s.gql_ok(&b_token, q, json!({ "id": b_corpus })).await;
    assert_eq!(own["corpus"]["name"], "team-b-notes");
    let list = s
        .gql_ok(
            &b_token,
            "{ corpora { edges { node { name } } } }",
            json!({}),
        )
        .await;
    assert_eq!(list["corpora"]["edges"].as_array().map(Vec::len), Some(1));

    // Minting a token for a user of another team: NOT_FOUND too.
    let me = s
        .gql_ok(&s.owner_token, "{ me { user { id } } }", json!({}))
        .await;
    let a_owner = me["me"]["user"]["id"].clone();
    let steal = s
        .gql(
            &b_token,
            "mutation($u: ID!) { createToken(userId: $u) { token } }",
            json!({ "u": a_owner }),
        )
        .await;
    assert_eq!(error_code(&steal), Some("NOT_FOUND"), "{steal}");
    s.stop().await;
}

async fn revoked_token_is_unauthenticated(b: Backend) {
    let s = TestServer::start(b).await;
    let (_, token) = s.user_with_token("carol", "MEMBER").await;
    let me = "{ me { user { name } } }";
    let ok = s.gql_ok(&token, me, json!({})).await;
    assert_eq!(ok["me"]["user"]["name"], "carol");

    let tokens = s
        .gql_ok(
            &token,
            "mutation { createToken(label: \"second\") { token apiToken { id label } } }",
            json!({}),
        )
        .await;
    let second = tokens["createToken"]["token"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let second_id = tokens["createToken"]["apiToken"]["id"].clone();
    assert_eq!(
        s.gql_ok(&second, me, json!({})).await["me"]["user"]["name"],
        "carol"
    );

    let revoked = s
        .gql_ok(
            &token,
            "mutation($id: ID!) { revokeToken(id: $id) }",
            json!({ "id": second_id }),
        )
        .await;
    assert_eq!(revoked["revokeToken"], true);
    let (status, body) = s.gql_status(Some(&second), me, json!({})).await;
    assert_eq!(status, 401);
    assert_eq!(error_code(&body), Some("UNAUTHENTICATED"), "{body}");
    // The first token still works; garbage and missing tokens are refused too.
    assert_eq!(
        s.gql_ok(&token, me, json!({})).await["me"]["user"]["name"],
        "carol"
    );
    let (status, body) = s
        .gql_status(Some("cairn_not-a-real-token"), me, json!({}))
        .await;
    assert_eq!((status, error_code(&body)), (401, Some("UNAUTHENTICATED")));
    let (_, body) = s.gql_status(None, me, json!({})).await;
    assert_eq!(error_code(&body), Some("UNAUTHENTICATED"), "{body}");
    s.stop().await;
}

async fn viewer_cannot_create_corpus(b: Backend) {
    let s = TestServer::start(b).await;
    let (_, viewer) = s.user_with_token("vic", "VIEWER").await;
    let body = s.gql(&viewer, CREATE_CORPUS, json!({ "n": "nope" })).await;
    assert_eq!(error_code(&body), Some("FORBIDDEN"), "{body}");
    // Nothing was written, and reading is allowed.
    let list = s
        .gql_ok(
            &viewer,
            "{ corpora { edges { node { name } } } }",
            json!({}),
        )
        .await;
    assert_eq!(list["corpora"]["edges"], json!([]));
    // Viewers and members cannot create users; admins cannot create owners.
    let (_, member) = s.user_with_token("mia", "MEMBER").await;
    let q = "mutation($r: Role!) { createUser(name: \"x\", role: $r) { id } }";
    for (token, role) in [(&viewer, "VIEWER"), (&member, "VIEWER")] {
        let body = s.gql(token, q, json!({ "r": role })).await;
        assert_eq!(error_code(&body), Some("FORBIDDEN"), "{body}");
    }
    let (_, admin) = s.user_with_token("ada", "ADMIN").await;
    let body = s.gql(&admin, q, json!({ "r": "OWNER" })).await;
    assert_eq!(error_code(&body), Some("FORBIDDEN"), "{body}");
    s.gql_ok(&admin, q, json!({ "r": "MEMBER" })).await;
    s.stop().await;
}

async fn abusive_queries_are_refused_with_codes(b: Backend) {
    let s = TestServer::start(b).await;
    // Deeper than the limit (12): nested introspection.
    let mut deep = String::from("name");
    for _ in 0..14 {
        deep = format!("ofType {{ {deep} }}");
    }
    let q = format!("{{ __type(name: \"Query\") {{ fields {{ type {{ {deep} }} }} }} }}");
    let body = s.gql(&s.owner_token, &q, json!({})).await;
    assert_eq!(error_code(&body), Some("QUERY_TOO_DEEP"), "{body}");

    // More complex than the limit: many aliased full pages.
    let page =
        "corpora(first: 100) { edges { node { id name description documentCount chunkCount } } }";
    let wide: String = (0..12).map(|i| format!("c{i}: {page} ")).collect();
    let body = s
        .gql(&s.owner_token, &format!("{{ {wide} }}"), json!({}))
        .await;
    assert_eq!(error_code(&body), Some("QUERY_TOO_COMPLEX"), "{body}");

    // Malformed and invalid queries are bad input.
    let body = s.gql(&s.owner_token, "{ me { ", json!({})).await;
    assert_eq!(error_code(&body), Some("BAD_USER_INPUT"), "{body}");
    let body = s.gql(&s.owner_token, "{ nosuchfield }", json!({})).await;
    assert_eq!(error_code(&body), Some("BAD_USER_INPUT"), "{body}");
    // A sane query still passes.
    s.gql_ok(&s.owner_token, "{ me { user { name } } }", json!({}))
        .await;
    s.stop().await;
}

async fn websocket_authenticates_and_scopes_events(b: Backend) {
    let s = TestServer::start(b).await;
    // No token, a bad token, a revoked-looking token: the socket is closed (4403).
    for payload in [
        json!({}),
        json!({ "authorization": "Bearer cairn_bogus" }),
        Value::Null,
    ] {
        let (_, first) = ws_init(&s, payload.clone()).await;
        assert_eq!(first, Err(Some(4403)), "payload {payload} must be refused");
    }

    let (_, _, b_token) = s.other_team("team-b").await;
    let auth_a = format!("Bearer {}", s.owner_token);
    let (mut ws_a, ack) = ws_init(&s, json!({ "authorization": auth_a })).await;
    assert_eq!(
        ack.ok().map(|v| v["type"].clone()),
        Some(json!("connection_ack"))
    );
    let (mut ws_b, ack) = ws_init(&s, json!({ "token": b_token })).await;
    assert_eq!(
        ack.ok().map(|v| v["type"].clone()),
        Some(json!("connection_ack"))
    );
    let sub = |id: &str| {
        Message::text(
            json!({ "id": id, "type": "subscribe", "payload": { "query": "subscription { corpusCreated { name } }" } })
                .to_string(),
        )
    };
    ws_a.send(sub("a")).await.unwrap_or_else(|e| panic!("{e}"));
    ws_b.send(sub("b")).await.unwrap_or_else(|e| panic!("{e}"));
    // Let both subscriptions register before anything is published.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;

    create_corpus(&s, &s.owner_token, "from-a").await;
    create_corpus(&s, &b_token, "from-b").await;
    let got_a = ws_next(&mut ws_a)
        .await
        .unwrap_or_else(|c| panic!("closed {c:?}"));
    assert_eq!(got_a["type"], "next");
    assert_eq!(got_a["payload"]["data"]["corpusCreated"]["name"], "from-a");
    // B's first event is its own: team A's corpus was never delivered to it.
    let got_b = ws_next(&mut ws_b)
        .await
        .unwrap_or_else(|c| panic!("closed {c:?}"));
    assert_eq!(
        got_b["payload"]["data"]["corpusCreated"]["name"], "from-b",
        "{got_b}"
    );
    s.stop().await;
}

async fn health_ready_and_metrics(b: Backend) {
    let s = TestServer::start(b).await;
    assert_eq!(s.get("/healthz").await, (200, "ok".to_owned()));
    assert_eq!(s.get("/readyz").await.0, 200);
    s.gql_ok(&s.owner_token, "{ me { user { name } } }", json!({}))
        .await;
    let (status, text) = s.get("/metrics").await;
    assert_eq!(status, 200);
    assert!(
        text.contains(
            "cairn_http_requests_total{method=\"POST\",route=\"/graphql\",status=\"200\"}"
        ),
        "{text}"
    );
    let (status, page) = s.get("/graphql").await;
    assert_eq!(status, 200);
    assert!(page.contains("graphiql"), "GET /graphql serves GraphiQL");
    s.stop().await;
}

/// The SQL predicate used by every document query equals `auth::can_read_document` on random
/// teams, users, corpora (system or not) and visibilities.
async fn readable_predicate_matches_the_rule(b: Backend) {
    let s = TestServer::start(b).await;
    let store = &s.cairn().store;
    let seed: u64 = rand::rng().random();
    eprintln!("seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);

    let system = store
        .create_corpus(None, &format!("system-{seed}"), None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut principals = Vec::new();
    let mut corpora = vec![(system.id, None)];
    for t in 0..3 {
        let team = store
            .create_team(&format!("t{t}"))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        for u in 0..3 {
            let role = [Role::Owner, Role::Member, Role::Viewer][u];
            principals.push(new_principal(store, team.id, &format!("u{u}"), role).await);
        }
        for c in 0..2 {
            let corpus = store
                .create_corpus(Some(team.id), &format!("c{c}"), None)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            corpora.push((corpus.id, Some(team.id)));
        }
    }
    let mut docs = Vec::new();
    for i in 0..120 {
        let owner = &principals[rng.random_range(0..principals.len())];
        // A document lives in its owner's team: in one of its corpora or in the system corpus.
        let candidates: Vec<_> = corpora
            .iter()
            .filter(|(_, team)| team.is_none() || *team == Some(owner.team_id))
            .collect();
        let (corpus_id, corpus_team) = *candidates[rng.random_range(0..candidates.len())];
        let visibility = if rng.random_bool(0.5) {
            Visibility::Team
        } else {
            Visibility::Private
        };
        let row = store
            .insert_document(&NewDocument {
                team_id: owner.team_id,
                corpus_id,
                owner_id: owner.user_id,
                visibility,
                title: format!("doc {i}"),
                mime_type: "text/plain".into(),
            })
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        docs.push((
            row.id,
            DocumentAccess {
                team_id: owner.team_id,
                owner_id: owner.user_id,
                visibility,
                in_system_corpus: corpus_team.is_none(),
            },
        ));
    }
    let ids: Vec<i64> = docs.iter().map(|(id, _)| *id).collect();
    let mut checks = 0;
    for p in &principals {
        let got = store
            .readable_document_ids(p, &ids)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let want: Vec<i64> = docs
            .iter()
            .filter(|(_, d)| can_read_document(p, d))
            .map(|(id, _)| *id)
            .collect();
        assert_eq!(got, want, "principal {p:?} (seed {seed})");
        checks += ids.len();
    }
    assert!(checks >= 1000);
    s.stop().await;
}

async fn database_enforces_constraints(b: Backend) {
    let s = TestServer::start(b).await;
    let db = s.cairn().store.connection();
    // Same corpus name in two teams is fine; the uniqueness is per team.
    create_corpus(&s, &s.owner_token, "shared-name").await;
    let (team_b, owner_b, b_token) = s.other_team("team-b").await;
    create_corpus(&s, &b_token, "shared-name").await;
    // A mention must point at exactly one of entity or relation (CHECK).
    let bad = [
        format!("INSERT INTO kg_mentions (team_id, document_id, version, snippet) VALUES ({team_b}, 1, 1, 'x')"),
        // Foreign keys: a document in a corpus that does not exist.
        format!("INSERT INTO documents (team_id, corpus_id, owner_id, visibility, title, mime_type) VALUES ({team_b}, 999999, {owner_b}, 'team', 't', 'text/plain')"),
        // Visibility and role vocabularies.
        format!("INSERT INTO users (team_id, name, role) VALUES ({team_b}, 'z', 'root')"),
        // Predicates are lower_snake_case.
        format!("INSERT INTO kg_entities (team_id, type, name, name_norm) VALUES ({team_b}, 'org', 'Acme', 'acme')"),
    ];
    for sql in &bad[..3] {
        assert!(db.execute_unprepared(sql).await.is_err(), "accepted: {sql}");
    }
    db.execute_unprepared(&bad[3])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let dup = db.execute_unprepared(&bad[3]).await;
    assert!(
        dup.is_err(),
        "kg_entities (team, type, name_norm) must be unique"
    );
    let rel = |p: &str| {
        format!("INSERT INTO kg_relations (team_id, subject_id, predicate, object_id) SELECT {team_b}, id, '{p}', id FROM kg_entities LIMIT 1")
    };
    assert!(db.execute_unprepared(&rel("Works For")).await.is_err());
    assert!(db.execute_unprepared(&rel("works__for")).await.is_err());
    db.execute_unprepared(&rel("works_for"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    s.stop().await;
}

/// documentCount and chunkCount count only what the caller may read.
async fn counts_cover_only_readable_documents(b: Backend) {
    let s = TestServer::start(b).await;
    let corpus: i64 = create_corpus(&s, &s.owner_token, "mixed")
        .await
        .parse()
        .unwrap_or_default();
    let (bob_id, bob) = s.user_with_token("bob", "MEMBER").await;
    let store = &s.cairn().store;
    let me = s
        .gql_ok(
            &s.owner_token,
            "{ me { user { id } team { id } } }",
            json!({}),
        )
        .await;
    let admin_id: i64 = me["me"]["user"]["id"]
        .as_str()
        .unwrap_or_default()
        .parse()
        .unwrap_or_default();
    let team_id: i64 = me["me"]["team"]["id"]
        .as_str()
        .unwrap_or_default()
        .parse()
        .unwrap_or_default();
    for (owner, vis) in [
        (admin_id, Visibility::Team),
        (admin_id, Visibility::Private),
        (bob_id, Visibility::Private),
    ] {
        store
            .insert_document(&NewDocument {
                team_id,
                corpus_id: corpus,
                owner_id: owner,
                visibility: vis,
                title: "t".into(),
                mime_type: "text/plain".into(),
            })
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let q = "{ corpora { edges { node { documentCount } } } }";
    let count = |d: Value| d["corpora"]["edges"][0]["node"]["documentCount"].clone();
    assert_eq!(count(s.gql_ok(&s.owner_token, q, json!({})).await), 2);
    assert_eq!(count(s.gql_ok(&bob, q, json!({})).await), 2);
    s.stop().await;
}

/// `corpora { documents { chunks } }` costs the same number of SQL statements for 3 corpora
/// as for 15: `Corpus.documents` and `Document.chunks` go through batched loaders, each page
/// bounded in SQL, and a page holds only what the caller may read.
async fn corpus_documents_cost_the_same_for_many_corpora(b: Backend) {
    let s = TestServer::start_tuned(b, |c| c.workers = 0).await;
    let (bob_id, bob) = s.user_with_token("bob", "MEMBER").await;
    let store = s.cairn().store.clone();
    let me = s
        .gql_ok(
            &s.owner_token,
            "{ me { user { id } team { id } } }",
            json!({}),
        )
        .await;
    let id_of = |v: &Value| -> i64 {
        v.as_str()
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("{me}"))
    };
    let admin_id = id_of(&me["me"]["user"]["id"]);
    let team_id = id_of(&me["me"]["team"]["id"]);
    let q = "{ corpora(first: 50) { edges { node { name documentCount documents(first: 2) { pageInfo { hasNextPage } edges { node { title chunks(first: 1) { index } } } } } } } }";
    let mut made = 0usize;
    let mut counts = Vec::new();
    for target in [3usize, 15] {
        while made < target {
            let corpus: i64 = create_corpus(&s, &s.owner_token, &format!("c{made}"))
                .await
                .parse()
                .unwrap_or_default();
            for (owner, vis, title) in [
                (admin_id, Visibility::Team, "team-1"),
                (admin_id, Visibility::Team, "team-2"),
                (admin_id, Visibility::Private, "admin-private"),
                (bob_id, Visibility::Private, "bob-private"),
            ] {
                store
                    .insert_document(&NewDocument {
                        team_id,
                        corpus_id: corpus,
                        owner_id: owner,
                        visibility: vis,
                        title: title.into(),
                        mime_type: "text/plain".into(),
                    })
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
            }
            made += 1;
        }
        let mut best = u64::MAX;
        for _ in 0..5 {
            let before = store.statement_count();
            let d = s.gql_ok(&s.owner_token, q, json!({})).await;
            let after = store.statement_count();
            best = best.min(after - before);
            let corpora = d["corpora"]["edges"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            assert_eq!(corpora.len(), target, "{d}");
            for c in &corpora {
                let node = &c["node"];
                assert_eq!(node["documentCount"], 3, "{node}");
                let docs = node["documents"]["edges"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                assert_eq!(docs.len(), 2, "first: 2 per corpus: {node}");
                assert_eq!(node["documents"]["pageInfo"]["hasNextPage"], true, "{node}");
                assert!(
                    docs.iter().all(|e| e["node"]["title"] != "bob-private"),
                    "another user's private document in a page: {node}"
                );
            }
        }
        counts.push(best);
    }
    // Bob's pages hold his own private document, never the admin's.
    let d = s
        .gql_ok(
            &bob,
            "{ corpora(first: 50) { edges { node { documents(first: 10) { edges { node { title } } } } } } }",
            json!({}),
        )
        .await;
    let titles: Vec<String> = d["corpora"]["edges"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .flat_map(|c| {
            c["node"]["documents"]["edges"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|e| e["node"]["title"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(titles.len(), 15 * 3, "{d}");
    assert!(!titles.iter().any(|t| t == "admin-private"), "{titles:?}");
    eprintln!("statements for 3 and 15 corpora ({b:?}): {counts:?}");
    assert!(counts[0] > 0, "the counter counts nothing: {counts:?}");
    assert!(
        counts[1] <= counts[0],
        "statement count grows with corpora: {counts:?}"
    );
    s.stop().await;
}

both_backends!(batched_readers_match_the_single_readers);

/// The batched, bounded readers (`Store::corpora_documents`, `Store::current_chunks_first`)
/// answer what the per-corpus and unbounded readers answer, cut to their bounds, for every
/// principal: random teams, users, corpora (system or not), visibilities and chunk counts.
async fn batched_readers_match_the_single_readers(b: Backend) {
    use cairn::testing::{BlobRef, ChunkRow, StoreIngest, Target, EMBEDDING_DIM};

    let s = TestServer::start(b).await;
    let store = &s.cairn().store;
    let seed: u64 = rand::rng().random();
    eprintln!("seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);

    let system = store
        .create_corpus(None, &format!("system-{seed}"), None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut principals = Vec::new();
    let mut corpora = vec![(system.id, None)];
    for t in 0..2 {
        let team = store
            .create_team(&format!("batch-t{t}"))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        for (u, role) in [Role::Owner, Role::Member].into_iter().enumerate() {
            principals.push(new_principal(store, team.id, &format!("u{u}"), role).await);
        }
        for c in 0..2 {
            let corpus = store
                .create_corpus(Some(team.id), &format!("c{c}"), None)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            corpora.push((corpus.id, Some(team.id)));
        }
    }
    let mut doc_ids = Vec::new();
    for i in 0..60usize {
        let owner = &principals[rng.random_range(0..principals.len())];
        let candidates: Vec<_> = corpora
            .iter()
            .filter(|(_, team)| team.is_none() || *team == Some(owner.team_id))
            .collect();
        let (corpus_id, _) = *candidates[rng.random_range(0..candidates.len())];
        let visibility = if rng.random_bool(0.5) {
            Visibility::Team
        } else {
            Visibility::Private
        };
        let chunks: Vec<ChunkRow> = (0..rng.random_range(0..=4))
            .map(|k| ChunkRow {
                index: k,
                content: format!("document {i} chunk {k}"),
                section: None,
                page: None,
                embedding: (0..EMBEDDING_DIM)
                    .map(|d| ((i + d) % 7) as f32 + 1.0)
                    .collect(),
            })
            .collect();
        let (doc, _) = store
            .store_ingest(StoreIngest {
                target: Target::New {
                    team_id: owner.team_id,
                    corpus_id,
                    owner_id: owner.user_id,
                    visibility,
                    title: format!("doc {i}"),
                    source_url: None,
                },
                blob: BlobRef {
                    content_hash: format!("{:064x}", i + 1),
                    mime_type: "text/plain".into(),
                    size: 1,
                    storage_uri: format!("batch://{i}"),
                },
                filename: None,
                extracted_chars: 0,
                chunks,
            })
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        doc_ids.push(doc.id);
    }
    // Every corpus, one twice, one missing; the readers order by corpus id.
    let mut asked: Vec<i64> = corpora.iter().map(|(id, _)| *id).collect();
    asked.push(asked[1]);
    asked.push(i64::MAX);
    asked.reverse();
    let mut by_corpus: Vec<i64> = asked.clone();
    by_corpus.sort();
    by_corpus.dedup();
    let middle = doc_ids[doc_ids.len() / 2];
    let mut checks = 0;
    for p in &principals {
        for after in [None, Some(middle)] {
            for limit in [1u64, 3, 100] {
                let got = store
                    .corpora_documents(p, &asked, after, limit)
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
                let mut want = Vec::new();
                for &c in &by_corpus {
                    want.extend(
                        store
                            .corpus_documents(p, c, after, limit)
                            .await
                            .unwrap_or_else(|e| panic!("{e}")),
                    );
                }
                assert_eq!(
                    got, want,
                    "{p:?} after {after:?} limit {limit} (seed {seed})"
                );
                checks += got.len();
            }
        }
        let all = store
            .current_chunks(p, &doc_ids)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        for first in [1u32, 2, 10] {
            let got = store
                .current_chunks_first(p, &doc_ids, first)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            // The first `first` of each document's chunks, in order.
            let mut taken: std::collections::HashMap<i64, u32> = Default::default();
            let want: Vec<_> = all
                .iter()
                .filter(|c| {
                    let n = taken.entry(c.document_id).or_default();
                    *n += 1;
                    *n <= first
                })
                .cloned()
                .collect();
            assert_eq!(got, want, "{p:?} first {first} (seed {seed})");
            checks += got.len();
        }
        assert!(store
            .corpora_documents(p, &[], None, 10)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .is_empty());
        assert!(store
            .current_chunks_first(p, &doc_ids, 0)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .is_empty());
    }
    assert!(checks > 0);
    s.stop().await;
}
