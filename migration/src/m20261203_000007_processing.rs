//! Document processing (seed 004): a taxonomy of document types per team, a classification
//! per document version, and the results of `processDocument`.

use sea_orm_migration::prelude::*;

const POSTGRES_UP: &str = include_str!("sql/postgres_processing.sql");
const SQLITE_UP: &str = include_str!("sql/sqlite_processing.sql");
const DOWN: &str = include_str!("sql/processing_down.sql");

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
        manager.get_connection().execute_unprepared(DOWN).await?;
        Ok(())
    }
}
