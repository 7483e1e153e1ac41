//! The lexical channel's own postings (BM25 computed by Cairn, the same on both backends),
//! replacing FTS5 on SQLite and the generated `tsvector` on PostgreSQL, which ranked
//! differently from each other (PostgreSQL's `ts_rank` has no IDF).
//!
//! The tables start empty: the server indexes the chunks of an older database at start-up
//! (`Store::backfill_lexical`), with the analyzer in Rust, which SQL cannot run.

use sea_orm_migration::prelude::*;

const POSTGRES_UP: &str = include_str!("sql/postgres_bm25.sql");
const SQLITE_UP: &str = include_str!("sql/sqlite_bm25.sql");
const POSTGRES_DOWN: &str = include_str!("sql/postgres_bm25_down.sql");
const SQLITE_DOWN: &str = include_str!("sql/sqlite_bm25_down.sql");

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let sql = crate::sql_for(manager, POSTGRES_UP, SQLITE_UP)?;
        manager.get_connection().execute_unprepared(sql).await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let sql = crate::sql_for(manager, POSTGRES_DOWN, SQLITE_DOWN)?;
        manager.get_connection().execute_unprepared(sql).await?;
        Ok(())
    }
}
