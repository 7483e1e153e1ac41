//! `extract` end to end with the scripted backend: every refusal rule, the single retry, the
//! 12k cap, backend errors.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use cairn_kg::{extract, ExtractError, ExtractorError, Refusal, Scripted, MAX_CHARS};
use serde_json::json;

const DOC: &str = "Acme Robotics is based in Berlin. Jane Doe works at Acme Robotics.";

fn good() -> String {
    json!({
        "entities": [
            {"type": "organization", "name": "Acme Robotics", "description": "robot maker",
             "snippet": "Acme Robotics is based in Berlin."},
            {"type": "place", "name": "Berlin", "description": "", "snippet": "Berlin"},
            {"type": "person", "name": "Jane Doe", "description": "",
             "snippet": "Jane Doe works at Acme Robotics."}
        ],
        "relations": [
            {"subject": "Acme Robotics", "predicate": "located_in", "object": "Berlin",
             "snippet": "Acme Robotics is based in Berlin."},
            {"subject": "Jane Doe", "predicate": "works at", "object": "ACME Robotics Inc.",
             "snippet": "Jane Doe works at Acme Robotics."}
        ]
    })
    .to_string()
}

/// One bad reply per rule, with the code it must be refused with.
fn bad_replies() -> Vec<(&'static str, String)> {
    let mut v = Vec::new();
    v.push((
        "NOT_JSON",
        "Here you go: entities are Acme and Berlin.".to_string(),
    ));
    v.push((
        "BAD_SHAPE",
        json!({"entities": [{"name": "Acme"}], "relations": []}).to_string(),
    ));
    let mut x: serde_json::Value = serde_json::from_str(&good()).unwrap();
    x["entities"][0]["snippet"] = json!("Acme Robotics is located in Berlin.");
    v.push(("SNIPPET_NOT_VERBATIM", x.to_string()));
    let mut x: serde_json::Value = serde_json::from_str(&good()).unwrap();
    x["entities"][1]["name"] = json!("  ");
    v.push(("EMPTY_NAME", x.to_string()));
    let mut x: serde_json::Value = serde_json::from_str(&good()).unwrap();
    x["relations"][0]["object"] = json!("Munich");
    v.push(("UNKNOWN_RELATION_ENTITY", x.to_string()));
    let mut x: serde_json::Value = serde_json::from_str(&good()).unwrap();
    x["relations"][1]["predicate"] = json!("???");
    v.push(("BAD_PREDICATE", x.to_string()));
    v
}

#[tokio::test]
async fn accepted_first_time() {
    let s = Scripted::new([good()]);
    let out = extract(&s, DOC).await.unwrap();
    assert_eq!(out.attempts, 1);
    assert!(out.refusals.is_empty());
    assert_eq!(out.extraction.entities.len(), 3);
    assert_eq!(out.extraction.relations.len(), 2);
    assert_eq!(out.extraction.relations[1].predicate, "works_at");
    assert_eq!(out.extraction.relations[1].object, 0);
    assert!(!out.truncated);
    assert_eq!(out.chars, DOC.chars().count());
    assert!(out.usage.input_tokens > 0 && out.usage.output_tokens > 0);
    assert_eq!(s.asked(), vec![(DOC.to_string(), 1)]);
}

#[tokio::test]
async fn each_rule_refuses_and_the_retry_recovers() {
    for (code, bad) in bad_replies() {
        let s = Scripted::new([bad, good()]);
        let out = extract(&s, DOC).await.unwrap();
        assert_eq!(out.attempts, 2, "{code}");
        assert_eq!(out.refusals.len(), 1);
        assert_eq!(out.refusals[0].code(), code);
        assert_eq!(out.extraction.entities.len(), 3);
        let asked = s.asked();
        assert_eq!(asked.len(), 2);
        assert_eq!((asked[0].1, asked[1].1), (1, 2));
        // Usage adds up over both attempts.
        assert!(out.usage.input_tokens >= 2 * (DOC.len() as u64 / 4));
    }
}

#[tokio::test]
async fn two_refusals_give_refused_with_both_reasons() {
    let bad = bad_replies();
    let s = Scripted::new([bad[2].1.clone(), bad[4].1.clone(), good()]);
    match extract(&s, DOC).await {
        Err(ExtractError::Refused {
            first,
            second,
            usage,
        }) => {
            assert_eq!(first.code(), "SNIPPET_NOT_VERBATIM");
            assert_eq!(
                second,
                Refusal::UnknownRelationEntity {
                    name: "Munich".into()
                }
            );
            assert!(usage.output_tokens > 0);
        }
        other => panic!("expected Refused, got {other:?}"),
    }
    // Only one retry: the third reply is never asked for.
    assert_eq!(s.remaining(), 1);
    assert_eq!(s.asked().len(), 2);
}

#[tokio::test]
async fn backend_errors_are_not_retried() {
    let s = Scripted::default();
    s.push_error(ExtractorError::Transient("timeout".into()));
    s.push(good());
    match extract(&s, DOC).await {
        Err(ExtractError::Backend(e)) => assert!(e.is_transient()),
        other => panic!("expected Backend, got {other:?}"),
    }
    assert_eq!(s.remaining(), 1);
    // A refusal followed by a backend error reports the backend error.
    let s = Scripted::new(["nope"]);
    assert!(matches!(
        extract(&s, DOC).await,
        Err(ExtractError::Backend(ExtractorError::Permanent(_)))
    ));
}

#[tokio::test]
async fn blank_documents_are_not_sent() {
    let s = Scripted::default();
    let out = extract(&s, "  \n\t ").await.unwrap();
    assert_eq!(out.attempts, 0);
    assert!(out.extraction.entities.is_empty());
    assert!(s.asked().is_empty());
}

#[tokio::test]
async fn text_is_capped_and_validated_against_the_capped_text() {
    // A long document: the fact at the start is kept, a sentence after the cap is cut away.
    let filler = "The quick brown fox jumps over the lazy dog. ".repeat(400);
    let tail = "Globex Media is a customer of Acme Robotics.";
    let text = format!("{DOC}\n\n{filler}\n\n{tail}");
    assert!(text.chars().count() > MAX_CHARS);

    let tail_reply = json!({
        "entities": [{"type": "organization", "name": "Globex Media", "description": "",
                      "snippet": tail}],
        "relations": []
    })
    .to_string();
    let s = Scripted::new([tail_reply.clone(), tail_reply, good()]);
    // The tail is beyond the cap: its snippet is not in the text given, so both are refused.
    match extract(&s, &text).await {
        Err(ExtractError::Refused { first, .. }) => {
            assert_eq!(first.code(), "SNIPPET_NOT_VERBATIM")
        }
        other => panic!("expected Refused, got {other:?}"),
    }
    let asked = s.texts();
    assert!(asked[0].chars().count() <= MAX_CHARS);
    assert!(text.starts_with(&asked[0]));
    // Cut at a sentence end, not mid-word.
    assert!(
        asked[0].ends_with('.'),
        "{:?}",
        &asked[0][asked[0].len() - 20..]
    );

    let s = Scripted::new([good()]);
    let out = extract(&s, &text).await.unwrap();
    assert!(out.truncated);
    assert_eq!(out.chars, s.texts()[0].chars().count());
    assert_eq!(out.extraction.entities[0].mentions[0].char_offset, 0);
}

#[tokio::test]
async fn scripted_records_texts_and_runs_dry() {
    let s = Scripted::new([good()]);
    extract(&s, DOC).await.unwrap();
    assert_eq!(s.texts(), vec![DOC.to_string()]);
    assert!(matches!(
        extract(&s, DOC).await,
        Err(ExtractError::Backend(ExtractorError::Permanent(_)))
    ));
}
