//! Scans and images become searchable through OCR, end to end on both backends: a scan made
//! at test time from pages of a real PDF (`scripts/make-scan.sh`: no text layer at all) and a
//! PNG of one page go through the multipart upload, the ingest job (which reads them with
//! Tesseract), chunking, the real embedding model and the store; the job says how many pages
//! OCR read; the lexical channel finds a phrase that exists only in the scanned pixels, on the
//! right page; with OCR switched off the same scan is stored with no text, as before.

use std::path::{Path, PathBuf};
use std::process::Command;

use cairn_tests::{both_backends, repo_root, require_model, Backend, TestServer};
use serde_json::{json, Value};

both_backends!(scans_and_images_become_searchable);

fn real_pdf() -> PathBuf {
    PathBuf::from(std::env::var("CAIRN_TEST_REAL_PDF").unwrap_or_else(|_| {
        panic!("CAIRN_TEST_REAL_PDF is not set: scripts/fetch-test-pdf.sh fetches a real PDF (the README's test command does)")
    }))
}

fn run(program: &str, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} (the README's test command installs it): {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn scan(pdf: &Path, first: u32, last: u32, out: &Path) -> Vec<u8> {
    let script = repo_root().join("scripts/make-scan.sh");
    run(
        "bash",
        &[
            &script.to_string_lossy(),
            &pdf.to_string_lossy(),
            &first.to_string(),
            &last.to_string(),
            &out.to_string_lossy(),
        ],
    );
    std::fs::read(out).unwrap_or_else(|e| panic!("{e}"))
}

const SEARCH: &str = "query($q: String!) { search(query: $q, mode: LEXICAL, topK: 5) { results { documentId page content } } }";

async fn upload(s: &TestServer, corpus: &str, name: &str, bytes: Vec<u8>) -> Value {
    let events = s.upload_watched(&s.owner_token, corpus, name, bytes).await;
    let last = events.last().cloned().unwrap_or(Value::Null);
    assert_eq!(last["state"], "SUCCEEDED", "{events:?}");
    last["result"].clone()
}

async fn scans_and_images_become_searchable(b: Backend) {
    require_model();
    let pdf = real_pdf();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // Pages 3..=5 of the user guide: page 4 of the original is page 2 of the scan.
    let scanned = scan(&pdf, 3, 5, &dir.path().join("scan.pdf"));
    let png_root = dir.path().join("page");
    run(
        "pdftoppm",
        &[
            "-png",
            "-r",
            "300",
            "-gray",
            "-f",
            "7",
            "-l",
            "7",
            "-singlefile",
            &pdf.to_string_lossy(),
            &png_root.to_string_lossy(),
        ],
    );
    let png = std::fs::read(png_root.with_extension("png")).unwrap_or_else(|e| panic!("{e}"));

    // Phrases from the original's text layer: one on page 4 (the scan's page 2), one on
    // page 7 (the PNG).
    let original = std::fs::read(&pdf).unwrap_or_else(|e| panic!("{e}"));
    let layer = cairn_extract::extract(
        &original,
        cairn_extract::Format::Pdf,
        &cairn_extract::Limits::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let page_text = |n: u32| -> String {
        let start = format!("[Page {n}]");
        let end = format!("[Page {}]", n + 1);
        let from = layer
            .text
            .find(&start)
            .unwrap_or_else(|| panic!("no {start}"));
        let to = layer.text.find(&end).unwrap_or(layer.text.len());
        layer.text[from + start.len()..to].to_owned()
    };
    let on_page_4 = "plain text files using UNIX grep, sed, awk, diff, patch";
    assert!(page_text(4).contains(on_page_4), "{}", page_text(4));
    let on_page_7 = "Wherever file name mentioned in command help it is assumed";
    assert!(page_text(7).contains(on_page_7), "{}", page_text(7));

    let s = TestServer::start(b).await;
    let c = s.create_corpus(&s.owner_token, "scans").await;
    let r = upload(&s, &c, "scan.pdf", scanned.clone()).await;
    assert_eq!(r["ocrPages"], 3, "{r}");
    assert!(r["chunkCount"].as_i64().unwrap_or(0) > 0, "{r}");
    assert!(
        r["message"]
            .as_str()
            .unwrap_or_default()
            .contains("3 pages were read by OCR"),
        "{r}"
    );
    let scan_doc = r["documentId"].to_string();
    let r = upload(&s, &c, "page7.png", png).await;
    assert_eq!(r["ocrPages"], 1, "{r}");
    assert!(r["chunkCount"].as_i64().unwrap_or(0) > 0, "{r}");
    let png_doc = r["documentId"].to_string();

    // The scan's chunks carry the scan's page numbers, and its words are searchable.
    let d = s
        .gql_ok(
            &s.owner_token,
            "query($id: ID!) { document(id: $id) { mimeType chunks { page content } } }",
            json!({ "id": scan_doc }),
        )
        .await;
    assert_eq!(d["document"]["mimeType"], "application/pdf");
    let pages: Vec<i64> = d["document"]["chunks"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|c| c["page"].as_i64())
        .collect();
    assert!(
        pages.contains(&1) && pages.iter().all(|p| (1..=3).contains(p)),
        "{pages:?}"
    );
    for (query, doc, page) in [(on_page_4, &scan_doc, Some(2)), (on_page_7, &png_doc, None)] {
        let d = s
            .gql_ok(&s.owner_token, SEARCH, json!({ "q": query }))
            .await;
        let top = &d["search"]["results"][0];
        assert_eq!(
            top["documentId"].as_str(),
            Some(doc.as_str()),
            "{query:?}: {d}"
        );
        if let Some(p) = page {
            assert_eq!(top["page"], p, "{query:?}: {d}");
        }
    }
    s.stop().await;

    // OCR off: the same scan is stored without text, as a document to pivot to.
    let s = TestServer::start_tuned(b, |c| c.ocr = false).await;
    let c = s.create_corpus(&s.owner_token, "scans").await;
    let r = upload(&s, &c, "scan.pdf", scanned).await;
    assert_eq!(
        (r["chunkCount"].clone(), r["ocrPages"].clone()),
        (json!(0), json!(0)),
        "{r}"
    );
    assert_eq!(r["extractable"], false, "{r}");
    s.stop().await;
}
