//! Jobs survive a killed server, and several instances share one PostgreSQL.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use cairn_tests::{
    both_backends, fresh_pg_database, repo_root, require_model, ws_init, ws_next, Backend,
    TestServer,
};
use futures_util::SinkExt;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

both_backends!(
    sigkill_while_embedding_then_restart,
    cli_ingest_beside_a_running_server
);

/// The `cairn` binary cargo built next to this test.
fn cairn_bin() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("{e}"));
    let bin = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|d| d.join("cairn"))
        .unwrap_or_default();
    assert!(
        bin.is_file(),
        "{} is missing: run `cargo test --workspace` (it builds the binary)",
        bin.display()
    );
    bin
}

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(bin: &PathBuf, data: &std::path::Path, db: Option<&str>, port: u16) -> Proc {
    let mut cmd = Command::new(bin);
    cmd.arg("serve")
        .env("CAIRN_DATA_DIR", data)
        .env("CAIRN_BIND", format!("127.0.0.1:{port}"))
        .env("CAIRN_JOB_LEASE_SECS", "3")
        // The tests search in tight loops; the rate limit has its own test.
        .env("CAIRN_SEARCH_RATE", "0")
        .env("CAIRN_CONSOLE_DIR", repo_root().join("frontend/dist"))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    match db {
        Some(u) => cmd.env("DATABASE_URL", u),
        None => cmd.env_remove("DATABASE_URL"),
    };
    Proc(
        cmd.spawn()
            .unwrap_or_else(|e| panic!("cannot start cairn: {e}")),
    )
}

async fn wait_healthy(url: &str) {
    for _ in 0..300 {
        if let Ok(r) = reqwest::get(format!("{url}/healthz")).await {
            if r.status().is_success() {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{url} never became healthy");
}

async fn gql(url: &str, token: &str, query: &str, vars: Value) -> Value {
    reqwest::Client::new()
        .post(format!("{url}/graphql"))
        .bearer_auth(token)
        .json(&json!({ "query": query, "variables": vars }))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .json()
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// A long text: many chunks, so that embedding takes a while.
fn long_text() -> String {
    (0..400)
        .map(|i| format!("## Part {i}\n\nParagraph {i} tells how the marmots of ridge {i} rebuilt cairn number {} after the winter storms, stone by stone, with notes on the weather, the lichens and the rope.\n", i * 7))
        .collect()
}

async fn sigkill_while_embedding_then_restart(b: Backend) {
    require_model();
    let bin = cairn_bin();
    let data = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let db = match b {
        Backend::Postgres => Some(fresh_pg_database().await.0),
        Backend::Sqlite => None,
    };
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("{e}"));
    let url = format!("http://127.0.0.1:{port}");
    let mut first = spawn(&bin, data.path(), db.as_deref(), port);
    wait_healthy(&url).await;
    let token = std::fs::read_to_string(data.path().join("initial-token"))
        .unwrap_or_else(|e| panic!("{e}"))
        .trim()
        .to_owned();
    let c = gql(
        &url,
        &token,
        "mutation { createCorpus(name: \"durable\") { id } }",
        json!({}),
    )
    .await;
    let corpus = c["data"]["createCorpus"]["id"].clone();
    let job = gql(
        &url,
        &token,
        "mutation($c: ID!, $t: String!) { ingestText(corpusId: $c, title: \"Ridge log\", text: $t) { id } }",
        json!({ "c": corpus, "t": long_text() }),
    )
    .await;
    let job_id = job["data"]["ingestText"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(!job_id.is_empty(), "{job}");

    // Watch until the job is embedding, then kill the server without warning.
    let probe = TestServer::probe(&url);
    let (mut ws, ack) = ws_init(
        &probe,
        json!({ "authorization": format!("Bearer {token}") }),
    )
    .await;
    assert_eq!(
        ack.ok().map(|v| v["type"].clone()),
        Some(json!("connection_ack"))
    );
    let q = "subscription($id: ID!) { jobProgress(id: $id) { stage done total state } }";
    ws.send(Message::text(
        json!({ "id": "1", "type": "subscribe", "payload": { "query": q, "variables": { "id": job_id } } }).to_string(),
    ))
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    loop {
        let m = ws_next(&mut ws)
            .await
            .unwrap_or_else(|c| panic!("closed {c:?}"));
        let ev = &m["payload"]["data"]["jobProgress"];
        assert_ne!(
            ev["state"], "SUCCEEDED",
            "the job finished before it could be interrupted"
        );
        if ev["stage"] == "embedding" && ev["done"].as_i64().unwrap_or(0) > 0 {
            break;
        }
    }
    let _ = first.0.kill(); // SIGKILL
    let _ = first.0.wait();
    drop(ws);

    // Restart on the same data: the lease expires and the job runs again to the end.
    let _second = spawn(&bin, data.path(), db.as_deref(), port);
    wait_healthy(&url).await;
    let mut state = Value::Null;
    for _ in 0..600 {
        let j = gql(
            &url,
            &token,
            "query($id: ID!) { job(id: $id) { state attempts error } }",
            json!({ "id": job_id }),
        )
        .await;
        state = j["data"]["job"].clone();
        if state["state"] == "SUCCEEDED" || state["state"] == "FAILED" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_eq!(state["state"], "SUCCEEDED", "{state}");
    assert!(
        state["attempts"].as_i64().unwrap_or(0) >= 2,
        "it ran again: {state}"
    );
    let docs = gql(
        &url,
        &token,
        "query($c: ID!) { corpus(id: $c) { documentCount documents { edges { node { title chunkCount } } } } }",
        json!({ "c": corpus }),
    )
    .await;
    assert_eq!(
        docs["data"]["corpus"]["documentCount"], 1,
        "exactly once: {docs}"
    );
    assert!(
        docs["data"]["corpus"]["documents"]["edges"][0]["node"]["chunkCount"]
            .as_i64()
            .unwrap_or(0)
            > 10
    );
}

/// PostgreSQL only: SQLite is the single-instance embedded mode by design.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_share_jobs_and_events_postgres() {
    require_model();
    let a = TestServer::start(Backend::Postgres).await;
    let b = a.second_instance().await;
    let c = a
        .gql_ok(
            &a.owner_token,
            "mutation { createCorpus(name: \"shared\") { id } }",
            json!({}),
        )
        .await["createCorpus"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();

    // A subscriber on instance B.
    let (mut ws, ack) = ws_init(
        &b,
        json!({ "authorization": format!("Bearer {}", b.owner_token) }),
    )
    .await;
    assert_eq!(
        ack.ok().map(|v| v["type"].clone()),
        Some(json!("connection_ack"))
    );
    ws.send(Message::text(
        json!({ "id": "j", "type": "subscribe", "payload": { "query": "subscription($c: ID) { jobs(corpusId: $c) { jobId state stage } }", "variables": { "c": c } } }).to_string(),
    ))
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    tokio::time::sleep(Duration::from_millis(300)).await;

    // Jobs queued through instance A; both instances' workers compete for them.
    let n = 8;
    let mut ids = Vec::new();
    for i in 0..n {
        let text = format!("# Note {i}\n\nShared note number {i} about the cairn on peak {i}.\n");
        ids.push(
            a.upload_ok(
                &a.owner_token,
                &c,
                &format!("note-{i}.md"),
                text.into_bytes(),
            )
            .await,
        );
    }
    let mut done = std::collections::HashSet::new();
    let mut stages_seen = 0;
    while done.len() < n {
        let m = ws_next(&mut ws)
            .await
            .unwrap_or_else(|c| panic!("closed {c:?}"));
        let ev = &m["payload"]["data"]["jobs"];
        stages_seen += 1;
        if ev["state"] == "SUCCEEDED" {
            done.insert(ev["jobId"].as_str().unwrap_or_default().to_owned());
        }
        assert_ne!(ev["state"], "FAILED", "{ev}");
    }
    assert!(stages_seen > n * 3, "B sees every stage, not only the ends");
    for id in &ids {
        let j = b
            .gql_ok(
                &b.owner_token,
                "query($id: ID!) { job(id: $id) { state attempts } }",
                json!({ "id": id }),
            )
            .await;
        assert_eq!(j["job"]["state"], "SUCCEEDED");
        assert_eq!(j["job"]["attempts"], 1, "each job ran exactly once");
    }
    let count = b
        .gql_ok(
            &b.owner_token,
            "query($c: ID!) { corpus(id: $c) { documentCount } }",
            json!({ "c": c }),
        )
        .await;
    assert_eq!(count["corpus"]["documentCount"], n);
    b.stop().await;
    a.stop().await;
}

/// PostgreSQL only: the LISTEN connection behind the event bus ends with `Running::stop()`,
/// and is not reopened (before the fix it kept reconnecting after the server had stopped).
/// Observed in `pg_stat_activity`, polled (never timed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_listener_ends_on_stop_postgres() {
    use sea_orm::{ConnectionTrait, Database, Statement};
    let mut s = TestServer::start(Backend::Postgres).await;
    let url = s.config.database_url.clone().unwrap_or_default();
    let db = url.rsplit('/').next().unwrap_or_default().to_owned();
    assert!(db.starts_with("cairn_t_"), "{url}");
    let admin = Database::connect(cairn_tests::pg_admin_url().as_str())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let listeners = || {
        let admin = &admin;
        let sql = format!(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = '{db}' AND query ILIKE 'LISTEN%'"
        );
        async move {
            admin
                .query_one_raw(Statement::from_string(admin.get_database_backend(), sql))
                .await
                .unwrap_or_else(|e| panic!("{e}"))
                .and_then(|r| r.try_get_by_index::<i64>(0).ok())
                .unwrap_or(-1)
        }
    };
    let mut seen = 0;
    for _ in 0..200 {
        seen = listeners().await;
        if seen > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(seen, 1, "the running server listens once");
    if let Some(r) = s.running.take() {
        r.stop().await.unwrap_or_else(|e| panic!("{e}"));
    }
    for _ in 0..200 {
        seen = listeners().await;
        if seen == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(seen, 0, "the LISTEN connection outlived stop()");
    // And it stays closed: still none after the listener's 1 s reconnection delay.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        listeners().await,
        0,
        "the listener reconnected after stop()"
    );
    let _ = admin.close().await;
    s.stop().await;
}

/// Issue 12: the README's own path. `cairn serve` runs (its vector index already loaded by a
/// search) and `cairn ingest` loads a folder (8 short notes and 60 real news articles) into
/// the same `./data`. The CLI exits, with a
/// summary, however the jobs were shared between its workers and the server's; the running
/// server's search finds what the CLI stored, without a restart; a failing file makes the CLI
/// exit non-zero with its reason.
async fn cli_ingest_beside_a_running_server(b: Backend) {
    require_model();
    let model = std::env::var("CAIRN_EMBED_MODEL").unwrap_or_default();
    let bin = cairn_bin();
    let data = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let db = match b {
        Backend::Postgres => Some(fresh_pg_database().await.0),
        Backend::Sqlite => None,
    };
    let free_port = || {
        TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let _server = spawn(&bin, data.path(), db.as_deref(), port);
    wait_healthy(&url).await;
    // On PostgreSQL a second server shares the database (scale-out); the searches below ask
    // it, so what the CLI stored is checked on an instance that neither ran nor watched it.
    let (_second, check_url) = match &db {
        Some(_) => {
            let port2 = free_port();
            let url2 = format!("http://127.0.0.1:{port2}");
            let second = spawn(&bin, data.path(), db.as_deref(), port2);
            wait_healthy(&url2).await;
            (Some(second), url2)
        }
        None => (None, url.clone()),
    };
    let token = std::fs::read_to_string(data.path().join("initial-token"))
        .unwrap_or_else(|e| panic!("{e}"))
        .trim()
        .to_owned();
    gql(
        &url,
        &token,
        "mutation { createCorpus(name: \"wiki\") { id } }",
        json!({}),
    )
    .await;
    let search = "query($q: String!, $m: SearchMode! = VECTOR) { search(query: $q, mode: $m, topK: 3) { results { documentTitle } } }";
    // Warm: the server reads its vector index now, before the CLI writes anything.
    let warm = gql(&url, &token, search, json!({ "q": "anything" })).await;
    assert!(warm.get("errors").is_none(), "{warm}");

    let topics = [
        (
            "glaciers",
            "Glaciers carve deep valleys as the ice slowly flows downhill.",
        ),
        (
            "volcanoes",
            "Volcanoes erupt molten lava and ash from the mantle.",
        ),
        (
            "coral",
            "Coral reefs are built by colonies of tiny marine animals.",
        ),
        (
            "bees",
            "Honey bees dance to tell the hive where flowers are.",
        ),
        (
            "comets",
            "Comets grow bright tails of gas when they near the sun.",
        ),
        (
            "tides",
            "The moon's gravity raises the ocean tides twice a day.",
        ),
        (
            "bread",
            "Yeast makes bread dough rise by releasing carbon dioxide.",
        ),
        ("chess", "In chess the knight moves in the shape of an L."),
    ];
    let src = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    for (name, text) in topics {
        std::fs::write(
            src.path().join(format!("{name}.md")),
            format!("# {name}\n\n{text}\n"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    }
    // And 60 real news articles nobody here wrote (gensim's lee_background.cor, fetched by
    // the test command), one file each.
    let lee_path = std::env::var("CAIRN_TEST_LEE_CORPUS").unwrap_or_else(|_| {
        panic!("CAIRN_TEST_LEE_CORPUS is not set: run scripts/fetch-eval-texts.sh (the README's test command does)")
    });
    let lee_text = std::fs::read_to_string(&lee_path).unwrap_or_else(|e| panic!("{lee_path}: {e}"));
    let lee: Vec<(String, String)> = lee_text
        .lines()
        .filter(|l| l.split_whitespace().count() >= 40)
        .take(60)
        .enumerate()
        .map(|(i, l)| (format!("lee-{i:03}"), l.trim().to_owned()))
        .collect();
    assert_eq!(lee.len(), 60);
    std::fs::create_dir(src.path().join("news")).unwrap_or_else(|e| panic!("{e}"));
    for (name, text) in &lee {
        std::fs::write(src.path().join("news").join(format!("{name}.txt")), text)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let files = topics.len() + lee.len();
    let run = |dir: PathBuf| {
        let mut cmd = Command::new(&bin);
        cmd.args(["ingest", "--corpus", "wiki"])
            .arg(dir)
            .env("CAIRN_DATA_DIR", data.path())
            .env("CAIRN_EMBED_MODEL", &model)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        match &db {
            Some(u) => cmd.env("DATABASE_URL", u),
            None => cmd.env_remove("DATABASE_URL"),
        };
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{e}"));
        // Bounded: before the fix the CLI never exited when the server took some jobs.
        let deadline = std::time::Instant::now() + Duration::from_secs(300);
        loop {
            if let Ok(Some(_)) = child.try_wait() {
                break;
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                panic!("cairn ingest did not exit within 300 s beside a running server");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // The server's `jobs` subscriber, open before the CLI starts.
    let probe = TestServer::probe(&url);
    let (mut ws, ack) = ws_init(
        &probe,
        json!({ "authorization": format!("Bearer {token}") }),
    )
    .await;
    assert_eq!(
        ack.ok().map(|v| v["type"].clone()),
        Some(json!("connection_ack"))
    );
    ws.send(Message::text(
        json!({ "id": "jobs", "type": "subscribe", "payload": { "query": "subscription { jobs { jobId kind state stage } }" } })
            .to_string(),
    ))
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The CLI is another process; waiting for it here blocks only this test's thread.
    let (ok, err) = run(src.path().to_path_buf());
    assert!(ok, "cairn ingest failed: {err}");
    assert!(
        err.contains(&format!("{files} files"))
            && err.contains(&format!("{files} new"))
            && err.contains("0 failed"),
        "no summary: {err}"
    );
    // The subscriber on the server saw every job the CLI queued end `searchable`, whichever
    // process ran it (SQLite's bus does not cross processes; the subscription polls).
    let mut searchable = std::collections::BTreeSet::new();
    while searchable.len() < files {
        let m = ws_next(&mut ws)
            .await
            .unwrap_or_else(|c| panic!("socket closed ({c:?}); saw {searchable:?}"));
        let ev = &m["payload"]["data"]["jobs"];
        if ev["stage"] == "searchable" {
            searchable.insert(ev["jobId"].to_string());
        }
    }
    // The running server sees every document the CLI stored, without a restart.
    for (name, text) in topics {
        for mode in ["VECTOR", "LEXICAL", "HYBRID"] {
            let r = gql(&check_url, &token, search, json!({ "q": text, "m": mode })).await;
            assert_eq!(
                r["data"]["search"]["results"][0]["documentTitle"], name,
                "the running server's {mode} search did not find what the CLI stored: {r}"
            );
        }
    }
    // The same through the server's API (`--server URL`, token from the environment).
    let remote_src = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let remote_topics = [
        (
            "lighthouses",
            "Lighthouses guide ships at night with a rotating beam.",
        ),
        (
            "origami",
            "Origami folds a single square of paper into a crane.",
        ),
    ];
    for (name, text) in remote_topics {
        std::fs::write(remote_src.path().join(format!("{name}.txt")), text)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let out = Command::new(&bin)
        .args(["ingest", "--corpus", "remote", "--server", &url])
        .arg(remote_src.path())
        .env("CAIRN_TOKEN", &token)
        .env(
            "CAIRN_DATA_DIR",
            "/nonexistent/the-cli-needs-no-database-here",
        )
        .env_remove("DATABASE_URL")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "cairn ingest --server failed: {err}");
    assert!(err.contains("2 files") && err.contains("2 new"), "{err}");
    for (name, text) in remote_topics {
        let r = gql(&url, &token, search, json!({ "q": text })).await;
        assert_eq!(
            r["data"]["search"]["results"][0]["documentTitle"], name,
            "{r}"
        );
    }
    // Each article, asked for by its opening 40 words (inside its first chunk), is among the
    // first five in every mode.
    let top5 = "query($q: String!, $m: SearchMode!) { search(query: $q, mode: $m, topK: 5) { results { documentTitle } } }";
    for (name, text) in &lee {
        let q: String = text
            .split_whitespace()
            .take(40)
            .collect::<Vec<_>>()
            .join(" ");
        for mode in ["VECTOR", "LEXICAL", "HYBRID"] {
            let r = gql(&check_url, &token, top5, json!({ "q": q, "m": mode })).await;
            let titles: Vec<&str> = r["data"]["search"]["results"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|h| h["documentTitle"].as_str())
                        .collect()
                })
                .unwrap_or_default();
            assert!(
                titles.contains(&name.as_str()),
                "{mode} search on the running server missed {name} for {q:?}: {titles:?} {r}"
            );
        }
    }
    // A failing file: non-zero status, its reason in the summary.
    let bad = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        bad.path().join("broken.pdf"),
        b"%PDF-1.7\nthis is not a pdf at all",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let (ok, err) = run(bad.path().to_path_buf());
    assert!(!ok, "a failed file must fail the command: {err}");
    assert!(
        err.contains("1 failed") && err.contains("broken.pdf"),
        "{err}"
    );
}
