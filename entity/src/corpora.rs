//! `corpora`.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "corpora")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub team_id: Option<i64>,
    pub name: String,
    #[sea_orm(column_type = "Text")]
    pub description: Option<String>,
    pub system: bool,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
