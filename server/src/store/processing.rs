//! Document processing's rows: a team's document types (`document_types`, the starter set
//! written once per team), the classification of each document version
//! (`document_classifications`) and the results of processDocument (`processing_results`).
//! Classifications and results belong to a document version and go with it (foreign keys,
//! `ON DELETE CASCADE`); readers return only the current version's.

use chrono::Utc;
use entity::prelude::*;
use sea_orm::sea_query::{Expr, OnConflict};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder, Set, TransactionTrait};
use serde_json::Value as Json;

use super::{ByKey, Store, StoreError, StoreResult};

/// A document type to write.
#[derive(Clone, Debug)]
pub struct NewDocumentType {
    pub team_id: i64,
    pub name: String,
    pub description: String,
    pub schema: Option<Json>,
    /// `starter`, `admin` or `suggested`.
    pub origin: &'static str,
    pub created_by: Option<i64>,
}

/// A classification to write (replacing the version's earlier one).
#[derive(Clone, Debug)]
pub struct NewClassification {
    pub document_id: i64,
    pub version: i32,
    pub team_id: i64,
    pub type_name: String,
    pub confidence: f64,
    pub reason: String,
    /// `llm` or `zero_shot`.
    pub method: &'static str,
    pub model: String,
    pub created_by: Option<i64>,
}

/// A processing result to write.
#[derive(Clone, Debug)]
pub struct NewProcessingResult {
    pub document_id: i64,
    pub version: i32,
    pub team_id: i64,
    pub job_id: Option<i64>,
    pub type_name: String,
    pub confidence: f64,
    pub method: &'static str,
    pub extended_taxonomy: bool,
    pub schema_generated: bool,
    pub schema: Option<Json>,
    pub result: Json,
    pub measured_schema: Json,
    pub created_by: Option<i64>,
}

/// Only rows of the document's current version.
fn current_version(table: &str) -> Expr {
    Expr::cust(format!(
        "{table}.version = (SELECT d.current_version FROM documents d WHERE d.id = {table}.document_id)"
    ))
}

impl Store {
    /// Writes the starter types once per team (`teams.taxonomy_seeded`); a type the team
    /// already has by that name is kept. Whether this call wrote them.
    pub async fn seed_taxonomy(
        &self,
        team_id: i64,
        starters: &[NewDocumentType],
    ) -> StoreResult<bool> {
        let seeded = Teams::find_by_id(team_id)
            .unique(&self.db)
            .await?
            .is_none_or(|t| t.taxonomy_seeded);
        if seeded {
            return Ok(false);
        }
        let tx = self.db.begin().await?;
        let flipped = Teams::update_many()
            .col_expr(TeamColumn::TaxonomySeeded, Expr::value(true))
            .filter(TeamColumn::Id.eq(team_id))
            .filter(TeamColumn::TaxonomySeeded.eq(false))
            .exec(&tx)
            .await?;
        if flipped.rows_affected == 0 {
            // Another process seeded it meanwhile.
            return Ok(false);
        }
        for s in starters {
            DocumentTypes::insert(active_type(s))
                .on_conflict(
                    OnConflict::columns([DocumentTypeColumn::TeamId, DocumentTypeColumn::Name])
                        .do_nothing()
                        .to_owned(),
                )
                .exec_without_returning(&tx)
                .await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    /// The team's document types, by name.
    pub async fn document_types(&self, team_id: i64) -> StoreResult<Vec<DocumentType>> {
        Ok(DocumentTypes::find()
            .filter(DocumentTypeColumn::TeamId.eq(team_id))
            .order_by_asc(DocumentTypeColumn::Name)
            .all(&self.db)
            .await?)
    }

    /// One of the team's types by id.
    pub async fn document_type(&self, team_id: i64, id: i64) -> StoreResult<Option<DocumentType>> {
        Ok(DocumentTypes::find_by_id(id)
            .filter(DocumentTypeColumn::TeamId.eq(team_id))
            .unique(&self.db)
            .await?)
    }

    /// Adds a type; a name the team has is a conflict.
    pub async fn insert_document_type(&self, t: &NewDocumentType) -> StoreResult<DocumentType> {
        let id = DocumentTypes::insert(active_type(t))
            .exec(&self.db)
            .await
            .map_err(|e| StoreError::from_write(e, &format!("a document type named {}", t.name)))?
            .last_insert_id;
        self.document_type(t.team_id, id)
            .await?
            .ok_or_else(|| StoreError::Corrupt("document type not written".into()))
    }

    /// Changes a type's name, description and schema (`None` keeps a field; `Some(None)`
    /// clears the schema). The row after, or `None` when the team has no such type.
    pub async fn update_document_type(
        &self,
        team_id: i64,
        id: i64,
        name: Option<String>,
        description: Option<String>,
        schema: Option<Option<Json>>,
    ) -> StoreResult<Option<DocumentType>> {
        let Some(row) = self.document_type(team_id, id).await? else {
            return Ok(None);
        };
        let mut a: DocumentTypeActive = row.into();
        if let Some(n) = &name {
            a.name = Set(n.clone());
        }
        if let Some(d) = description {
            a.description = Set(d);
        }
        if let Some(s) = schema {
            a.schema = Set(s);
        }
        a.updated_at = Set(Utc::now());
        DocumentTypes::update(a).exec(&self.db).await.map_err(|e| {
            StoreError::from_write(
                e,
                &format!("a document type named {}", name.unwrap_or_default()),
            )
        })?;
        self.document_type(team_id, id).await
    }

    /// Removes a type; whether the team had it. Classifications that name it keep the name.
    pub async fn delete_document_type(&self, team_id: i64, id: i64) -> StoreResult<bool> {
        let r = DocumentTypes::delete_many()
            .filter(DocumentTypeColumn::TeamId.eq(team_id))
            .filter(DocumentTypeColumn::Id.eq(id))
            .exec(&self.db)
            .await?;
        Ok(r.rows_affected > 0)
    }

    /// Adds a suggested type unless the team has one by that name; the row either way.
    pub async fn insert_or_get_document_type(
        &self,
        t: &NewDocumentType,
    ) -> StoreResult<(DocumentType, bool)> {
        let r = DocumentTypes::insert(active_type(t))
            .on_conflict(
                OnConflict::columns([DocumentTypeColumn::TeamId, DocumentTypeColumn::Name])
                    .do_nothing()
                    .to_owned(),
            )
            .exec_without_returning(&self.db)
            .await?;
        let row = DocumentTypes::find()
            .filter(DocumentTypeColumn::TeamId.eq(t.team_id))
            .filter(DocumentTypeColumn::Name.eq(t.name.as_str()))
            .one(&self.db)
            .await?
            .ok_or_else(|| StoreError::Corrupt("document type not written".into()))?;
        Ok((row, r > 0))
    }

    /// Sets a type's schema when it has none (a generated schema never replaces an admin's).
    /// Whether it was set.
    pub async fn fill_document_type_schema(
        &self,
        team_id: i64,
        id: i64,
        schema: Json,
    ) -> StoreResult<bool> {
        let r = DocumentTypes::update_many()
            .col_expr(DocumentTypeColumn::Schema, Expr::value(schema))
            .col_expr(DocumentTypeColumn::UpdatedAt, Expr::value(Utc::now()))
            .filter(DocumentTypeColumn::TeamId.eq(team_id))
            .filter(DocumentTypeColumn::Id.eq(id))
            .filter(DocumentTypeColumn::Schema.is_null())
            .exec(&self.db)
            .await?;
        Ok(r.rows_affected > 0)
    }

    /// Sets whether processDocument may extend the team's taxonomy.
    pub async fn set_extend_taxonomy(&self, team_id: i64, on: bool) -> StoreResult<()> {
        Teams::update_many()
            .col_expr(TeamColumn::ExtendTaxonomy, Expr::value(on))
            .filter(TeamColumn::Id.eq(team_id))
            .exec(&self.db)
            .await?;
        Ok(())
    }

    /// Writes a version's classification, replacing the one it had.
    pub async fn put_classification(&self, c: NewClassification) -> StoreResult<Classification> {
        let row = ClassificationActive {
            document_id: Set(c.document_id),
            version: Set(c.version),
            team_id: Set(c.team_id),
            type_name: Set(c.type_name),
            confidence: Set(c.confidence),
            reason: Set(c.reason),
            method: Set(c.method.to_owned()),
            model: Set(c.model),
            created_by: Set(c.created_by),
            created_at: Set(Utc::now()),
        };
        Classifications::insert(row)
            .on_conflict(
                OnConflict::columns([
                    ClassificationColumn::DocumentId,
                    ClassificationColumn::Version,
                ])
                .update_columns([
                    ClassificationColumn::TypeName,
                    ClassificationColumn::Confidence,
                    ClassificationColumn::Reason,
                    ClassificationColumn::Method,
                    ClassificationColumn::Model,
                    ClassificationColumn::CreatedBy,
                    ClassificationColumn::CreatedAt,
                ])
                .to_owned(),
            )
            .exec_without_returning(&self.db)
            .await?;
        Classifications::find_by_id((c.document_id, c.version))
            .unique(&self.db)
            .await?
            .ok_or_else(|| StoreError::Corrupt("classification not written".into()))
    }

    /// The current version's classification of each of `document_ids` that has one. The
    /// caller has checked that it may read the documents.
    pub async fn current_classifications(
        &self,
        document_ids: &[i64],
    ) -> StoreResult<Vec<Classification>> {
        if document_ids.is_empty() {
            return Ok(Vec::new());
        }
        Ok(Classifications::find()
            .filter(ClassificationColumn::DocumentId.is_in(document_ids.iter().copied()))
            .filter(current_version("document_classifications"))
            .all(&self.db)
            .await?)
    }

    /// Stores a processing result.
    pub async fn insert_processing_result(
        &self,
        r: NewProcessingResult,
    ) -> StoreResult<ProcessingResult> {
        let row = ProcessingResultActive {
            id: sea_orm::NotSet,
            document_id: Set(r.document_id),
            version: Set(r.version),
            team_id: Set(r.team_id),
            job_id: Set(r.job_id),
            type_name: Set(r.type_name),
            confidence: Set(r.confidence),
            method: Set(r.method.to_owned()),
            extended_taxonomy: Set(r.extended_taxonomy),
            schema_generated: Set(r.schema_generated),
            schema: Set(r.schema),
            result: Set(r.result),
            measured_schema: Set(r.measured_schema),
            created_by: Set(r.created_by),
            created_at: Set(Utc::now()),
        };
        let id = ProcessingResults::insert(row)
            .exec(&self.db)
            .await?
            .last_insert_id;
        ProcessingResults::find_by_id(id)
            .unique(&self.db)
            .await?
            .ok_or_else(|| StoreError::Corrupt("processing result not written".into()))
    }

    /// The newest processing result of each of `document_ids`' current versions. The caller
    /// has checked that it may read the documents.
    pub async fn latest_processing_results(
        &self,
        document_ids: &[i64],
    ) -> StoreResult<Vec<ProcessingResult>> {
        if document_ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows = ProcessingResults::find()
            .filter(ProcessingResultColumn::DocumentId.is_in(document_ids.iter().copied()))
            .filter(current_version("processing_results"))
            .order_by_desc(ProcessingResultColumn::Id)
            .all(&self.db)
            .await?;
        let mut seen = std::collections::HashSet::new();
        Ok(rows
            .into_iter()
            .filter(|r| seen.insert(r.document_id))
            .collect())
    }
}

fn active_type(t: &NewDocumentType) -> DocumentTypeActive {
    let now = Utc::now();
    DocumentTypeActive {
        id: sea_orm::NotSet,
        team_id: Set(t.team_id),
        name: Set(t.name.clone()),
        description: Set(t.description.clone()),
        schema: Set(t.schema.clone()),
        origin: Set(t.origin.to_owned()),
        created_by: Set(t.created_by),
        created_at: Set(now),
        updated_at: Set(now),
    }
}
