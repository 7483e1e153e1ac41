//! `kg_mentions`.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "kg_mentions")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub team_id: i64,
    pub entity_id: Option<i64>,
    pub relation_id: Option<i64>,
    pub document_id: i64,
    pub version: i32,
    #[sea_orm(column_type = "Text")]
    pub snippet: String,
    pub char_start: Option<i32>,
    pub extracted_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
