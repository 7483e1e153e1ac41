//! Model roles per team (seed 001, KG-7): `team_models` holds a team's own `chat` and
//! `utility` endpoints with the API key sealed, and `usage.role` names the role an LLM call
//! was spent on.

use sea_orm_migration::prelude::*;

const POSTGRES_UP: &str = include_str!("sql/postgres_team_models.sql");
const SQLITE_UP: &str = include_str!("sql/sqlite_team_models.sql");
const DOWN: &str = include_str!("sql/team_models_down.sql");

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
        // SQLite (3.35+) and PostgreSQL both drop a column.
        manager.get_connection().execute_unprepared(DOWN).await?;
        Ok(())
    }
}
