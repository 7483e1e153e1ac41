//! OCR for what has no text layer: PDF pages that are pictures of text (scans) and images
//! (PNG, JPEG, TIFF). Built on Tesseract (Debian's `tesseract-ocr`), with PDF pages rasterized
//! by poppler's `pdftoppm` (Debian's `poppler-utils`).
//!
//! This is the one module of the crate that runs programs. Each program works on its own
//! files in a private temporary directory and is bounded **per page**: a wall-clock limit
//! (the process is killed at it) and, where `prlimit` (util-linux) is found, an address-space
//! limit of its own. Inside the server's extraction child both also sit under the child's own
//! limits, which every program inherits. Programs get an empty environment but
//! `OMP_THREAD_LIMIT=1`: pages run in parallel as processes ([`Ocr::jobs`]), which on few cores
//! beats Tesseract's own threads contending with each other.
//!
//! A page that fails (timeout, memory, an unreadable image) is reported on its own; the
//! document keeps every other page.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How OCR runs. [`Ocr::locate`] finds the programs; every other field has a default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ocr {
    /// The `tesseract` program.
    pub tesseract: PathBuf,
    /// The `pdftoppm` program (`None`: PDF pages are not read by OCR, images still are).
    pub pdftoppm: Option<PathBuf>,
    /// The `prlimit` program, which gives each page its own memory limit (`None`: only the
    /// limits of the calling process apply).
    pub prlimit: Option<PathBuf>,
    /// Tesseract's language (`eng`, `deu+eng`, …), which must be installed.
    pub language: String,
    /// The resolution PDF pages are rendered at, in dots per inch.
    pub dpi: u32,
    /// The longest one page may take (rendering and recognition each).
    pub page_timeout: Duration,
    /// The address space one program may use, in MiB (with `prlimit`).
    pub page_memory_mb: u64,
    /// Pages recognized at once.
    pub jobs: usize,
}

/// Why OCR of a page failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OcrError {
    #[error("{program} could not be started: {message}")]
    Spawn { program: String, message: String },
    #[error("{program} took longer than {secs} s")]
    Timeout { program: String, secs: u64 },
    #[error("{program} failed: {message}")]
    Failed { program: String, message: String },
    #[error("OCR work files: {0}")]
    Io(String),
    #[error("PDF pages cannot be read by OCR: pdftoppm (poppler-utils) is not installed")]
    NoRasterizer,
}

/// One page's number and its OCR text (or why it has none).
pub type PageText = (u32, Result<String, OcrError>);

/// The defaults the server uses unless configured.
pub const DEFAULT_LANGUAGE: &str = "eng";
pub const DEFAULT_DPI: u32 = 300;
pub const DEFAULT_PAGE_TIMEOUT: Duration = Duration::from_secs(60);
pub const DEFAULT_PAGE_MEMORY_MB: u64 = 1024;

impl Ocr {
    /// Finds `tesseract` (and `pdftoppm`, `prlimit`) on `search` (a `PATH`-style list; the
    /// standard system directories when `None`), and checks that `language` is installed.
    /// `Err` says what is missing, for the caller to log.
    pub fn locate(search: Option<&str>, language: &str) -> Result<Ocr, String> {
        let dirs = search
            .filter(|s| !s.is_empty())
            .unwrap_or("/usr/local/bin:/usr/bin:/bin");
        let find = |name: &str| {
            std::env::split_paths(dirs)
                .map(|d| d.join(name))
                .find(|p| p.is_file())
        };
        let tesseract = find("tesseract")
            .ok_or("tesseract is not installed (Debian: apt-get install tesseract-ocr)")?;
        let listed = Command::new(&tesseract)
            .arg("--list-langs")
            .env_clear()
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .map_err(|e| format!("{}: {e}", tesseract.display()))?;
        let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
        for lang in language.split('+') {
            if !listed.lines().skip(1).any(|l| l.trim() == lang) {
                return Err(format!(
                    "Tesseract has no '{lang}' language data (Debian: apt-get install tesseract-ocr-{lang})"
                ));
            }
        }
        Ok(Ocr {
            tesseract,
            pdftoppm: find("pdftoppm"),
            prlimit: find("prlimit"),
            language: language.to_owned(),
            dpi: DEFAULT_DPI,
            page_timeout: DEFAULT_PAGE_TIMEOUT,
            page_memory_mb: DEFAULT_PAGE_MEMORY_MB,
            jobs: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
                .min(4),
        })
    }

    /// The text of an image (PNG, JPEG, TIFF; every page of a multi-page TIFF, separated by
    /// form feeds as Tesseract writes them).
    pub fn image(&self, bytes: &[u8]) -> Result<String, OcrError> {
        let dir = work_dir()?;
        let input = dir.path().join("image");
        std::fs::write(&input, bytes).map_err(|e| OcrError::Io(e.to_string()))?;
        self.recognize(&input, dir.path(), "image")
    }

    /// The text of each of `pages` (1-based) of the PDF in `pdf`, rendered and recognized
    /// [`Ocr::jobs`] at a time. In `pages`' order.
    pub fn pdf_pages(&self, pdf: &[u8], pages: &[u32]) -> Vec<PageText> {
        let Some(pdftoppm) = &self.pdftoppm else {
            return pages
                .iter()
                .map(|&n| (n, Err(OcrError::NoRasterizer)))
                .collect();
        };
        let dir = match work_dir() {
            Ok(d) => d,
            Err(e) => return pages.iter().map(|&n| (n, Err(e.clone()))).collect(),
        };
        let input = dir.path().join("input.pdf");
        if let Err(e) = std::fs::write(&input, pdf) {
            let e = OcrError::Io(e.to_string());
            return pages.iter().map(|&n| (n, Err(e.clone()))).collect();
        }
        let next = AtomicUsize::new(0);
        let done: Mutex<Vec<(usize, PageText)>> = Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for _ in 0..self.jobs.clamp(1, pages.len().max(1)) {
                scope.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&n) = pages.get(i) else { break };
                    let text = self.pdf_page(pdftoppm, &input, dir.path(), n);
                    done.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((i, (n, text)));
                });
            }
        });
        let mut done = done.into_inner().unwrap_or_else(|e| e.into_inner());
        done.sort_by_key(|(i, _)| *i);
        done.into_iter().map(|(_, page)| page).collect()
    }

    fn pdf_page(
        &self,
        pdftoppm: &Path,
        input: &Path,
        dir: &Path,
        n: u32,
    ) -> Result<String, OcrError> {
        let root = dir.join(format!("page-{n}"));
        let page = n.to_string();
        let dpi = self.dpi.clamp(72, 1200).to_string();
        self.run(
            pdftoppm,
            &[
                "-r".as_ref(),
                dpi.as_ref(),
                "-gray".as_ref(),
                "-f".as_ref(),
                page.as_ref(),
                "-l".as_ref(),
                page.as_ref(),
                "-singlefile".as_ref(),
                "-png".as_ref(),
                input.as_os_str(),
                root.as_os_str(),
            ],
            dir,
            "pdftoppm",
            &format!("page-{n}"),
        )?;
        let png = root.with_extension("png");
        let text = self.recognize(&png, dir, &format!("page-{n}"));
        let _ = std::fs::remove_file(&png);
        text
    }

    /// Tesseract on one image file; its tidied text.
    fn recognize(&self, image: &Path, dir: &Path, stem: &str) -> Result<String, OcrError> {
        let out = dir.join(format!("{stem}-ocr"));
        let dpi = self.dpi.clamp(72, 1200).to_string();
        self.run(
            &self.tesseract,
            &[
                image.as_os_str(),
                out.as_os_str(),
                "-l".as_ref(),
                self.language.as_ref(),
                "--dpi".as_ref(),
                dpi.as_ref(),
                "quiet".as_ref(),
            ],
            dir,
            "tesseract",
            stem,
        )?;
        let txt = out.with_extension("txt");
        let text = std::fs::read(&txt).map_err(|e| OcrError::Io(e.to_string()))?;
        let _ = std::fs::remove_file(&txt);
        Ok(tidy_ocr(&String::from_utf8_lossy(&text)))
    }

    /// Runs `program` with `args` in `dir` under the per-page limits. `stem` names the page:
    /// pages run in parallel in one directory, so each run's stderr file is its own.
    fn run(
        &self,
        program: &Path,
        args: &[&std::ffi::OsStr],
        dir: &Path,
        name: &str,
        stem: &str,
    ) -> Result<(), OcrError> {
        let mut cmd = match &self.prlimit {
            Some(prlimit) => {
                let mut c = Command::new(prlimit);
                let bytes = self.page_memory_mb.saturating_mul(1024 * 1024);
                c.arg(format!("--as={bytes}")).arg("--").arg(program);
                c
            }
            None => Command::new(program),
        };
        let stderr_path = dir.join(format!("{stem}.{name}.err"));
        let stderr =
            std::fs::File::create(&stderr_path).map_err(|e| OcrError::Io(e.to_string()))?;
        let mut child = cmd
            .args(args)
            .current_dir(dir)
            .env_clear()
            .env("OMP_THREAD_LIMIT", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .map_err(|e| OcrError::Spawn {
                program: name.to_owned(),
                message: e.to_string(),
            })?;
        let started = Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if started.elapsed() >= self.page_timeout => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(OcrError::Timeout {
                        program: name.to_owned(),
                        secs: self.page_timeout.as_secs(),
                    });
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                Err(e) => return Err(OcrError::Io(e.to_string())),
            }
        };
        let message = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        let _ = std::fs::remove_file(&stderr_path);
        if status.success() {
            Ok(())
        } else {
            let last = message.lines().rev().find(|l| !l.trim().is_empty());
            Err(OcrError::Failed {
                program: name.to_owned(),
                message: format!("{status}: {}", last.unwrap_or("no message").trim()),
            })
        }
    }
}

fn work_dir() -> Result<tempfile::TempDir, OcrError> {
    tempfile::Builder::new()
        .prefix("cairn-ocr-")
        .tempdir()
        .map_err(|e| OcrError::Io(e.to_string()))
}

/// Tesseract's text the way the text layer's is kept: line ends trimmed, runs of blank lines
/// (and the page's closing form feed) collapsed.
fn tidy_ocr(text: &str) -> String {
    crate::pdf::tidy(&text.replace('\u{c}', "\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tidies_form_feeds_and_blank_runs() {
        assert_eq!(tidy_ocr("a b \n\n\n c\n\u{c}"), "a b\n\n c");
    }

    #[test]
    fn missing_programs_are_named() {
        let e = Ocr::locate(Some("/nonexistent-dir"), "eng")
            .err()
            .unwrap_or_default();
        assert!(e.contains("tesseract is not installed"), "{e}");
    }
}
