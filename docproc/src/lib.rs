//! cairn-docproc: document processing without a database or HTTP (seed 004's
//! `classify_document`, `extract_document`, `process_document`). Text and vectors in, validated
//! values out; the server stores them, calls the models and runs the job.
//!
//! # Layout
//!
//! | module | what |
//! |---|---|
//! | [`taxonomy`] | a team's document types: name and description rules, the optional field schema (a small JSON Schema subset), the starter set |
//! | [`classify`] | the LLM classification contract (`type`, `confidence`, `reason`) and its validation; the new-type suggestion contract; the zero-shot classifier over embeddings |
//! | [`fields`] | schema extraction: the reply contract where every value carries a verbatim evidence snippet, its validation; the schema-generation contract |
//! | [`tables`] | schemaless extraction: the Markdown tables and `[Sheet: …]` blocks the extractors emit, as typed rows, without a model |
//! | [`measure`] | the measured schema of any JSON result (seed 004: "schema must be measured, not declared") |
//! | [`prompt`] | the prompts of the three LLM contracts |
//!
//! # Decisions
//!
//! * **Every model reply is refused whole on the first broken rule** (the knowledge graph's
//!   rule: a bad value that looks finished is worse than a missing one), with a stable code
//!   per rule ([`Refusal::code`]); the server asks once more, naming the refusal.
//! * **Evidence is verbatim.** An extracted value must come with a snippet that is an exact
//!   substring of the text the model was given, and the value must be *in* that snippet:
//!   a string's words (case and whitespace folded), a number's digits (thousands separators
//!   folded), a date's year, month and day. A value the text does not state is refused.
//! * **No model needed** for tables ([`tables`]) or for a first classification
//!   ([`classify::zero_shot`]): the document's stored chunk vectors against each type's
//!   "name: description" vector, softmax with a temperature fitted on a tuning half of real
//!   documents ([`classify::ZERO_SHOT_TEMPERATURE`]).

pub mod classify;
pub mod fields;
pub mod measure;
pub mod prompt;
pub mod tables;
pub mod taxonomy;

pub use classify::{Classification, ZeroShot};
pub use fields::{ExtractedField, FieldValues};
pub use measure::measure_schema;
pub use tables::{Column, ColumnType, Table};
pub use taxonomy::{DocType, Field, FieldKind, FieldSchema, TaxonomyError};

/// Why a model's reply was refused: one variant per rule, each with a stable code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("reply is not JSON: {0}")]
    NotJson(String),
    #[error("reply does not have the contract's shape: {0}")]
    BadShape(String),
    /// A classification named a type the team's taxonomy does not have.
    #[error("type {0:?} is not in the taxonomy")]
    UnknownType(String),
    /// A confidence outside 0..=1 (or not finite).
    #[error("confidence {0} is not between 0 and 1")]
    BadConfidence(String),
    /// A suggested type's name does not make a valid type name, or a description is empty.
    #[error("suggested type is not usable: {0}")]
    BadSuggestion(String),
    /// A field the schema does not have.
    #[error("field {0:?} is not in the schema")]
    UnknownField(String),
    /// A value of the wrong type for its field.
    #[error("field {field:?} must be {expected}")]
    WrongType {
        field: String,
        expected: &'static str,
    },
    /// A required field without a value.
    #[error("required field {0:?} has no value")]
    MissingRequired(String),
    /// A value whose evidence is missing or not a verbatim substring of the text.
    #[error("evidence for {field:?} is not verbatim from the document: {evidence:?}")]
    EvidenceNotVerbatim { field: String, evidence: String },
    /// The evidence is verbatim but does not state the value (a hallucinated value).
    #[error("value of {field:?} does not appear in its evidence: {value}")]
    ValueNotInEvidence { field: String, value: String },
    /// A generated schema that is not a valid field schema.
    #[error("generated schema is not usable: {0}")]
    BadSchema(String),
}

impl Refusal {
    /// A stable machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            Refusal::NotJson(_) => "NOT_JSON",
            Refusal::BadShape(_) => "BAD_SHAPE",
            Refusal::UnknownType(_) => "UNKNOWN_TYPE",
            Refusal::BadConfidence(_) => "BAD_CONFIDENCE",
            Refusal::BadSuggestion(_) => "BAD_SUGGESTION",
            Refusal::UnknownField(_) => "UNKNOWN_FIELD",
            Refusal::WrongType { .. } => "WRONG_TYPE",
            Refusal::MissingRequired(_) => "MISSING_REQUIRED",
            Refusal::EvidenceNotVerbatim { .. } => "EVIDENCE_NOT_VERBATIM",
            Refusal::ValueNotInEvidence { .. } => "VALUE_NOT_IN_EVIDENCE",
            Refusal::BadSchema(_) => "BAD_SCHEMA",
        }
    }
}

/// Parses a reply as a JSON object (one Markdown fence tolerated).
pub(crate) fn json_object(
    raw: &str,
) -> Result<serde_json::Map<String, serde_json::Value>, Refusal> {
    let v: serde_json::Value = serde_json::from_str(cairn_kg::reply::unfence(raw))
        .map_err(|e| Refusal::NotJson(e.to_string()))?;
    match v {
        serde_json::Value::Object(m) => Ok(m),
        other => Err(Refusal::BadShape(format!(
            "expected an object, got {}",
            measure::type_name(&other)
        ))),
    }
}

/// The most characters of a document a model is given (the knowledge graph's cap).
pub const MAX_CHARS: usize = cairn_kg::MAX_CHARS;

/// The prefix of `text` a model is given (cut like the knowledge graph's).
pub fn cap_text(text: &str) -> &str {
    cairn_kg::cap_text(text)
}
