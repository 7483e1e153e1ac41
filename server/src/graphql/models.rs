//! Model roles per team: `teamModels`, `setTeamModel`, `clearTeamModel` (admins). The API
//! key is an input only; no type here has a field that could return it.

use async_graphql::{Context, Enum, InputObject, Object, SimpleObject};
use chrono::{DateTime, Utc};

use super::error::api;
use super::{cairn_of, principal_of};
use crate::service::{TeamModelInput, TeamModelView};

#[derive(Enum, Clone, Copy, PartialEq, Eq, Debug)]
#[graphql(name = "ModelRole", remote = "crate::domain::models::ModelRole")]
pub enum GqlModelRole {
    /// Answers (`answer`, the MCP `search_documents` synthesis).
    Chat,
    /// Knowledge extraction (`extractKnowledge`).
    Utility,
}

#[derive(Enum, Clone, Copy, PartialEq, Eq, Debug)]
#[graphql(name = "ModelSource", remote = "crate::service::ModelSource")]
pub enum GqlModelSource {
    /// The team's own endpoint.
    Team,
    /// The instance's configuration.
    Instance,
    /// No endpoint: answers are extractive, extraction uses the instance's extractor.
    None,
}

/// Where one LLM role's calls go for the caller's team. The API key is never returned.
#[derive(SimpleObject)]
#[graphql(name = "TeamModel")]
pub struct GqlTeamModel {
    pub role: GqlModelRole,
    pub source: GqlModelSource,
    /// The team's endpoint (null unless `source` is `TEAM`).
    pub url: Option<String>,
    /// The model the role's calls name (null when `source` is `NONE`).
    pub model: Option<String>,
    /// Whether the team's setting holds an API key (the key itself is write-only).
    pub has_api_key: bool,
    /// USD per million input tokens, for `usage` rows.
    pub price_input: f64,
    /// USD per million output tokens.
    pub price_output: f64,
    pub updated_at: Option<DateTime<Utc>>,
}

impl From<TeamModelView> for GqlTeamModel {
    fn from(v: TeamModelView) -> Self {
        GqlTeamModel {
            role: v.role.into(),
            source: v.source.into(),
            url: v.url,
            model: v.model,
            has_api_key: v.has_api_key,
            price_input: v.price_input,
            price_output: v.price_output,
            updated_at: v.updated_at,
        }
    }
}

/// A team's endpoint for one role: an OpenAI-compatible API.
#[derive(InputObject)]
#[graphql(name = "TeamModelInput")]
pub struct GqlTeamModelInput {
    /// Everything before `/chat/completions`, e.g. `https://api.openai.com/v1`.
    pub url: String,
    pub model: String,
    /// The bearer key (`""`: none). Omitted: the stored key is kept when `url` is unchanged,
    /// and dropped when it changes, so a key never follows the setting to another host.
    pub api_key: Option<String>,
    /// USD per million input tokens.
    #[graphql(default)]
    pub price_input: f64,
    /// USD per million output tokens.
    #[graphql(default)]
    pub price_output: f64,
}

#[derive(Default)]
pub struct ModelQuery;

#[Object]
impl ModelQuery {
    /// Both LLM roles of the caller's team and where each resolves now: the team's own
    /// endpoint, else the instance's (needs `admin`).
    async fn team_models(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<GqlTeamModel>> {
        let p = principal_of(ctx)?;
        let views = cairn_of(ctx)?.team_models(p).await.map_err(api)?;
        Ok(views.into_iter().map(GqlTeamModel::from).collect())
    }
}

#[derive(Default)]
pub struct ModelMutation;

#[Object]
impl ModelMutation {
    /// Points one of the team's LLM roles at its own endpoint (needs `admin`); the next call
    /// of that role uses it.
    async fn set_team_model(
        &self,
        ctx: &Context<'_>,
        role: GqlModelRole,
        input: GqlTeamModelInput,
    ) -> async_graphql::Result<GqlTeamModel> {
        let p = principal_of(ctx)?;
        let view = cairn_of(ctx)?
            .set_team_model(
                p,
                role.into(),
                TeamModelInput {
                    url: input.url,
                    model: input.model,
                    api_key: input.api_key,
                    price_input: input.price_input,
                    price_output: input.price_output,
                },
            )
            .await
            .map_err(api)?;
        Ok(view.into())
    }

    /// Removes the team's own endpoint for a role (needs `admin`): its calls go to the
    /// instance's endpoint again. Whether the team had one.
    async fn clear_team_model(
        &self,
        ctx: &Context<'_>,
        role: GqlModelRole,
    ) -> async_graphql::Result<bool> {
        let p = principal_of(ctx)?;
        cairn_of(ctx)?
            .clear_team_model(p, role.into())
            .await
            .map_err(api)
    }
}
