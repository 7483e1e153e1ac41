//! The append-only records: `usage` (tokens and cost of embedding and LLM calls, per team and
//! job) and `audit` (who did what to which target).

use chrono::Utc;
use entity::prelude::*;
use sea_orm::{ActiveModelTrait, ConnectionTrait, Set};
#[cfg(any(test, feature = "testing"))]
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};

use super::{Store, StoreResult};
use crate::domain::models::ModelRole;

/// One `usage` row: what a call cost and whom.
#[derive(Clone, Copy, Debug)]
pub struct NewUsage<'a> {
    pub team_id: i64,
    /// `embed` or `llm`.
    pub kind: &'a str,
    /// The LLM role the call was made for (`None` for embeddings).
    pub role: Option<ModelRole>,
    pub model: &'a str,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost_usd: f64,
    pub job_id: Option<i64>,
}

impl NewUsage<'_> {
    /// Token counts as the column's type (saturating).
    pub fn tokens(n: u64) -> i64 {
        i64::try_from(n).unwrap_or(i64::MAX)
    }
}

impl Store {
    // ---- usage ----------------------------------------------------------------------------

    pub async fn insert_usage(&self, u: NewUsage<'_>) -> StoreResult<()> {
        UsageActive {
            team_id: Set(u.team_id),
            kind: Set(u.kind.to_owned()),
            role: Set(u.role.map(|r| r.as_str().to_owned())),
            model: Set(u.model.to_owned()),
            input_tokens: Set(u.input_tokens),
            output_tokens: Set(u.output_tokens),
            cost_usd: Set(u.cost_usd),
            job_id: Set(u.job_id),
            at: Set(Utc::now()),
            ..Default::default()
        }
        .insert(&self.db)
        .await?;
        Ok(())
    }

    /// Usage rows of a job (tests).
    #[cfg(any(test, feature = "testing"))]
    pub async fn job_usage(&self, job_id: i64) -> StoreResult<Vec<Usage>> {
        Ok(UsageRows::find()
            .filter(UsageColumn::JobId.eq(job_id))
            .all(&self.db)
            .await?)
    }

    /// A team's usage rows of one kind (`embed` or `llm`), oldest first (tests).
    #[cfg(any(test, feature = "testing"))]
    pub async fn team_usage(&self, team_id: i64, kind: &str) -> StoreResult<Vec<Usage>> {
        Ok(UsageRows::find()
            .filter(UsageColumn::TeamId.eq(team_id))
            .filter(UsageColumn::Kind.eq(kind))
            .order_by_asc(UsageColumn::Id)
            .all(&self.db)
            .await?)
    }

    // ---- audit -----------------------------------------------------------------------------

    /// Every audit row, oldest first (tests).
    #[cfg(any(test, feature = "testing"))]
    pub async fn audit_rows(&self) -> StoreResult<Vec<Audit>> {
        Ok(AuditRows::find()
            .order_by_asc(AuditColumn::Id)
            .all(&self.db)
            .await?)
    }

    pub async fn audit(
        &self,
        team_id: Option<i64>,
        user_id: Option<i64>,
        action: &str,
        target: Option<&str>,
    ) -> StoreResult<()> {
        audit(&self.db, team_id, user_id, action, target).await
    }
}

/// Writes an audit row through `db` (the pool, or the caller's transaction).
pub(super) async fn audit<C: ConnectionTrait>(
    db: &C,
    team_id: Option<i64>,
    user_id: Option<i64>,
    action: &str,
    target: Option<&str>,
) -> StoreResult<()> {
    AuditActive {
        team_id: Set(team_id),
        user_id: Set(user_id),
        action: Set(action.to_owned()),
        target: Set(target.map(str::to_owned)),
        at: Set(Utc::now()),
        ..Default::default()
    }
    .insert(db)
    .await?;
    Ok(())
}
