//! GraphQL object types. Thin wrappers over entity rows; relation fields go through the
//! per-request dataloaders.

use async_graphql::{ComplexObject, Context, Enum, Json, Object, SimpleObject, ID};
use chrono::{DateTime, Utc};
use entity::prelude::{Classification, ProcessingResult};

use super::error::api;
use super::loaders::load;
use super::{loaders_of, principal_of};
use crate::service::{self, ServiceError};

#[derive(Enum, Clone, Copy, PartialEq, Eq, Debug)]
#[graphql(name = "Role", remote = "crate::domain::Role")]
pub enum GqlRole {
    Owner,
    Admin,
    Member,
    Viewer,
}

/// A team.
#[derive(SimpleObject)]
#[graphql(name = "Team")]
pub struct GqlTeam {
    pub id: ID,
    pub name: String,
    pub created_at: DateTime<Utc>,
    /// Uploads are hashed with the team's own key: its files are never shared with another
    /// team (`setContentIsolation`).
    pub isolate_content: bool,
    /// processDocument may add the types it suggests to the taxonomy
    /// (`setTaxonomyExtension`).
    pub extend_taxonomy: bool,
}

impl From<entity::prelude::Team> for GqlTeam {
    fn from(t: entity::prelude::Team) -> Self {
        GqlTeam {
            id: ID(t.id.to_string()),
            name: t.name,
            created_at: t.created_at,
            isolate_content: t.isolate_content,
            extend_taxonomy: t.extend_taxonomy,
        }
    }
}

/// A user of a team.
#[derive(SimpleObject)]
#[graphql(name = "User", complex)]
pub struct GqlUser {
    pub id: ID,
    pub name: String,
    pub role: GqlRole,
    pub created_at: DateTime<Utc>,
    #[graphql(skip)]
    pub team_id: i64,
}

#[ComplexObject]
impl GqlUser {
    async fn team(&self, ctx: &Context<'_>) -> async_graphql::Result<GqlTeam> {
        load(&loaders_of(ctx)?.teams, self.team_id)
            .await?
            .map(GqlTeam::from)
            .ok_or_else(|| api(ServiceError::Internal("user without team".into())))
    }
}

impl TryFrom<entity::prelude::User> for GqlUser {
    type Error = async_graphql::Error;
    fn try_from(u: entity::prelude::User) -> Result<Self, Self::Error> {
        let role = service::role_of(&u).map_err(api)?;
        Ok(GqlUser {
            id: ID(u.id.to_string()),
            name: u.name,
            role: role.into(),
            created_at: u.created_at,
            team_id: u.team_id,
        })
    }
}

/// The authenticated caller.
pub struct Me;

#[Object(name = "Principal")]
impl Me {
    async fn user(&self, ctx: &Context<'_>) -> async_graphql::Result<GqlUser> {
        let p = principal_of(ctx)?;
        load(&loaders_of(ctx)?.users, p.user_id)
            .await?
            .ok_or_else(|| api(ServiceError::Internal("principal without user".into())))?
            .try_into()
    }

    async fn team(&self, ctx: &Context<'_>) -> async_graphql::Result<GqlTeam> {
        let p = principal_of(ctx)?;
        load(&loaders_of(ctx)?.teams, p.team_id)
            .await?
            .map(GqlTeam::from)
            .ok_or_else(|| api(ServiceError::Internal("principal without team".into())))
    }

    /// The capabilities of the caller's role (`corpus.create`, `search`, …).
    async fn capabilities(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<String>> {
        let p = principal_of(ctx)?;
        Ok(p.role
            .capabilities()
            .map(|c| c.as_str().to_owned())
            .collect())
    }
}

/// An API token as listed (never its secret).
#[derive(SimpleObject)]
#[graphql(name = "ApiToken")]
pub struct GqlApiToken {
    pub id: ID,
    pub label: Option<String>,
    pub created_at: DateTime<Utc>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
}

impl From<entity::prelude::ApiToken> for GqlApiToken {
    fn from(t: entity::prelude::ApiToken) -> Self {
        GqlApiToken {
            id: ID(t.id.to_string()),
            label: t.label,
            created_at: t.created_at,
            last_used_at: t.last_used_at,
            revoked_at: t.revoked_at,
        }
    }
}

/// A freshly created token: `token` is the secret, shown this once.
#[derive(SimpleObject)]
pub struct NewToken {
    pub token: String,
    pub api_token: GqlApiToken,
    pub user: GqlUser,
}

#[derive(Enum, Clone, Copy, PartialEq, Eq, Debug)]
#[graphql(name = "ClassificationMethod")]
pub enum GqlClassificationMethod {
    /// The team's `utility` model (strict reply, validated).
    Llm,
    /// The embedder: the document against each type's description.
    ZeroShot,
}

fn method(m: &str) -> GqlClassificationMethod {
    if m == "llm" {
        GqlClassificationMethod::Llm
    } else {
        GqlClassificationMethod::ZeroShot
    }
}

/// A document version's type.
#[derive(SimpleObject)]
#[graphql(name = "Classification")]
pub struct GqlClassification {
    /// A name of the taxonomy (as it was when classified).
    #[graphql(name = "type")]
    pub doc_type: String,
    /// 0 to 1: the model's own, or the zero-shot softmax probability.
    pub confidence: f64,
    pub reason: String,
    pub method: GqlClassificationMethod,
    pub model: String,
    pub version: i32,
    pub created_at: DateTime<Utc>,
}

impl From<Classification> for GqlClassification {
    fn from(c: Classification) -> Self {
        GqlClassification {
            doc_type: c.type_name,
            confidence: c.confidence,
            reason: c.reason,
            method: method(&c.method),
            model: c.model,
            version: c.version,
            created_at: c.created_at,
        }
    }
}

/// What `processDocument` found for a document version.
#[derive(SimpleObject)]
#[graphql(name = "ProcessingResult")]
pub struct GqlProcessingResult {
    pub id: ID,
    pub version: i32,
    #[graphql(name = "type")]
    pub doc_type: String,
    pub confidence: f64,
    pub method: GqlClassificationMethod,
    /// The taxonomy gained this type.
    pub extended_taxonomy: bool,
    /// The model wrote the schema used.
    pub schema_generated: bool,
    /// The schema the values were extracted with (null for tables).
    pub schema: Option<Json<serde_json::Value>>,
    /// `{classification, type, suggestedType, extraction}`.
    pub result: Json<serde_json::Value>,
    /// The schema of `result`, measured from it.
    pub measured_schema: Json<serde_json::Value>,
    pub job_id: Option<ID>,
    pub created_at: DateTime<Utc>,
}

impl From<ProcessingResult> for GqlProcessingResult {
    fn from(r: ProcessingResult) -> Self {
        GqlProcessingResult {
            id: ID(r.id.to_string()),
            version: r.version,
            doc_type: r.type_name,
            confidence: r.confidence,
            method: method(&r.method),
            extended_taxonomy: r.extended_taxonomy,
            schema_generated: r.schema_generated,
            schema: r.schema.map(Json),
            result: Json(r.result),
            measured_schema: Json(r.measured_schema),
            job_id: r.job_id.map(|j| ID(j.to_string())),
            created_at: r.created_at,
        }
    }
}
