//! Teams, users and API tokens, and the one way a user row becomes a principal
//! ([`principal_of`]).
//!
//! Tokens are stored as SHA-256 hashes only (the caller hashes); `last_used_at` is written at
//! most once a minute per token, so authenticating stays a read.

use chrono::Utc;
use entity::prelude::*;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter,
    QueryOrder, Set, TransactionTrait,
};

use super::audit::audit;
use super::{ByKey, Store, StoreError, StoreResult};
use crate::auth::Principal;
use crate::domain::Role;

impl Store {
    // ---- teams and users -------------------------------------------------------------------

    pub async fn team_count(&self) -> StoreResult<u64> {
        Ok(Teams::find().count(&self.db).await?)
    }

    pub async fn teams_by_ids(&self, ids: &[i64]) -> StoreResult<Vec<Team>> {
        Ok(Teams::find()
            .filter(TeamColumn::Id.is_in(ids.iter().copied()))
            .all(&self.db)
            .await?)
    }

    pub async fn team_by_name(&self, name: &str) -> StoreResult<Option<Team>> {
        Ok(Teams::find()
            .filter(TeamColumn::Name.eq(name))
            .one(&self.db)
            .await?)
    }

    /// Sets whether the team's uploads are hashed with its own key; the team as it is now.
    pub async fn set_team_isolation(
        &self,
        team_id: i64,
        isolate: bool,
    ) -> StoreResult<Option<Team>> {
        Teams::update_many()
            .col_expr(
                TeamColumn::IsolateContent,
                sea_orm::sea_query::Expr::value(isolate),
            )
            .filter(TeamColumn::Id.eq(team_id))
            .exec(&self.db)
            .await?;
        Ok(Teams::find_by_id(team_id).unique(&self.db).await?)
    }

    pub async fn create_team(&self, name: &str) -> StoreResult<Team> {
        insert_team(&self.db, name).await
    }

    pub async fn create_user(&self, team_id: i64, name: &str, role: Role) -> StoreResult<User> {
        insert_user(&self.db, team_id, name, role).await
    }

    pub async fn user(&self, id: i64) -> StoreResult<Option<User>> {
        Ok(Users::find_by_id(id).unique(&self.db).await?)
    }

    /// Users of `team_id` among `ids`.
    pub async fn team_users_by_ids(&self, team_id: i64, ids: &[i64]) -> StoreResult<Vec<User>> {
        Ok(Users::find()
            .filter(UserColumn::TeamId.eq(team_id))
            .filter(UserColumn::Id.is_in(ids.iter().copied()))
            .all(&self.db)
            .await?)
    }

    /// The team's earliest owner.
    pub async fn first_owner(&self, team_id: i64) -> StoreResult<Option<User>> {
        Ok(Users::find()
            .filter(UserColumn::TeamId.eq(team_id))
            .filter(UserColumn::Role.eq(Role::Owner.as_str()))
            .order_by_asc(UserColumn::Id)
            .one(&self.db)
            .await?)
    }

    /// Creates a team, its owner and the owner's first token in one transaction.
    pub async fn bootstrap_team(
        &self,
        team: &str,
        owner: &str,
        token_hash: &str,
    ) -> StoreResult<(Team, User, ApiToken)> {
        let tx = self.db.begin().await?;
        let t = insert_team(&tx, team).await?;
        let u = insert_user(&tx, t.id, owner, Role::Owner).await?;
        let k = insert_token(&tx, u.id, token_hash, Some("bootstrap")).await?;
        audit(&tx, Some(t.id), Some(u.id), "team.bootstrap", Some(&t.name)).await?;
        tx.commit().await?;
        Ok((t, u, k))
    }

    /// A user of `team_id` as a principal acting without a token; `None` when the user no
    /// longer exists or is not in that team.
    pub async fn member(&self, team_id: i64, user_id: i64) -> StoreResult<Option<Principal>> {
        match self.user(user_id).await? {
            Some(u) if u.team_id == team_id => Ok(Some(principal_of(&u, 0)?)),
            _ => Ok(None),
        }
    }

    // ---- tokens ----------------------------------------------------------------------------

    pub async fn create_token(
        &self,
        user_id: i64,
        token_hash: &str,
        label: Option<&str>,
    ) -> StoreResult<ApiToken> {
        insert_token(&self.db, user_id, token_hash, label).await
    }

    /// The live (not revoked) token with this hash, and its user.
    pub async fn live_token(&self, token_hash: &str) -> StoreResult<Option<(ApiToken, User)>> {
        // One statement (a join): every request authenticates, so a second round trip to the
        // database would be paid on each.
        let found = ApiTokens::find()
            .filter(ApiTokenColumn::TokenHash.eq(token_hash))
            .filter(ApiTokenColumn::RevokedAt.is_null())
            .find_also_related(Users)
            .all(&self.db)
            .await?;
        // The hash is unique: one row at most (no `LIMIT`, see [`ByKey`]).
        Ok(found
            .into_iter()
            .next()
            .and_then(|(token, user)| user.map(|u| (token, u))))
    }

    /// Records use of a token, at most once a minute per token (keeps reads read-only).
    pub async fn touch_token(&self, token: &ApiToken) -> StoreResult<()> {
        let now = Utc::now();
        let stale = token
            .last_used_at
            .is_none_or(|t| now.signed_duration_since(t).num_seconds() >= 60);
        if stale {
            let mut active: ApiTokenActive = token.clone().into();
            active.last_used_at = Set(Some(now));
            active.update(&self.db).await?;
        }
        Ok(())
    }

    pub async fn token(&self, id: i64) -> StoreResult<Option<ApiToken>> {
        Ok(ApiTokens::find_by_id(id).unique(&self.db).await?)
    }

    /// Revokes a token. Returns false when it was already revoked.
    pub async fn revoke_token(&self, id: i64) -> StoreResult<bool> {
        let Some(token) = ApiTokens::find_by_id(id).unique(&self.db).await? else {
            return Ok(false);
        };
        if token.revoked_at.is_some() {
            return Ok(false);
        }
        let mut active: ApiTokenActive = token.into();
        active.revoked_at = Set(Some(Utc::now()));
        active.update(&self.db).await?;
        Ok(true)
    }
}

/// Parses a role column, which the database constrains to the four known values.
pub fn role_of(user: &User) -> StoreResult<Role> {
    user.role
        .parse()
        .map_err(|e: crate::domain::ParseEnumError| StoreError::Corrupt(e.to_string()))
}

/// The one way to turn a user row into a principal (`token_id` 0 for work done on a user's
/// behalf without a token: jobs, the command line).
pub fn principal_of(user: &User, token_id: i64) -> StoreResult<Principal> {
    Ok(Principal {
        user_id: user.id,
        team_id: user.team_id,
        role: role_of(user)?,
        name: user.name.clone(),
        token_id,
    })
}

async fn insert_team<C: ConnectionTrait>(db: &C, name: &str) -> StoreResult<Team> {
    TeamActive {
        name: Set(name.to_owned()),
        created_at: Set(Utc::now()),
        isolate_content: Set(false),
        taxonomy_seeded: Set(false),
        extend_taxonomy: Set(false),
        ..Default::default()
    }
    .insert(db)
    .await
    .map_err(|e| StoreError::from_write(e, &format!("a team named `{name}`")))
}

async fn insert_user<C: ConnectionTrait>(
    db: &C,
    team_id: i64,
    name: &str,
    role: Role,
) -> StoreResult<User> {
    UserActive {
        team_id: Set(team_id),
        name: Set(name.to_owned()),
        role: Set(role.as_str().to_owned()),
        created_at: Set(Utc::now()),
        ..Default::default()
    }
    .insert(db)
    .await
    .map_err(|e| StoreError::from_write(e, &format!("a user named `{name}` in this team")))
}

async fn insert_token<C: ConnectionTrait>(
    db: &C,
    user_id: i64,
    token_hash: &str,
    label: Option<&str>,
) -> StoreResult<ApiToken> {
    Ok(ApiTokenActive {
        user_id: Set(user_id),
        token_hash: Set(token_hash.to_owned()),
        label: Set(label.map(str::to_owned)),
        created_at: Set(Utc::now()),
        ..Default::default()
    }
    .insert(db)
    .await?)
}
