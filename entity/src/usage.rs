//! `usage`.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "usage")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub team_id: i64,
    pub kind: String,
    pub model: String,
    pub input_tokens: i64,
    pub output_tokens: i64,
    #[sea_orm(column_type = "Double")]
    pub cost_usd: f64,
    pub job_id: Option<i64>,
    /// `chat` or `utility` for an `llm` row (NULL for embeddings).
    pub role: Option<String>,
    pub at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
