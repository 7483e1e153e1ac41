//! Search use cases: hybrid `search`, `searchAll`, `answer` and the knowledge summary
//! (DESIGN.md §6; seed 004 "Hybrid retrieval", "Tool surface", "Prompt context").

use std::collections::HashMap;

use entity::prelude::Document;

use super::{Cairn, ServiceError, ServiceResult};
use crate::auth::Principal;
use crate::domain::lexical::Analyzer;
use crate::domain::search::{self as rules, Fused, Relevance, SearchMode, CHANNEL_DEPTH};
use crate::domain::{Capability, InvalidInput};
use crate::store::search::{ChannelHit, ChunkView};

/// Largest `topK` accepted.
pub const MAX_TOP_K: usize = 100;
/// Longest query accepted, in characters.
pub use crate::domain::MAX_QUERY_CHARS;

pub struct SearchRequest {
    pub query: String,
    pub corpus_ids: Option<Vec<i64>>,
    pub top_k: usize,
    pub mode: SearchMode,
}

/// One result: the chunk (full, untruncated text) and how it ranked.
#[derive(Clone, Debug)]
pub struct SearchHit {
    pub chunk: ChunkView,
    pub rank: Fused,
}

#[derive(Clone, Debug)]
pub struct SearchOutcome {
    pub mode: SearchMode,
    pub relevance: Relevance,
    /// The best cosine among the hits.
    pub top_score: f32,
    /// The mean cosine of the top three.
    pub mean_score: f32,
    pub hits: Vec<SearchHit>,
    /// Said when a channel could not run (e.g. no embedding model: lexical only).
    pub notices: Vec<String>,
}

/// One `searchAll` result.
#[derive(Clone, Debug)]
pub enum AnyHit {
    Chunk(SearchHit),
    Document(Document),
    /// A knowledge-graph entity hit by name (filled by the knowledge graph; see
    /// [`Cairn::entity_hits`]).
    Entity(EntityHit),
}

/// An entity found by name, visible through at least one readable mention.
#[derive(Clone, Debug)]
pub struct EntityHit {
    pub id: i64,
    pub entity_type: String,
    pub name: String,
    pub description: Option<String>,
}

impl Cairn {
    /// Hybrid (or single-channel) retrieval over the chunks `p` may read.
    pub async fn search(&self, p: &Principal, req: SearchRequest) -> ServiceResult<SearchOutcome> {
        p.require(Capability::Search)?;
        let query = req.query.trim();
        if query.is_empty() {
            return Err(InvalidInput::new("query", "must not be empty").into());
        }
        if query.chars().count() > MAX_QUERY_CHARS {
            return Err(InvalidInput::new(
                "query",
                format!("must be at most {MAX_QUERY_CHARS} characters"),
            )
            .into());
        }
        if req.top_k == 0 || req.top_k > MAX_TOP_K {
            return Err(
                InvalidInput::new("topK", format!("must be between 1 and {MAX_TOP_K}")).into(),
            );
        }
        // One token of the caller's bucket per retrieval (searchAll and answer come here too).
        self.rate_limit_search(p)?;
        let corpora = self.search_scope(p, req.corpus_ids).await?;
        self.retrieve(p, query, corpora.as_deref(), req.top_k, req.mode)
            .await
    }

    /// The retrieval behind [`Cairn::search`], once the request is checked and counted: the
    /// channels for `mode` (lexical only, with a notice, when no model is loaded), fused, the
    /// best `top_k` hydrated. `corpora` are visible to `p` (checked by the caller).
    pub(crate) async fn retrieve(
        &self,
        p: &Principal,
        query: &str,
        corpora: Option<&[i64]>,
        top_k: usize,
        requested: SearchMode,
    ) -> ServiceResult<SearchOutcome> {
        let mut notices = Vec::new();
        let mut mode = requested;
        if mode != SearchMode::Lexical && self.models.embedder.is_none() {
            if mode == SearchMode::Vector {
                return Err(ServiceError::Unavailable(NO_MODEL.into()));
            }
            notices.push(format!("{NO_MODEL}: lexical results only"));
            mode = SearchMode::Lexical;
        }
        // VECTOR mode shows the channel's order as it is, so the channel brings its first
        // `top_k` chunks' text along (on PostgreSQL in its own statement).
        let shown = if mode == SearchMode::Vector { top_k } else { 0 };
        let vector = async {
            if mode == SearchMode::Lexical {
                return Ok((Vec::new(), Vec::new()));
            }
            let v = self.embed_query(query).await?;
            Ok::<_, ServiceError>(
                self.store
                    .vector_channel_shown(p, corpora, &v, CHANNEL_DEPTH, shown)
                    .await?,
            )
        };
        let lexical = async {
            if mode == SearchMode::Vector {
                return Ok(Vec::new());
            }
            let terms = Analyzer::new().query_terms(query);
            Ok::<_, ServiceError>(
                self.store
                    .lexical_channel(p, corpora, &terms, self.bm25, CHANNEL_DEPTH)
                    .await?,
            )
        };
        let ((v, views), l) = tokio::try_join!(vector, lexical)?;
        let fused = fuse(self.fusion, mode, &v, &l);
        let hits = self.hydrate(p, fused, top_k, views).await?;
        let ranks: Vec<Fused> = hits.iter().map(|h| h.rank).collect();
        let (relevance, top_score, mean_score) = rules::relevance(&ranks);
        Ok(SearchOutcome {
            mode: requested,
            relevance,
            top_score,
            mean_score,
            hits,
            notices,
        })
    }

    /// Everything `q` finds, best first: chunks (hybrid), documents by title, entities by name,
    /// interleaved by reciprocal rank.
    pub async fn search_all(
        &self,
        p: &Principal,
        q: &str,
        first: usize,
    ) -> ServiceResult<Vec<AnyHit>> {
        p.require(Capability::Search)?;
        let first = first.clamp(1, MAX_TOP_K);
        let (chunks, documents, entities) = tokio::try_join!(
            self.search(
                p,
                SearchRequest {
                    query: q.to_owned(),
                    corpus_ids: None,
                    top_k: first,
                    mode: SearchMode::Hybrid,
                },
            ),
            async {
                Ok::<_, ServiceError>(
                    self.store
                        .documents_by_title(p, q.trim(), first as u64)
                        .await?,
                )
            },
            self.entity_hits(p, q.trim(), first),
        )?;
        // Each kind is its own ranked list; RRF interleaves them (documents, then entities,
        // then chunks on equal rank).
        let mut all: Vec<(f64, usize, AnyHit)> = Vec::new();
        let rrf = |i: usize| 1.0 / (rules::RRF_K + i as f64 + 1.0);
        all.extend(
            documents
                .into_iter()
                .enumerate()
                .map(|(i, d)| (rrf(i), 0, AnyHit::Document(d))),
        );
        all.extend(
            entities
                .into_iter()
                .enumerate()
                .map(|(i, e)| (rrf(i), 1, AnyHit::Entity(e))),
        );
        all.extend(
            chunks
                .hits
                .into_iter()
                .enumerate()
                .map(|(i, h)| (rrf(i), 2, AnyHit::Chunk(h))),
        );
        all.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        Ok(all.into_iter().take(first).map(|x| x.2).collect())
    }

    /// The seed's `[KNOWLEDGE]` line for the caller's team: how many documents the caller can
    /// read across the team's own corpora, and which corpora. `None` when the team has no
    /// corpora of its own (the block is then omitted).
    pub async fn knowledge_summary(&self, p: &Principal) -> ServiceResult<Option<String>> {
        p.require(Capability::CorpusRead)?;
        let rows = self.store.team_corpus_doc_counts(p).await?;
        if rows.is_empty() {
            return Ok(None);
        }
        let docs: i64 = rows.iter().map(|r| r.documents).sum();
        let list: Vec<String> = rows
            .iter()
            .map(|r| format!("{} (corpus_id={})", r.name, r.corpus_id))
            .collect();
        Ok(Some(format!(
            "Knowledge: {docs} document{} across {} {}: {}. Use `search` to find content.",
            if docs == 1 { "" } else { "s" },
            rows.len(),
            if rows.len() == 1 { "corpus" } else { "corpora" },
            list.join(", ")
        )))
    }

    /// Checks the requested corpora exist for the caller (NOT_FOUND otherwise).
    async fn search_scope(
        &self,
        p: &Principal,
        ids: Option<Vec<i64>>,
    ) -> ServiceResult<Option<Vec<i64>>> {
        let Some(mut ids) = ids else {
            return Ok(None);
        };
        ids.sort_unstable();
        ids.dedup();
        if ids.is_empty() {
            return Err(InvalidInput::new("corpusIds", "must not be an empty list").into());
        }
        let found = self.store.visible_corpora_by_ids(p.team_id, &ids).await?;
        if found.len() != ids.len() {
            return Err(ServiceError::NotFound("corpus"));
        }
        Ok(Some(ids))
    }

    pub(crate) async fn embed_query(&self, text: &str) -> ServiceResult<Vec<f32>> {
        let embedder = self
            .models
            .embedder
            .as_ref()
            .ok_or_else(|| ServiceError::Unavailable(NO_MODEL.into()))?;
        embedder
            .embed_query(text)
            .await
            .map_err(|e| ServiceError::Internal(format!("embedding the query: {e}")))
    }

    /// The first `top_k` fused hits that are still readable, with their chunks, in order.
    /// `known` are views a channel already read (in its own statement, so in the snapshot
    /// that found them readable); the others are read here, in one statement (none when
    /// every hit is known).
    async fn hydrate(
        &self,
        p: &Principal,
        fused: Vec<Fused>,
        top_k: usize,
        known: Vec<ChunkView>,
    ) -> ServiceResult<Vec<SearchHit>> {
        let head: Vec<Fused> = fused.into_iter().take(top_k).collect();
        let mut views: HashMap<i64, ChunkView> =
            known.into_iter().map(|v| (v.chunk_id, v)).collect();
        let missing: Vec<i64> = head
            .iter()
            .map(|f| f.chunk_id)
            .filter(|id| !views.contains_key(id))
            .collect();
        views.extend(
            self.store
                .chunk_views(p, &missing)
                .await?
                .into_iter()
                .map(|v| (v.chunk_id, v)),
        );
        Ok(head
            .into_iter()
            .filter_map(|rank| {
                views
                    .remove(&rank.chunk_id)
                    .map(|chunk| SearchHit { chunk, rank })
            })
            .collect())
    }
}

const NO_MODEL: &str =
    "no embedding model is loaded (set CAIRN_EMBED_MODEL or run scripts/fetch-model.sh)";

fn fuse(f: rules::Fusion, mode: SearchMode, v: &[ChannelHit], l: &[ChannelHit]) -> Vec<Fused> {
    let vector: Vec<(i64, f32)> = v.iter().map(|h| (h.chunk_id, h.score)).collect();
    let lexical: Vec<i64> = l.iter().map(|h| h.chunk_id).collect();
    match mode {
        SearchMode::Hybrid => rules::fuse(f, &vector, &lexical),
        SearchMode::Vector => rules::single_channel(&vector, &[]),
        SearchMode::Lexical => rules::single_channel(&[], &lexical),
    }
}
