//! A long-lived authenticated session (a WebSocket today): the token it was opened with,
//! re-checked before every operation (the answer cached for at most [`RECHECK_AFTER`]), and a
//! close signal that fires when the token turns out invalid or is revoked. Transport-neutral:
//! `http` closes the socket, `graphql` re-checks per operation.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::{Cairn, ServiceError, ServiceResult};
use crate::auth::{AuthError, Principal};
use crate::events::{Event, EventKind};

/// How long a session trusts its last token check.
pub const RECHECK_AFTER: Duration = Duration::from_secs(1);

#[derive(Debug, Default)]
struct State {
    token: Option<String>,
    checked: Option<(Instant, Principal)>,
}

/// Shared by the socket task and every operation on it.
#[derive(Clone, Debug, Default)]
pub struct Session {
    state: Arc<Mutex<State>>,
    closed: CancellationToken,
}

impl Session {
    pub fn new() -> Session {
        Session::default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        match self.state.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Opens the session with a presented token (the WebSocket's `connection_init`).
    pub async fn open(&self, cairn: &Cairn, token: &str) -> ServiceResult<Principal> {
        let p = cairn.authenticate(token).await?;
        let mut s = self.state();
        s.token = Some(token.to_owned());
        s.checked = Some((Instant::now(), p.clone()));
        Ok(p)
    }

    /// The token's id, once opened.
    pub fn token_id(&self) -> Option<i64> {
        self.state().checked.as_ref().map(|(_, p)| p.token_id)
    }

    /// The session's principal as of now: the cached check when younger than
    /// [`RECHECK_AFTER`], else the token checked again. An invalid or revoked token closes the
    /// session and answers UNAUTHENTICATED.
    pub async fn principal(&self, cairn: &Cairn) -> ServiceResult<Principal> {
        if self.closed.is_cancelled() {
            return Err(AuthError::InvalidToken.into());
        }
        let token = {
            let s = self.state();
            if let Some((at, p)) = &s.checked {
                if at.elapsed() < RECHECK_AFTER {
                    return Ok(p.clone());
                }
            }
            s.token.clone()
        };
        let Some(token) = token else {
            return Err(AuthError::MissingToken.into());
        };
        match cairn.authenticate(&token).await {
            Ok(p) => {
                self.state().checked = Some((Instant::now(), p.clone()));
                Ok(p)
            }
            Err(e @ ServiceError::Auth(_)) => {
                self.close();
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// Ends the session (its transport closes it with 4401).
    pub fn close(&self) {
        self.closed.cancel();
    }

    pub fn is_closed(&self) -> bool {
        self.closed.is_cancelled()
    }

    /// Resolves once the session is closed.
    pub async fn closed(&self) {
        self.closed.cancelled().await;
    }

    /// Watches the session's token for as long as the session lives: the bus's
    /// `TokenRevoked` for it (this instance, and the others on PostgreSQL) closes it at once;
    /// an idle session also checks its token every `every` (a revocation by another process
    /// on SQLite reaches no bus). Ends when the session closes or `done` fires.
    pub async fn watch(
        &self,
        cairn: &Cairn,
        every: Duration,
        done: impl std::future::Future<Output = ()>,
    ) {
        let mut events = cairn.bus.subscribe();
        let mut bus_open = true;
        let mut recheck = tokio::time::interval(every);
        recheck.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        tokio::pin!(done);
        loop {
            tokio::select! {
                () = &mut done => return,
                () = self.closed() => return,
                ev = events.recv(), if bus_open => match ev {
                    Ok(Event { kind: EventKind::TokenRevoked(id), .. })
                        if self.token_id() == Some(id) =>
                    {
                        self.close();
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => bus_open = false,
                    _ => {}
                },
                _ = recheck.tick() => {
                    if self.token_id().is_some() {
                        // Closes the session when the token no longer authenticates.
                        let _ = self.principal(cairn).await;
                    }
                }
            }
        }
    }
}
