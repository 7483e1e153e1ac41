//! Document processing (seed 004): the taxonomy (`documentTypes`; admins create, update and
//! delete types and allow `processDocument` to extend it), `classifyDocument`,
//! `extractDocument`, `processDocument`, and the `Document.classification` /
//! `Document.processing` fields (their types live in `types`, which `documents` names).

use async_graphql::{Context, Enum, InputObject, Json, Object, SimpleObject, ID};
use chrono::{DateTime, Utc};
use entity::prelude::DocumentType;

use super::documents::GqlJob;
use super::error::api;
use super::types::GqlClassification;
use super::{cairn_of, parse_id, principal_of};
use crate::service::{DocumentTypeInput, ExtractionView};

/// One type of the team's taxonomy.
#[derive(SimpleObject)]
#[graphql(name = "DocumentType")]
pub struct GqlDocumentType {
    pub id: ID,
    /// lower_snake_case, unique in the team.
    pub name: String,
    /// What such a document is and reads like (the zero-shot classifier compares documents
    /// with it).
    pub description: String,
    /// The fields to extract: a JSON Schema subset (flat; string, number, integer, boolean,
    /// string with format date).
    pub schema: Option<Json<serde_json::Value>>,
    /// `starter`, `admin` or `suggested` (added by `processDocument`).
    pub origin: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<DocumentType> for GqlDocumentType {
    fn from(t: DocumentType) -> Self {
        GqlDocumentType {
            id: ID(t.id.to_string()),
            name: t.name,
            description: t.description,
            schema: t.schema.map(Json),
            origin: t.origin,
            created_at: t.created_at,
            updated_at: t.updated_at,
        }
    }
}

#[derive(Enum, Clone, Copy, PartialEq, Eq, Debug)]
#[graphql(name = "ExtractionMode")]
pub enum GqlExtractionMode {
    /// Values of a schema, each with its verbatim evidence (the utility model).
    Schema,
    /// The document's tables as typed rows (no model).
    Tables,
}

/// What `extractDocument` found.
#[derive(SimpleObject)]
#[graphql(name = "Extraction")]
pub struct GqlExtraction {
    pub mode: GqlExtractionMode,
    /// Schema mode: `{mode, fields: {name: {value, evidence, offset}}}`; tables mode:
    /// `{mode, tables: [{name, page, columns: [{name, type, nulls}], rows: [{…}]}]}`.
    pub data: Json<serde_json::Value>,
    /// The schema of `data`, measured from it.
    pub measured_schema: Json<serde_json::Value>,
    /// The schema used (schema mode).
    pub schema: Option<Json<serde_json::Value>>,
    /// Fields with a value (schema mode).
    pub filled: i32,
    /// Tables found (tables mode).
    pub tables: i32,
    pub llm_calls: i32,
    pub cost_usd: f64,
}

impl From<ExtractionView> for GqlExtraction {
    fn from(x: ExtractionView) -> Self {
        let int = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
        GqlExtraction {
            mode: if x.mode == "schema" {
                GqlExtractionMode::Schema
            } else {
                GqlExtractionMode::Tables
            },
            data: Json(x.data),
            measured_schema: Json(x.measured_schema),
            schema: x.schema.map(Json),
            filled: int(x.filled),
            tables: int(x.tables),
            llm_calls: i32::try_from(x.spent.calls).unwrap_or(i32::MAX),
            cost_usd: x.spent.cost_usd,
        }
    }
}

/// A document type as an admin sends it.
#[derive(InputObject)]
#[graphql(name = "DocumentTypeInput")]
pub struct GqlDocumentTypeInput {
    pub name: Option<String>,
    pub description: Option<String>,
    /// A JSON Schema subset; on update, null clears it and an absent field keeps it.
    pub schema: async_graphql::MaybeUndefined<Json<serde_json::Value>>,
}

impl From<GqlDocumentTypeInput> for DocumentTypeInput {
    fn from(i: GqlDocumentTypeInput) -> Self {
        DocumentTypeInput {
            name: i.name,
            description: i.description,
            schema: match i.schema {
                async_graphql::MaybeUndefined::Undefined => None,
                async_graphql::MaybeUndefined::Null => Some(serde_json::Value::Null),
                async_graphql::MaybeUndefined::Value(Json(v)) => Some(v),
            },
        }
    }
}

#[derive(Default)]
pub struct ProcessingQuery;

#[Object]
impl ProcessingQuery {
    /// The caller's team's document types (a starter set until an admin changes it).
    async fn document_types(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<Vec<GqlDocumentType>> {
        let p = principal_of(ctx)?;
        let rows = cairn_of(ctx)?.document_types(p).await.map_err(api)?;
        Ok(rows.into_iter().map(Into::into).collect())
    }
}

#[derive(Default)]
pub struct ProcessingMutation;

#[Object]
impl ProcessingMutation {
    /// Adds a document type (needs `admin`; audited).
    async fn create_document_type(
        &self,
        ctx: &Context<'_>,
        input: GqlDocumentTypeInput,
    ) -> async_graphql::Result<GqlDocumentType> {
        let p = principal_of(ctx)?;
        let row = cairn_of(ctx)?
            .create_document_type(p, input.into())
            .await
            .map_err(api)?;
        Ok(row.into())
    }

    /// Changes a document type (needs `admin`; audited).
    async fn update_document_type(
        &self,
        ctx: &Context<'_>,
        id: ID,
        input: GqlDocumentTypeInput,
    ) -> async_graphql::Result<GqlDocumentType> {
        let p = principal_of(ctx)?;
        let id = parse_id(&id, "document type")?;
        let row = cairn_of(ctx)?
            .update_document_type(p, id, input.into())
            .await
            .map_err(api)?;
        Ok(row.into())
    }

    /// Removes a document type (needs `admin`; audited). Whether the team had it.
    async fn delete_document_type(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<bool> {
        let p = principal_of(ctx)?;
        let id = parse_id(&id, "document type")?;
        cairn_of(ctx)?
            .delete_document_type(p, id)
            .await
            .map_err(api)
    }

    /// Whether `processDocument` may add the type it suggests for a document no type fits
    /// (needs `admin`; audited). Only team-visible documents ever extend the taxonomy.
    async fn set_taxonomy_extension(
        &self,
        ctx: &Context<'_>,
        enabled: bool,
    ) -> async_graphql::Result<bool> {
        let p = principal_of(ctx)?;
        cairn_of(ctx)?
            .set_taxonomy_extension(p, enabled)
            .await
            .map_err(api)
    }

    /// Classifies a document's current version with the team's `utility` model (strict
    /// reply, one retry) or, without one, the zero-shot classifier; stores and returns it.
    async fn classify_document(
        &self,
        ctx: &Context<'_>,
        document_id: ID,
    ) -> async_graphql::Result<GqlClassification> {
        let p = principal_of(ctx)?;
        let id = parse_id(&document_id, "document")?;
        let c = cairn_of(ctx)?.classify_document(p, id).await.map_err(api)?;
        Ok(c.into())
    }

    /// Extracts from a document: with `schema` (or the schema of the type named `type`), the
    /// values with verbatim evidence (the `utility` model; a value without verbatim evidence
    /// refuses the reply); with neither, the document's tables as typed rows (no model).
    async fn extract_document(
        &self,
        ctx: &Context<'_>,
        document_id: ID,
        schema: Option<Json<serde_json::Value>>,
        #[graphql(name = "type")] doc_type: Option<String>,
    ) -> async_graphql::Result<GqlExtraction> {
        let p = principal_of(ctx)?;
        let id = parse_id(&document_id, "document")?;
        let x = cairn_of(ctx)?
            .extract_document(p, id, schema.map(|j| j.0), doc_type.as_deref())
            .await
            .map_err(api)?;
        Ok(x.into())
    }

    /// Queues the processing of a document: classify → (not confident: suggest a type, and
    /// extend the taxonomy where allowed) → the type's schema (or one written by the model) →
    /// extract → a stored result. Stages: classifying, suggesting, schema, extracting,
    /// processed.
    async fn process_document(
        &self,
        ctx: &Context<'_>,
        document_id: ID,
    ) -> async_graphql::Result<GqlJob> {
        let p = principal_of(ctx)?;
        let id = parse_id(&document_id, "document")?;
        let job = cairn_of(ctx)?.process_document(p, id).await.map_err(api)?;
        Ok(GqlJob { job, result: None })
    }
}
