//! The lexical channel's postings as blocks: rows per (term, document, part) holding the
//! postings of the term in the document's current chunks, packed (`lexical_blocks`, parts of
//! at most ~1 KB, stored in key order on both backends), instead of one row per (term,
//! chunk). A query reads about one row per document per term and scores in Rust; see `server/src/store/lexical.rs` for the encoding and ARCHITECTURE.md ("Search")
//! for the measurements that chose it.
//!
//! The blocks start empty: the migration clears `lexical_documents` and `lexical_terms`, and
//! the server indexes every document again at start-up (`Store::backfill_lexical`, the same
//! path migration 4 used), with the analyzer in Rust, which SQL cannot run.

use sea_orm_migration::prelude::*;

const POSTGRES_UP: &str = include_str!("sql/postgres_lexical_blocks.sql");
const SQLITE_UP: &str = include_str!("sql/sqlite_lexical_blocks.sql");
const POSTGRES_DOWN: &str = include_str!("sql/postgres_lexical_blocks_down.sql");
const SQLITE_DOWN: &str = include_str!("sql/sqlite_lexical_blocks_down.sql");

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
