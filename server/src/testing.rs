//! Test-only access to the store (feature `testing`, enabled by `tests/` only): the
//! constructors the end-to-end tests and benches use to write rows directly (bulk synthetic
//! corpora, a document without an upload), the exact-index types the benches time, and the
//! statements the PostgreSQL vector channel and the results' hydration run, so a bench times
//! the server's SQL rather than a copy of it. Nothing in the server uses this module; a build without the feature
//! does not have it.

pub use crate::ingest::blobs::ContentKey;
pub use crate::store::documents::{BlobRef, ChunkRow, StoreIngest, Target};
pub use crate::store::search::{chunk_views_statement, ChunkView};
pub use crate::store::vector::normalize;
pub use crate::store::vindex::{DocMeta, VectorIndex};
pub use crate::store::NewDocument;
pub use crate::store::{pg_vector_channel_statement, EMBEDDING_DIM};
