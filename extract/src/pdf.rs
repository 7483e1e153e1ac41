//! PDF through pdf-extract (over lopdf), page by page: each page's text follows a `[Page N]`
//! line. A page that fails to extract (or panics the parser) keeps its marker and loses only
//! its own text; a PDF whose every page fails is corrupt.

use std::io::{self, Read};

use pdf_extract::{Document, Object, PlainTextOutput};

use crate::guard::{contain, Out};
use crate::{ExtractError, Extracted, Limits};

/// One page as the text layer gave it.
pub(crate) struct Page {
    /// 1-based page number.
    pub(crate) number: u32,
    /// The page's tidied text (empty: no text layer), or why the page could not be read.
    pub(crate) text: Result<String, ExtractError>,
}

/// Every page's text layer, in order. Fails only when the file as a whole is unreadable
/// (not a PDF, encrypted, a stream bomb); a page that fails is reported as such.
pub(crate) fn pages(bytes: &[u8], limits: &Limits) -> Result<Vec<Page>, ExtractError> {
    if !crate::is_pdf(bytes) {
        return Err(ExtractError::Corrupt("no %PDF- header".to_string()));
    }
    let mut doc = contain("PDF", || {
        Document::load_mem(bytes).map_err(|e| ExtractError::Corrupt(format!("unreadable PDF: {e}")))
    })?;
    if doc.is_encrypted() && !contain("PDF", || Ok(doc.decrypt("").is_ok()))? {
        return Err(ExtractError::Unsupported(
            "the PDF is encrypted with a password".to_string(),
        ));
    }
    check_streams(&doc, limits)?;
    let numbers: Vec<u32> = doc.get_pages().keys().copied().collect();
    Ok(numbers
        .into_iter()
        .map(|n| Page {
            number: n,
            text: contain("PDF", || {
                let mut text = String::new();
                {
                    let mut sink = PlainTextOutput::new(&mut text);
                    pdf_extract::output_doc_page(&doc, &mut sink, n)
                        .map_err(|e| ExtractError::Corrupt(format!("page {n}: {e}")))?;
                }
                Ok(tidy(&text))
            }),
        })
        .collect())
}

/// The text-layer extraction (no OCR): see [`assemble`].
pub(crate) fn extract(bytes: &[u8], limits: &Limits) -> Result<Extracted, ExtractError> {
    assemble(pages(bytes, limits)?, limits, 0)
}

/// The document's text from its pages: one `[Page N]` block each (a page without text keeps
/// its marker). All pages failing is a corrupt PDF; no page with text is the empty text (a
/// scan that was not read by OCR).
pub(crate) fn assemble(
    pages: Vec<Page>,
    limits: &Limits,
    ocr_pages: u32,
) -> Result<Extracted, ExtractError> {
    let count = u32::try_from(pages.len()).unwrap_or(u32::MAX);
    let mut out = Out::new(limits);
    let mut any_text = false;
    let mut failed = 0usize;
    let mut last_error = None;
    let total = pages.len();
    for page in pages {
        let n = page.number;
        match page.text {
            Ok(text) if !text.is_empty() => {
                any_text = true;
                out.block(&format!("[Page {n}]\n\n{text}"))?;
            }
            Ok(_) => out.block(&format!("[Page {n}]"))?,
            Err(e) => {
                failed += 1;
                last_error = Some(e);
                out.block(&format!("[Page {n}]"))?;
            }
        }
    }
    if total > 0 && failed == total {
        return Err(match last_error {
            Some(ExtractError::Corrupt(m)) => {
                ExtractError::Corrupt(format!("no page of the PDF could be read ({m})"))
            }
            Some(other) => other,
            None => ExtractError::Corrupt("no page of the PDF could be read".to_string()),
        });
    }
    let text = if any_text {
        out.finish()
    } else {
        String::new()
    };
    Ok(Extracted {
        text,
        pages: Some(count),
        ocr_pages,
    })
}

/// Trims line ends, drops runs of blank lines down to one, trims the whole.
pub(crate) fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = 0usize;
    for line in text.lines() {
        let line = line.trim_end();
        if line.trim().is_empty() {
            blank += 1;
            continue;
        }
        if !out.is_empty() {
            out.push_str(if blank > 0 { "\n\n" } else { "\n" });
        }
        blank = 0;
        out.push_str(line);
    }
    out
}

fn is_flate(filter: &Object) -> bool {
    match filter {
        Object::Name(n) => n == b"FlateDecode" || n == b"Fl",
        Object::Array(a) => a.iter().any(is_flate),
        _ => false,
    }
}

/// Inflates (to nowhere) every Flate-compressed stream that text extraction may decompress
/// (content streams, fonts, forms: not images), refusing the file once their total inflated
/// size passes `max_decompressed_bytes`. Stops reading each stream at the remaining budget,
/// so a bomb costs only that much CPU and no memory.
fn check_streams(doc: &Document, limits: &Limits) -> Result<(), ExtractError> {
    let mut left = limits.max_decompressed_bytes;
    for object in doc.objects.values() {
        let Object::Stream(stream) = object else {
            continue;
        };
        let is_image = stream
            .dict
            .get(b"Subtype")
            .ok()
            .and_then(|s| s.as_name().ok())
            .is_some_and(|s| s == b"Image");
        let flate = stream.dict.get(b"Filter").ok().is_some_and(is_flate);
        if is_image || !flate {
            continue;
        }
        let decoder = flate2::read::ZlibDecoder::new(stream.content.as_slice());
        // A broken stream is pdf-extract's to report; only its size matters here.
        let got = io::copy(&mut decoder.take(left.saturating_add(1)), &mut io::sink()).unwrap_or(0);
        if got > left {
            return Err(ExtractError::TooLarge(format!(
                "the PDF's compressed streams inflate past {} bytes",
                limits.max_decompressed_bytes
            )));
        }
        left -= got;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tidy_collapses_blank_runs() {
        assert_eq!(tidy("\n\n  a  \n b\n\n\n\nc \n\n"), "  a\n b\n\nc");
    }

    #[test]
    fn not_a_pdf_is_corrupt() {
        assert!(matches!(
            extract(b"hello", &Limits::default()),
            Err(ExtractError::Corrupt(_))
        ));
    }
}
