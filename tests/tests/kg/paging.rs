//! `entities(q)` paging.

use std::collections::HashMap;

use cairn_kg::normalize::name_norm;
use cairn_kg::{Entity, Extraction, Mention};
use cairn_tests::{error_code, require_model, Backend, TestServer};
use serde_json::json;

/// `entities(q)` pages in the fused order: `first: 1` to the end lists exactly what one big
/// page lists; and when the last entity of a page disappears before the next page is asked
/// for, the next page still continues where it was (it is not empty).
pub(super) async fn entities_q_paging(backend: Backend) {
    require_model();
    let s = TestServer::start(backend).await;
    let corpus = s.create_corpus(&s.owner_token, "paging").await;
    let me = s
        .gql_ok(&s.owner_token, "query { me { team { id } } }", json!({}))
        .await;
    let team: i64 = me["me"]["team"]["id"]
        .as_str()
        .unwrap_or("0")
        .parse()
        .unwrap_or(0);
    let names = [
        "Kestrel",
        "Kestrel Aero",
        "Kestrel Bio",
        "Kestrel Systems Group",
        "Old Kestrel",
        "Kestrel Marine",
    ];
    let mut doc_of: HashMap<String, String> = HashMap::new();
    for (i, name) in names.iter().enumerate() {
        let doc = s
            .ingest_text(
                &s.owner_token,
                &corpus,
                &format!("k{i}"),
                &format!("A note about {name}."),
                "TEAM",
            )
            .await;
        let x = Extraction {
            entities: vec![Entity {
                entity_type: "organization".into(),
                name: (*name).to_owned(),
                name_norm: name_norm(name),
                description: String::new(),
                mentions: vec![Mention {
                    snippet: (*name).to_owned(),
                    char_offset: 13,
                }],
            }],
            relations: Vec::new(),
        };
        let stored = s
            .cairn()
            .store
            .store_extraction(team, doc.parse().unwrap_or_default(), 1, "test", &x, &[])
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(stored.stored);
        doc_of.insert((*name).to_owned(), doc);
    }
    const PAGE: &str = "query($q: String, $f: Int, $a: String) { entities(q: $q, first: $f, after: $a) { edges { cursor node { name } } pageInfo { hasNextPage endCursor } } }";
    let page = |first: i32, after: Option<String>| {
        let s = &s;
        async move {
            let d = s
                .gql_ok(
                    &s.owner_token,
                    PAGE,
                    json!({ "q": "kestrel", "f": first, "a": after }),
                )
                .await;
            let c = &d["entities"];
            let names: Vec<String> = c["edges"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|e| e["node"]["name"].as_str().unwrap_or_default().to_owned())
                        .collect()
                })
                .unwrap_or_default();
            let next = c["pageInfo"]["hasNextPage"].as_bool().unwrap_or(false);
            let end = c["pageInfo"]["endCursor"].as_str().map(str::to_owned);
            (names, next, end)
        }
    };
    let (all, more, _) = page(50, None).await;
    assert!(!more);
    assert_eq!(all.len(), names.len(), "{all:?}");
    let mut paged = Vec::new();
    let mut after = None;
    for _ in 0..=names.len() {
        let (got, more, end) = page(1, after).await;
        assert_eq!(got.len(), 1, "{paged:?} then {got:?}");
        paged.extend(got);
        if !more {
            break;
        }
        after = end;
    }
    assert_eq!(paged, all, "first: 1 to the end lists what one page lists");

    // The last entity of a page leaves (its only document is deleted) before the next page.
    let (first_two, _, cursor) = page(2, None).await;
    assert_eq!(first_two, all[..2]);
    let gone = &first_two[1];
    let d = s
        .gql_ok(
            &s.owner_token,
            "mutation($id: ID!) { deleteDocument(id: $id) }",
            json!({ "id": doc_of[gone] }),
        )
        .await;
    assert_eq!(d["deleteDocument"], true);
    let (now_all, _, _) = page(50, None).await;
    assert!(!now_all.contains(gone), "{now_all:?}");
    let (next, _, _) = page(2, cursor).await;
    assert_eq!(next, all[2..4], "the page after a vanished cursor");
    // A malformed cursor is a bad argument.
    let r = s
        .gql(
            &s.owner_token,
            PAGE,
            json!({ "q": "kestrel", "f": 1, "a": "x:1" }),
        )
        .await;
    assert_eq!(error_code(&r), Some("BAD_USER_INPUT"), "{r}");
    s.stop().await;
}
