//! `team_models`: a team's own LLM endpoint per role. The key arrives sealed (`crate::roles`
//! seals and opens it); this file only keeps rows.

use chrono::Utc;
use entity::prelude::*;
use sea_orm::sea_query::OnConflict;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder, Set};

use super::{ByKey, Store, StoreResult};
use crate::domain::models::{EndpointSetting, ModelRole};

/// A team's endpoint for one role, ready to write.
pub struct NewTeamModel<'a> {
    pub team_id: i64,
    pub role: ModelRole,
    pub setting: &'a EndpointSetting,
    /// The sealed key, or `None` for no key.
    pub sealed_key: Option<String>,
    pub updated_by: i64,
}

impl Store {
    /// The team's own endpoint for `role`, if it set one.
    pub async fn team_model(
        &self,
        team_id: i64,
        role: ModelRole,
    ) -> StoreResult<Option<TeamModel>> {
        Ok(TeamModels::find_by_id((team_id, role.as_str().to_owned()))
            .unique(&self.db)
            .await?)
    }

    /// Every endpoint the team set, by role.
    pub async fn team_models(&self, team_id: i64) -> StoreResult<Vec<TeamModel>> {
        Ok(TeamModels::find()
            .filter(TeamModelColumn::TeamId.eq(team_id))
            .order_by_asc(TeamModelColumn::Role)
            .all(&self.db)
            .await?)
    }

    /// Writes the team's endpoint for a role (replacing the one it had) and returns the row.
    pub async fn put_team_model(&self, m: NewTeamModel<'_>) -> StoreResult<TeamModel> {
        let row = TeamModelActive {
            team_id: Set(m.team_id),
            role: Set(m.role.as_str().to_owned()),
            url: Set(m.setting.url.clone()),
            model: Set(m.setting.model.clone()),
            api_key_sealed: Set(m.sealed_key),
            price_input: Set(m.setting.price_input),
            price_output: Set(m.setting.price_output),
            updated_by: Set(Some(m.updated_by)),
            updated_at: Set(Utc::now()),
        };
        TeamModels::insert(row)
            .on_conflict(
                OnConflict::columns([TeamModelColumn::TeamId, TeamModelColumn::Role])
                    .update_columns([
                        TeamModelColumn::Url,
                        TeamModelColumn::Model,
                        TeamModelColumn::ApiKeySealed,
                        TeamModelColumn::PriceInput,
                        TeamModelColumn::PriceOutput,
                        TeamModelColumn::UpdatedBy,
                        TeamModelColumn::UpdatedAt,
                    ])
                    .to_owned(),
            )
            .exec_without_returning(&self.db)
            .await?;
        self.team_model(m.team_id, m.role)
            .await?
            .ok_or_else(|| super::StoreError::Corrupt("team model not written".into()))
    }

    /// Removes the team's endpoint for a role; whether it had one.
    pub async fn delete_team_model(&self, team_id: i64, role: ModelRole) -> StoreResult<bool> {
        let r = TeamModels::delete_many()
            .filter(TeamModelColumn::TeamId.eq(team_id))
            .filter(TeamModelColumn::Role.eq(role.as_str()))
            .exec(&self.db)
            .await?;
        Ok(r.rows_affected > 0)
    }
}
