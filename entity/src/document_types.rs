//! `document_types`: a team's taxonomy of document types.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "document_types")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub team_id: i64,
    pub name: String,
    pub description: String,
    /// The JSON Schema subset of `cairn_docproc::taxonomy`, or none.
    pub schema: Option<Json>,
    /// `starter`, `admin` or `suggested` (added by processDocument).
    pub origin: String,
    pub created_by: Option<i64>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
