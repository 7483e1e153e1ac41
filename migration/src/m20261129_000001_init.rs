//! The whole data model of DESIGN.md §3.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend};

const POSTGRES_UP: &str = include_str!("sql/postgres_init.sql");
const SQLITE_UP: &str = include_str!("sql/sqlite_init.sql");

/// Tables in dependency order, dropped in reverse by `down`.
const TABLES: &[&str] = &[
    "teams",
    "users",
    "api_tokens",
    "corpora",
    "content_blobs",
    "documents",
    "document_versions",
    "chunks",
    "kg_entities",
    "kg_relations",
    "kg_mentions",
    "kg_extractions",
    "jobs",
    "usage",
    "audit",
];

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
        let conn = manager.get_connection();
        if manager.get_database_backend() == DbBackend::Sqlite {
            conn.execute_unprepared("DROP TABLE IF EXISTS chunks_fts")
                .await?;
        }
        for table in TABLES.iter().rev() {
            conn.execute_unprepared(&format!("DROP TABLE IF EXISTS {table}"))
                .await?;
        }
        Ok(())
    }
}
