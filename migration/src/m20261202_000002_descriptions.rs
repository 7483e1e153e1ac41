//! Entity descriptions per document version (`kg_descriptions`), instead of one description
//! and anchor per entity that mixed text from documents with different readers.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend};

const POSTGRES_UP: &str = include_str!("sql/postgres_descriptions.sql");
const SQLITE_UP: &str = include_str!("sql/sqlite_descriptions.sql");

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
        let restore = match manager.get_database_backend() {
            DbBackend::Postgres => {
                "ALTER TABLE kg_entities ADD COLUMN description TEXT, ADD COLUMN embedding vector(384)"
            }
            _ => "ALTER TABLE kg_entities ADD COLUMN description TEXT; ALTER TABLE kg_entities ADD COLUMN embedding BLOB",
        };
        conn.execute_unprepared(restore).await?;
        conn.execute_unprepared("DROP TABLE IF EXISTS kg_descriptions")
            .await?;
        Ok(())
    }
}
