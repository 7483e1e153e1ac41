//! Model roles per team (seed 001, KG-7): an admin points the team's `chat` or `utility` role
//! at its own OpenAI-compatible endpoint. The key is write-only: sealed before it is stored
//! (`crate::roles::secret`), never in a reply, an audit row or a log line.

use chrono::{DateTime, Utc};

use super::{Cairn, ServiceResult};
use crate::auth::Principal;
use crate::domain::models::{clean_key, EndpointSetting, ModelRole};
use crate::domain::Capability;
use crate::store::NewTeamModel;

/// Where a role's calls go for the caller's team.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelSource {
    /// The team's own setting.
    Team,
    /// The instance's configuration (`CAIRN_LLM_*`).
    Instance,
    /// Nowhere: answers are extractive; extraction uses the instance's extractor.
    None,
}

/// One role as an admin sees it. The instance's endpoint URL is the operator's and is not
/// shown; the team's key never is (only whether one is set).
#[derive(Clone, Debug)]
pub struct TeamModelView {
    pub role: ModelRole,
    pub source: ModelSource,
    /// The team's endpoint (`None` unless `source` is `Team`).
    pub url: Option<String>,
    /// The model the role's calls name (`None` when `source` is `None`).
    pub model: Option<String>,
    pub has_api_key: bool,
    pub price_input: f64,
    pub price_output: f64,
    pub updated_at: Option<DateTime<Utc>>,
}

/// What an admin sends for one role.
#[derive(Clone)]
pub struct TeamModelInput {
    pub url: String,
    pub model: String,
    /// `Some(key)`: this key (`""`: no key). `None`: keep the stored key when the URL is
    /// unchanged; a new URL drops it, so a key never follows the setting to another host.
    pub api_key: Option<String>,
    pub price_input: f64,
    pub price_output: f64,
}

impl std::fmt::Debug for TeamModelInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TeamModelInput")
            .field("url", &self.url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

impl Cairn {
    /// Both roles of the caller's team, with where each resolves now (admins).
    pub async fn team_models(&self, p: &Principal) -> ServiceResult<Vec<TeamModelView>> {
        p.require(Capability::Admin)?;
        let rows = self.store.team_models(p.team_id).await?;
        Ok(ModelRole::ALL
            .into_iter()
            .map(|role| match rows.iter().find(|r| r.role == role.as_str()) {
                Some(r) => team_view(role, r),
                None => self.instance_view(role),
            })
            .collect())
    }

    /// Sets the team's endpoint for `role` (admins); the next call of that role uses it.
    pub async fn set_team_model(
        &self,
        p: &Principal,
        role: ModelRole,
        input: TeamModelInput,
    ) -> ServiceResult<TeamModelView> {
        p.require(Capability::Admin)?;
        let setting = EndpointSetting::new(
            &input.url,
            &input.model,
            input.price_input,
            input.price_output,
        )?;
        let sealed_key = match input.api_key.as_deref() {
            Some(raw) => match clean_key(raw)? {
                Some(key) => Some(self.roles.seal(p.team_id, role, &key)?),
                None => None,
            },
            None => self
                .store
                .team_model(p.team_id, role)
                .await?
                .filter(|old| old.url == setting.url)
                .and_then(|old| old.api_key_sealed),
        };
        let row = self
            .store
            .put_team_model(NewTeamModel {
                team_id: p.team_id,
                role,
                setting: &setting,
                sealed_key,
                updated_by: p.user_id,
            })
            .await?;
        self.store
            .audit(
                Some(p.team_id),
                Some(p.user_id),
                "team_model.set",
                Some(role.as_str()),
            )
            .await?;
        Ok(team_view(role, &row))
    }

    /// Removes the team's endpoint for `role` (admins): its calls go to the instance's
    /// endpoint again. Whether the team had one.
    pub async fn clear_team_model(&self, p: &Principal, role: ModelRole) -> ServiceResult<bool> {
        p.require(Capability::Admin)?;
        let had = self.store.delete_team_model(p.team_id, role).await?;
        if had {
            self.store
                .audit(
                    Some(p.team_id),
                    Some(p.user_id),
                    "team_model.clear",
                    Some(role.as_str()),
                )
                .await?;
        }
        Ok(had)
    }

    fn instance_view(&self, role: ModelRole) -> TeamModelView {
        let client = self.roles.instance(role);
        TeamModelView {
            role,
            source: if client.is_some() {
                ModelSource::Instance
            } else {
                ModelSource::None
            },
            url: None,
            model: client.map(|c| c.model().to_owned()),
            has_api_key: false,
            price_input: 0.0,
            price_output: 0.0,
            updated_at: None,
        }
    }
}

fn team_view(role: ModelRole, r: &entity::prelude::TeamModel) -> TeamModelView {
    TeamModelView {
        role,
        source: ModelSource::Team,
        url: Some(r.url.clone()),
        model: Some(r.model.clone()),
        has_api_key: r.api_key_sealed.is_some(),
        price_input: r.price_input,
        price_output: r.price_output,
        updated_at: Some(r.updated_at),
    }
}
