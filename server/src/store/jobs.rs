//! The durable job queue's SQL: enqueue, claim under a lease, heartbeat, finish, cancel,
//! deliver the result once.
//!
//! Claiming is one statement on both backends. PostgreSQL picks the row with
//! `FOR UPDATE SKIP LOCKED`, so instances sharing the database never block on or double-claim
//! a job; SQLite serializes writers, so the same UPDATE … WHERE id = (SELECT …) is atomic.
//! A running job whose lease has expired (its worker crashed or was killed) is claimable
//! again. Timestamps on SQLite are compared through `julianday()` so text formats never
//! matter.

use chrono::{DateTime, Duration, Utc};
use entity::prelude::*;
use sea_orm::{
    ActiveModelTrait, ConnectionTrait, DatabaseBackend, EntityTrait, FromQueryResult, Set,
};
use serde_json::Value as Json;

use super::sql::Sql;
use super::{ByKey, Store, StoreResult};

/// A job to queue.
pub struct NewJob {
    pub team_id: i64,
    pub corpus_id: Option<i64>,
    pub kind: String,
    pub payload: Json,
    pub created_by: Option<i64>,
    pub max_attempts: i32,
}

/// How a finished attempt ended.
pub enum Finish {
    Succeeded {
        result: Json,
        /// The kind's terminal stage (`searchable`, `extracted`).
        stage: &'static str,
    },
    /// Retry after `after` (state back to queued), keeping the error for the record.
    Retry {
        error: String,
        after: Duration,
    },
    Failed {
        error: String,
    },
}

impl Store {
    pub(super) fn ts(&self, q: &mut Sql, col: &str) {
        match self.backend() {
            DatabaseBackend::Sqlite => {
                q.push("julianday(").push(col).push(")");
            }
            _ => {
                q.push(col);
            }
        }
    }

    pub(super) fn ts_bind(&self, q: &mut Sql, t: DateTime<Utc>) {
        match self.backend() {
            DatabaseBackend::Sqlite => {
                q.push("julianday(").bind(t).push(")");
            }
            _ => {
                q.bind(t);
            }
        }
    }

    pub async fn enqueue_job(&self, j: NewJob) -> StoreResult<Job> {
        let now = Utc::now();
        Ok(JobActive {
            team_id: Set(j.team_id),
            corpus_id: Set(j.corpus_id),
            kind: Set(j.kind),
            payload: Set(j.payload),
            state: Set(JobState::Queued),
            stage: Set(Some("queued".into())),
            progress: Set(serde_json::json!({})),
            attempts: Set(0),
            max_attempts: Set(j.max_attempts),
            run_after: Set(now),
            created_by: Set(j.created_by),
            created_at: Set(now),
            updated_at: Set(now),
            ..Default::default()
        }
        .insert(self.connection())
        .await?)
    }

    /// Claims the next runnable job for `owner` until `now + lease`: a queued job whose time
    /// has come, or a running one whose lease expired. Increments `attempts`.
    pub async fn claim_job(&self, owner: &str, lease: Duration) -> StoreResult<Option<Job>> {
        let now = Utc::now();
        let mut q = Sql::new(self.backend());
        q.push("UPDATE jobs SET state = 'running', lease_owner = ")
            .bind(owner.to_owned());
        q.push(", lease_until = ").bind(now + lease);
        q.push(", attempts = attempts + 1, updated_at = ").bind(now);
        q.push(" WHERE id = (SELECT id FROM jobs WHERE (state = 'queued' AND ");
        self.ts(&mut q, "run_after");
        q.push(" <= ");
        self.ts_bind(&mut q, now);
        q.push(") OR (state = 'running' AND ");
        self.ts(&mut q, "lease_until");
        q.push(" < ");
        self.ts_bind(&mut q, now);
        q.push(") ORDER BY run_after, id LIMIT 1");
        if self.backend() == DatabaseBackend::Postgres {
            q.push(" FOR UPDATE SKIP LOCKED");
        }
        q.push(") RETURNING *");
        Ok(Jobs::find()
            .from_raw_sql(q.build())
            .one(self.connection())
            .await?)
    }

    /// Extends the lease and records progress. Returns the job's state as stored, or `None`
    /// when this owner no longer holds it (another instance took it over, or it was
    /// cancelled: the caller stops).
    pub async fn heartbeat_job(
        &self,
        id: i64,
        owner: &str,
        lease: Duration,
        stage: &str,
        progress: &Json,
    ) -> StoreResult<bool> {
        let now = Utc::now();
        let mut q = Sql::new(self.backend());
        q.push("UPDATE jobs SET lease_until = ").bind(now + lease);
        q.push(", stage = ").bind(stage.to_owned());
        q.push(", progress = ").bind(progress.clone());
        q.push(", updated_at = ").bind(now);
        q.push(" WHERE id = ").bind(id);
        q.push(" AND lease_owner = ").bind(owner.to_owned());
        q.push(" AND state = 'running'");
        let r = self.connection().execute_raw(q.build()).await?;
        Ok(r.rows_affected() == 1)
    }

    /// Renews a running job's lease without touching its progress. False when the lease is
    /// no longer this owner's (cancelled or taken over).
    pub async fn renew_lease(&self, id: i64, owner: &str, lease: Duration) -> StoreResult<bool> {
        let mut q = Sql::new(self.backend());
        q.push("UPDATE jobs SET lease_until = ")
            .bind(Utc::now() + lease);
        q.push(" WHERE id = ").bind(id);
        q.push(" AND lease_owner = ").bind(owner.to_owned());
        q.push(" AND state = 'running'");
        let r = self.connection().execute_raw(q.build()).await?;
        Ok(r.rows_affected() == 1)
    }

    /// Ends an attempt held by `owner`. Returns false when the lease was lost meanwhile.
    pub async fn finish_job(&self, id: i64, owner: &str, how: Finish) -> StoreResult<bool> {
        let now = Utc::now();
        let mut q = Sql::new(self.backend());
        q.push("UPDATE jobs SET lease_owner = NULL, lease_until = NULL, updated_at = ")
            .bind(now);
        match how {
            Finish::Succeeded { result, stage } => {
                q.push(", state = 'succeeded', stage = ")
                    .bind(stage.to_owned())
                    .push(", error = NULL, result = ")
                    .bind(result);
            }
            Finish::Retry { error, after } => {
                q.push(", state = 'queued', error = ").bind(error);
                q.push(", run_after = ").bind(now + after);
            }
            Finish::Failed { error } => {
                q.push(", state = 'failed', stage = 'failed', error = ")
                    .bind(error);
            }
        }
        q.push(" WHERE id = ").bind(id);
        q.push(" AND lease_owner = ").bind(owner.to_owned());
        q.push(" AND state = 'running'");
        let r = self.connection().execute_raw(q.build()).await?;
        Ok(r.rows_affected() == 1)
    }

    /// Cancels a queued or running job of the team. Returns the job as it now is, `None` when
    /// it does not exist in that team.
    pub async fn cancel_job(&self, team_id: i64, id: i64) -> StoreResult<Option<Job>> {
        let now = Utc::now();
        let mut q = Sql::new(self.backend());
        q.push("UPDATE jobs SET state = 'cancelled', stage = 'cancelled', lease_owner = NULL, lease_until = NULL, updated_at = ")
            .bind(now);
        q.push(" WHERE id = ").bind(id);
        q.push(" AND team_id = ").bind(team_id);
        q.push(" AND state IN ('queued', 'running')");
        self.connection().execute_raw(q.build()).await?;
        self.team_job(team_id, id).await
    }

    pub async fn team_job(&self, team_id: i64, id: i64) -> StoreResult<Option<Job>> {
        use sea_orm::{ColumnTrait, QueryFilter};
        Ok(Jobs::find_by_id(id)
            .filter(JobColumn::TeamId.eq(team_id))
            .unique(self.connection())
            .await?)
    }

    pub async fn job(&self, id: i64) -> StoreResult<Option<Job>> {
        Ok(Jobs::find_by_id(id).unique(self.connection()).await?)
    }

    /// The jobs among `ids` that exist, in no particular order: one statement per 500 ids
    /// (what `cairn ingest` polls for every file it queued).
    pub async fn jobs(&self, ids: &[i64]) -> StoreResult<Vec<Job>> {
        use sea_orm::{ColumnTrait, QueryFilter};
        let mut out = Vec::with_capacity(ids.len());
        for part in ids.chunks(500) {
            out.extend(
                Jobs::find()
                    .filter(JobColumn::Id.is_in(part.iter().copied()))
                    .all(self.connection())
                    .await?,
            );
        }
        Ok(out)
    }

    /// Marks a succeeded job's result delivered. True exactly once per job: the caller that
    /// gets true hands the result out; every later caller gets the state only.
    pub async fn take_job_result(&self, id: i64) -> StoreResult<bool> {
        let mut q = Sql::new(self.backend());
        q.push("UPDATE jobs SET result_delivered_at = ")
            .bind(Utc::now());
        q.push(" WHERE id = ").bind(id);
        q.push(" AND state = 'succeeded' AND result_delivered_at IS NULL");
        let r = self.connection().execute_raw(q.build()).await?;
        Ok(r.rows_affected() == 1)
    }

    /// The team's jobs changed at or after `since`, oldest change first (at most `limit`):
    /// what a subscription polls where the event bus does not cross processes (SQLite).
    pub async fn team_jobs_changed_since(
        &self,
        team_id: i64,
        since: DateTime<Utc>,
        limit: u64,
    ) -> StoreResult<Vec<Job>> {
        use sea_orm::{ColumnTrait, QueryFilter, QueryOrder, QuerySelect};
        Ok(Jobs::find()
            .filter(JobColumn::TeamId.eq(team_id))
            .filter(JobColumn::UpdatedAt.gte(since))
            .order_by_asc(JobColumn::UpdatedAt)
            .limit(limit)
            .all(self.connection())
            .await?)
    }

    /// Whether a queued or running job other than `except` carries this content hash (its
    /// blob file must then stay).
    pub async fn blob_pending_elsewhere(
        &self,
        content_hash: &str,
        except: i64,
    ) -> StoreResult<bool> {
        blob_pending(self.connection(), content_hash, Some(except)).await
    }
}

/// How many queued or running jobs carry a content hash.
#[derive(Debug, FromQueryResult)]
struct PendingJobs {
    pending: i64,
}

/// Whether a queued or running job (other than `except`) carries this content hash.
pub(crate) async fn blob_pending(
    conn: &impl ConnectionTrait,
    content_hash: &str,
    except: Option<i64>,
) -> StoreResult<bool> {
    let backend = conn.get_database_backend();
    let mut q = Sql::new(backend);
    q.push("SELECT COUNT(*) AS pending FROM jobs WHERE state IN ('queued', 'running')");
    if let Some(except) = except {
        q.push(" AND id <> ").bind(except);
    }
    match backend {
        DatabaseBackend::Postgres => q.push(" AND payload->>'content_hash' = "),
        _ => q.push(" AND json_extract(payload, '$.content_hash') = "),
    };
    q.bind(content_hash.to_owned());
    let n: i64 = PendingJobs::find_by_statement(q.build())
        .one(conn)
        .await?
        .map_or(0, |r| r.pending);
    Ok(n > 0)
}
