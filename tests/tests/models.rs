//! Model roles per team at run time (seed 001, KG-7), end to end on both backends with two
//! OpenAI-compatible stub servers, each demanding its own key:
//!
//! - each team's knowledge extraction goes to the `utility` endpoint its admin set, with that
//!   endpoint's key; a team without a setting falls back to the instance (here: no LLM, the
//!   `rules` extractor), and clearing a setting falls back again;
//! - `answer` goes to the team's `chat` endpoint; every `llm` usage row names its role;
//! - the key is write-only: it never comes back in a reply (the setting's own, `teamModels`,
//!   an error), an audit row or the stored row, and a team never sees another team's setting;
//! - only admins read or change settings; bad input is refused with a code, writing nothing.

use cairn_llm::stub::{StubReply, StubServer};
use cairn_tests::{both_backends, error_code, require_model, Backend, TestServer};
use serde_json::{json, Value};

both_backends!(
    each_team_extracts_with_its_own_endpoint,
    settings_are_admin_only_and_keys_write_only,
);

const ALPHA_KEY: &str = "sk-alpha-canary-7f3e9b";
const BETA_KEY: &str = "sk-beta-canary-20c4d1";

const ALPHA_TEXT: &str = "Acme Robotics acquired Globex Media last year.";
const BETA_TEXT: &str = "Initech hired Vandelay Industries for the harbour survey.";

const SET: &str = "mutation($r: ModelRole!, $i: TeamModelInput!) { setTeamModel(role: $r, input: $i) { role source url model hasApiKey priceInput priceOutput updatedAt } }";
const LIST: &str = "{ teamModels { role source url model hasApiKey priceInput priceOutput } }";
const ENTITIES: &str = "{ entities(first: 50) { edges { node { name } } } }";

fn extraction(subject: &str, object: &str, predicate: &str, snippet: &str) -> String {
    json!({
        "entities": [
            { "type": "organization", "name": subject, "snippet": snippet },
            { "type": "organization", "name": object, "snippet": snippet },
        ],
        "relations": [
            { "subject": subject, "predicate": predicate, "object": object, "snippet": snippet },
        ],
    })
    .to_string()
}

fn names(d: &Value) -> Vec<String> {
    d["entities"]["edges"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|e| e["node"]["name"].as_str().map(str::to_owned))
        .collect()
}

async fn set_utility(s: &TestServer, token: &str, stub: &StubServer, model: &str, key: &str) {
    let d = s
        .gql_ok(
            token,
            SET,
            json!({ "r": "UTILITY", "i": { "url": stub.base_url(), "model": model, "apiKey": key, "priceInput": 1.5, "priceOutput": 3.0 } }),
        )
        .await;
    let m = &d["setTeamModel"];
    assert_eq!(m["source"], "TEAM", "{m}");
    assert_eq!(m["hasApiKey"], true, "{m}");
    assert!(!m.to_string().contains(key), "the key came back: {m}");
}

async fn extractor_of(s: &TestServer, token: &str) -> Value {
    let job = s.extract_all(token).await;
    let d = s
        .gql_ok(
            token,
            "query($j: ID!) { job(id: $j) { result } }",
            json!({ "j": job }),
        )
        .await;
    d["job"]["result"].clone()
}

async fn each_team_extracts_with_its_own_endpoint(backend: Backend) {
    require_model();
    let alpha = StubServer::start_with_key(
        vec![StubReply::content(extraction(
            "Acme Robotics",
            "Globex Media",
            "acquired",
            ALPHA_TEXT.trim_end_matches('.'),
        ))],
        ALPHA_KEY,
    )
    .await;
    let beta = StubServer::start_with_key(
        vec![StubReply::content(extraction(
            "Initech",
            "Vandelay Industries",
            "hired",
            "Initech hired Vandelay Industries",
        ))],
        BETA_KEY,
    )
    .await;
    // The instance itself has no LLM: without a team setting, extraction uses `rules` and
    // answers are extractive.
    let s = TestServer::start(backend).await;
    let (beta_team, _, beta_token) = s.other_team("beta").await;
    let (alpha_team, alpha_token) = (team_of(&s, &s.owner_token).await, s.owner_token.clone());

    let c = s.create_corpus(&alpha_token, "alpha").await;
    s.ingest_text(&alpha_token, &c, "deal", ALPHA_TEXT, "TEAM")
        .await;
    let c = s.create_corpus(&beta_token, "beta").await;
    s.ingest_text(&beta_token, &c, "survey", BETA_TEXT, "TEAM")
        .await;

    set_utility(&s, &alpha_token, &alpha, "alpha-model", ALPHA_KEY).await;
    set_utility(&s, &beta_token, &beta, "beta-model", BETA_KEY).await;

    let r = extractor_of(&s, &alpha_token).await;
    assert_eq!(r["extractor"], "llm", "{r}");
    assert_eq!(r["extracted"], 1, "{r}");
    let r = extractor_of(&s, &beta_token).await;
    assert_eq!(r["extractor"], "llm", "{r}");
    assert_eq!(r["extracted"], 1, "{r}");

    // Each stub saw exactly its own team's text, with its own key and model.
    for (stub, key, model, own, other) in [
        (&alpha, ALPHA_KEY, "alpha-model", ALPHA_TEXT, BETA_TEXT),
        (&beta, BETA_KEY, "beta-model", BETA_TEXT, ALPHA_TEXT),
    ] {
        let reqs = stub.requests();
        assert_eq!(reqs.len(), 1, "{reqs:?}");
        assert!(stub.shape_errors().is_empty(), "{:?}", stub.shape_errors());
        let sent = reqs[0].to_string();
        assert!(sent.contains(own.trim_end_matches('.')), "{sent}");
        assert!(!sent.contains(other.trim_end_matches('.')), "{sent}");
        assert_eq!(reqs[0]["model"], model);
        assert_eq!(
            stub.authorizations(),
            vec![Some(format!("Bearer {key}"))],
            "each endpoint gets its own team's key"
        );
    }
    let a = names(&s.gql_ok(&alpha_token, ENTITIES, json!({})).await);
    assert!(a.contains(&"Acme Robotics".to_owned()), "{a:?}");
    assert!(!a.iter().any(|n| n == "Initech"), "{a:?}");
    let b = names(&s.gql_ok(&beta_token, ENTITIES, json!({})).await);
    assert!(b.contains(&"Vandelay Industries".to_owned()), "{b:?}");
    assert!(!b.iter().any(|n| n == "Globex Media"), "{b:?}");

    // Usage rows name the role and the team's model, priced by the team's setting.
    for (team, model) in [(alpha_team, "alpha-model"), (beta_team, "beta-model")] {
        let rows = s
            .cairn()
            .store
            .team_usage(team, "llm")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(rows[0].role.as_deref(), Some("utility"));
        assert_eq!(rows[0].model, model);
        let expected = rows[0].input_tokens as f64 * 1.5e-6 + rows[0].output_tokens as f64 * 3e-6;
        assert!((rows[0].cost_usd - expected).abs() < 1e-12, "{rows:?}");
    }

    // The chat role: beta points answers at its stub; alpha stays extractive.
    let chat = StubServer::start_with_key(
        vec![StubReply::content("Initech hired Vandelay Industries [1].")],
        BETA_KEY,
    )
    .await;
    s.gql_ok(
        &beta_token,
        SET,
        json!({ "r": "CHAT", "i": { "url": chat.base_url(), "model": "beta-chat", "apiKey": BETA_KEY } }),
    )
    .await;
    let q = "query($q: String!) { answer(question: $q) { answer extractive usage { model } } }";
    let d = s
        .gql_ok(&beta_token, q, json!({ "q": "Whom did Initech hire?" }))
        .await;
    assert_eq!(d["answer"]["extractive"], false, "{d}");
    assert_eq!(d["answer"]["usage"]["model"], "beta-chat", "{d}");
    assert_eq!(chat.requests().len(), 1);
    let d = s
        .gql_ok(&alpha_token, q, json!({ "q": "Whom did Acme acquire?" }))
        .await;
    assert_eq!(d["answer"]["extractive"], true, "{d}");
    assert_eq!(
        chat.requests().len(),
        1,
        "alpha's question never reached beta's model"
    );
    let rows = s
        .cairn()
        .store
        .team_usage(beta_team, "llm")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let roles: Vec<_> = rows.iter().map(|r| r.role.clone()).collect();
    assert_eq!(
        roles,
        vec![Some("utility".to_owned()), Some("chat".to_owned())],
        "{rows:?}"
    );

    // Cleared: alpha's next extraction falls back to the instance's `rules` extractor and
    // its stub hears nothing more.
    let d = s
        .gql_ok(
            &alpha_token,
            "mutation { clearTeamModel(role: UTILITY) }",
            json!({}),
        )
        .await;
    assert_eq!(d["clearTeamModel"], true);
    s.ingest_text(
        &alpha_token,
        &team_corpus(&s, &alpha_token).await,
        "more",
        "Acme Robotics opened a plant in Lyon.",
        "TEAM",
    )
    .await;
    let r = extractor_of(&s, &alpha_token).await;
    assert_eq!(r["extractor"], "rules", "{r}");
    assert_eq!(alpha.requests().len(), 1);
    let list = s.gql_ok(&alpha_token, LIST, json!({})).await;
    let utility = list["teamModels"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .find(|m| m["role"] == "UTILITY")
        .unwrap_or_default();
    assert_eq!(utility["source"], "NONE", "{list}");
    s.stop().await;
}

async fn settings_are_admin_only_and_keys_write_only(backend: Backend) {
    let stub = StubServer::start(vec![StubReply::content("{}")]).await;
    let s = TestServer::start(backend).await;
    let (_, beta_token) = {
        let (t, _, tok) = s.other_team("beta").await;
        (t, tok)
    };
    let (_, member) = s.user_with_token("mia", "MEMBER").await;
    let (_, admin) = s.user_with_token("ada", "ADMIN").await;
    let url = stub.base_url();

    // Members read nothing and change nothing.
    for (q, vars) in [
        (LIST, json!({})),
        (
            SET,
            json!({ "r": "UTILITY", "i": { "url": url, "model": "m", "apiKey": ALPHA_KEY } }),
        ),
        ("mutation { clearTeamModel(role: CHAT) }", json!({})),
    ] {
        let body = s.gql(&member, q, vars).await;
        assert_eq!(error_code(&body), Some("FORBIDDEN"), "{body}");
    }

    // Bad input is refused with a code and writes nothing.
    for (input, field) in [
        (json!({ "url": "ftp://example/v1", "model": "m" }), "url"),
        (
            json!({ "url": "https://u:p@example/v1", "model": "m" }),
            "url",
        ),
        (
            json!({ "url": "https://example/v1?key=x", "model": "m" }),
            "url",
        ),
        (json!({ "url": url, "model": "" }), "model"),
        (
            json!({ "url": url, "model": "m", "priceInput": -1.0 }),
            "priceInput",
        ),
        (
            json!({ "url": url, "model": "m", "apiKey": "two words" }),
            "apiKey",
        ),
    ] {
        let body = s.gql(&admin, SET, json!({ "r": "CHAT", "i": input })).await;
        assert_eq!(error_code(&body), Some("BAD_USER_INPUT"), "{body}");
        assert!(body.to_string().contains(field), "{body}");
    }
    let list = s.gql_ok(&admin, LIST, json!({})).await;
    assert!(
        list["teamModels"]
            .as_array()
            .is_some_and(|a| a.len() == 2 && a.iter().all(|m| m["source"] == "NONE")),
        "{list}"
    );

    // An admin sets the key; no reply, audit row or stored column carries it.
    let d = s
        .gql_ok(
            &admin,
            SET,
            json!({ "r": "UTILITY", "i": { "url": url, "model": "m1", "apiKey": ALPHA_KEY } }),
        )
        .await;
    assert!(!d.to_string().contains(ALPHA_KEY), "{d}");
    // Omitting the key keeps it while the URL stays; a new URL drops it.
    let d = s
        .gql_ok(
            &admin,
            SET,
            json!({ "r": "UTILITY", "i": { "url": url, "model": "m2" } }),
        )
        .await;
    assert_eq!(d["setTeamModel"]["hasApiKey"], true, "{d}");
    let d = s
        .gql_ok(
            &admin,
            SET,
            json!({ "r": "UTILITY", "i": { "url": "http://127.0.0.1:9/v1", "model": "m2" } }),
        )
        .await;
    assert_eq!(
        d["setTeamModel"]["hasApiKey"], false,
        "a key never follows to another host: {d}"
    );
    let d = s
        .gql_ok(
            &admin,
            SET,
            json!({ "r": "UTILITY", "i": { "url": url, "model": "m3", "apiKey": ALPHA_KEY } }),
        )
        .await;
    assert_eq!(d["setTeamModel"]["hasApiKey"], true, "{d}");

    let own = s.gql_ok(&s.owner_token, LIST, json!({})).await;
    assert!(
        own.to_string().contains(&url),
        "the owner sees the setting: {own}"
    );
    assert!(!own.to_string().contains(ALPHA_KEY), "{own}");
    // Another team's admin sees only its own roles: neither the URL nor the model.
    let other = s.gql_ok(&beta_token, LIST, json!({})).await;
    for canary in [url.as_str(), "m3", ALPHA_KEY] {
        assert!(!other.to_string().contains(canary), "{canary} in {other}");
    }
    // The stored row and the audit trail hold no plain key.
    let audit = s
        .cairn()
        .store
        .audit_rows()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        audit.iter().any(|a| a.action == "team_model.set"),
        "{audit:?}"
    );
    assert!(!format!("{audit:?}").contains(ALPHA_KEY));
    let rows = s
        .cairn()
        .store
        .team_models(team_of(&s, &admin).await)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rows.len(), 1);
    let sealed = rows[0].api_key_sealed.clone().unwrap_or_default();
    assert!(
        sealed.starts_with("v1:") && !sealed.contains(ALPHA_KEY),
        "{sealed}"
    );
    s.stop().await;
}

async fn team_of(s: &TestServer, token: &str) -> i64 {
    let me = s
        .gql_ok(token, "query { me { team { id } } }", json!({}))
        .await;
    me["me"]["team"]["id"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .unwrap_or_default()
}

async fn team_corpus(s: &TestServer, token: &str) -> String {
    let d = s
        .gql_ok(token, "{ corpora { edges { node { id } } } }", json!({}))
        .await;
    d["corpora"]["edges"][0]["node"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}
