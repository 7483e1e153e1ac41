//! The event bus behind subscriptions. Every event is scoped to a team; subscribers only see
//! their own team's events.
//!
//! On SQLite (one instance) events go straight into a `tokio::sync::broadcast` channel. On
//! PostgreSQL every event is sent with `NOTIFY cairn_events` (in publish order, by one
//! forwarding task) and each instance's `LISTEN` task feeds its own broadcast channel, so a
//! subscriber on any instance sees events from all of them, exactly once.
//!
//! PostgreSQL refuses a NOTIFY payload of 8,000 bytes or more. A job event that would pass
//! [`NOTIFY_MAX_BYTES`] (a long result or error) travels as a reference, and each listener
//! reads the job's stored state instead, so `jobProgress` always sees its terminal event.
//!
//! [`Bus::shutdown`] (called by `Running::stop`) ends both tasks: the LISTEN connection is
//! closed and no reconnection is attempted after the server has stopped.

use entity::prelude::{Corpus, Job, JobState};
use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;

use crate::store::Store;

/// Progress of a job, as subscriptions deliver it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobEvent {
    pub job_id: i64,
    pub kind: String,
    pub corpus_id: Option<i64>,
    pub created_by: Option<i64>,
    pub state: JobState,
    /// extracting | chunking | embedding | storing | searchable (ingest) | extracted (knowledge
    /// extraction) | failed | cancelled | queued
    pub stage: String,
    pub done: Option<i64>,
    pub total: Option<i64>,
    pub error: Option<String>,
    pub result: Option<serde_json::Value>,
    /// Orders the events of one job: later events have higher numbers; terminal events have
    /// `i64::MAX`. A subscriber that read the stored state drops live events not newer than it.
    pub seq: i64,
    /// The job concerns a private upload: its result and error are for its creator only (an
    /// admin watching the team's jobs sees state and progress).
    #[serde(default)]
    pub private: bool,
}

impl JobEvent {
    /// The event describing a job's stored state (for a subscriber that arrives late, and for
    /// a NOTIFY that travelled as a reference). `private` comes from the job's typed kind,
    /// which the publisher knows (`jobs::is_private`); the bus never parses payloads.
    pub fn of_job(job: &Job, private: bool) -> JobEvent {
        let num = |k: &str| job.progress.get(k).and_then(serde_json::Value::as_i64);
        JobEvent {
            job_id: job.id,
            kind: job.kind.clone(),
            corpus_id: job.corpus_id,
            created_by: job.created_by,
            state: job.state,
            stage: job
                .stage
                .clone()
                .unwrap_or_else(|| job.state.as_str().to_owned()),
            done: num("done"),
            total: num("total"),
            error: job.error.clone(),
            result: if job.state == JobState::Succeeded {
                job.result.clone()
            } else {
                None
            },
            seq: if job.state.is_terminal() {
                i64::MAX
            } else {
                num("seq").unwrap_or(0)
            },
            private,
        }
    }

    pub fn is_terminal(&self) -> bool {
        self.state.is_terminal()
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum EventKind {
    CorpusCreated(Corpus),
    Job(JobEvent),
    /// A token was revoked: its open WebSocket sessions close (4401).
    TokenRevoked(i64),
}

/// A NOTIFY payload at most this long is sent whole; a longer job event is sent as a reference.
pub const NOTIFY_MAX_BYTES: usize = 7_900;

/// What crosses instances on the NOTIFY channel.
#[derive(Debug, Serialize, Deserialize)]
enum Wire {
    Event(Box<Event>),
    /// A job event too large for NOTIFY: the listener reads the job's stored state (and
    /// keeps the publisher's privacy flag).
    JobRef {
        team_id: i64,
        job_id: i64,
        #[serde(default = "private_by_default")]
        private: bool,
    },
}

/// A reference from an older instance carries no flag: its job counts as private.
fn private_by_default() -> bool {
    true
}

/// The NOTIFY payload for an event: the event itself, or a reference when it would not fit.
fn wire_payload(ev: Event) -> Result<String, serde_json::Error> {
    let full = serde_json::to_string(&Wire::Event(Box::new(ev.clone())))?;
    if full.len() <= NOTIFY_MAX_BYTES {
        return Ok(full);
    }
    match ev.kind {
        EventKind::Job(j) => serde_json::to_string(&Wire::JobRef {
            team_id: ev.team_id,
            job_id: j.job_id,
            private: j.private,
        }),
        // Corpus names and descriptions are bounded far below the limit; send it anyway.
        _ => Ok(full),
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Event {
    pub team_id: i64,
    pub kind: EventKind,
}

pub const PG_CHANNEL: &str = "cairn_events";

/// How long [`Bus::for_store`] waits for its first LISTEN connection.
const LISTEN_READY_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

#[derive(Clone, Debug)]
pub struct Bus {
    tx: broadcast::Sender<Event>,
    /// Set on PostgreSQL: events go through NOTIFY instead of straight to `tx`.
    notify: Option<mpsc::UnboundedSender<Event>>,
    /// Cancelled by [`Bus::shutdown`]: the NOTIFY forwarder and the LISTEN task end.
    stop: CancellationToken,
}

impl Bus {
    /// An in-process bus (SQLite, or tests).
    pub fn local() -> Bus {
        let (tx, _) = broadcast::channel(4096);
        Bus {
            tx,
            notify: None,
            stop: CancellationToken::new(),
        }
    }

    /// A bus whose events cross instances through the store's NOTIFY/LISTEN (PostgreSQL), or
    /// a local one on SQLite.
    pub async fn for_store(store: &Store) -> Bus {
        let mut bus = Bus::local();
        if !store.supports_notify() {
            return bus;
        }
        let (ntx, mut nrx) = mpsc::unbounded_channel::<Event>();
        let forward_store = store.clone();
        let stop = bus.stop.clone();
        tokio::spawn(async move {
            loop {
                let ev = tokio::select! {
                    _ = stop.cancelled() => return,
                    ev = nrx.recv() => match ev {
                        Some(ev) => ev,
                        None => return,
                    },
                };
                match wire_payload(ev) {
                    Ok(payload) => {
                        if let Err(e) = forward_store.notify(PG_CHANNEL, &payload).await {
                            tracing::warn!(error = %e, "NOTIFY failed; event dropped");
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "event not serializable"),
                }
            }
        });
        let listen_store = store.clone();
        let local = bus.tx.clone();
        let stop = bus.stop.clone();
        // Events published before the first LISTEN is in place would be lost: the bus is
        // handed out only once it listens (or after LISTEN_READY_WAIT, with a warning).
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel::<()>();
        let mut ready_tx = Some(ready_tx);
        tokio::spawn(async move {
            loop {
                let connected = tokio::select! {
                    _ = stop.cancelled() => return,
                    l = listen_store.listen(PG_CHANNEL) => l,
                };
                let mut listener = match connected {
                    Ok(l) => {
                        if let Some(tx) = ready_tx.take() {
                            let _ = tx.send(());
                        }
                        l
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "LISTEN failed; retrying");
                        tokio::select! {
                            _ = stop.cancelled() => return,
                            _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
                        }
                        continue;
                    }
                };
                loop {
                    let received = tokio::select! {
                        _ = stop.cancelled() => return,
                        r = listener.recv() => r,
                    };
                    match received {
                        Ok(payload) => match serde_json::from_str::<Wire>(&payload) {
                            Ok(Wire::Event(ev)) => {
                                let _ = local.send(*ev);
                            }
                            Ok(Wire::JobRef {
                                team_id,
                                job_id,
                                private,
                            }) => match listen_store.team_job(team_id, job_id).await {
                                Ok(Some(job)) => {
                                    let _ = local.send(Event {
                                        team_id,
                                        kind: EventKind::Job(JobEvent::of_job(&job, private)),
                                    });
                                }
                                Ok(None) => {}
                                Err(e) => {
                                    tracing::warn!(error = %e, "job behind an event reference not read")
                                }
                            },
                            Err(e) => tracing::warn!(error = %e, "bad event payload"),
                        },
                        Err(e) => {
                            tracing::warn!(error = %e, "LISTEN connection lost; reconnecting");
                            break;
                        }
                    }
                }
            }
        });
        if !matches!(
            tokio::time::timeout(LISTEN_READY_WAIT, ready_rx).await,
            Ok(Ok(()))
        ) {
            tracing::warn!("LISTEN not ready yet; events published meanwhile reach this instance only after it connects");
        }
        bus.notify = Some(ntx);
        bus
    }

    pub fn publish(&self, event: Event) {
        match &self.notify {
            Some(n) => {
                let _ = n.send(event);
            }
            // No subscriber is not an error: events are advisory, state lives in the database.
            None => {
                let _ = self.tx.send(event);
            }
        }
    }

    /// Ends the cross-instance tasks (PostgreSQL): the LISTEN connection closes and is not
    /// reopened; events published afterwards are dropped. Idempotent; a no-op on SQLite.
    pub fn shutdown(&self) {
        self.stop.cancel();
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.tx.subscribe()
    }
}
