//! SQLite's change sequence (`index_changes`), read by every process before a vector search so
//! that its in-memory index reflects what other processes committed. PostgreSQL needs none:
//! its vector search runs in the database.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend};

const SQLITE_UP: &str = include_str!("sql/sqlite_index_changes.sql");

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        if manager.get_database_backend() == DbBackend::Sqlite {
            manager
                .get_connection()
                .execute_unprepared(SQLITE_UP)
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        if manager.get_database_backend() == DbBackend::Sqlite {
            manager
                .get_connection()
                .execute_unprepared(
                    "DROP TRIGGER IF EXISTS documents_changed_insert; \
                     DROP TRIGGER IF EXISTS documents_changed_update; \
                     DROP TRIGGER IF EXISTS documents_changed_delete; \
                     DROP TABLE IF EXISTS index_changes;",
                )
                .await?;
        }
        Ok(())
    }
}
