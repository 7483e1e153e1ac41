//! Cairn's schema, one migration list for both backends.
//!
//! Each migration carries hand-written SQL per backend (`sql/*.sql`): the two schemas differ
//! where the engines do (pgvector `vector(384)` + HNSW on PostgreSQL, little-endian f32 blobs
//! on SQLite; since migration 4 both keep the lexical channel's own postings, packed per term and
//! document since migration 8), and
//! keeping them as plain SQL makes the constraints the database enforces easy to read.
//! Every table of DESIGN.md §3 exists from the first migration on.

pub use sea_orm_migration::prelude::*;

mod m20261129_000001_init;
mod m20261202_000002_descriptions;
mod m20261202_000003_index_changes;
mod m20261202_000004_bm25;
mod m20261202_000005_team_models;
mod m20261203_000006_content_isolation;
mod m20261203_000007_processing;
mod m20261205_000008_lexical_blocks;

/// The SQL of one migration for the connected backend (SQLite or PostgreSQL).
pub(crate) fn sql_for<'a>(
    manager: &SchemaManager,
    postgres: &'a str,
    sqlite: &'a str,
) -> Result<&'a str, DbErr> {
    match manager.get_database_backend() {
        sea_orm_migration::sea_orm::DbBackend::Postgres => Ok(postgres),
        sea_orm_migration::sea_orm::DbBackend::Sqlite => Ok(sqlite),
        other => Err(DbErr::Migration(format!(
            "unsupported database backend {other:?}: Cairn runs on SQLite or PostgreSQL"
        ))),
    }
}

/// The migration list `cairn migrate` and `cairn serve` apply.
pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m20261129_000001_init::Migration),
            Box::new(m20261202_000002_descriptions::Migration),
            Box::new(m20261202_000003_index_changes::Migration),
            Box::new(m20261202_000004_bm25::Migration),
            Box::new(m20261202_000005_team_models::Migration),
            Box::new(m20261203_000006_content_isolation::Migration),
            Box::new(m20261203_000007_processing::Migration),
            Box::new(m20261205_000008_lexical_blocks::Migration),
        ]
    }
}
