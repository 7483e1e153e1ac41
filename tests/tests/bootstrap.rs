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
