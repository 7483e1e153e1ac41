//! `cairn ingest`: bulk loads through the same upload path and job queue as the API, with a
//! progress bar per file. It waits on durable state (the jobs table, polled), so it ends
//! whoever ran its jobs (this process's workers or a server's on the same data directory),
//! prints a summary (new, duplicate, failed with reasons, chunks, seconds) and exits
//! non-zero when any file failed.

use std::collections::HashMap;
use std::path::PathBuf;

use cairn::app;
use cairn::config::Config;
use cairn::domain::{Role, Visibility};
use cairn::service::{UploadRequest, DEFAULT_TEAM, INITIAL_TOKEN_FILE};
use cairn::{IngestResult, JobResult};
use entity::prelude::JobState;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

pub(crate) fn collect(paths: &[PathBuf], out: &mut Vec<PathBuf>) -> Result<(), String> {
    for p in paths {
        if p.is_dir() {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| format!("{}: {e}", p.display()))?
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|e| {
                    !e.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with('.'))
                })
                .collect();
            entries.sort();
            collect(&entries, out)?;
        } else if p.is_file() {
            out.push(p.clone());
        } else {
            return Err(format!("{}: no such file or directory", p.display()));
        }
    }
    Ok(())
}

/// Who loads and where.
pub struct Options<'a> {
    pub team: Option<&'a str>,
    pub user: Option<i64>,
    pub private: bool,
    /// Into a system corpus (the operator's privilege; no token can write one).
    pub system: bool,
}

/// How often the jobs table is read while waiting.
pub(crate) const POLL: std::time::Duration = std::time::Duration::from_millis(250);

/// The progress bars' look (local and `--server` loads alike).
pub(crate) fn bar_style() -> Result<ProgressStyle, String> {
    Ok(
        ProgressStyle::with_template("{prefix:30!} [{bar:30}] {pos:>4}/{len:4} {msg}")
            .map_err(|e| e.to_string())?
            .progress_chars("=> "),
    )
}

/// How a bulk load went.
#[derive(Default)]
pub(crate) struct Summary {
    pub(crate) new: usize,
    pub(crate) duplicate: usize,
    pub(crate) chunks: u64,
    /// Pages (or images) read by OCR.
    pub(crate) ocr_pages: u64,
    pub(crate) failed: Vec<(String, String)>,
}

impl Summary {
    /// Counts a succeeded job's result (`duplicate`, `chunkCount`).
    /// A succeeded ingest; `None` when its result was delivered elsewhere (counted as new).
    pub(crate) fn succeeded(&mut self, result: Option<&IngestResult>) {
        if result.is_some_and(|r| r.duplicate) {
            self.duplicate += 1;
        } else {
            self.new += 1;
        }
        self.chunks += result.map_or(0, |r| u64::try_from(r.chunk_count).unwrap_or(0));
        self.ocr_pages += result.map_or(0, |r| r.ocr_pages);
    }

    /// Prints the summary and the failures; `Err` when any file failed.
    pub(crate) fn finish(&self, files: usize, seconds: f64) -> Result<(), String> {
        eprintln!("{}", self.line(files, seconds));
        for (name, reason) in &self.failed {
            eprintln!("  failed: {name}: {reason}");
        }
        if self.failed.is_empty() {
            Ok(())
        } else {
            Err(format!("{} of {files} files failed", self.failed.len()))
        }
    }

    fn line(&self, files: usize, seconds: f64) -> String {
        let ocr = match self.ocr_pages {
            0 => String::new(),
            1 => "; 1 page read by OCR".to_owned(),
            n => format!("; {n} pages read by OCR"),
        };
        format!(
            "{files} files in {seconds:.1} s: {} new, {} duplicate, {} failed; {} chunks{ocr}",
            self.new,
            self.duplicate,
            self.failed.len(),
            self.chunks
        )
    }
}

pub async fn ingest(
    cfg: &Config,
    paths: &[PathBuf],
    corpus_name: &str,
    opts: Options<'_>,
) -> Result<(), String> {
    let Options {
        team,
        user,
        private,
        system,
    } = opts;
    let mut files = Vec::new();
    collect(paths, &mut files)?;
    if files.is_empty() {
        return Err("no files to ingest".into());
    }
    let cairn = app::start_headless(cfg).await.map_err(|e| e.to_string())?;
    let store = &cairn.store;
    if team.is_none() {
        // A first load into a fresh data directory sets it up as `cairn serve` would: the
        // default team, its owner and a login token, saved where `serve` saves it.
        if let Some(b) = cairn
            .bootstrap_if_empty(&cfg.data_dir)
            .await
            .map_err(|e| e.to_string())?
        {
            eprintln!(
                "Cairn created team \"{}\" and its owner \"{}\"; their login token is in {} (mode 0600).",
                b.team.name,
                b.owner.name,
                cfg.data_dir.join(INITIAL_TOKEN_FILE).display()
            );
        }
    }
    let team_name = team.unwrap_or(DEFAULT_TEAM);
    let team = store
        .team_by_name(team_name)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| {
            format!("no team named `{team_name}` (start `cairn serve` once, or create it)")
        })?;
    let user = match user {
        Some(id) => store.user(id).await.map_err(|e| e.to_string())?,
        None => store
            .first_owner(team.id)
            .await
            .map_err(|e| e.to_string())?,
    }
    .filter(|u| u.team_id == team.id)
    .ok_or("no such user in that team")?;
    let principal = cairn::service::principal_of(&user, 0).map_err(|e| e.to_string())?;
    if principal.role == Role::Viewer {
        return Err("viewers cannot upload".into());
    }
    let corpus = if system {
        match store
            .system_corpus_by_name(corpus_name)
            .await
            .map_err(|e| e.to_string())?
        {
            Some(c) => c,
            None => store
                .create_corpus(None, corpus_name, None)
                .await
                .map_err(|e| e.to_string())?,
        }
    } else {
        match store
            .team_corpus_by_name(team.id, corpus_name)
            .await
            .map_err(|e| e.to_string())?
        {
            Some(c) => c,
            None => cairn
                .create_corpus(&principal, corpus_name, None)
                .await
                .map_err(|e| e.to_string())?,
        }
    };

    let bars = MultiProgress::new();
    let style = bar_style()?;
    let started = std::time::Instant::now();
    let mut pending: HashMap<i64, (ProgressBar, String)> = HashMap::new();
    let mut ends = cairn.job_ends();
    let mut refused: Vec<(String, String)> = Vec::new();
    for f in &files {
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let display = name.clone();
        let bar = bars.add(ProgressBar::new(1));
        bar.set_style(style.clone());
        bar.set_prefix(name.clone());
        let file = std::fs::File::open(f).map_err(|e| format!("{}: {e}", f.display()))?;
        let request = UploadRequest {
            corpus_id: corpus.id,
            filename: name,
            visibility: Some(if private {
                Visibility::Private
            } else {
                Visibility::Team
            }),
            document_id: None,
            title: None,
            source_url: None,
        };
        let queued = if system {
            cairn.operator_upload(&principal, request, file).await
        } else {
            cairn.upload(&principal, request, file).await
        };
        match queued {
            Ok(job) => {
                bar.set_message("queued");
                pending.insert(job.id, (bar, display));
            }
            Err(e) => {
                bar.abandon_with_message(format!("refused: {e}"));
                refused.push((display, format!("refused: {e}")));
            }
        }
    }
    // Wait on durable state, not on events: a job of ours may run in another process (a
    // server's workers on the same data directory claim jobs too), whose events never reach
    // this one on SQLite. The jobs table says how every job ended, whoever ran it; it is read
    // every POLL, and at once when a job this process runs ends.
    let mut summary = Summary::default();
    while !pending.is_empty() {
        ends.wait(POLL).await;
        let ids: Vec<i64> = pending.keys().copied().collect();
        let mut jobs: HashMap<i64, _> = store
            .jobs(&ids)
            .await
            .map_err(|e| format!("reading the queued jobs: {e}"))?
            .into_iter()
            .map(|j| (j.id, j))
            .collect();
        for id in ids {
            let Some(job) = jobs.remove(&id) else {
                if let Some((bar, name)) = pending.remove(&id) {
                    bar.abandon_with_message("the job vanished");
                    summary.failed.push((name, "the job vanished".into()));
                }
                continue;
            };
            let Some((bar, _)) = pending.get(&id) else {
                continue;
            };
            let num = |k: &str| job.progress.get(k).and_then(serde_json::Value::as_i64);
            if let (Some(done), Some(total)) = (num("done"), num("total")) {
                bar.set_length(total.max(1) as u64);
                bar.set_position(done as u64);
            }
            bar.set_message(
                job.stage
                    .clone()
                    .unwrap_or_else(|| job.state.as_str().to_owned()),
            );
            if !job.state.is_terminal() {
                continue;
            }
            let Some((bar, name)) = pending.remove(&id) else {
                continue;
            };
            match (job.state, JobResult::of(&job.kind, job.result.as_ref())) {
                (JobState::Succeeded, Some(JobResult::Ingest(r))) => {
                    summary.succeeded(Some(&r));
                    bar.finish_with_message(r.message.clone());
                }
                (state, _) => {
                    let reason = job
                        .error
                        .clone()
                        .unwrap_or_else(|| state.as_str().to_owned());
                    bar.abandon_with_message(format!("{}: {reason}", state.as_str()));
                    summary.failed.push((name, reason));
                }
            }
        }
    }
    summary.failed.extend(refused);
    cairn.queue.shutdown();
    summary.finish(files.len(), started.elapsed().as_secs_f64())?;
    Ok(())
}
