//! `document_classifications`: the type of one document version.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "document_classifications")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub document_id: i64,
    #[sea_orm(primary_key, auto_increment = false)]
    pub version: i32,
    pub team_id: i64,
    pub type_name: String,
    #[sea_orm(column_type = "Double")]
    pub confidence: f64,
    pub reason: String,
    /// `llm` or `zero_shot`.
    pub method: String,
    pub model: String,
    pub created_by: Option<i64>,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
