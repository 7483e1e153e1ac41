//! Short names: `Teams` (the entity), `Team` (a row), `TeamColumn`, `TeamActive`.

pub use super::api_tokens::{
    ActiveModel as ApiTokenActive, Column as ApiTokenColumn, Entity as ApiTokens, Model as ApiToken,
};
pub use super::audit::{
    ActiveModel as AuditActive, Column as AuditColumn, Entity as AuditRows, Model as Audit,
};
pub use super::chunks::{
    ActiveModel as ChunkActive, Column as ChunkColumn, Entity as Chunks, Model as Chunk,
};
pub use super::content_blobs::{
    ActiveModel as ContentBlobActive, Column as ContentBlobColumn, Entity as ContentBlobs,
    Model as ContentBlob,
};
pub use super::corpora::{
    ActiveModel as CorpusActive, Column as CorpusColumn, Entity as Corpora, Model as Corpus,
};
pub use super::document_classifications::{
    ActiveModel as ClassificationActive, Column as ClassificationColumn, Entity as Classifications,
    Model as Classification,
};
pub use super::document_types::{
    ActiveModel as DocumentTypeActive, Column as DocumentTypeColumn, Entity as DocumentTypes,
    Model as DocumentType,
};
pub use super::document_versions::{
    ActiveModel as DocumentVersionActive, Column as DocumentVersionColumn,
    Entity as DocumentVersions, Model as DocumentVersion,
};
pub use super::documents::{
    ActiveModel as DocumentActive, Column as DocumentColumn, Entity as Documents, Model as Document,
};
pub use super::jobs::{
    ActiveModel as JobActive, Column as JobColumn, Entity as Jobs, JobState, Model as Job,
};
pub use super::kg_descriptions::{
    ActiveModel as KgDescriptionActive, Column as KgDescriptionColumn, Entity as KgDescriptions,
    Model as KgDescription,
};
pub use super::kg_entities::{
    ActiveModel as KgEntityActive, Column as KgEntityColumn, Entity as KgEntities,
    Model as KgEntity,
};
pub use super::kg_extractions::{
    ActiveModel as KgExtractionActive, Column as KgExtractionColumn, Entity as KgExtractions,
    Model as KgExtraction,
};
pub use super::kg_mentions::{
    ActiveModel as KgMentionActive, Column as KgMentionColumn, Entity as KgMentions,
    Model as KgMention,
};
pub use super::kg_relations::{
    ActiveModel as KgRelationActive, Column as KgRelationColumn, Entity as KgRelations,
    Model as KgRelation,
};
pub use super::processing_results::{
    ActiveModel as ProcessingResultActive, Column as ProcessingResultColumn,
    Entity as ProcessingResults, Model as ProcessingResult,
};
pub use super::team_models::{
    ActiveModel as TeamModelActive, Column as TeamModelColumn, Entity as TeamModels,
    Model as TeamModel,
};
pub use super::teams::{
    ActiveModel as TeamActive, Column as TeamColumn, Entity as Teams, Model as Team,
};
pub use super::usage::{
    ActiveModel as UsageActive, Column as UsageColumn, Entity as UsageRows, Model as Usage,
};
pub use super::users::{
    ActiveModel as UserActive, Column as UserColumn, Entity as Users, Model as User,
};
