//! A job followed live over the `jobProgress` subscription, and the bar that shows it.

use leptos::prelude::*;
use serde_json::{json, Value};

use crate::session::Session;
use crate::ws::{self, SubEvent, Subscription};

/// A job as a mutation returns it.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct JobRef {
    pub id: String,
    pub kind: String,
    pub state: String,
    pub stage: Option<String>,
}

const JOB_PROGRESS: &str = "subscription($id: ID!) { jobProgress(id: $id) { jobId kind state stage done total error result } }";

/// The live state of one job (or of an upload that has not become a job yet). `Copy`: all
/// signals.
#[derive(Clone, Copy)]
pub struct JobWatch {
    pub job_id: RwSignal<Option<String>>,
    pub kind: RwSignal<String>,
    /// UPLOADING (before the server answered), then the job's QUEUED, RUNNING, SUCCEEDED,
    /// FAILED or CANCELLED.
    pub state: RwSignal<String>,
    pub stage: RwSignal<String>,
    pub done: RwSignal<Option<i64>>,
    pub total: RwSignal<Option<i64>>,
    pub error: RwSignal<Option<String>>,
    pub message: RwSignal<Option<String>>,
    sub: RwSignal<Option<Subscription>>,
}

impl JobWatch {
    pub fn new(kind: &str, state: &str, stage: &str) -> Self {
        Self {
            job_id: RwSignal::new(None),
            kind: RwSignal::new(kind.to_owned()),
            state: RwSignal::new(state.to_owned()),
            stage: RwSignal::new(stage.to_owned()),
            done: RwSignal::new(None),
            total: RwSignal::new(None),
            error: RwSignal::new(None),
            message: RwSignal::new(None),
            sub: RwSignal::new(None),
        }
    }

    /// Marks the watch failed before any job existed (the upload itself was refused).
    pub fn fail(&self, reason: String) {
        let _ = self.state.try_set("FAILED".to_owned());
        let _ = self.stage.try_set("failed".to_owned());
        let _ = self.error.try_set(Some(reason));
    }

    pub fn is_over(&self) -> bool {
        matches!(
            self.state.get().as_str(),
            "SUCCEEDED" | "FAILED" | "CANCELLED"
        )
    }

    /// Follows `job_id` until it ends; `on_end(succeeded)` runs once, at the end.
    pub fn follow(self, session: Session, job_id: String, on_end: impl Fn(bool) + 'static) {
        let _ = self.job_id.try_set(Some(job_id.clone()));
        let Some(token) = session.token_untracked() else {
            return;
        };
        let mut ended = false;
        let sub = ws::subscribe(&token, JOB_PROGRESS, json!({ "id": job_id }), move |ev| {
            if ended {
                return;
            }
            let over = match ev {
                SubEvent::Next(payload) => self.apply(&payload),
                SubEvent::Failed(reason) => {
                    self.fail(reason);
                    true
                }
                SubEvent::Complete if !self.is_over_untracked() => {
                    // The stream ended before its terminal event reached us (a socket that
                    // reconnected, a lagging subscriber): the stored state says how it ended.
                    self.refresh(session, job_id.clone());
                    false
                }
                SubEvent::Complete => true,
            };
            if over {
                ended = true;
                on_end(self.state.try_get_untracked().as_deref() == Some("SUCCEEDED"));
            }
        });
        if self.sub.try_set(Some(sub)).is_some() {
            // The page is gone already.
            sub.cancel();
        }
    }

    fn is_over_untracked(&self) -> bool {
        matches!(
            self.state.try_get_untracked().as_deref(),
            Some("SUCCEEDED" | "FAILED" | "CANCELLED")
        )
    }

    /// Reads the job's stored state once (after a stream that ended early).
    fn refresh(self, session: Session, job_id: String) {
        leptos::task::spawn_local(async move {
            let q =
                "query($id: ID!) { job(id: $id) { state stage error progress { done total } } }";
            if let Ok(v) = session.gql::<Value>(q, json!({ "id": job_id })).await {
                let job = &v["job"];
                if let Some(state) = job["state"].as_str() {
                    let _ = self
                        .stage
                        .try_set(job["stage"].as_str().unwrap_or_default().to_owned());
                    let _ = self.done.try_set(job["progress"]["done"].as_i64());
                    let _ = self.total.try_set(job["progress"]["total"].as_i64());
                    if let Some(error) = job["error"].as_str() {
                        let _ = self.error.try_set(Some(error.to_owned()));
                    }
                    let _ = self.state.try_set(state.to_owned());
                }
            }
        });
    }

    /// Applies one `jobProgress` result; true when the job has ended.
    fn apply(&self, payload: &Value) -> bool {
        if let Some(message) = payload["errors"][0]["message"].as_str() {
            self.fail(message.to_owned());
            return true;
        }
        let ev = &payload["data"]["jobProgress"];
        let text = |k: &str| ev[k].as_str().map(str::to_owned);
        if let Some(kind) = text("kind") {
            let _ = self.kind.try_set(kind);
        }
        let state = text("state").unwrap_or_default();
        let _ = self.stage.try_set(text("stage").unwrap_or_default());
        let _ = self.done.try_set(ev["done"].as_i64());
        let _ = self.total.try_set(ev["total"].as_i64());
        if let Some(error) = text("error") {
            let _ = self.error.try_set(Some(error));
        }
        if let Some(message) = ev["result"]["message"].as_str() {
            let _ = self.message.try_set(Some(message.to_owned()));
        }
        let over = matches!(state.as_str(), "SUCCEEDED" | "FAILED" | "CANCELLED");
        let _ = self.state.try_set(state);
        over
    }

    /// How far along, 0–100: by stage for ingestion (embedding counts k/n), by k/n for
    /// knowledge extraction.
    pub fn percent(&self) -> f64 {
        let state = self.state.get();
        // A job's terminal stage is a full bar whatever else the last event said.
        if state == "SUCCEEDED" || matches!(self.stage.get().as_str(), "searchable" | "extracted") {
            return 100.0;
        }
        let fraction = match (self.done.get(), self.total.get()) {
            (Some(d), Some(t)) if t > 0 => (d as f64 / t as f64).clamp(0.0, 1.0),
            _ => 0.0,
        };
        if self.kind.get() != "ingest" {
            return 5.0 + 90.0 * fraction;
        }
        match self.stage.get().as_str() {
            "uploading" => 2.0,
            "queued" => 5.0,
            "extracting" => 15.0,
            "chunking" => 30.0,
            "embedding" => 30.0 + 60.0 * fraction,
            "storing" => 94.0,
            _ => 5.0,
        }
    }

    /// The stage as shown: `embedding 3/10` while counting.
    pub fn stage_text(&self) -> String {
        let stage = self.stage.get();
        match (self.done.get(), self.total.get()) {
            (Some(d), Some(t)) if !self.is_over() => format!("{stage} {d}/{t}"),
            _ => stage,
        }
    }
}

/// One progress bar: label, stage (k/n while counting), the bar, and the failure reason or
/// the job's closing message.
#[component]
pub fn JobBar(
    watch: JobWatch,
    #[prop(into)] label: String,
    #[prop(optional, into)] id: Option<String>,
) -> impl IntoView {
    on_cleanup(move || {
        if let Some(sub) = watch.sub.try_get_untracked().flatten() {
            sub.cancel();
        }
    });
    let state_class = move || format!("job state-{}", watch.state.get().to_lowercase());
    let width = move || format!("width: {:.1}%", watch.percent());
    view! {
        <div class=state_class id=id data-file=label.clone() data-state=move || watch.state.get()>
            <div class="job-head">
                <span class="job-label">{label.clone()}</span>
                <span class="stage">{move || watch.stage_text()}</span>
            </div>
            <div class="bar" role="progressbar" aria-valuemin="0" aria-valuemax="100"
                aria-valuenow=move || format!("{:.0}", watch.percent())>
                <div class="fill" style=width></div>
            </div>
            {move || watch.error.get().map(|e| view! { <p class="error job-error" role="alert">{e}</p> })}
            {move || watch.message.get().map(|m| view! { <p class="muted job-message">{m}</p> })}
        </div>
    }
}
