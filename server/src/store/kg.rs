//! The knowledge graph's tables: entities, relations, mentions and the per-version extraction
//! marker (seed 001, DESIGN.md §7).
//!
//! * Writing an extraction is one transaction: upsert entities on `(team, type, name_norm)`
//!   (first spelling kept), write what this document version says each entity is
//!   (`kg_descriptions`: its description and anchor), upsert relations on
//!   `(team, subject, predicate, object)`, replace the document's mentions (every other
//!   version's mentions go: supersession), prune what is left without a mention, write the
//!   marker.
//! * The mention rule is SQL: an entity or relation is returned only if it has a mention on a
//!   document the principal can read ([`Readable`]), and a mention only if its document is
//!   readable. Every reader takes a batch of ids (dataloaders).
//! * Descriptions follow the mention rule too: an entity's description is the longest one
//!   among the `kg_descriptions` rows of documents the principal can read (else none), chosen
//!   in SQL inside the same query that returns the entity.
//! * Entity anchors ("name: description", or the name alone, embedded) live beside their
//!   description in `kg_descriptions.embedding`, so similarity is only ever computed against
//!   text the caller could read: an entity's score is its best readable anchor. PostgreSQL
//!   computes the cosine with pgvector's `<=>`; SQLite reads the readable anchors and scores
//!   them in Rust (v1: an exact scan on both).

use chrono::Utc;
use sea_orm::{
    ConnectionTrait, DatabaseBackend, DatabaseTransaction, FromQueryResult, TransactionTrait,
};

use super::readable::Readable;
use super::sql::Sql;
use super::vector::{blob_f32, cosine, f32_blob, vector_literal};
use super::{Store, StoreError, StoreResult};
use crate::auth::Principal;

/// An entity row (without its anchor), as `push_entity_cols` selects it.
#[derive(Clone, Debug, PartialEq, FromQueryResult)]
pub struct KgEntity {
    pub id: i64,
    pub team_id: i64,
    pub entity_type: String,
    pub name: String,
    pub name_norm: String,
    pub description: Option<String>,
}

/// A relation row, as `RELATION_COLS` selects it.
#[derive(Clone, Debug, PartialEq, FromQueryResult)]
pub struct KgRelation {
    pub id: i64,
    pub subject_id: i64,
    pub predicate: String,
    pub object_id: i64,
}

/// A readable mention, with what a citation needs, as `MENTION_COLS` selects it.
#[derive(Clone, Debug, PartialEq, FromQueryResult)]
pub struct KgMention {
    pub id: i64,
    pub entity_id: Option<i64>,
    pub relation_id: Option<i64>,
    pub document_id: i64,
    pub document_title: String,
    pub version: i32,
    pub snippet: String,
    pub char_start: Option<i32>,
}

/// What [`Store::store_extraction`] wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoredExtraction {
    /// False when the document vanished or moved on to another version meanwhile (nothing
    /// written).
    pub stored: bool,
    pub entities: usize,
    pub relations: usize,
    pub mentions: usize,
}

/// The entity columns of [`KgEntity`], the description being the longest readable one (a
/// correlated subquery under the readable rule; NULL when no readable document describes the
/// entity).
fn push_entity_cols(q: &mut Sql, p: &Principal) {
    q.push("e.id AS id, e.team_id AS team_id, e.type AS entity_type, e.name AS name, e.name_norm AS name_norm, (SELECT kd.description FROM kg_descriptions kd JOIN documents dd ON dd.id = kd.document_id WHERE kd.entity_id = e.id AND kd.description IS NOT NULL AND ");
    Readable::new(p).push_documents(q, "dd");
    q.push(" ORDER BY length(kd.description) DESC, kd.id LIMIT 1) AS description");
}
/// The columns of [`KgRelation`] over `kg_relations r`.
const RELATION_COLS: &str =
    "r.id AS id, r.subject_id AS subject_id, r.predicate AS predicate, r.object_id AS object_id";
/// The columns of [`KgMention`] over `kg_mentions m JOIN documents d`.
const MENTION_COLS: &str = "m.id AS id, m.entity_id AS entity_id, m.relation_id AS relation_id, m.document_id AS document_id, d.title AS document_title, m.version AS version, m.snippet AS snippet, m.char_start AS char_start";

/// The version a document is at now (`documents.current_version`).
#[derive(Debug, FromQueryResult)]
struct CurrentVersion {
    current_version: i32,
}

/// The id an entity or relation upsert returned (`RETURNING id`).
#[derive(Debug, FromQueryResult)]
struct Upserted {
    id: i64,
}

/// An entity's best anchor cosine among readable documents (PostgreSQL computes it).
#[derive(Debug, FromQueryResult)]
struct EntityCosine {
    entity_id: i64,
    cosine: f32,
}

/// One readable anchor of an entity, as SQLite stores it (scored in Rust).
#[derive(Debug, FromQueryResult)]
struct EntityAnchor {
    entity_id: i64,
    embedding: Vec<u8>,
}

/// A document whose current version has no extraction marker.
#[derive(Debug, FromQueryResult)]
struct UnextractedDocument {
    id: i64,
    current_version: i32,
}

/// How many extraction markers a team wrote in a window.
#[derive(Debug, FromQueryResult)]
struct MarkerCount {
    markers: i64,
}

/// One version of a document that carries an extraction marker.
#[cfg(any(test, feature = "testing"))]
#[derive(Debug, FromQueryResult)]
struct ExtractionMarker {
    version: i32,
}

/// ` EXISTS (a mention of <col> on a readable document)`.
fn push_has_readable_mention(q: &mut Sql, p: &Principal, mention_col: &str, owner: &str) {
    q.push(" EXISTS (SELECT 1 FROM kg_mentions vm JOIN documents vd ON vd.id = vm.document_id WHERE vm.")
        .push(mention_col)
        .push(" = ")
        .push(owner)
        .push(" AND ");
    Readable::new(p).push_documents(q, "vd");
    q.push(")");
}

/// `LIKE` pattern for a substring match, with the pattern characters escaped (`\`).
fn like_contains(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('%');
    for c in s.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('%');
    out
}

impl Store {
    /// Stores one document version's extraction in one transaction (see the module docs).
    /// `anchors[i]` is the embedding of entity `i` ("name: description"), when available.
    pub async fn store_extraction(
        &self,
        team_id: i64,
        document_id: i64,
        version: i32,
        extractor: &str,
        x: &cairn_kg::Extraction,
        anchors: &[Option<Vec<f32>>],
    ) -> StoreResult<StoredExtraction> {
        let backend = self.backend();
        let tx = self.connection().begin().await?;
        lock_team_graph(&tx, team_id).await?;
        // Replace this document's mentions (of every version: supersession, and idempotence
        // when the same version is extracted again), provided the document is still at this
        // version. A write first, so SQLite takes its write lock at the start (a deferred
        // transaction that read first could not upgrade after a concurrent commit).
        let mut q = Sql::new(backend);
        q.push("DELETE FROM kg_mentions WHERE document_id = ")
            .bind(document_id)
            .push(" AND (SELECT d.current_version FROM documents d WHERE d.id = ")
            .bind(document_id)
            .push(") = ")
            .bind(version);
        tx.execute_raw(q.build()).await?;
        let mut q = Sql::new(backend);
        q.push("SELECT current_version FROM documents WHERE id = ")
            .bind(document_id);
        let current: Option<i32> = CurrentVersion::find_by_statement(q.build())
            .one(&tx)
            .await?
            .map(|r| r.current_version);
        if current != Some(version) {
            // A newer version supersedes this one (or the document is gone): write nothing.
            tx.rollback().await?;
            return Ok(StoredExtraction::default());
        }

        // What this document said about its entities before goes with its mentions.
        let mut q = Sql::new(backend);
        q.push("DELETE FROM kg_descriptions WHERE document_id = ")
            .bind(document_id);
        tx.execute_raw(q.build()).await?;

        let mut entity_ids = Vec::with_capacity(x.entities.len());
        let mut mentions = 0usize;
        for (i, e) in x.entities.iter().enumerate() {
            let mut q = Sql::new(backend);
            q.push(
                "INSERT INTO kg_entities (team_id, type, name, name_norm, first_seen_at) VALUES (",
            )
            .bind(team_id)
            .push(", ")
            .bind(e.entity_type.clone())
            .push(", ")
            .bind(e.name.clone())
            .push(", ")
            .bind(e.name_norm.clone())
            .push(", ")
            .bind(Utc::now());
            // First spelling wins (the no-op update makes RETURNING answer on conflict).
            q.push(") ON CONFLICT (team_id, type, name_norm) DO UPDATE SET name = kg_entities.name RETURNING id");
            let id = Upserted::find_by_statement(q.build())
                .one(&tx)
                .await?
                .ok_or_else(|| StoreError::Corrupt("entity upsert returned no row".into()))?
                .id;
            entity_ids.push(id);
            if e.mentions.is_empty() {
                continue;
            }
            let description = (!e.description.is_empty()).then(|| e.description.clone());
            let anchor = anchors.get(i).cloned().flatten();
            insert_description(&tx, team_id, id, document_id, version, description, anchor).await?;
            for m in &e.mentions {
                insert_mention(&tx, team_id, Some(id), None, document_id, version, m).await?;
                mentions += 1;
            }
        }
        let mut relations = 0usize;
        for r in &x.relations {
            let (Some(&s), Some(&o)) = (entity_ids.get(r.subject), entity_ids.get(r.object)) else {
                return Err(StoreError::Corrupt(
                    "relation points outside its extraction".into(),
                ));
            };
            let mut q = Sql::new(backend);
            q.push("INSERT INTO kg_relations (team_id, subject_id, predicate, object_id, first_seen_at) VALUES (")
                .bind(team_id)
                .push(", ")
                .bind(s)
                .push(", ")
                .bind(r.predicate.clone())
                .push(", ")
                .bind(o)
                .push(", ")
                .bind(Utc::now());
            q.push(") ON CONFLICT (team_id, subject_id, predicate, object_id) DO UPDATE SET predicate = excluded.predicate RETURNING id");
            let id = Upserted::find_by_statement(q.build())
                .one(&tx)
                .await?
                .ok_or_else(|| StoreError::Corrupt("relation upsert returned no row".into()))?
                .id;
            relations += 1;
            for m in &r.mentions {
                insert_mention(&tx, team_id, None, Some(id), document_id, version, m).await?;
                mentions += 1;
            }
        }
        prune_orphans(&tx, team_id).await?;
        let mut q = Sql::new(backend);
        q.push("INSERT INTO kg_extractions (document_id, version, entities, relations, extractor, extracted_at) VALUES (")
            .bind(document_id)
            .push(", ")
            .bind(version)
            .push(", ")
            .bind(x.entities.len() as i32)
            .push(", ")
            .bind(x.relations.len() as i32)
            .push(", ")
            .bind(extractor.to_owned())
            .push(", ")
            .bind(Utc::now());
        q.push(") ON CONFLICT (document_id, version) DO UPDATE SET entities = excluded.entities, relations = excluded.relations, extractor = excluded.extractor, extracted_at = excluded.extracted_at");
        tx.execute_raw(q.build()).await?;
        tx.commit().await?;
        Ok(StoredExtraction {
            stored: true,
            entities: x.entities.len(),
            relations,
            mentions,
        })
    }

    /// Entities among `ids` with at least one mention `p` can read (dataloader batch).
    pub async fn visible_entities(&self, p: &Principal, ids: &[i64]) -> StoreResult<Vec<KgEntity>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = Sql::new(self.backend());
        q.push("SELECT ");
        push_entity_cols(&mut q, p);
        q.push(" FROM kg_entities e WHERE e.id IN ")
            .push_list(ids.iter().copied())
            .push(" AND");
        push_has_readable_mention(&mut q, p, "entity_id", "e.id");
        q.push(" ORDER BY e.id");
        Ok(KgEntity::find_by_statement(q.build())
            .all(self.connection())
            .await?)
    }

    /// The readable mentions of the entities among `ids`, by entity then id (one query).
    pub async fn readable_mentions_of_entities(
        &self,
        p: &Principal,
        ids: &[i64],
    ) -> StoreResult<Vec<KgMention>> {
        self.readable_mentions(p, "entity_id", ids).await
    }

    /// The readable mentions of the relations among `ids`, by relation then id (one query).
    pub async fn readable_mentions_of_relations(
        &self,
        p: &Principal,
        ids: &[i64],
    ) -> StoreResult<Vec<KgMention>> {
        self.readable_mentions(p, "relation_id", ids).await
    }

    async fn readable_mentions(
        &self,
        p: &Principal,
        col: &str,
        ids: &[i64],
    ) -> StoreResult<Vec<KgMention>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = Sql::new(self.backend());
        q.push("SELECT ")
            .push(MENTION_COLS)
            .push(" FROM kg_mentions m JOIN documents d ON d.id = m.document_id WHERE m.")
            .push(col)
            .push(" IN ")
            .push_list(ids.iter().copied())
            .push(" AND ");
        Readable::new(p).push_documents(&mut q, "d");
        q.push(" ORDER BY m.").push(col).push(", m.id");
        Ok(KgMention::find_by_statement(q.build())
            .all(self.connection())
            .await?)
    }

    /// Relations touching (as subject or object) the entities among `ids` that have a
    /// readable mention (one query).
    pub async fn visible_relations_of_entities(
        &self,
        p: &Principal,
        ids: &[i64],
    ) -> StoreResult<Vec<KgRelation>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = Sql::new(self.backend());
        q.push("SELECT ")
            .push(RELATION_COLS)
            .push(" FROM kg_relations r WHERE (r.subject_id IN ")
            .push_list(ids.iter().copied())
            .push(" OR r.object_id IN ")
            .push_list(ids.iter().copied())
            .push(") AND");
        push_has_readable_mention(&mut q, p, "relation_id", "r.id");
        q.push(" ORDER BY r.id");
        Ok(KgRelation::find_by_statement(q.build())
            .all(self.connection())
            .await?)
    }

    /// One page of visible entities by id: optionally of one type, optionally whose
    /// normalized name contains `name_norm`.
    pub async fn find_entities(
        &self,
        p: &Principal,
        name_norm: Option<&str>,
        entity_type: Option<&str>,
        after: Option<i64>,
        limit: u64,
    ) -> StoreResult<Vec<KgEntity>> {
        let mut q = Sql::new(self.backend());
        q.push("SELECT ");
        push_entity_cols(&mut q, p);
        q.push(" FROM kg_entities e WHERE");
        push_has_readable_mention(&mut q, p, "entity_id", "e.id");
        if let Some(t) = entity_type {
            q.push(" AND e.type = ").bind(t.to_owned());
        }
        if let Some(n) = name_norm.filter(|n| !n.is_empty()) {
            q.push(" AND e.name_norm LIKE ")
                .bind(like_contains(n))
                .push(" ESCAPE '\\'");
        }
        if let Some(a) = after {
            q.push(" AND e.id > ").bind(a);
        }
        q.push(" ORDER BY e.id LIMIT ").count(limit);
        Ok(KgEntity::find_by_statement(q.build())
            .all(self.connection())
            .await?)
    }

    /// Visible entities whose normalized name contains `name_norm`, best first: exact, then
    /// prefix, then shorter names; at most `limit`.
    pub async fn entities_by_name(
        &self,
        p: &Principal,
        name_norm: &str,
        entity_type: Option<&str>,
        limit: u64,
    ) -> StoreResult<Vec<KgEntity>> {
        let mut q = Sql::new(self.backend());
        q.push("SELECT ");
        push_entity_cols(&mut q, p);
        q.push(" FROM kg_entities e WHERE e.name_norm LIKE ")
            .bind(like_contains(name_norm))
            .push(" ESCAPE '\\' AND");
        push_has_readable_mention(&mut q, p, "entity_id", "e.id");
        if let Some(t) = entity_type {
            q.push(" AND e.type = ").bind(t.to_owned());
        }
        q.push(" ORDER BY CASE WHEN e.name_norm = ")
            .bind(name_norm.to_owned())
            .push(" THEN 0 WHEN e.name_norm LIKE ")
            .bind(like_contains(name_norm).trim_start_matches('%').to_owned())
            .push(" ESCAPE '\\' THEN 1 ELSE 2 END, length(e.name_norm), e.id LIMIT ")
            .count(limit);
        Ok(KgEntity::find_by_statement(q.build())
            .all(self.connection())
            .await?)
    }

    /// Visible entities nearest to `query` by anchor cosine, best first, with the cosine. An
    /// entity's score is its best anchor among the documents `p` can read (see the module
    /// docs). PostgreSQL: pgvector `<=>`. SQLite: the readable anchors are read and scored in
    /// Rust (exact; fine at v1's sizes).
    pub async fn entities_by_vector(
        &self,
        p: &Principal,
        query: &[f32],
        entity_type: Option<&str>,
        limit: usize,
    ) -> StoreResult<Vec<(i64, f32)>> {
        let mut q = Sql::new(self.backend());
        let from = |q: &mut Sql| {
            q.push(" FROM kg_descriptions kd JOIN documents vd ON vd.id = kd.document_id JOIN kg_entities e ON e.id = kd.entity_id WHERE kd.embedding IS NOT NULL AND ");
            Readable::new(p).push_documents(q, "vd");
            if let Some(t) = entity_type {
                q.push(" AND e.type = ").bind(t.to_owned());
            }
        };
        match self.backend() {
            DatabaseBackend::Postgres => {
                q.push("SELECT kd.entity_id AS entity_id, MAX(1 - (kd.embedding <=> CAST(")
                    .bind(vector_literal(query))
                    .push(" AS vector)))::real AS cosine");
                from(&mut q);
                q.push(" GROUP BY kd.entity_id ORDER BY cosine DESC, kd.entity_id LIMIT ")
                    .count(limit as u64);
                let rows = EntityCosine::find_by_statement(q.build())
                    .all(self.connection())
                    .await?;
                Ok(rows.into_iter().map(|r| (r.entity_id, r.cosine)).collect())
            }
            _ => {
                q.push("SELECT kd.entity_id AS entity_id, kd.embedding AS embedding");
                from(&mut q);
                let rows = EntityAnchor::find_by_statement(q.build())
                    .all(self.connection())
                    .await?;
                let mut best: std::collections::HashMap<i64, f32> =
                    std::collections::HashMap::with_capacity(rows.len());
                for r in &rows {
                    if let Some(v) = blob_f32(&r.embedding) {
                        let c = cosine(query, &v);
                        best.entry(r.entity_id)
                            .and_modify(|b| *b = b.max(c))
                            .or_insert(c);
                    }
                }
                let mut scored: Vec<(i64, f32)> = best.into_iter().collect();
                scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                scored.truncate(limit);
                Ok(scored)
            }
        }
    }

    /// Documents of `p`'s team that `p` can read and whose current version has no
    /// extraction marker, by id, at most `limit`: of one corpus, or among `ids`, or all.
    pub async fn unextracted_documents(
        &self,
        p: &Principal,
        corpus_id: Option<i64>,
        ids: Option<&[i64]>,
        limit: u64,
    ) -> StoreResult<Vec<(i64, i32)>> {
        let mut q = Sql::new(self.backend());
        q.push("SELECT d.id AS id, d.current_version AS current_version FROM documents d WHERE d.team_id = ")
            .bind(p.team_id);
        if let Some(c) = corpus_id {
            q.push(" AND d.corpus_id = ").bind(c);
        }
        if let Some(ids) = ids {
            if ids.is_empty() {
                return Ok(Vec::new());
            }
            q.push(" AND d.id IN ").push_list(ids.iter().copied());
        }
        q.push(" AND d.chunk_count > 0 AND NOT EXISTS (SELECT 1 FROM kg_extractions x WHERE x.document_id = d.id AND x.version = d.current_version) AND ");
        Readable::new(p).push_documents(&mut q, "d");
        q.push(" ORDER BY d.id LIMIT ").count(limit);
        let rows = UnextractedDocument::find_by_statement(q.build())
            .all(self.connection())
            .await?;
        Ok(rows
            .into_iter()
            .map(|r| (r.id, r.current_version))
            .collect())
    }

    /// The team's extraction markers written since `since` (the knowledge-extraction quota's
    /// durable count: one per document version extracted, refusals included; a deleted
    /// document's markers go with it).
    pub async fn kg_extractions_since(
        &self,
        team_id: i64,
        since: chrono::DateTime<Utc>,
    ) -> StoreResult<u64> {
        let mut q = Sql::new(self.backend());
        q.push("SELECT COUNT(*) AS markers FROM kg_extractions x JOIN documents d ON d.id = x.document_id WHERE d.team_id = ")
            .bind(team_id)
            .push(" AND ");
        self.ts(&mut q, "x.extracted_at");
        q.push(" >= ");
        self.ts_bind(&mut q, since);
        let n: i64 = MarkerCount::find_by_statement(q.build())
            .one(self.connection())
            .await?
            .map_or(0, |r| r.markers);
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// The versions of a document that carry an extraction marker (tests).
    #[cfg(any(test, feature = "testing"))]
    pub async fn extraction_markers(&self, document_id: i64) -> StoreResult<Vec<i32>> {
        let mut q = Sql::new(self.backend());
        q.push("SELECT version FROM kg_extractions WHERE document_id = ")
            .bind(document_id)
            .push(" ORDER BY version");
        let rows = ExtractionMarker::find_by_statement(q.build())
            .all(self.connection())
            .await?;
        Ok(rows.into_iter().map(|r| r.version).collect())
    }
}

async fn insert_mention(
    tx: &DatabaseTransaction,
    team_id: i64,
    entity_id: Option<i64>,
    relation_id: Option<i64>,
    document_id: i64,
    version: i32,
    m: &cairn_kg::Mention,
) -> StoreResult<()> {
    let mut q = Sql::new(tx.get_database_backend());
    q.push("INSERT INTO kg_mentions (team_id, entity_id, relation_id, document_id, version, snippet, char_start, extracted_at) VALUES (")
        .bind(team_id)
        .push(", ")
        .bind(entity_id)
        .push(", ")
        .bind(relation_id)
        .push(", ")
        .bind(document_id)
        .push(", ")
        .bind(version)
        .push(", ")
        .bind(m.snippet.clone())
        .push(", ")
        .bind(i32::try_from(m.char_offset).ok())
        .push(", ")
        .bind(Utc::now())
        .push(")");
    tx.execute_raw(q.build()).await?;
    Ok(())
}

/// What one document version says an entity is: its description (if any) and the anchor
/// built from it. An entity named twice in one extraction keeps the longer description.
async fn insert_description(
    tx: &DatabaseTransaction,
    team_id: i64,
    entity_id: i64,
    document_id: i64,
    version: i32,
    description: Option<String>,
    anchor: Option<Vec<f32>>,
) -> StoreResult<()> {
    let backend = tx.get_database_backend();
    let mut q = Sql::new(backend);
    q.push("INSERT INTO kg_descriptions (team_id, entity_id, document_id, version, description, embedding) VALUES (")
        .bind(team_id)
        .push(", ")
        .bind(entity_id)
        .push(", ")
        .bind(document_id)
        .push(", ")
        .bind(version)
        .push(", ")
        .bind(description)
        .push(", ");
    match (backend, anchor) {
        (DatabaseBackend::Postgres, Some(v)) => {
            q.push("CAST(").bind(vector_literal(&v)).push(" AS vector)");
        }
        (_, Some(v)) => {
            q.bind(f32_blob(&v));
        }
        (_, None) => {
            q.push("NULL");
        }
    }
    q.push(") ON CONFLICT (entity_id, document_id) DO UPDATE SET \
        description = CASE WHEN length(COALESCE(excluded.description, '')) > length(COALESCE(kg_descriptions.description, '')) THEN excluded.description ELSE kg_descriptions.description END, \
        embedding = CASE WHEN kg_descriptions.embedding IS NULL OR length(COALESCE(excluded.description, '')) > length(COALESCE(kg_descriptions.description, '')) THEN COALESCE(excluded.embedding, kg_descriptions.embedding) ELSE kg_descriptions.embedding END");
    tx.execute_raw(q.build()).await?;
    Ok(())
}

/// The graph forgets what a document said (its mentions, descriptions and anchors) and prunes
/// what nothing supports any more, inside the caller's transaction: on delete, and when a new
/// version lands (the graph never says what the current version no longer says).
pub(crate) async fn forget_document(
    tx: &DatabaseTransaction,
    team_id: i64,
    document_id: i64,
) -> StoreResult<()> {
    let backend = tx.get_database_backend();
    lock_team_graph(tx, team_id).await?;
    for table in ["kg_mentions", "kg_descriptions"] {
        let mut q = Sql::new(backend);
        q.push("DELETE FROM ")
            .push(table)
            .push(" WHERE document_id = ")
            .bind(document_id);
        tx.execute_raw(q.build()).await?;
    }
    prune_orphans(tx, team_id).await
}

/// Serializes writers of one team's graph on PostgreSQL (a transaction-scoped advisory lock),
/// so that pruning in one transaction never deletes a row another is attaching a mention to.
/// SQLite has a single writer anyway.
pub(crate) async fn lock_team_graph(tx: &DatabaseTransaction, team_id: i64) -> StoreResult<()> {
    if tx.get_database_backend() == DatabaseBackend::Postgres {
        let mut q = Sql::new(DatabaseBackend::Postgres);
        // 0x6b67 ("kg") in the high bits keeps the key apart from any other advisory lock.
        q.push("SELECT pg_advisory_xact_lock(")
            .bind((0x6b67_i64 << 48) | (team_id & 0xffff_ffff_ffff))
            .push(")");
        tx.execute_raw(q.build()).await?;
    }
    Ok(())
}

/// Deletes the team's relations, then entities, that no mention supports any more.
pub(crate) async fn prune_orphans(tx: &DatabaseTransaction, team_id: i64) -> StoreResult<()> {
    let backend = tx.get_database_backend();
    let mut q = Sql::new(backend);
    q.push("DELETE FROM kg_relations WHERE team_id = ")
        .bind(team_id)
        .push(
            " AND NOT EXISTS (SELECT 1 FROM kg_mentions m WHERE m.relation_id = kg_relations.id)",
        );
    tx.execute_raw(q.build()).await?;
    let mut q = Sql::new(backend);
    q.push("DELETE FROM kg_entities WHERE team_id = ")
        .bind(team_id)
        .push(" AND NOT EXISTS (SELECT 1 FROM kg_mentions m WHERE m.entity_id = kg_entities.id)");
    tx.execute_raw(q.build()).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_patterns_are_escaped() {
        assert_eq!(like_contains("a_b%c"), "%a\\_b\\%c%");
    }
}
