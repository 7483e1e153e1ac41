//! `processing_results`: what processDocument found for one document version.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "processing_results")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub document_id: i64,
    pub version: i32,
    pub team_id: i64,
    pub job_id: Option<i64>,
    pub type_name: String,
    #[sea_orm(column_type = "Double")]
    pub confidence: f64,
    pub method: String,
    pub extended_taxonomy: bool,
    pub schema_generated: bool,
    pub schema: Option<Json>,
    pub result: Json,
    pub measured_schema: Json,
    pub created_by: Option<i64>,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
