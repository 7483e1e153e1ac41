//! `teams`.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "teams")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub name: String,
    pub created_at: DateTimeUtc,
    /// Uploads are hashed with an HMAC keyed for this team: its blobs are never shared.
    pub isolate_content: bool,
    /// The starter document types were written once.
    pub taxonomy_seeded: bool,
    /// processDocument may add the type it suggests to the taxonomy.
    pub extend_taxonomy: bool,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
