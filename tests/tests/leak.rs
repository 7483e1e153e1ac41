//! The leak property (issue 11): no field, transport or query shape shows a principal the text
//! of a document it may not read. On both backends, over HTTP and over the WebSocket.
//!
//! Two teams and seven principals of every role act at random: documents are ingested (team
//! or private, into one of two corpora), given new versions, flipped between team and private,
//! moved, deleted, and the knowledge graph is extracted by whoever may run it. Every document
//! carries unique canary words: one in its title (and so in its filename and first line), one
//! per version in sentences the rules extractor turns into entity descriptions, entity names
//! and relations ("Helvetron Dynamics, a maker of <canary> sonar drones, is based in Basel.").
//! Every document shares the entity names Helvetron Dynamics and Baltic Shipping, so shared
//! entities carry descriptions and mentions of documents with different readers.
//!
//! After every step, every principal asks every reader-facing field, over HTTP and over its
//! WebSocket: search in all three modes, searchAll, answer (its text and citations, and the
//! request bodies the LLM stub received for it), documentText, document (with versions and
//! chunks), entities (with and without `q`, with descriptions, relations and mentions), entity
//! (every id ever seen), neighbourhood, kgQuery, knowledgeSummary, corpora with counts and
//! documents, job (every job of its team) and the `jobs` subscription. No reply may hold a
//! canary of a document the principal cannot read, nor one of an older version or of a
//! deleted document. A check is one (reply, forbidden canary) pair; the test needs ≥ 10,000
//! per backend and prints the count.

use std::collections::BTreeMap;
use std::time::Duration;

use cairn_llm::stub::{StubReply, StubServer};
use cairn_tests::{both_backends, require_model, ws_next, ws_open, Backend, TestServer, Ws};
use futures_util::SinkExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

both_backends!(no_field_shows_what_its_reader_may_not_read);

const MIN_CHECKS: usize = 10_000;

struct Actor {
    name: String,
    team: usize,
    role: &'static str,
    token: String,
    ws: Ws,
    next_id: u64,
}

impl Actor {
    fn is_admin(&self) -> bool {
        matches!(self.role, "OWNER" | "ADMIN")
    }
    fn uploads(&self) -> bool {
        self.role != "VIEWER"
    }
}

#[derive(Clone)]
struct Doc {
    id: String,
    team: usize,
    corpus: usize,
    owner: usize,
    private: bool,
    alive: bool,
    /// In the title, the filename and the first line of every version.
    title_word: String,
    /// The current version's canary.
    canary: String,
    /// Canaries of older versions: nobody may see them any more.
    dead: Vec<String>,
}

struct World {
    actors: Vec<Actor>,
    docs: Vec<Doc>,
    /// corpora[team] = two corpus ids.
    corpora: Vec<[String; 2]>,
    /// Job ids per team.
    jobs: Vec<Vec<String>>,
    entity_ids: std::collections::BTreeSet<String>,
    checks: usize,
}

fn canary(rng: &mut StdRng) -> String {
    // 10 letters: never a substring of anything else in the replies.
    (0..10)
        .map(|_| char::from(b'a' + rng.random_range(0..26u8)))
        .collect::<String>()
}

fn capitalized(w: &str) -> String {
    let mut c = w.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

fn text_of(title_word: &str, c: &str) -> String {
    format!(
        "Memo {title_word}.\n\nHelvetron Dynamics, a maker of {c} sonar drones, is based in Basel. \
         Helvetron Dynamics acquired {} Corporation in March. \
         Baltic Shipping, a carrier of {c} freight, is based in Riga.",
        capitalized(c)
    )
}

impl World {
    fn readable(&self, a: usize, d: &Doc) -> bool {
        let actor = &self.actors[a];
        d.alive && d.team == actor.team && (!d.private || d.owner == a)
    }

    /// The canaries actor `a` must never see.
    fn forbidden(&self, a: usize) -> Vec<String> {
        let mut out = Vec::new();
        for d in &self.docs {
            out.extend(d.dead.iter().cloned());
            if !self.readable(a, d) {
                out.push(d.canary.clone());
                out.push(d.title_word.clone());
            }
        }
        out
    }

    /// One reply checked against every forbidden canary.
    fn check(&mut self, a: usize, what: &str, reply: &str) {
        let text = reply.to_lowercase();
        let forbidden = self.forbidden(a);
        for c in &forbidden {
            assert!(
                !text.contains(c.as_str()),
                "{} ({}) saw `{c}` through {what}: {reply}",
                self.actors[a].name,
                self.actors[a].role
            );
        }
        self.checks += forbidden.len();
    }
}

/// One GraphQL operation over the actor's socket; `jobs` events that arrive meanwhile go to
/// `events`.
async fn ws_request(actor: &mut Actor, query: &str, events: &mut Vec<Value>) -> Value {
    actor.next_id += 1;
    let id = format!("q{}", actor.next_id);
    actor
        .ws
        .send(Message::text(
            json!({ "id": id, "type": "subscribe", "payload": { "query": query } }).to_string(),
        ))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut reply = Value::Null;
    loop {
        let m = ws_next(&mut actor.ws)
            .await
            .unwrap_or_else(|c| panic!("{}'s socket closed ({c:?})", actor.name));
        if m["id"] == "jobs" {
            events.push(m);
            continue;
        }
        if m["id"] != json!(id) {
            continue;
        }
        match m["type"].as_str() {
            Some("next") => reply = m["payload"].clone(),
            Some("error") => return m,
            Some("complete") => return reply,
            _ => {}
        }
    }
}

/// `jobs` events already waiting on the socket (reads until 200 ms of silence).
async fn drain(actor: &mut Actor, events: &mut Vec<Value>) {
    while let Ok(m) = tokio::time::timeout(Duration::from_millis(200), ws_next(&mut actor.ws)).await
    {
        match m {
            Ok(v) => events.push(v),
            Err(c) => panic!("{}'s socket closed ({c:?})", actor.name),
        }
    }
}

const ENTITY: &str = "id name type description mentions { snippet version document { id title } } relations { predicate subject { id name description } object { id name description } mentions { snippet document { title } } }";

/// The reader-facing requests of one round, each within the root-field and complexity caps.
fn requests(w: &World, a: usize) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let hit = "results { content documentTitle section document { title filename } }";
    out.push((
        "search".to_owned(),
        format!(
            "{{ h: search(query: \"Helvetron Dynamics sonar drones\", topK: 40, mode: HYBRID) {{ {hit} }} \
               v: search(query: \"Helvetron Dynamics sonar drones\", topK: 40, mode: VECTOR) {{ {hit} }} \
               l: search(query: \"Helvetron\", topK: 40, mode: LEXICAL) {{ {hit} }} }}"
        ),
    ));
    // A direct lookup of some forbidden canaries.
    let forbidden = w.forbidden(a);
    if !forbidden.is_empty() {
        let probes: String = forbidden
            .iter()
            .take(3)
            .enumerate()
            .map(|(i, c)| {
                format!("p{i}: search(query: \"{c}\", topK: 10, mode: LEXICAL) {{ {hit} }} ")
            })
            .collect();
        out.push((
            "search for a forbidden canary".to_owned(),
            format!("{{ {probes} }}"),
        ));
    }
    out.push((
        "searchAll".to_owned(),
        "{ searchAll(q: \"Helvetron\", first: 40) { __typename ... on ChunkHit { content documentTitle } ... on DocumentHit { document { title filename } } ... on EntityHit { id name description } } }".to_owned(),
    ));
    out.push((
        "answer".to_owned(),
        "{ answer(question: \"What does Helvetron Dynamics make?\") { answer citations { excerpt documentTitle document { title } } } }".to_owned(),
    ));
    out.push((
        "entities".to_owned(),
        format!("{{ entities(first: 60) {{ edges {{ node {{ {ENTITY} }} }} }} }}"),
    ));
    out.push((
        "entities(q)".to_owned(),
        format!(
            "{{ entities(q: \"Helvetron sonar drones\", first: 40) {{ edges {{ node {{ {ENTITY} }} }} }} }}"
        ),
    ));
    out.push((
        "neighbourhood, kgQuery, knowledgeSummary".to_owned(),
        "{ n1: neighbourhood(name: \"Helvetron Dynamics\", hops: 2) { nodes { name description } edges { predicate mentions { snippet document { title } } } } \
           n2: neighbourhood(name: \"Baltic Shipping\", hops: 1) { nodes { name description } edges { predicate mentions { snippet } } } \
           k1: kgQuery(name: \"Helvetron Dynamics\", hops: 2) k2: kgQuery(name: \"Baltic Shipping\", hops: 2) knowledgeSummary }".to_owned(),
    ));
    out.push((
        "corpora".to_owned(),
        "{ corpora(first: 10) { edges { node { name documentCount chunkCount documents(first: 50) { edges { node { title filename versions { version } } } } } } } }".to_owned(),
    ));
    // Every document ever made (readable or not), 8 to a request: document + documentText.
    let ids: Vec<&str> = w.docs.iter().map(|d| d.id.as_str()).collect();
    for chunk in ids.chunks(8) {
        let q: String = chunk
            .iter()
            .enumerate()
            .map(|(i, id)| {
                format!(
                    "d{i}: document(id: \"{id}\") {{ title filename ownerName versions {{ version }} chunks {{ content }} }} \
                     t{i}: documentText(id: \"{id}\") {{ text document {{ title }} }} "
                )
            })
            .collect();
        out.push(("document, documentText".to_owned(), format!("{{ {q} }}")));
    }
    let eids: Vec<&String> = w.entity_ids.iter().collect();
    for chunk in eids.chunks(15) {
        let q: String = chunk
            .iter()
            .enumerate()
            .map(|(i, id)| format!("e{i}: entity(id: \"{id}\") {{ {ENTITY} }} "))
            .collect();
        out.push(("entity".to_owned(), format!("{{ {q} }}")));
    }
    let team = w.actors[a].team;
    for chunk in w.jobs[team].chunks(15) {
        let q: String = chunk
            .iter()
            .enumerate()
            .map(|(i, id)| {
                format!("j{i}: job(id: \"{id}\") {{ kind state filename result error }} ")
            })
            .collect();
        out.push(("job".to_owned(), format!("{{ {q} }}")));
    }
    out
}

/// Entity ids in a reply (so that `entity(id)` is asked for every id any principal saw).
fn collect_entity_ids(v: &Value, out: &mut std::collections::BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            if let (Some(Value::String(id)), Some(_)) = (m.get("id"), m.get("description")) {
                out.insert(id.clone());
            }
            for x in m.values() {
                collect_entity_ids(x, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| collect_entity_ids(x, out)),
        _ => {}
    }
}

/// Every actor asks everything, over HTTP and over its socket.
async fn verify(s: &TestServer, w: &mut World, stub: &StubServer) {
    for a in 0..w.actors.len() {
        let reqs = requests(w, a);
        for (what, q) in reqs {
            let asked_llm = what == "answer";
            let before = stub.requests().len();
            let http = s.gql(&w.actors[a].token, &q, json!({})).await;
            let after_http = stub.requests();
            let mut events = Vec::new();
            let token_ws = {
                let actor = &mut w.actors[a];
                ws_request(actor, &q, &mut events).await
            };
            let after_ws = stub.requests();
            collect_entity_ids(&http, &mut w.entity_ids);
            w.check(a, &format!("{what} (HTTP)"), &http.to_string());
            w.check(a, &format!("{what} (WebSocket)"), &token_ws.to_string());
            if asked_llm {
                for r in &after_http[before..] {
                    w.check(a, "the LLM request of an HTTP answer", &r.to_string());
                }
                for r in &after_ws[after_http.len()..] {
                    w.check(a, "the LLM request of a WebSocket answer", &r.to_string());
                }
            }
            for e in &events {
                w.check(a, "the jobs subscription", &e.to_string());
            }
        }
    }
}

/// `jobs` events each actor's socket got during the last operation, checked now (the state
/// they were sent in).
async fn check_job_events(w: &mut World) {
    for a in 0..w.actors.len() {
        let mut events = Vec::new();
        drain(&mut w.actors[a], &mut events).await;
        for e in &events {
            w.check(a, "the jobs subscription", &e.to_string());
        }
    }
}

async fn actor(
    s: &TestServer,
    name: &str,
    team: usize,
    role: &'static str,
    token: String,
) -> Actor {
    let mut ws = ws_open(s, &token).await;
    ws.send(Message::text(
        json!({ "id": "jobs", "type": "subscribe", "payload": { "query": "subscription { jobs { jobId kind state stage error result } }" } })
            .to_string(),
    ))
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    Actor {
        name: name.to_owned(),
        team,
        role,
        token,
        ws,
        next_id: 0,
    }
}

async fn no_field_shows_what_its_reader_may_not_read(backend: Backend) {
    require_model();
    // The stub answers by quoting everything it was sent, as a model citing its sources does:
    // the answer's text is then checked too.
    let stub = StubServer::start(vec![StubReply::from_fn(|req: &Value| {
        format!("From the sources [1]: {}", req["messages"])
    })])
    .await;
    let base = stub.base_url();
    let s = TestServer::start_tuned(backend, |c| {
        c.llm_url = Some(base);
        c.llm_model = "stub-model".into();
    })
    .await;
    let seed: u64 = std::env::var("CAIRN_LEAK_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x1ea4_2026);
    let mut rng = StdRng::seed_from_u64(seed);

    // Team 0 (the bootstrap team): owner, admin, two members, a viewer. Team 1: owner, member.
    let mut actors = vec![actor(&s, "owner", 0, "OWNER", s.owner_token.clone()).await];
    for (name, role) in [
        ("adm", "ADMIN"),
        ("m1", "MEMBER"),
        ("m2", "MEMBER"),
        ("vw", "VIEWER"),
    ] {
        let (_, token) = s.user_with_token(name, role).await;
        actors.push(actor(&s, name, 0, role, token).await);
    }
    let (team_b, _, owner_b_token) = s.other_team("other").await;
    actors.push(actor(&s, "ob", 1, "OWNER", owner_b_token).await);
    {
        let store = &s.cairn().store;
        let user = store
            .create_user(team_b, "mb", cairn::domain::Role::Member)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let secret = cairn::auth::generate_token();
        store
            .create_token(user.id, &secret.hash, Some("test"))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        actors.push(actor(&s, "mb", 1, "MEMBER", secret.secret).await);
    }
    let mut corpora = Vec::new();
    for owner in [0usize, 5] {
        let t = actors[owner].token.clone();
        corpora.push([
            s.create_corpus(&t, "north").await,
            s.create_corpus(&t, "south").await,
        ]);
    }
    let mut w = World {
        actors,
        docs: Vec::new(),
        corpora,
        jobs: vec![Vec::new(), Vec::new()],
        entity_ids: Default::default(),
        checks: 0,
    };

    let mut step = 0usize;
    while (w.checks < MIN_CHECKS || step < 10) && step < 40 {
        step += 1;
        let alive: Vec<usize> = (0..w.docs.len()).filter(|&i| w.docs[i].alive).collect();
        let op = if alive.len() < 3 {
            0
        } else {
            rng.random_range(0..10)
        };
        match op {
            // A new document, team or private, by anyone who may upload.
            0..=3 => {
                let uploaders: Vec<usize> = (0..w.actors.len())
                    .filter(|&a| w.actors[a].uploads())
                    .collect();
                let a = uploaders[rng.random_range(0..uploaders.len())];
                let team = w.actors[a].team;
                let corpus = rng.random_range(0..2);
                let private = rng.random_bool(0.5);
                let title_word = canary(&mut rng);
                let c = canary(&mut rng);
                let (id, job) = s
                    .ingest_text_job(
                        &w.actors[a].token,
                        &w.corpora[team][corpus],
                        &format!("Memo {title_word}"),
                        &text_of(&title_word, &c),
                        if private { "PRIVATE" } else { "TEAM" },
                    )
                    .await;
                w.jobs[team].push(job);
                w.docs.push(Doc {
                    id,
                    team,
                    corpus,
                    owner: a,
                    private,
                    alive: true,
                    title_word,
                    canary: c,
                    dead: Vec::new(),
                });
            }
            // A new version by its owner: the old version's words die.
            4 | 5 => {
                let i = alive[rng.random_range(0..alive.len())];
                let d = w.docs[i].clone();
                let c = canary(&mut rng);
                let (status, body) = s
                    .upload(
                        &w.actors[d.owner].token,
                        &w.corpora[d.team][d.corpus],
                        &format!("rev{step}.md"),
                        text_of(&d.title_word, &c).into_bytes(),
                        json!({ "d": d.id }),
                    )
                    .await;
                assert_eq!(status, 200, "{body}");
                let job = body["data"]["uploadDocument"]["id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let events = s.follow_job(&w.actors[d.owner].token, &job).await;
                assert_eq!(
                    events.last().map(|e| e["stage"].clone()),
                    Some(json!("searchable")),
                    "{events:?}"
                );
                w.jobs[d.team].push(job);
                let doc = &mut w.docs[i];
                let old = std::mem::replace(&mut doc.canary, c);
                doc.dead.push(old);
            }
            // Team ↔ private, by the owner or a team admin.
            6 => {
                let i = alive[rng.random_range(0..alive.len())];
                let d = w.docs[i].clone();
                let admins: Vec<usize> = (0..w.actors.len())
                    .filter(|&a| w.actors[a].team == d.team && w.actors[a].is_admin())
                    .collect();
                let by = if rng.random_bool(0.5) {
                    d.owner
                } else {
                    admins[rng.random_range(0..admins.len())]
                };
                // An admin who cannot read a private document cannot change it.
                if w.readable(by, &d) {
                    let v = if d.private { "TEAM" } else { "PRIVATE" };
                    s.gql_ok(
                        &w.actors[by].token,
                        "mutation($id: ID!, $v: Visibility!) { setVisibility(documentId: $id, visibility: $v) { id } }",
                        json!({ "id": d.id, "v": v }),
                    )
                    .await;
                    w.docs[i].private = !d.private;
                }
            }
            // To the team's other corpus, by its owner.
            7 => {
                let i = alive[rng.random_range(0..alive.len())];
                let d = w.docs[i].clone();
                let to = 1 - d.corpus;
                let r = s
                    .gql_ok(
                        &w.actors[d.owner].token,
                        "mutation($to: ID!, $d: [ID!]) { moveDocuments(toCorpusId: $to, documentIds: $d) }",
                        json!({ "to": w.corpora[d.team][to], "d": [d.id] }),
                    )
                    .await;
                assert_eq!(r["moveDocuments"], 1, "{r}");
                w.docs[i].corpus = to;
            }
            // Deleted by its owner: every word of it dies.
            8 => {
                let i = alive[rng.random_range(0..alive.len())];
                let d = w.docs[i].clone();
                s.gql_ok(
                    &w.actors[d.owner].token,
                    "mutation($id: ID!) { deleteDocument(id: $id) }",
                    json!({ "id": d.id }),
                )
                .await;
                let doc = &mut w.docs[i];
                doc.alive = false;
                let t = doc.title_word.clone();
                let c = doc.canary.clone();
                doc.dead.push(t);
                doc.dead.push(c);
            }
            _ => {}
        }
        check_job_events(&mut w).await;
        // Knowledge extraction by someone who may run it (over what they can read).
        let runners: Vec<usize> = (0..w.actors.len())
            .filter(|&a| w.actors[a].uploads())
            .collect();
        let a = runners[rng.random_range(0..runners.len())];
        let job = s.extract_all(&w.actors[a].token).await;
        let team = w.actors[a].team;
        w.jobs[team].push(job);
        check_job_events(&mut w).await;
        verify(&s, &mut w, &stub).await;
    }
    let by_role: BTreeMap<&str, usize> = w.actors.iter().fold(BTreeMap::new(), |mut m, a| {
        *m.entry(a.role).or_default() += 1;
        m
    });
    eprintln!(
        "leak property ({backend:?}): {} checks over {step} steps, {} documents ({} alive), {} entities seen, principals by role {by_role:?}",
        w.checks,
        w.docs.len(),
        w.docs.iter().filter(|d| d.alive).count(),
        w.entity_ids.len(),
    );
    assert!(w.checks >= MIN_CHECKS, "only {} checks", w.checks);
    assert!(
        w.docs.iter().any(|d| d.private && d.alive),
        "the run never kept a private document"
    );
    s.stop().await;
}
