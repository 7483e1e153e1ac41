//! OCR on real scans: pages of a real PDF that Cairn did not make (Debian's xmlstarlet user
//! guide, `CAIRN_TEST_REAL_PDF`) are rasterized at test time (poppler's `pdftoppm`, 300 dpi,
//! grey, JPEG as a scanner writes) and wrapped into a PDF without any text layer (`img2pdf`).
//! What OCR reads back is compared, word by word, with the original page's text layer.
//!
//! Needs `tesseract` (+ `tesseract-ocr-eng`), `pdftoppm` and `img2pdf`: the README's test
//! command installs them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use cairn_extract::ocr::{Ocr, OcrError};
use cairn_extract::{detect, extract, extract_with_ocr, ExtractError, Format, Limits};

fn real_pdf() -> PathBuf {
    let path = std::env::var("CAIRN_TEST_REAL_PDF").unwrap_or_else(|_| {
        panic!(
            "CAIRN_TEST_REAL_PDF is not set: run `CAIRN_TEST_REAL_PDF=\"$(scripts/fetch-test-pdf.sh)\" \
             cargo test -p cairn-extract` (the README's test command does)"
        )
    });
    PathBuf::from(path)
}

fn ocr() -> Ocr {
    Ocr::locate(None, "eng").unwrap_or_else(|e| {
        panic!("{e}: the README's test command installs tesseract-ocr, tesseract-ocr-eng and poppler-utils")
    })
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

/// Pages `first..=last` of `pdf` as a scan (`scripts/make-scan.sh`: 300 dpi grey JPEGs in a
/// PDF with no text layer); the scan's path is `dir/scan-FIRST-LAST.pdf`.
fn scan(pdf: &Path, first: u32, last: u32, dir: &Path) -> Vec<u8> {
    let out = dir.join(format!("scan-{first}-{last}.pdf"));
    let script = manifest_dir().join("../scripts/make-scan.sh");
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
    std::fs::read(&out).unwrap_or_else(|e| panic!("{e}"))
}

/// The text of each `[Page N]` block.
fn pages_of(text: &str) -> HashMap<u32, String> {
    let mut pages = HashMap::new();
    let mut current: Option<(u32, String)> = None;
    for line in text.lines() {
        if let Some(n) = line
            .strip_prefix("[Page ")
            .and_then(|r| r.strip_suffix(']'))
            .and_then(|n| n.parse().ok())
        {
            if let Some((k, v)) = current.take() {
                pages.insert(k, v);
            }
            current = Some((n, String::new()));
        } else if let Some((_, v)) = current.as_mut() {
            v.push_str(line);
            v.push('\n');
        }
    }
    if let Some((k, v)) = current {
        pages.insert(k, v);
    }
    pages
}

fn words(text: &str) -> HashMap<String, usize> {
    let mut m = HashMap::new();
    for w in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        *m.entry(w.to_lowercase()).or_insert(0) += 1;
    }
    m
}

/// Word-level recall: the share of the reference's words (counted with repeats) that the
/// OCR text has. Returns (found, total).
fn recall(reference: &str, got: &str) -> (usize, usize) {
    let got = words(got);
    let reference = words(reference);
    let total = reference.values().sum();
    let found = reference
        .iter()
        .map(|(w, n)| (*n).min(got.get(w).copied().unwrap_or(0)))
        .sum();
    (found, total)
}

fn report(name: &str, text: &str) {
    println!("{text}");
    if let Ok(dir) = std::env::var("CAIRN_REPORT_DIR") {
        let _ = std::fs::create_dir_all(&dir);
        let _ = std::fs::write(Path::new(&dir).join(name), text);
    }
}

/// A 20-page scan: no text without OCR; with it, every page under its own marker and ≥ 95% of
/// the original pages' words, within the default per-page limits (and a tighter memory one).
#[test]
fn a_scanned_pdf_is_read_by_ocr() {
    let pdf = real_pdf();
    let original = std::fs::read(&pdf).unwrap_or_else(|e| panic!("{e}"));
    let reference =
        extract(&original, Format::Pdf, &Limits::default()).unwrap_or_else(|e| panic!("{e}"));
    let reference = pages_of(&reference.text);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let scanned = scan(&pdf, 1, 20, dir.path());
    assert_eq!(detect("scan.pdf", &scanned), Format::Pdf);
    let plain =
        extract(&scanned, Format::Pdf, &Limits::default()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(plain.text, "", "the scan has no text layer");
    assert_eq!(plain.pages, Some(20));

    let mut ocr = ocr();
    // Tighter than the server's default (1 GiB): a 300 dpi letter page needs far less.
    ocr.page_memory_mb = 512;
    let started = Instant::now();
    let read = extract_with_ocr(&scanned, Format::Pdf, &Limits::default(), Some(&ocr))
        .unwrap_or_else(|e| panic!("{e}"));
    let took = started.elapsed();
    assert_eq!(read.ocr_pages, 20);
    assert_eq!(read.pages, Some(20));
    let got = pages_of(&read.text);
    let mut lines =
        vec![format!(
        "OCR of a 20-page scan of {} (300 dpi grey JPEG, tesseract {} jobs, prlimit {}): {:.1} s",
        pdf.display(),
        ocr.jobs,
        if ocr.prlimit.is_some() { "512 MiB/page" } else { "absent" },
        took.as_secs_f64()
    )];
    let (mut found, mut total) = (0, 0);
    for n in 1..=20u32 {
        let r = reference.get(&n).cloned().unwrap_or_default();
        let g = got
            .get(&n)
            .cloned()
            .unwrap_or_else(|| panic!("page {n} has no marker"));
        let (f, t) = recall(&r, &g);
        found += f;
        total += t;
        lines.push(format!("page {n:>2}: {f:>4}/{t:<4} words"));
    }
    let overall = found as f64 / total.max(1) as f64;
    lines.push(format!("word recall: {found}/{total} = {overall:.3}"));
    report("ocr-recall.txt", &lines.join("\n"));
    assert!(total > 2_000, "the reference pages have {total} words");
    assert!(overall >= 0.95, "word recall {overall:.3} < 0.95");
}

/// A PDF with text pages and scanned pages keeps the text layer where there is one and reads
/// only the others by OCR.
#[test]
fn mixed_pages_keep_their_text_layer() {
    let pdf = real_pdf();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // Pages 4 and 5 of the original (prose; page 3 is the table of contents, whose dotted
    // leaders OCR reads poorly) become pages 3 and 4 of the mixed document.
    let scanned = scan(&pdf, 4, 5, dir.path());
    let scan_path = dir.path().join("scan-4-5.pdf");
    assert!(scan_path.is_file());
    let text_part = dir.path().join("text-1-2.pdf");
    run(
        "pdfseparate",
        &[
            "-f",
            "1",
            "-l",
            "2",
            &pdf.to_string_lossy(),
            &dir.path().join("t-%d.pdf").to_string_lossy(),
        ],
    );
    run(
        "pdfunite",
        &[
            &dir.path().join("t-1.pdf").to_string_lossy(),
            &dir.path().join("t-2.pdf").to_string_lossy(),
            &text_part.to_string_lossy(),
        ],
    );
    let mixed_path = dir.path().join("mixed.pdf");
    run(
        "pdfunite",
        &[
            &text_part.to_string_lossy(),
            &scan_path.to_string_lossy(),
            &mixed_path.to_string_lossy(),
        ],
    );
    drop(scanned);
    let mixed = std::fs::read(&mixed_path).unwrap_or_else(|e| panic!("{e}"));
    let layer = extract(&mixed, Format::Pdf, &Limits::default()).unwrap_or_else(|e| panic!("{e}"));
    let layer = pages_of(&layer.text);
    assert!(!layer[&1].trim().is_empty() && !layer[&2].trim().is_empty());
    assert!(layer[&3].trim().is_empty() && layer[&4].trim().is_empty());

    let read = extract_with_ocr(&mixed, Format::Pdf, &Limits::default(), Some(&ocr()))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(read.ocr_pages, 2, "only the two scanned pages");
    let got = pages_of(&read.text);
    assert_eq!(got[&1], layer[&1], "page 1 keeps its text layer, verbatim");
    assert_eq!(got[&2], layer[&2], "page 2 keeps its text layer, verbatim");
    let original = std::fs::read(&pdf).unwrap_or_else(|e| panic!("{e}"));
    let reference =
        extract(&original, Format::Pdf, &Limits::default()).unwrap_or_else(|e| panic!("{e}"));
    let reference = pages_of(&reference.text);
    for (n, of) in [(3u32, 4u32), (4, 5)] {
        let (f, t) = recall(&reference[&of], &got[&n]);
        assert!(f as f64 >= 0.9 * t as f64, "page {n}: {f}/{t}");
    }
}

/// PNG, JPEG and TIFF are told by their bytes and read by OCR; without OCR they have no text.
#[test]
fn images_are_read_by_ocr() {
    let pdf = real_pdf();
    let original = std::fs::read(&pdf).unwrap_or_else(|e| panic!("{e}"));
    let reference =
        extract(&original, Format::Pdf, &Limits::default()).unwrap_or_else(|e| panic!("{e}"));
    let reference = pages_of(&reference.text)[&4].clone();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let ocr = ocr();
    for (flag, ext, format) in [
        ("-png", "png", Format::Png),
        ("-jpeg", "jpg", Format::Jpeg),
        ("-tiff", "tif", Format::Tiff),
    ] {
        let root = dir.path().join(format!("page4-{ext}"));
        run(
            "pdftoppm",
            &[
                flag,
                "-r",
                "300",
                "-gray",
                "-f",
                "4",
                "-l",
                "4",
                "-singlefile",
                &pdf.to_string_lossy(),
                &root.to_string_lossy(),
            ],
        );
        let bytes = std::fs::read(root.with_extension(ext)).unwrap_or_else(|e| panic!("{e}"));
        // Told by its bytes, whatever the name says.
        assert_eq!(detect("upload.bin", &bytes), format);
        assert!(format.is_image());
        let plain = extract(&bytes, format, &Limits::default()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(plain.text, "");
        let read = extract_with_ocr(&bytes, format, &Limits::default(), Some(&ocr))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read.ocr_pages, 1);
        let (f, t) = recall(&reference, &read.text);
        assert!(f as f64 >= 0.9 * t as f64, "{ext}: {f}/{t}\n{}", read.text);
    }
}

/// A page over its time or memory limit fails with a reason that says so; the caller gets an
/// error, not a hang or a crash.
#[test]
fn page_limits_fail_with_a_reason() {
    let pdf = real_pdf();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let scanned = scan(&pdf, 5, 6, dir.path());

    let mut slow = ocr();
    slow.page_timeout = Duration::from_millis(1);
    let pages = slow.pdf_pages(&scanned, &[1, 2]);
    assert_eq!(pages.len(), 2);
    for (_, r) in &pages {
        assert!(matches!(r, Err(OcrError::Timeout { .. })), "{r:?}");
    }
    match extract_with_ocr(&scanned, Format::Pdf, &Limits::default(), Some(&slow)) {
        Err(ExtractError::Unsupported(m)) => assert!(m.contains("took longer than"), "{m}"),
        other => panic!("expected the timeout as the reason, got {other:?}"),
    }

    let mut small = ocr();
    assert!(
        small.prlimit.is_some(),
        "prlimit (util-linux) gives each page its memory limit"
    );
    small.page_memory_mb = 16;
    for (_, r) in small.pdf_pages(&scanned, &[1]) {
        assert!(matches!(r, Err(OcrError::Failed { .. })), "{r:?}");
    }
}

/// This crate's directory: the run-time `CARGO_MANIFEST_DIR` cargo sets for `cargo test` first,
/// the compile-time one only outside cargo (a shared target dir can hold a binary built from
/// another checkout, whose compile-time path is stale).
fn manifest_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}
