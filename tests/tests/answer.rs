//! `answer` end to end on both backends: through a local OpenAI-compatible stub server (it
//! checks the request shape and records every request, so the test can prove no original PII
//! string reached it), LLM failures as coded errors, and the extractive answer without an LLM.

use std::time::Duration;

use cairn_llm::stub::{StubReply, StubServer};
use cairn_tests::{both_backends, error_code, require_model, Backend, TestServer};
use serde_json::{json, Value};

both_backends!(
    llm_answer_cites_and_never_leaks_pii,
    llm_failures_are_coded_and_bounded,
    extractive_answer_without_llm,
);

const ANSWER: &str = "query($q: String!) { answer(question: $q) { answer extractive relevance citations { number chunkId documentId documentTitle version section page excerpt document { id } } usage { model inputTokens outputTokens costUsd } } }";

const ROTA: &str = "# Station rota\n\nThe glacier station rota for March lists the night shift supervisor as the person who holds the keys to the snowcat shed.\n\n## Contacts\n\nFor the shed keys, write to jonas.whitfield@example.org or call +44 20 7946 0958 during the day.";

async fn llm_answer_cites_and_never_leaks_pii(backend: Backend) {
    require_model();
    // The stub answers by echoing the placeholders it received, as a model would.
    let stub = StubServer::start(vec![StubReply::from_fn(|req: &Value| {
        let text = req.to_string();
        let mut found: Vec<String> = Vec::new();
        for kind in ["NAME", "EMAIL", "PHONE"] {
            let tag = format!("[{kind}_1]");
            if text.contains(&tag) {
                found.push(tag);
            }
        }
        format!(
            "{} holds the snowcat shed keys on the March night shift [1]; contact {} [2].",
            found.first().cloned().unwrap_or_default(),
            found.get(1).cloned().unwrap_or_default()
        )
    })])
    .await;
    let base = stub.base_url();
    let s = TestServer::start_tuned(backend, |c| {
        c.llm_url = Some(base);
        c.llm_model = "stub-model".into();
        c.llm_price_input = 1.0;
        c.llm_price_output = 2.0;
        c.pii_names = vec!["Jonas Whitfield".into()];
    })
    .await;
    let corpus = s.create_corpus(&s.owner_token, "station").await;
    let doc = s
        .ingest_text(&s.owner_token, &corpus, "Rota", ROTA, "TEAM")
        .await;
    let question =
        "Does Jonas Whitfield (jonas.whitfield@example.org) hold the snowcat shed keys in March?";
    let d = s
        .gql_ok(&s.owner_token, ANSWER, json!({ "q": question }))
        .await;
    let a = &d["answer"];
    assert_eq!(a["extractive"], false, "{a}");

    // What reached the model: the right shape, and none of the originals.
    assert!(stub.shape_errors().is_empty(), "{:?}", stub.shape_errors());
    let requests = stub.requests();
    assert_eq!(requests.len(), 1);
    let sent = requests[0].to_string();
    for original in [
        "Jonas Whitfield",
        "jonas.whitfield@example.org",
        "Whitfield",
    ] {
        assert!(
            !sent.contains(original),
            "{original:?} reached the LLM: {sent}"
        );
    }
    assert!(
        sent.contains("[NAME_1]") && sent.contains("[EMAIL_1]"),
        "{sent}"
    );
    assert_eq!(requests[0]["model"], "stub-model");
    assert_eq!(requests[0]["messages"][0]["role"], "system");
    assert!(
        sent.contains("snowcat shed"),
        "the sources go along with the question: {sent}"
    );

    // What came back: de-anonymized, with numbered citations to real chunks.
    let text = a["answer"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("Jonas Whitfield holds the snowcat shed keys")
            && text.contains("jonas.whitfield@example.org"),
        "{text}"
    );
    let cites = a["citations"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        cites
            .iter()
            .map(|c| c["number"].clone())
            .collect::<Vec<_>>(),
        vec![json!(1), json!(2)],
        "{a}"
    );
    for c in &cites {
        assert_eq!(c["documentId"], json!(doc));
        assert_eq!(c["document"]["id"], json!(doc));
        assert_eq!(c["version"], 1);
        assert!(!c["excerpt"].as_str().unwrap_or_default().is_empty());
    }
    // Usage and cost: the stub counts words; prices are $1 / $2 per million tokens.
    let u = &a["usage"];
    let (input, output) = (
        u["inputTokens"].as_i64().unwrap_or(0),
        u["outputTokens"].as_i64().unwrap_or(0),
    );
    assert!(input > 0 && output > 0, "{u}");
    let cost = u["costUsd"].as_f64().unwrap_or(-1.0);
    assert!(
        (cost - (input as f64 * 1e-6 + output as f64 * 2e-6)).abs() < 1e-12,
        "{u}"
    );
    let me = s
        .gql_ok(&s.owner_token, "query { me { team { id } } }", json!({}))
        .await;
    let team: i64 = me["me"]["team"]["id"]
        .as_str()
        .unwrap_or("0")
        .parse()
        .unwrap_or(0);
    let rows = s
        .cairn()
        .store
        .team_usage(team, "llm")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].input_tokens, input);
    assert_eq!(rows[0].output_tokens, output);
    assert!((rows[0].cost_usd - cost).abs() < 1e-12);
    s.stop().await;
}

/// Each LLM failure has its code. The timeout is proven by the outcome, not by a clock: the
/// third reply is a valid completion ("too late") sent after 30 s, so with a working 1 s
/// timeout the request fails with LLM_TIMEOUT, and with a broken one it succeeds (no error
/// code, an answer) and the assertions below fail. Nothing else can produce LLM_TIMEOUT.
async fn llm_failures_are_coded_and_bounded(backend: Backend) {
    require_model();
    let stub = StubServer::start(vec![
        StubReply::Status(500, "{\"error\":{\"message\":\"model overloaded\"}}".into()),
        StubReply::Garbage("<html>bad gateway</html>".into()),
        StubReply::delay(Duration::from_secs(30), StubReply::content("too late")),
    ])
    .await;
    let base = stub.base_url();
    let s = TestServer::start_tuned(backend, |c| {
        c.llm_url = Some(base);
        c.llm_timeout_secs = 1;
    })
    .await;
    let corpus = s.create_corpus(&s.owner_token, "station").await;
    s.ingest_text(&s.owner_token, &corpus, "Rota", ROTA, "TEAM")
        .await;
    for want in ["LLM_ERROR", "LLM_BAD_REPLY", "LLM_TIMEOUT"] {
        let body = s
            .gql(
                &s.owner_token,
                ANSWER,
                json!({ "q": "who holds the shed keys?" }),
            )
            .await;
        assert_eq!(error_code(&body), Some(want), "{body}");
        assert!(
            body["data"].is_null() || body["data"]["answer"].is_null(),
            "no answer on a failed LLM call: {body}"
        );
        assert!(!body.to_string().contains("too late"), "{body}");
        assert!(
            !body.to_string().contains("127.0.0.1"),
            "no internals: {body}"
        );
    }
    // An unreachable endpoint too.
    drop(stub);
    let body = s
        .gql(
            &s.owner_token,
            ANSWER,
            json!({ "q": "who holds the shed keys?" }),
        )
        .await;
    assert_eq!(error_code(&body), Some("LLM_UNAVAILABLE"), "{body}");
    s.stop().await;
}

async fn extractive_answer_without_llm(backend: Backend) {
    require_model();
    let s = TestServer::start(backend).await;
    let corpus = s.create_corpus(&s.owner_token, "station").await;
    s.ingest_text(&s.owner_token, &corpus, "Rota", ROTA, "TEAM")
        .await;
    s.ingest_text(
        &s.owner_token,
        &corpus,
        "Bread",
        "# Sourdough\n\nSourdough bread is leavened by wild yeast. The starter is fed with flour and water every day.",
        "TEAM",
    )
    .await;
    let d = s
        .gql_ok(
            &s.owner_token,
            ANSWER,
            json!({ "q": "Who holds the keys to the snowcat shed?" }),
        )
        .await;
    let a = &d["answer"];
    assert_eq!(a["extractive"], true);
    assert_eq!(a["usage"], Value::Null);
    let text = a["answer"].as_str().unwrap_or_default();
    assert!(text.starts_with("Extractive answer"), "{text}");
    let cites = a["citations"].as_array().cloned().unwrap_or_default();
    assert!(!cites.is_empty() && cites.len() <= 3, "{a}");
    // The best sentence is the one that answers, quoted verbatim from its chunk.
    let first = cites[0]["excerpt"].as_str().unwrap_or_default();
    assert!(first.contains("keys to the snowcat shed"), "{a}");
    assert!(text.contains(&format!("{first} [1]")), "{text}");
    let chunks = s
        .gql_ok(
            &s.owner_token,
            "query($d: ID!) { document(id: $d) { chunks { content } } }",
            json!({ "d": cites[0]["documentId"] }),
        )
        .await;
    assert!(
        chunks.to_string().contains(first),
        "the excerpt is verbatim from the document"
    );
    s.stop().await;
}
