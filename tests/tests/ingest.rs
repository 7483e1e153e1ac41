//! Ingestion end to end, on SQLite and PostgreSQL: real files of every format through the
//! multipart upload, the job queue, extraction, chunking, the real embedding model and the
//! store, watched over the `jobProgress` subscription.

use std::io::Write;
use std::path::{Path, PathBuf};

use cairn_tests::{
    both_backends, error_code, repo_root, require_model, stages, Backend, TestServer,
};
use serde_json::{json, Value};

both_backends!(
    every_format_becomes_searchable_chunks,
    real_multi_page_pdf,
    hostile_inputs_fail_cleanly,
    duplicates_versions_and_deletes,
    result_is_delivered_once_and_jobs_cancel,
    oversized_body_is_refused_while_streaming,
    move_visibility_and_usage,
);

fn fixture(name: &str) -> Vec<u8> {
    let p = repo_root().join("extract/tests/fixtures").join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("fixture {}: {e}", p.display()))
}

/// Subscribes to the corpus's jobs, uploads, and collects that job's events to its end
/// (subscribing first is how a client sees every stage, the first included).
async fn ingest(s: &TestServer, corpus: &str, name: &str, bytes: Vec<u8>) -> (Vec<Value>, Value) {
    let events = s.upload_watched(&s.owner_token, corpus, name, bytes).await;
    let last = events.last().cloned().unwrap_or(Value::Null);
    (events, last)
}

const CHUNKS: &str = "query($id: ID!) { document(id: $id) { id title filename mimeType chunkCount currentVersion versions { version contentHash } chunks { index section page content } } }";

/// The stages arrive in pipeline order and end searchable.
fn assert_pipeline(events: &[Value]) {
    let st = stages(events);
    let want = [
        "extracting",
        "chunking",
        "embedding",
        "storing",
        "searchable",
    ];
    let pos: Vec<usize> = want
        .iter()
        .map(|w| {
            st.iter()
                .position(|s| s == w)
                .unwrap_or_else(|| panic!("no `{w}` stage in {st:?}"))
        })
        .collect();
    assert!(
        pos.windows(2).all(|w| w[0] < w[1]),
        "stages out of order: {st:?}"
    );
    assert_eq!(
        events.last().map(|e| e["state"].clone()),
        Some(json!("SUCCEEDED"))
    );
    // embedding k/n counts up to n.
    let emb: Vec<&Value> = events
        .iter()
        .filter(|e| e["stage"] == "embedding")
        .collect();
    let total = emb.last().and_then(|e| e["total"].as_i64()).unwrap_or(-1);
    assert!(total > 0, "embedding reports a total: {emb:?}");
    assert_eq!(emb.last().and_then(|e| e["done"].as_i64()), Some(total));
    let dones: Vec<i64> = emb.iter().filter_map(|e| e["done"].as_i64()).collect();
    assert!(
        dones.windows(2).all(|w| w[0] <= w[1]),
        "k/n never goes back: {dones:?}"
    );
}

async fn every_format_becomes_searchable_chunks(b: Backend) {
    require_model();
    let s = TestServer::start(b).await;
    let c = s.create_corpus(&s.owner_token, "formats").await;
    let cases: &[(&str, &str, &[&str])] = &[
        ("sample.pdf", "granite marmot", &["Chapter Two: Ridges"]),
        (
            "sample.docx",
            "granite marmot",
            &["| Alice | Surveyor | 3 |"],
        ),
        (
            "sample.pptx",
            "Marmots were counted",
            &["| Bob | Cartographer | 5 |"],
        ),
        (
            "sample.xlsx",
            "granite marmot",
            &["[Sheet: Inventory]", "| Name | Role | Count |"],
        ),
        ("sample.xls", "granite marmot", &["[Sheet: Notes]"]),
        ("sample.xlsb", "granite marmot", &["[Sheet: Inventory]"]),
        ("sample.ods", "granite marmot", &["[Sheet: Notes]"]),
        ("sample.html", "granite marmot", &[]),
        ("sample.md", "granite marmot", &["| Alice | Surveyor | 3 |"]),
        ("sample.txt", "granite marmot", &[]),
    ];
    for (name, sentence, shapes) in cases {
        let (events, last) = ingest(&s, &c, name, fixture(name)).await;
        assert_pipeline(&events);
        let result = &last["result"];
        assert_eq!(result["duplicate"], false, "{name}: {result}");
        let doc_id = result["documentId"].to_string();
        let d = s
            .gql_ok(&s.owner_token, CHUNKS, json!({ "id": doc_id }))
            .await;
        let chunks = d["document"]["chunks"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(!chunks.is_empty(), "{name}: no chunks");
        // The media type is sniffed from the bytes, as extraction reads them.
        let mime = d["document"]["mimeType"].as_str().unwrap_or_default();
        let want = match name.rsplit('.').next() {
            Some("pdf") => "application/pdf",
            Some("docx") => {
                "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
            }
            Some("txt") => "text/plain",
            Some("md") => "text/markdown",
            Some("html") => "text/html",
            _ => mime,
        };
        assert_eq!(mime, want, "{name}");
        assert_eq!(
            d["document"]["chunkCount"].as_u64(),
            Some(chunks.len() as u64)
        );
        let all: String = chunks
            .iter()
            .filter_map(|c| c["content"].as_str())
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            all.contains(sentence),
            "{name}: `{sentence}` missing from {all}"
        );
        for shape in *shapes {
            assert!(all.contains(shape), "{name}: `{shape}` missing from {all}");
        }
        // Formats with headings carry sections (PDFs carry pages: the parser gives no font
        // sizes; spreadsheets carry `[Sheet: …]` blocks).
        if ["sample.docx", "sample.pptx", "sample.html", "sample.md"].contains(name) {
            assert!(
                chunks.iter().any(|c| c["section"].is_string()),
                "{name}: no chunk carries a section: {chunks:?}"
            );
        }
        if *name == "sample.pdf" {
            let pages: Vec<i64> = chunks.iter().filter_map(|c| c["page"].as_i64()).collect();
            assert!(
                pages.contains(&1) && pages.contains(&3),
                "{name}: pages {pages:?}"
            );
        }
    }
    let counts = s
        .gql_ok(
            &s.owner_token,
            "{ corpora { edges { node { documentCount chunkCount } } } }",
            json!({}),
        )
        .await;
    assert_eq!(
        counts["corpora"]["edges"][0]["node"]["documentCount"],
        cases.len()
    );
    s.stop().await;
}

async fn real_multi_page_pdf(b: Backend) {
    require_model();
    let path = std::env::var("CAIRN_TEST_REAL_PDF").unwrap_or_else(|_| {
        panic!("CAIRN_TEST_REAL_PDF is not set: scripts/fetch-test-pdf.sh fetches a real PDF from a Debian documentation package (the README's test command does)")
    });
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let s = TestServer::start(b).await;
    let c = s.create_corpus(&s.owner_token, "manuals").await;
    let (events, last) = ingest(&s, &c, "xmlstarlet-ug.pdf", bytes).await;
    assert_pipeline(&events);
    let doc_id = last["result"]["documentId"].to_string();
    let d = s
        .gql_ok(&s.owner_token, CHUNKS, json!({ "id": doc_id }))
        .await;
    let chunks = d["document"]["chunks"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut pages: Vec<i64> = chunks.iter().filter_map(|c| c["page"].as_i64()).collect();
    pages.dedup();
    assert!(
        chunks.len() >= 10,
        "a 30-page manual gives many chunks, got {}",
        chunks.len()
    );
    assert!(pages.len() >= 10, "chunks span many pages: {pages:?}");
    let text = s
        .gql_ok(
            &s.owner_token,
            "query($id: ID!) { documentText(id: $id) { page pageCount text } }",
            json!({ "id": doc_id }),
        )
        .await;
    assert!(text["documentText"]["text"]
        .as_str()
        .unwrap_or_default()
        .contains("XMLStarlet"));
    s.stop().await;
}

/// Files under the data directory other than the database's own, the initial token and the
/// instance's secret key.
fn data_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if !p
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("cairn.db"))
                && !p.ends_with("initial-token")
                && !p.ends_with("secret.key")
            {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn zip_bomb(kind: &str) -> Vec<u8> {
    let mut buf = std::io::Cursor::new(Vec::new());
    {
        let mut z = zip::ZipWriter::new(&mut buf);
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .large_file(true);
        let (ct, part) = match kind {
            "docx" => (
                "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml",
                "word/document.xml",
            ),
            _ => (
                "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml",
                "xl/worksheets/sheet1.xml",
            ),
        };
        z.start_file("[Content_Types].xml", opts)
            .unwrap_or_else(|e| panic!("{e}"));
        let types = format!("<?xml version=\"1.0\"?><Types xmlns=\"http://schemas.openxmlformats.org/package/2006/content-types\"><Override PartName=\"/{part}\" ContentType=\"{ct}\"/></Types>");
        z.write_all(types.as_bytes())
            .unwrap_or_else(|e| panic!("{e}"));
        z.start_file(part, opts).unwrap_or_else(|e| panic!("{e}"));
        let zeros = vec![b' '; 1 << 20];
        for _ in 0..1024 {
            z.write_all(&zeros).unwrap_or_else(|e| panic!("{e}"));
        }
        z.finish().unwrap_or_else(|e| panic!("{e}"));
    }
    buf.into_inner()
}

async fn hostile_inputs_fail_cleanly(b: Backend) {
    require_model();
    let s = TestServer::start(b).await;
    let c = s.create_corpus(&s.owner_token, "hostile").await;
    let data_dir = s.config.data_dir.clone();
    let pdf = fixture("sample.pdf");
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("bomb.docx", zip_bomb("docx"), "failed"),
        ("bomb.xlsx", zip_bomb("xlsx"), "failed"),
        ("truncated.pdf", pdf[..pdf.len() / 2].to_vec(), "failed"),
        (
            "../../etc/passwd",
            b"root:x:0:0:root:/root:/bin/bash\n".to_vec(),
            "ok",
        ),
        (
            "latin1.txt",
            b"caf\xe9 cr\xe8me br\xfbl\xe9e, \xff\xfe invalid bytes".to_vec(),
            "ok",
        ),
        ("empty.txt", Vec::new(), "empty"),
    ];
    for (name, bytes, expect) in cases {
        let (_, last) = ingest(&s, &c, name, bytes).await;
        match expect {
            "failed" => {
                assert_eq!(last["state"], "FAILED", "{name}: {last}");
                let err = last["error"].as_str().unwrap_or_default();
                assert!(!err.is_empty(), "{name}: a failure says why");
            }
            "empty" => {
                assert_eq!(last["state"], "SUCCEEDED", "{name}: {last}");
                assert_eq!(last["result"]["chunkCount"], 0);
                assert_eq!(last["result"]["extractable"], false);
                assert!(last["result"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("no text"));
            }
            _ => assert_eq!(last["state"], "SUCCEEDED", "{name}: {last}"),
        }
        // The server is still up.
        assert_eq!(s.get("/healthz").await.0, 200);
    }
    // The traversal name was defanged, the invalid bytes replaced.
    let docs = s
        .gql_ok(&s.owner_token, "query($c: ID!) { corpus(id: $c) { documents { edges { node { id filename chunkCount } } } } }", json!({ "c": c }))
        .await;
    let nodes: Vec<Value> = docs["corpus"]["documents"]["edges"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| e["node"].clone())
        .collect();
    let names: Vec<&str> = nodes
        .iter()
        .filter_map(|n| n["filename"].as_str())
        .collect();
    assert_eq!(
        names,
        ["passwd", "latin1.txt", "empty.txt"],
        "failed uploads leave no document"
    );
    let latin = &nodes[1]["id"];
    let d = s
        .gql_ok(&s.owner_token, CHUNKS, json!({ "id": latin }))
        .await;
    assert!(d["document"]["chunks"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .contains("caf\u{fffd} cr\u{fffd}me"));
    // No blob, row or temp file that nothing references: exactly the three stored blobs remain.
    let files = data_files(&data_dir);
    assert_eq!(files.len(), 3, "leftover files: {files:?}");
    assert!(
        files.iter().all(|f| f.starts_with(data_dir.join("blobs"))),
        "{files:?}"
    );
    assert!(
        !data_dir.join("etc").exists()
            && !data_dir
                .parent()
                .map(|p| p.join("etc/passwd"))
                .is_some_and(|p| p.exists())
    );
    s.stop().await;
}

async fn duplicates_versions_and_deletes(b: Backend) {
    require_model();
    let s = TestServer::start(b).await;
    let c = s.create_corpus(&s.owner_token, "versions").await;
    let v1 = b"# Policy\n\nBadgers may enter the cellar on Tuesdays.\n".to_vec();
    let (_, first) = ingest(&s, &c, "policy.md", v1.clone()).await;
    let doc = first["result"]["documentId"].clone();
    // The same bytes again: a duplicate pointing at the same document.
    let (_, again) = ingest(&s, &c, "policy-copy.md", v1).await;
    assert_eq!(again["result"]["duplicate"], true, "{again}");
    assert_eq!(again["result"]["documentId"], doc);
    // A new version replaces the chunks.
    let v2 = b"# Policy\n\nOtters may enter the cellar on Fridays.\n".to_vec();
    let (status, body) = s
        .upload(
            &s.owner_token,
            &c,
            "policy.md",
            v2,
            json!({ "d": doc.to_string() }),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let job = body["data"]["uploadDocument"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let events = s.follow_job(&s.owner_token, &job).await;
    assert_eq!(
        events.last().map(|e| e["result"]["version"].clone()),
        Some(json!(2))
    );
    let d = s
        .gql_ok(&s.owner_token, CHUNKS, json!({ "id": doc.to_string() }))
        .await;
    assert_eq!(d["document"]["currentVersion"], 2);
    assert_eq!(d["document"]["versions"].as_array().map(Vec::len), Some(2));
    let text: String = d["document"]["chunks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["content"].as_str())
        .collect();
    assert!(
        text.contains("Otters") && !text.contains("Badgers"),
        "{text}"
    );
    // Delete: the document is gone, and so are both blobs.
    let del = s
        .gql_ok(
            &s.owner_token,
            "mutation($id: ID!) { deleteDocument(id: $id) }",
            json!({ "id": doc.to_string() }),
        )
        .await;
    assert_eq!(del["deleteDocument"], true);
    let gone = s
        .gql(&s.owner_token, CHUNKS, json!({ "id": doc.to_string() }))
        .await;
    assert_eq!(error_code(&gone), Some("NOT_FOUND"));
    assert_eq!(data_files(&s.config.data_dir), Vec::<PathBuf>::new());
    s.stop().await;
}

async fn result_is_delivered_once_and_jobs_cancel(b: Backend) {
    require_model();
    let s = TestServer::start(b).await;
    let c = s.create_corpus(&s.owner_token, "once").await;
    let job = s
        .upload_ok(
            &s.owner_token,
            &c,
            "once.txt",
            b"One result, delivered once.".to_vec(),
        )
        .await;
    s.follow_job(&s.owner_token, &job).await;
    let q = "query($id: ID!) { job(id: $id) { state stage result } }";
    let first = s.gql_ok(&s.owner_token, q, json!({ "id": job })).await;
    assert_eq!(first["job"]["state"], "SUCCEEDED");
    assert!(first["job"]["result"]["documentId"].is_number(), "{first}");
    let second = s.gql_ok(&s.owner_token, q, json!({ "id": job })).await;
    assert_eq!(second["job"]["state"], "SUCCEEDED");
    assert_eq!(
        second["job"]["result"],
        Value::Null,
        "the result is delivered once"
    );
    // Another team cannot see the job.
    let (_, _, other) = s.other_team("elsewhere").await;
    assert_eq!(
        error_code(&s.gql(&other, q, json!({ "id": job })).await),
        Some("NOT_FOUND")
    );
    s.stop().await;

    // Without workers a job stays queued; cancelling it ends it, and the subscription says so.
    let s = TestServer::start_tuned(b, |cfg| cfg.workers = 0).await;
    let c = s.create_corpus(&s.owner_token, "cancel").await;
    let job = s
        .upload_ok(&s.owner_token, &c, "never.txt", b"never ingested".to_vec())
        .await;
    let cancelled = s
        .gql_ok(
            &s.owner_token,
            "mutation($id: ID!) { cancelJob(id: $id) { state } }",
            json!({ "id": job }),
        )
        .await;
    assert_eq!(cancelled["cancelJob"]["state"], "CANCELLED");
    let events = s.follow_job(&s.owner_token, &job).await;
    assert_eq!(
        events.last().map(|e| e["state"].clone()),
        Some(json!("CANCELLED"))
    );
    s.stop().await;
}

async fn oversized_body_is_refused_while_streaming(b: Backend) {
    let s = TestServer::start_tuned(b, |cfg| cfg.max_upload_bytes = 256 * 1024).await;
    let c = s.create_corpus(&s.owner_token, "caps").await;
    // Over the cap with a declared length: refused before reading. Sent the way curl sends a
    // large body (`Expect: 100-continue`, the body held back until the server says go on), so
    // the refusal is read before a single body byte is written. (Writing the body regardless
    // races the server's close: a reset can discard the 413 before the client reads it.)
    let (status, body) = declared_length_refusal(&s, 2 * 1024 * 1024).await;
    assert_eq!(status, 413, "{body}");
    assert_eq!(error_code(&body), Some("PAYLOAD_TOO_LARGE"));
    // Over the cap without a declared length (chunked): refused as it streams, long before
    // the 64 MiB the client offers are sent.
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = sent.clone();
    let head = format!(
        "--X\r\nContent-Disposition: form-data; name=\"operations\"\r\n\r\n{}\r\n--X\r\nContent-Disposition: form-data; name=\"map\"\r\n\r\n{{\"0\": [\"variables.f\"]}}\r\n--X\r\nContent-Disposition: form-data; name=\"0\"; filename=\"huge.txt\"\r\n\r\n",
        json!({ "query": "mutation($c: ID!, $f: Upload!) { uploadDocument(corpusId: $c, file: $f) { id } }", "variables": { "c": c, "f": null } })
    );
    let chunks = std::iter::once(head.into_bytes()).chain((0..1024).map(|_| vec![b'z'; 64 * 1024]));
    let stream = futures_util::stream::iter(chunks.map(move |c| {
        counter.fetch_add(c.len(), std::sync::atomic::Ordering::SeqCst);
        Ok::<_, std::io::Error>(c)
    }));
    let resp = reqwest::Client::new()
        .post(format!("{}/graphql", s.url))
        .bearer_auth(&s.owner_token)
        .header("Content-Type", "multipart/form-data; boundary=X")
        .body(reqwest::Body::wrap_stream(stream))
        .send()
        .await;
    if let Ok(r) = resp {
        assert_eq!(r.status().as_u16(), 413);
    }
    let pulled = sent.load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        pulled < 16 * 1024 * 1024,
        "the server read {pulled} bytes of a refused body"
    );
    assert_eq!(
        data_files(&s.config.data_dir),
        Vec::<PathBuf>::new(),
        "nothing stored"
    );
    assert_eq!(s.get("/healthz").await.0, 200);
    s.stop().await;
}

/// Sends only the head of a GraphQL upload that declares `length` bytes and asks to be told
/// whether to go on; returns the status and JSON body of what the server answers instead.
async fn declared_length_refusal(s: &TestServer, length: usize) -> (u16, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = s.url.trim_start_matches("http://").to_owned();
    let mut sock = tokio::net::TcpStream::connect(&addr)
        .await
        .unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    let head = format!(
        "POST /graphql HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nContent-Type: multipart/form-data; boundary=X\r\nContent-Length: {length}\r\nExpect: 100-continue\r\n\r\n",
        s.owner_token
    );
    sock.write_all(head.as_bytes())
        .await
        .unwrap_or_else(|e| panic!("write: {e}"));
    // Read the whole answer: up to the end of its declared body, or the server's close.
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = tokio::time::timeout(std::time::Duration::from_secs(30), sock.read(&mut buf))
            .await
            .unwrap_or_else(|_| panic!("no answer to the head: {}", String::from_utf8_lossy(&got)))
            .unwrap_or_else(|e| panic!("read: {e}"));
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let want = head.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse::<usize>().ok())
                    .flatten()
            });
            if n == 0 || want.is_some_and(|w| body.len() >= w) {
                let status = head
                    .split_whitespace()
                    .nth(1)
                    .and_then(|c| c.parse().ok())
                    .unwrap_or(0);
                assert_ne!(
                    status, 100,
                    "the server asked for the body it should refuse"
                );
                return (status, serde_json::from_str(body).unwrap_or(Value::Null));
            }
        }
        assert!(n > 0, "closed before an answer: {text}");
    }
}

async fn move_visibility_and_usage(b: Backend) {
    require_model();
    let s = TestServer::start(b).await;
    let a = s.create_corpus(&s.owner_token, "drafts").await;
    let z = s.create_corpus(&s.owner_token, "published").await;
    let (events, last) = ingest(
        &s,
        &a,
        "memo.md",
        b"# Memo\n\nThe ferry leaves at nine.\n".to_vec(),
    )
    .await;
    let doc = last["result"]["documentId"].to_string();
    // Every embedding batch wrote a usage row for the job.
    let job_id: i64 = events[0]["jobId"]
        .as_str()
        .unwrap_or_default()
        .parse()
        .unwrap_or_default();
    let usage = s
        .cairn()
        .store
        .job_usage(job_id)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        !usage.is_empty()
            && usage
                .iter()
                .all(|u| u.kind == "embed" && u.input_tokens > 0),
        "{usage:?}"
    );

    let (_, bob) = s.user_with_token("bob", "MEMBER").await;
    let q = "query($id: ID!) { document(id: $id) { title visibility corpus { name } } }";
    assert_eq!(
        s.gql_ok(&bob, q, json!({ "id": doc })).await["document"]["title"],
        "memo"
    );
    // Private: the colleague no longer sees it, nor can he change it back.
    let set = "mutation($id: ID!, $v: Visibility!) { setVisibility(documentId: $id, visibility: $v) { visibility } }";
    let r = s
        .gql_ok(&s.owner_token, set, json!({ "id": doc, "v": "PRIVATE" }))
        .await;
    assert_eq!(r["setVisibility"]["visibility"], "PRIVATE");
    assert_eq!(
        error_code(&s.gql(&bob, q, json!({ "id": doc })).await),
        Some("NOT_FOUND")
    );
    assert_eq!(
        error_code(&s.gql(&bob, set, json!({ "id": doc, "v": "TEAM" })).await),
        Some("NOT_FOUND")
    );
    let count = "query($c: ID!) { corpus(id: $c) { documentCount chunkCount } }";
    assert_eq!(
        s.gql_ok(&bob, count, json!({ "c": a })).await["corpus"]["documentCount"],
        0
    );
    assert_eq!(
        s.gql_ok(&s.owner_token, count, json!({ "c": a })).await["corpus"]["documentCount"],
        1
    );
    // Moving: the document and its chunks follow; bob moving what he cannot read moves nothing.
    let mv =
        "mutation($to: ID!, $ids: [ID!]) { moveDocuments(toCorpusId: $to, documentIds: $ids) }";
    assert_eq!(
        s.gql_ok(&bob, mv, json!({ "to": z, "ids": [doc] })).await["moveDocuments"],
        0
    );
    assert_eq!(
        s.gql_ok(&s.owner_token, mv, json!({ "to": z, "ids": [doc] }))
            .await["moveDocuments"],
        1
    );
    let moved = s.gql_ok(&s.owner_token, q, json!({ "id": doc })).await;
    assert_eq!(moved["document"]["corpus"]["name"], "published");
    let zc = s.gql_ok(&s.owner_token, count, json!({ "c": z })).await;
    assert_eq!(zc["corpus"]["documentCount"], 1);
    assert!(zc["corpus"]["chunkCount"].as_i64().unwrap_or(0) >= 1);
    let page = s
        .gql_ok(
            &s.owner_token,
            "query($id: ID!) { documentText(id: $id) { page pageCount text } }",
            json!({ "id": doc }),
        )
        .await;
    assert_eq!(page["documentText"]["pageCount"], 1);
    assert!(page["documentText"]["text"]
        .as_str()
        .unwrap_or_default()
        .contains("ferry leaves at nine"));
    s.stop().await;
}
