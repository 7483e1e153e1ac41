//! `content_blobs`.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "content_blobs")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub content_hash: String,
    pub mime_type: String,
    pub size: i64,
    pub storage_uri: String,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
