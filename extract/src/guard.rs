//! Defences shared by every extractor: panic containment, zip-bomb inspection, bounded zip
//! entry reads, and the output-size cap.

use std::io::{self, Cursor, Read};
use std::panic::{catch_unwind, AssertUnwindSafe};

use zip::result::ZipError;
use zip::ZipArchive;

use crate::{ExtractError, Format, Limits};

/// Archives or entries smaller than this are never judged by their compression ratio: tiny
/// XML parts compress very well and cost nothing.
const RATIO_FLOOR: u64 = 1024 * 1024;

/// Runs `f`, turning a panic into [`ExtractError::Corrupt`].
pub(crate) fn contain<T>(
    what: &str,
    f: impl FnOnce() -> Result<T, ExtractError>,
) -> Result<T, ExtractError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            Err(ExtractError::Corrupt(format!(
                "the {what} parser failed on malformed input ({msg})"
            )))
        }
    }
}

/// Fails with `TooLarge` if `text` is over the output cap.
pub(crate) fn check_output(text: &str, limits: &Limits) -> Result<(), ExtractError> {
    // Bytes bound chars from above, so only count when it could matter.
    if text.len() > limits.max_output_chars && text.chars().count() > limits.max_output_chars {
        return Err(too_much_text(limits));
    }
    Ok(())
}

pub(crate) fn too_much_text(limits: &Limits) -> ExtractError {
    ExtractError::TooLarge(format!(
        "the extracted text exceeds {} characters",
        limits.max_output_chars
    ))
}

/// The kind of block last written to an [`Out`], which decides the separator before the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A paragraph, heading or table: separated by a blank line.
    Block,
    /// A list item: consecutive items are separated by a single newline.
    ListItem,
}

/// An output buffer that enforces `max_output_chars` as it grows.
pub(crate) struct Out {
    buf: String,
    chars: usize,
    max: usize,
    last: Option<Kind>,
}

impl Out {
    pub(crate) fn new(limits: &Limits) -> Out {
        Out {
            buf: String::new(),
            chars: 0,
            max: limits.max_output_chars,
            last: None,
        }
    }

    /// Appends a block (skipped if blank), separated from the previous one.
    pub(crate) fn push(&mut self, kind: Kind, block: &str) -> Result<(), ExtractError> {
        let block = block.trim_matches(|c: char| c == '\n' || c == '\r');
        if block.trim().is_empty() {
            return Ok(());
        }
        let sep = match (self.last, kind) {
            (None, _) => "",
            (Some(Kind::ListItem), Kind::ListItem) => "\n",
            _ => "\n\n",
        };
        let added = sep.len() + block.chars().count();
        if self.chars + added > self.max {
            return Err(ExtractError::TooLarge(format!(
                "the extracted text exceeds {} characters",
                self.max
            )));
        }
        self.buf.push_str(sep);
        self.buf.push_str(block);
        self.chars += added;
        self.last = Some(kind);
        Ok(())
    }

    pub(crate) fn block(&mut self, block: &str) -> Result<(), ExtractError> {
        self.push(Kind::Block, block)
    }

    pub(crate) fn finish(self) -> String {
        self.buf
    }
}

pub(crate) type Zip<'a> = ZipArchive<Cursor<&'a [u8]>>;

fn zip_error(e: ZipError) -> ExtractError {
    match e {
        ZipError::UnsupportedArchive(msg) if msg.to_ascii_lowercase().contains("password") => {
            ExtractError::Unsupported("the archive is encrypted".to_string())
        }
        ZipError::UnsupportedArchive(msg) => {
            ExtractError::Unsupported(format!("unsupported zip archive: {msg}"))
        }
        other => ExtractError::Corrupt(format!("unreadable zip archive: {other}")),
    }
}

/// Opens a zip archive and refuses it, before inflating anything, if its central directory
/// declares a bomb: too many entries, too many uncompressed bytes in all, or an archive (or an
/// entry) over 1 MiB that compresses better than `max_compression_ratio`.
pub(crate) fn open_zip<'a>(bytes: &'a [u8], limits: &Limits) -> Result<Zip<'a>, ExtractError> {
    let mut archive = contain("zip", || {
        ZipArchive::new(Cursor::new(bytes)).map_err(zip_error)
    })?;
    let entries = archive.len();
    if entries > limits.max_zip_entries {
        return Err(ExtractError::TooLarge(format!(
            "the archive has {entries} entries, more than the limit of {}",
            limits.max_zip_entries
        )));
    }
    let mut total: u64 = 0;
    let mut total_compressed: u64 = 0;
    for i in 0..entries {
        let entry = archive.by_index_raw(i).map_err(zip_error)?;
        let size = entry.size();
        let compressed = entry.compressed_size();
        if size > RATIO_FLOOR && size / compressed.max(1) > limits.max_compression_ratio {
            return Err(ExtractError::TooLarge(format!(
                "entry {:?} declares {size} bytes compressed into {compressed}: a compression \
                 ratio over {} (zip bomb?)",
                entry.name(),
                limits.max_compression_ratio
            )));
        }
        total = total.saturating_add(size);
        total_compressed = total_compressed.saturating_add(compressed);
    }
    if total > limits.max_decompressed_bytes {
        return Err(ExtractError::TooLarge(format!(
            "the archive declares {total} uncompressed bytes, more than the limit of {}",
            limits.max_decompressed_bytes
        )));
    }
    if total > RATIO_FLOOR && total / total_compressed.max(1) > limits.max_compression_ratio {
        return Err(ExtractError::TooLarge(format!(
            "the archive declares {total} bytes compressed into {total_compressed}: a \
             compression ratio over {} (zip bomb?)",
            limits.max_compression_ratio
        )));
    }
    Ok(archive)
}

/// A bounded reader of a zip archive's entries: every read is capped at the entry's declared
/// size and at what is left of the archive's decompression budget.
pub(crate) struct ZipReader<'a> {
    archive: Zip<'a>,
    budget: u64,
}

impl<'a> ZipReader<'a> {
    pub(crate) fn new(bytes: &'a [u8], limits: &Limits) -> Result<ZipReader<'a>, ExtractError> {
        Ok(ZipReader {
            archive: open_zip(bytes, limits)?,
            budget: limits.max_decompressed_bytes,
        })
    }

    pub(crate) fn names(&self) -> Vec<String> {
        self.archive.file_names().map(str::to_string).collect()
    }

    pub(crate) fn has(&self, name: &str) -> bool {
        self.archive.index_for_name(name).is_some()
    }

    /// Reads a whole entry, or `None` if there is no such entry.
    pub(crate) fn read(&mut self, name: &str) -> Result<Option<Vec<u8>>, ExtractError> {
        let Some(index) = self.archive.index_for_name(name) else {
            return Ok(None);
        };
        let budget = &mut self.budget;
        let archive = &mut self.archive;
        contain("zip", || {
            let entry = archive.by_index(index).map_err(zip_error)?;
            let declared = entry.size();
            let cap = declared.min(*budget);
            let mut data = Vec::with_capacity(usize::try_from(cap.min(1 << 20)).unwrap_or(0));
            entry
                .take(cap.saturating_add(1))
                .read_to_end(&mut data)
                .map_err(|e| ExtractError::Corrupt(format!("cannot inflate {name:?}: {e}")))?;
            let got = data.len() as u64;
            if got > declared {
                return Err(ExtractError::TooLarge(format!(
                    "entry {name:?} inflates past its declared size of {declared} bytes \
                     (lying header, zip bomb?)"
                )));
            }
            if got > *budget {
                return Err(ExtractError::TooLarge(
                    "the archive inflates past the decompression limit".to_string(),
                ));
            }
            *budget -= got;
            Ok(Some(data))
        })
    }
}

/// Streams every entry once through a cap at its declared size, so that a library which reads
/// the archive itself (calamine) can trust the central directory `open_zip` already judged.
pub(crate) fn verify_zip(bytes: &[u8], limits: &Limits) -> Result<(), ExtractError> {
    let mut archive = open_zip(bytes, limits)?;
    contain("zip", || {
        for i in 0..archive.len() {
            let entry = match archive.by_index(i) {
                Ok(e) => e,
                // Encrypted or exotic entries are left for the reader to report if it needs them.
                Err(ZipError::UnsupportedArchive(_)) => continue,
                Err(e) => return Err(zip_error(e)),
            };
            if entry.is_dir() {
                continue;
            }
            let declared = entry.size();
            let name = entry.name().to_string();
            let got = io::copy(&mut entry.take(declared.saturating_add(1)), &mut io::sink())
                .map_err(|e| ExtractError::Corrupt(format!("cannot inflate {name:?}: {e}")))?;
            if got > declared {
                return Err(ExtractError::TooLarge(format!(
                    "entry {name:?} inflates past its declared size of {declared} bytes \
                     (lying header, zip bomb?)"
                )));
            }
        }
        Ok(())
    })
}

/// Tells the zip-based formats apart by their contents. Reads at most 1 MiB of any entry.
pub(crate) fn sniff_zip(bytes: &[u8]) -> Option<Format> {
    let limits = Limits {
        max_decompressed_bytes: 4 * 1024 * 1024,
        ..Limits::default()
    };
    let mut archive = contain("zip", || {
        ZipArchive::new(Cursor::new(bytes)).map_err(zip_error)
    })
    .ok()?;
    let mut small = |name: &str| -> Option<String> {
        let index = archive.index_for_name(name)?;
        contain("zip", || {
            let entry = archive.by_index(index).map_err(zip_error)?;
            let mut data = Vec::new();
            entry
                .take(limits.max_decompressed_bytes)
                .read_to_end(&mut data)
                .map_err(|e| ExtractError::Corrupt(e.to_string()))?;
            Ok(String::from_utf8_lossy(&data).into_owned())
        })
        .ok()
    };
    if let Some(mime) = small("mimetype") {
        if mime.trim() == Format::Ods.mime_type() {
            return Some(Format::Ods);
        }
    }
    if let Some(types) = small("[Content_Types].xml") {
        let t = types.to_ascii_lowercase();
        if t.contains("wordprocessingml.document.main") || t.contains("ms-word.document.macro") {
            return Some(Format::Docx);
        }
        if t.contains("presentationml.presentation.main")
            || t.contains("presentationml.slideshow.main")
            || t.contains("ms-powerpoint.presentation.macro")
        {
            return Some(Format::Pptx);
        }
        if t.contains("sheet.binary.macroenabled.main") {
            return Some(Format::Xlsb);
        }
        if t.contains("spreadsheetml.sheet.main")
            || t.contains("spreadsheetml.template.main")
            || t.contains("ms-excel.sheet.macroenabled.main")
        {
            return Some(Format::Xlsx);
        }
    }
    let names: Vec<String> = archive.file_names().map(str::to_string).collect();
    let has = |n: &str| names.iter().any(|x| x == n);
    if has("word/document.xml") {
        Some(Format::Docx)
    } else if has("ppt/presentation.xml") {
        Some(Format::Pptx)
    } else if has("xl/workbook.bin") {
        Some(Format::Xlsb)
    } else if has("xl/workbook.xml") {
        Some(Format::Xlsx)
    } else {
        None
    }
}

/// Resolves an OPC relationship target against the directory of the part that refers to it
/// (`base_dir` without a trailing slash, "" for the package root).
pub(crate) fn resolve_part(base_dir: &str, target: &str) -> String {
    let joined = if let Some(abs) = target.strip_prefix('/') {
        abs.to_string()
    } else if base_dir.is_empty() {
        target.to_string()
    } else {
        format!("{base_dir}/{target}")
    };
    let mut parts: Vec<&str> = Vec::new();
    for seg in joined.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_parts() {
        assert_eq!(
            resolve_part("ppt", "slides/slide1.xml"),
            "ppt/slides/slide1.xml"
        );
        assert_eq!(
            resolve_part("ppt/slides", "../notesSlides/notesSlide1.xml"),
            "ppt/notesSlides/notesSlide1.xml"
        );
        assert_eq!(resolve_part("ppt", "/ppt/slides/s.xml"), "ppt/slides/s.xml");
        assert_eq!(resolve_part("", "word/document.xml"), "word/document.xml");
    }

    #[test]
    fn out_separates_blocks_and_list_items() {
        let mut out = Out::new(&Limits::default());
        out.block("# A").ok();
        out.push(Kind::ListItem, "- x").ok();
        out.push(Kind::ListItem, "- y").ok();
        out.block("   ").ok();
        out.block("para").ok();
        assert_eq!(out.finish(), "# A\n\n- x\n- y\n\npara");
    }

    #[test]
    fn out_enforces_the_cap() {
        let limits = Limits {
            max_output_chars: 5,
            ..Limits::default()
        };
        let mut out = Out::new(&limits);
        assert!(out.block("abcde").is_ok());
        assert!(matches!(out.block("f"), Err(ExtractError::TooLarge(_))));
    }

    #[test]
    fn contain_maps_panics() {
        let r: Result<(), _> = contain("test", || panic!("boom"));
        assert!(matches!(r, Err(ExtractError::Corrupt(m)) if m.contains("boom")));
    }
}
