//! A randomized property test of the mention rule (≥ 10,000 checks per backend): a model of
//! the documents and what each principal may read, checked against every read path.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use cairn::auth::Principal;
use cairn::domain::{Role, Visibility};
use cairn::testing::{StoreIngest, Target};
use cairn_kg::normalize::name_norm;
use cairn_kg::{Entity, Extraction, Mention, Relation};
use cairn_tests::{new_principal, Backend, TestServer};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{blob, orphan_counts};

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
pub(super) async fn mention_rule_property(backend: Backend) {
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
            principals
                .push(new_principal(&store, team.id, &format!("u{t}{u}"), Role::Member).await);
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
        let key_of = |e: &cairn::service::KgEntity| -> EKey {
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
