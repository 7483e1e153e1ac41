//! Integration tests: one committed fixture per format (made by `tests/fixtures/make.sh` with
//! real tools), hostile inputs built at run time, and a real PDF Cairn did not make.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Cursor, Write};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use cairn_extract::chunk::{chunk, ChunkConfig};
use cairn_extract::{detect, extract, ExtractError, Extracted, Format, Limits};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipWriter};

fn fixture(name: &str) -> Vec<u8> {
    // Run-time CARGO_MANIFEST_DIR first: a build reused from another checkout through a shared
    // target dir carries that checkout's compile-time path.
    let dir =
        std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").into());
    let path = format!("{dir}/tests/fixtures/{name}");
    std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read fixture {path}: {e}"))
}

/// Detects the fixture's format (asserting it), extracts it with default limits.
fn extract_fixture(name: &str, expect: Format) -> Extracted {
    let bytes = fixture(name);
    assert_eq!(detect(name, &bytes), expect, "detect({name})");
    extract(&bytes, expect, &Limits::default())
        .unwrap_or_else(|e| panic!("extracting {name} failed: {e}"))
}

fn assert_contains(text: &str, needle: &str) {
    assert!(
        text.contains(needle),
        "expected {needle:?} in the extracted text:\n{text}"
    );
}

/// Asserts the needles occur in this order.
fn assert_in_order(text: &str, needles: &[&str]) {
    let mut at = 0;
    for n in needles {
        match text[at..].find(n) {
            Some(i) => at += i + n.len(),
            None => panic!("expected {n:?} after byte {at} in:\n{text}"),
        }
    }
}

fn has_line(text: &str, line: &str) -> bool {
    text.lines().any(|l| l == line)
}

const SENTENCE: &str = "The granite marmot inspects every cairn at dawn.";
const TABLE: &str = "| Name | Role | Count |\n| --- | --- | --- |\n| Alice | Surveyor | 3 |\n| Bob | Cartographer | 5 |";

// ---------------------------------------------------------------- detection

#[test]
fn detects_every_fixture_by_name() {
    for (name, f) in [
        ("sample.pdf", Format::Pdf),
        ("sample.docx", Format::Docx),
        ("sample.pptx", Format::Pptx),
        ("sample.xlsx", Format::Xlsx),
        ("sample.xls", Format::Xls),
        ("sample.xlsb", Format::Xlsb),
        ("sample.ods", Format::Ods),
        ("sample.html", Format::Html),
        ("sample.md", Format::Markdown),
        ("sample.txt", Format::Text),
    ] {
        assert_eq!(detect(name, &fixture(name)), f, "{name}");
    }
}

#[test]
fn content_overrides_a_wrong_or_missing_extension() {
    let cases = [
        ("sample.docx", "upload.bin", Format::Docx),
        ("sample.docx", "noext", Format::Docx),
        ("sample.pptx", "deck.docx", Format::Pptx),
        ("sample.xlsx", "report.xls", Format::Xlsx),
        ("sample.xlsb", "book.xlsx", Format::Xlsb),
        ("sample.ods", "sheet.zip", Format::Ods),
        ("sample.pdf", "notes.txt", Format::Pdf),
        ("sample.xls", "legacy.doc", Format::Xls),
        ("sample.html", "page", Format::Html),
        ("sample.html", "page.pdf", Format::Html),
        ("sample.txt", "fake.docx", Format::Text),
        ("sample.md", "README.MD", Format::Markdown),
    ];
    for (file, name, f) in cases {
        assert_eq!(detect(name, &fixture(file)), f, "{file} uploaded as {name}");
    }
    assert_eq!(detect("empty.txt", b""), Format::Text);
    assert_eq!(
        detect("dir/Report.PDF", b""),
        Format::Text,
        "no magic: sniffed"
    );
    assert_eq!(detect("a.html", b""), Format::Html);
}

#[test]
fn mime_types_are_distinct_and_round_trip() {
    let mut seen = std::collections::HashSet::new();
    for f in Format::ALL {
        assert!(seen.insert(f.mime_type()), "duplicate mime for {f}");
        assert_eq!(Format::from_mime_type(f.mime_type()), Some(f));
    }
    assert_eq!(Format::Pdf.mime_type(), "application/pdf");
    assert_eq!(
        Format::from_mime_type("TEXT/HTML; charset=utf-8"),
        Some(Format::Html)
    );
    assert_eq!(Format::from_mime_type("image/png"), Some(Format::Png));
    assert_eq!(Format::from_mime_type("image/gif"), None);
}

// ---------------------------------------------------------------- output shape per format

#[test]
fn pdf_has_page_markers_and_text() {
    let e = extract_fixture("sample.pdf", Format::Pdf);
    assert_eq!(e.pages, Some(3));
    assert!(e.text.starts_with("[Page 1]\n\n"), "{}", e.text);
    for n in 1..=3 {
        assert!(has_line(&e.text, &format!("[Page {n}]")), "{}", e.text);
    }
    assert_in_order(
        &e.text,
        &[
            "[Page 1]",
            "Cairn Survey Handbook",
            SENTENCE,
            "[Page 2]",
            "Chapter Two: Ridges",
            "Alice Surveyor 3",
            "[Page 3]",
            "The final page mentions the summit register.",
        ],
    );
    // Chunks carry the page they start on.
    let chunks = chunk(&e.text, &ChunkConfig::default());
    // Small, but chunks never span pages: one per page.
    let pages: Vec<_> = chunks.iter().map(|c| c.page).collect();
    assert_eq!(pages, vec![Some(1), Some(2), Some(3)]);
    let small = chunk(
        &e.text,
        &ChunkConfig {
            chunk_size: 60,
            chunk_overlap: 0,
        },
    );
    let last = small.last().unwrap();
    assert!(last.content.contains("summit register"));
    assert_eq!(last.page, Some(3));
}

#[test]
fn docx_has_headings_by_style_tables_and_lists() {
    let e = extract_fixture("sample.docx", Format::Docx);
    assert_eq!(e.pages, None);
    for line in [
        "# Cairn Field Guide",
        "# Introduction",
        "## Inventory",
        "### Closing Notes",
        SENTENCE,
        "- Check the rope twice.",
    ] {
        assert!(
            has_line(&e.text, line),
            "missing line {line:?} in:\n{}",
            e.text
        );
    }
    assert_contains(&e.text, TABLE);
    assert_in_order(
        &e.text,
        &[
            "# Introduction",
            SENTENCE,
            "## Inventory",
            TABLE,
            "### Closing Notes",
        ],
    );
    let sections: Vec<_> = chunk(&e.text, &ChunkConfig::default())
        .into_iter()
        .map(|c| c.section)
        .collect();
    assert_eq!(
        sections,
        vec![
            Some("Cairn Field Guide".to_string()),
            Some("Introduction".to_string()),
            Some("Inventory".to_string()),
            Some("Closing Notes".to_string()),
        ]
    );
}

#[test]
fn pptx_has_slide_headings_text_tables_and_notes() {
    let e = extract_fixture("sample.pptx", Format::Pptx);
    assert_in_order(
        &e.text,
        &[
            "## Slide 1: Cairn Overview",
            "Stone by stone",
            "## Slide 2: Trail Metrics",
            "Marmots were counted along the ridge trail.",
            TABLE,
            "Notes: Speaker notes mention the hidden glacier.",
            "## Slide 3: Next Steps",
            "Rebuild the fallen cairn before winter.",
        ],
    );
    assert_eq!(
        e.text.matches("Cairn Overview").count(),
        1,
        "the title is not repeated as body text"
    );
}

fn assert_workbook(name: &str, format: Format, with_date: bool) {
    let e = extract_fixture(name, format);
    assert_contains(&e.text, &format!("[Sheet: Inventory]\n\n{TABLE}"));
    let mut notes = format!(
        "[Sheet: Notes]\n\n| Topic | Detail |\n| --- | --- |\n| Dawn | {SENTENCE} |\n| Ratio | 2.5 |"
    );
    if with_date {
        notes.push_str("\n| Surveyed | 2024-05-17 |");
    }
    assert_contains(&e.text, &notes);
    assert!(
        e.text.find("[Sheet: Inventory]") < e.text.find("[Sheet: Notes]"),
        "sheets in workbook order"
    );
    let sections: Vec<_> = chunk(&e.text, &ChunkConfig::default());
    assert_eq!(sections.len(), 1);
}

#[test]
fn xlsx_has_one_block_per_sheet() {
    assert_workbook("sample.xlsx", Format::Xlsx, true);
}

#[test]
fn xls_has_one_block_per_sheet() {
    assert_workbook("sample.xls", Format::Xls, false);
}

#[test]
fn xlsb_has_one_block_per_sheet() {
    assert_workbook("sample.xlsb", Format::Xlsb, true);
}

#[test]
fn ods_has_one_block_per_sheet() {
    assert_workbook("sample.ods", Format::Ods, true);
}

#[test]
fn html_keeps_structure_and_drops_scripts() {
    let e = extract_fixture("sample.html", Format::Html);
    for line in [
        "# Cairn Trail Notes",
        SENTENCE,
        "## Gear",
        "- Rope",
        "- Compass",
        "  1. Declination card",
        "## Crew",
        "### Log",
        "day 1: ridge",
        "day 2: summit",
    ] {
        assert!(
            has_line(&e.text, line),
            "missing line {line:?} in:\n{}",
            e.text
        );
    }
    assert_contains(&e.text, TABLE);
    for dropped in [
        "trackingSecret",
        "do-not-index",
        "also not indexed",
        "enable JavaScript",
        "font-family",
    ] {
        assert!(
            !e.text.contains(dropped),
            "{dropped:?} leaked into:\n{}",
            e.text
        );
    }
}

#[test]
fn markdown_passes_through() {
    let bytes = fixture("sample.md");
    let e = extract_fixture("sample.md", Format::Markdown);
    assert_eq!(e.text.as_bytes(), &bytes[..]);
}

#[test]
fn text_is_utf8_with_normalised_line_ends() {
    let e = extract_fixture("sample.txt", Format::Text);
    assert_eq!(
        e.text,
        format!("Cairn plain-text log\n\n{SENTENCE}\nSecond line of the first paragraph.\n")
    );
}

// ---------------------------------------------------------------- awkward and hostile input

#[test]
fn empty_input_is_an_empty_extraction_in_every_format() {
    for f in Format::ALL {
        let e = extract(b"", f, &Limits::default()).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert_eq!(e.text, "", "{f}");
    }
}

#[test]
fn invalid_utf8_is_replaced() {
    let bytes = b"caf\xE9 au lait \xFF\xFE\xFD end\n\xF0\x9F\x99";
    assert_eq!(detect("broken.txt", bytes), Format::Text);
    let e = extract(bytes, Format::Text, &Limits::default()).unwrap();
    assert!(e.text.starts_with("caf\u{FFFD} au lait "), "{:?}", e.text);
    assert!(e.text.contains(" end\n"));
    assert!(e.text.matches('\u{FFFD}').count() >= 4, "{:?}", e.text);
    let md = extract(bytes, Format::Markdown, &Limits::default()).unwrap();
    assert_eq!(md.text, e.text);
}

#[test]
fn truncated_pdf_is_corrupt() {
    let pdf = fixture("sample.pdf");
    let half = &pdf[..pdf.len() / 2];
    assert_eq!(detect("cut.pdf", half), Format::Pdf);
    match extract(half, Format::Pdf, &Limits::default()) {
        Err(ExtractError::Corrupt(msg)) => assert!(!msg.is_empty()),
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

#[test]
fn truncated_and_garbage_containers_are_errors_not_panics() {
    for (name, f) in [
        ("sample.docx", Format::Docx),
        ("sample.pptx", Format::Pptx),
        ("sample.xlsx", Format::Xlsx),
        ("sample.xls", Format::Xls),
        ("sample.xlsb", Format::Xlsb),
        ("sample.ods", Format::Ods),
    ] {
        let bytes = fixture(name);
        let half = &bytes[..bytes.len() / 2];
        assert!(
            matches!(
                extract(half, f, &Limits::default()),
                Err(ExtractError::Corrupt(_))
            ),
            "truncated {name}"
        );
    }
    // Pseudo-random bytes behind each format's magic, forced into every binary format.
    let mut state: u32 = 0x2545_F491;
    let mut noise = |n: usize| -> Vec<u8> {
        (0..n)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                (state >> 24) as u8
            })
            .collect()
    };
    for magic in [
        &b"%PDF-1.7\n"[..],
        b"PK\x03\x04",
        b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1",
    ] {
        let mut bytes = magic.to_vec();
        bytes.extend(noise(4096));
        for f in [
            Format::Pdf,
            Format::Docx,
            Format::Pptx,
            Format::Xlsx,
            Format::Xls,
            Format::Xlsb,
            Format::Ods,
        ] {
            let r = extract(&bytes, f, &Limits::default());
            assert!(r.is_err(), "{f} accepted noise: {r:?}");
        }
        // HTML and text never fail on noise except as binary.
        assert!(extract(&bytes, Format::Html, &Limits::default()).is_ok());
    }
}

#[test]
fn binary_data_is_not_text() {
    let elf = b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x3e\x00";
    assert_eq!(detect("program.png", elf), Format::Text);
    assert!(matches!(
        extract(elf, Format::Text, &Limits::default()),
        Err(ExtractError::Unsupported(_))
    ));
    // Pictures are told by their bytes; without OCR they have no text (not an error).
    let png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR";
    assert_eq!(detect("image.txt", png), Format::Png);
    assert_eq!(
        detect("scan", b"\xff\xd8\xff\xe0\x00\x10JFIF"),
        Format::Jpeg
    );
    assert_eq!(detect("scan.tif", b"II*\x00\x08\x00\x00\x00"), Format::Tiff);
    assert_eq!(detect("scan.tif", b"MM\x00*\x00\x00\x00\x08"), Format::Tiff);
    let e = extract(png, Format::Png, &Limits::default());
    assert!(
        matches!(e, Ok(ref x) if x.text.is_empty() && x.ocr_pages == 0),
        "{e:?}"
    );
}

#[test]
fn output_over_the_cap_is_too_large() {
    let limits = Limits {
        max_output_chars: 40,
        ..Limits::default()
    };
    for (name, f) in [
        ("sample.docx", Format::Docx),
        ("sample.pptx", Format::Pptx),
        ("sample.xlsx", Format::Xlsx),
        ("sample.ods", Format::Ods),
        ("sample.pdf", Format::Pdf),
        ("sample.html", Format::Html),
        ("sample.md", Format::Markdown),
        ("sample.txt", Format::Text),
    ] {
        let r = extract(&fixture(name), f, &limits);
        assert!(matches!(r, Err(ExtractError::TooLarge(_))), "{name}: {r:?}");
    }
}

#[test]
fn too_many_zip_entries_is_too_large() {
    let limits = Limits {
        max_zip_entries: 3,
        ..Limits::default()
    };
    let r = extract(&fixture("sample.docx"), Format::Docx, &limits);
    assert!(
        matches!(r, Err(ExtractError::TooLarge(ref m)) if m.contains("entries")),
        "{r:?}"
    );
}

// ---- zip bombs

const GIB: u64 = 1 << 30;
const DOCX_TYPES: &str = r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>"#;
const XLSX_TYPES: &str = r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/></Types>"#;

/// Writes `len` zeros into the current zip entry, 1 MiB at a time (never holding them all).
fn write_zeros(w: &mut ZipWriter<Cursor<Vec<u8>>>, len: u64) {
    let block = vec![0u8; 1 << 20];
    let mut left = len;
    while left > 0 {
        let n = left.min(block.len() as u64) as usize;
        w.write_all(&block[..n]).unwrap();
        left -= n as u64;
    }
}

fn deflated() -> SimpleFileOptions {
    SimpleFileOptions::default()
        .compression_method(CompressionMethod::Deflated)
        .compression_level(Some(6))
}

/// A zip holding one deflated entry `bomb.bin` of 1 GiB of zeros (about 1 MiB compressed),
/// built once per test run (a few seconds of CPU) and copied raw into each bomb.
fn gib_of_zeros() -> &'static [u8] {
    static ZIP: OnceLock<Vec<u8>> = OnceLock::new();
    ZIP.get_or_init(|| {
        let mut w = ZipWriter::new(Cursor::new(Vec::new()));
        w.start_file("bomb.bin", deflated()).unwrap();
        write_zeros(&mut w, GIB);
        w.finish().unwrap().into_inner()
    })
}

/// An OOXML package: `[Content_Types].xml`, then `part` as a copy of the 1 GiB zero entry.
fn bomb(types: &str, part: &str) -> Vec<u8> {
    let mut w = ZipWriter::new(Cursor::new(Vec::new()));
    w.start_file("[Content_Types].xml", deflated()).unwrap();
    w.write_all(types.as_bytes()).unwrap();
    let mut src = zip::ZipArchive::new(Cursor::new(gib_of_zeros())).unwrap();
    let entry = src.by_index_raw(0).unwrap();
    w.raw_copy_file_rename(entry, part).unwrap();
    w.finish().unwrap().into_inner()
}

/// Peak resident memory of this test process, in bytes (Linux), if known.
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn assert_refused_quickly(bytes: &[u8], name: &str, expect: Format) {
    assert!(bytes.len() < 8 << 20, "the bomb itself is small");
    assert_eq!(detect(name, bytes), expect);
    let start = Instant::now();
    let r = extract(bytes, expect, &Limits::default());
    let took = start.elapsed();
    assert!(matches!(r, Err(ExtractError::TooLarge(_))), "{name}: {r:?}");
    assert!(took < Duration::from_secs(2), "{name} took {took:?}");
    if let Some(peak) = peak_rss() {
        assert!(
            peak < GIB,
            "peak RSS {peak} bytes: something inflated the bomb"
        );
    }
}

#[test]
fn docx_zip_bomb_is_too_large() {
    let docx = bomb(DOCX_TYPES, "word/document.xml");
    assert_refused_quickly(&docx, "bomb.docx", Format::Docx);
}

#[test]
fn xlsx_zip_bomb_is_too_large() {
    let xlsx = bomb(XLSX_TYPES, "xl/worksheets/sheet1.xml");
    assert_refused_quickly(&xlsx, "bomb.xlsx", Format::Xlsx);
}

#[test]
fn small_but_extreme_compression_ratio_is_too_large() {
    // 8 MiB of zeros: far under the byte budget, but ~1000:1.
    let mut w = ZipWriter::new(Cursor::new(Vec::new()));
    w.start_file("[Content_Types].xml", deflated()).unwrap();
    w.write_all(DOCX_TYPES.as_bytes()).unwrap();
    w.start_file("word/document.xml", deflated()).unwrap();
    write_zeros(&mut w, 8 << 20);
    let docx = w.finish().unwrap().into_inner();
    let r = extract(&docx, Format::Docx, &Limits::default());
    assert!(
        matches!(r, Err(ExtractError::TooLarge(ref m)) if m.contains("ratio")),
        "{r:?}"
    );
}

/// Rewrites the uncompressed size that the local header and the central directory declare
/// for entry `name`.
fn lie_about_size(zip: &mut [u8], name: &str, size: u32) {
    let u16_at = |z: &[u8], i: usize| u16::from_le_bytes([z[i], z[i + 1]]) as usize;
    let mut patched = 0;
    for i in 0..zip.len().saturating_sub(46) {
        if zip[i..].starts_with(b"PK\x03\x04") {
            let n = u16_at(zip, i + 26);
            if &zip[i + 30..i + 30 + n] == name.as_bytes() {
                zip[i + 22..i + 26].copy_from_slice(&size.to_le_bytes());
                patched += 1;
            }
        } else if zip[i..].starts_with(b"PK\x01\x02") {
            let n = u16_at(zip, i + 28);
            if &zip[i + 46..i + 46 + n] == name.as_bytes() {
                zip[i + 24..i + 28].copy_from_slice(&size.to_le_bytes());
                patched += 1;
            }
        }
    }
    assert_eq!(patched, 2, "patched the local and the central header");
}

#[test]
fn entries_that_lie_about_their_size_are_caught() {
    // 64 MiB of zeros declared as 2000 bytes: the directory looks harmless.
    for (types, part, format) in [
        (DOCX_TYPES, "word/document.xml", Format::Docx),
        (XLSX_TYPES, "xl/workbook.xml", Format::Xlsx),
    ] {
        let mut w = ZipWriter::new(Cursor::new(Vec::new()));
        w.start_file("[Content_Types].xml", deflated()).unwrap();
        w.write_all(types.as_bytes()).unwrap();
        w.start_file(part, deflated()).unwrap();
        write_zeros(&mut w, 64 << 20);
        let mut bytes = w.finish().unwrap().into_inner();
        lie_about_size(&mut bytes, part, 2000);
        let start = Instant::now();
        let r = extract(&bytes, format, &Limits::default());
        assert!(
            matches!(r, Err(ExtractError::TooLarge(ref m)) if m.contains("declared size")),
            "{format}: {r:?}"
        );
        assert!(start.elapsed() < Duration::from_secs(2));
    }
}

#[test]
fn ods_repeat_bomb_is_refused_before_expansion() {
    // One row with a value, repeated a million times across a thousand columns: tiny XML,
    // a billion cells once expanded.
    let content = r#"<?xml version="1.0" encoding="UTF-8"?>
<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" office:version="1.2"><office:body><office:spreadsheet><table:table table:name="Bomb"><table:table-row table:number-rows-repeated="1000000"><table:table-cell table:number-columns-repeated="1000" office:value-type="float" office:value="1"><text:p>1</text:p></table:table-cell></table:table-row></table:table></office:spreadsheet></office:body></office:document-content>"#;
    let mut w = ZipWriter::new(Cursor::new(Vec::new()));
    w.start_file(
        "mimetype",
        SimpleFileOptions::default().compression_method(CompressionMethod::Stored),
    )
    .unwrap();
    w.write_all(Format::Ods.mime_type().as_bytes()).unwrap();
    w.start_file("content.xml", deflated()).unwrap();
    w.write_all(content.as_bytes()).unwrap();
    let ods = w.finish().unwrap().into_inner();
    assert_refused_quickly(&ods, "bomb.ods", Format::Ods);
}

/// A one-page PDF whose content stream is `stream` (FlateDecode), with a correct xref table.
fn pdf_with_flate_content(stream: &[u8]) -> Vec<u8> {
    let mut out: Vec<u8> = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    let mut obj = |out: &mut Vec<u8>, body: &[u8]| {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n", offsets.len()).as_bytes());
        out.extend_from_slice(body);
        out.extend_from_slice(b"\nendobj\n");
    };
    obj(&mut out, b"<< /Type /Catalog /Pages 2 0 R >>");
    obj(&mut out, b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>");
    obj(
        &mut out,
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
    );
    let mut body = format!(
        "<< /Length {} /Filter /FlateDecode >>\nstream\n",
        stream.len()
    )
    .into_bytes();
    body.extend_from_slice(stream);
    body.extend_from_slice(b"\nendstream");
    obj(&mut out, &body);
    let xref = out.len();
    out.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", offsets.len() + 1).as_bytes(),
    );
    for o in &offsets {
        out.extend_from_slice(format!("{o:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            offsets.len() + 1
        )
        .as_bytes(),
    );
    out
}

#[test]
fn pdf_stream_bomb_is_too_large() {
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    let spaces = vec![b' '; 1 << 20];
    for _ in 0..8 {
        z.write_all(&spaces).unwrap();
    }
    let pdf = pdf_with_flate_content(&z.finish().unwrap());
    let limits = Limits {
        max_decompressed_bytes: 4 << 20,
        ..Limits::default()
    };
    let r = extract(&pdf, Format::Pdf, &limits);
    assert!(matches!(r, Err(ExtractError::TooLarge(_))), "{r:?}");
    // Within the budget the same file reads fine (and has no text).
    let ok = extract(&pdf, Format::Pdf, &Limits::default()).unwrap();
    assert_eq!(ok.pages, Some(1));
    assert_eq!(ok.text, "", "a PDF without text extracts to nothing");
}

#[test]
fn encrypted_office_files_are_unsupported() {
    // Password-protected OOXML is an OLE2 compound file, whatever the extension says.
    let ole = fixture("sample.xls");
    assert_eq!(detect("secret.docx", &ole), Format::Docx);
    let r = extract(&ole, Format::Docx, &Limits::default());
    assert!(matches!(r, Err(ExtractError::Unsupported(_))), "{r:?}");
}

// ---------------------------------------------------------------- a real PDF we did not make

#[test]
fn real_world_pdf() {
    let Ok(path) = std::env::var("CAIRN_TEST_REAL_PDF") else {
        panic!(
            "CAIRN_TEST_REAL_PDF is not set. This test needs a real multi-page PDF that Cairn did \
             not make: run `CAIRN_TEST_REAL_PDF=\"$(scripts/fetch-test-pdf.sh)\" cargo test -p \
             cairn-extract` from the repository root (the script downloads the Debian package \
             xmlstarlet and unpacks its user guide into /var/tmp/cairn-test-data/)."
        )
    };
    let bytes = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("CAIRN_TEST_REAL_PDF={path} cannot be read: {e}"));
    assert_eq!(detect(&path, &bytes), Format::Pdf);
    let e = extract(&bytes, Format::Pdf, &Limits::default()).unwrap();
    let pages = e.pages.expect("a PDF has pages");
    assert!(pages >= 5, "only {pages} pages");
    let markers: Vec<u32> = e
        .text
        .lines()
        .filter_map(|l| l.strip_prefix("[Page ")?.strip_suffix(']')?.parse().ok())
        .collect();
    assert!(markers.len() >= 5, "only {} page markers", markers.len());
    assert!(markers.windows(2).all(|w| w[0] < w[1]), "markers in order");
    assert!(markers.iter().all(|&n| n >= 1 && n <= pages));
    let chars = e.text.chars().count();
    assert!(chars > 10_000, "only {chars} characters of text");
    let words = e.text.split_whitespace().filter(|w| w.len() > 3).count();
    assert!(words > 1_000, "only {words} words");
    // Chunking gives chunks on many distinct pages, none over the size.
    let cfg = ChunkConfig::default();
    let chunks = chunk(&e.text, &cfg);
    assert!(chunks.len() > 5);
    assert!(chunks
        .iter()
        .all(|c| c.content.chars().count() <= cfg.chunk_size));
    let distinct: std::collections::BTreeSet<_> = chunks.iter().filter_map(|c| c.page).collect();
    assert!(
        distinct.len() >= 5,
        "chunks start on {} distinct pages",
        distinct.len()
    );
}

#[test]
fn legacy_word_documents_are_unsupported() {
    let doc = fixture("legacy.doc");
    assert_eq!(
        detect("legacy.doc", &doc),
        Format::Xls,
        "the only OLE2 format we read"
    );
    match extract(&doc, Format::Xls, &Limits::default()) {
        Err(ExtractError::Unsupported(msg)) => {
            assert!(msg.contains("not an Excel workbook"), "{msg}")
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
}
