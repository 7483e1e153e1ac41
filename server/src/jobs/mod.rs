//! The durable job queue: workers in this process claim jobs from the `jobs` table under a
//! lease, run them, and report progress as events.
//!
//! - A job is claimed with a lease (`store::jobs`); while it runs, the worker renews the lease
//!   at every progress report. A worker that dies (crash, SIGKILL, restart) stops renewing, and
//!   once the lease expires any instance claims the job again.
//! - A failure is retried with exponential backoff until `max_attempts`; a permanent failure
//!   (a corrupt file) fails at once. Either way the job ends with a reason.
//! - `cancelJob` flips the state; the running worker notices at its next progress report
//!   (the heartbeat no longer matches) and stops.
//! - Every state change is published as a [`JobEvent`] (through NOTIFY on PostgreSQL).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration as StdDuration;

use chrono::Duration;
use entity::prelude::{Job, JobState};
use serde_json::{json, Value as Json};
use tokio::sync::{watch, Notify};
use tracing::Instrument;

mod kind;

pub use kind::{
    IngestPayload, IngestResult, JobKind, JobResult, KgFailure, KgPayload, KgResult,
    ProcessPayload, ProcessResult, INGEST, KG_EXTRACT, PROCESS_DOCUMENT,
};

use crate::events::{Bus, Event, EventKind, JobEvent};
use crate::store::jobs::{Finish, NewJob};
use crate::store::{Store, StoreError};

/// Why a job attempt stopped without a result.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// Will not get better by retrying (corrupt input, invalid payload).
    #[error("{0}")]
    Permanent(String),
    /// May succeed later (database hiccup, model busy).
    #[error("{0}")]
    Transient(String),
    /// The job was cancelled or another worker took it over: stop quietly.
    #[error("stopped: cancelled or lease lost")]
    Stopped,
}

impl From<StoreError> for JobError {
    fn from(e: StoreError) -> Self {
        JobError::Transient(e.to_string())
    }
}

/// Runs jobs of one kind.
#[async_trait::async_trait]
pub trait Runner: Send + Sync + 'static {
    /// Runs one attempt of `job`, whose kind and payload are `kind` (already parsed: a row
    /// that does not parse never reaches a runner).
    async fn run(&self, job: &Job, kind: JobKind, ctx: &JobContext) -> Result<JobResult, JobError>;

    /// Called once when a job fails for good (clean up what it left behind).
    async fn on_failed(&self, _job: &Job, _kind: &JobKind) {}
}

/// What a running job may do: report progress (which also renews its lease).
pub struct JobContext {
    store: Store,
    bus: Bus,
    wake: Arc<Notify>,
    owner: String,
    lease: Duration,
    job: Job,
    seq: std::sync::atomic::AtomicI64,
}

/// Event numbers of one attempt start here (attempts × this), so they grow across retries.
const SEQ_PER_ATTEMPT: i64 = 1_000_000;

/// The sequence number of the queued event after attempt `attempts` failed.
fn retry_seq(attempts: i32) -> i64 {
    i64::from(attempts) * SEQ_PER_ATTEMPT + SEQ_PER_ATTEMPT - 1
}

/// The one way to queue a job: insert it, publish its `queued` event (subscribers of `jobs`
/// see it at once), wake an idle worker. The service, the CLI and the runners (an ingest that
/// queues its automatic knowledge extraction) all come through here.
pub async fn submit(
    store: &Store,
    bus: &Bus,
    wake: &Notify,
    job: NewJob,
) -> Result<Job, StoreError> {
    let job = store.enqueue_job(job).await?;
    bus.publish(Event {
        team_id: job.team_id,
        kind: EventKind::Job(snapshot(&job)),
    });
    wake.notify_waiters();
    Ok(job)
}

impl JobContext {
    /// Queues another job from inside this one ([`submit`]).
    pub async fn submit(&self, job: NewJob) -> Result<Job, JobError> {
        Ok(submit(&self.store, &self.bus, &self.wake, job).await?)
    }

    /// Records and publishes a stage (with `done`/`total` when counting). Fails with
    /// [`JobError::Stopped`] when the job was cancelled or its lease taken over.
    pub async fn progress(
        &self,
        stage: &str,
        done: Option<i64>,
        total: Option<i64>,
    ) -> Result<(), JobError> {
        let seq = self.seq.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        let progress = json!({ "done": done, "total": total, "seq": seq });
        let held = self
            .store
            .heartbeat_job(self.job.id, &self.owner, self.lease, stage, &progress)
            .await?;
        if !held {
            return Err(JobError::Stopped);
        }
        publish(
            &self.bus,
            &self.job,
            JobState::Running,
            stage,
            done,
            total,
            None,
            None,
            seq,
        );
        Ok(())
    }
}

#[allow(clippy::too_many_arguments)]
fn publish(
    bus: &Bus,
    job: &Job,
    state: JobState,
    stage: &str,
    done: Option<i64>,
    total: Option<i64>,
    error: Option<String>,
    result: Option<Json>,
    seq: i64,
) {
    bus.publish(Event {
        team_id: job.team_id,
        kind: EventKind::Job(JobEvent {
            job_id: job.id,
            kind: job.kind.clone(),
            corpus_id: job.corpus_id,
            created_by: job.created_by,
            state,
            stage: stage.to_owned(),
            done,
            total,
            error,
            result,
            seq,
            private: is_private(job),
        }),
    });
}

/// The event describing a job's stored state (for a subscriber that arrives late).
pub fn snapshot(job: &Job) -> JobEvent {
    JobEvent::of_job(job, is_private(job))
}

/// Whether a job concerns a private upload (typed: [`JobKind::is_private`]); a row that does
/// not parse counts as private, so nothing about it is shown to others.
pub fn is_private(job: &Job) -> bool {
    JobKind::of(job).map_or(true, |k| k.is_private())
}

#[derive(Clone, Copy, Debug)]
pub struct QueueConfig {
    pub workers: usize,
    pub lease: StdDuration,
    /// How often an idle worker looks for work it was not woken for (other instances' jobs,
    /// expired leases, retries coming due).
    pub poll: StdDuration,
    pub backoff_base: StdDuration,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            workers: 2,
            lease: StdDuration::from_secs(30),
            poll: StdDuration::from_millis(500),
            backoff_base: StdDuration::from_secs(2),
        }
    }
}

/// Handle to the queue: enqueue wakes the workers.
#[derive(Clone)]
pub struct Queue {
    wake: Arc<Notify>,
    stop: watch::Sender<bool>,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Queue")
    }
}

impl Queue {
    /// Starts `cfg.workers` workers for the given kinds.
    pub fn start(
        store: Store,
        bus: Bus,
        runners: HashMap<&'static str, Arc<dyn Runner>>,
        cfg: QueueConfig,
    ) -> Queue {
        let wake = Arc::new(Notify::new());
        let (stop, stop_rx) = watch::channel(false);
        let runners = Arc::new(runners);
        let instance = format!("{}-{:08x}", std::process::id(), rand::random::<u32>());
        for n in 0..cfg.workers {
            let w = Worker {
                store: store.clone(),
                bus: bus.clone(),
                runners: runners.clone(),
                owner: format!("{instance}/{n}"),
                cfg,
                wake: wake.clone(),
                stop: stop_rx.clone(),
            };
            tokio::spawn(w.run());
        }
        Queue { wake, stop }
    }

    /// A queue handle with no workers (for processes that only enqueue).
    pub fn detached() -> Queue {
        let (stop, _) = watch::channel(false);
        Queue {
            wake: Arc::new(Notify::new()),
            stop,
        }
    }

    pub fn wake(&self) {
        self.wake.notify_waiters();
    }

    /// Queues a job ([`submit`]) and wakes this queue's workers.
    pub async fn submit(&self, store: &Store, bus: &Bus, job: NewJob) -> Result<Job, StoreError> {
        submit(store, bus, &self.wake, job).await
    }

    /// Stops the workers after their current job step.
    pub fn shutdown(&self) {
        let _ = self.stop.send(true);
        self.wake.notify_waiters();
    }
}

struct Worker {
    store: Store,
    bus: Bus,
    runners: Arc<HashMap<&'static str, Arc<dyn Runner>>>,
    owner: String,
    cfg: QueueConfig,
    wake: Arc<Notify>,
    stop: watch::Receiver<bool>,
}

impl Worker {
    async fn run(mut self) {
        let lease = Duration::from_std(self.cfg.lease).unwrap_or(Duration::seconds(30));
        loop {
            if *self.stop.borrow() {
                return;
            }
            let claimed = match self.store.claim_job(&self.owner, lease).await {
                Ok(j) => j,
                Err(e) => {
                    tracing::warn!(error = %e, "claiming a job failed");
                    None
                }
            };
            match claimed {
                Some(job) => {
                    tracing::debug!(job = job.id, attempt = job.attempts, owner = %self.owner, "claimed");
                    self.run_one(job, lease).await
                }
                None => {
                    let notified = self.wake.notified();
                    tokio::select! {
                        _ = notified => {}
                        _ = tokio::time::sleep(self.cfg.poll) => {}
                        _ = self.stop.changed() => {}
                    }
                }
            }
        }
    }

    async fn run_one(&self, job: Job, lease: Duration) {
        let span =
            tracing::info_span!("job", id = job.id, kind = %job.kind, attempt = job.attempts);
        self.attempt(job, lease).instrument(span).await
    }

    async fn attempt(&self, job: Job, lease: Duration) {
        // A row that does not parse (unknown kind, bad payload) fails for good, unrun.
        let kind = match JobKind::of(&job) {
            Ok(k) => k,
            Err(e) => {
                let error = e.to_string();
                tracing::warn!(%error, "job refused");
                self.fail(&job, error).await;
                return;
            }
        };
        let Some(runner) = self.runners.get(kind.name()).cloned() else {
            let error = format!("no worker runs `{}` jobs here", kind.name());
            self.fail(&job, error).await;
            return;
        };
        if job.attempts > job.max_attempts {
            let error = format!(
                "gave up after {} attempts{}",
                job.max_attempts,
                job.error
                    .as_deref()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default()
            );
            runner.on_failed(&job, &kind).await;
            self.fail(&job, error).await;
            return;
        }
        let ctx = JobContext {
            store: self.store.clone(),
            bus: self.bus.clone(),
            wake: self.wake.clone(),
            owner: self.owner.clone(),
            lease,
            job: job.clone(),
            seq: std::sync::atomic::AtomicI64::new(i64::from(job.attempts) * SEQ_PER_ATTEMPT),
        };
        // The lease is renewed in the background (every third of it) for as long as the job
        // runs, so a long step (a big embedding batch) never lets another worker take it over.
        let (lost_tx, mut lost_rx) = watch::channel(false);
        let keeper = {
            let store = self.store.clone();
            let owner = self.owner.clone();
            let id = job.id;
            let every = self.cfg.lease / 3;
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    match store.renew_lease(id, &owner, lease).await {
                        Ok(true) => tracing::debug!(job = id, "lease renewed"),
                        Ok(false) => {
                            let _ = lost_tx.send(true);
                            return;
                        }
                        Err(e) => tracing::warn!(error = %e, "renewing a job lease failed"),
                    }
                }
            })
        };
        let outcome = tokio::select! {
            r = runner.run(&job, kind.clone(), &ctx) => r,
            _ = lost_rx.wait_for(|lost| *lost) => Err(JobError::Stopped),
        };
        keeper.abort();
        match outcome {
            Ok(result) => {
                let result = result.to_json();
                self.finish(
                    &job,
                    Finish::Succeeded {
                        result: result.clone(),
                        stage: kind.succeeded_stage(),
                    },
                    Some(result),
                    None,
                )
                .await;
            }
            Err(JobError::Stopped) => {
                tracing::info!("job stopped (cancelled or taken over)");
                if let Ok(Some(now)) = self.store.job(job.id).await {
                    if now.state == JobState::Cancelled {
                        runner.on_failed(&now, &kind).await;
                        publish(
                            &self.bus,
                            &now,
                            JobState::Cancelled,
                            "cancelled",
                            None,
                            None,
                            None,
                            None,
                            i64::MAX,
                        );
                    }
                }
            }
            Err(JobError::Permanent(error)) => {
                tracing::warn!(%error, "job failed");
                runner.on_failed(&job, &kind).await;
                self.fail(&job, error).await;
            }
            Err(JobError::Transient(error)) if job.attempts < job.max_attempts => {
                let factor =
                    2u32.saturating_pow(u32::try_from(job.attempts.max(1) - 1).unwrap_or(0));
                let after = Duration::from_std(self.cfg.backoff_base * factor)
                    .unwrap_or(Duration::seconds(60));
                tracing::warn!(%error, retry_in_s = after.num_seconds(), "job attempt failed; will retry");
                let held = self
                    .store
                    .finish_job(
                        job.id,
                        &self.owner,
                        Finish::Retry {
                            error: error.clone(),
                            after,
                        },
                    )
                    .await
                    .unwrap_or(false);
                if held {
                    publish(
                        &self.bus,
                        &job,
                        JobState::Queued,
                        "queued",
                        None,
                        None,
                        Some(error),
                        None,
                        retry_seq(job.attempts),
                    );
                }
            }
            Err(JobError::Transient(error)) => {
                let error = format!("gave up after {} attempts: {error}", job.attempts);
                runner.on_failed(&job, &kind).await;
                self.fail(&job, error).await;
            }
        }
    }

    /// Ends `job` as failed for good with `error`.
    async fn fail(&self, job: &Job, error: String) {
        self.finish(
            job,
            Finish::Failed {
                error: error.clone(),
            },
            None,
            Some(error),
        )
        .await;
    }

    async fn finish(&self, job: &Job, how: Finish, result: Option<Json>, error: Option<String>) {
        let (state, stage) = match &how {
            Finish::Succeeded { stage, .. } => (JobState::Succeeded, *stage),
            Finish::Retry { .. } => (JobState::Queued, "queued"),
            Finish::Failed { .. } => (JobState::Failed, "failed"),
        };
        match self.store.finish_job(job.id, &self.owner, how).await {
            Ok(true) => {
                let seq = if state == JobState::Queued {
                    retry_seq(job.attempts)
                } else {
                    i64::MAX
                };
                publish(&self.bus, job, state, stage, None, None, error, result, seq)
            }
            Ok(false) => tracing::info!("job was cancelled or taken over before it finished"),
            Err(e) => tracing::error!(error = %e, "recording the end of a job failed"),
        }
    }
}
