//! Document processing's use cases (seed 004): the team's taxonomy (members read it, admins
//! change it, every change audited), `classifyDocument`, `extractDocument` and
//! `processDocument` (members who can read the document), and the readers behind
//! `Document.classification` and `Document.processing`. The work itself is
//! `crate::processing`.

use entity::prelude::{Classification, DocumentType, Job, ProcessingResult};
use serde_json::Value as Json;

use super::{Cairn, ServiceError, ServiceResult};
use crate::auth::Principal;
use crate::domain::{Capability, InvalidInput, Visibility};
use crate::jobs::{JobKind, ProcessPayload};
use crate::processing::{ProcessError, Processor};
use crate::store::NewDocumentType;
use cairn_docproc::taxonomy;

impl From<ProcessError> for ServiceError {
    fn from(e: ProcessError) -> Self {
        match e {
            ProcessError::Store(s) => s.into(),
            ProcessError::Roles(r) => r.into(),
            ProcessError::NoText(m) => ServiceError::Conflict(m),
            ProcessError::Unavailable(m) => ServiceError::Unavailable(m),
            ProcessError::Llm { code, message } => ServiceError::Upstream { code, message },
            e @ ProcessError::Refused { .. } => ServiceError::Upstream {
                code: "LLM_REFUSED",
                message: e.to_string(),
            },
            ProcessError::BadSchema(m) => InvalidInput::new("schema", m).into(),
        }
    }
}

fn invalid(e: taxonomy::TaxonomyError) -> ServiceError {
    InvalidInput::new(e.field, e.message).into()
}

/// A document type as an admin sends it (every field optional on update).
#[derive(Clone, Debug, Default)]
pub struct DocumentTypeInput {
    pub name: Option<String>,
    pub description: Option<String>,
    /// `Some(Json::Null)` clears the schema on update.
    pub schema: Option<Json>,
}

/// What `extractDocument` returns (the processing layer's own result).
pub use crate::processing::Extracted as ExtractionView;

fn checked_schema(s: &Json) -> ServiceResult<Json> {
    Ok(taxonomy::FieldSchema::parse(s).map_err(invalid)?.to_json())
}

impl Cairn {
    fn processor(&self) -> Processor {
        Processor::new(
            self.store.clone(),
            self.models.embedder.clone(),
            self.roles.clone(),
            self.process_min_confidence,
        )
    }

    /// The caller's team's document types (the starter set on first use).
    pub async fn document_types(&self, p: &Principal) -> ServiceResult<Vec<DocumentType>> {
        p.require(Capability::CorpusRead)?;
        Ok(self.processor().taxonomy(p.team_id).await?)
    }

    /// Adds a type (admins).
    pub async fn create_document_type(
        &self,
        p: &Principal,
        input: DocumentTypeInput,
    ) -> ServiceResult<DocumentType> {
        p.require(Capability::Admin)?;
        let name =
            taxonomy::checked_name(input.name.as_deref().unwrap_or_default()).map_err(invalid)?;
        let description =
            taxonomy::checked_description(input.description.as_deref().unwrap_or_default())
                .map_err(invalid)?;
        let schema = match input.schema.as_ref().filter(|s| !s.is_null()) {
            Some(s) => Some(checked_schema(s)?),
            None => None,
        };
        // The starter set first, so a new name never races it.
        self.processor().taxonomy(p.team_id).await?;
        let row = self
            .store
            .insert_document_type(&NewDocumentType {
                team_id: p.team_id,
                name,
                description,
                schema,
                origin: "admin",
                created_by: Some(p.user_id),
            })
            .await?;
        self.store
            .audit(
                Some(p.team_id),
                Some(p.user_id),
                "document_type.create",
                Some(&row.name),
            )
            .await?;
        Ok(row)
    }

    /// Changes a type (admins).
    pub async fn update_document_type(
        &self,
        p: &Principal,
        id: i64,
        input: DocumentTypeInput,
    ) -> ServiceResult<DocumentType> {
        p.require(Capability::Admin)?;
        let name = input
            .name
            .as_deref()
            .map(taxonomy::checked_name)
            .transpose()
            .map_err(invalid)?;
        let description = input
            .description
            .as_deref()
            .map(taxonomy::checked_description)
            .transpose()
            .map_err(invalid)?;
        let schema = match &input.schema {
            None => None,
            Some(Json::Null) => Some(None),
            Some(s) => Some(Some(checked_schema(s)?)),
        };
        let row = self
            .store
            .update_document_type(p.team_id, id, name, description, schema)
            .await?
            .ok_or(ServiceError::NotFound("document type"))?;
        self.store
            .audit(
                Some(p.team_id),
                Some(p.user_id),
                "document_type.update",
                Some(&row.name),
            )
            .await?;
        Ok(row)
    }

    /// Removes a type (admins); whether the team had it.
    pub async fn delete_document_type(&self, p: &Principal, id: i64) -> ServiceResult<bool> {
        p.require(Capability::Admin)?;
        let Some(row) = self.store.document_type(p.team_id, id).await? else {
            return Ok(false);
        };
        let gone = self.store.delete_document_type(p.team_id, id).await?;
        if gone {
            self.store
                .audit(
                    Some(p.team_id),
                    Some(p.user_id),
                    "document_type.delete",
                    Some(&row.name),
                )
                .await?;
        }
        Ok(gone)
    }

    /// Whether processDocument may add the types it suggests (admins).
    pub async fn set_taxonomy_extension(&self, p: &Principal, on: bool) -> ServiceResult<bool> {
        p.require(Capability::Admin)?;
        self.store.set_extend_taxonomy(p.team_id, on).await?;
        self.store
            .audit(
                Some(p.team_id),
                Some(p.user_id),
                if on {
                    "team.extend_taxonomy.on"
                } else {
                    "team.extend_taxonomy.off"
                },
                None,
            )
            .await?;
        Ok(on)
    }

    async fn workable_document(
        &self,
        p: &Principal,
        id: i64,
    ) -> ServiceResult<entity::prelude::Document> {
        p.require(Capability::WorkflowsRun)?;
        self.store
            .readable_document(p, id)
            .await?
            .ok_or(ServiceError::NotFound("document"))
    }

    /// Classifies a document's current version and stores it.
    pub async fn classify_document(&self, p: &Principal, id: i64) -> ServiceResult<Classification> {
        let doc = self.workable_document(p, id).await?;
        Ok(self.processor().classify(p, &doc).await?.row)
    }

    /// Extracts from a document: with a schema (given, or the named type's), values with
    /// verbatim evidence by the utility model; without one, the tables, without a model.
    pub async fn extract_document(
        &self,
        p: &Principal,
        id: i64,
        schema: Option<Json>,
        type_name: Option<&str>,
    ) -> ServiceResult<ExtractionView> {
        let doc = self.workable_document(p, id).await?;
        let schema = match (schema.filter(|s| !s.is_null()), type_name) {
            (Some(_), Some(_)) => {
                return Err(InvalidInput::new("type", "give a schema or a type, not both").into())
            }
            (Some(s), None) => Some(s),
            (None, Some(t)) => {
                let name = taxonomy::type_name(t).unwrap_or_default();
                let types = self.processor().taxonomy(p.team_id).await?;
                let row = types.into_iter().find(|r| r.name == name).ok_or_else(|| {
                    ServiceError::from(InvalidInput::new(
                        "type",
                        format!("the team has no document type {t:?} (see documentTypes)"),
                    ))
                })?;
                Some(row.schema.ok_or_else(|| {
                    ServiceError::from(InvalidInput::new(
                        "type",
                        format!("the type {name} has no schema: give one, or run processDocument to have one written"),
                    ))
                })?)
            }
            (None, None) => None,
        };
        Ok(self.processor().extract(p, &doc, schema.as_ref()).await?)
    }

    /// Queues processDocument for a document (a job with progress stages).
    pub async fn process_document(&self, p: &Principal, id: i64) -> ServiceResult<Job> {
        let doc = self.workable_document(p, id).await?;
        let new_job = JobKind::Process(ProcessPayload {
            requested_by: p.user_id,
            document_id: doc.id,
            corpus_id: doc.corpus_id,
            private: doc.visibility != Visibility::Team.as_str(),
        })
        .new_job(p.team_id, p.user_id)
        .map_err(|e| ServiceError::Internal(e.to_string()))?;
        Ok(self.queue.submit(&self.store, &self.bus, new_job).await?)
    }

    /// The current version's classification of each document `p` may read among `ids`.
    pub async fn document_classifications(
        &self,
        p: &Principal,
        ids: &[i64],
    ) -> ServiceResult<Vec<Classification>> {
        let readable = self.store.readable_document_ids(p, ids).await?;
        Ok(self.store.current_classifications(&readable).await?)
    }

    /// The newest processing result of each document `p` may read among `ids`.
    pub async fn document_processing(
        &self,
        p: &Principal,
        ids: &[i64],
    ) -> ServiceResult<Vec<ProcessingResult>> {
        let readable = self.store.readable_document_ids(p, ids).await?;
        Ok(self.store.latest_processing_results(&readable).await?)
    }
}
