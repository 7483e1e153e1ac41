//! `chunks`: the columns every backend shares. The embedding (`vector(384)` on PostgreSQL,
//! an f32 blob on SQLite) is written and read by `cairn::store` with backend-specific SQL, so
//! it is not a field here; the lexical postings live in `lexical_blocks`.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "chunks")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub team_id: i64,
    pub document_id: i64,
    pub version: i32,
    pub corpus_id: i64,
    pub chunk_index: i32,
    #[sea_orm(column_type = "Text")]
    pub content: String,
    pub section: Option<String>,
    pub page: Option<i32>,
    pub metadata: Json,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
