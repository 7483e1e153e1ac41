//! GraphQL object types. Thin wrappers over entity rows; relation fields go through the
//! per-request dataloaders.

use async_graphql::{ComplexObject, Context, Enum, Object, SimpleObject, ID};
use chrono::{DateTime, Utc};

use super::error::{coded, ApiError, INTERNAL};
use super::{loaders_of, principal_of};
use crate::domain;

#[derive(Enum, Clone, Copy, PartialEq, Eq, Debug)]
#[graphql(name = "Role")]
pub enum GqlRole {
    Owner,
    Admin,
    Member,
    Viewer,
}

impl From<domain::Role> for GqlRole {
    fn from(r: domain::Role) -> Self {
        match r {
            domain::Role::Owner => GqlRole::Owner,
            domain::Role::Admin => GqlRole::Admin,
            domain::Role::Member => GqlRole::Member,
            domain::Role::Viewer => GqlRole::Viewer,
        }
    }
}

impl From<GqlRole> for domain::Role {
    fn from(r: GqlRole) -> Self {
        match r {
            GqlRole::Owner => domain::Role::Owner,
            GqlRole::Admin => domain::Role::Admin,
            GqlRole::Member => domain::Role::Member,
            GqlRole::Viewer => domain::Role::Viewer,
        }
    }
}

fn internal(e: impl std::fmt::Display) -> async_graphql::Error {
    tracing::error!(error = %e, "internal error in a resolver");
    coded(INTERNAL, "internal error")
}

/// A team.
#[derive(SimpleObject)]
#[graphql(name = "Team")]
pub struct GqlTeam {
    pub id: ID,
    pub name: String,
    pub created_at: DateTime<Utc>,
}

impl From<entity::prelude::Team> for GqlTeam {
    fn from(t: entity::prelude::Team) -> Self {
        GqlTeam {
            id: ID(t.id.to_string()),
            name: t.name,
            created_at: t.created_at,
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
        let loaders = loaders_of(ctx)?;
        loaders
            .teams
            .load_one(self.team_id)
            .await
            .map_err(|e| internal(&*e))?
            .map(GqlTeam::from)
            .ok_or_else(|| internal("user without team"))
    }
}

impl TryFrom<entity::prelude::User> for GqlUser {
    type Error = async_graphql::Error;
    fn try_from(u: entity::prelude::User) -> Result<Self, Self::Error> {
        let role = crate::store::role_of(&u).map_err(internal)?;
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
        let loaders = loaders_of(ctx)?;
        loaders
            .users
            .load_one(p.user_id)
            .await
            .map_err(|e| internal(&*e))?
            .ok_or_else(|| internal("principal without user"))?
            .try_into()
    }

    async fn team(&self, ctx: &Context<'_>) -> async_graphql::Result<GqlTeam> {
        let p = principal_of(ctx)?;
        let loaders = loaders_of(ctx)?;
        loaders
            .teams
            .load_one(p.team_id)
            .await
            .map_err(|e| internal(&*e))?
            .map(GqlTeam::from)
            .ok_or_else(|| internal("principal without team"))
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

/// A named collection of documents. System corpora are readable by every team.
#[derive(SimpleObject)]
#[graphql(name = "Corpus", complex)]
pub struct GqlCorpus {
    pub id: ID,
    pub name: String,
    pub description: Option<String>,
    pub system: bool,
    pub created_at: DateTime<Utc>,
    #[graphql(skip)]
    pub raw_id: i64,
}

impl From<entity::prelude::Corpus> for GqlCorpus {
    fn from(c: entity::prelude::Corpus) -> Self {
        GqlCorpus {
            id: ID(c.id.to_string()),
            raw_id: c.id,
            name: c.name,
            description: c.description,
            system: c.system,
            created_at: c.created_at,
        }
    }
}

#[ComplexObject]
impl GqlCorpus {
    /// Documents in this corpus that the caller may read.
    async fn document_count(&self, ctx: &Context<'_>) -> async_graphql::Result<i64> {
        let loaders = loaders_of(ctx)?;
        let counts = loaders
            .corpus_counts
            .load_one(self.raw_id)
            .await
            .map_err(|e| internal(&*e))?;
        Ok(counts.unwrap_or_default().documents)
    }

    /// The documents of this corpus the caller may read, oldest first.
    async fn documents(
        &self,
        ctx: &Context<'_>,
        first: Option<i32>,
        after: Option<String>,
    ) -> async_graphql::Result<
        async_graphql::connection::Connection<
            String,
            super::documents::GqlDocument,
            async_graphql::connection::EmptyFields,
            async_graphql::connection::EmptyFields,
        >,
    > {
        super::documents::corpus_documents(ctx, self.raw_id, first, after).await
    }

    /// Chunks of the documents in this corpus that the caller may read.
    async fn chunk_count(&self, ctx: &Context<'_>) -> async_graphql::Result<i64> {
        let loaders = loaders_of(ctx)?;
        let counts = loaders
            .corpus_counts
            .load_one(self.raw_id)
            .await
            .map_err(|e| internal(&*e))?;
        Ok(counts.unwrap_or_default().chunks)
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

pub(crate) fn api(e: crate::service::ServiceError) -> async_graphql::Error {
    ApiError(e).into()
}
