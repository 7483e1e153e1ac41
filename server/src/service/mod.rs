//! Use cases: each checks the caller's capability, applies the domain rules and calls the
//! store. Knows nothing of GraphQL or HTTP; resolvers and the CLI both call it.

use std::path::Path;

use entity::prelude::{ApiToken, Corpus, Team, User};

use crate::auth;
use crate::domain::{self, Capability, InvalidInput, Role};
use crate::events::{Bus, Event, EventKind};
use crate::ingest::blobs::BlobStore;
use crate::ingest::IngestSettings;
use crate::jobs::Queue;
use crate::roles::{ModelRoles, RolesError};
use crate::store::{self, Store, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error(transparent)]
    Auth(#[from] AuthError),
    /// The object does not exist or the caller may not see it (indistinguishable by design).
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error(transparent)]
    Invalid(#[from] InvalidInput),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    TooLarge(String),
    /// A part the request needs is not configured or not loaded (e.g. the embedding model).
    #[error("{0}")]
    Unavailable(String),
    /// A per-team quota is spent (e.g. knowledge extraction's documents per 24 hours).
    #[error("{0}")]
    QuotaExceeded(String),
    /// The caller's per-user rate limit is spent for now.
    #[error("{0}")]
    RateLimited(String),
    /// An outside service (the LLM) failed; `code` is its stable client code.
    #[error("{message}")]
    Upstream { code: &'static str, message: String },
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<StoreError> for ServiceError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Conflict(m) => ServiceError::Conflict(m),
            other => ServiceError::Internal(other.to_string()),
        }
    }
}

impl From<RolesError> for ServiceError {
    fn from(e: RolesError) -> Self {
        match e {
            RolesError::Store(s) => s.into(),
            other @ (RolesError::Unopenable { .. } | RolesError::Endpoint { .. }) => {
                ServiceError::Unavailable(other.to_string())
            }
            RolesError::Seal(s) => ServiceError::Unavailable(format!(
                "API keys cannot be stored on this instance: {s}"
            )),
        }
    }
}

pub type ServiceResult<T> = Result<T, ServiceError>;

mod answer;
mod content;
mod context;
mod documents;
pub mod kg;
mod limits;
mod models;
mod processing;
pub mod search;
mod session;
pub use answer::{AnswerOutcome, Citation, LlmUsage};
pub use context::{Prefetch, DATA_CATALOG, PREFETCH, PROVISIONAL_MARK};
pub use documents::{job_filename, DocumentPage, UploadRequest, DOC_PAGE_CHARS};
pub use limits::{RateLimit, RateLimiter};
pub use models::{ModelSource, TeamModelInput, TeamModelView};
pub use processing::{DocumentTypeInput, ExtractionView};
pub use session::{Session, RECHECK_AFTER};

// The view types: what the service hands its callers (`graphql`, `http`, the CLI) besides
// entity rows. Callers name them through `service`, never through the layer that made them.
pub use crate::auth::{bearer, AuthError, Principal};
pub use crate::events::JobEvent;
pub use crate::store::kg::{KgEntity, KgMention, KgRelation};
pub use crate::store::CorpusCounts;

/// A user row's role (a stored value outside the vocabulary is an internal error).
pub fn role_of(user: &User) -> ServiceResult<Role> {
    Ok(store::role_of(user)?)
}

/// The one way to turn a user row into a principal (`token_id` 0 for work done on a user's
/// behalf without a token: jobs, the command line).
pub fn principal_of(user: &User, token_id: i64) -> ServiceResult<Principal> {
    Ok(store::principal_of(user, token_id)?)
}

/// The models the core calls besides the LLM roles ([`Cairn::roles`]): the embedder (query
/// vectors, extractive answers) and the anonymizer that stands between user text and any LLM.
#[derive(Clone, Debug, Default)]
pub struct Models {
    pub embedder: Option<cairn_embed::Embedder>,
    /// `None`: emails, phone numbers and IBANs only (no name list).
    pub pii: Option<cairn_llm::Anonymizer>,
}

/// What the first start on an empty database created.
pub struct Bootstrap {
    pub team: Team,
    pub owner: User,
    pub token: String,
}

/// The ends of the jobs this process runs, for a caller that otherwise polls the jobs table
/// (`cairn ingest`): [`JobEnds::wait`] returns as soon as one ends here, or after its limit
/// (a job another process runs, on the same data directory, sends nothing here).
pub struct JobEnds(tokio::sync::broadcast::Receiver<Event>);

impl JobEnds {
    /// Until a job of this process ends (succeeded, failed or cancelled), at most `at_most`.
    pub async fn wait(&mut self, at_most: std::time::Duration) {
        use tokio::sync::broadcast::error::RecvError;
        let ended = async {
            loop {
                match self.0.recv().await {
                    Ok(Event {
                        kind: EventKind::Job(j),
                        ..
                    }) if j.is_terminal() => return,
                    Ok(_) => {}
                    // Events were missed: one of them may have been an end.
                    Err(RecvError::Lagged(_)) => return,
                    Err(RecvError::Closed) => std::future::pending::<()>().await,
                }
            }
        };
        let _ = tokio::time::timeout(at_most, ended).await;
    }
}

/// The application core shared by the HTTP server, the GraphQL schema and the CLI.
#[derive(Clone, Debug)]
pub struct Cairn {
    pub store: Store,
    pub bus: Bus,
    pub blobs: BlobStore,
    pub queue: Queue,
    pub settings: IngestSettings,
    pub models: Models,
    /// Where each team's `chat` and `utility` calls go (its own endpoint, else the
    /// instance's).
    pub roles: ModelRoles,
    /// The instance's secret key (team content-isolation keys derive from it); `None` in a
    /// core built without one.
    pub secret: Option<crate::roles::SecretKey>,
    /// Per-team knowledge-extraction limits (`extractKnowledge` refuses a spent quota).
    pub kg_limits: crate::knowledge::KgLimits,
    /// Per-user buckets for `search`, `searchAll` and `answer` (RATE_LIMITED when empty).
    pub search_limiter: RateLimiter,
    /// The lexical channel's BM25 parameters.
    pub bm25: crate::domain::lexical::Bm25,
    /// How HYBRID fuses the channels.
    pub fusion: crate::domain::search::Fusion,
    /// Whether `suggestedContext` also consults the `data_catalog` system corpus.
    pub prefetch_data_catalog: bool,
    /// processDocument's confidence threshold (`CAIRN_PROCESS_MIN_CONFIDENCE`).
    pub process_min_confidence: f64,
}

pub const DEFAULT_TEAM: &str = "default";
pub const DEFAULT_OWNER: &str = "admin";
pub const INITIAL_TOKEN_FILE: &str = "initial-token";

impl Cairn {
    /// See [`JobEnds`]; subscribe before queueing, so no end is missed.
    pub fn job_ends(&self) -> JobEnds {
        JobEnds(self.bus.subscribe())
    }

    pub fn new(
        store: Store,
        bus: Bus,
        blobs: BlobStore,
        queue: Queue,
        settings: IngestSettings,
    ) -> Cairn {
        Cairn {
            store: store.clone(),
            bus,
            blobs,
            queue,
            settings,
            roles: ModelRoles::without_secret(store.clone()),
            secret: None,
            models: Models::default(),
            kg_limits: crate::knowledge::KgLimits::default(),
            search_limiter: RateLimiter::new(RateLimit::default()),
            bm25: crate::domain::lexical::Bm25::default(),
            fusion: crate::domain::search::Fusion::default(),
            prefetch_data_catalog: false,
            process_min_confidence: crate::processing::DEFAULT_MIN_CONFIDENCE,
        }
    }

    /// The same core with this processDocument confidence threshold.
    pub fn with_process_min_confidence(mut self, min: f64) -> Cairn {
        self.process_min_confidence = min;
        self
    }

    /// The same core with this fusion.
    pub fn with_fusion(mut self, fusion: crate::domain::search::Fusion) -> Cairn {
        self.fusion = fusion;
        self
    }

    /// The same core with the `data_catalog` pre-fetch on or off.
    pub fn with_prefetch_data_catalog(mut self, on: bool) -> Cairn {
        self.prefetch_data_catalog = on;
        self
    }

    /// The same core with these BM25 parameters.
    pub fn with_bm25(mut self, bm25: crate::domain::lexical::Bm25) -> Cairn {
        self.bm25 = bm25;
        self
    }

    /// The same core with this per-user search rate limit.
    pub fn with_search_limit(mut self, limit: RateLimit) -> Cairn {
        self.search_limiter = RateLimiter::new(limit);
        self
    }

    /// Takes one of `p`'s search tokens, or answers RATE_LIMITED.
    pub(crate) fn rate_limit_search(&self, p: &Principal) -> ServiceResult<()> {
        self.search_limiter.take(p.user_id).map_err(|wait| {
            ServiceError::RateLimited(format!(
                "too many searches: try again in {:.1} s",
                wait.max(0.1)
            ))
        })
    }

    /// The same core with these knowledge-extraction limits.
    pub fn with_kg_limits(mut self, limits: crate::knowledge::KgLimits) -> Cairn {
        self.kg_limits = limits;
        self
    }

    /// The same core with the instance's secret key.
    pub fn with_secret(mut self, secret: crate::roles::SecretKey) -> Cairn {
        self.secret = Some(secret);
        self
    }

    /// The same core with this LLM role resolver.
    pub fn with_roles(mut self, roles: ModelRoles) -> Cairn {
        self.roles = roles;
        self
    }

    /// The same core with these models.
    pub fn with_models(mut self, models: Models) -> Cairn {
        self.models = models;
        self
    }

    /// A core without workers or cross-instance events (command-line tools, tests).
    pub fn offline(store: Store, data_dir: &Path) -> Cairn {
        Cairn::new(
            store,
            Bus::local(),
            BlobStore::new(data_dir),
            Queue::detached(),
            IngestSettings {
                max_upload_bytes: 64 * 1024 * 1024,
            },
        )
    }

    /// Whether the database answers (readiness).
    pub async fn ping(&self) -> ServiceResult<()> {
        Ok(self.store.ping().await?)
    }

    /// Corpora created in `p`'s team from now on (the `corpusCreated` subscription).
    pub fn corpus_events(&self, p: &Principal) -> futures_util::stream::BoxStream<'static, Corpus> {
        use tokio_stream::StreamExt;
        let team = p.team_id;
        let rx = self.bus.subscribe();
        Box::pin(
            tokio_stream::wrappers::BroadcastStream::new(rx).filter_map(move |ev| match ev {
                Ok(Event {
                    team_id,
                    kind: EventKind::CorpusCreated(c),
                }) if team_id == team => Some(c),
                _ => None,
            }),
        )
    }

    /// Turns a presented bearer token into a principal.
    pub async fn authenticate(&self, presented: &str) -> ServiceResult<Principal> {
        if !auth::looks_like_token(presented) {
            return Err(AuthError::InvalidToken.into());
        }
        let hash = auth::hash_token(presented);
        let Some((token, user)) = self.store.live_token(&hash).await? else {
            return Err(AuthError::InvalidToken.into());
        };
        if !auth::hashes_match(&token.token_hash, &hash) {
            return Err(AuthError::InvalidToken.into());
        }
        self.store.touch_token(&token).await?;
        Ok(store::principal_of(&user, token.id)?)
    }

    /// On an empty database: creates the default team, its owner and a login token, and
    /// writes the token to `<data_dir>/initial-token` (mode 0600). `None` when any team exists.
    pub async fn bootstrap_if_empty(&self, data_dir: &Path) -> ServiceResult<Option<Bootstrap>> {
        if self.store.team_count().await? > 0 {
            return Ok(None);
        }
        let secret = auth::generate_token();
        let (team, owner, _) = match self
            .store
            .bootstrap_team(DEFAULT_TEAM, DEFAULT_OWNER, &secret.hash)
            .await
        {
            Ok(created) => created,
            // Another instance bootstrapped the same database first.
            Err(StoreError::Conflict(_)) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        write_secret_file(&data_dir.join(INITIAL_TOKEN_FILE), &secret.secret)
            .map_err(|e| ServiceError::Internal(format!("cannot write the initial token: {e}")))?;
        Ok(Some(Bootstrap {
            team,
            owner,
            token: secret.secret,
        }))
    }

    // ---- corpora ---------------------------------------------------------------------------

    pub async fn create_corpus(
        &self,
        p: &Principal,
        name: &str,
        description: Option<&str>,
    ) -> ServiceResult<Corpus> {
        p.require(Capability::CorpusCreate)?;
        let name = domain::clean_name(name, "corpus name")?;
        let description = description
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(|d| domain::bounded(d, "description", domain::MAX_DESCRIPTION_CHARS))
            .transpose()?;
        let corpus = self
            .store
            .create_corpus(Some(p.team_id), &name, description)
            .await?;
        self.store
            .audit(
                Some(p.team_id),
                Some(p.user_id),
                "corpus.create",
                Some(&corpus.id.to_string()),
            )
            .await?;
        self.bus.publish(Event {
            team_id: p.team_id,
            kind: EventKind::CorpusCreated(corpus.clone()),
        });
        Ok(corpus)
    }

    pub async fn corpus(&self, p: &Principal, id: i64) -> ServiceResult<Corpus> {
        p.require(Capability::CorpusRead)?;
        self.store
            .visible_corpus(p.team_id, id)
            .await?
            .ok_or(ServiceError::NotFound("corpus"))
    }

    /// One page of the corpora the caller may see: the team's own and the system corpora.
    pub async fn corpora(
        &self,
        p: &Principal,
        after: Option<i64>,
        limit: u64,
    ) -> ServiceResult<Vec<Corpus>> {
        p.require(Capability::CorpusRead)?;
        Ok(self.store.visible_corpora(p.team_id, after, limit).await?)
    }

    /// Corpora among `ids` that the caller's team may see.
    pub async fn corpora_by_ids(&self, p: &Principal, ids: &[i64]) -> ServiceResult<Vec<Corpus>> {
        Ok(self.store.visible_corpora_by_ids(p.team_id, ids).await?)
    }

    pub async fn corpus_counts(
        &self,
        p: &Principal,
        ids: &[i64],
    ) -> ServiceResult<Vec<(i64, CorpusCounts)>> {
        Ok(self.store.corpus_counts(p, ids).await?)
    }

    // ---- users and tokens ------------------------------------------------------------------

    pub async fn create_user(&self, p: &Principal, name: &str, role: Role) -> ServiceResult<User> {
        p.require(Capability::Admin)?;
        if !p.role.may_grant(role) {
            return Err(AuthError::Forbidden(Capability::Admin).into());
        }
        let name = domain::clean_name(name, "user name")?;
        let user = self.store.create_user(p.team_id, &name, role).await?;
        self.store
            .audit(
                Some(p.team_id),
                Some(p.user_id),
                "user.create",
                Some(&user.id.to_string()),
            )
            .await?;
        Ok(user)
    }

    /// Whether `p` may mint or revoke tokens of `user` (same team): yourself always; otherwise
    /// by rank ([`Role::may_manage_tokens_of`]).
    fn may_manage_tokens(p: &Principal, user: &User) -> ServiceResult<()> {
        if user.id == p.user_id {
            return Ok(());
        }
        p.require(Capability::Admin)?;
        let target = crate::store::role_of(user)?;
        if p.role.may_manage_tokens_of(target) {
            Ok(())
        } else {
            Err(AuthError::Forbidden(Capability::Admin).into())
        }
    }

    /// A new token for `user_id` (default: the caller). Yourself always; an admin for members
    /// and viewers; an owner for anyone in the team. Returns the row and the secret (shown
    /// once).
    pub async fn create_token(
        &self,
        p: &Principal,
        user_id: Option<i64>,
        label: Option<&str>,
    ) -> ServiceResult<(ApiToken, String)> {
        let user_id = user_id.unwrap_or(p.user_id);
        if user_id != p.user_id {
            p.require(Capability::Admin)?;
        }
        let user = self
            .store
            .user(user_id)
            .await?
            .filter(|u| u.team_id == p.team_id)
            .ok_or(ServiceError::NotFound("user"))?;
        Self::may_manage_tokens(p, &user)?;
        let label = label
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(|l| domain::bounded(l, "label", domain::MAX_NAME_CHARS))
            .transpose()?;
        let secret = auth::generate_token();
        let row = self
            .store
            .create_token(user.id, &secret.hash, label)
            .await?;
        self.store
            .audit(
                Some(p.team_id),
                Some(p.user_id),
                "token.create",
                Some(&row.id.to_string()),
            )
            .await?;
        Ok((row, secret.secret))
    }

    /// Revokes a token: the caller's own, or by the same rank rule as [`Cairn::create_token`].
    pub async fn revoke_token(&self, p: &Principal, token_id: i64) -> ServiceResult<bool> {
        let token = self
            .store
            .token(token_id)
            .await?
            .ok_or(ServiceError::NotFound("token"))?;
        let owner = self
            .store
            .user(token.user_id)
            .await?
            .filter(|u| u.team_id == p.team_id)
            .ok_or(ServiceError::NotFound("token"))?;
        Self::may_manage_tokens(p, &owner)?;
        let revoked = self.store.revoke_token(token_id).await?;
        // Open sockets of this token close now, here and on the other instances (the bus
        // crosses them on PostgreSQL); every socket also re-checks its token on its own.
        self.bus.publish(Event {
            team_id: p.team_id,
            kind: EventKind::TokenRevoked(token_id),
        });
        self.store
            .audit(
                Some(p.team_id),
                Some(p.user_id),
                "token.revoke",
                Some(&token_id.to_string()),
            )
            .await?;
        Ok(revoked)
    }

    pub async fn teams_by_ids(&self, ids: &[i64]) -> ServiceResult<Vec<Team>> {
        Ok(self.store.teams_by_ids(ids).await?)
    }

    /// Users by id, limited to the caller's team.
    pub async fn users_by_ids(&self, p: &Principal, ids: &[i64]) -> ServiceResult<Vec<User>> {
        Ok(self.store.team_users_by_ids(p.team_id, ids).await?)
    }
}

/// Writes a secret to a new file readable by its owner only (0600), atomically.
pub fn write_secret_file(path: &Path, secret: &str) -> std::io::Result<()> {
    use std::io::Write;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("tmp");
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(&tmp)?;
    f.write_all(secret.as_bytes())?;
    f.write_all(b"\n")?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}
