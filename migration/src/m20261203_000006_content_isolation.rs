//! Content isolation per team (seed 004, "Content-addressable storage"): a team with
//! `isolate_content` hashes its uploads with an HMAC keyed for that team, so its blobs are
//! never shared with another team.

use sea_orm_migration::prelude::*;

const UP: &str = include_str!("sql/content_isolation.sql");
const DOWN: &str = "ALTER TABLE teams DROP COLUMN isolate_content;";

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // The same statement on both backends (SQLite ≥ 3.23 knows FALSE).
        let sql = crate::sql_for(manager, UP, UP)?;
        manager.get_connection().execute_unprepared(sql).await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager.get_connection().execute_unprepared(DOWN).await?;
        Ok(())
    }
}
