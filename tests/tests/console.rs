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
    let png = client.screenshot().await?;
    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("console-home.png");
    std::fs::write(&shot, png).with_context(|| format!("writing {}", shot.display()))?;
    eprintln!("console screenshot: {}", shot.display());

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_login_reload_logout() -> Result<()> {
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

    let server = TestServer::start(Backend::Sqlite).await;
    server
        .gql_ok(
            &server.owner_token,
            "mutation { createCorpus(name: \"Field notes\") { id } }",
            Value::Null,
        )
        .await;
    let scratch = tempfile::tempdir()?;
    let driver_log = scratch.path().join("chromedriver.log");
    let driver = ChromeDriver::spawn(&driver_log)?;
    let client = browser(&driver, &scratch.path().join("profile")).await?;
    let outcome = journey(&client, &server).await;
    // Close the browser whatever happened, so no Chromium outlives the test.
    let _ = client.close().await;
    outcome.with_context(|| {
        let log = std::fs::read_to_string(&driver_log).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(20).collect();
        format!(
            "console journey failed; chromedriver log, last lines, newest first:\n{}",
            tail.join("\n")
        )
    })
}
