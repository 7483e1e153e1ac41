//! Text extraction and structural chunking for Cairn.
//!
//! This crate is pure (bytes in, text out) except for [`ocr`], which runs Tesseract. It knows
//! nothing of databases, HTTP or jobs; the server's ingest job calls [`detect`], then
//! [`extract_with_ocr`] (or [`extract`]), then [`chunk::chunk`].
//!
//! # Layout
//!
//! | module | what it does | built on |
//! | --- | --- | --- |
//! | `lib.rs` | [`Format`], [`detect`], [`extract`], [`Limits`], [`ExtractError`] | |
//! | `guard` | zip-bomb inspection, bounded entry reads, panic containment, the output cap | `zip` |
//! | `pdf` | one block per page behind a `[Page N]` marker | `pdf-extract` (over `lopdf`), `flate2` |
//! | `docx` | paragraphs, headings by style, lists, tables | `zip` + `quick-xml` |
//! | `pptx` | one `## Slide N: title` section per slide, text, tables, speaker notes | `zip` + `quick-xml` |
//! | `sheet` | one `[Sheet: name]` block per sheet (xlsx, xls, xlsb, ods) | `calamine` |
//! | `html` | headings, paragraphs, lists, tables, preformatted text | `scraper` (html5ever) |
//! | `text` | Markdown and plain text | `std` |
//! | [`ocr`] | OCR of scanned PDF pages and images (the one module that runs programs) | `tesseract`, `pdftoppm` |
//! | [`chunk`] | the structural chunker (sections, then paragraphs with overlap) | `std` |
//!
//! # Output conventions
//!
//! Every extractor produces Markdown-flavoured plain text, with `\n` line ends and blocks
//! separated by one blank line, so that the chunker can find structure in it:
//!
//! * **Headings** are `#` … `######` followed by a space and the heading text on one line.
//!   DOCX: paragraph style `Title` is `#`, `Heading N` is N `#`s (7–9 are capped at 6), and so
//!   is any style or paragraph with an outline level. HTML: `<h1>`…`<h6>`. PPTX: every slide
//!   opens with `## Slide N: <title>` (or `## Slide N` when the slide has no title).
//! * **Tables** are Markdown tables: the first row is the header row, then a `| --- |`
//!   separator, then the data rows. `|` inside a cell is escaped as `\|` and line breaks inside
//!   a cell become spaces. Merged (spanned) cells are padded with empty cells so that every row
//!   has the same width.
//! * **PDF** pages are each introduced by a line `[Page N]` (1-based), and
//!   [`Extracted::pages`] is the page count. PDFs carry no reliable heading structure through
//!   `pdf-extract`, so PDF text has no `#` headings. A PDF none of whose pages has any text
//!   (a scan) extracts to empty text with [`extract`]; [`extract_with_ocr`] reads such pages
//!   (and only those) by OCR, under the same `[Page N]` markers.
//! * **Images** (PNG, JPEG, TIFF) have no text layer: empty with [`extract`], their OCR text
//!   with [`extract_with_ocr`].
//! * **Spreadsheets** (XLSX, XLS, XLSB, ODS) give one block per non-empty sheet: a line
//!   `[Sheet: name]`, a blank line, then the sheet as a table whose header row is the first
//!   non-empty row. Entirely empty rows and columns are left out. Dates print as `YYYY-MM-DD`
//!   (plus ` HH:MM:SS` when they have a time), booleans as `true`/`false`.
//! * **Lists** (DOCX numbered/bulleted paragraphs, HTML `<ul>`/`<ol>`) are `- item` or `1. item`
//!   lines, indented two spaces per nesting level.
//! * **Speaker notes** (PPTX) follow the slide's content as a paragraph starting `Notes: `.
//! * **HTML**: `<script>`, `<style>`, `<noscript>`, `<template>`, `<head>`, `<svg>` and form
//!   controls are dropped; whitespace is collapsed as a browser would, except in `<pre>`.
//! * **Markdown** passes through unchanged; **plain text** is decoded as UTF-8 with invalid
//!   bytes replaced by U+FFFD (UTF-16 with a byte-order mark is decoded as such). Both have a
//!   leading BOM removed and `\r\n` turned into `\n`.
//! * An **empty extraction is not an error**: [`extract`] returns `Ok` with empty text (for a
//!   zero-byte file in any format, a scanned PDF, an empty workbook…), and the caller records a
//!   document with zero chunks.
//!
//! # Limits and hostile input
//!
//! [`extract`] is meant to be handed untrusted uploads. It never panics: third-party parsers are
//! run under [`std::panic::catch_unwind`] and a panic becomes [`ExtractError::Corrupt`]. (A
//! panic still goes through the process's panic hook, so it may be logged.) The [`Limits`] bound
//! what a file may cost:
//!
//! * `max_decompressed_bytes` (256 MiB): for every zip-based format (DOCX, PPTX, XLSX, XLSB,
//!   ODS) the zip central directory is inspected before anything is inflated, and the sum of the
//!   declared uncompressed sizes must stay under it. Entries are then read through
//!   [`std::io::Read::take`] capped at their declared size, so a header that lies about its size
//!   is caught ([`ExtractError::TooLarge`]) instead of being believed; before a workbook is handed
//!   to `calamine` (which reads entries itself) every entry is streamed once through such a cap to
//!   prove the directory honest. For PDFs the same budget bounds the inflated size of the
//!   (non-image) Flate streams that text extraction would decompress.
//! * `max_zip_entries` (10 000): more entries than this is refused.
//! * `max_compression_ratio` (200): an archive (or a single entry) over 1 MiB uncompressed whose
//!   uncompressed/compressed ratio exceeds this is refused as a bomb.
//! * `max_output_chars` (20 million): extraction stops with `TooLarge` once the text would exceed
//!   this many characters. Spreadsheet cells are capped by it too, before they are rendered, and
//!   an ODS sheet whose repeated rows/columns would expand past it is refused before `calamine`
//!   expands them.
//!
//! Residual risks, documented rather than hidden: `lopdf` inflates PDF object streams while
//! loading, before the stream budget can be checked; `calamine` builds a dense cell grid for
//! XLS (at most 65 536 × 256 cells, by the format's own limits); and no extractor has a time
//! limit, so the caller should run extraction on a blocking thread with a deadline.

#![forbid(unsafe_code)]

pub mod chunk;
mod docx;
mod guard;
mod html;
pub mod ocr;
mod pdf;
mod pptx;
mod sheet;
mod table;
mod text;
mod xml;

use std::fmt;

/// A document format Cairn can extract text from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// Portable Document Format.
    Pdf,
    /// Word (Office Open XML) document, also `.docm`.
    Docx,
    /// PowerPoint (Office Open XML) presentation, also `.pptm`.
    Pptx,
    /// Excel (Office Open XML) workbook, also `.xlsm`.
    Xlsx,
    /// Legacy Excel (BIFF, in an OLE2 compound file).
    Xls,
    /// Excel binary workbook.
    Xlsb,
    /// OpenDocument spreadsheet.
    Ods,
    /// HTML or XHTML.
    Html,
    /// Markdown.
    Markdown,
    /// Anything else, read as (UTF-8) text.
    Text,
    /// PNG image (text only by OCR).
    Png,
    /// JPEG image (text only by OCR).
    Jpeg,
    /// TIFF image, possibly of several pages (text only by OCR).
    Tiff,
}

impl Format {
    /// All formats, in declaration order.
    pub const ALL: [Format; 13] = [
        Format::Pdf,
        Format::Docx,
        Format::Pptx,
        Format::Xlsx,
        Format::Xls,
        Format::Xlsb,
        Format::Ods,
        Format::Html,
        Format::Markdown,
        Format::Text,
        Format::Png,
        Format::Jpeg,
        Format::Tiff,
    ];

    /// The IANA media type of the format.
    pub fn mime_type(self) -> &'static str {
        match self {
            Format::Pdf => "application/pdf",
            Format::Docx => {
                "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
            }
            Format::Pptx => {
                "application/vnd.openxmlformats-officedocument.presentationml.presentation"
            }
            Format::Xlsx => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
            Format::Xls => "application/vnd.ms-excel",
            Format::Xlsb => "application/vnd.ms-excel.sheet.binary.macroenabled.12",
            Format::Ods => "application/vnd.oasis.opendocument.spreadsheet",
            Format::Html => "text/html",
            Format::Markdown => "text/markdown",
            Format::Text => "text/plain",
            Format::Png => "image/png",
            Format::Jpeg => "image/jpeg",
            Format::Tiff => "image/tiff",
        }
    }

    /// The format whose [`mime_type`](Format::mime_type) this is (case-insensitive, parameters
    /// such as `; charset=utf-8` ignored), if any.
    pub fn from_mime_type(mime: &str) -> Option<Format> {
        let base = mime.split(';').next().unwrap_or_default().trim();
        Format::ALL
            .into_iter()
            .find(|f| f.mime_type().eq_ignore_ascii_case(base))
    }

    /// A short lowercase name (`"pdf"`, `"docx"`, …, `"markdown"`, `"text"`).
    pub fn name(self) -> &'static str {
        match self {
            Format::Pdf => "pdf",
            Format::Docx => "docx",
            Format::Pptx => "pptx",
            Format::Xlsx => "xlsx",
            Format::Xls => "xls",
            Format::Xlsb => "xlsb",
            Format::Ods => "ods",
            Format::Html => "html",
            Format::Markdown => "markdown",
            Format::Text => "text",
            Format::Png => "png",
            Format::Jpeg => "jpeg",
            Format::Tiff => "tiff",
        }
    }

    /// Whether the format is a picture, whose text only OCR can read.
    pub fn is_image(self) -> bool {
        matches!(self, Format::Png | Format::Jpeg | Format::Tiff)
    }

    fn is_zip_based(self) -> bool {
        matches!(
            self,
            Format::Docx | Format::Pptx | Format::Xlsx | Format::Xlsb | Format::Ods
        )
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What [`extract`] produced.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Extracted {
    /// The text, in the conventions described in the crate docs. May be empty.
    pub text: String,
    /// The page count, for formats that have pages (PDF); `None` otherwise.
    pub pages: Option<u32>,
    /// Pages (of a PDF) or images whose text came from OCR ([`extract_with_ocr`]).
    pub ocr_pages: u32,
}

/// Why a file could not be extracted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExtractError {
    /// The file is unreadable: truncated, malformed, or not what its format claims.
    #[error("corrupt or unreadable file: {0}")]
    Corrupt(String),
    /// The file would cost more than the [`Limits`] allow (a decompression bomb, or too much text).
    #[error("file exceeds extraction limits: {0}")]
    TooLarge(String),
    /// The file is well-formed but cannot be extracted (encrypted, a format variant not handled).
    #[error("unsupported file: {0}")]
    Unsupported(String),
}

/// Bounds on what one extraction may cost. See the crate docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Total uncompressed bytes a container may inflate to (zip entries; PDF Flate streams).
    pub max_decompressed_bytes: u64,
    /// Most entries a zip container may have.
    pub max_zip_entries: usize,
    /// Highest uncompressed/compressed ratio tolerated for an archive or an entry over 1 MiB.
    pub max_compression_ratio: u64,
    /// Most characters of extracted text.
    pub max_output_chars: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_decompressed_bytes: 256 * 1024 * 1024,
            max_zip_entries: 10_000,
            max_compression_ratio: 200,
            max_output_chars: 20_000_000,
        }
    }
}

const OLE2_MAGIC: [u8; 8] = [0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1];
const ZIP_MAGIC: [u8; 4] = *b"PK\x03\x04";
const EMPTY_ZIP_MAGIC: [u8; 4] = *b"PK\x05\x06";

fn is_pdf(bytes: &[u8]) -> bool {
    // The header may be preceded by junk; readers look in the first 1024 bytes.
    let head = &bytes[..bytes.len().min(1024)];
    head.windows(5).any(|w| w == b"%PDF-")
}

/// The image format its magic bytes announce.
fn image_format(bytes: &[u8]) -> Option<Format> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some(Format::Png)
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some(Format::Jpeg)
    } else if bytes.starts_with(b"II*\0") || bytes.starts_with(b"MM\0*") {
        Some(Format::Tiff)
    } else {
        None
    }
}

fn is_zip(bytes: &[u8]) -> bool {
    bytes.starts_with(&ZIP_MAGIC) || bytes.starts_with(&EMPTY_ZIP_MAGIC)
}

fn is_ole2(bytes: &[u8]) -> bool {
    bytes.starts_with(&OLE2_MAGIC)
}

fn format_from_extension(filename: &str) -> Option<Format> {
    let name = filename.rsplit(['/', '\\']).next().unwrap_or(filename);
    let (_, ext) = name.rsplit_once('.')?;
    let f = match ext.to_ascii_lowercase().as_str() {
        "pdf" => Format::Pdf,
        "docx" | "docm" | "dotx" | "dotm" => Format::Docx,
        "pptx" | "pptm" | "potx" | "ppsx" => Format::Pptx,
        "xlsx" | "xlsm" | "xltx" | "xltm" => Format::Xlsx,
        "xls" | "xlt" | "xla" => Format::Xls,
        "xlsb" => Format::Xlsb,
        "ods" | "ots" => Format::Ods,
        "html" | "htm" | "xhtml" | "xht" => Format::Html,
        "md" | "markdown" | "mdown" | "mkd" | "mkdn" => Format::Markdown,
        "txt" | "text" | "csv" | "tsv" | "log" | "json" | "xml" | "yaml" | "yml" | "toml"
        | "ini" | "rst" | "adoc" => Format::Text,
        _ => return None,
    };
    Some(f)
}

fn looks_like_html(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(1024)];
    let head = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
    let start = head
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(head.len());
    let head = head[start..].to_ascii_lowercase();
    head.starts_with(b"<!doctype html")
        || head.starts_with(b"<html")
        || (head.starts_with(b"<?xml") && head.windows(5).any(|w| w == b"<html"))
}

/// Decides the format of an upload.
///
/// The extension decides first; the content confirms it or overrides it:
///
/// * `%PDF-` in the first KiB is a PDF, whatever the name says.
/// * A zip (`PK\x03\x04`) is told apart by its `mimetype` entry (ODF) or its
///   `[Content_Types].xml` / part names (DOCX, PPTX, XLSX, XLSB). A zip none of these recognise
///   keeps the extension's format when that is a zip-based one, else is [`Format::Text`] (which
///   [`extract`] then refuses as binary).
/// * An OLE2 compound file (`D0 CF 11 E0`) is [`Format::Xls`], unless the extension names an
///   Office Open XML format: a password-protected DOCX/XLSX/PPTX is stored as OLE2, and keeping
///   its format lets [`extract`] say so.
/// * PNG, JPEG and TIFF are told by their magic bytes alone.
/// * A binary extension whose magic bytes are missing falls back to sniffing: HTML if it starts
///   like HTML, else text.
/// * No known extension: HTML if it starts like HTML, else text.
pub fn detect(filename: &str, bytes: &[u8]) -> Format {
    let by_ext = format_from_extension(filename);
    if is_pdf(bytes) {
        return Format::Pdf;
    }
    if let Some(f) = image_format(bytes) {
        return f;
    }
    if is_zip(bytes) {
        if let Some(f) = guard::sniff_zip(bytes) {
            return f;
        }
        return match by_ext {
            Some(f) if f.is_zip_based() => f,
            _ => Format::Text,
        };
    }
    if is_ole2(bytes) {
        return match by_ext {
            Some(f @ (Format::Docx | Format::Pptx | Format::Xlsx | Format::Xlsb)) => f,
            _ => Format::Xls,
        };
    }
    match by_ext {
        Some(Format::Markdown) => Format::Markdown,
        Some(Format::Html) => Format::Html,
        _ if looks_like_html(bytes) => Format::Html,
        _ => Format::Text,
    }
}

/// Extracts the text of `bytes`, read as `format`, within `limits`.
///
/// See the crate docs for the shape of the output. A zero-byte input is `Ok` with empty text
/// in every format.
pub fn extract(bytes: &[u8], format: Format, limits: &Limits) -> Result<Extracted, ExtractError> {
    if bytes.is_empty() {
        return Ok(Extracted::default());
    }
    let result = guard::contain(format.name(), || match format {
        Format::Pdf => pdf::extract(bytes, limits),
        Format::Docx | Format::Pptx | Format::Xlsx | Format::Xlsb | Format::Ods
            if is_ole2(bytes) =>
        {
            Err(ExtractError::Unsupported(format!(
                "this {format} is an OLE2 compound file: a password-protected (encrypted) \
                 Office document cannot be read"
            )))
        }
        Format::Docx => docx::extract(bytes, limits).map(text_only),
        Format::Pptx => pptx::extract(bytes, limits).map(text_only),
        Format::Xlsx | Format::Xls | Format::Xlsb | Format::Ods => {
            sheet::extract(bytes, format, limits).map(text_only)
        }
        Format::Html => html::extract(bytes, limits).map(text_only),
        Format::Markdown => text::extract_markdown(bytes, limits).map(text_only),
        Format::Text => text::extract_text(bytes, limits).map(text_only),
        // A picture has no text layer: only [`extract_with_ocr`] reads it.
        Format::Png | Format::Jpeg | Format::Tiff => Ok(Extracted::default()),
    })?;
    guard::check_output(&result.text, limits)?;
    Ok(result)
}

/// [`extract`], and then OCR ([`ocr::Ocr`]) for what has no text layer: each PDF page whose
/// text layer is empty or unreadable (the pages that have one keep it), and images. Without
/// `ocr`, exactly [`extract`]. A page OCR fails on keeps its `[Page N]` marker and loses only
/// its own text.
pub fn extract_with_ocr(
    bytes: &[u8],
    format: Format,
    limits: &Limits,
    ocr: Option<&ocr::Ocr>,
) -> Result<Extracted, ExtractError> {
    let Some(ocr) = ocr.filter(|_| !bytes.is_empty()) else {
        return extract(bytes, format, limits);
    };
    let result = match format {
        Format::Pdf => {
            // `pages` contains the parser's panics itself.
            let mut pages = pdf::pages(bytes, limits)?;
            let wanted: Vec<u32> = pages
                .iter()
                .filter(|p| p.text.as_ref().map_or(true, |t| t.is_empty()))
                .map(|p| p.number)
                .collect();
            let mut read = 0u32;
            if !wanted.is_empty() {
                for (n, text) in ocr.pdf_pages(bytes, &wanted) {
                    let Some(page) = pages.iter_mut().find(|p| p.number == n) else {
                        continue;
                    };
                    match text {
                        Ok(t) => {
                            read += 1;
                            page.text = Ok(t);
                        }
                        // The text layer's own failure, if any, is the better reason.
                        Err(e) if page.text.is_ok() => {
                            page.text = Err(ExtractError::Unsupported(format!(
                                "page {n}: OCR failed: {e}"
                            )));
                        }
                        Err(_) => {}
                    }
                }
            }
            pdf::assemble(pages, limits, read)?
        }
        f if f.is_image() => {
            let text = ocr
                .image(bytes)
                .map_err(|e| ExtractError::Unsupported(format!("OCR of the {f} failed: {e}")))?;
            Extracted {
                text,
                pages: None,
                ocr_pages: 1,
            }
        }
        _ => return extract(bytes, format, limits),
    };
    guard::check_output(&result.text, limits)?;
    Ok(result)
}

fn text_only(text: String) -> Extracted {
    Extracted {
        text,
        pages: None,
        ocr_pages: 0,
    }
}
