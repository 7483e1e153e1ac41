//! GraphQL types and resolvers for the knowledge graph: `entities`, `entity`,
//! `neighbourhood`, `kgQuery`, `extractKnowledge`. Thin: parse, call `service`, convert; every
//! relation field (an entity's relations and mentions, a relation's ends and mentions, a
//! mention's document) goes through a per-request dataloader.

use async_graphql::connection::{Connection, EmptyFields};
use async_graphql::{ComplexObject, Context, Object, SimpleObject, ID};

use super::documents::GqlJob;
use super::error::{api, loaded};
use super::loaders::{load, load_list};
use super::{cairn_of, loaders_of, page_with, parse_id, principal_of, MAX_PAGE};
use crate::domain::InvalidInput;
use crate::service::kg::EntityCursor;
use crate::service::{KgEntity, KgMention, KgRelation};

/// An entity: a thing with a type and a canonical name, visible because at least one of its
/// mentions is on a document the caller can read.
#[derive(SimpleObject, Clone)]
#[graphql(name = "Entity", complex)]
pub struct GqlEntity {
    pub id: ID,
    pub name: String,
    #[graphql(name = "type")]
    pub entity_type: String,
    pub description: Option<String>,
    #[graphql(skip)]
    pub raw_id: i64,
}

impl From<KgEntity> for GqlEntity {
    fn from(e: KgEntity) -> Self {
        GqlEntity {
            id: ID(e.id.to_string()),
            name: e.name,
            entity_type: e.entity_type,
            description: e.description,
            raw_id: e.id,
        }
    }
}

#[ComplexObject]
impl GqlEntity {
    /// Relations in and out of this entity that have a readable mention.
    async fn relations(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<GqlRelation>> {
        load_list(&loaders_of(ctx)?.kg_entity_relations, self.raw_id).await
    }

    /// Every mention of this entity on a readable document.
    async fn mentions(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<GqlMention>> {
        load_list(&loaders_of(ctx)?.kg_entity_mentions, self.raw_id).await
    }
}

/// A typed, directed edge between two entities.
#[derive(SimpleObject, Clone)]
#[graphql(name = "Relation", complex)]
pub struct GqlRelation {
    pub id: ID,
    /// lower_snake_case.
    pub predicate: String,
    #[graphql(skip)]
    pub raw_id: i64,
    #[graphql(skip)]
    pub subject_id: i64,
    #[graphql(skip)]
    pub object_id: i64,
}

impl From<KgRelation> for GqlRelation {
    fn from(r: KgRelation) -> Self {
        GqlRelation {
            id: ID(r.id.to_string()),
            predicate: r.predicate,
            raw_id: r.id,
            subject_id: r.subject_id,
            object_id: r.object_id,
        }
    }
}

async fn load_entity(ctx: &Context<'_>, id: i64) -> async_graphql::Result<Option<GqlEntity>> {
    Ok(load(&loaders_of(ctx)?.kg_entities, id)
        .await?
        .map(GqlEntity::from))
}

#[ComplexObject]
impl GqlRelation {
    async fn subject(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<GqlEntity>> {
        load_entity(ctx, self.subject_id).await
    }

    async fn object(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<GqlEntity>> {
        load_entity(ctx, self.object_id).await
    }

    /// Every mention of this relation on a readable document.
    async fn mentions(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<GqlMention>> {
        load_list(&loaders_of(ctx)?.kg_relation_mentions, self.raw_id).await
    }
}

/// Where a fact was stated: the document and version, the verbatim sentence, and its
/// character offset in the text the extractor was given.
#[derive(SimpleObject, Clone)]
#[graphql(name = "Mention")]
pub struct GqlMention {
    pub id: ID,
    pub version: i32,
    pub snippet: String,
    /// Offset of the snippet in the document's text, in characters.
    pub offset: Option<i32>,
    /// The (readable) document that stated it.
    pub document: GqlMentionDocument,
}

/// The document a mention cites: its id and title (read with the mention, in the same
/// query that applied the readable rule).
#[derive(SimpleObject, Clone)]
#[graphql(name = "MentionDocument")]
pub struct GqlMentionDocument {
    pub id: ID,
    pub title: String,
}

impl From<KgMention> for GqlMention {
    fn from(m: KgMention) -> Self {
        GqlMention {
            id: ID(m.id.to_string()),
            version: m.version,
            snippet: m.snippet,
            offset: m.char_start,
            document: GqlMentionDocument {
                id: ID(m.document_id.to_string()),
                title: m.document_title,
            },
        }
    }
}

/// Loads, for a whole list of entities at once, the fields the query selects below them
/// (`look` is the entity's selection): mentions, relations, the relations' mentions and
/// ends. The per-item resolvers then hit the loaders' per-request cache.
async fn prime(
    ctx: &Context<'_>,
    look: async_graphql::Lookahead<'_>,
    ids: &[i64],
) -> async_graphql::Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    let l = loaders_of(ctx)?;
    if look.field("mentions").exists() {
        l.kg_entity_mentions
            .load_many(ids.iter().copied())
            .await
            .map_err(loaded)?;
    }
    let rels = look.field("relations");
    if rels.exists() {
        let relations = l
            .kg_entity_relations
            .load_many(ids.iter().copied())
            .await
            .map_err(loaded)?;
        let mut rel_ids = Vec::new();
        let mut ends = Vec::new();
        for r in relations.values().flatten() {
            rel_ids.push(r.id);
            ends.push(r.subject_id);
            ends.push(r.object_id);
        }
        if rels.field("mentions").exists() {
            l.kg_relation_mentions
                .load_many(rel_ids)
                .await
                .map_err(loaded)?;
        }
        if rels.field("subject").exists() || rels.field("object").exists() {
            l.kg_entities.load_many(ends).await.map_err(loaded)?;
        }
    }
    Ok(())
}

/// An `entities` cursor: the entity id, and with `q` its fused position first (`"3:41"`).
fn entity_cursor(id: i64, position: Option<usize>) -> String {
    match position {
        Some(p) => format!("{p}:{id}"),
        None => id.to_string(),
    }
}

fn parse_entity_cursor(c: &str) -> async_graphql::Result<EntityCursor> {
    let bad = || api(InvalidInput::new("after", "invalid cursor").into());
    let (position, id) = match c.split_once(':') {
        Some((p, id)) => (Some(p.parse::<usize>().map_err(|_| bad())?), id),
        None => (None, c),
    };
    Ok(EntityCursor {
        id: id.parse::<i64>().map_err(|_| bad())?,
        position,
    })
}

/// A neighbourhood: the entities reached and the relations walked.
#[derive(SimpleObject)]
#[graphql(name = "Subgraph")]
pub struct GqlSubgraph {
    pub nodes: Vec<GqlEntity>,
    pub edges: Vec<GqlRelation>,
}

#[derive(Default)]
pub struct KgQuery;

#[Object]
impl KgQuery {
    /// Entities with a readable mention: by id without `q`; with `q`, the name match fused
    /// with the anchor (name + description) similarity. `type` filters. Cursors are opaque
    /// (with `q` they also hold the position in the fused order, so paging continues even
    /// when the last entity of a page has since disappeared).
    #[graphql(
        complexity = "(if q.is_some() { crate::graphql::cost::ENTITY_QUERY } else { 1 }) + first.unwrap_or(20).clamp(1, 100) as usize * child_complexity"
    )]
    async fn entities(
        &self,
        ctx: &Context<'_>,
        q: Option<String>,
        #[graphql(name = "type")] entity_type: Option<String>,
        first: Option<i32>,
        after: Option<String>,
    ) -> async_graphql::Result<Connection<String, GqlEntity, EmptyFields, EmptyFields>> {
        let p = principal_of(ctx)?;
        let limit = first.unwrap_or(20).clamp(1, MAX_PAGE as i32) as usize;
        let after = after.as_deref().map(parse_entity_cursor).transpose()?;
        let got = cairn_of(ctx)?
            .entities(p, q.as_deref(), entity_type.as_deref(), after, limit)
            .await
            .map_err(api)?;
        let ids: Vec<i64> = got.rows.iter().take(limit).map(|e| e.id).collect();
        prime(ctx, ctx.look_ahead().field("edges").field("node"), &ids).await?;
        let start = got.start;
        Ok(page_with(
            got.rows,
            limit,
            after.is_some(),
            |i, e| entity_cursor(e.id, start.map(|s| s + i)),
            GqlEntity::from,
        ))
    }

    /// One entity; null both when it does not exist and when no mention of it is readable.
    async fn entity(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<Option<GqlEntity>> {
        let p = principal_of(ctx)?;
        let Ok(id) = id.parse::<i64>() else {
            return Ok(None);
        };
        Ok(cairn_of(ctx)?
            .entity(p, id)
            .await
            .map_err(api)?
            .map(GqlEntity::from))
    }

    /// The entities and relations within `hops` (0…2) of an entity given by id or name.
    #[graphql(complexity = "crate::graphql::cost::NEIGHBOURHOOD + child_complexity")]
    async fn neighbourhood(
        &self,
        ctx: &Context<'_>,
        id: Option<ID>,
        name: Option<String>,
        #[graphql(default = 1)] hops: i32,
    ) -> async_graphql::Result<GqlSubgraph> {
        let p = principal_of(ctx)?;
        let id = id.as_ref().map(|i| parse_id(i, "entity")).transpose()?;
        let g = cairn_of(ctx)?
            .neighbourhood(p, id, name.as_deref(), hops)
            .await
            .map_err(api)?;
        let look = ctx.look_ahead();
        let node_ids: Vec<i64> = g.nodes.iter().map(|e| e.id).collect();
        prime(ctx, look.field("nodes"), &node_ids).await?;
        let edges = look.field("edges");
        if edges.field("subject").exists() || edges.field("object").exists() {
            loaders_of(ctx)?
                .kg_entities
                .load_many(node_ids.iter().copied())
                .await
                .map_err(loaded)?;
        }
        if edges.field("mentions").exists() {
            loaders_of(ctx)?
                .kg_relation_mentions
                .load_many(g.edges.iter().map(|r| r.id))
                .await
                .map_err(loaded)?;
        }
        Ok(GqlSubgraph {
            nodes: g.nodes.into_iter().map(GqlEntity::from).collect(),
            edges: g.edges.into_iter().map(GqlRelation::from).collect(),
        })
    }

    /// The neighbourhood as text for an agent: one fact per line, each ending with its
    /// citations `[doc <id> v<version>: "<snippet>"]`.
    #[graphql(complexity = "crate::graphql::cost::KG_QUERY")]
    async fn kg_query(
        &self,
        ctx: &Context<'_>,
        id: Option<ID>,
        name: Option<String>,
        #[graphql(default = 1)] hops: i32,
    ) -> async_graphql::Result<String> {
        let p = principal_of(ctx)?;
        let id = id.as_ref().map(|i| parse_id(i, "entity")).transpose()?;
        cairn_of(ctx)?
            .kg_query(p, id, name.as_deref(), hops)
            .await
            .map_err(api)
    }
}

#[derive(Default)]
pub struct KgMutation;

#[Object]
impl KgMutation {
    /// Queues a knowledge extraction over at most 40 unextracted documents (of a corpus, or
    /// the given ones, or the team's) that the caller can read. Needs `workflows.run`.
    /// QUOTA_EXCEEDED when the team's documents per 24 hours are spent; a run that reaches
    /// the quota stops and reports the documents it left (`left`, `quotaReached` in its
    /// result). The job ends in stage `extracted`.
    async fn extract_knowledge(
        &self,
        ctx: &Context<'_>,
        corpus_id: Option<ID>,
        document_ids: Option<Vec<ID>>,
    ) -> async_graphql::Result<GqlJob> {
        let p = principal_of(ctx)?;
        let corpus_id = corpus_id
            .as_ref()
            .map(|c| parse_id(c, "corpus"))
            .transpose()?;
        let document_ids = document_ids
            .map(|ids| {
                ids.iter()
                    .map(|d| parse_id(d, "document"))
                    .collect::<async_graphql::Result<Vec<i64>>>()
            })
            .transpose()?;
        let job = cairn_of(ctx)?
            .extract_knowledge(p, corpus_id, document_ids)
            .await
            .map_err(api)?;
        Ok(GqlJob { job, result: None })
    }
}
