//! `cairn ingest`: bulk loads through the same upload path and job queue as the API, with a
//! progress bar per file driven by the job events.

use std::collections::HashMap;
use std::path::PathBuf;

use cairn::app;
use cairn::auth::Principal;
use cairn::config::Config;
use cairn::domain::{Role, Visibility};
use cairn::events::EventKind;
use cairn::service::{UploadRequest, DEFAULT_TEAM};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

fn collect(paths: &[PathBuf], out: &mut Vec<PathBuf>) -> Result<(), String> {
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
    let principal = Principal {
        user_id: user.id,
        team_id: team.id,
        role: cairn::store::role_of(&user).map_err(|e| e.to_string())?,
        name: user.name.clone(),
        token_id: 0,
    };
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
    let style = ProgressStyle::with_template("{prefix:30!} [{bar:30}] {pos:>4}/{len:4} {msg}")
        .map_err(|e| e.to_string())?
        .progress_chars("=> ");
    let mut events = cairn.bus.subscribe();
    let mut pending: HashMap<i64, ProgressBar> = HashMap::new();
    for f in &files {
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
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
                pending.insert(job.id, bar);
            }
            Err(e) => bar.abandon_with_message(format!("refused: {e}")),
        }
    }
    let mut failed = 0usize;
    while !pending.is_empty() {
        let ev = match events.recv().await {
            Ok(ev) => ev,
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
            Err(_) => break,
        };
        let EventKind::Job(j) = ev.kind else { continue };
        let Some(bar) = pending.get(&j.job_id) else {
            continue;
        };
        if let (Some(done), Some(total)) = (j.done, j.total) {
            bar.set_length(total.max(1) as u64);
            bar.set_position(done as u64);
        }
        bar.set_message(j.stage.clone());
        if j.is_terminal() {
            let msg = match (&j.state[..], &j.result, &j.error) {
                ("succeeded", Some(r), _) => r["message"].as_str().unwrap_or("done").to_owned(),
                (_, _, Some(e)) => {
                    failed += 1;
                    format!("{}: {e}", j.state)
                }
                _ => {
                    failed += 1;
                    j.state.clone()
                }
            };
            bar.finish_with_message(msg);
            pending.remove(&j.job_id);
        }
    }
    cairn.queue.shutdown();
    if failed > 0 {
        return Err(format!("{failed} of {} files failed", files.len()));
    }
    Ok(())
}
