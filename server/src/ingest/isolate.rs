//! Text extraction in a child process: the hard time and memory bound per document.
//!
//! The ingest job runs `cairn __extract FILE --filename NAME --memory-mb N [--ocr-…]`. The child
//! caps its own address space (`RLIMIT_AS`) before touching the file, extracts (reading pages
//! without a text layer and images by OCR when the `--ocr-…` options name Tesseract; the OCR
//! programs inherit the cap and get per-page limits of their own), and writes to stdout the
//! media type it detected, a tab, the number of pages read by OCR, a newline, then the text
//! (so the parent never parses the file); the
//! parent kills it at the deadline (`kill_on_drop`). A parser that loops forever
//! or allocates without bound costs one child, never the server. When the running program is
//! not the `cairn` binary (the in-process test servers), extraction runs on a blocking thread
//! under the same deadline instead.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use cairn_extract::ocr::Ocr;
use cairn_extract::{detect, extract_with_ocr, Limits};

/// The child's command word: `cairn __extract …` (hidden from `--help`; `main` dispatches on it
/// before anything else starts).
pub const COMMAND: &str = "__extract";

/// Exit codes of the child.
const EXIT_REFUSED: i32 = 2;
const EXIT_IO: i32 = 3;

/// The child's side. Returns the process exit code.
pub fn child_main(path: &Path, filename: &str, memory_mb: u64, ocr: Option<&Ocr>) -> i32 {
    let bytes = memory_mb.saturating_mul(1024 * 1024);
    if let Err(e) = rlimit::setrlimit(rlimit::Resource::AS, bytes, bytes) {
        eprintln!("cannot set the memory limit: {e}");
        return EXIT_IO;
    }
    let data = match std::fs::read(path) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("cannot read the stored file: {e}");
            return EXIT_IO;
        }
    };
    let format = detect(filename, &data);
    match extract_with_ocr(&data, format, &Limits::default(), ocr) {
        Ok(x) => {
            let mut out = std::io::stdout().lock();
            let head = format!("{}\t{}\n", format.mime_type(), x.ocr_pages);
            if out
                .write_all(head.as_bytes())
                .and_then(|_| out.write_all(x.text.as_bytes()))
                .and_then(|_| out.flush())
                .is_err()
            {
                return EXIT_IO;
            }
            0
        }
        Err(e) => {
            eprintln!("{e}");
            EXIT_REFUSED
        }
    }
}

/// Why isolated extraction produced no text.
#[derive(Debug, thiserror::Error)]
pub enum IsolateError {
    #[error("{0}")]
    Refused(String),
    #[error("text extraction took longer than {0} s")]
    Timeout(u64),
    #[error("text extraction ran out of memory or crashed ({0})")]
    Crashed(String),
    #[error("text extraction could not run: {0}")]
    Io(String),
}

/// What extraction gave: the media type detected from the bytes, the text, and how many
/// pages (or images) of it OCR read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtractedText {
    pub mime: String,
    pub text: String,
    pub ocr_pages: u32,
}

/// The `--ocr-…` options that hand `ocr` to the child (none when `ocr` is `None`).
pub fn ocr_args(ocr: Option<&Ocr>) -> Vec<String> {
    let Some(o) = ocr else { return Vec::new() };
    let mut args = vec![
        format!("--ocr-tesseract={}", o.tesseract.display()),
        format!("--ocr-language={}", o.language),
        format!("--ocr-dpi={}", o.dpi),
        format!("--ocr-page-secs={}", o.page_timeout.as_secs()),
        format!("--ocr-page-mb={}", o.page_memory_mb),
        format!("--ocr-jobs={}", o.jobs),
    ];
    if let Some(p) = &o.pdftoppm {
        args.push(format!("--ocr-pdftoppm={}", p.display()));
    }
    if let Some(p) = &o.prlimit {
        args.push(format!("--ocr-prlimit={}", p.display()));
    }
    args
}

/// Runs the child and waits for it, at most `deadline`.
pub async fn extract_in_child(
    bin: &Path,
    file: &Path,
    filename: &str,
    memory_mb: u64,
    ocr: Option<&Ocr>,
    deadline: Duration,
) -> Result<ExtractedText, IsolateError> {
    // The child reads a hostile file: it gets no environment (no LLM key, no DATABASE_URL,
    // nothing the server was configured with), options in `--name=value` form, and the file
    // after `--`, so no file or sanitized name is ever taken for an option.
    let child = tokio::process::Command::new(bin)
        .env_clear()
        .env("RUST_LOG", "error")
        .arg(COMMAND)
        .arg(format!("--filename={filename}"))
        .arg(format!("--memory-mb={memory_mb}"))
        .args(ocr_args(ocr))
        .arg("--")
        .arg(file)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| IsolateError::Io(e.to_string()))?;
    let out = match tokio::time::timeout(deadline, child.wait_with_output()).await {
        Ok(r) => r.map_err(|e| IsolateError::Io(e.to_string()))?,
        // Dropping the future drops the child, which kills it.
        Err(_) => return Err(IsolateError::Timeout(deadline.as_secs())),
    };
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
    match out.status.code() {
        Some(0) => {
            let out = String::from_utf8(out.stdout).map_err(|e| IsolateError::Io(e.to_string()))?;
            let (head, text) = out
                .split_once('\n')
                .ok_or_else(|| IsolateError::Io("the child wrote no media type".to_owned()))?;
            let (mime, ocr_pages) = head.split_once('\t').unwrap_or((head, "0"));
            Ok(ExtractedText {
                mime: mime.to_owned(),
                text: text.to_owned(),
                ocr_pages: ocr_pages.trim().parse().unwrap_or(0),
            })
        }
        Some(EXIT_REFUSED) => Err(IsolateError::Refused(stderr)),
        Some(code) => Err(IsolateError::Crashed(format!("exit {code}: {stderr}"))),
        None => Err(IsolateError::Crashed(format!(
            "killed by a signal: {stderr}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The child sees no environment of the server's (no LLM key, no database URL) and gets
    /// the file after `--`. A stand-in "binary" prints what it received in the child's reply
    /// format (media type, newline, text).
    #[tokio::test]
    async fn the_child_gets_a_cleared_environment_and_the_file_after_dashes() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let bin = dir.path().join("fake-cairn");
        std::fs::write(
            &bin,
            "#!/bin/sh\necho text/plain\necho \"ARGS $*\"\n/usr/bin/env\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        // The test process itself has secrets in its environment (as a server would).
        std::env::set_var("CAIRN_LLM_API_KEY", "sk-canary-secret");
        std::env::set_var("DATABASE_URL", "postgres://canary@db/cairn");
        let file = dir.path().join("--memory-mb=1");
        std::fs::write(&file, "x").unwrap_or_else(|e| panic!("{e}"));
        let got = extract_in_child(&bin, &file, "-rf.txt", 64, None, Duration::from_secs(20))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((got.mime.as_str(), got.ocr_pages), ("text/plain", 0));
        let out = got.text;
        assert!(
            !out.contains("canary"),
            "the child saw the server's environment: {out}"
        );
        assert!(out.contains("RUST_LOG=error"), "{out}");
        let args = out.lines().next().unwrap_or_default();
        assert!(
            args.ends_with(&format!("-- {}", file.display())),
            "the file must come after `--`: {args}"
        );
        assert!(args.contains("--filename=-rf.txt"), "{args}");
    }
}
