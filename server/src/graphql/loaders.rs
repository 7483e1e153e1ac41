//! Dataloaders: every relation field resolves through one of these, so a list of N objects
//! costs one query per field, not N. Loaders are built per request (they carry the principal,
//! whose visibility they apply inside their one query).

use std::collections::HashMap;
use std::sync::Arc;

use async_graphql::dataloader::{DataLoader, Loader};
use entity::prelude::{Team, User};

use crate::auth::Principal;
use crate::service::{Cairn, ServiceError};
use crate::store::CorpusCounts;

pub type LoadError = Arc<ServiceError>;

pub struct TeamLoader(pub Cairn);

impl Loader<i64> for TeamLoader {
    type Value = Team;
    type Error = LoadError;

    async fn load(&self, keys: &[i64]) -> Result<HashMap<i64, Team>, LoadError> {
        let rows = self.0.teams_by_ids(keys).await.map_err(Arc::new)?;
        Ok(rows.into_iter().map(|t| (t.id, t)).collect())
    }
}

pub struct UserLoader {
    pub cairn: Cairn,
    pub principal: Principal,
}

impl Loader<i64> for UserLoader {
    type Value = User;
    type Error = LoadError;

    async fn load(&self, keys: &[i64]) -> Result<HashMap<i64, User>, LoadError> {
        let rows = self
            .cairn
            .users_by_ids(&self.principal, keys)
            .await
            .map_err(Arc::new)?;
        Ok(rows.into_iter().map(|u| (u.id, u)).collect())
    }
}

/// Document and chunk counts per corpus, over what the principal may read.
pub struct CorpusCountsLoader {
    pub cairn: Cairn,
    pub principal: Principal,
}

impl Loader<i64> for CorpusCountsLoader {
    type Value = CorpusCounts;
    type Error = LoadError;

    async fn load(&self, keys: &[i64]) -> Result<HashMap<i64, CorpusCounts>, LoadError> {
        let rows = self
            .cairn
            .corpus_counts(&self.principal, keys)
            .await
            .map_err(Arc::new)?;
        Ok(rows.into_iter().collect())
    }
}

/// The per-request data a resolver may rely on once the caller is authenticated.
pub struct Loaders {
    pub teams: DataLoader<TeamLoader>,
    pub users: DataLoader<UserLoader>,
    pub corpus_counts: DataLoader<CorpusCountsLoader>,
}

impl Loaders {
    pub fn new(cairn: &Cairn, principal: &Principal) -> Loaders {
        Loaders {
            teams: DataLoader::new(TeamLoader(cairn.clone()), tokio::spawn),
            users: DataLoader::new(
                UserLoader {
                    cairn: cairn.clone(),
                    principal: principal.clone(),
                },
                tokio::spawn,
            ),
            corpus_counts: DataLoader::new(
                CorpusCountsLoader {
                    cairn: cairn.clone(),
                    principal: principal.clone(),
                },
                tokio::spawn,
            ),
        }
    }
}
