//! The knowledge graph's use cases (seed 001): queue an extraction, find entities, read one,
//! walk a neighbourhood, and render it as cited text for an agent. The mention rule is
//! applied by the store, in SQL; this module only checks capabilities, validates input and
//! composes batched store calls.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use entity::prelude::Job;

use super::search::EntityHit;
use super::{Cairn, ServiceError, ServiceResult};
use crate::auth::Principal;
use crate::domain::{self, search as rules, Capability, InvalidInput};
use crate::jobs::{JobKind, KgPayload};
use crate::knowledge::{KgLimits, QUOTA_WINDOW_HOURS};
use crate::store::kg::{KgEntity, KgMention, KgRelation};

/// The most hops `neighbourhood` and `kgQuery` walk (seed 001, KG‑5).
pub const MAX_HOPS: i32 = 2;
/// The least anchor cosine for an entity to be found by meaning (below it, MiniLM pairs
/// unrelated short texts).
pub const MIN_ANCHOR_COSINE: f32 = 0.45;
/// How deep each channel of `entities(q)` is pulled before fusion.
const ENTITY_CHANNEL_DEPTH: usize = 300;
/// Mentions cited per line of `kgQuery`.
const CITATIONS_PER_LINE: usize = 3;

/// Where a page of `entities` continues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntityCursor {
    /// The last entity of the previous page.
    pub id: i64,
    /// With `q`: that entity's 0-based position in the fused order when the page was served.
    /// If the entity has since left the list (its last readable mention went), the next page
    /// starts at this position (everything after it moved up by one) instead of ending.
    pub position: Option<usize>,
}

/// One page of `entities`: up to `limit + 1` rows (the extra says "more").
#[derive(Clone, Debug, Default)]
pub struct EntityPage {
    pub rows: Vec<KgEntity>,
    /// With `q`: the fused position of `rows[0]` (row `i` is at `start + i`).
    pub start: Option<usize>,
}

/// A neighbourhood: the entities reached and the relations walked, each relation with its
/// readable mentions.
#[derive(Clone, Debug, Default)]
pub struct Subgraph {
    pub nodes: Vec<KgEntity>,
    pub edges: Vec<KgRelation>,
}

impl Cairn {
    /// Queues a `kg_extract` job over the unextracted documents of a corpus, or of the given
    /// documents, or of the whole team. Refused (QuotaExceeded) when the team's documents per
    /// 24 hours are spent.
    pub async fn extract_knowledge(
        &self,
        p: &Principal,
        corpus_id: Option<i64>,
        document_ids: Option<Vec<i64>>,
    ) -> ServiceResult<Job> {
        p.require(Capability::WorkflowsRun)?;
        if let Some(c) = corpus_id {
            self.store
                .visible_corpus(p.team_id, c)
                .await?
                .ok_or(ServiceError::NotFound("corpus"))?;
        }
        if let Some(ids) = &document_ids {
            if ids.is_empty() {
                return Err(InvalidInput::new("documentIds", "must not be empty").into());
            }
            if ids.len() > 1000 {
                return Err(InvalidInput::new("documentIds", "at most 1000 ids").into());
            }
        }
        let quota = self.kg_limits.daily_docs;
        if quota > 0 {
            let used = self
                .store
                .kg_extractions_since(p.team_id, KgLimits::window_start())
                .await?;
            if used >= quota {
                return Err(ServiceError::QuotaExceeded(format!(
                    "the team's knowledge-extraction quota is spent: {used} of {quota} documents in the last {QUOTA_WINDOW_HOURS} hours; try again later"
                )));
            }
        }
        let payload = KgPayload {
            requested_by: p.user_id,
            corpus_id,
            document_ids,
        };
        let new_job = JobKind::KgExtract(payload)
            .new_job(p.team_id, p.user_id)
            .map_err(|e| ServiceError::Internal(e.to_string()))?;
        Ok(self.queue.submit(&self.store, &self.bus, new_job).await?)
    }

    /// One page of visible entities. Without `q`: by id (keyset after `after.id`). With `q`:
    /// the name match (normalized substring; exact, then prefix, then shorter names) fused by
    /// RRF with the anchor cosine (when an embedder is loaded), the page continuing after the
    /// entity `after.id` in that order, or, when that entity is no longer in the list, at
    /// `after.position` (see [`EntityCursor`]). Returns up to `limit + 1` rows.
    pub async fn entities(
        &self,
        p: &Principal,
        q: Option<&str>,
        entity_type: Option<&str>,
        after: Option<EntityCursor>,
        limit: usize,
    ) -> ServiceResult<EntityPage> {
        p.require(Capability::CorpusRead)?;
        if let Some(t) = entity_type {
            domain::bounded(t, "type", domain::MAX_NAME_CHARS)?;
        }
        let entity_type = entity_type.map(cairn_kg::normalize::type_norm);
        let q = q.map(str::trim).filter(|q| !q.is_empty());
        if let Some(q) = q {
            domain::bounded(q, "q", domain::MAX_QUERY_CHARS)?;
        }
        let Some(q) = q else {
            let rows = self
                .store
                .find_entities(
                    p,
                    None,
                    entity_type.as_deref(),
                    after.map(|a| a.id),
                    limit as u64 + 1,
                )
                .await?;
            return Ok(EntityPage { rows, start: None });
        };
        let ranked = self
            .ranked_entities(p, q, entity_type.as_deref(), ENTITY_CHANNEL_DEPTH)
            .await?;
        let start = after.map_or(0, |a| resume_at(&ranked, a));
        let rows = ranked.into_iter().skip(start).take(limit + 1).collect();
        Ok(EntityPage {
            rows,
            start: Some(start),
        })
    }

    /// Visible entities for `q`, best first: name match and anchor cosine fused by RRF.
    async fn ranked_entities(
        &self,
        p: &Principal,
        q: &str,
        entity_type: Option<&str>,
        depth: usize,
    ) -> ServiceResult<Vec<KgEntity>> {
        let norm = cairn_kg::normalize::name_norm(q);
        let by_name = if norm.is_empty() {
            Vec::new()
        } else {
            self.store
                .entities_by_name(p, &norm, entity_type, depth as u64)
                .await?
        };
        let by_vector: Vec<(i64, f32)> = match &self.models.embedder {
            Some(e) => match e.embed_query(q).await {
                Ok(v) => self
                    .store
                    .entities_by_vector(p, &v, entity_type, depth)
                    .await?
                    .into_iter()
                    .filter(|&(_, c)| c >= MIN_ANCHOR_COSINE)
                    .collect(),
                Err(err) => {
                    tracing::warn!(error = %err, "entity query not embedded; name match only");
                    Vec::new()
                }
            },
            None => Vec::new(),
        };
        let lexical: Vec<i64> = by_name.iter().map(|e| e.id).collect();
        let fused = rules::rrf(&by_vector, &lexical);
        let mut known: HashMap<i64, KgEntity> = by_name.into_iter().map(|e| (e.id, e)).collect();
        let missing: Vec<i64> = fused
            .iter()
            .map(|f| f.chunk_id)
            .filter(|id| !known.contains_key(id))
            .collect();
        for e in self.store.visible_entities(p, &missing).await? {
            known.insert(e.id, e);
        }
        Ok(fused
            .into_iter()
            .filter_map(|f| known.remove(&f.chunk_id))
            .collect())
    }

    /// An entity `p` can see (at least one readable mention); `None` both when it does not
    /// exist and when no mention is readable.
    pub async fn entity(&self, p: &Principal, id: i64) -> ServiceResult<Option<KgEntity>> {
        p.require(Capability::CorpusRead)?;
        Ok(self.store.visible_entities(p, &[id]).await?.pop())
    }

    /// Visible entities among `ids` (dataloader).
    pub async fn entities_by_ids(
        &self,
        p: &Principal,
        ids: &[i64],
    ) -> ServiceResult<Vec<KgEntity>> {
        p.require(Capability::CorpusRead)?;
        Ok(self.store.visible_entities(p, ids).await?)
    }

    /// Readable mentions of entities (dataloader).
    pub async fn entity_mentions(
        &self,
        p: &Principal,
        ids: &[i64],
    ) -> ServiceResult<Vec<KgMention>> {
        p.require(Capability::CorpusRead)?;
        Ok(self.store.readable_mentions_of_entities(p, ids).await?)
    }

    /// Readable mentions of relations (dataloader).
    pub async fn relation_mentions(
        &self,
        p: &Principal,
        ids: &[i64],
    ) -> ServiceResult<Vec<KgMention>> {
        p.require(Capability::CorpusRead)?;
        Ok(self.store.readable_mentions_of_relations(p, ids).await?)
    }

    /// Visible relations in or out of entities (dataloader).
    pub async fn entity_relations(
        &self,
        p: &Principal,
        ids: &[i64],
    ) -> ServiceResult<Vec<KgRelation>> {
        p.require(Capability::CorpusRead)?;
        Ok(self.store.visible_relations_of_entities(p, ids).await?)
    }

    /// The entity an id or a name designates (a name: the best name match).
    async fn start_entity(
        &self,
        p: &Principal,
        id: Option<i64>,
        name: Option<&str>,
    ) -> ServiceResult<KgEntity> {
        if let Some(n) = name {
            domain::bounded(n, "name", domain::MAX_QUERY_CHARS)?;
        }
        let found = match (id, name.map(str::trim).filter(|n| !n.is_empty())) {
            (Some(id), _) => self.store.visible_entities(p, &[id]).await?.pop(),
            (None, Some(name)) => {
                let norm = cairn_kg::normalize::name_norm(name);
                if norm.is_empty() {
                    None
                } else {
                    self.store
                        .entities_by_name(p, &norm, None, 1)
                        .await?
                        .into_iter()
                        .next()
                }
            }
            (None, None) => {
                return Err(InvalidInput::new("id", "give an entity id or a name").into())
            }
        };
        found.ok_or(ServiceError::NotFound("entity"))
    }

    /// The entities and relations within `hops` (0…2) of an entity, under the mention rule.
    /// One relation query and one entity query per hop.
    pub async fn neighbourhood(
        &self,
        p: &Principal,
        id: Option<i64>,
        name: Option<&str>,
        hops: i32,
    ) -> ServiceResult<Subgraph> {
        p.require(Capability::CorpusRead)?;
        if !(0..=MAX_HOPS).contains(&hops) {
            return Err(
                InvalidInput::new("hops", format!("must be between 0 and {MAX_HOPS}")).into(),
            );
        }
        let start = self.start_entity(p, id, name).await?;
        let mut nodes: BTreeMap<i64, KgEntity> = BTreeMap::new();
        let mut edges: BTreeMap<i64, KgRelation> = BTreeMap::new();
        let mut frontier = vec![start.id];
        nodes.insert(start.id, start);
        for _ in 0..hops {
            if frontier.is_empty() {
                break;
            }
            let rels = self
                .store
                .visible_relations_of_entities(p, &frontier)
                .await?;
            let mut next: BTreeSet<i64> = BTreeSet::new();
            for r in rels {
                for end in [r.subject_id, r.object_id] {
                    if !nodes.contains_key(&end) {
                        next.insert(end);
                    }
                }
                edges.insert(r.id, r);
            }
            let next: Vec<i64> = next.into_iter().collect();
            for e in self.store.visible_entities(p, &next).await? {
                nodes.insert(e.id, e);
            }
            frontier = next;
        }
        // A relation is only kept when both of its ends are visible (always true for
        // validated extractions: both ends are mentioned in the relation's document).
        let edges = edges
            .into_values()
            .filter(|r| nodes.contains_key(&r.subject_id) && nodes.contains_key(&r.object_id))
            .collect();
        Ok(Subgraph {
            nodes: nodes.into_values().collect(),
            edges,
        })
    }

    /// The neighbourhood as text for an agent: one fact per line, each ending with its
    /// citations (`[doc 12 v1: "snippet"]`), only from readable documents.
    pub async fn kg_query(
        &self,
        p: &Principal,
        id: Option<i64>,
        name: Option<&str>,
        hops: i32,
    ) -> ServiceResult<String> {
        let g = self.neighbourhood(p, id, name, hops).await?;
        let node_ids: Vec<i64> = g.nodes.iter().map(|e| e.id).collect();
        let edge_ids: Vec<i64> = g.edges.iter().map(|r| r.id).collect();
        let (entity_mentions, relation_mentions) = tokio::try_join!(
            self.store.readable_mentions_of_entities(p, &node_ids),
            self.store.readable_mentions_of_relations(p, &edge_ids),
        )?;
        let mut by_entity: HashMap<i64, Vec<&KgMention>> = HashMap::new();
        for m in &entity_mentions {
            if let Some(e) = m.entity_id {
                by_entity.entry(e).or_default().push(m);
            }
        }
        let mut by_relation: HashMap<i64, Vec<&KgMention>> = HashMap::new();
        for m in &relation_mentions {
            if let Some(r) = m.relation_id {
                by_relation.entry(r).or_default().push(m);
            }
        }
        let names: HashMap<i64, &str> = g.nodes.iter().map(|e| (e.id, e.name.as_str())).collect();
        let mut out = String::new();
        for e in &g.nodes {
            let Some(ms) = by_entity.get(&e.id) else {
                continue;
            };
            let desc = e
                .description
                .as_deref()
                .filter(|d| !d.is_empty())
                .map(|d| format!(": {d}"))
                .unwrap_or_default();
            out.push_str(&format!(
                "{} ({}){} {}\n",
                e.name,
                e.entity_type,
                desc,
                citations(ms)
            ));
        }
        for r in &g.edges {
            let (Some(s), Some(o), Some(ms)) = (
                names.get(&r.subject_id),
                names.get(&r.object_id),
                by_relation.get(&r.id),
            ) else {
                continue;
            };
            out.push_str(&format!("{s} {} {o} {}\n", r.predicate, citations(ms)));
        }
        Ok(out)
    }

    /// `searchAll`'s entity kind: visible entities by name (and meaning), best first.
    pub async fn entity_hits(
        &self,
        p: &Principal,
        q: &str,
        first: usize,
    ) -> ServiceResult<Vec<EntityHit>> {
        p.require(Capability::Search)?;
        if q.trim().is_empty() {
            return Ok(Vec::new());
        }
        domain::bounded(q, "q", domain::MAX_QUERY_CHARS)?;
        let mut ranked = self.ranked_entities(p, q, None, first.max(1)).await?;
        ranked.truncate(first);
        Ok(ranked
            .into_iter()
            .map(|e| EntityHit {
                id: e.id,
                entity_type: e.entity_type,
                name: e.name,
                description: e.description,
            })
            .collect())
    }
}

/// Where a `q` page resumes in the fused list: after the cursor's entity if it is still
/// there; else at the cursor's position (the entity left and the rest moved up); an id-only
/// cursor whose entity left ends the list.
fn resume_at(ranked: &[KgEntity], after: EntityCursor) -> usize {
    match ranked.iter().position(|e| e.id == after.id) {
        Some(i) => i + 1,
        None => after.position.map_or(ranked.len(), |p| p.min(ranked.len())),
    }
}

/// ` [doc 12 v1: "snippet"] [doc 14 v2: "…"]`, at most [`CITATIONS_PER_LINE`].
fn citations(ms: &[&KgMention]) -> String {
    ms.iter()
        .take(CITATIONS_PER_LINE)
        .map(|m| {
            format!(
                "[doc {} v{}: \"{}\"]",
                m.document_id,
                m.version,
                m.snippet.replace('\n', " ").replace('"', "'")
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(ids: &[i64]) -> Vec<KgEntity> {
        ids.iter()
            .map(|&id| KgEntity {
                id,
                team_id: 1,
                entity_type: "organization".into(),
                name: format!("e{id}"),
                name_norm: format!("e{id}"),
                description: None,
            })
            .collect()
    }

    #[test]
    fn a_q_page_resumes_after_its_entity_or_at_its_position() {
        let now = list(&[5, 9, 2, 7]);
        let at = |id, position| resume_at(&now, EntityCursor { id, position });
        // Still listed: right after it, wherever it moved.
        assert_eq!(at(9, Some(1)), 2);
        assert_eq!(at(9, Some(3)), 2);
        // Gone (it was at position 1, so 2 moved up to 1): resume at the position.
        assert_eq!(at(4, Some(1)), 1);
        // Gone from the end, or past it: nothing more.
        assert_eq!(at(4, Some(4)), 4);
        assert_eq!(at(4, Some(40)), 4);
        // An id-only cursor whose entity is gone: nothing more.
        assert_eq!(at(4, None), 4);
    }
}
