//! The knowledge graph end to end on SQLite and PostgreSQL: the seed's mention-rule cases,
//! supersession and delete, a randomized property test of the mention rule (≥ 10,000 checks
//! per backend), the SQL statement count of a nested `entities` query, the extraction job
//! (rules extractor, progress, cancellation, the `llm` backend against the stub), the per-team
//! quota and concurrency cap, `entities(q)` paging, and (ignored) the precision harness.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use cairn::auth::Principal;
use cairn::domain::{Role, Visibility};
use cairn::store::documents::{BlobRef, StoreIngest, Target};
use cairn::store::Store;
use cairn_kg::normalize::name_norm;
use cairn_kg::{Entity, Extraction, Mention, Relation};
use cairn_llm::stub::{StubReply, StubServer};
use cairn_tests::{both_backends, error_code, require_model, stages, Backend, TestServer};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

both_backends!(
    seed_cases_mention_rule,
    supersession_and_delete,
    mention_rule_property,
    statement_count_does_not_grow,
    extraction_job_progress_and_cancel,
    llm_backend_against_stub,
    auto_extract_after_ingest,
    local_backend_end_to_end,
    extraction_quota,
    team_concurrency_is_shared_across_runs,
    entities_q_paging,
);

const ENTITY_FIELDS: &str = "id name type description mentions { document { id title } version snippet offset } relations { id predicate subject { id name } object { id name } mentions { document { id } version snippet offset } }";

async fn extract(s: &TestServer, token: &str, vars: Value) -> Vec<Value> {
    let d = s
        .gql_ok(
            token,
            "mutation($c: ID, $d: [ID!]) { extractKnowledge(corpusId: $c, documentIds: $d) { id state } }",
            vars,
        )
        .await;
    let job = d["extractKnowledge"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let events = s.follow_job(token, &job).await;
    assert_eq!(
        events.last().map(|e| e["state"].clone()),
        Some(json!("SUCCEEDED")),
        "{events:?}"
    );
    // The knowledge-extraction kind ends in its own stage (ingest ends `searchable`).
    assert_eq!(
        events.last().map(|e| e["stage"].clone()),
        Some(json!("extracted")),
        "{events:?}"
    );
    events
}

async fn entities(s: &TestServer, token: &str) -> Vec<Value> {
    let q =
        format!("query {{ entities(first: 100) {{ edges {{ node {{ {ENTITY_FIELDS} }} }} }} }}");
    let d = s.gql_ok(token, &q, json!({})).await;
    d["entities"]["edges"]
        .as_array()
        .map(|a| a.iter().map(|e| e["node"].clone()).collect())
        .unwrap_or_default()
}

fn by_name<'a>(list: &'a [Value], name: &str) -> Option<&'a Value> {
    list.iter().find(|e| e["name"] == name)
}

fn mention_docs(e: &Value) -> BTreeSet<String> {
    e["mentions"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|m| m["document"]["id"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn predicates(e: &Value) -> BTreeSet<String> {
    e["relations"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|r| r["predicate"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

const MEMO: &str = "Board memo.\n\nAcme Robotics acquired Globex Media in March. The deal stays confidential until the announcement.";
const NEWS: &str = "Team news.\n\nAcme Robotics is based in Berlin. The Acme Robotics team ships warehouse robots.";

/// Seed 001: a fact stated in a private and a team document is visible to the team without
/// the private snippet; a relation stated only in a private memo is absent for a colleague and
/// present for its owner; `entity(id)` is null for no readable mention and for a missing id.
async fn seed_cases_mention_rule(backend: Backend) {
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
async fn supersession_and_delete(backend: Backend) {
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

async fn count(store: &Store, sql: &str) -> i64 {
    use sea_orm::ConnectionTrait;
    let row = store
        .connection()
        .query_one_raw(sea_orm::Statement::from_string(
            store.backend(),
            sql.to_owned(),
        ))
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("no row"));
    row.try_get_by_index::<i64>(0)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// (entities without a mention, relations without a mention, mentions of a non-current version)
async fn orphan_counts(store: &Store) -> (i64, i64, i64) {
    (
        count(store, "SELECT COUNT(*) FROM kg_entities e WHERE NOT EXISTS (SELECT 1 FROM kg_mentions m WHERE m.entity_id = e.id)").await,
        count(store, "SELECT COUNT(*) FROM kg_relations r WHERE NOT EXISTS (SELECT 1 FROM kg_mentions m WHERE m.relation_id = r.id)").await,
        count(store, "SELECT COUNT(*) FROM kg_mentions m JOIN documents d ON d.id = m.document_id WHERE m.version <> d.current_version").await,
    )
}

// ---- the property test ----------------------------------------------------------------------

const NAMES: [(&str, &str); 10] = [
    ("organization", "Acme Robotics"),
    ("organization", "Globex Media"),
    ("organization", "Initech"),
    ("person", "Jane Doe"),
    ("person", "John Roe"),
    ("place", "Berlin"),
    ("place", "Lisbon"),
    ("product", "Hyperlift"),
    ("concept", "Sensor Fusion"),
    // Same normalized name as Acme Robotics, another type: never merged across types.
    ("product", "Acme Robotics"),
];
const PREDICATES: [&str; 3] = ["acquired", "located_in", "works_at"];

type EKey = (i64, &'static str, String);
type RKey = (EKey, &'static str, EKey);

#[derive(Clone, Debug)]
struct ModelDoc {
    team: i64,
    owner: i64,
    visibility: Visibility,
    version: i32,
    /// entity key → snippets; relation key → snippets (of the current version)
    entities: BTreeMap<EKey, Vec<String>>,
    relations: BTreeMap<RKey, Vec<String>>,
    /// entity key → what this version says it is (empty: nothing)
    descriptions: BTreeMap<EKey, String>,
}

fn readable(p: &Principal, d: &ModelDoc) -> bool {
    d.team == p.team_id && (d.visibility == Visibility::Team || d.owner == p.user_id)
}

fn synthetic(rng: &mut StdRng, team: i64, doc: i64, version: i32) -> (Extraction, ModelDoc) {
    let mut picked: Vec<usize> = (0..NAMES.len()).filter(|_| rng.random_bool(0.3)).collect();
    if picked.is_empty() {
        picked.push(rng.random_range(0..NAMES.len()));
    }
    let mut x = Extraction::default();
    let mut m = ModelDoc {
        team,
        owner: 0,
        visibility: Visibility::Team,
        version,
        entities: BTreeMap::new(),
        relations: BTreeMap::new(),
        descriptions: BTreeMap::new(),
    };
    let mut keys = Vec::new();
    for (i, &n) in picked.iter().enumerate() {
        let (t, name) = NAMES[n];
        let snippets: Vec<String> = (0..rng.random_range(1..=2))
            .map(|k| format!("d{doc} v{version} {name} #{k}"))
            .collect();
        let key: EKey = (team, t, name_norm(name));
        // Each document version says something of its own (or nothing) about the entity.
        let description = match rng.random_range(0..4) {
            0 => String::new(),
            k => format!("said by d{doc} v{version} {}", "x".repeat(k)),
        };
        m.descriptions.insert(key.clone(), description.clone());
        x.entities.push(Entity {
            entity_type: t.to_owned(),
            name: name.to_owned(),
            name_norm: name_norm(name),
            description,
            mentions: snippets
                .iter()
                .map(|s| Mention {
                    snippet: s.clone(),
                    char_offset: i * 10,
                })
                .collect(),
        });
        m.entities.insert(key.clone(), snippets);
        keys.push((t, key));
    }
    for k in 0..rng.random_range(0..=3usize) {
        if keys.len() < 2 {
            break;
        }
        let a = rng.random_range(0..keys.len());
        let b = rng.random_range(0..keys.len());
        if a == b {
            continue;
        }
        let pred = PREDICATES[rng.random_range(0..PREDICATES.len())];
        let rkey: RKey = (keys[a].1.clone(), pred, keys[b].1.clone());
        if m.relations.contains_key(&rkey) {
            continue;
        }
        let snippet = format!("d{doc} v{version} rel {k}");
        x.relations.push(Relation {
            subject: a,
            predicate: pred.to_owned(),
            object: b,
            mentions: vec![Mention {
                snippet: snippet.clone(),
                char_offset: 0,
            }],
        });
        m.relations.insert(rkey, vec![snippet]);
    }
    (x, m)
}

fn blob(rng: &mut StdRng) -> BlobRef {
    let hash: String = (0..64)
        .map(|_| char::from_digit(rng.random_range(0..16), 16).unwrap_or('0'))
        .collect();
    BlobRef {
        storage_uri: format!("blobs/{}/{hash}.txt", &hash[..2]),
        content_hash: hash,
        mime_type: "text/plain".into(),
        size: 1,
    }
}

struct Checker {
    checks: u64,
}

impl Checker {
    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        self.checks += 1;
        assert!(ok, "{}", what());
    }
}

/// Random teams, users, documents, visibilities, versions and deletions, written with the
/// store's own `store_extraction` (synthetic extractions; the extractor is tested elsewhere).
/// After each step, for every principal: `entities`, `entity`, the relation and mention
/// loaders, `neighbourhood`, `kgQuery` and `searchAll`'s entity kind return exactly what the
/// readable documents state, and cite nothing else.
async fn mention_rule_property(backend: Backend) {
    let s = TestServer::start_tuned(backend, |c| c.workers = 0).await;
    let cairn = s.cairn().clone();
    let store = cairn.store.clone();
    let seed: u64 = std::env::var("CAIRN_KG_PROP_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x6b67_2026);
    let mut rng = StdRng::seed_from_u64(seed);

    // Two teams, three members each, one corpus each.
    let mut principals: Vec<Principal> = Vec::new();
    let mut corpora: HashMap<i64, i64> = HashMap::new();
    for t in 0..2 {
        let team = store
            .create_team(&format!("prop-team-{t}"))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let corpus = store
            .create_corpus(Some(team.id), "prop", None)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        corpora.insert(team.id, corpus.id);
        for u in 0..3 {
            let user = store
                .create_user(team.id, &format!("u{t}{u}"), Role::Member)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            principals.push(Principal {
                user_id: user.id,
                team_id: team.id,
                name: user.name,
                role: Role::Member,
                token_id: 0,
            });
        }
    }

    let mut docs: BTreeMap<i64, ModelDoc> = BTreeMap::new();
    let mut known_entities: BTreeMap<i64, EKey> = BTreeMap::new();
    let mut c = Checker { checks: 0 };
    let mut step = 0;
    while (c.checks < 12_000 || step < 80) && step < 400 {
        step += 1;
        let op = rng.random_range(0..10);
        if docs.is_empty() || op < 4 {
            // A new document.
            let owner = principals[rng.random_range(0..principals.len())].clone();
            let visibility = if rng.random_bool(0.5) {
                Visibility::Team
            } else {
                Visibility::Private
            };
            let (doc, _) = store
                .store_ingest(StoreIngest {
                    target: Target::New {
                        team_id: owner.team_id,
                        corpus_id: corpora[&owner.team_id],
                        owner_id: owner.user_id,
                        visibility,
                        title: format!("doc {step}"),
                        source_url: None,
                    },
                    blob: blob(&mut rng),
                    filename: None,
                    extracted_chars: 0,
                    chunks: Vec::new(),
                })
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let (x, mut m) = synthetic(&mut rng, owner.team_id, doc.id, 1);
            m.owner = owner.user_id;
            m.visibility = visibility;
            let r = store
                .store_extraction(owner.team_id, doc.id, 1, "synthetic", &x, &[])
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(r.stored);
            docs.insert(doc.id, m);
        } else {
            let ids: Vec<i64> = docs.keys().copied().collect();
            let id = ids[rng.random_range(0..ids.len())];
            match op {
                4..=6 => {
                    // A new version: its old mentions and descriptions go with the version's
                    // own transaction; it is extracted right after.
                    let d = docs[&id].clone();
                    store
                        .store_ingest(StoreIngest {
                            target: Target::NewVersion { document_id: id },
                            blob: blob(&mut rng),
                            filename: None,
                            extracted_chars: 0,
                            chunks: Vec::new(),
                        })
                        .await
                        .unwrap_or_else(|e| panic!("{e}"));
                    let v = d.version + 1;
                    // Extracting the old version now is refused as stale.
                    let stale = store
                        .store_extraction(
                            d.team,
                            id,
                            d.version,
                            "synthetic",
                            &Extraction::default(),
                            &[],
                        )
                        .await
                        .unwrap_or_else(|e| panic!("{e}"));
                    c.check(!stale.stored, || "a stale version was stored".into());
                    let (x, mut m) = synthetic(&mut rng, d.team, id, v);
                    m.owner = d.owner;
                    m.visibility = d.visibility;
                    store
                        .store_extraction(d.team, id, v, "synthetic", &x, &[])
                        .await
                        .unwrap_or_else(|e| panic!("{e}"));
                    docs.insert(id, m);
                }
                7 => {
                    store
                        .delete_document(id)
                        .await
                        .unwrap_or_else(|e| panic!("{e}"));
                    docs.remove(&id);
                }
                _ => {
                    let d = docs.get_mut(&id).unwrap_or_else(|| panic!("doc"));
                    d.visibility = if d.visibility == Visibility::Team {
                        Visibility::Private
                    } else {
                        Visibility::Team
                    };
                    store
                        .set_visibility(id, d.visibility)
                        .await
                        .unwrap_or_else(|e| panic!("{e}"));
                }
            }
        }
        check_all(
            &cairn,
            &principals,
            &docs,
            &mut known_entities,
            &mut c,
            &mut rng,
        )
        .await;
    }
    let (e, r, m) = orphan_counts(&store).await;
    c.check(e == 0 && r == 0 && m == 0, || {
        format!("orphans {e} {r} {m}")
    });
    eprintln!(
        "mention-rule property ({backend:?}, seed {seed}): {} checks over {step} steps",
        c.checks
    );
    assert!(c.checks >= 10_000, "only {} checks", c.checks);
    s.stop().await;
}

async fn check_all(
    cairn: &cairn::service::Cairn,
    principals: &[Principal],
    docs: &BTreeMap<i64, ModelDoc>,
    known: &mut BTreeMap<i64, EKey>,
    c: &mut Checker,
    rng: &mut StdRng,
) {
    for p in principals {
        // Expected, from the model.
        let mut want_e: BTreeMap<EKey, BTreeSet<(i64, i32, String)>> = BTreeMap::new();
        let mut want_r: BTreeMap<RKey, BTreeSet<(i64, i32, String)>> = BTreeMap::new();
        for (&id, d) in docs {
            if !readable(p, d) {
                continue;
            }
            for (k, snips) in &d.entities {
                let set = want_e.entry(k.clone()).or_default();
                set.extend(snips.iter().map(|s| (id, d.version, s.clone())));
            }
            for (k, snips) in &d.relations {
                let set = want_r.entry(k.clone()).or_default();
                set.extend(snips.iter().map(|s| (id, d.version, s.clone())));
            }
        }
        let readable_docs: BTreeSet<(i64, i32)> = docs
            .iter()
            .filter(|(_, d)| readable(p, d))
            .map(|(&id, d)| (id, d.version))
            .collect();

        // entities (all pages of 7).
        let mut got = Vec::new();
        let mut after = None;
        loop {
            let mut page = cairn
                .entities(p, None, None, after, 7)
                .await
                .unwrap_or_else(|e| panic!("{e}"))
                .rows;
            let more = page.len() > 7;
            page.truncate(7);
            after = page.last().map(|e| cairn::service::kg::EntityCursor {
                id: e.id,
                position: None,
            });
            got.extend(page);
            if !more {
                break;
            }
        }
        let key_of = |e: &cairn::store::kg::KgEntity| -> EKey {
            let t = NAMES
                .iter()
                .map(|(t, _)| *t)
                .find(|t| *t == e.entity_type)
                .unwrap_or("?");
            (e.team_id, t, e.name_norm.clone())
        };
        let got_keys: BTreeSet<EKey> = got.iter().map(key_of).collect();
        for e in &got {
            known.insert(e.id, key_of(e));
            c.check(want_e.contains_key(&key_of(e)), || {
                format!("{p:?} sees entity {e:?} without a readable mention")
            });
        }
        for k in want_e.keys() {
            c.check(got_keys.contains(k), || {
                format!("{p:?} misses entity {k:?}")
            });
        }
        // Descriptions: the longest among the readable documents' (none: null), never one of
        // a document `p` cannot read.
        for e in &got {
            let k = key_of(e);
            let said: Vec<&String> = docs
                .values()
                .filter(|d| readable(p, d))
                .filter_map(|d| d.descriptions.get(&k))
                .filter(|d| !d.is_empty())
                .collect();
            let longest = said.iter().map(|d| d.chars().count()).max();
            let ok = match (&e.description, longest) {
                (None, None) => true,
                (Some(got), Some(n)) => said.contains(&got) && got.chars().count() == n,
                _ => false,
            };
            c.check(ok, || {
                format!(
                    "{p:?} sees description {:?} of {k:?}; readable ones: {said:?}",
                    e.description
                )
            });
        }
        let ids: Vec<i64> = got.iter().map(|e| e.id).collect();
        let id_key: HashMap<i64, EKey> = got.iter().map(|e| (e.id, key_of(e))).collect();

        // Mentions of entities.
        let ms = cairn
            .entity_mentions(p, &ids)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let mut got_m: BTreeMap<EKey, BTreeSet<(i64, i32, String)>> = BTreeMap::new();
        for m in &ms {
            c.check(readable_docs.contains(&(m.document_id, m.version)), || {
                format!("{p:?} got an unreadable or stale mention {m:?}")
            });
            if let Some(k) = m.entity_id.and_then(|e| id_key.get(&e)) {
                got_m.entry(k.clone()).or_default().insert((
                    m.document_id,
                    m.version,
                    m.snippet.clone(),
                ));
            }
        }
        for (k, want) in &want_e {
            c.check(got_m.get(k) == Some(want), || {
                format!(
                    "{p:?} mentions of {k:?}: got {:?}, want {want:?}",
                    got_m.get(k)
                )
            });
        }

        // Relations and their mentions.
        let rels = cairn
            .entity_relations(p, &ids)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let mut rel_key: HashMap<i64, RKey> = HashMap::new();
        for r in &rels {
            let (Some(s), Some(o)) = (id_key.get(&r.subject_id), id_key.get(&r.object_id)) else {
                c.check(false, || {
                    format!("{p:?}: relation {r:?} to an invisible entity")
                });
                continue;
            };
            let pred = PREDICATES
                .iter()
                .copied()
                .find(|x| *x == r.predicate)
                .unwrap_or("?");
            let k: RKey = (s.clone(), pred, o.clone());
            c.check(want_r.contains_key(&k), || {
                format!("{p:?} sees relation {k:?} without a readable mention")
            });
            rel_key.insert(r.id, k);
        }
        let got_r: BTreeSet<&RKey> = rel_key.values().collect();
        for k in want_r.keys() {
            c.check(got_r.contains(k), || format!("{p:?} misses relation {k:?}"));
        }
        let rel_ids: Vec<i64> = rel_key.keys().copied().collect();
        let rms = cairn
            .relation_mentions(p, &rel_ids)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let mut got_rm: BTreeMap<RKey, BTreeSet<(i64, i32, String)>> = BTreeMap::new();
        for m in &rms {
            c.check(readable_docs.contains(&(m.document_id, m.version)), || {
                format!("{p:?} got an unreadable relation mention {m:?}")
            });
            if let Some(k) = m.relation_id.and_then(|r| rel_key.get(&r)) {
                got_rm.entry(k.clone()).or_default().insert((
                    m.document_id,
                    m.version,
                    m.snippet.clone(),
                ));
            }
        }
        for (k, want) in &want_r {
            c.check(got_rm.get(k) == Some(want), || {
                format!(
                    "{p:?} relation mentions of {k:?}: {:?} vs {want:?}",
                    got_rm.get(k)
                )
            });
        }

        // entity(id) for every id ever seen: visible iff expected.
        for (&id, k) in known.iter() {
            let e = cairn.entity(p, id).await.unwrap_or_else(|e| panic!("{e}"));
            let visible = id_key.contains_key(&id);
            c.check(e.is_some() == visible, || {
                format!("{p:?} entity({id}) {k:?}: got {e:?}, visible {visible}")
            });
        }

        // neighbourhood, kgQuery and searchAll's entity kind for one random name.
        let (_, name) = NAMES[rng.random_range(0..NAMES.len())];
        let hits = cairn
            .entity_hits(p, name, 20)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        for h in &hits {
            c.check(id_key.contains_key(&h.id), || {
                format!("{p:?} searchAll hit {h:?} is not visible")
            });
        }
        let expected_hit = want_e.keys().any(|(_, _, n)| *n == name_norm(name));
        c.check(
            hits.iter().any(|h| name_norm(&h.name) == name_norm(name)) == expected_hit,
            || format!("{p:?} searchAll for {name}: {hits:?}"),
        );
        match cairn.neighbourhood(p, None, Some(name), 2).await {
            Ok(g) => {
                c.check(expected_hit, || {
                    format!("{p:?} neighbourhood of invisible {name}")
                });
                for n in &g.nodes {
                    c.check(id_key.contains_key(&n.id), || {
                        format!("{p:?} neighbourhood node {n:?} not visible")
                    });
                }
                for r in &g.edges {
                    c.check(rel_key.contains_key(&r.id), || {
                        format!("{p:?} neighbourhood edge {r:?} not visible")
                    });
                }
                let text = cairn
                    .kg_query(p, None, Some(name), 2)
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
                for line in text.lines() {
                    c.check(line.ends_with(']'), || format!("uncited line {line:?}"));
                    for cite in line.split("[doc ").skip(1) {
                        let mut it = cite.split([' ', ':']);
                        let doc: i64 = it.next().and_then(|d| d.parse().ok()).unwrap_or(-1);
                        let v: i32 = it
                            .next()
                            .and_then(|v| v.trim_start_matches('v').parse().ok())
                            .unwrap_or(-1);
                        c.check(readable_docs.contains(&(doc, v)), || {
                            format!("{p:?} kgQuery cites doc {doc} v{v}: {line:?}")
                        });
                    }
                }
            }
            Err(e) => {
                c.check(!expected_hit, || {
                    format!("{p:?} neighbourhood of {name}: {e}")
                });
            }
        }
    }
}

// ---- statement count ------------------------------------------------------------------------

/// `entities(first: 50) { relations { mentions } mentions }` costs the same number of SQL
/// statements for 6 entities as for 50. Counted with `Store::statement_count` (sea-orm's
/// metric callback, set on the pool when the store opens, fires once per statement).
async fn statement_count_does_not_grow(backend: Backend) {
    let s = TestServer::start_tuned(backend, |c| c.workers = 0).await;
    let store = s.cairn().store.clone();
    let team = s
        .gql_ok(&s.owner_token, "query { me { team { id } } }", json!({}))
        .await;
    let team_id: i64 = team["me"]["team"]["id"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("{team}"));
    let owner = s
        .gql_ok(&s.owner_token, "query { me { user { id } } }", json!({}))
        .await;
    let owner_id: i64 = owner["me"]["user"]["id"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("{owner}"));
    let corpus = store
        .create_corpus(Some(team_id), "count", None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut rng = StdRng::seed_from_u64(5);
    let q = "query { entities(first: 50) { edges { node { id relations { id mentions { snippet document { id } } } mentions { snippet document { id title } } } } } }";
    let mut made = 0usize;
    let mut counts = Vec::new();
    for target in [6usize, 50] {
        while made < target {
            // One document per pair of entities, related.
            let (doc, _) = store
                .store_ingest(StoreIngest {
                    target: Target::New {
                        team_id,
                        corpus_id: corpus.id,
                        owner_id,
                        visibility: Visibility::Team,
                        title: format!("d{made}"),
                        source_url: None,
                    },
                    blob: blob(&mut rng),
                    filename: None,
                    extracted_chars: 0,
                    chunks: Vec::new(),
                })
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let mk = |n: usize| Entity {
                entity_type: "concept".into(),
                name: format!("Thing {n}"),
                name_norm: name_norm(&format!("Thing {n}")),
                description: String::new(),
                mentions: vec![Mention {
                    snippet: format!("about thing {n}"),
                    char_offset: 0,
                }],
            };
            let x = Extraction {
                entities: vec![mk(made), mk(made + 1)],
                relations: vec![Relation {
                    subject: 0,
                    predicate: "depends_on".into(),
                    object: 1,
                    mentions: vec![Mention {
                        snippet: format!("thing {made} depends on the next"),
                        char_offset: 0,
                    }],
                }],
            };
            store
                .store_extraction(team_id, doc.id, 1, "synthetic", &x, &[])
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            made += 2;
        }
        // The fewest statements over a few runs (the job queue's poll may interleave).
        let mut best = u64::MAX;
        let mut n_entities = 0;
        for _ in 0..5 {
            let before = store.statement_count();
            let d = s.gql_ok(&s.owner_token, q, json!({})).await;
            let after = store.statement_count();
            n_entities = d["entities"]["edges"].as_array().map_or(0, Vec::len);
            best = best.min(after - before);
        }
        assert_eq!(n_entities, target);
        counts.push(best);
    }
    eprintln!("statements for 6 and 50 entities ({backend:?}): {counts:?}");
    assert!(counts[0] > 0, "the counter counts nothing: {counts:?}");
    assert!(
        counts[1] <= counts[0],
        "statement count grows with entities: {counts:?}"
    );
    s.stop().await;
}

// ---- the job --------------------------------------------------------------------------------

/// The rules extractor through `extractKnowledge`: progress `extracting k/n` on the job's
/// subscription, the ≤ 40 cap, markers so a second run finds nothing, an unreadable document
/// list is not an error, and cancellation between documents (with a slow `llm` stub).
async fn extraction_job_progress_and_cancel(backend: Backend) {
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
async fn llm_backend_against_stub(backend: Backend) {
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
async fn auto_extract_after_ingest(backend: Backend) {
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
async fn extraction_quota(backend: Backend) {
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
async fn team_concurrency_is_shared_across_runs(backend: Backend) {
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

/// `entities(q)` pages in the fused order: `first: 1` to the end lists exactly what one big
/// page lists; and when the last entity of a page disappears before the next page is asked
/// for, the next page still continues where it was (it is not empty).
async fn entities_q_paging(backend: Backend) {
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

/// Not a check: prints the `rules` extractor's throughput (documents/s) over synthetic
/// business prose. `cargo test -p cairn-tests --test kg rules_throughput -- --ignored --nocapture`
#[tokio::test]
#[ignore]
async fn rules_throughput() {
    let rules = cairn_kg::Rules::new();
    let docs: Vec<String> = (0..500)
        .map(|i| {
            format!(
                "Report {i}.\n\nAcme Robotics {i}, a maker of warehouse robots, acquired Globex Media in March. \
                 Jane Doe works at Initech Labs in Berlin. Umbrella Labs is based in Lisbon and \
                 partnered with Hooli on sensors. {}",
                "The quarter was quiet and the board met twice. ".repeat(20)
            )
        })
        .collect();
    let start = std::time::Instant::now();
    let mut entities = 0;
    for d in &docs {
        let o = cairn_kg::extract(&rules, d)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        entities += o.extraction.entities.len();
    }
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "rules: {} documents ({} chars each) in {secs:.3} s = {:.0} documents/s, {entities} entities",
        docs.len(),
        docs[0].chars().count(),
        docs.len() as f64 / secs
    );
}

/// The `local` backend (a GGUF model named by `CAIRN_KG_LOCAL_MODEL`, e.g. from
/// `kg/fetch-local-model.sh`) through the server: the run ends, and whatever the small model
/// produced is validated (stored facts cite the document; a twice-refused reply is recorded
/// as failed). Skipped, loudly, when the variable is unset (as `kg/tests/local.rs` does).
async fn local_backend_end_to_end(backend: Backend) {
    require_model();
    let Some(model) = std::env::var_os("CAIRN_KG_LOCAL_MODEL") else {
        eprintln!("skipped: CAIRN_KG_LOCAL_MODEL is not set");
        return;
    };
    let s = TestServer::start_tuned(backend, |c| {
        c.kg_extractor = "local".into();
        c.kg_local_model = Some(model.into());
    })
    .await;
    let corpus = s.create_corpus(&s.owner_token, "local").await;
    let doc = s
        .ingest_text(&s.owner_token, &corpus, "news", NEWS, "TEAM")
        .await;
    let start = std::time::Instant::now();
    let events = extract(&s, &s.owner_token, json!({ "c": corpus })).await;
    let last = events.last().cloned().unwrap_or_default();
    eprintln!(
        "local ({backend:?}): 1 document in {:.2} s: {}",
        start.elapsed().as_secs_f64(),
        last["result"]
    );
    assert_eq!(last["result"]["documents"], 1, "{last}");
    assert_eq!(last["result"]["extractor"], "local", "{last}");
    for e in entities(&s, &s.owner_token).await {
        assert_eq!(mention_docs(&e), BTreeSet::from([doc.clone()]), "{e}");
        for m in e["mentions"].as_array().cloned().unwrap_or_default() {
            let snippet = m["snippet"].as_str().unwrap_or_default();
            assert!(NEWS.contains(snippet), "not verbatim: {snippet:?}");
        }
    }
    s.stop().await;
}

/// The small hand-labelled precision set (labels: [`PRECISION_GOLD`], tests/fixtures/kg/precision.md):
/// runs `rules`, and `local` when `CAIRN_KG_LOCAL_MODEL` names a GGUF, over [`PRECISION_SET`]
/// and prints, per backend, every stored entity and relation with its label, entity precision
/// (name and type; name only), recall, and throughput. The rules numbers are checked against
/// the recorded labels (15 stored, 12 right in name and type, 14 in name).
/// `CAIRN_KG_LOCAL_MODEL=$(bash kg/fetch-local-model.sh) cargo test -p cairn-tests --test kg kg_precision -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn kg_precision() {
    let rules = precision_of(&cairn_kg::Rules::new()).await;
    assert_eq!(
        (rules.stored, rules.right_typed, rules.right_named),
        (15, 12, 14),
        "the rules labels in tests/fixtures/kg/precision.md no longer hold"
    );
    match std::env::var("CAIRN_KG_LOCAL_MODEL") {
        Ok(path) if !path.is_empty() => {
            let local = tokio::task::spawn_blocking(move || {
                cairn_kg::LocalGguf::load(path, cairn_kg::LocalConfig::default())
            })
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|e| panic!("{e}"));
            precision_of(&local).await;
        }
        _ => eprintln!("local: skipped (CAIRN_KG_LOCAL_MODEL is not set)"),
    }
}

/// One backend's numbers over the precision set.
#[derive(Debug, Default)]
struct Precision {
    stored: usize,
    right_typed: usize,
    right_named: usize,
    relations: usize,
    relations_between_gold_pairs: usize,
}

async fn precision_of(x: &dyn cairn_kg::Extractor) -> Precision {
    let gold_total: usize = PRECISION_GOLD.iter().map(|g| g.len()).sum();
    let mut n = Precision::default();
    let (mut refused, mut attempts) = (0, 0);
    let start = std::time::Instant::now();
    for (text, gold) in PRECISION_SET.iter().zip(PRECISION_GOLD.iter()) {
        let o = match cairn_kg::extract(x, text).await {
            Ok(o) => o,
            Err(e) => {
                // Refused twice: the server records the document as extracted without facts.
                eprintln!("{}\tREFUSED\t{e}", x.name());
                refused += 1;
                attempts += 2;
                continue;
            }
        };
        attempts += o.attempts;
        let label = |e: &Entity| -> (bool, bool) {
            let norm = name_norm(&e.name);
            let hit = gold
                .iter()
                .find(|(names, _)| names.iter().any(|g| name_norm(g) == norm));
            (hit.is_some(), hit.is_some_and(|(_, t)| *t == e.entity_type))
        };
        for e in &o.extraction.entities {
            let (named, typed) = label(e);
            n.stored += 1;
            n.right_named += usize::from(named);
            n.right_typed += usize::from(typed);
            let mark = if typed {
                "ok"
            } else if named {
                "type?"
            } else {
                "WRONG"
            };
            eprintln!("{}\tE\t{mark}\t{}\t{}", x.name(), e.entity_type, e.name);
        }
        for r in &o.extraction.relations {
            let ends = [r.subject, r.object].map(|i| o.extraction.entities.get(i));
            let [Some(s), Some(ob)] = ends else { continue };
            n.relations += 1;
            let gold_pair = label(s).0 && label(ob).0;
            n.relations_between_gold_pairs += usize::from(gold_pair);
            eprintln!(
                "{}\tR\t{}\t{} {} {}",
                x.name(),
                if gold_pair { "ends ok" } else { "ends WRONG" },
                s.name,
                r.predicate,
                ob.name
            );
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let ratio = |a: usize, b: usize| {
        if b == 0 {
            "undefined".to_owned()
        } else {
            format!("{a}/{b} = {:.2}", a as f64 / b as f64)
        }
    };
    eprintln!(
        "{}: {} texts in {secs:.1} s ({:.3} texts/s, {attempts} replies, {refused} refused twice); \
         entities stored {}; precision (name and type) {}; precision (name) {}; \
         recall (name and type) {}; relations {} ({} between labelled entities)",
        x.name(),
        PRECISION_SET.len(),
        PRECISION_SET.len() as f64 / secs,
        n.stored,
        ratio(n.right_typed, n.stored),
        ratio(n.right_named, n.stored),
        ratio(n.right_typed, gold_total),
        n.relations,
        n.relations_between_gold_pairs,
    );
    n
}

/// The entities a careful reader marks in each text of [`PRECISION_SET`]: accepted spellings
/// and the type.
const PRECISION_GOLD: [&[(&[&str], &str)]; 4] = [
    &[
        (&["Acme Robotics"], "organization"),
        (&["Globex Media"], "organization"),
        (&["Jane Doe"], "person"),
        (&["Berlin"], "place"),
    ],
    &[
        (&["Initech Labs", "Initech"], "organization"),
        (&["Lisbon"], "place"),
        (&["Peter Novak"], "person"),
        (&["Umbrella Corp", "Umbrella"], "organization"),
    ],
    &[
        (&["Berlin Robotics Summit"], "event"),
        (&["Maria Silva"], "person"),
        (&["Hooli"], "organization"),
        (&["Ahmed Khan", "Dr. Ahmed Khan"], "person"),
        (&["University of Porto"], "organization"),
    ],
    &[
        (&["Hyperlift"], "product"),
        (&["Globex Media"], "organization"),
        (&["Acme Robotics"], "organization"),
    ],
];

const PRECISION_SET: [&str; 4] = [
    "Acme Robotics, a maker of warehouse robots, acquired Globex Media in March. Jane Doe, CEO of Acme Robotics, announced the deal in Berlin.",
    "Initech Labs is based in Lisbon. Peter Novak works at Initech Labs and leads the sensor team. The company partnered with Umbrella Corp on lidar.",
    "The Berlin Robotics Summit takes place in October. Speakers include Maria Silva from Hooli and Dr. Ahmed Khan of the University of Porto.",
    "Our quarterly review: revenue grew, Hyperlift shipped to three customers, and Globex Media renewed its contract with Acme Robotics.",
];
