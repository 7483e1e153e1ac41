//! The client against the scripted stub server: request shape, usage and cost, every error
//! kind, and the anonymize → chat → restore round trip.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use cairn_llm::stub::{StubReply, StubServer};
use cairn_llm::{Anonymizer, ChatMessage, ChatRequest, LlmClient, LlmConfig, LlmError};
use serde_json::{json, Value};

/// Far above any timeout used here: only guards against a hang, never measures speed.
const HANG_GUARD: Duration = Duration::from_secs(20);

fn config(base_url: &str, key: Option<&str>, timeout: Duration) -> LlmConfig {
    LlmConfig {
        base_url: base_url.to_owned(),
        model: "test-model".to_owned(),
        api_key: key.map(str::to_owned),
        timeout,
        price_in_per_mtok: 1.5,
        price_out_per_mtok: 6.0,
    }
}

fn client(stub: &StubServer) -> LlmClient {
    LlmClient::new(config(&stub.base_url(), None, Duration::from_secs(10))).unwrap()
}

fn ask(text: &str) -> ChatRequest {
    ChatRequest::new(vec![ChatMessage::user(text)])
}

async fn chat(client: &LlmClient, req: ChatRequest) -> Result<cairn_llm::ChatReply, LlmError> {
    tokio::time::timeout(HANG_GUARD, client.chat(req))
        .await
        .expect("the client hung")
}

#[tokio::test]
async fn sends_the_openai_shape_with_json_mode_and_bearer_key() {
    let stub =
        StubServer::start_with_key(vec![StubReply::content(r#"{"ok": true}"#)], "sk-test").await;
    let client = LlmClient::new(config(
        &stub.base_url(),
        Some("sk-test"),
        Duration::from_secs(10),
    ))
    .unwrap();
    let reply = chat(
        &client,
        ChatRequest {
            messages: vec![
                ChatMessage::system("Answer in JSON."),
                ChatMessage::user("Who?"),
                ChatMessage::assistant("Nobody."),
                ChatMessage::user("Really?"),
            ],
            json_mode: true,
            max_tokens: Some(64),
            temperature: Some(0.25),
        },
    )
    .await
    .unwrap();
    assert_eq!(reply.content, r#"{"ok": true}"#);
    assert_eq!(
        stub.requests(),
        vec![json!({
            "model": "test-model",
            "messages": [
                {"role": "system", "content": "Answer in JSON."},
                {"role": "user", "content": "Who?"},
                {"role": "assistant", "content": "Nobody."},
                {"role": "user", "content": "Really?"}
            ],
            "temperature": 0.25,
            "max_tokens": 64,
            "response_format": {"type": "json_object"}
        })]
    );
    assert_eq!(
        stub.authorizations(),
        vec![Some("Bearer sk-test".to_owned())]
    );
    assert!(stub.shape_errors().is_empty());
}

#[tokio::test]
async fn optional_parameters_and_key_are_omitted_when_unset() {
    let stub = StubServer::start(vec![StubReply::content("hello")]).await;
    let reply = chat(&client(&stub), ask("hi")).await.unwrap();
    assert_eq!(reply.content, "hello");
    assert_eq!(
        stub.requests(),
        vec![json!({"model": "test-model", "messages": [{"role": "user", "content": "hi"}]})]
    );
    assert_eq!(stub.authorizations(), vec![None]);
}

#[tokio::test]
async fn usage_and_cost_come_from_the_reply() {
    // The stub counts words: 2 + 3 prompt words, 4 completion words.
    let stub = StubServer::start(vec![StubReply::content("one two three four")]).await;
    let req = ChatRequest::new(vec![
        ChatMessage::system("be brief"),
        ChatMessage::user("what is it?"),
    ]);
    let reply = chat(&client(&stub), req).await.unwrap();
    assert_eq!(reply.model, "test-model");
    assert_eq!(reply.input_tokens, 5);
    assert_eq!(reply.output_tokens, 4);
    let expected = (5.0 * 1.5 + 4.0 * 6.0) / 1_000_000.0;
    assert!(
        (reply.cost_usd - expected).abs() < 1e-15,
        "{}",
        reply.cost_usd
    );
}

#[tokio::test]
async fn missing_usage_counts_zero_and_the_server_model_wins() {
    let stub = StubServer::start(vec![StubReply::Garbage(
        json!({"model": "served-model", "choices": [{"message": {"role": "assistant", "content": "x"}}]})
            .to_string(),
    )])
    .await;
    let reply = chat(&client(&stub), ask("hi")).await.unwrap();
    assert_eq!(reply.content, "x");
    assert_eq!(reply.model, "served-model");
    assert_eq!((reply.input_tokens, reply.output_tokens), (0, 0));
    assert_eq!(reply.cost_usd, 0.0);
}

#[tokio::test]
async fn script_is_followed_in_order_then_repeats_the_last() {
    let stub = StubServer::start(vec![StubReply::content("a"), StubReply::content("b")]).await;
    let client = client(&stub);
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(chat(&client, ask("q")).await.unwrap().content);
    }
    assert_eq!(got, ["a", "b", "b"]);
    assert_eq!(stub.requests().len(), 3);
}

#[tokio::test]
async fn non_2xx_is_a_status_error_with_a_short_safe_excerpt() {
    let stub = StubServer::start(vec![
        StubReply::Status(500, "upstream exploded".into()),
        StubReply::Status(503, format!("overloaded {}", "x".repeat(2000))),
    ])
    .await;
    let client = client(&stub);
    let err = chat(&client, ask("q")).await.unwrap_err();
    assert_eq!(
        err,
        LlmError::Status {
            status: 500,
            message: "upstream exploded".into()
        }
    );
    assert_eq!(err.code(), "LLM_ERROR");
    match chat(&client, ask("q")).await.unwrap_err() {
        LlmError::Status { status, message } => {
            assert_eq!(status, 503);
            assert!(message.starts_with("overloaded x"));
            assert!(message.chars().count() <= 300, "{}", message.len());
        }
        other => panic!("expected a status error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_wrong_key_is_a_401_that_never_echoes_the_key() {
    let stub = StubServer::start_with_key(vec![StubReply::content("x")], "right-key").await;
    let wrong = LlmClient::new(config(
        &stub.base_url(),
        Some("wrong-key"),
        Duration::from_secs(10),
    ))
    .unwrap();
    let err = chat(&wrong, ask("q")).await.unwrap_err();
    match &err {
        LlmError::Status {
            status: 401,
            message,
        } => {
            assert!(message.contains("Incorrect API key"), "{message}")
        }
        other => panic!("expected 401, got {other:?}"),
    }
    assert!(!err.to_string().contains("wrong-key"));
    assert!(!format!("{err:?}").contains("wrong-key"));
    // Without any key: also 401.
    let err = chat(&client(&stub), ask("q")).await.unwrap_err();
    assert!(matches!(err, LlmError::Status { status: 401, .. }));
    assert_eq!(
        stub.authorizations(),
        vec![Some("Bearer wrong-key".to_owned()), None]
    );
}

#[tokio::test]
async fn an_echoed_key_is_redacted_from_error_bodies() {
    let stub = StubServer::start(vec![StubReply::Status(
        401,
        "Incorrect API key provided: sk-echoed-1234".into(),
    )])
    .await;
    let client = LlmClient::new(config(
        &stub.base_url(),
        Some("sk-echoed-1234"),
        Duration::from_secs(10),
    ))
    .unwrap();
    let err = chat(&client, ask("q")).await.unwrap_err();
    assert_eq!(
        err,
        LlmError::Status {
            status: 401,
            message: "Incorrect API key provided: <redacted>".into()
        }
    );
}

#[tokio::test]
async fn unusable_2xx_replies_are_malformed() {
    let stub = StubServer::start(vec![
        StubReply::Garbage("<html>gateway</html>".into()),
        StubReply::Garbage(r#"{"object": "chat.completion"}"#.into()),
        StubReply::Garbage(r#"{"choices": []}"#.into()),
        StubReply::Garbage(
            r#"{"choices": [{"message": {"role": "assistant", "content": null}}]}"#.into(),
        ),
        StubReply::Garbage(r#"{"choices": [{"finish_reason": "stop"}]}"#.into()),
        StubReply::Garbage(r#"{"error": {"message": "quota exceeded"}}"#.into()),
    ])
    .await;
    let client = client(&stub);
    let mut messages = Vec::new();
    for _ in 0..6 {
        let err = chat(&client, ask("q")).await.unwrap_err();
        assert_eq!(err.code(), "LLM_BAD_REPLY", "{err:?}");
        let LlmError::Malformed(message) = err else {
            unreachable!()
        };
        messages.push(message);
    }
    assert!(
        messages[0].contains("not a JSON chat completion"),
        "{}",
        messages[0]
    );
    assert!(
        messages[0].contains("<html>gateway</html>"),
        "{}",
        messages[0]
    );
    assert!(messages[1].contains("no choices"), "{}", messages[1]);
    assert!(messages[2].contains("no choices"), "{}", messages[2]);
    assert!(messages[3].contains("no text content"), "{}", messages[3]);
    assert!(messages[4].contains("no text content"), "{}", messages[4]);
    assert!(messages[5].contains("quota exceeded"), "{}", messages[5]);
}

#[tokio::test]
async fn a_slow_server_times_out_instead_of_hanging() {
    let stub = StubServer::start(vec![StubReply::delay(
        Duration::from_secs(60),
        StubReply::content("too late"),
    )])
    .await;
    let client =
        LlmClient::new(config(&stub.base_url(), None, Duration::from_millis(300))).unwrap();
    let err = chat(&client, ask("q")).await.unwrap_err();
    assert_eq!(err, LlmError::Timeout);
    assert_eq!(err.code(), "LLM_TIMEOUT");
}

#[tokio::test]
async fn a_body_that_stalls_times_out_too() {
    let stub = StubServer::start(vec![StubReply::StallBody(Duration::from_secs(60))]).await;
    let client =
        LlmClient::new(config(&stub.base_url(), None, Duration::from_millis(300))).unwrap();
    assert_eq!(
        chat(&client, ask("q")).await.unwrap_err(),
        LlmError::Timeout
    );
}

#[tokio::test]
async fn a_delay_within_the_timeout_is_fine() {
    let stub = StubServer::start(vec![StubReply::delay(
        Duration::from_millis(20),
        StubReply::content("in time"),
    )])
    .await;
    assert_eq!(
        chat(&client(&stub), ask("q")).await.unwrap().content,
        "in time"
    );
}

#[tokio::test]
async fn connection_refused_is_unreachable() {
    // A port that was just free: bind, note, close.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let client = LlmClient::new(config(
        &format!("http://user:secret@127.0.0.1:{port}/v1"),
        Some("sk-never-shown"),
        Duration::from_secs(5),
    ))
    .unwrap();
    let err = chat(&client, ask("q")).await.unwrap_err();
    let LlmError::Unreachable(message) = &err else {
        panic!("expected Unreachable, got {err:?}");
    };
    assert!(
        !message.contains("secret") && !message.contains("sk-never-shown"),
        "{message}"
    );
    assert_eq!(err.code(), "LLM_UNAVAILABLE");
}

#[tokio::test]
async fn a_wrong_base_url_path_is_a_404() {
    let stub = StubServer::start(vec![StubReply::content("x")]).await;
    let without_v1 = stub.base_url().trim_end_matches("/v1").to_owned();
    let client = LlmClient::new(config(&without_v1, None, Duration::from_secs(10))).unwrap();
    let err = chat(&client, ask("q")).await.unwrap_err();
    assert!(
        matches!(err, LlmError::Status { status: 404, .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn json_mode_without_the_word_json_is_refused_like_openai_does() {
    let stub = StubServer::start(vec![StubReply::content("{}")]).await;
    let mut req = ask("give me an object");
    req.json_mode = true;
    let err = chat(&client(&stub), req).await.unwrap_err();
    assert!(
        matches!(err, LlmError::Status { status: 400, .. }),
        "{err:?}"
    );
    assert_eq!(stub.shape_errors().len(), 1);
    assert!(stub.shape_errors()[0].contains("json"));
}

#[tokio::test]
async fn the_stub_refuses_bodies_that_are_not_openai_shaped() {
    let stub = StubServer::start(vec![StubReply::content("x")]).await;
    let http = reqwest::Client::new();
    let url = format!("{}/chat/completions", stub.base_url());
    for body in [
        "not json".to_owned(),
        json!({"model": "m", "messages": []}).to_string(),
        json!({"model": "m", "messages": [{"role": "robot", "content": "x"}]}).to_string(),
        json!({"messages": [{"role": "user", "content": "x"}]}).to_string(),
    ] {
        let response = http
            .post(&url)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400);
    }
    assert_eq!(stub.shape_errors().len(), 4);
    assert_eq!(stub.requests()[0], Value::String("not json".into()));
    // Refused requests used up no scripted reply.
    assert_eq!(chat(&client(&stub), ask("q")).await.unwrap().content, "x");
}

#[tokio::test]
async fn invalid_requests_are_refused_before_sending() {
    let stub = StubServer::start(vec![StubReply::content("x")]).await;
    let client = client(&stub);
    let err = chat(&client, ChatRequest::new(Vec::new()))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "LLM_CONFIG");
    let mut req = ask("q");
    req.temperature = Some(f32::NAN);
    assert_eq!(chat(&client, req).await.unwrap_err().code(), "LLM_CONFIG");
    assert!(stub.requests().is_empty());
}

#[tokio::test]
async fn anonymize_chat_restore_round_trip() {
    // The stub echoes every placeholder it was sent: what the model would cite.
    let stub = StubServer::start(vec![StubReply::from_fn(|req| {
        let text = req["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["content"].as_str())
            .collect::<Vec<_>>()
            .join(" ");
        let placeholders: Vec<&str> = regex::Regex::new(r"\[[A-Z]+_[0-9]+\]")
            .unwrap()
            .find_iter(&text)
            .map(|m| m.as_str())
            .collect();
        format!("Seen: {}", placeholders.join(" "))
    })])
    .await;
    let anonymizer = Anonymizer::new(vec!["Ada Lovelace".into()]).unwrap();
    let question = "What did Ada Lovelace (ada@example.org, +44 20 7946 0958) pay from \
                    GB29 NWBK 6016 1331 9268 19?";
    let (safe_question, map) = anonymizer.anonymize(question);
    let context = map.apply("Ledger: ADA LOVELACE paid 40 GBP; contact ada@example.org.");
    let reply = chat(
        &client(&stub),
        ChatRequest::new(vec![
            ChatMessage::system(format!("Context: {context}")),
            ChatMessage::user(safe_question),
        ]),
    )
    .await
    .unwrap();
    let sent = serde_json::to_string(&stub.requests()).unwrap();
    for original in map.originals() {
        assert!(!sent.contains(original), "{original} was sent");
    }
    assert_eq!(
        reply.content,
        "Seen: [NAME_1] [EMAIL_1] [NAME_1] [EMAIL_1] [PHONE_1] [IBAN_1]"
    );
    assert_eq!(
        map.restore(&reply.content),
        "Seen: Ada Lovelace ada@example.org Ada Lovelace ada@example.org +44 20 7946 0958 \
         GB29 NWBK 6016 1331 9268 19"
    );
}
