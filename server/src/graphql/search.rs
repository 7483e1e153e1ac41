//! GraphQL types and resolvers for retrieval: `search`, `searchAll`, `answer`,
//! `knowledgeSummary`. Thin: parse, call `service`, convert.

use async_graphql::{ComplexObject, Context, Enum, Object, SimpleObject, Union, ID};

use super::documents::GqlDocument;
use super::error::api;
use super::loaders::load;
use super::{cairn_of, loaders_of, parse_id, principal_of};
use crate::service::search::{AnyHit, EntityHit, SearchHit, SearchOutcome, SearchRequest};
use crate::service::{AnswerOutcome, Citation, LlmUsage};

#[derive(Enum, Clone, Copy, PartialEq, Eq, Debug)]
#[graphql(name = "SearchMode", remote = "crate::domain::search::SearchMode")]
pub enum GqlSearchMode {
    /// Both channels, fused by Reciprocal Rank Fusion (K = 60, each channel 300 deep).
    Hybrid,
    /// Cosine similarity of the query's embedding only.
    Vector,
    /// Full-text match only, the heading weighted above the body.
    Lexical,
}

/// How well the corpus answers the query. LOW: the corpus does not contain the content (do
/// not re-search with other words). LEXICAL_MATCH: the top hit matched by words, not meaning.
#[derive(Enum, Clone, Copy, PartialEq, Eq, Debug)]
#[graphql(name = "Relevance", remote = "crate::domain::search::Relevance")]
pub enum GqlRelevance {
    Low,
    Moderate,
    High,
    LexicalMatch,
}

/// A ranked list of chunks with the relevance banner.
#[derive(SimpleObject)]
#[graphql(name = "SearchResult")]
pub struct GqlSearchResult {
    pub mode: GqlSearchMode,
    pub relevance: GqlRelevance,
    /// The best cosine similarity among the results.
    pub top_score: f64,
    /// The mean cosine similarity of the top three results.
    pub mean_score: f64,
    pub results: Vec<GqlChunkHit>,
    /// Said when a channel could not run (for example: no embedding model, lexical only).
    pub notices: Vec<String>,
}

impl From<SearchOutcome> for GqlSearchResult {
    fn from(o: SearchOutcome) -> Self {
        GqlSearchResult {
            mode: o.mode.into(),
            relevance: o.relevance.into(),
            top_score: f64::from(o.top_score),
            mean_score: f64::from(o.mean_score),
            results: o.hits.into_iter().map(GqlChunkHit::from).collect(),
            notices: o.notices,
        }
    }
}

/// A chunk found by search: its full, untruncated text, where it comes from, and how it
/// ranked.
#[derive(SimpleObject)]
#[graphql(name = "ChunkHit", complex)]
pub struct GqlChunkHit {
    pub chunk_id: ID,
    pub document_id: ID,
    pub corpus_id: ID,
    pub document_title: String,
    /// The document version the chunk belongs to (its current one).
    pub version: i32,
    pub chunk_index: i32,
    pub section: Option<String>,
    pub page: Option<i32>,
    /// The whole chunk, never truncated.
    pub content: String,
    /// Cosine similarity to the query (0.0 for a lexical-only hit).
    pub score: f64,
    /// 1-based rank in the vector channel, if the chunk was in its top 300.
    pub vector_rank: Option<i32>,
    /// 1-based rank in the lexical channel, if the chunk was in its top 300.
    pub lexical_rank: Option<i32>,
    /// The Reciprocal Rank Fusion score that ordered the results.
    pub fused_score: f64,
    #[graphql(skip)]
    pub raw_document_id: i64,
}

impl From<SearchHit> for GqlChunkHit {
    fn from(h: SearchHit) -> Self {
        let c = h.chunk;
        GqlChunkHit {
            chunk_id: ID(c.chunk_id.to_string()),
            document_id: ID(c.document_id.to_string()),
            corpus_id: ID(c.corpus_id.to_string()),
            raw_document_id: c.document_id,
            document_title: c.title,
            version: c.version,
            chunk_index: c.chunk_index,
            section: c.section,
            page: c.page,
            content: c.content,
            score: f64::from(h.rank.score),
            vector_rank: h.rank.vector_rank.map(|r| r as i32),
            lexical_rank: h.rank.lexical_rank.map(|r| r as i32),
            fused_score: h.rank.fused_score,
        }
    }
}

#[ComplexObject]
impl GqlChunkHit {
    /// The document (through the request's document loader).
    async fn document(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<GqlDocument>> {
        load_document(ctx, self.raw_document_id).await
    }
}

/// A document whose title matched.
#[derive(SimpleObject)]
#[graphql(name = "DocumentHit")]
pub struct GqlDocumentHit {
    pub document: GqlDocument,
}

/// A knowledge-graph entity whose name matched (visible through a readable mention).
#[derive(SimpleObject)]
#[graphql(name = "EntityHit")]
pub struct GqlEntityHit {
    pub id: ID,
    #[graphql(name = "type")]
    pub entity_type: String,
    pub name: String,
    pub description: Option<String>,
}

impl From<EntityHit> for GqlEntityHit {
    fn from(e: EntityHit) -> Self {
        GqlEntityHit {
            id: ID(e.id.to_string()),
            entity_type: e.entity_type,
            name: e.name,
            description: e.description,
        }
    }
}

/// One `searchAll` result: a chunk, a document (by title) or an entity (by name).
#[derive(Union)]
#[graphql(name = "SearchHit")]
pub enum GqlSearchHit {
    Chunk(GqlChunkHit),
    Document(GqlDocumentHit),
    Entity(GqlEntityHit),
}

/// An answer to a question, with its numbered citations.
#[derive(SimpleObject)]
#[graphql(name = "Answer")]
pub struct GqlAnswer {
    /// The answer text; `[n]` markers refer to `citations[].number`.
    pub answer: String,
    /// True when no language model is configured: the answer quotes the best-matching
    /// sentences instead of synthesizing.
    pub extractive: bool,
    /// The relevance banner of the retrieval the answer draws on.
    pub relevance: GqlRelevance,
    pub citations: Vec<GqlCitation>,
    /// Tokens and cost of the language-model call (null for extractive answers).
    pub usage: Option<GqlLlmUsage>,
}

impl From<AnswerOutcome> for GqlAnswer {
    fn from(a: AnswerOutcome) -> Self {
        GqlAnswer {
            answer: a.answer,
            extractive: a.extractive,
            relevance: a.relevance.into(),
            citations: a.citations.into_iter().map(GqlCitation::from).collect(),
            usage: a.usage.map(GqlLlmUsage::from),
        }
    }
}

/// A numbered source: document, version, section, page and the excerpt relied on.
#[derive(SimpleObject)]
#[graphql(name = "Citation", complex)]
pub struct GqlCitation {
    pub number: i32,
    pub chunk_id: ID,
    pub document_id: ID,
    pub document_title: String,
    pub version: i32,
    pub section: Option<String>,
    pub page: Option<i32>,
    pub excerpt: String,
    #[graphql(skip)]
    pub raw_document_id: i64,
}

impl From<Citation> for GqlCitation {
    fn from(c: Citation) -> Self {
        GqlCitation {
            number: i32::try_from(c.number).unwrap_or(i32::MAX),
            chunk_id: ID(c.chunk.chunk_id.to_string()),
            document_id: ID(c.chunk.document_id.to_string()),
            raw_document_id: c.chunk.document_id,
            document_title: c.chunk.title,
            version: c.chunk.version,
            section: c.chunk.section,
            page: c.chunk.page,
            excerpt: c.excerpt,
        }
    }
}

#[ComplexObject]
impl GqlCitation {
    async fn document(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<GqlDocument>> {
        load_document(ctx, self.raw_document_id).await
    }
}

#[derive(SimpleObject)]
#[graphql(name = "LlmUsage")]
pub struct GqlLlmUsage {
    pub model: String,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost_usd: f64,
}

impl From<LlmUsage> for GqlLlmUsage {
    fn from(u: LlmUsage) -> Self {
        GqlLlmUsage {
            model: u.model,
            input_tokens: i64::try_from(u.input_tokens).unwrap_or(i64::MAX),
            output_tokens: i64::try_from(u.output_tokens).unwrap_or(i64::MAX),
            cost_usd: u.cost_usd,
        }
    }
}

async fn load_document(ctx: &Context<'_>, id: i64) -> async_graphql::Result<Option<GqlDocument>> {
    Ok(load(&loaders_of(ctx)?.documents, id)
        .await?
        .map(GqlDocument::from))
}

fn parse_corpus_ids(ids: Option<Vec<ID>>) -> async_graphql::Result<Option<Vec<i64>>> {
    ids.map(|ids| {
        ids.iter()
            .map(|i| parse_id(i, "corpus"))
            .collect::<Result<Vec<_>, _>>()
    })
    .transpose()
}

#[derive(Default)]
pub struct SearchQuery;

#[Object]
impl SearchQuery {
    /// Chunks of the documents the caller may read, best first, with the relevance banner.
    #[graphql(
        complexity = "crate::graphql::cost::SEARCH + top_k.clamp(0, 100) as usize * child_complexity"
    )]
    async fn search(
        &self,
        ctx: &Context<'_>,
        query: String,
        corpus_ids: Option<Vec<ID>>,
        #[graphql(default = 10)] top_k: i32,
        #[graphql(default_with = "GqlSearchMode::Hybrid")] mode: GqlSearchMode,
    ) -> async_graphql::Result<GqlSearchResult> {
        let p = principal_of(ctx)?;
        let corpus_ids = parse_corpus_ids(corpus_ids)?;
        let outcome = cairn_of(ctx)?
            .search(
                p,
                SearchRequest {
                    query,
                    corpus_ids,
                    top_k: usize::try_from(top_k).unwrap_or(0),
                    mode: mode.into(),
                },
            )
            .await
            .map_err(api)?;
        Ok(outcome.into())
    }

    /// Everything a short query finds: chunks, documents by title and entities by name, each
    /// filtered by what the caller may read, interleaved by rank.
    #[graphql(
        complexity = "crate::graphql::cost::SEARCH_ALL + first.clamp(0, 100) as usize * child_complexity"
    )]
    async fn search_all(
        &self,
        ctx: &Context<'_>,
        q: String,
        #[graphql(default = 20)] first: i32,
    ) -> async_graphql::Result<Vec<GqlSearchHit>> {
        let p = principal_of(ctx)?;
        let hits = cairn_of(ctx)?
            .search_all(p, &q, usize::try_from(first).unwrap_or(1))
            .await
            .map_err(api)?;
        Ok(hits
            .into_iter()
            .map(|h| match h {
                AnyHit::Chunk(c) => GqlSearchHit::Chunk(c.into()),
                AnyHit::Document(d) => {
                    GqlSearchHit::Document(GqlDocumentHit { document: d.into() })
                }
                AnyHit::Entity(e) => GqlSearchHit::Entity(e.into()),
            })
            .collect())
    }

    /// Answers a question from the documents the caller may read: an LLM synthesis with
    /// numbered citations when a `chat` model is configured (the question is anonymized before
    /// it leaves the server), else an extractive answer that says so.
    #[graphql(complexity = "crate::graphql::cost::ANSWER + child_complexity")]
    async fn answer(
        &self,
        ctx: &Context<'_>,
        question: String,
        corpus_ids: Option<Vec<ID>>,
    ) -> async_graphql::Result<GqlAnswer> {
        let p = principal_of(ctx)?;
        let corpus_ids = parse_corpus_ids(corpus_ids)?;
        let a = cairn_of(ctx)?
            .answer(p, &question, corpus_ids)
            .await
            .map_err(api)?;
        Ok(a.into())
    }

    /// The one-line `[KNOWLEDGE]` summary of the caller's team (seed 004, "Prompt context"):
    /// how many documents across which corpora. Null when the team has no corpora.
    #[graphql(complexity = "crate::graphql::cost::KNOWLEDGE_SUMMARY")]
    async fn knowledge_summary(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<String>> {
        let p = principal_of(ctx)?;
        cairn_of(ctx)?.knowledge_summary(p).await.map_err(api)
    }

    /// The `[SUGGESTED CONTEXT]` block for a user's message (seed 004, "Pre-fetch context"):
    /// the best chunks of the `operational_patterns` (3) and `user_behavior` (2) system
    /// corpora, and of `data_catalog` (25, as entry ids) when the instance enables it. The
    /// empty string when nothing applies or anything fails: never an error once signed in.
    #[graphql(complexity = "crate::graphql::cost::SUGGESTED_CONTEXT")]
    async fn suggested_context(
        &self,
        ctx: &Context<'_>,
        message: String,
    ) -> async_graphql::Result<String> {
        let p = principal_of(ctx)?;
        Ok(cairn_of(ctx)?.suggested_context(p, &message).await)
    }
}
