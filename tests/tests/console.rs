//! The web console in a real browser: headless Chromium driven through chromedriver
//! (fantoccini), against a test server that serves `frontend/dist` at `/`.
//!
//! Needs `/usr/bin/chromium`, `/usr/bin/chromedriver` and a built console
//! (`scripts/build-console.sh`); it fails, never skips, when one is missing.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use cairn_tests::{repo_root, Backend, TestServer};
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{json, Value};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// Upper bound for any single thing the page has to do (load, answer a login, re-render).
const WAIT: Duration = Duration::from_secs(30);

/// chromedriver on a free local port, killed when dropped.
struct ChromeDriver {
    child: Child,
    url: String,
}

impl ChromeDriver {
    fn spawn(log: &Path) -> Result<Self> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let log = std::fs::File::create(log)?;
        let child = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("cannot start {CHROMEDRIVER}"))?;
        let driver = Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        let deadline = Instant::now() + WAIT;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                bail!("chromedriver did not listen on port {port} within {WAIT:?}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(driver)
    }
}

impl Drop for ChromeDriver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn browser(driver: &ChromeDriver, profile: &Path) -> Result<Client> {
    let args = [
        "--headless=new".to_owned(),
        "--no-sandbox".to_owned(),
        "--disable-gpu".to_owned(),
        "--disable-dev-shm-usage".to_owned(),
        "--disable-quic".to_owned(),
        "--no-first-run".to_owned(),
        "--disable-background-networking".to_owned(),
        "--disable-component-update".to_owned(),
        "--disable-sync".to_owned(),
        "--window-size=1280,900".to_owned(),
        format!("--user-data-dir={}", profile.display()),
    ];
    let mut capabilities = serde_json::Map::new();
    capabilities.insert("browserName".into(), json!("chrome"));
    capabilities.insert(
        "goog:chromeOptions".into(),
        json!({ "binary": CHROMIUM, "args": args }),
    );
    ClientBuilder::new(HttpConnector::new())
        .capabilities(capabilities)
        .connect(&driver.url)
        .await
        .context("cannot open a Chromium session through chromedriver")
}

async fn wait_for(client: &Client, css: &str) -> Result<fantoccini::elements::Element> {
    client
        .wait()
        .at_most(WAIT)
        .for_element(Locator::Css(css))
        .await
        .with_context(|| format!("{css} did not appear within {WAIT:?}"))
}

/// Waits until the element matching `css` exists and its text contains `needle`.
async fn wait_for_text(client: &Client, css: &str, needle: &str) -> Result<String> {
    let deadline = Instant::now() + WAIT;
    let mut last = String::new();
    loop {
        if let Ok(el) = client.find(Locator::Css(css)).await {
            if let Ok(text) = el.text().await {
                if text.contains(needle) {
                    return Ok(text);
                }
                last = text;
            }
        }
        if Instant::now() > deadline {
            bail!("{css} did not show {needle:?} within {WAIT:?}; last text: {last:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Where the screenshots go: `$CAIRN_REPORT_DIR/console` (test.sh keeps them as artifacts),
/// else under cargo's test scratch directory.
fn artifacts() -> PathBuf {
    let dir = std::env::var_os("CAIRN_REPORT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")))
        .join("console");
    let _ = std::fs::create_dir_all(&dir);
    dir
}

/// Saves a PNG of what the browser shows now as `<name>.png`.
async fn screenshot(client: &Client, name: &str) -> Result<()> {
    let png = client.screenshot().await?;
    let shot = artifacts().join(format!("{name}.png"));
    std::fs::write(&shot, png).with_context(|| format!("writing {}", shot.display()))?;
    eprintln!("console screenshot: {}", shot.display());
    Ok(())
}

async fn stored_token(client: &Client) -> Result<Value> {
    Ok(client
        .execute("return window.localStorage.getItem('cairn.token');", vec![])
        .await?)
}

async fn sign_in(client: &Client, token: &str) -> Result<()> {
    let input = wait_for(client, "#login-form #token-input").await?;
    input.clear().await?;
    input.send_keys(token).await?;
    client
        .find(Locator::Css("#login-form #login-button"))
        .await?
        .click()
        .await?;
    Ok(())
}

async fn journey(client: &Client, server: &TestServer) -> Result<()> {
    // A fresh profile: "/" sends us to the login form.
    client.goto(&server.url).await?;
    wait_for(client, "#login-form").await?;
    assert_eq!(client.current_url().await?.path(), "/login");

    // A wrong token is refused with a readable message and not kept.
    sign_in(client, "cairn_not-a-real-token").await?;
    let error = wait_for_text(client, "#login-error", "Invalid or revoked token").await?;
    assert!(
        !error.contains("UNAUTHENTICATED"),
        "raw code shown: {error:?}"
    );
    assert_eq!(stored_token(client).await?, Value::Null);
    assert!(client.find(Locator::Css("#whoami")).await.is_err());

    // The owner's token signs in and shows who we are, and the corpus made above.
    sign_in(client, &server.owner_token).await?;
    let whoami = wait_for_text(client, "#whoami", "admin").await?;
    assert!(whoami.contains("default"), "team missing from {whoami:?}");
    assert!(client.find(Locator::Css("#login-error")).await.is_err());
    let corpora = wait_for_text(client, "#corpora-list", "Field notes").await?;
    assert!(
        corpora.contains("0 documents") && corpora.contains("0 chunks"),
        "counts missing from {corpora:?}"
    );
    assert_eq!(client.current_url().await?.path(), "/");
    assert_eq!(stored_token(client).await?, json!(server.owner_token));
    screenshot(client, "home").await?;

    // A reload keeps the session (the token comes back from localStorage).
    client.refresh().await?;
    wait_for_text(client, "#whoami", "admin").await?;

    // Logging out forgets the token and returns to the login form.
    wait_for(client, "#logout-button").await?.click().await?;
    wait_for(client, "#login-form").await?;
    assert_eq!(stored_token(client).await?, Value::Null);
    assert!(client.find(Locator::Css("#whoami")).await.is_err());

    // A client route loaded straight from the server (index.html fallback) works too,
    // and home stays closed without a token.
    client.goto(&format!("{}/login", server.url)).await?;
    wait_for(client, "#login-form").await?;
    client.goto(&server.url).await?;
    wait_for(client, "#login-form").await?;
    assert_eq!(client.current_url().await?.path(), "/login");
    Ok(())
}

/// The console's build and the browser must be there: the test fails, never skips.
fn preflight() -> Result<()> {
    let dist = repo_root().join("frontend/dist/index.html");
    ensure!(
        dist.is_file(),
        "{} is missing: build the console first with scripts/build-console.sh",
        dist.display()
    );
    for tool in [CHROMIUM, CHROMEDRIVER] {
        ensure!(
            Path::new(tool).is_file(),
            "{tool} is missing: install chromium and chromium-driver"
        );
    }
    Ok(())
}

/// A headless Chromium behind its own chromedriver, with a fresh profile.
struct Browser {
    _scratch: tempfile::TempDir,
    _driver: ChromeDriver,
    log: PathBuf,
    client: Client,
}

impl Browser {
    async fn open() -> Result<Self> {
        let scratch = tempfile::tempdir()?;
        let log = scratch.path().join("chromedriver.log");
        let driver = ChromeDriver::spawn(&log)?;
        let client = browser(&driver, &scratch.path().join("profile")).await?;
        Ok(Self {
            _scratch: scratch,
            _driver: driver,
            log,
            client,
        })
    }

    /// Closes the browser whatever happened (no Chromium outlives the test) and adds the
    /// chromedriver log's tail to a failure.
    async fn finish(self, outcome: Result<()>) -> Result<()> {
        let _ = self.client.close().await;
        outcome.with_context(|| {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(20).collect();
            format!(
                "console journey failed; chromedriver log, last lines, newest first:\n{}",
                tail.join("\n")
            )
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_login_reload_logout() -> Result<()> {
    preflight()?;
    let server = TestServer::start(Backend::Sqlite).await;
    server
        .gql_ok(
            &server.owner_token,
            "mutation { createCorpus(name: \"Field notes\") { id } }",
            Value::Null,
        )
        .await;
    let b = Browser::open().await?;
    let outcome = journey(&b.client, &server).await;
    b.finish(outcome).await
}

// ----- the full journey: upload, search, extract, mentions; then a second user -----

/// Ingestion and extraction run the real embedding model on a shared 2-core machine: a job
/// gets longer than a page render.
const JOB_WAIT: Duration = Duration::from_secs(240);

const NEWS_HEADING: &str = "Team news";
const NEWS_BODY: &str =
    "Acme Robotics is based in Berlin. The Acme Robotics team ships warehouse robots.";
const MEMO_LINES: [&str; 3] = [
    "Board memo.",
    "Acme Robotics acquired Globex Media in March.",
    "The deal stays confidential until the announcement.",
];
const MEMO_SENTENCE: &str = "Acme Robotics acquired Globex Media in March.";

/// A Word document: one Heading 1 and one paragraph (the parts the extractor reads).
fn news_docx() -> Result<Vec<u8>> {
    use std::io::Write;
    let mut buf = std::io::Cursor::new(Vec::new());
    {
        let mut z = zip::ZipWriter::new(&mut buf);
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        z.start_file("[Content_Types].xml", opts)?;
        z.write_all(br#"<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>"#)?;
        z.start_file("_rels/.rels", opts)?;
        z.write_all(br#"<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>"#)?;
        z.start_file("word/document.xml", opts)?;
        let body = format!(
            r#"<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>{NEWS_HEADING}</w:t></w:r></w:p><w:p><w:r><w:t>{NEWS_BODY}</w:t></w:r></w:p></w:body></w:document>"#
        );
        z.write_all(body.as_bytes())?;
        z.finish()?;
    }
    Ok(buf.into_inner())
}

/// A one-page PDF in Helvetica, one line per memo sentence, with a correct xref table.
fn memo_pdf() -> Vec<u8> {
    let mut text = String::from("BT /F1 12 Tf 72 720 Td 16 TL\n");
    for line in MEMO_LINES {
        text.push_str(&format!("({line}) Tj T*\n"));
    }
    text.push_str("ET\n");
    let objects = [
        "<< /Type /Catalog /Pages 2 0 R >>".to_owned(),
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_owned(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>".to_owned(),
        format!("<< /Length {} >>\nstream\n{text}endstream", text.len()),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>".to_owned(),
        "<< /Title (Board memo) >>".to_owned(),
    ];
    let mut pdf = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(pdf.len());
        pdf.extend_from_slice(format!("{} 0 obj\n{body}\nendobj\n", i + 1).as_bytes());
    }
    let xref = pdf.len();
    pdf.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for o in offsets {
        pdf.extend_from_slice(format!("{o:010} 00000 n \n").as_bytes());
    }
    pdf.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R /Info 6 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    pdf
}

const LATE_SENTENCE: &str = "The lighthouse keeper logs every passing ship at dusk.";

/// About 34,000 characters in two sections, so the text has two pages; LATE_SENTENCE is on
/// the second.
fn long_text() -> String {
    let filler = |part: &str, n: usize| {
        (0..n)
            .map(|i| format!("Entry {i} of {part}: the tide tables were checked, the lamp was trimmed and the weather noted as calm with a light westerly breeze over the harbour."))
            .collect::<Vec<_>>()
            .join("\n\n")
    };
    format!(
        "# Part one\n\n{}\n\n# Part two\n\n{}\n\n{LATE_SENTENCE}\n\n{}",
        filler("part one", 130),
        filler("part two", 90),
        filler("the end", 5)
    )
}

/// Thirty companies, one sentence each: enough entities for two pages.
fn directory_text() -> String {
    const NAMES: [&str; 30] = [
        "Alder",
        "Birch",
        "Cedar",
        "Dogwood",
        "Elmwood",
        "Firwood",
        "Ginkgo",
        "Hazel",
        "Ivywood",
        "Juniper",
        "Kapok",
        "Larch",
        "Maple",
        "Nutmeg",
        "Oakley",
        "Pinecrest",
        "Quince",
        "Rowan",
        "Spruce",
        "Teak",
        "Umber",
        "Viburnum",
        "Willow",
        "Xylia",
        "Yewdale",
        "Zelkova",
        "Acacia",
        "Baobab",
        "Cypress",
        "Douglas",
    ];
    let lines: Vec<String> = NAMES
        .iter()
        .map(|n| format!("{n} Corp is based in Berlin."))
        .collect();
    format!("# Directory\n\n{}", lines.join("\n\n"))
}

/// The ids of the entity rows shown now.
async fn entity_rows(client: &Client) -> Result<Vec<String>> {
    let v = client
        .execute(
            "return Array.from(document.querySelectorAll('#entities-list .entity-row')).map(e => e.dataset.id);",
            vec![],
        )
        .await?;
    Ok(v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default())
}

async fn wait_for_rows(client: &Client, n: usize) -> Result<Vec<String>> {
    let deadline = Instant::now() + WAIT;
    loop {
        let rows = entity_rows(client).await?;
        if rows.len() == n {
            return Ok(rows);
        }
        if Instant::now() > deadline {
            bail!("{} entity rows, not {n}", rows.len());
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
}

/// Waits until the rows differ from `before` (a page change has rendered).
async fn wait_for_other_rows(client: &Client, before: &[String]) -> Result<Vec<String>> {
    let deadline = Instant::now() + WAIT;
    loop {
        let rows = entity_rows(client).await?;
        if !rows.is_empty() && rows != before {
            return Ok(rows);
        }
        if Instant::now() > deadline {
            bail!("the entity page did not change");
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
}

async fn wait_until(client: &Client, what: &str, wait: Duration, js: &str) -> Result<Value> {
    let deadline = Instant::now() + wait;
    loop {
        let v = client.execute(js, vec![]).await?;
        if !v.is_null() && v != json!(false) {
            return Ok(v);
        }
        if Instant::now() > deadline {
            bail!("{what}: not within {wait:?}");
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
}

/// Waits until the upload bar of `file` ends; returns its stage text. Fails on FAILED.
async fn wait_for_upload(client: &Client, file: &str) -> Result<String> {
    let js = format!(
        "const j = document.querySelector('.job[data-file=\"{file}\"]'); \
         if (!j) return null; const s = j.dataset.state; \
         if (s === 'SUCCEEDED' || s === 'FAILED' || s === 'CANCELLED') \
           return [s, j.querySelector('.stage').textContent, j.textContent]; return null;"
    );
    let v = wait_until(client, &format!("upload of {file} to end"), JOB_WAIT, &js).await?;
    ensure!(v[0] == json!("SUCCEEDED"), "upload of {file} ended {v}");
    Ok(v[1].as_str().unwrap_or_default().to_owned())
}

/// The page does not scroll sideways at the current window width.
async fn fits_width(client: &Client, page: &str) -> Result<()> {
    let v = client
        .execute(
            "return [document.documentElement.scrollWidth, window.innerWidth];",
            vec![],
        )
        .await?;
    let (scroll, inner) = (v[0].as_i64().unwrap_or(0), v[1].as_i64().unwrap_or(0));
    ensure!(
        scroll <= inner + 1,
        "{page} scrolls sideways at {inner}px: content is {scroll}px wide"
    );
    Ok(())
}

async fn click(client: &Client, css: &str) -> Result<()> {
    wait_for(client, css).await?.click().await?;
    Ok(())
}

async fn path_of(client: &Client) -> Result<String> {
    Ok(client.current_url().await?.path().to_owned())
}

/// The owner's run. Returns the entity page's path and the memo's document path.
async fn owner_journey(
    client: &Client,
    server: &TestServer,
    files: &Path,
    archive: &str,
) -> Result<(String, String)> {
    client.goto(&server.url).await?;
    sign_in(client, &server.owner_token).await?;
    wait_for_text(client, "#whoami", "admin").await?;

    // Create a corpus: the console opens it.
    wait_for(client, "#new-corpus-name")
        .await?
        .send_keys("Handbook")
        .await?;
    click(client, "#create-corpus").await?;
    wait_for_text(client, "#corpus-title", "Handbook").await?;
    ensure!(path_of(client).await?.starts_with("/corpora/"));
    wait_for(client, "#documents-empty").await?;
    screenshot(client, "corpus-empty").await?;

    // Upload the DOCX for the team and the PDF as private; both bars reach "searchable".
    let docx = files.join("team-news.docx");
    let pdf = files.join("board-memo.pdf");
    wait_for(client, "#file-input")
        .await?
        .send_keys(&docx.display().to_string())
        .await?;
    click(client, "#upload-visibility option[value=\"PRIVATE\"]").await?;
    wait_for(client, "#file-input")
        .await?
        .send_keys(&pdf.display().to_string())
        .await?;
    // Live progress is visible before the end (a bar and a stage for each file).
    wait_for(client, ".job[data-file=\"team-news.docx\"] .bar .fill").await?;
    wait_for(client, ".job[data-file=\"board-memo.pdf\"] .bar .fill").await?;
    for file in ["team-news.docx", "board-memo.pdf"] {
        let stage = wait_for_upload(client, file).await?;
        ensure!(stage == "searchable", "{file} ended at stage {stage:?}");
    }
    let table = wait_for_text(client, "#documents-table", "board-memo").await?;
    ensure!(table.contains("searchable"), "{table}");
    let rows = client
        .find_all(Locator::Css("#documents-table .document-row"))
        .await?;
    ensure!(rows.len() == 2, "{} rows in {table}", rows.len());
    let private = client
        .find(Locator::Css(
            ".document-row[data-title=\"board-memo\"] .visibility-toggle",
        ))
        .await?
        .attr("data-visibility")
        .await?;
    ensure!(private.as_deref() == Some("PRIVATE"), "memo is {private:?}");
    screenshot(client, "corpus-uploaded").await?;

    // A corrupt file fails with its reason on its bar, and adds no document.
    click(client, "#upload-visibility option[value=\"TEAM\"]").await?;
    let broken = files.join("broken.pdf");
    wait_for(client, "#file-input")
        .await?
        .send_keys(&broken.display().to_string())
        .await?;
    let js = "const j = document.querySelector('.job[data-file=\"broken.pdf\"]'); \
              return j && ['SUCCEEDED','FAILED'].includes(j.dataset.state) ? [j.dataset.state, j.textContent] : null;";
    let failed = wait_until(client, "the corrupt upload to end", JOB_WAIT, js).await?;
    ensure!(failed[0] == json!("FAILED"), "corrupt upload: {failed}");
    let reason = client
        .find(Locator::Css(".job[data-file=\"broken.pdf\"] .job-error"))
        .await?
        .text()
        .await?;
    ensure!(
        reason.len() > 10 && !reason.contains('{'),
        "reason shown: {reason:?}"
    );
    eprintln!("corrupt upload's reason: {reason}");
    screenshot(client, "corpus-upload-failed").await?;

    // Visibility toggles both ways.
    let toggle = ".document-row[data-title=\"team-news\"] .visibility-toggle";
    click(client, toggle).await?;
    wait_for(
        client,
        ".document-row[data-title=\"team-news\"] .visibility-toggle[data-visibility=\"PRIVATE\"]",
    )
    .await?;
    click(client, toggle).await?;
    wait_for(
        client,
        ".document-row[data-title=\"team-news\"] .visibility-toggle[data-visibility=\"TEAM\"]",
    )
    .await?;

    // A scratch file: moved to the archive, then deleted there (two clicks).
    wait_for(client, "#file-input")
        .await?
        .send_keys(&files.join("scratch.txt").display().to_string())
        .await?;
    wait_for_upload(client, "scratch.txt").await?;
    wait_for(client, ".document-row[data-title=\"scratch\"]").await?;
    click(
        client,
        ".document-row[data-title=\"scratch\"] .move-target option[data-name=\"Archive\"]",
    )
    .await?;
    click(client, ".document-row[data-title=\"scratch\"] .move-button").await?;
    wait_until(
        client,
        "scratch to leave the corpus",
        WAIT,
        "return document.querySelector('.document-row[data-title=\"scratch\"]') === null \
         && document.querySelectorAll('.document-row').length === 2;",
    )
    .await?;
    client
        .goto(&format!("{}/corpora/{archive}", server.url))
        .await?;
    click(
        client,
        ".document-row[data-title=\"scratch\"] .delete-button",
    )
    .await?;
    wait_for_text(
        client,
        ".document-row[data-title=\"scratch\"] .delete-button",
        "Confirm",
    )
    .await?;
    click(
        client,
        ".document-row[data-title=\"scratch\"] .delete-button",
    )
    .await?;
    wait_for(client, "#documents-empty").await?;
    client.back().await?;
    wait_for(client, "#documents-table").await?;

    // Drag and drop: a file dropped on the zone uploads like a picked one.
    client
        .execute(
            "const dt = new DataTransfer(); \
             dt.items.add(new File(['Dropped notes: the harbour master signs every log.'], 'dropped.txt', {type: 'text/plain'})); \
             const zone = document.getElementById('dropzone'); \
             zone.dispatchEvent(new DragEvent('dragover', {dataTransfer: dt, bubbles: true, cancelable: true})); \
             zone.dispatchEvent(new DragEvent('drop', {dataTransfer: dt, bubbles: true, cancelable: true}));",
            vec![],
        )
        .await?;
    ensure!(wait_for_upload(client, "dropped.txt").await? == "searchable");
    wait_for(client, ".document-row[data-title=\"dropped\"]").await?;

    // A long document through the picker: its bar counts the embedding batches (k/n). A
    // MutationObserver records every stage text the bar shows.
    client
        .execute(
            "window.__stages = []; \
             new MutationObserver(() => { \
               const s = document.querySelector('.job[data-file=\"lighthouse.md\"] .stage'); \
               if (s && window.__stages[window.__stages.length - 1] !== s.textContent) \
                 window.__stages.push(s.textContent); \
             }).observe(document.getElementById('uploads'), \
               {subtree: true, childList: true, characterData: true});",
            vec![],
        )
        .await?;
    let md = files.join("lighthouse.md");
    wait_for(client, "#file-input")
        .await?
        .send_keys(&md.display().to_string())
        .await?;
    ensure!(wait_for_upload(client, "lighthouse.md").await? == "searchable");
    let stages = client.execute("return window.__stages;", vec![]).await?;
    let counted = stages.as_array().is_some_and(|s| {
        s.iter().filter_map(Value::as_str).any(|t| {
            t.strip_prefix("embedding ")
                .and_then(|kn| kn.split_once('/'))
                .is_some_and(|(k, n)| k.parse::<u32>().is_ok() && n.parse::<u32>().is_ok())
        })
    });
    ensure!(
        counted,
        "no `embedding k/n` among the stages shown: {stages}"
    );
    eprintln!("lighthouse.md stages shown: {stages}");
    // Its text comes in pages with the section headings, and a highlight on page 2 opens
    // page 2.
    let long = wait_for(client, ".document-row[data-title=\"lighthouse\"]")
        .await?
        .attr("data-id")
        .await?
        .context("no id on the row")?;
    client
        .goto(&format!(
            "{}/documents/{long}?highlight={}",
            server.url,
            LATE_SENTENCE.replace(' ', "%20")
        ))
        .await?;
    wait_for_text(client, "#page-indicator", "Page 2 of 2").await?;
    let mark = wait_for(client, "mark#highlight").await?.text().await?;
    ensure!(mark == LATE_SENTENCE, "marked {mark:?}");
    wait_for_text(client, "#document-text h3.section-heading", "Part two").await?;
    screenshot(client, "document-page-2").await?;
    click(client, "#page-prev").await?;
    wait_for_text(client, "#page-indicator", "Page 1 of 2").await?;
    wait_for_text(client, "#document-text h3.section-heading", "Part one").await?;
    click(client, "#page-next").await?;
    wait_for_text(client, "#page-indicator", "Page 2 of 2").await?;
    ensure!(client.current_url().await?.as_str().contains("page=2"));
    // The page is in the URL: a reload stays on it.
    client.refresh().await?;
    wait_for_text(client, "#page-indicator", "Page 2 of 2").await?;
    server
        .ingest_text(
            &server.owner_token,
            archive,
            "Directory",
            &directory_text(),
            "TEAM",
        )
        .await;
    client.goto(&server.url).await?;
    wait_for(client, "#corpora-list").await?;

    // Search and open a result: it lands on the passage in its document.
    click(client, "#nav-search").await?;
    wait_for(client, "#search-input")
        .await?
        .send_keys("where is the robot maker based")
        .await?;
    click(client, "#search-button").await?;
    wait_for(client, "#relevance-banner").await?;
    let results = wait_for_text(client, "#search-results", "Acme Robotics").await?;
    ensure!(results.contains("vector"), "ranks missing: {results}");
    ensure!(path_of(client).await?.starts_with("/search"));
    screenshot(client, "search").await?;
    click(client, "#answer-button").await?;
    let answer = wait_for_text(client, "#answer", "Answer").await?;
    ensure!(
        client.find(Locator::Css("#answer .citation")).await.is_ok(),
        "no citation in {answer}"
    );
    screenshot(client, "search-answer").await?;
    click(client, "#search-results .result-link").await?;
    wait_for(client, "#document-title").await?;
    let mark = wait_for(client, "#document-text mark#highlight")
        .await?
        .text()
        .await?;
    ensure!(!mark.is_empty());
    ensure!(path_of(client).await?.starts_with("/documents/"));
    screenshot(client, "document-from-search").await?;

    // Extract, then open the entity.
    click(client, "#nav-knowledge").await?;
    click(client, "#extract-button").await?;
    let js = "const j = document.querySelector('#extract-job'); \
              return j && ['SUCCEEDED','FAILED','CANCELLED'].includes(j.dataset.state) ? [j.dataset.state, j.textContent] : null;";
    let run = wait_until(client, "extraction to end", JOB_WAIT, js).await?;
    ensure!(run[0] == json!("SUCCEEDED"), "extraction ended {run}");
    ensure!(
        run[1]
            .as_str()
            .is_some_and(|t| t.contains("Extracted knowledge from 5 of 5")),
        "{run}"
    );
    // Paging: the directory alone names 30 companies, so there are two pages of 25.
    let first_page = wait_for_rows(client, 25).await?;
    screenshot(client, "knowledge").await?;
    click(client, "#entities-next").await?;
    let second_page = wait_for_other_rows(client, &first_page).await?;
    ensure!(
        !second_page.is_empty() && second_page.len() <= 25,
        "second page: {second_page:?}"
    );
    ensure!(
        second_page.iter().all(|id| !first_page.contains(id)),
        "pages overlap"
    );
    click(client, "#entities-prev").await?;
    ensure!(wait_for_other_rows(client, &second_page).await? == first_page);
    // The type filter.
    click(client, "#entity-type option[value=\"place\"]").await?;
    click(client, "#entity-search-button").await?;
    wait_for_text(client, "#entities-list", "Berlin").await?;
    let types = client
        .execute(
            "return Array.from(document.querySelectorAll('#entities-list .type')).map(e => e.textContent);",
            vec![],
        )
        .await?;
    ensure!(
        types
            .as_array()
            .is_some_and(|t| !t.is_empty() && t.iter().all(|t| t == "place")),
        "type filter: {types}"
    );
    // The name search, then the entity.
    click(client, "#entity-type option[value=\"\"]").await?;
    let q = wait_for(client, "#entity-query").await?;
    q.clear().await?;
    q.send_keys("Acme Robotics").await?;
    click(client, "#entity-search-button").await?;
    wait_for_text(
        client,
        "#entities-list .entity-row:first-child",
        "Acme Robotics",
    )
    .await?;
    ensure!(client
        .current_url()
        .await?
        .as_str()
        .contains("q=Acme%20Robotics"));
    let link = client
        .find(Locator::XPath(
            "//a[@class='entity-link' and normalize-space()='Acme Robotics']",
        ))
        .await?;
    link.click().await?;
    wait_for_text(client, "#entity-name", "Acme Robotics").await?;
    let entity_path = path_of(client).await?;
    let owner_mentions = client
        .find_all(Locator::Css("#mentions-list > .mention"))
        .await?
        .len();
    // Acme is named twice in the news and once in the memo.
    ensure!(owner_mentions == 3, "owner sees {owner_mentions} mentions");
    wait_for(client, "svg#neighbourhood .neighbour").await?;
    let graph = client
        .find(Locator::Css("svg#neighbourhood"))
        .await?
        .text()
        .await?;
    ensure!(graph.contains("Globex Media"), "neighbourhood: {graph}");
    screenshot(client, "entity").await?;

    // The memo's mention leads to the highlighted sentence in the memo, version 1.
    let memo_mention = client
        .find(Locator::XPath(&format!(
            "//ul[@id='mentions-list']/li[contains(@class,'mention')][blockquote[contains(., '{MEMO_SENTENCE}')]]/a"
        )))
        .await?;
    memo_mention.click().await?;
    let mark = wait_for(client, "#document-text mark#highlight").await?;
    let marked = mark.text().await?;
    ensure!(marked.contains(MEMO_SENTENCE), "highlighted {marked:?}");
    wait_for_text(client, "#document-title", "board-memo").await?;
    let url = client.current_url().await?;
    ensure!(
        url.query_pairs().any(|(k, v)| k == "version" && v == "1"),
        "{url}"
    );
    wait_for(client, "#versions-list li.cited[data-version=\"1\"]").await?;
    wait_for_text(client, ".meta", "application/pdf").await?;
    // The type panel: nothing classified the memo yet.
    wait_for_text(client, "#doc-type", "Not classified yet").await?;
    let visible = wait_until(
        client,
        "highlight scrolled into view",
        WAIT,
        "const r = document.getElementById('highlight').getBoundingClientRect(); \
         return r.top >= 0 && r.bottom <= window.innerHeight;",
    )
    .await?;
    ensure!(visible == json!(true));
    screenshot(client, "document-highlight").await?;
    let memo_path = path_of(client).await?;

    // Classified (no model here: the zero-shot classifier), the panel names the type.
    server
        .gql_ok(
            &server.owner_token,
            "mutation($d: ID!) { classifyDocument(documentId: $d) { type } }",
            json!({ "d": memo_path.trim_start_matches("/documents/") }),
        )
        .await;
    client.refresh().await?;
    wait_for(client, "#doc-type .tag").await?;
    wait_for_text(client, "#doc-type-reason", "zero-shot").await?;
    screenshot(client, "document-type").await?;

    // A GraphQL error reads as a sentence.
    client
        .goto(&format!("{}/corpora/999999", server.url))
        .await?;
    let error = wait_for(client, "main .error").await?.text().await?;
    ensure!(
        !error.contains('{') && !error.contains("NOT_FOUND"),
        "raw error shown: {error:?}"
    );

    // Phone width: every page fits without sideways scrolling.
    client.set_window_size(390, 844).await?;
    for (name, path, ready) in [
        ("phone-corpora", "/".to_owned(), "#corpora-list"),
        (
            "phone-search",
            "/search?q=Acme%20Robotics&mode=HYBRID".to_owned(),
            "#search-results",
        ),
        ("phone-knowledge", "/knowledge".to_owned(), "#entities-list"),
        ("phone-entity", entity_path.clone(), "#mentions-list"),
        ("phone-document", memo_path.clone(), "#document-text"),
    ] {
        client.goto(&format!("{}{path}", server.url)).await?;
        wait_for(client, ready).await?;
        fits_width(client, name).await?;
        screenshot(client, name).await?;
    }
    client.set_window_size(1280, 900).await?;
    // The corpus page too (its table becomes cards).
    click(client, "#nav-corpora").await?;
    wait_for(client, "#corpora-list").await?;
    client
        .find(Locator::XPath(
            "//a[@class='corpus-name' and normalize-space()='Handbook']",
        ))
        .await?
        .click()
        .await?;
    wait_for(client, "#documents-table").await?;
    fits_width(client, "corpus").await?;

    click(client, "#logout-button").await?;
    wait_for(client, "#login-form").await?;
    Ok((entity_path, memo_path))
}

/// A colleague: the same entity without the private memo's mention or its relation, and
/// the memo itself refused.
async fn colleague_journey(
    client: &Client,
    server: &TestServer,
    token: &str,
    entity_path: &str,
    memo_path: &str,
) -> Result<()> {
    client.goto(&server.url).await?;
    sign_in(client, token).await?;
    wait_for_text(client, "#whoami", "bob").await?;
    client.goto(&format!("{}{entity_path}", server.url)).await?;
    wait_for_text(client, "#entity-name", "Acme Robotics").await?;
    let mentions = client
        .find_all(Locator::Css("#mentions-list > .mention"))
        .await?;
    ensure!(
        mentions.len() == 2,
        "colleague sees {} mentions (the news' two)",
        mentions.len()
    );
    let memo_id = memo_path.trim_start_matches("/documents/");
    for m in &mentions {
        let doc = m.attr("data-document").await?;
        ensure!(
            doc.as_deref() != Some(memo_id),
            "a mention cites the private memo"
        );
    }
    let page = client.source().await?;
    for secret in [
        MEMO_SENTENCE,
        "Globex",
        "confidential",
        "Board memo",
        "board-memo",
    ] {
        ensure!(
            !page.contains(secret),
            "colleague's entity page shows {secret:?}"
        );
    }
    screenshot(client, "colleague-entity").await?;

    client
        .goto(&format!("{}/knowledge?q=Acme", server.url))
        .await?;
    let list = wait_for_text(client, "#entities-list", "Acme Robotics").await?;
    ensure!(!list.contains("Globex"), "colleague's entity list: {list}");
    client
        .goto(&format!("{}/knowledge?q=Globex", server.url))
        .await?;
    let list = client
        .wait()
        .at_most(WAIT)
        .for_element(Locator::Css("#entities-empty, #entities-list"))
        .await?
        .text()
        .await?;
    ensure!(!list.contains("Globex"), "colleague finds Globex: {list}");

    client.goto(&format!("{}{memo_path}", server.url)).await?;
    let error = wait_for(client, "main .error").await?.text().await?;
    ensure!(!error.contains('{'), "raw error shown: {error:?}");
    let page = client.source().await?;
    ensure!(!page.contains(MEMO_SENTENCE), "colleague reads the memo");
    screenshot(client, "colleague-memo-refused").await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_upload_search_extract_and_a_colleague() -> Result<()> {
    preflight()?;
    cairn_tests::require_model();
    let server = TestServer::start(Backend::Sqlite).await;
    let (_, bob) = server.user_with_token("bob", "MEMBER").await;
    let files = tempfile::tempdir()?;
    std::fs::write(files.path().join("team-news.docx"), news_docx()?)?;
    std::fs::write(files.path().join("board-memo.pdf"), memo_pdf())?;
    std::fs::write(files.path().join("lighthouse.md"), long_text())?;
    std::fs::write(
        files.path().join("broken.pdf"),
        b"%PDF-1.7\n1 0 obj << /Broken",
    )?;
    std::fs::write(
        files.path().join("scratch.txt"),
        "A scratch note about nothing much.",
    )?;
    let archive = server.create_corpus(&server.owner_token, "Archive").await;

    let b = Browser::open().await?;
    let outcome = async {
        let (entity, memo) = owner_journey(&b.client, &server, files.path(), &archive).await?;
        colleague_journey(&b.client, &server, &bob, &entity, &memo).await
    }
    .await;
    b.finish(outcome).await
}

/// The console's assets: gzip twins go to clients that accept gzip, the plain files to the
/// rest, with the right media type either way; unknown paths answer index.html.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_assets_are_served_compressed() -> Result<()> {
    preflight()?;
    let server = TestServer::start(Backend::Sqlite).await;
    let http = reqwest::Client::new();
    let index = http.get(&server.url).send().await?.text().await?;
    let wasm = index
        .split('"')
        .find(|s| s.ends_with("_bg.wasm"))
        .context("no wasm in index.html")?
        .trim_start_matches('/')
        .to_owned();
    let on_disk = std::fs::read(repo_root().join("frontend/dist").join(&wasm))?;

    let plain = http.get(format!("{}/{wasm}", server.url)).send().await?;
    ensure!(plain.headers().get("content-encoding").is_none());
    ensure!(plain.headers()["content-type"] == "application/wasm");
    ensure!(plain.bytes().await?.as_ref() == on_disk.as_slice());

    let gz = http
        .get(format!("{}/{wasm}", server.url))
        .header("accept-encoding", "gzip")
        .send()
        .await?;
    ensure!(gz.headers()["content-encoding"] == "gzip");
    ensure!(gz.headers()["content-type"] == "application/wasm");
    let body = gz.bytes().await?;
    ensure!(body.starts_with(&[0x1f, 0x8b]), "not a gzip stream");
    ensure!(
        body.len() * 2 < on_disk.len(),
        "{} compressed bytes for {} plain",
        body.len(),
        on_disk.len()
    );

    // A client route straight from the server is the console's index.
    let deep = http
        .get(format!("{}/entities/12?x=1", server.url))
        .send()
        .await?;
    ensure!(deep.status() == 200);
    ensure!(deep.text().await? == index);
    server.stop().await;
    Ok(())
}
