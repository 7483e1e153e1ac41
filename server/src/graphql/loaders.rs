//! Dataloaders: every relation field resolves through one of these, so a list of N objects
//! costs one query per field, not N. Loaders are built per request (they carry the principal,
//! whose visibility they apply inside their one query).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;

use async_graphql::dataloader::{CacheFactory, DataLoader, HashMapCache, Loader};
use entity::prelude::{
    Chunk, Classification, ContentBlob, Corpus, Document, DocumentVersion, ProcessingResult, Team,
    User,
};

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

/// Keys that differ only in their id, gathered per remaining part (`Corpus.documents`' page,
/// `Document.chunks`' bound), so each group is one service call: in practice one group per
/// field per request, since sibling objects ask for the same page.
fn gather<K, P: Eq + Hash>(keys: &[K], split: impl Fn(&K) -> (i64, P)) -> HashMap<P, Vec<i64>> {
    let mut out: HashMap<P, Vec<i64>> = HashMap::new();
    for k in keys {
        let (id, part) = split(k);
        out.entry(part).or_default().push(id);
    }
    out
}

/// One key through a loader, its error keeping its kind (`graphql::error::loaded`).
pub(crate) async fn load<K, L, C>(
    loader: &DataLoader<L, C>,
    key: K,
) -> async_graphql::Result<Option<L::Value>>
where
    K: Send + Sync + Hash + Eq + Clone + 'static,
    L: Loader<K, Error = LoadError>,
    C: CacheFactory,
{
    loader.load_one(key).await.map_err(loaded)
}

/// A list-valued field: one key's rows through a loader, converted (none: an empty list).
pub(crate) async fn load_list<K, L, C, V, T>(
    loader: &DataLoader<L, C>,
    key: K,
) -> async_graphql::Result<Vec<T>>
where
    K: Send + Sync + Hash + Eq + Clone + 'static,
    L: Loader<K, Value = Vec<V>, Error = LoadError>,
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

/// `Corpus.documents`' key: a corpus and the page asked of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CorpusPage {
    pub corpus_id: i64,
    pub after: Option<i64>,
    pub limit: u64,
}

/// `Document.chunks`' key: a document and how many of its first chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FirstChunks {
    pub document_id: i64,
    pub first: u32,
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
    /// A page of each corpus's readable documents, oldest first: one statement for every
    /// corpus of the request (`Store::corpora_documents`).
    CorpusDocumentsLoader: CorpusPage => Vec<Document>,
    |cairn, p, keys| {
        let mut out = HashMap::new();
        for ((after, limit), ids) in gather(keys, |k| (k.corpus_id, (k.after, k.limit))) {
            let rows = cairn.corpora_documents(p, &ids, after, limit).await?;
            let mut rows = grouped(rows, |d| Some(d.corpus_id), |d| d);
            for corpus_id in ids {
                let page = CorpusPage { corpus_id, after, limit };
                out.insert(page, rows.remove(&corpus_id).unwrap_or_default());
            }
        }
        Ok(out)
    }
);

loader!(
    /// The first chunks of readable documents' current versions, in order, bounded in SQL
    /// (`Store::current_chunks_first`).
    ChunksLoader: FirstChunks => Vec<Chunk>,
    |cairn, p, keys| {
        let mut out = HashMap::new();
        for (first, ids) in gather(keys, |k| (k.document_id, k.first)) {
            let rows = cairn.current_chunks_first(p, &ids, first).await?;
            let mut rows = grouped(rows, |c| Some(c.document_id), |c| c);
            for document_id in ids {
                let key = FirstChunks { document_id, first };
                out.insert(key, rows.remove(&document_id).unwrap_or_default());
            }
        }
        Ok(out)
    }
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

loader!(
    /// The current version's classification of readable documents, by document id.
    ClassificationLoader: i64 => Classification,
    |cairn, p, keys| Ok(by_id(
        cairn.document_classifications(p, keys).await?,
        |c| c.document_id,
    ))
);

loader!(
    /// The newest processing result of readable documents' current versions, by document id.
    ProcessingLoader: i64 => ProcessingResult,
    |cairn, p, keys| Ok(by_id(
        cairn.document_processing(p, keys).await?,
        |r| r.document_id,
    ))
);

/// The per-request data a resolver may rely on once the caller is authenticated.
pub struct Loaders {
    pub corpora: DataLoader<CorpusLoader>,
    pub corpus_documents: DataLoader<CorpusDocumentsLoader>,
    pub documents: DataLoader<DocumentLoader>,
    pub versions: DataLoader<VersionsLoader>,
    pub chunks: DataLoader<ChunksLoader>,
    pub teams: DataLoader<TeamLoader>,
    pub users: DataLoader<UserLoader>,
    pub corpus_counts: DataLoader<CorpusCountsLoader>,
    pub classifications: DataLoader<ClassificationLoader>,
    pub processing: DataLoader<ProcessingLoader>,
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
            corpus_documents: DataLoader::new(
                CorpusDocumentsLoader::new(cairn, principal),
                tokio::spawn,
            ),
            documents: DataLoader::new(DocumentLoader::new(cairn, principal), tokio::spawn),
            versions: DataLoader::new(VersionsLoader::new(cairn, principal), tokio::spawn),
            chunks: DataLoader::new(ChunksLoader::new(cairn, principal), tokio::spawn),
            teams: DataLoader::new(TeamLoader::new(cairn, principal), tokio::spawn),
            users: DataLoader::new(UserLoader::new(cairn, principal), tokio::spawn),
            corpus_counts: DataLoader::new(CorpusCountsLoader::new(cairn, principal), tokio::spawn),
            classifications: DataLoader::new(
                ClassificationLoader::new(cairn, principal),
                tokio::spawn,
            ),
            processing: DataLoader::new(ProcessingLoader::new(cairn, principal), tokio::spawn),
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
