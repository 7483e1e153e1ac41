//! Repositories over sea-orm: the only module that builds queries.
//!
//! Invariants:
//! - Nothing outside `store` writes SQL or uses sea-orm query builders.
//! - Every query that returns document-derived rows filters with [`readable::Readable`], in
//!   the query itself, never by loading rows and filtering after.
//! - Backend differences (placeholders, vector and lexical columns) stay inside this module.
//! - Rows are read by column name into typed structs (`FromQueryResult`), never by position;
//!   the SQL aliases every column whose name is not already the field's.
//!
//! # Layout
//!
//! [`Store`] is one handle (a pool inside, cheap to clone); each file adds the methods of one
//! concept to it with its own `impl Store` block, so a method's file is its concept:
//!
//! - `connection`: opening and tuning the pool ([`Tuning`]), migrations, the statement
//!   counter, liveness, NOTIFY/LISTEN.
//! - `accounts`: teams, users, tokens, and the one way a user row becomes a principal
//!   ([`principal_of`], [`role_of`]).
//! - `corpora`: corpora and their readable counts ([`CorpusCounts`]).
//! - [`documents`]: documents, versions, chunks and content blobs; storing an ingested
//!   document in one transaction; the batched, bounded readers behind the dataloaders.
//! - [`search`]: the vector channel per backend and the reads that hydrate results;
//!   [`lexical`]: the lexical channel (BM25 over Cairn's own postings).
//! - [`vindex`]: SQLite's in-memory exact vector index.
//! - [`kg`]: the knowledge graph (an extraction stored in one transaction; the mention rule
//!   as SQL).
//! - [`jobs`]: the durable job queue's rows (claim under lease, finish, cancel).
//! - `models`: a team's own LLM endpoints per role (`team_models`; the key arrives sealed).
//! - `processing`: document types per team, classifications and processing results.
//! - `audit`: usage and audit rows.
//!
//! and the helpers every file shares:
//!
//! - [`readable`]: the readable-document predicate as SQL ([`readable::Readable`]).
//! - `sql`: the query text builder (`$n` or `?` placeholders per backend).
//! - [`vector`]: embeddings' stored forms (blob, pgvector literal), dot, normalize, cosine.
//!
//! The files depend on each other one way only (no cycle; besides this module's [`Store`]
//! and [`StoreError`], which every file uses):
//!
//! ```text
//! documents ─▶ kg, lexical, jobs        accounts ─▶ audit
//! lexical ───▶ search (its hit type)    search ──▶ vindex ─▶ vector
//! any file ──▶ readable ─▶ sql          vector, sql: nothing of the store's
//! ```
//!
//! Test-only items (constructors that skip the upload path, counters, readers only the tests
//! use, the statement the benches time) are compiled under `cfg(test)` or the crate's
//! `testing` feature only.

mod accounts;
mod audit;
mod connection;
mod corpora;
pub mod documents;
pub mod jobs;
pub mod kg;
pub mod lexical;
mod models;
mod processing;
pub mod readable;
pub mod search;
mod sql;
pub mod vector;
pub mod vindex;

use sea_orm::{ConnectionTrait, DatabaseConnection, DbErr, EntityTrait, Select, SqlErr};

/// A row read by a unique key (a primary key, a unique column). sea-orm's `.one()` appends
/// `LIMIT ?` bound to 1, and SQLite (3.4x and later) counts a bound `LIMIT` as part of the
/// query plan: the statement is prepared again, parsed and planned, on every execution. A
/// unique key needs no `LIMIT`, so these read every matching row (at most one) and keep one
/// cached statement per connection. The per-request reads (the token's check) go through here.
pub(crate) trait ByKey<E: EntityTrait> {
    async fn unique<C: ConnectionTrait>(self, db: &C) -> Result<Option<E::Model>, DbErr>;
}

impl<E: EntityTrait> ByKey<E> for Select<E> {
    async fn unique<C: ConnectionTrait>(self, db: &C) -> Result<Option<E::Model>, DbErr> {
        Ok(self.all(db).await?.into_iter().next())
    }
}

pub use accounts::{principal_of, role_of};
pub use audit::NewUsage;
pub use connection::Tuning;
pub use corpora::CorpusCounts;
#[cfg(feature = "testing")]
pub use documents::NewDocument;
pub use models::NewTeamModel;
pub use processing::{NewClassification, NewDocumentType, NewProcessingResult};
#[cfg(feature = "testing")]
pub use search::pg_vector_channel_statement;
#[cfg(any(test, feature = "testing"))]
pub use vector::EMBEDDING_DIM;

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

/// The database handle. Cheap to clone (a pool inside). Opened by [`Store::connect`].
#[derive(Clone, Debug)]
pub struct Store {
    db: DatabaseConnection,
    /// PostgreSQL: the retrieval channels' own pool (custom plans); `None` on SQLite.
    channels: Option<DatabaseConnection>,
    /// PostgreSQL's LISTEN opens a connection of its own from it.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    url: String,
    /// SQLite's in-memory vector index (unused on PostgreSQL).
    index: std::sync::Arc<search::IndexSlot>,
    /// SQL statements run so far through this handle and its clones (tests).
    #[cfg(any(test, feature = "testing"))]
    statements: std::sync::Arc<std::sync::atomic::AtomicU64>,
}
