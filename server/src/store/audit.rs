//! The append-only records: `usage` (tokens and cost of embedding and LLM calls, per team and
//! job) and `audit` (who did what to which target).

use chrono::Utc;
use entity::prelude::*;
use sea_orm::{ActiveModelTrait, ConnectionTrait, Set};
#[cfg(any(test, feature = "testing"))]
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};

use super::{Store, StoreResult};

impl Store {
    // ---- usage ----------------------------------------------------------------------------

    #[allow(clippy::too_many_arguments)]
    pub async fn insert_usage(
        &self,
        team_id: i64,
        kind: &str,
        model: &str,
        input_tokens: i64,
        output_tokens: i64,
        cost_usd: f64,
        job_id: Option<i64>,
    ) -> StoreResult<()> {
        UsageActive {
            team_id: Set(team_id),
            kind: Set(kind.to_owned()),
            model: Set(model.to_owned()),
            input_tokens: Set(input_tokens),
            output_tokens: Set(output_tokens),
            cost_usd: Set(cost_usd),
            job_id: Set(job_id),
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
