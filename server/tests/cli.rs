//! The `cairn` command line itself: migrate, user create, token create, token revoke.
//!
//! Runs on SQLite only: the commands call the same `store` functions that the end-to-end
//! suite exercises on both backends; what this test adds is the command line (parsing,
//! output, exit codes), which does not depend on the backend.

use std::process::Command;

use cairn::config::Config;
use cairn::service::Cairn;
use cairn::Store;

fn cairn(dir: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(args)
        .env("CAIRN_DATA_DIR", dir)
        .env_remove("DATABASE_URL")
        .output()
        .unwrap_or_else(|e| panic!("cannot run cairn: {e}"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        String::from_utf8_lossy(&out.stderr).trim().to_owned(),
    )
}

#[tokio::test]
async fn users_and_tokens_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (ok, out, _) = cairn(dir.path(), &["migrate"]);
    assert!(ok, "{out}");
    // No default team yet: a clear refusal.
    let (ok, _, err) = cairn(dir.path(), &["user", "create", "--name", "bob"]);
    assert!(!ok);
    assert!(err.contains("--team"), "{err}");
    let (ok, _, err) = cairn(
        dir.path(),
        &[
            "user", "create", "--name", "bob", "--role", "root", "--team", "acme",
        ],
    );
    assert!(!ok, "unknown roles are refused: {err}");

    let (ok, user_id, err) = cairn(
        dir.path(),
        &[
            "user", "create", "--name", "bob", "--role", "viewer", "--team", "acme",
        ],
    );
    assert!(ok, "{err}");
    let (ok, token, err) = cairn(
        dir.path(),
        &["token", "create", "--user", &user_id, "--label", "cli"],
    );
    assert!(ok, "{err}");
    let token_id = err.split_whitespace().nth(1).unwrap_or_default().to_owned();

    let cfg = Config::with_data_dir(dir.path());
    let store = Store::connect(None, &cfg.data_dir)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let cairn_core = Cairn::offline(store, dir.path());
    let p = cairn_core
        .authenticate(&token)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.name, "bob");
    assert_eq!(p.role, cairn::domain::Role::Viewer);

    let (ok, out, err) = cairn(dir.path(), &["token", "revoke", &token_id]);
    assert!(ok, "{err}");
    assert_eq!(out, "revoked");
    assert!(
        cairn_core.authenticate(&token).await.is_err(),
        "a revoked token must not authenticate"
    );
    let (ok, out, _) = cairn(dir.path(), &["token", "revoke", &token_id]);
    assert!(ok);
    assert_eq!(out, "already revoked");
    let (ok, _, _) = cairn(dir.path(), &["token", "revoke", "424242"]);
    assert!(!ok, "revoking a missing token fails");
}

/// `cairn corpus create` makes team and system corpora; `cairn corpus list` shows what a
/// team sees (its own and the system corpora, never another team's); a system corpus stays
/// out of a team's `[KNOWLEDGE]` line and takes no upload through a token.
#[tokio::test]
async fn corpora_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let run = |args: &[&str]| cairn(dir.path(), args);
    let (ok, _, err) = run(&[
        "user", "create", "--name", "ann", "--role", "owner", "--team", "acme",
    ]);
    assert!(ok, "{err}");
    let (ok, _, err) = run(&[
        "user", "create", "--name", "bo", "--role", "owner", "--team", "beta",
    ]);
    assert!(ok, "{err}");

    let (ok, team_corpus, err) = run(&["corpus", "create", "handbook", "--team", "acme"]);
    assert!(ok, "{err}");
    let (ok, system_corpus, err) = run(&[
        "corpus",
        "create",
        "operational_patterns",
        "--system",
        "--description",
        "how we work",
    ]);
    assert!(ok, "{err}");
    assert!(err.contains("system corpus"), "{err}");

    // Refusals: a duplicate (team or system), --team with --system, an empty name.
    let (ok, _, err) = run(&["corpus", "create", "handbook", "--team", "acme"]);
    assert!(
        !ok && err.contains("exists already") && err.contains(&team_corpus),
        "{err}"
    );
    let (ok, _, err) = run(&["corpus", "create", "operational_patterns", "--system"]);
    assert!(!ok && err.contains("exists already"), "{err}");
    let (ok, _, err) = run(&["corpus", "create", "x", "--system", "--team", "acme"]);
    assert!(!ok && err.contains("--team"), "{err}");
    let (ok, _, _) = run(&["corpus", "create", "  ", "--team", "acme"]);
    assert!(!ok, "an empty name is refused");

    let lines = |team: &str| -> Vec<String> {
        let (ok, out, err) = cairn(dir.path(), &["corpus", "list", "--team", team]);
        assert!(ok, "{err}");
        out.lines().map(str::to_owned).collect()
    };
    assert_eq!(
        lines("acme"),
        vec![
            format!("{team_corpus}\tteam\thandbook"),
            format!("{system_corpus}\tsystem\toperational_patterns"),
        ]
    );
    assert_eq!(
        lines("beta"),
        vec![format!("{system_corpus}\tsystem\toperational_patterns")],
        "another team sees the system corpus, not acme's"
    );

    // Through a token: the summary names the team's corpus only, and the system corpus
    // takes no upload.
    let store = Store::connect(None, dir.path())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let team = store
        .team_by_name("acme")
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("no team"));
    let owner = store
        .first_owner(team.id)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("owner"));
    let p = cairn::service::principal_of(&owner, 0).unwrap_or_else(|e| panic!("{e}"));
    let core = Cairn::offline(store, dir.path());
    let summary = core
        .knowledge_summary(&p)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_default();
    assert!(summary.contains("handbook"), "{summary}");
    assert!(!summary.contains("operational_patterns"), "{summary}");
    let system_id: i64 = system_corpus.parse().unwrap_or_else(|e| panic!("{e}"));
    let refused = core
        .ingest_text(&p, system_id, "note", "a note".into(), None, None)
        .await;
    assert!(
        matches!(refused, Err(cairn::service::ServiceError::Auth(_))),
        "an owner's token cannot write a system corpus: {:?}",
        refused.map(|j| j.id)
    );
}

#[tokio::test]
async fn bulk_ingest_from_the_command_line() {
    let model = std::env::var("CAIRN_EMBED_MODEL").unwrap_or_else(|_| {
        panic!("CAIRN_EMBED_MODEL is not set: run scripts/fetch-model.sh (the README's test command does)")
    });
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (ok, _, err) = cairn(
        dir.path(),
        &[
            "user", "create", "--name", "boss", "--role", "owner", "--team", "default",
        ],
    );
    assert!(ok, "{err}");
    let src = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        src.path().join("a.md"),
        "# Alpha\n\nThe alpha note mentions granite.\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir(src.path().join("sub")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(src.path().join("sub/b.txt"), "Beta is a plain text note.\n")
        .unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(src.path().join("sub/empty.txt"), "").unwrap_or_else(|e| panic!("{e}"));
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["ingest", "--corpus", "notes"])
        .arg(src.path())
        .env("CAIRN_DATA_DIR", dir.path())
        .env("CAIRN_EMBED_MODEL", &model)
        .env_remove("DATABASE_URL")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "cairn ingest failed: {stderr}");

    let store = Store::connect(None, dir.path())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let team = store
        .team_by_name("default")
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("no team"));
    let corpus = store
        .team_corpus_by_name(team.id, "notes")
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("the corpus was created"));
    let owner = store
        .first_owner(team.id)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("owner"));
    let p = cairn::auth::Principal {
        user_id: owner.id,
        team_id: team.id,
        name: owner.name,
        role: cairn::domain::Role::Owner,
        token_id: 0,
    };
    let docs = store
        .corpora_documents(&p, &[corpus.id], None, 10)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut names: Vec<(String, i32)> = docs
        .into_iter()
        .map(|d| (d.filename.unwrap_or_default(), d.chunk_count))
        .collect();
    names.sort();
    assert_eq!(
        names,
        vec![
            ("a.md".into(), 1),
            ("b.txt".into(), 1),
            ("empty.txt".into(), 0)
        ]
    );
    // A missing path is refused with a clear message and a failing status.
    let (ok, _, err) = cairn(
        dir.path(),
        &["ingest", "--corpus", "notes", "/nonexistent/path"],
    );
    assert!(!ok);
    assert!(err.contains("no such file"), "{err}");
}

/// The extraction child enforces its memory limit: a file too big for it is a crash (the
/// ingest job fails with that reason), never the server's problem; a small file extracts.
#[test]
fn extraction_child_is_memory_bounded() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let small = dir.path().join("small.md");
    std::fs::write(&small, "# Title\n\nA small note.\n").unwrap_or_else(|e| panic!("{e}"));
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["__extract", "--filename", "small.md", "--memory-mb", "256"])
        .arg(&small)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("A small note."));
    // The parent never parses the file.
    // The first line is the media type the child sniffed and the pages OCR read.
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("text/markdown\t0\n"));

    let big = dir.path().join("big.txt");
    let line = "all work and no play makes a dull marmot\n".repeat(1024);
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&big).unwrap_or_else(|e| panic!("{e}"));
        for _ in 0..8000 {
            f.write_all(line.as_bytes())
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["__extract", "--filename", "big.txt", "--memory-mb", "200"])
        .arg(&big)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        !out.status.success(),
        "a 330 MB text cannot be extracted within 200 MB of address space"
    );
    assert!(out.stdout.is_empty());
}

/// The extraction child reads scans by OCR when the parent hands it Tesseract (`--ocr-…`),
/// and `cairn ingest` (which extracts in that child) stores a scan as searchable chunks. The
/// scan is made at test time from a real PDF (`scripts/make-scan.sh`: no text layer).
#[test]
fn the_extraction_child_reads_scans_by_ocr() {
    let pdf = std::env::var("CAIRN_TEST_REAL_PDF").unwrap_or_else(|_| {
        panic!("CAIRN_TEST_REAL_PDF is not set: scripts/fetch-test-pdf.sh fetches a real PDF (the README's test command does)")
    });
    let model = std::env::var("CAIRN_EMBED_MODEL").unwrap_or_else(|_| {
        panic!("CAIRN_EMBED_MODEL is not set: run scripts/fetch-model.sh (the README's test command does)")
    });
    let src = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let scan = src.path().join("scan.pdf");
    let script = manifest_dir().join("../scripts/make-scan.sh");
    let made = Command::new("bash")
        .arg(&script)
        .args([pdf.as_str(), "4", "5"])
        .arg(&scan)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );

    // Without OCR options the child finds no text; with them, two pages of it.
    let child = |ocr: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args(["__extract", "--filename=scan.pdf", "--memory-mb=1024"])
            .args(ocr)
            .arg("--")
            .arg(&scan)
            .output()
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let out = child(&[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "application/pdf\t0\n");
    let out = child(&[
        "--ocr-tesseract=/usr/bin/tesseract",
        "--ocr-pdftoppm=/usr/bin/pdftoppm",
        "--ocr-prlimit=/usr/bin/prlimit",
        "--ocr-page-mb=512",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("application/pdf\t2\n[Page 1]"), "{text}");
    assert!(
        text.contains("[Page 2]") && text.contains("Supported Platforms"),
        "{text}"
    );

    // `cairn ingest` finds OCR on PATH and stores the scan with chunks.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (ok, _, err) = cairn(
        dir.path(),
        &[
            "user", "create", "--name", "boss", "--role", "owner", "--team", "default",
        ],
    );
    assert!(ok, "{err}");
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["ingest", "--corpus", "scans"])
        .arg(&scan)
        .env("CAIRN_DATA_DIR", dir.path())
        .env("CAIRN_EMBED_MODEL", &model)
        .env_remove("DATABASE_URL")
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "cairn ingest failed: {stderr}");
    assert!(stderr.contains("1 new, 0 duplicate, 0 failed"), "{stderr}");
    assert!(stderr.contains("; 2 pages read by OCR"), "{stderr}");
    assert!(!stderr.contains("; 0 chunks"), "{stderr}");
}

/// This crate's directory: the run-time `CARGO_MANIFEST_DIR` cargo sets for `cargo test` first,
/// the compile-time one only outside cargo (a shared target dir can hold a binary built from
/// another checkout, whose compile-time path is stale).
fn manifest_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}
