//! Model roles at run time (seed 001, "As built", KG-7): which LLM endpoint a team's `chat`
//! (answers) and `utility` (knowledge extraction) calls go to.
//!
//! Resolution order, per call: the team's own setting (`team_models`, set by an admin) →
//! the instance's configuration (`CAIRN_LLM_*`) → none (answers are extractive; extraction
//! uses the instance's configured extractor: `rules` or the `local` model). The row is read on
//! every resolution (one keyed statement), so a change made by another process or instance is
//! seen at the next call; the HTTP client built for a row is kept until the row changes.
//!
//! A team's API key is write-only: it is sealed ([`secret`]) before it reaches the store, and
//! opened only here, into the client that sends it.

pub mod secret;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn_llm::{LlmClient, LlmConfig};
use entity::prelude::TeamModel;

use crate::domain::models::ModelRole;
use crate::store::{Store, StoreError};
pub use secret::{SecretError, SecretKey};

#[derive(Debug, thiserror::Error)]
pub enum RolesError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The team's key does not open with this instance's secret key.
    #[error("the team's {role} API key cannot be opened with this instance's secret key (was CAIRN_SECRET_KEY changed, or is it not the same on every instance?): an admin must set the key again")]
    Unopenable { role: ModelRole },
    /// The team's stored endpoint no longer makes a client (it was valid when written).
    #[error("the team's {role} endpoint is unusable: {message}")]
    Endpoint { role: ModelRole, message: String },
    #[error("sealing the API key failed: {0}")]
    Seal(SecretError),
}

pub type RolesResult<T> = Result<T, RolesError>;

/// Where a role's calls go for one team.
#[derive(Clone, Debug)]
pub enum Resolved {
    /// The team's own endpoint.
    Team(LlmClient),
    /// The instance's configured endpoint.
    Instance(LlmClient),
    /// No endpoint: answers are extractive; extraction uses the instance's extractor.
    None,
}

impl Resolved {
    pub fn client(&self) -> Option<&LlmClient> {
        match self {
            Resolved::Team(c) | Resolved::Instance(c) => Some(c),
            Resolved::None => None,
        }
    }
}

/// The instance's own endpoints (from the configuration).
#[derive(Clone, Debug, Default)]
pub struct InstanceModels {
    pub chat: Option<LlmClient>,
    pub utility: Option<LlmClient>,
}

impl InstanceModels {
    fn get(&self, role: ModelRole) -> Option<&LlmClient> {
        match role {
            ModelRole::Chat => self.chat.as_ref(),
            ModelRole::Utility => self.utility.as_ref(),
        }
    }
}

/// The resolver. Cheap to clone (shared inside).
#[derive(Clone, Debug)]
pub struct ModelRoles {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Store,
    /// `None` in a core that never calls an LLM (the command-line tools): a sealed key does
    /// not open and a new one cannot be sealed.
    secret: Option<SecretKey>,
    instance: InstanceModels,
    timeout: Duration,
    /// The client built for each team's row, with the row it was built from.
    clients: Mutex<HashMap<(i64, ModelRole), (TeamModel, LlmClient)>>,
}

impl ModelRoles {
    pub fn new(
        store: Store,
        secret: SecretKey,
        instance: InstanceModels,
        timeout: Duration,
    ) -> ModelRoles {
        Self::build(store, Some(secret), instance, timeout)
    }

    /// A resolver without a secret key or instance endpoints (cores that never call an LLM).
    pub fn without_secret(store: Store) -> ModelRoles {
        Self::build(
            store,
            None,
            InstanceModels::default(),
            Duration::from_secs(60),
        )
    }

    fn build(
        store: Store,
        secret: Option<SecretKey>,
        instance: InstanceModels,
        timeout: Duration,
    ) -> ModelRoles {
        ModelRoles {
            inner: Arc::new(Inner {
                store,
                secret,
                instance,
                timeout: timeout.max(Duration::from_secs(1)),
                clients: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The associated data a team's sealed key is bound to.
    fn context(team_id: i64, role: ModelRole) -> String {
        format!("cairn team_models team={team_id} role={role}")
    }

    /// Seals a key for the team's row of `role`.
    pub fn seal(&self, team_id: i64, role: ModelRole, key: &str) -> RolesResult<String> {
        self.inner
            .secret
            .as_ref()
            .ok_or(RolesError::Seal(SecretError::Unopenable))?
            .seal(key, &Self::context(team_id, role))
            .map_err(RolesError::Seal)
    }

    /// The instance's endpoint for `role`, if configured.
    pub fn instance(&self, role: ModelRole) -> Option<&LlmClient> {
        self.inner.instance.get(role)
    }

    /// Where the team's `role` calls go now.
    pub async fn resolve(&self, team_id: i64, role: ModelRole) -> RolesResult<Resolved> {
        match self.inner.store.team_model(team_id, role).await? {
            Some(row) => self.client_for(row, role).map(Resolved::Team),
            None => {
                self.forget(team_id, role);
                Ok(self
                    .instance(role)
                    .cloned()
                    .map_or(Resolved::None, Resolved::Instance))
            }
        }
    }

    fn clients(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<(i64, ModelRole), (TeamModel, LlmClient)>> {
        self.inner.clients.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn forget(&self, team_id: i64, role: ModelRole) {
        self.clients().remove(&(team_id, role));
    }

    fn client_for(&self, row: TeamModel, role: ModelRole) -> RolesResult<LlmClient> {
        let slot = (row.team_id, role);
        if let Some((seen, client)) = self.clients().get(&slot) {
            if *seen == row {
                return Ok(client.clone());
            }
        }
        let api_key = row
            .api_key_sealed
            .as_deref()
            .map(|s| match &self.inner.secret {
                Some(k) => k.open(s, &Self::context(row.team_id, role)),
                None => Err(SecretError::Unopenable),
            })
            .transpose()
            .map_err(|_| RolesError::Unopenable { role })?;
        let client = LlmClient::new(LlmConfig {
            base_url: row.url.clone(),
            model: row.model.clone(),
            api_key,
            timeout: self.inner.timeout,
            price_in_per_mtok: row.price_input,
            price_out_per_mtok: row.price_output,
        })
        .map_err(|e| RolesError::Endpoint {
            role,
            message: e.to_string(),
        })?;
        self.clients().insert(slot, (row, client.clone()));
        Ok(client)
    }
}
