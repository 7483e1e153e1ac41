//! Test harness: a real Cairn server in this process, on port 0, over a real database.
//!
//! - [`Backend::Sqlite`]: a fresh data directory per server.
//! - [`Backend::Postgres`]: a fresh database per server, created on the PostgreSQL named by
//!   `CAIRN_TEST_PG_URL` (the README's test command starts one with pgvector and sets it).
//!   Without it the PostgreSQL tests fail, they never skip silently.
//!
//! [`both_backends!`] turns one `async fn(Backend)` into a test per backend.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use cairn_embed::{EmbedConfig, Embedder};
use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

use cairn::app::{self, Running};
use cairn::auth;
use cairn::config::Config;
use cairn::domain::Role;
use rand::Rng;
use sea_orm::{ConnectionTrait, Database};
use serde_json::{json, Value};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Declares `mod NAME { sqlite, postgres }` tests that run `NAME(Backend::…)`.
#[macro_export]
macro_rules! both_backends {
    ($($name:ident),+ $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() {
                    super::$name($crate::Backend::Sqlite).await
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    super::$name($crate::Backend::Postgres).await
                }
            }
        )+
    };
}

pub fn pg_admin_url() -> String {
    match std::env::var("CAIRN_TEST_PG_URL") {
        Ok(u) if !u.is_empty() => u,
        _ => panic!(
            "CAIRN_TEST_PG_URL is not set: the PostgreSQL half of the suite needs a server with \
             pgvector (run the README's test command, scripts/test.sh, which starts one)"
        ),
    }
}

/// The repository root (for the console's build output and fixtures). `cargo test` sets
/// `CARGO_MANIFEST_DIR` for the running test too; that wins over the compile-time value, which
/// is stale when a shared `CARGO_TARGET_DIR` reuses a build made from another checkout.
pub fn repo_root() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .parent()
        .map(PathBuf::from)
        .unwrap_or_default()
}

fn random_suffix() -> String {
    let n: u64 = rand::rng().random();
    format!("{n:016x}")
}

/// Creates an empty PostgreSQL database and returns its URL.
pub async fn fresh_pg_database() -> (String, String) {
    let admin = pg_admin_url();
    let name = format!("cairn_t_{}", random_suffix());
    let conn = Database::connect(admin.as_str())
        .await
        .unwrap_or_else(|e| panic!("cannot reach PostgreSQL at CAIRN_TEST_PG_URL: {e}"));
    conn.execute_unprepared(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap_or_else(|e| panic!("CREATE DATABASE failed: {e}"));
    let _ = conn.close().await;
    let base = admin.rsplit_once('/').map(|(b, _)| b).unwrap_or(&admin);
    (format!("{base}/{name}"), name)
}

/// Drops a database made by [`fresh_pg_database`] (or any other one) on the same server.
pub async fn drop_pg_database(name: &str) {
    if let Ok(conn) = Database::connect(pg_admin_url().as_str()).await {
        let _ = conn
            .execute_unprepared(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .await;
        let _ = conn.close().await;
    }
}

pub struct TestServer {
    pub backend: Backend,
    /// `http://127.0.0.1:PORT`
    pub url: String,
    /// The bootstrap owner's token (user "admin" of team "default").
    pub owner_token: String,
    pub config: Config,
    pub running: Option<Running>,
    pg_database: Option<String>,
    _data_dir: tempfile::TempDir,
    http: reqwest::Client,
}

/// One embedding model per test process, shared by every server it starts (loading it per
/// server would dominate the suite). `None` when `CAIRN_EMBED_MODEL` is unset: servers then
/// start without one, and ingestion tests fail on [`require_model`].
pub async fn shared_embedder() -> Option<Embedder> {
    static EMBEDDER: OnceLock<Option<Embedder>> = OnceLock::new();
    if let Some(e) = EMBEDDER.get() {
        return e.clone();
    }
    let dir = std::env::var_os("CAIRN_EMBED_MODEL")?;
    let loaded =
        tokio::task::spawn_blocking(move || Embedder::load(EmbedConfig::new(PathBuf::from(dir))))
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|e| panic!("CAIRN_EMBED_MODEL does not hold a loadable model: {e}"));
    let _ = EMBEDDER.set(Some(loaded));
    EMBEDDER.get().cloned().flatten()
}

/// Fails the test unless the embedding model is configured.
pub fn require_model() {
    assert!(
        std::env::var_os("CAIRN_EMBED_MODEL").is_some(),
        "CAIRN_EMBED_MODEL is not set: run scripts/fetch-model.sh (the README's test command does)"
    );
}

impl TestServer {
    pub async fn start(backend: Backend) -> TestServer {
        Self::start_tuned(backend, |_| {}).await
    }

    /// Starts with configuration changes (upload cap, workers, lease…).
    pub async fn start_tuned(backend: Backend, tune: impl FnOnce(&mut Config)) -> TestServer {
        let data_dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let mut config = Config::with_data_dir(data_dir.path());
        config.bind = "127.0.0.1:0".parse().unwrap_or_else(|e| panic!("{e}"));
        config.console_dir = repo_root().join("frontend/dist");
        let mut pg_database = None;
        if backend == Backend::Postgres {
            let (url, name) = fresh_pg_database().await;
            config.database_url = Some(url);
            pg_database = Some(name);
        }
        config.job_lease_secs = 3;
        // The harnesses search in tight loops; the rate limit has its own test.
        config.search_rate = 0.0;
        tune(&mut config);
        Self::start_with(backend, config, data_dir, pg_database).await
    }

    async fn start_with(
        backend: Backend,
        config: Config,
        data_dir: tempfile::TempDir,
        pg_database: Option<String>,
    ) -> TestServer {
        if std::env::var_os("CAIRN_TEST_LOG").is_some() {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::new(
                    "info,cairn=debug,sqlx=warn",
                ))
                .with_test_writer()
                .try_init();
        }
        let running = app::start_with(&config, shared_embedder().await)
            .await
            .unwrap_or_else(|e| panic!("server failed to start: {e}"));
        let owner_token = running
            .bootstrap
            .as_ref()
            .map(|b| b.token.clone())
            .unwrap_or_else(|| panic!("a fresh database must bootstrap a team"));
        TestServer {
            backend,
            url: format!("http://{}", running.addr),
            owner_token,
            config,
            running: Some(running),
            pg_database,
            _data_dir: data_dir,
            http: reqwest::Client::new(),
        }
    }

    /// The bootstrap owner ("admin" of team "default") as a principal, for calls to the
    /// service as the operator would make them (no token).
    pub async fn owner_principal(&self) -> auth::Principal {
        let store = &self.cairn().store;
        let team = store
            .team_by_name("default")
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("no default team"));
        let owner = store
            .first_owner(team.id)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("no owner"));
        cairn::service::principal_of(&owner, 0).unwrap_or_else(|e| panic!("{e}"))
    }

    pub fn cairn(&self) -> &cairn::service::Cairn {
        match &self.running {
            Some(r) => &r.cairn,
            None => panic!("server stopped"),
        }
    }

    pub fn ws_url(&self) -> String {
        format!("{}/graphql/ws", self.url.replacen("http://", "ws://", 1))
    }

    /// POSTs a GraphQL request with a bearer token; returns the JSON body whatever the status.
    pub async fn gql(&self, token: &str, query: &str, variables: Value) -> Value {
        self.gql_status(Some(token), query, variables).await.1
    }

    pub async fn gql_status(
        &self,
        token: Option<&str>,
        query: &str,
        variables: Value,
    ) -> (u16, Value) {
        let mut req = self
            .http
            .post(format!("{}/graphql", self.url))
            .json(&json!({ "query": query, "variables": variables }));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let resp = req
            .send()
            .await
            .unwrap_or_else(|e| panic!("request failed: {e}"));
        let status = resp.status().as_u16();
        let body = resp
            .json::<Value>()
            .await
            .unwrap_or_else(|e| panic!("non-JSON GraphQL reply: {e}"));
        (status, body)
    }

    /// Like [`gql`](Self::gql) but panics on any GraphQL error; returns `data`.
    pub async fn gql_ok(&self, token: &str, query: &str, variables: Value) -> Value {
        let body = self.gql(token, query, variables).await;
        assert!(body.get("errors").is_none(), "unexpected errors: {body}");
        body["data"].clone()
    }

    pub async fn get(&self, path: &str) -> (u16, String) {
        let resp = self
            .http
            .get(format!("{}{}", self.url, path))
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}"));
        let status = resp.status().as_u16();
        (status, resp.text().await.unwrap_or_default())
    }

    /// A user with `role` in the bootstrap team, and a token for them (through the API).
    pub async fn user_with_token(&self, name: &str, role: &str) -> (i64, String) {
        let data = self
            .gql_ok(
                &self.owner_token,
                "mutation($n: String!, $r: Role!) { createUser(name: $n, role: $r) { id } }",
                json!({ "n": name, "r": role }),
            )
            .await;
        let id = data["createUser"]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let data = self
            .gql_ok(
                &self.owner_token,
                "mutation($u: ID!) { createToken(userId: $u, label: \"test\") { token } }",
                json!({ "u": id }),
            )
            .await;
        let token = data["createToken"]["token"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        (id.parse().unwrap_or_default(), token)
    }

    /// Another team with an owner, made directly in the store (teams are an operator's
    /// business, not the API's). Returns (team id, owner user id, owner token).
    pub async fn other_team(&self, name: &str) -> (i64, i64, String) {
        let store = &self.cairn().store;
        let team = store
            .create_team(name)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let owner = store
            .create_user(team.id, "owner", Role::Owner)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let secret = auth::generate_token();
        store
            .create_token(owner.id, &secret.hash, Some("test"))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        (team.id, owner.id, secret.secret)
    }

    /// Uploads `bytes` as `filename` through the GraphQL multipart request spec; returns the
    /// reply body and the HTTP status.
    pub async fn upload(
        &self,
        token: &str,
        corpus_id: &str,
        filename: &str,
        bytes: Vec<u8>,
        extra: Value,
    ) -> (u16, Value) {
        let mut vars = json!({ "c": corpus_id, "f": null });
        if let (Some(v), Some(e)) = (vars.as_object_mut(), extra.as_object()) {
            for (k, x) in e {
                v.insert(k.clone(), x.clone());
            }
        }
        let ops = json!({
            "query": "mutation($c: ID!, $f: Upload!, $v: Visibility, $d: ID) { uploadDocument(corpusId: $c, file: $f, visibility: $v, documentId: $d) { id state stage filename } }",
            "variables": vars,
        });
        let form = reqwest::multipart::Form::new()
            .text("operations", ops.to_string())
            .text("map", json!({ "0": ["variables.f"] }).to_string())
            .part(
                "0",
                reqwest::multipart::Part::bytes(bytes).file_name(filename.to_owned()),
            );
        let resp = self
            .http
            .post(format!("{}/graphql", self.url))
            .bearer_auth(token)
            .multipart(form)
            .send()
            .await
            .unwrap_or_else(|e| panic!("upload failed: {e}"));
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// Uploads and returns the job id (panics on a refusal).
    pub async fn upload_ok(
        &self,
        token: &str,
        corpus_id: &str,
        filename: &str,
        bytes: Vec<u8>,
    ) -> String {
        let (status, body) = self
            .upload(token, corpus_id, filename, bytes, json!({}))
            .await;
        assert!(
            status == 200 && body.get("errors").is_none(),
            "upload refused ({status}): {body}"
        );
        body["data"]["uploadDocument"]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Subscribes to `jobs(corpusId)`, then uploads, then collects the new job's events until
    /// it ends (bounded: 180 s). The first event is the job's `queued` state.
    pub async fn upload_watched(
        &self,
        token: &str,
        corpus_id: &str,
        filename: &str,
        bytes: Vec<u8>,
    ) -> Vec<Value> {
        let mut ws = ws_open(self, token).await;
        let q = "subscription($c: ID) { jobs(corpusId: $c) { jobId state stage done total error result } }";
        ws.send(Message::text(
            json!({ "id": "w", "type": "subscribe", "payload": { "query": q, "variables": { "c": corpus_id } } })
                .to_string(),
        ))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        // graphql-transport-ws has no subscribe acknowledgement: give the server a moment.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let job_id = self.upload_ok(token, corpus_id, filename, bytes).await;
        let mut events = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let msg = tokio::time::timeout(left, ws_next(&mut ws))
                .await
                .unwrap_or_else(|_| panic!("job {job_id} did not finish in 180 s: {events:?}"));
            let v = msg.unwrap_or_else(|c| panic!("socket closed ({c:?}) after {events:?}"));
            let ev = v["payload"]["data"]["jobs"].clone();
            if ev["jobId"] != json!(job_id) {
                continue;
            }
            let done = matches!(
                ev["state"].as_str(),
                Some("SUCCEEDED" | "FAILED" | "CANCELLED")
            );
            events.push(ev);
            if done {
                break;
            }
        }
        assert_eq!(
            events.first().map(|e| e["stage"].clone()),
            Some(json!("queued")),
            "{events:?}"
        );
        events
    }

    /// Subscribes to `jobProgress(id)` over the WebSocket and collects events until the job
    /// ends (bounded: 180 s).
    pub async fn follow_job(&self, token: &str, job_id: &str) -> Vec<Value> {
        let mut ws = ws_open(self, token).await;
        let q = "subscription($id: ID!) { jobProgress(id: $id) { jobId state stage done total error result } }";
        ws.send(Message::text(
            json!({ "id": "1", "type": "subscribe", "payload": { "query": q, "variables": { "id": job_id } } })
                .to_string(),
        ))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        let mut events = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let msg = match tokio::time::timeout(left, ws_next(&mut ws)).await {
                Ok(m) => m,
                Err(_) => panic!("job {job_id} did not finish in 180 s; events so far: {events:?}"),
            };
            match msg {
                Ok(v) if v["type"] == "next" => {
                    let ev = v["payload"]["data"]["jobProgress"].clone();
                    assert!(ev.is_object(), "bad event {v}");
                    events.push(ev);
                }
                Ok(v) if v["type"] == "complete" => break,
                Ok(v) => panic!("unexpected message {v}"),
                Err(code) => panic!("socket closed ({code:?}) after {events:?}"),
            }
        }
        events
    }

    /// Creates a corpus as `token`'s user; returns its id.
    pub async fn create_corpus(&self, token: &str, name: &str) -> String {
        let d = self
            .gql_ok(
                token,
                "mutation($n: String!) { createCorpus(name: $n) { id } }",
                json!({ "n": name }),
            )
            .await;
        d["createCorpus"]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Ingests `text` through `ingestText` (visibility `TEAM` or `PRIVATE`), waits for the job
    /// to end, and returns the document id (panics unless it became searchable).
    pub async fn ingest_text(
        &self,
        token: &str,
        corpus_id: &str,
        title: &str,
        text: &str,
        visibility: &str,
    ) -> String {
        self.ingest_text_job(token, corpus_id, title, text, visibility)
            .await
            .0
    }

    /// [`ingest_text`](Self::ingest_text), returning (document id, job id).
    pub async fn ingest_text_job(
        &self,
        token: &str,
        corpus_id: &str,
        title: &str,
        text: &str,
        visibility: &str,
    ) -> (String, String) {
        let d = self
            .gql_ok(
                token,
                "mutation($c: ID!, $t: String!, $x: String!, $v: Visibility) { ingestText(corpusId: $c, title: $t, text: $x, visibility: $v) { id } }",
                json!({ "c": corpus_id, "t": title, "x": text, "v": visibility }),
            )
            .await;
        let job = d["ingestText"]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let events = self.follow_job(token, &job).await;
        let last = events.last().cloned().unwrap_or(Value::Null);
        assert_eq!(last["stage"], "searchable", "{title}: {events:?}");
        let doc = match &last["result"]["documentId"] {
            Value::Number(n) => n.to_string(),
            Value::String(s) => s.clone(),
            other => panic!("{title}: no document id in {other}"),
        };
        (doc, job)
    }

    /// `extractKnowledge` over everything `token` can read, followed until it succeeds;
    /// returns the job id.
    pub async fn extract_all(&self, token: &str) -> String {
        let d = self
            .gql_ok(token, "mutation { extractKnowledge { id } }", json!({}))
            .await;
        let job = d["extractKnowledge"]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let events = self.follow_job(token, &job).await;
        assert_eq!(
            events.last().map(|e| e["state"].clone()),
            Some(json!("SUCCEEDED")),
            "{events:?}"
        );
        job
    }

    /// A handle that only knows a URL (for talking to a server run as a separate process).
    pub fn probe(url: &str) -> TestServer {
        TestServer {
            backend: Backend::Sqlite,
            url: url.to_owned(),
            owner_token: String::new(),
            config: Config::with_data_dir("/nonexistent"),
            running: None,
            pg_database: None,
            _data_dir: tempfile::tempdir().unwrap_or_else(|e| panic!("{e}")),
            http: reqwest::Client::new(),
        }
    }

    /// A second instance on the same database and blob directory (scale-out), with its own
    /// workers and port.
    pub async fn second_instance(&self) -> TestServer {
        self.second_instance_tuned(|_| {}).await
    }

    /// [`second_instance`](Self::second_instance) with configuration changes (e.g. workers).
    pub async fn second_instance_tuned(&self, tune: impl FnOnce(&mut Config)) -> TestServer {
        self.second_instance_with(tune, shared_embedder().await)
            .await
    }

    /// A second instance on the same database without an embedding model (as when the
    /// model is missing or failed to load): vector search is unavailable there.
    pub async fn second_instance_without_model(&self) -> TestServer {
        self.second_instance_with(|_| {}, None).await
    }

    async fn second_instance_with(
        &self,
        tune: impl FnOnce(&mut Config),
        embedder: Option<Embedder>,
    ) -> TestServer {
        let mut config = self.config.clone();
        tune(&mut config);
        config.bind = "127.0.0.1:0".parse().unwrap_or_else(|e| panic!("{e}"));
        let running = app::start_with(&config, embedder)
            .await
            .unwrap_or_else(|e| panic!("second instance failed to start: {e}"));
        assert!(
            running.bootstrap.is_none(),
            "the second instance finds the team"
        );
        TestServer {
            backend: self.backend,
            url: format!("http://{}", running.addr),
            owner_token: self.owner_token.clone(),
            config,
            running: Some(running),
            pg_database: None,
            _data_dir: tempfile::tempdir().unwrap_or_else(|e| panic!("{e}")),
            http: reqwest::Client::new(),
        }
    }

    /// Stops the server and removes its PostgreSQL database.
    pub async fn stop(mut self) {
        if let Some(r) = self.running.take() {
            let _ = r.stop().await;
        }
        if let Some(db) = self.pg_database.take() {
            drop_pg_database(&db).await;
        }
    }
}

/// A new user of team `team_id` and the principal it acts as (no token: for tests that call
/// the store directly).
pub async fn new_principal(
    store: &cairn::Store,
    team_id: i64,
    name: &str,
    role: Role,
) -> auth::Principal {
    let user = store
        .create_user(team_id, name, role)
        .await
        .unwrap_or_else(|e| panic!("create user {name}: {e}"));
    auth::Principal {
        user_id: user.id,
        team_id,
        name: user.name,
        role,
        token_id: 0,
    }
}

/// The `extensions.code` of the first error, if any.
pub fn error_code(body: &Value) -> Option<&str> {
    body["errors"][0]["extensions"]["code"].as_str()
}

pub type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

pub async fn ws_connect(s: &TestServer) -> Ws {
    let mut req = s
        .ws_url()
        .into_client_request()
        .unwrap_or_else(|e| panic!("{e}"));
    req.headers_mut().insert(
        "Sec-WebSocket-Protocol",
        "graphql-transport-ws"
            .parse()
            .unwrap_or_else(|e| panic!("{e}")),
    );
    let (ws, _) = tokio_tungstenite::connect_async(req)
        .await
        .unwrap_or_else(|e| panic!("ws connect: {e}"));
    ws
}

/// The next text message as JSON, or the close code; bounded in time (60 s).
pub async fn ws_next(ws: &mut Ws) -> Result<Value, Option<u16>> {
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(60), ws.next())
            .await
            .unwrap_or_else(|_| panic!("no WebSocket message within 60 s"));
        match msg {
            Some(Ok(Message::Text(t))) => {
                return Ok(serde_json::from_str(t.as_str()).unwrap_or(Value::Null))
            }
            Some(Ok(Message::Close(frame))) => return Err(frame.map(|f| u16::from(f.code))),
            Some(Ok(_)) => continue,
            Some(Err(_)) | None => return Err(None),
        }
    }
}

/// Connects and sends `connection_init` with `payload`; returns the first reply.
pub async fn ws_init(s: &TestServer, payload: Value) -> (Ws, Result<Value, Option<u16>>) {
    let mut ws = ws_connect(s).await;
    let init = json!({ "type": "connection_init", "payload": payload });
    ws.send(Message::text(init.to_string()))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let first = ws_next(&mut ws).await;
    (ws, first)
}

/// Connects with `token` as the bearer and checks that the server acknowledges.
pub async fn ws_open(s: &TestServer, token: &str) -> Ws {
    let (ws, ack) = ws_init(s, json!({ "authorization": format!("Bearer {token}") })).await;
    assert_eq!(
        ack.ok().map(|v| v["type"].clone()),
        Some(json!("connection_ack"))
    );
    ws
}

/// The stages of a job's events, consecutive repeats folded (`embedding` k/n counts once).
pub fn stages(events: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in events {
        let s = e["stage"].as_str().unwrap_or_default().to_owned();
        if out.last() != Some(&s) {
            out.push(s);
        }
    }
    out
}
