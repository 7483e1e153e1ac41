//! Test-only access to the store (feature `testing`, enabled by `tests/` only): the
//! constructors the end-to-end tests and benches use to write rows directly (bulk synthetic
//! corpora, a document without an upload), and the exact-index types the benches time.
//! Nothing in the server uses this module; a build without the feature does not have it.

pub use crate::store::documents::{BlobRef, ChunkRow, StoreIngest, Target};
pub use crate::store::vindex::{normalize, DocMeta, VectorIndex};
pub use crate::store::NewDocument;
