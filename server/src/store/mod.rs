//! Repositories over sea-orm: the only module that builds queries.
//!
//! Invariants:
//! - Nothing outside `store` writes SQL or uses sea-orm query builders.
//! - Every query that returns document-derived rows filters with [`readable::Readable`], in
//!   the query itself, never by loading rows and filtering after.
//! - Backend differences (placeholders, vector and lexical columns) stay inside this module.

pub mod documents;
pub mod jobs;
pub mod kg;
pub mod lexical;
pub mod readable;
pub mod search;
mod sql;
pub mod vindex;

use std::path::Path;
use std::time::Duration;

use chrono::Utc;
use entity::prelude::*;
use migration::{Migrator, MigratorTrait};
use sea_orm::sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectOptions, ConnectionTrait, Database, DatabaseBackend,
    DatabaseConnection, DbErr, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder, QuerySelect,
    Set, SqlErr, TransactionTrait,
};

use crate::auth::Principal;
use crate::domain::{Role, Visibility};
pub use readable::Readable;
use sql::Sql;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A uniqueness constraint refused the write; the message names what collided.
    #[error("{0}")]
    Conflict(String),
    #[error("database error: {0}")]
    Db(#[from] DbErr),
    #[error("corrupt row: {0}")]
    Corrupt(String),
}

impl StoreError {
    fn from_write(err: DbErr, what: &str) -> StoreError {
        match err.sql_err() {
            Some(SqlErr::UniqueConstraintViolation(_)) => {
                StoreError::Conflict(format!("{what} already exists"))
            }
            _ => StoreError::Db(err),
        }
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// Counts for one corpus, over the documents the asking principal may read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CorpusCounts {
    pub documents: i64,
    pub chunks: i64,
}

/// The fields needed to record a document row (ingestion fills the rest later).
#[derive(Clone, Debug)]
pub struct NewDocument {
    pub team_id: i64,
    pub corpus_id: i64,
    pub owner_id: i64,
    pub visibility: Visibility,
    pub title: String,
    pub mime_type: String,
}

/// Dimension of every stored embedding (the schema's `vector(384)` / 1536-byte blobs).
pub const EMBEDDING_DIM: usize = 384;

/// Knobs of the database side of retrieval.
#[derive(Clone, Copy, Debug)]
pub struct Tuning {
    /// pgvector `hnsw.ef_search`: the HNSW candidate list per scan step (recall vs speed).
    pub ef_search: u32,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning { ef_search: 100 }
    }
}

/// The database handle. Cheap to clone (a pool inside).
#[derive(Clone, Debug)]
pub struct Store {
    db: DatabaseConnection,
    url: String,
    /// SQLite's in-memory vector index (unused on PostgreSQL).
    index: std::sync::Arc<search::IndexSlot>,
    /// SQL statements run so far through this handle and its clones.
    statements: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// Lexical searches answered by the pruned evaluation (kept because provably exact).
    lexical_pruned: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Store {
    /// Opens the database: `url` when given (postgres://… or sqlite://…), else SQLite at
    /// `<data_dir>/cairn.db` (created, WAL mode).
    pub async fn connect(url: Option<&str>, data_dir: &Path) -> StoreResult<Store> {
        Store::connect_tuned(url, data_dir, Tuning::default()).await
    }

    /// [`Store::connect`] with retrieval knobs.
    pub async fn connect_tuned(
        url: Option<&str>,
        data_dir: &Path,
        tuning: Tuning,
    ) -> StoreResult<Store> {
        let url = match url {
            Some(u) => u.to_owned(),
            None => {
                std::fs::create_dir_all(data_dir).map_err(|e| {
                    StoreError::Db(DbErr::Custom(format!(
                        "cannot create data directory {}: {e}",
                        data_dir.display()
                    )))
                })?;
                format!("sqlite://{}?mode=rwc", data_dir.join("cairn.db").display())
            }
        };
        let mut opts = ConnectOptions::new(url.clone());
        opts.sqlx_logging(false)
            .acquire_timeout(Duration::from_secs(10))
            .map_sqlx_sqlite_opts(|o: SqliteConnectOptions| {
                o.journal_mode(SqliteJournalMode::Wal)
                    .synchronous(SqliteSynchronous::Normal)
                    .foreign_keys(true)
                    .busy_timeout(Duration::from_secs(10))
            })
            .map_sqlx_postgres_opts(move |o| {
                // Every session: the HNSW candidate list, and iterative scans so that a
                // filtered `ORDER BY … LIMIT 300` keeps scanning until 300 readable rows pass
                // (pgvector ≥ 0.8; the vector channel re-sorts exactly afterwards).
                o.options([
                    ("hnsw.ef_search", tuning.ef_search.to_string()),
                    ("hnsw.iterative_scan", "relaxed_order".to_owned()),
                ])
            });
        if url.starts_with("sqlite:") {
            // One writer at a time is SQLite's rule anyway; a small pool keeps readers going.
            opts.max_connections(8).min_connections(1);
        } else {
            opts.max_connections(16);
        }
        let mut db = Database::connect(opts).await?;
        // Every statement sea-orm runs (pool and transactions) is counted: a cheap metric,
        // and how the tests prove a GraphQL query's statement count does not grow with N.
        let statements = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counter = statements.clone();
        db.set_metric_callback(move |info| {
            counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::trace!(target: "cairn::sql", sql = %info.statement.sql, "statement");
        });
        Ok(Store {
            db,
            url,
            index: Default::default(),
            statements,
            lexical_pruned: Default::default(),
        })
    }

    pub fn backend(&self) -> DatabaseBackend {
        self.db.get_database_backend()
    }

    /// How many lexical searches the pruned (MaxScore) evaluation answered since it was
    /// opened; the others summed every posting.
    pub fn lexical_pruned_count(&self) -> u64 {
        self.lexical_pruned
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn count_lexical_pruned(&self) {
        self.lexical_pruned
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// How many SQL statements this store (all its clones) has run since it was opened.
    pub fn statement_count(&self) -> u64 {
        self.statements.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn connection(&self) -> &DatabaseConnection {
        &self.db
    }

    /// Applies pending migrations.
    pub async fn migrate(&self) -> StoreResult<()> {
        Migrator::up(&self.db, None).await?;
        Ok(())
    }

    /// Whether events can cross instances through NOTIFY/LISTEN (PostgreSQL).
    pub fn supports_notify(&self) -> bool {
        self.backend() == DatabaseBackend::Postgres
    }

    /// `NOTIFY channel, payload` (PostgreSQL).
    pub async fn notify(&self, channel: &str, payload: &str) -> StoreResult<()> {
        let mut q = Sql::new(self.backend());
        q.push("SELECT pg_notify(")
            .bind(channel.to_owned())
            .push(", ")
            .bind(payload.to_owned())
            .push(")");
        self.db.query_one_raw(q.build()).await?;
        Ok(())
    }

    /// A dedicated connection listening on `channel` (PostgreSQL).
    pub async fn listen(&self, channel: &str) -> StoreResult<sea_orm::sqlx::postgres::PgListener> {
        let mut l = sea_orm::sqlx::postgres::PgListener::connect(&self.url)
            .await
            .map_err(|e| StoreError::Db(DbErr::Custom(format!("LISTEN connect: {e}"))))?;
        l.listen(channel)
            .await
            .map_err(|e| StoreError::Db(DbErr::Custom(format!("LISTEN: {e}"))))?;
        Ok(l)
    }

    /// Cheap liveness query for `/readyz`.
    pub async fn ping(&self) -> StoreResult<()> {
        self.db.ping().await?;
        Ok(())
    }

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

    pub async fn create_team(&self, name: &str) -> StoreResult<Team> {
        insert_team(&self.db, name).await
    }

    pub async fn create_user(&self, team_id: i64, name: &str, role: Role) -> StoreResult<User> {
        insert_user(&self.db, team_id, name, role).await
    }

    pub async fn user(&self, id: i64) -> StoreResult<Option<User>> {
        Ok(Users::find_by_id(id).one(&self.db).await?)
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
        let found = ApiTokens::find()
            .filter(ApiTokenColumn::TokenHash.eq(token_hash))
            .filter(ApiTokenColumn::RevokedAt.is_null())
            .one(&self.db)
            .await?;
        let Some(token) = found else { return Ok(None) };
        let user = Users::find_by_id(token.user_id).one(&self.db).await?;
        Ok(user.map(|u| (token, u)))
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
        Ok(ApiTokens::find_by_id(id).one(&self.db).await?)
    }

    /// Revokes a token. Returns false when it was already revoked.
    pub async fn revoke_token(&self, id: i64) -> StoreResult<bool> {
        let Some(token) = ApiTokens::find_by_id(id).one(&self.db).await? else {
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

    // ---- corpora ---------------------------------------------------------------------------

    pub async fn create_corpus(
        &self,
        team_id: Option<i64>,
        name: &str,
        description: Option<&str>,
    ) -> StoreResult<Corpus> {
        let row = CorpusActive {
            team_id: Set(team_id),
            name: Set(name.to_owned()),
            description: Set(description.map(str::to_owned)),
            system: Set(team_id.is_none()),
            created_at: Set(Utc::now()),
            ..Default::default()
        };
        row.insert(&self.db)
            .await
            .map_err(|e| StoreError::from_write(e, &format!("a corpus named `{name}`")))
    }

    /// A corpus the team may see (its own or a system corpus); `None` otherwise, so that
    /// another team's corpus and a missing one look the same.
    pub async fn visible_corpus(&self, team_id: i64, id: i64) -> StoreResult<Option<Corpus>> {
        Ok(Corpora::find_by_id(id)
            .filter(visible_to_team(team_id))
            .one(&self.db)
            .await?)
    }

    /// The team's own corpus with this name.
    pub async fn team_corpus_by_name(
        &self,
        team_id: i64,
        name: &str,
    ) -> StoreResult<Option<Corpus>> {
        Ok(Corpora::find()
            .filter(CorpusColumn::TeamId.eq(team_id))
            .filter(CorpusColumn::Name.eq(name))
            .one(&self.db)
            .await?)
    }

    /// The system corpus with this name (system corpora have no team).
    pub async fn system_corpus_by_name(&self, name: &str) -> StoreResult<Option<Corpus>> {
        Ok(Corpora::find()
            .filter(CorpusColumn::System.eq(true))
            .filter(CorpusColumn::Name.eq(name))
            .one(&self.db)
            .await?)
    }

    /// Corpora among `ids` that the team may see.
    pub async fn visible_corpora_by_ids(
        &self,
        team_id: i64,
        ids: &[i64],
    ) -> StoreResult<Vec<Corpus>> {
        Ok(Corpora::find()
            .filter(visible_to_team(team_id))
            .filter(CorpusColumn::Id.is_in(ids.iter().copied()))
            .all(&self.db)
            .await?)
    }

    /// Corpora the team may see, by id, after `after` (keyset pagination).
    pub async fn visible_corpora(
        &self,
        team_id: i64,
        after: Option<i64>,
        limit: u64,
    ) -> StoreResult<Vec<Corpus>> {
        let mut q = Corpora::find().filter(visible_to_team(team_id));
        if let Some(after) = after {
            q = q.filter(CorpusColumn::Id.gt(after));
        }
        Ok(q.order_by_asc(CorpusColumn::Id)
            .limit(limit)
            .all(&self.db)
            .await?)
    }

    /// Document and chunk counts of each corpus, over the documents `p` may read. One query.
    pub async fn corpus_counts(
        &self,
        p: &Principal,
        corpus_ids: &[i64],
    ) -> StoreResult<Vec<(i64, CorpusCounts)>> {
        if corpus_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = Sql::new(self.backend());
        q.push("SELECT d.corpus_id, COUNT(*), COALESCE(SUM(d.chunk_count), 0) FROM documents d WHERE d.corpus_id IN ");
        q.push_list(corpus_ids.iter().copied());
        q.push(" AND ");
        Readable::new(p).push_documents(&mut q, "d");
        q.push(" GROUP BY d.corpus_id");
        let rows = self.db.query_all_raw(q.build()).await?;
        rows.iter()
            .map(|r| {
                let id: i64 = r.try_get_by_index(0)?;
                let documents: i64 = r.try_get_by_index(1)?;
                let chunks: i64 = r.try_get_by_index(2)?;
                Ok((id, CorpusCounts { documents, chunks }))
            })
            .collect()
    }

    // ---- documents -------------------------------------------------------------------------

    /// Records a document row (no versions or chunks yet).
    pub async fn insert_document(&self, d: &NewDocument) -> StoreResult<Document> {
        let now = Utc::now();
        let row = DocumentActive {
            team_id: Set(d.team_id),
            corpus_id: Set(d.corpus_id),
            owner_id: Set(d.owner_id),
            visibility: Set(d.visibility.as_str().to_owned()),
            title: Set(d.title.clone()),
            mime_type: Set(d.mime_type.clone()),
            current_version: Set(1),
            chunk_count: Set(0),
            created_at: Set(now),
            updated_at: Set(now),
            ..Default::default()
        };
        Ok(row.insert(&self.db).await?)
    }

    /// Of `ids`, those `p` may read, in ascending order. One query.
    pub async fn readable_document_ids(&self, p: &Principal, ids: &[i64]) -> StoreResult<Vec<i64>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = Sql::new(self.backend());
        q.push("SELECT d.id FROM documents d WHERE d.id IN ");
        q.push_list(ids.iter().copied());
        q.push(" AND ");
        Readable::new(p).push_documents(&mut q, "d");
        q.push(" ORDER BY d.id");
        let rows = self.db.query_all_raw(q.build()).await?;
        rows.iter()
            .map(|r| r.try_get_by_index::<i64>(0).map_err(StoreError::from))
            .collect()
    }

    // ---- usage ----------------------------------------------------------------------------

    #[allow(clippy::too_many_arguments)]
    pub async fn insert_usage(
        &self,
        team_id: i64,
        kind: &str,
        model: &str,
        input_tokens: i64,
        output_tokens: i64,
        cost_usd: f64,
        job_id: Option<i64>,
    ) -> StoreResult<()> {
        UsageActive {
            team_id: Set(team_id),
            kind: Set(kind.to_owned()),
            model: Set(model.to_owned()),
            input_tokens: Set(input_tokens),
            output_tokens: Set(output_tokens),
            cost_usd: Set(cost_usd),
            job_id: Set(job_id),
            at: Set(Utc::now()),
            ..Default::default()
        }
        .insert(&self.db)
        .await?;
        Ok(())
    }

    /// Usage rows of a job (tests and accounting).
    pub async fn job_usage(&self, job_id: i64) -> StoreResult<Vec<Usage>> {
        Ok(UsageRows::find()
            .filter(UsageColumn::JobId.eq(job_id))
            .all(&self.db)
            .await?)
    }

    /// A team's usage rows of one kind (`embed` or `llm`), oldest first.
    pub async fn team_usage(&self, team_id: i64, kind: &str) -> StoreResult<Vec<Usage>> {
        Ok(UsageRows::find()
            .filter(UsageColumn::TeamId.eq(team_id))
            .filter(UsageColumn::Kind.eq(kind))
            .order_by_asc(UsageColumn::Id)
            .all(&self.db)
            .await?)
    }

    // ---- audit -----------------------------------------------------------------------------

    pub async fn audit(
        &self,
        team_id: Option<i64>,
        user_id: Option<i64>,
        action: &str,
        target: Option<&str>,
    ) -> StoreResult<()> {
        audit(&self.db, team_id, user_id, action, target).await
    }
}

fn visible_to_team(team_id: i64) -> sea_orm::Condition {
    sea_orm::Condition::any()
        .add(CorpusColumn::TeamId.eq(team_id))
        .add(CorpusColumn::System.eq(true))
}

async fn insert_team<C: ConnectionTrait>(db: &C, name: &str) -> StoreResult<Team> {
    TeamActive {
        name: Set(name.to_owned()),
        created_at: Set(Utc::now()),
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

async fn audit<C: ConnectionTrait>(
    db: &C,
    team_id: Option<i64>,
    user_id: Option<i64>,
    action: &str,
    target: Option<&str>,
) -> StoreResult<()> {
    AuditActive {
        team_id: Set(team_id),
        user_id: Set(user_id),
        action: Set(action.to_owned()),
        target: Set(target.map(str::to_owned)),
        at: Set(Utc::now()),
        ..Default::default()
    }
    .insert(db)
    .await?;
    Ok(())
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

impl Store {
    /// A user of `team_id` as a principal acting without a token; `None` when the user no
    /// longer exists or is not in that team.
    pub async fn member(&self, team_id: i64, user_id: i64) -> StoreResult<Option<Principal>> {
        match self.user(user_id).await? {
            Some(u) if u.team_id == team_id => Ok(Some(principal_of(&u, 0)?)),
            _ => Ok(None),
        }
    }
}
