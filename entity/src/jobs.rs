//! `jobs`. The state column is typed ([`JobState`]): a value outside the five is an error
//! when the row is read, never a string compared somewhere.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

/// Where a job is in its life. Stored as lowercase text (the database checks the vocabulary).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, EnumIter, DeriveActiveEnum, Serialize, Deserialize,
)]
#[sea_orm(rs_type = "String", db_type = "Text")]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    #[sea_orm(string_value = "queued")]
    Queued,
    #[sea_orm(string_value = "running")]
    Running,
    #[sea_orm(string_value = "succeeded")]
    Succeeded,
    #[sea_orm(string_value = "failed")]
    Failed,
    #[sea_orm(string_value = "cancelled")]
    Cancelled,
}

impl JobState {
    /// Succeeded, failed or cancelled: nothing more will happen.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobState::Succeeded | JobState::Failed | JobState::Cancelled
        )
    }

    /// The stored (and event) spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Succeeded => "succeeded",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }
}

#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "jobs")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub team_id: i64,
    pub corpus_id: Option<i64>,
    pub kind: String,
    pub payload: Json,
    pub state: JobState,
    pub stage: Option<String>,
    pub progress: Json,
    pub attempts: i32,
    pub max_attempts: i32,
    pub run_after: DateTimeUtc,
    #[sea_orm(column_type = "Text")]
    pub error: Option<String>,
    pub result: Option<Json>,
    pub result_delivered_at: Option<DateTimeUtc>,
    pub lease_owner: Option<String>,
    pub lease_until: Option<DateTimeUtc>,
    pub created_by: Option<i64>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
