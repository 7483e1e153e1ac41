//! Opening the database: the pool and its per-connection settings (SQLite's WAL and foreign
//! keys, pgvector's scan knobs), migrations, the statement counter, liveness, and
//! PostgreSQL's NOTIFY/LISTEN for the event bus.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use migration::{Migrator, MigratorTrait};
use sea_orm::sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
use sea_orm::{
    ConnectOptions, ConnectionTrait, Database, DatabaseBackend, DatabaseConnection, DbErr,
};

use super::sql::Sql;
use super::{Store, StoreError, StoreResult};

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
        if !cfg!(feature = "postgres") && !url.starts_with("sqlite:") {
            return Err(StoreError::Db(DbErr::Custom(format!(
                "this build of Cairn has SQLite only, and {} is not SQLite: build it with \
                 `--features postgres` (the default features; `scripts/run.sh` adds it when \
                 DATABASE_URL or --database-url is a postgres:// URL)",
                url.split_once("://").map_or_else(
                    || "the database URL".to_owned(),
                    |(scheme, _)| format!("{scheme}://")
                )
            ))));
        }
        let mut opts = ConnectOptions::new(url.clone());
        opts.sqlx_logging(false)
            .acquire_timeout(Duration::from_secs(10))
            .map_sqlx_sqlite_opts(|o: SqliteConnectOptions| {
                o.journal_mode(SqliteJournalMode::Wal)
                    .synchronous(SqliteSynchronous::Normal)
                    .foreign_keys(true)
                    .busy_timeout(Duration::from_secs(10))
            });
        #[cfg(not(feature = "postgres"))]
        let _ = tuning; // pgvector's knobs only
        #[cfg(feature = "postgres")]
        opts.map_sqlx_postgres_opts(pg_session(tuning, false));
        if url.starts_with("sqlite:") {
            // One writer at a time is SQLite's rule anyway; a small pool keeps readers going.
            // No ping before each checkout: an embedded database's connection cannot be
            // dropped by a server or the network, and the ping is a round trip to the
            // connection's worker thread on every statement.
            opts.max_connections(8)
                .min_connections(1)
                .test_before_acquire(false);
        } else {
            // A connection that sat idle may have been closed by the server or a proxy: ping
            // it before use then, not on every checkout (a round trip per statement).
            opts.max_connections(16)
                .test_before_acquire_if_idle_for(Duration::from_secs(30));
        }
        // PostgreSQL: the retrieval channels get a pool of their own whose sessions plan
        // every execution for its parameters (`plan_cache_mode = force_custom_plan`). Their
        // statements are prepared once per connection, and the generic plan PostgreSQL
        // switches to after five runs cannot see which of a query's terms are rare, which
        // decides the lexical plan; it also loses the vector channel's index (measured at
        // 20,000 chunks: the generic plan scanned every row, 18.5 ms against the custom
        // plan's 6.6 ms). Every other statement (authentication, hydration, the
        // dataloaders) keeps PostgreSQL's default and reuses its plan: planning the
        // hydration's join each time cost more than running it (pgbench, prepared, 5,000
        // chunks: 0.35-0.44 ms a statement against 0.17-0.19 ms).
        #[cfg(feature = "postgres")]
        let channel_opts = (!url.starts_with("sqlite:")).then(|| {
            let mut c = opts.clone();
            c.map_sqlx_postgres_opts(pg_session(tuning, true));
            // Half the main pool: the channels' statements are CPU-bound in PostgreSQL, so
            // more of them at once only queue there instead of here, and a process's pools
            // hold at most 24 connections (PostgreSQL's default limit is 100, shared by every
            // instance and the command line; LISTEN takes one more of its own).
            c.max_connections(8);
            c
        });
        let mut db = Database::connect(opts).await?;
        #[cfg(feature = "postgres")]
        let mut channels = match channel_opts {
            Some(c) => Some(Database::connect(c).await?),
            None => None,
        };
        #[cfg(not(feature = "postgres"))]
        let mut channels: Option<DatabaseConnection> = None;
        // Every statement sea-orm runs (pool and transactions) is traced, and counted for the
        // tests, which prove with it that a GraphQL query's statement count does not grow
        // with N.
        #[cfg(any(test, feature = "testing"))]
        let statements = Arc::new(std::sync::atomic::AtomicU64::new(0));
        #[cfg(any(test, feature = "testing"))]
        let counter = statements.clone();
        for conn in std::iter::once(&mut db).chain(channels.as_mut()) {
            #[cfg(any(test, feature = "testing"))]
            let counter = counter.clone();
            conn.set_metric_callback(move |info| {
                #[cfg(any(test, feature = "testing"))]
                counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tracing::trace!(target: "cairn::sql", sql = %info.statement.sql, "statement");
            });
        }
        Ok(Store {
            db,
            channels,
            url,
            index: Arc::default(),
            #[cfg(any(test, feature = "testing"))]
            statements,
        })
    }

    pub fn backend(&self) -> DatabaseBackend {
        self.db.get_database_backend()
    }

    /// How many SQL statements this store (all its clones) has run since it was opened.
    #[cfg(any(test, feature = "testing"))]
    pub fn statement_count(&self) -> u64 {
        self.statements.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn connection(&self) -> &DatabaseConnection {
        &self.db
    }

    /// Where the retrieval channels' statements run: on PostgreSQL a pool whose sessions
    /// plan each execution for its parameters (see [`Store::connect_tuned`]); on SQLite the
    /// one pool.
    pub fn channel_connection(&self) -> &DatabaseConnection {
        self.channels.as_ref().unwrap_or(&self.db)
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
    pub async fn listen(&self, channel: &str) -> StoreResult<Listener> {
        #[cfg(feature = "postgres")]
        {
            let mut l = sea_orm::sqlx::postgres::PgListener::connect(&self.url)
                .await
                .map_err(|e| StoreError::Db(DbErr::Custom(format!("LISTEN connect: {e}"))))?;
            l.listen(channel)
                .await
                .map_err(|e| StoreError::Db(DbErr::Custom(format!("LISTEN: {e}"))))?;
            Ok(Listener { inner: l })
        }
        #[cfg(not(feature = "postgres"))]
        {
            let _ = channel;
            Err(no_postgres_driver())
        }
    }

    /// Cheap liveness query for `/readyz`.
    pub async fn ping(&self) -> StoreResult<()> {
        self.db.ping().await?;
        Ok(())
    }
}

/// A PostgreSQL session's settings. Every session: the HNSW candidate list, and iterative
/// scans so that a filtered `ORDER BY … LIMIT 300` keeps scanning until 300 readable rows pass
/// (pgvector ≥ 0.8; the vector channel re-sorts exactly afterwards). The channels' sessions
/// also plan every execution for its parameters (see [`Store::connect_tuned`]).
#[cfg(feature = "postgres")]
fn pg_session(
    tuning: Tuning,
    custom_plans: bool,
) -> impl Fn(sea_orm::sqlx::postgres::PgConnectOptions) -> sea_orm::sqlx::postgres::PgConnectOptions
       + Send
       + Sync
       + 'static {
    move |o| {
        let mut settings = vec![
            ("hnsw.ef_search", tuning.ef_search.to_string()),
            ("hnsw.iterative_scan", "relaxed_order".to_owned()),
        ];
        if custom_plans {
            settings.push(("plan_cache_mode", "force_custom_plan".to_owned()));
        }
        o.options(settings)
    }
}

/// A connection LISTENing on one channel ([`Store::listen`]; PostgreSQL). Without the
/// `postgres` feature none can be made: a SQLite-only build never opens a PostgreSQL store.
pub struct Listener {
    #[cfg(feature = "postgres")]
    inner: sea_orm::sqlx::postgres::PgListener,
}

impl Listener {
    /// The payload of the next notification; an error when the connection is lost.
    pub async fn recv(&mut self) -> StoreResult<String> {
        #[cfg(feature = "postgres")]
        {
            self.inner
                .recv()
                .await
                .map(|n| n.payload().to_owned())
                .map_err(|e| StoreError::Db(DbErr::Custom(format!("LISTEN: {e}"))))
        }
        #[cfg(not(feature = "postgres"))]
        {
            Err(no_postgres_driver())
        }
    }
}

/// What LISTEN answers in a build without the `postgres` feature.
#[cfg(not(feature = "postgres"))]
fn no_postgres_driver() -> StoreError {
    StoreError::Db(DbErr::Custom(
        "LISTEN: this build has no PostgreSQL driver".to_owned(),
    ))
}
