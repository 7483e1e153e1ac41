//! Test harness: a real Cairn server in this process, on port 0, over a real database.
//!
//! - [`Backend::Sqlite`]: a fresh data directory per server.
//! - [`Backend::Postgres`]: a fresh database per server, created on the PostgreSQL named by
//!   `CAIRN_TEST_PG_URL` (the README's test command starts one with pgvector and sets it).
//!   Without it the PostgreSQL tests fail, they never skip silently.
//!
//! [`both_backends!`] turns one `async fn(Backend)` into a test per backend.

use std::path::PathBuf;

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

/// The repository root (for the console's build output).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
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

async fn drop_pg_database(name: &str) {
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

impl TestServer {
    pub async fn start(backend: Backend) -> TestServer {
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
        Self::start_with(backend, config, data_dir, pg_database).await
    }

    async fn start_with(
        backend: Backend,
        config: Config,
        data_dir: tempfile::TempDir,
        pg_database: Option<String>,
    ) -> TestServer {
        let running = app::start(&config)
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

/// The `extensions.code` of the first error, if any.
pub fn error_code(body: &Value) -> Option<&str> {
    body["errors"][0]["extensions"]["code"].as_str()
}
