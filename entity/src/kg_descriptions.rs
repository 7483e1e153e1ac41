//! `kg_descriptions`: what one document version says an entity is (its description, possibly
//! none) and the anchor embedding built from it. A reader sees the longest description among
//! the documents it can read. The embedding column is backend-specific and handled by
//! `cairn::store`.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "kg_descriptions")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub team_id: i64,
    pub entity_id: i64,
    pub document_id: i64,
    pub version: i32,
    #[sea_orm(column_type = "Text")]
    pub description: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
