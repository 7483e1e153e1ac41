//! First start on an empty database: one team, one owner, one token shown once and saved
//! with mode 0600; later starts create nothing.

use cairn::app;
use cairn_tests::{both_backends, fresh_pg_database, repo_root, Backend};

both_backends!(first_start_bootstraps_once);

async fn first_start_bootstraps_once(b: Backend) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut cfg = cairn::config::Config::with_data_dir(dir.path());
    cfg.bind = "127.0.0.1:0".parse().unwrap_or_else(|e| panic!("{e}"));
    cfg.console_dir = repo_root().join("frontend/dist");
    if b == Backend::Postgres {
        cfg.database_url = Some(fresh_pg_database().await.0);
    }

    let first = app::start(&cfg).await.unwrap_or_else(|e| panic!("{e}"));
    let boot = first
        .bootstrap
        .as_ref()
        .unwrap_or_else(|| panic!("no bootstrap on an empty database"));
    assert_eq!(boot.team.name, "default");
    assert_eq!(boot.owner.name, "admin");
    let token = boot.token.clone();
    let path = dir.path().join("initial-token");
    let saved = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(saved.trim(), token);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path)
            .unwrap_or_else(|e| panic!("{e}"))
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "the token file must be private");
    }
    let p = first
        .cairn
        .authenticate(&token)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.name, "admin");
    first.stop().await.unwrap_or_else(|e| panic!("{e}"));

    // A restart finds the team and creates nothing; the first token still works.
    let second = app::start(&cfg).await.unwrap_or_else(|e| panic!("{e}"));
    assert!(second.bootstrap.is_none());
    assert_eq!(second.cairn.store.team_count().await.unwrap_or_default(), 1);
    second
        .cairn
        .authenticate(&token)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    second.stop().await.unwrap_or_else(|e| panic!("{e}"));
}

/// `scripts/run.sh` starts the server while the console may still be building: the server
/// must not decide at start-up that there is no console. `/` says the console is missing,
/// then (while `<dir>.building` exists) that it is being built, with a page that reloads
/// itself; once `index.html` is written, the console and its client routes are served, and
/// GraphiQL's page appears with its files. The API answers throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_appears_once_built() {
    let parent = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dist = parent.path().join("dist");
    let console_dir = dist.clone();
    let s = cairn_tests::TestServer::start_tuned(Backend::Sqlite, move |c| {
        c.console_dir = console_dir;
    })
    .await;

    let (status, body) = s.get("/").await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("not built"), "{body}");
    assert!(!body.contains("http-equiv=\"refresh\""), "{body}");
    let (status, _) = s.get("/graphql").await;
    assert_eq!(status, 503, "GraphiQL's page without its files");
    let (status, body) = s.get("/readyz").await;
    assert_eq!((status, body.as_str()), (200, "ready"));

    std::fs::write(parent.path().join("dist.building"), "pid 1").unwrap_or_else(|e| panic!("{e}"));
    let (status, body) = s.get("/corpora/7").await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("being built"), "{body}");
    assert!(body.contains("http-equiv=\"refresh\""), "{body}");
    let me = s
        .gql_ok(
            &s.owner_token,
            "{ me { user { name } } }",
            serde_json::json!({}),
        )
        .await;
    assert_eq!(
        me["me"]["user"]["name"], "admin",
        "the API answers meanwhile"
    );

    std::fs::create_dir_all(dist.join("graphiql")).unwrap_or_else(|e| panic!("{e}"));
    let index = "<!doctype html><title>Cairn console canary-index</title>";
    std::fs::write(dist.join("index.html"), index).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dist.join("app.js"), "console.log('canary-asset')")
        .unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dist.join("graphiql/graphiql.min.js"), "/* graphiql */")
        .unwrap_or_else(|e| panic!("{e}"));
    std::fs::remove_file(parent.path().join("dist.building")).unwrap_or_else(|e| panic!("{e}"));
    for path in ["/", "/corpora/7", "/search?q=x"] {
        let (status, body) = s.get(path).await;
        assert_eq!((status, body.as_str()), (200, index), "{path}");
    }
    let (status, body) = s.get("/app.js").await;
    assert_eq!(
        (status, body.as_str()),
        (200, "console.log('canary-asset')")
    );
    let (status, body) = s.get("/graphql").await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("graphiql.min.js"), "{body}");
    s.stop().await;
}
