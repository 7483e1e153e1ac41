//! In-process event bus: what subscriptions listen to. Every event is scoped to a team and
//! subscribers only see their own team's events.
//!
//! Within one instance this is a `tokio::sync::broadcast` channel. Crossing instances (several
//! `cairn` processes on one PostgreSQL) arrives with the job queue via LISTEN/NOTIFY, which
//! will publish into the same bus.

use entity::prelude::Corpus;
use tokio::sync::broadcast;

#[derive(Clone, Debug)]
pub enum EventKind {
    CorpusCreated(Corpus),
}

#[derive(Clone, Debug)]
pub struct Event {
    pub team_id: i64,
    pub kind: EventKind,
}

#[derive(Clone, Debug)]
pub struct Bus {
    tx: broadcast::Sender<Event>,
}

impl Default for Bus {
    fn default() -> Self {
        Bus::new()
    }
}

impl Bus {
    pub fn new() -> Bus {
        let (tx, _) = broadcast::channel(1024);
        Bus { tx }
    }

    pub fn publish(&self, event: Event) {
        // No subscriber is not an error: events are advisory, state lives in the database.
        let _ = self.tx.send(event);
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.tx.subscribe()
    }
}
