//! `team_models`: a team's own LLM endpoint per role; the API key is sealed.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "team_models")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub team_id: i64,
    #[sea_orm(primary_key, auto_increment = false)]
    pub role: String,
    pub url: String,
    pub model: String,
    /// `v1:` + base64(nonce ‖ ciphertext); never shown to a client.
    #[serde(skip_serializing)]
    pub api_key_sealed: Option<String>,
    #[sea_orm(column_type = "Double")]
    pub price_input: f64,
    #[sea_orm(column_type = "Double")]
    pub price_output: f64,
    pub updated_by: Option<i64>,
    pub updated_at: DateTimeUtc,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TeamModel")
            .field("team_id", &self.team_id)
            .field("role", &self.role)
            .field("url", &self.url)
            .field("model", &self.model)
            .field(
                "api_key_sealed",
                &self.api_key_sealed.as_ref().map(|_| "<sealed>"),
            )
            .finish_non_exhaustive()
    }
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
