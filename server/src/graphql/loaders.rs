//! Dataloaders: every relation field resolves through one of these, so a list of N objects
//! costs one query per field, not N. Loaders are built per request (they carry the principal,
//! whose visibility they apply inside their one query).

use std::collections::HashMap;
use std::sync::Arc;

use async_graphql::dataloader::{DataLoader, HashMapCache, Loader};
use entity::prelude::{Corpus, Document, Team, User};

use super::documents::{GqlChunk, GqlDocumentVersion};

use crate::auth::Principal;
use crate::service::{Cairn, ServiceError};
use crate::store::kg::{KgEntity, KgMention, KgRelation};
use crate::store::CorpusCounts;

pub type LoadError = Arc<ServiceError>;

pub struct TeamLoader(pub Cairn);

impl Loader<i64> for TeamLoader {
    type Value = Team;
    type Error = LoadError;

    async fn load(&self, keys: &[i64]) -> Result<HashMap<i64, Team>, LoadError> {
        let rows = self.0.teams_by_ids(keys).await.map_err(Arc::new)?;
        Ok(rows.into_iter().map(|t| (t.id, t)).collect())
    }
}

pub struct UserLoader {
    pub cairn: Cairn,
    pub principal: Principal,
}

impl Loader<i64> for UserLoader {
    type Value = User;
    type Error = LoadError;

    async fn load(&self, keys: &[i64]) -> Result<HashMap<i64, User>, LoadError> {
        let rows = self
            .cairn
            .users_by_ids(&self.principal, keys)
            .await
            .map_err(Arc::new)?;
        Ok(rows.into_iter().map(|u| (u.id, u)).collect())
    }
}

/// Document and chunk counts per corpus, over what the principal may read.
pub struct CorpusCountsLoader {
    pub cairn: Cairn,
    pub principal: Principal,
}

impl Loader<i64> for CorpusCountsLoader {
    type Value = CorpusCounts;
    type Error = LoadError;

    async fn load(&self, keys: &[i64]) -> Result<HashMap<i64, CorpusCounts>, LoadError> {
        let rows = self
            .cairn
            .corpus_counts(&self.principal, keys)
            .await
            .map_err(Arc::new)?;
        Ok(rows.into_iter().collect())
    }
}

/// Corpora visible to the principal's team, by id.
pub struct CorpusLoader {
    pub cairn: Cairn,
    pub principal: Principal,
}

impl Loader<i64> for CorpusLoader {
    type Value = Corpus;
    type Error = LoadError;

    async fn load(&self, keys: &[i64]) -> Result<HashMap<i64, Corpus>, LoadError> {
        let rows = self
            .cairn
            .corpora_by_ids(&self.principal, keys)
            .await
            .map_err(Arc::new)?;
        Ok(rows.into_iter().map(|c| (c.id, c)).collect())
    }
}

/// Readable documents, by id.
pub struct DocumentLoader {
    pub cairn: Cairn,
    pub principal: Principal,
}

impl Loader<i64> for DocumentLoader {
    type Value = Document;
    type Error = LoadError;

    async fn load(&self, keys: &[i64]) -> Result<HashMap<i64, Document>, LoadError> {
        let rows = self
            .cairn
            .documents_by_ids(&self.principal, keys)
            .await
            .map_err(Arc::new)?;
        Ok(rows.into_iter().map(|d| (d.id, d)).collect())
    }
}

/// Versions (with their blobs) of readable documents, by document id.
pub struct VersionsLoader {
    pub cairn: Cairn,
    pub principal: Principal,
}

impl Loader<i64> for VersionsLoader {
    type Value = Vec<GqlDocumentVersion>;
    type Error = LoadError;

    async fn load(&self, keys: &[i64]) -> Result<HashMap<i64, Vec<GqlDocumentVersion>>, LoadError> {
        let rows = self
            .cairn
            .versions_of(&self.principal, keys)
            .await
            .map_err(Arc::new)?;
        let mut out: HashMap<i64, Vec<GqlDocumentVersion>> = HashMap::new();
        for (v, blob) in rows {
            out.entry(v.document_id)
                .or_default()
                .push(GqlDocumentVersion {
                    version: v.version,
                    extracted_chars: v.extracted_chars,
                    created_at: v.created_at,
                    content_hash: blob.as_ref().map(|b| b.content_hash.clone()),
                    size: blob.map(|b| b.size),
                });
        }
        Ok(out)
    }
}

/// The current version's chunks of readable documents, by document id.
pub struct ChunksLoader {
    pub cairn: Cairn,
    pub principal: Principal,
}

impl Loader<i64> for ChunksLoader {
    type Value = Vec<GqlChunk>;
    type Error = LoadError;

    async fn load(&self, keys: &[i64]) -> Result<HashMap<i64, Vec<GqlChunk>>, LoadError> {
        let rows = self
            .cairn
            .current_chunks(&self.principal, keys)
            .await
            .map_err(Arc::new)?;
        let mut out: HashMap<i64, Vec<GqlChunk>> = HashMap::new();
        for c in rows {
            out.entry(c.document_id).or_default().push(GqlChunk {
                index: c.chunk_index,
                section: c.section,
                page: c.page,
                content: c.content,
                version: c.version,
            });
        }
        Ok(out)
    }
}

/// Visible knowledge-graph entities (at least one readable mention), by id.
pub struct KgEntityLoader {
    pub cairn: Cairn,
    pub principal: Principal,
}

impl Loader<i64> for KgEntityLoader {
    type Value = KgEntity;
    type Error = LoadError;

    async fn load(&self, keys: &[i64]) -> Result<HashMap<i64, KgEntity>, LoadError> {
        let rows = self
            .cairn
            .entities_by_ids(&self.principal, keys)
            .await
            .map_err(Arc::new)?;
        Ok(rows.into_iter().map(|e| (e.id, e)).collect())
    }
}

/// Readable mentions of entities, by entity id.
pub struct KgEntityMentionsLoader {
    pub cairn: Cairn,
    pub principal: Principal,
}

impl Loader<i64> for KgEntityMentionsLoader {
    type Value = Vec<KgMention>;
    type Error = LoadError;

    async fn load(&self, keys: &[i64]) -> Result<HashMap<i64, Vec<KgMention>>, LoadError> {
        let rows = self
            .cairn
            .entity_mentions(&self.principal, keys)
            .await
            .map_err(Arc::new)?;
        let mut out: HashMap<i64, Vec<KgMention>> = HashMap::new();
        for m in rows {
            if let Some(e) = m.entity_id {
                out.entry(e).or_default().push(m);
            }
        }
        Ok(out)
    }
}

/// Readable mentions of relations, by relation id.
pub struct KgRelationMentionsLoader {
    pub cairn: Cairn,
    pub principal: Principal,
}

impl Loader<i64> for KgRelationMentionsLoader {
    type Value = Vec<KgMention>;
    type Error = LoadError;

    async fn load(&self, keys: &[i64]) -> Result<HashMap<i64, Vec<KgMention>>, LoadError> {
        let rows = self
            .cairn
            .relation_mentions(&self.principal, keys)
            .await
            .map_err(Arc::new)?;
        let mut out: HashMap<i64, Vec<KgMention>> = HashMap::new();
        for m in rows {
            if let Some(r) = m.relation_id {
                out.entry(r).or_default().push(m);
            }
        }
        Ok(out)
    }
}

/// Visible relations in and out of entities, by entity id.
pub struct KgEntityRelationsLoader {
    pub cairn: Cairn,
    pub principal: Principal,
}

impl Loader<i64> for KgEntityRelationsLoader {
    type Value = Vec<KgRelation>;
    type Error = LoadError;

    async fn load(&self, keys: &[i64]) -> Result<HashMap<i64, Vec<KgRelation>>, LoadError> {
        let rows = self
            .cairn
            .entity_relations(&self.principal, keys)
            .await
            .map_err(Arc::new)?;
        let wanted: std::collections::HashSet<i64> = keys.iter().copied().collect();
        let mut out: HashMap<i64, Vec<KgRelation>> = HashMap::new();
        for r in rows {
            if wanted.contains(&r.subject_id) {
                out.entry(r.subject_id).or_default().push(r.clone());
            }
            if r.object_id != r.subject_id && wanted.contains(&r.object_id) {
                out.entry(r.object_id).or_default().push(r);
            }
        }
        Ok(out)
    }
}

/// The per-request data a resolver may rely on once the caller is authenticated.
pub struct Loaders {
    pub corpora: DataLoader<CorpusLoader>,
    pub documents: DataLoader<DocumentLoader>,
    pub versions: DataLoader<VersionsLoader>,
    pub chunks: DataLoader<ChunksLoader>,
    pub teams: DataLoader<TeamLoader>,
    pub users: DataLoader<UserLoader>,
    pub corpus_counts: DataLoader<CorpusCountsLoader>,
    // The knowledge-graph loaders cache per request, so a list resolver can prime them for
    // its whole page (`graphql::kg::prime`) and the per-item fields never query again: the
    // statement count of a nested `entities` query does not depend on batching timing.
    pub kg_entities: DataLoader<KgEntityLoader, HashMapCache>,
    pub kg_entity_mentions: DataLoader<KgEntityMentionsLoader, HashMapCache>,
    pub kg_relation_mentions: DataLoader<KgRelationMentionsLoader, HashMapCache>,
    pub kg_entity_relations: DataLoader<KgEntityRelationsLoader, HashMapCache>,
}

impl Loaders {
    pub fn new(cairn: &Cairn, principal: &Principal) -> Loaders {
        Loaders {
            corpora: DataLoader::new(
                CorpusLoader {
                    cairn: cairn.clone(),
                    principal: principal.clone(),
                },
                tokio::spawn,
            ),
            documents: DataLoader::new(
                DocumentLoader {
                    cairn: cairn.clone(),
                    principal: principal.clone(),
                },
                tokio::spawn,
            ),
            versions: DataLoader::new(
                VersionsLoader {
                    cairn: cairn.clone(),
                    principal: principal.clone(),
                },
                tokio::spawn,
            ),
            chunks: DataLoader::new(
                ChunksLoader {
                    cairn: cairn.clone(),
                    principal: principal.clone(),
                },
                tokio::spawn,
            ),
            teams: DataLoader::new(TeamLoader(cairn.clone()), tokio::spawn),
            users: DataLoader::new(
                UserLoader {
                    cairn: cairn.clone(),
                    principal: principal.clone(),
                },
                tokio::spawn,
            ),
            corpus_counts: DataLoader::new(
                CorpusCountsLoader {
                    cairn: cairn.clone(),
                    principal: principal.clone(),
                },
                tokio::spawn,
            ),
            kg_entities: DataLoader::with_cache(
                KgEntityLoader {
                    cairn: cairn.clone(),
                    principal: principal.clone(),
                },
                tokio::spawn,
                HashMapCache::default(),
            ),
            kg_entity_mentions: DataLoader::with_cache(
                KgEntityMentionsLoader {
                    cairn: cairn.clone(),
                    principal: principal.clone(),
                },
                tokio::spawn,
                HashMapCache::default(),
            ),
            kg_relation_mentions: DataLoader::with_cache(
                KgRelationMentionsLoader {
                    cairn: cairn.clone(),
                    principal: principal.clone(),
                },
                tokio::spawn,
                HashMapCache::default(),
            ),
            kg_entity_relations: DataLoader::with_cache(
                KgEntityRelationsLoader {
                    cairn: cairn.clone(),
                    principal: principal.clone(),
                },
                tokio::spawn,
                HashMapCache::default(),
            ),
        }
    }
}
