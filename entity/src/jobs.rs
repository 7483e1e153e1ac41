//! `jobs`.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "jobs")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub team_id: i64,
    pub corpus_id: Option<i64>,
    pub kind: String,
    pub payload: Json,
    pub state: String,
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
