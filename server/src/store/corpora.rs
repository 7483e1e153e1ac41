//! Corpora: a team's own and the system corpora (no team; readable by every team), and their
//! document and chunk counts over what the asking principal may read.
//!
//! A corpus another team owns is answered exactly like a missing one ([`visible_to_team`]).

use chrono::Utc;
use entity::prelude::*;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, EntityTrait, FromQueryResult, QueryFilter, QueryOrder,
    QuerySelect, Set,
};

use super::readable::Readable;
use super::sql::Sql;
use super::{ByKey, Store, StoreError, StoreResult};
use crate::auth::Principal;

/// Counts for one corpus, over the documents the asking principal may read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CorpusCounts {
    pub documents: i64,
    pub chunks: i64,
}

/// A row of [`Store::corpus_counts`]: one corpus's readable documents and their chunks.
#[derive(Debug, FromQueryResult)]
struct CorpusCountsRow {
    corpus_id: i64,
    documents: i64,
    chunks: i64,
}

impl Store {
    pub async fn create_corpus(
        &self,
        team_id: Option<i64>,
        name: &str,
        description: Option<&str>,
    ) -> StoreResult<Corpus> {
        let row = CorpusActive {
            team_id: Set(team_id),
            name: Set(name.to_owned()),
            description: Set(description.map(str::to_owned)),
            system: Set(team_id.is_none()),
            created_at: Set(Utc::now()),
            ..Default::default()
        };
        row.insert(&self.db)
            .await
            .map_err(|e| StoreError::from_write(e, &format!("a corpus named `{name}`")))
    }

    /// A corpus the team may see (its own or a system corpus); `None` otherwise, so that
    /// another team's corpus and a missing one look the same.
    pub async fn visible_corpus(&self, team_id: i64, id: i64) -> StoreResult<Option<Corpus>> {
        Ok(Corpora::find_by_id(id)
            .filter(visible_to_team(team_id))
            .unique(&self.db)
            .await?)
    }

    /// The team's own corpus with this name.
    pub async fn team_corpus_by_name(
        &self,
        team_id: i64,
        name: &str,
    ) -> StoreResult<Option<Corpus>> {
        Ok(Corpora::find()
            .filter(CorpusColumn::TeamId.eq(team_id))
            .filter(CorpusColumn::Name.eq(name))
            .one(&self.db)
            .await?)
    }

    /// The system corpus with this name (system corpora have no team).
    pub async fn system_corpus_by_name(&self, name: &str) -> StoreResult<Option<Corpus>> {
        Ok(Corpora::find()
            .filter(CorpusColumn::System.eq(true))
            .filter(CorpusColumn::Name.eq(name))
            .one(&self.db)
            .await?)
    }

    /// Corpora among `ids` that the team may see.
    pub async fn visible_corpora_by_ids(
        &self,
        team_id: i64,
        ids: &[i64],
    ) -> StoreResult<Vec<Corpus>> {
        Ok(Corpora::find()
            .filter(visible_to_team(team_id))
            .filter(CorpusColumn::Id.is_in(ids.iter().copied()))
            .all(&self.db)
            .await?)
    }

    /// Corpora the team may see, by id, after `after` (keyset pagination).
    pub async fn visible_corpora(
        &self,
        team_id: i64,
        after: Option<i64>,
        limit: u64,
    ) -> StoreResult<Vec<Corpus>> {
        let mut q = Corpora::find().filter(visible_to_team(team_id));
        if let Some(after) = after {
            q = q.filter(CorpusColumn::Id.gt(after));
        }
        Ok(q.order_by_asc(CorpusColumn::Id)
            .limit(limit)
            .all(&self.db)
            .await?)
    }

    /// Document and chunk counts of each corpus, over the documents `p` may read. One query.
    pub async fn corpus_counts(
        &self,
        p: &Principal,
        corpus_ids: &[i64],
    ) -> StoreResult<Vec<(i64, CorpusCounts)>> {
        if corpus_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = Sql::new(self.backend());
        q.push("SELECT d.corpus_id AS corpus_id, COUNT(*) AS documents, COALESCE(SUM(d.chunk_count), 0) AS chunks FROM documents d WHERE d.corpus_id IN ");
        q.push_list(corpus_ids.iter().copied());
        q.push(" AND ");
        Readable::new(p).push_documents(&mut q, "d");
        q.push(" GROUP BY d.corpus_id");
        let rows = CorpusCountsRow::find_by_statement(q.build())
            .all(&self.db)
            .await?;
        Ok(rows
            .into_iter()
            .map(|r| {
                (
                    r.corpus_id,
                    CorpusCounts {
                        documents: r.documents,
                        chunks: r.chunks,
                    },
                )
            })
            .collect())
    }
}

/// The team's own corpora and the system corpora.
fn visible_to_team(team_id: i64) -> sea_orm::Condition {
    sea_orm::Condition::any()
        .add(CorpusColumn::TeamId.eq(team_id))
        .add(CorpusColumn::System.eq(true))
}
