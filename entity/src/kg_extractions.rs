//! `kg_extractions`.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "kg_extractions")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub document_id: i64,
    #[sea_orm(primary_key, auto_increment = false)]
    pub version: i32,
    pub entities: i32,
    pub relations: i32,
    pub extractor: String,
    pub extracted_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
