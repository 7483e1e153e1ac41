//! sea-orm entities for Cairn's tables (DESIGN.md §3): plain data, no GraphQL derives, no
//! business rules. Enumerations (roles, visibility, job states) are stored as text and
//! checked by the database; `cairn::domain` owns their Rust types.

pub mod prelude;

pub mod api_tokens;
pub mod audit;
pub mod chunks;
pub mod content_blobs;
pub mod corpora;
pub mod document_classifications;
pub mod document_types;
pub mod document_versions;
pub mod documents;
pub mod jobs;
pub mod kg_descriptions;
pub mod kg_entities;
pub mod kg_extractions;
pub mod kg_mentions;
pub mod kg_relations;
pub mod processing_results;
pub mod team_models;
pub mod teams;
pub mod usage;
pub mod users;
