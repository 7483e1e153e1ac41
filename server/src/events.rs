//! The event bus behind subscriptions. Every event is scoped to a team; subscribers only see
//! their own team's events.
//!
//! On SQLite (one instance) events go straight into a `tokio::sync::broadcast` channel. On
//! PostgreSQL every event is sent with `NOTIFY cairn_events` (in publish order, by one
//! forwarding task) and each instance's `LISTEN` task feeds its own broadcast channel, so a
//! subscriber on any instance sees events from all of them, exactly once.
//!
//! [`Bus::shutdown`] (called by `Running::stop`) ends both tasks: the LISTEN connection is
//! closed and no reconnection is attempted after the server has stopped.

use entity::prelude::Corpus;
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
    /// queued | running | succeeded | failed | cancelled
    pub state: String,
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
}

impl JobEvent {
    pub fn is_terminal(&self) -> bool {
        matches!(self.state.as_str(), "succeeded" | "failed" | "cancelled")
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum EventKind {
    CorpusCreated(Corpus),
    Job(JobEvent),
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Event {
    pub team_id: i64,
    pub kind: EventKind,
}

pub const PG_CHANNEL: &str = "cairn_events";

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
                match serde_json::to_string(&ev) {
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
        tokio::spawn(async move {
            loop {
                let connected = tokio::select! {
                    _ = stop.cancelled() => return,
                    l = listen_store.listen(PG_CHANNEL) => l,
                };
                let mut listener = match connected {
                    Ok(l) => l,
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
                        Ok(n) => match serde_json::from_str::<Event>(n.payload()) {
                            Ok(ev) => {
                                let _ = local.send(ev);
                            }
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
