//! Dataloaders: every relation field resolves through one of these, so a list of N objects
//! costs one query per field, not N. Loaders are built per request (they carry the principal,
//! whose visibility they apply inside their one query).

use std::collections::HashMap;
use std::sync::Arc;

use async_graphql::dataloader::{CacheFactory, DataLoader, HashMapCache, Loader};
use entity::prelude::{Chunk, ContentBlob, Corpus, Document, DocumentVersion, Team, User};

use super::error::loaded;
use crate::service::{
    Cairn, CorpusCounts, KgEntity, KgMention, KgRelation, Principal, ServiceError, ServiceResult,
};

pub type LoadError = Arc<ServiceError>;

/// One loader: a struct holding the core and the request's principal, whose batch function
/// (`|cairn, principal, keys| …`, a `ServiceResult<HashMap<key, value>>`) runs one service
/// call for every key the request asked for.
macro_rules! loader {
    ($(#[$doc:meta])* $name:ident: $key:ty => $value:ty, |$cairn:ident, $p:ident, $keys:ident| $body:expr) => {
        $(#[$doc])*
        pub struct $name {
            cairn: Cairn,
            principal: Principal,
        }

        impl $name {
            fn new(cairn: &Cairn, principal: &Principal) -> $name {
                $name {
                    cairn: cairn.clone(),
                    principal: principal.clone(),
                }
            }
        }

        impl Loader<$key> for $name {
            type Value = $value;
            type Error = LoadError;

            async fn load(&self, $keys: &[$key]) -> Result<HashMap<$key, $value>, LoadError> {
                let ($cairn, $p) = (&self.cairn, &self.principal);
                let out: ServiceResult<HashMap<$key, $value>> = $body;
                out.map_err(Arc::new)
            }
        }
    };
}

/// Rows keyed by their own id.
fn by_id<R>(rows: Vec<R>, id: impl Fn(&R) -> i64) -> HashMap<i64, R> {
    rows.into_iter().map(|r| (id(&r), r)).collect()
}

/// Rows grouped under a key (rows without one are dropped), each converted, in row order.
fn grouped<R, V>(
    rows: Vec<R>,
    key: impl Fn(&R) -> Option<i64>,
    value: impl Fn(R) -> V,
) -> HashMap<i64, Vec<V>> {
    let mut out: HashMap<i64, Vec<V>> = HashMap::new();
    for r in rows {
        if let Some(k) = key(&r) {
            out.entry(k).or_default().push(value(r));
        }
    }
    out
}

/// One key through a loader, its error keeping its kind (`graphql::error::loaded`).
pub(crate) async fn load<L, C>(
    loader: &DataLoader<L, C>,
    key: i64,
) -> async_graphql::Result<Option<L::Value>>
where
    L: Loader<i64, Error = LoadError>,
    C: CacheFactory,
{
    loader.load_one(key).await.map_err(loaded)
}

/// A list-valued field: one key's rows through a loader, converted (none: an empty list).
pub(crate) async fn load_list<L, C, V, T>(
    loader: &DataLoader<L, C>,
    key: i64,
) -> async_graphql::Result<Vec<T>>
where
    L: Loader<i64, Value = Vec<V>, Error = LoadError>,
    C: CacheFactory,
    T: From<V>,
{
    Ok(load(loader, key)
        .await?
        .unwrap_or_default()
        .into_iter()
        .map(T::from)
        .collect())
}

loader!(
    /// Teams, by id.
    TeamLoader: i64 => Team,
    |cairn, _p, keys| Ok(by_id(cairn.teams_by_ids(keys).await?, |t| t.id))
);

loader!(
    /// Users of the principal's team, by id.
    UserLoader: i64 => User,
    |cairn, p, keys| Ok(by_id(cairn.users_by_ids(p, keys).await?, |u| u.id))
);

loader!(
    /// Document and chunk counts per corpus, over what the principal may read.
    CorpusCountsLoader: i64 => CorpusCounts,
    |cairn, p, keys| Ok(cairn.corpus_counts(p, keys).await?.into_iter().collect())
);

loader!(
    /// Corpora visible to the principal's team, by id.
    CorpusLoader: i64 => Corpus,
    |cairn, p, keys| Ok(by_id(cairn.corpora_by_ids(p, keys).await?, |c| c.id))
);

loader!(
    /// Readable documents, by id.
    DocumentLoader: i64 => Document,
    |cairn, p, keys| Ok(by_id(cairn.documents_by_ids(p, keys).await?, |d| d.id))
);

loader!(
    /// Versions (with their blobs) of readable documents, by document id.
    VersionsLoader: i64 => Vec<(DocumentVersion, Option<ContentBlob>)>,
    |cairn, p, keys| Ok(grouped(
        cairn.versions_of(p, keys).await?,
        |(v, _)| Some(v.document_id),
        |row| row,
    ))
);

loader!(
    /// The current version's chunks of readable documents, by document id.
    ChunksLoader: i64 => Vec<Chunk>,
    |cairn, p, keys| Ok(grouped(cairn.current_chunks(p, keys).await?, |c| Some(c.document_id), |c| c))
);

loader!(
    /// Visible knowledge-graph entities (at least one readable mention), by id.
    KgEntityLoader: i64 => KgEntity,
    |cairn, p, keys| Ok(by_id(cairn.entities_by_ids(p, keys).await?, |e| e.id))
);

loader!(
    /// Readable mentions of entities, by entity id.
    KgEntityMentionsLoader: i64 => Vec<KgMention>,
    |cairn, p, keys| Ok(grouped(cairn.entity_mentions(p, keys).await?, |m| m.entity_id, |m| m))
);

loader!(
    /// Readable mentions of relations, by relation id.
    KgRelationMentionsLoader: i64 => Vec<KgMention>,
    |cairn, p, keys| Ok(grouped(cairn.relation_mentions(p, keys).await?, |m| m.relation_id, |m| m))
);

loader!(
    /// Visible relations in and out of entities, by entity id (a relation between two asked
    /// entities is listed under both).
    KgEntityRelationsLoader: i64 => Vec<KgRelation>,
    |cairn, p, keys| {
        let rows = cairn.entity_relations(p, keys).await?;
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
);

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
        let cached = HashMapCache::default;
        Loaders {
            corpora: DataLoader::new(CorpusLoader::new(cairn, principal), tokio::spawn),
            documents: DataLoader::new(DocumentLoader::new(cairn, principal), tokio::spawn),
            versions: DataLoader::new(VersionsLoader::new(cairn, principal), tokio::spawn),
            chunks: DataLoader::new(ChunksLoader::new(cairn, principal), tokio::spawn),
            teams: DataLoader::new(TeamLoader::new(cairn, principal), tokio::spawn),
            users: DataLoader::new(UserLoader::new(cairn, principal), tokio::spawn),
            corpus_counts: DataLoader::new(
                CorpusCountsLoader::new(cairn, principal),
                tokio::spawn,
            ),
            kg_entities: DataLoader::with_cache(
                KgEntityLoader::new(cairn, principal),
                tokio::spawn,
                cached(),
            ),
            kg_entity_mentions: DataLoader::with_cache(
                KgEntityMentionsLoader::new(cairn, principal),
                tokio::spawn,
                cached(),
            ),
            kg_relation_mentions: DataLoader::with_cache(
                KgRelationMentionsLoader::new(cairn, principal),
                tokio::spawn,
                cached(),
            ),
            kg_entity_relations: DataLoader::with_cache(
                KgEntityRelationsLoader::new(cairn, principal),
                tokio::spawn,
                cached(),
            ),
        }
    }
}
