//! The extractor's output contract and its validation.
//!
//! The contract (seed 001, "Data shapes"):
//!
//! ```json
//! { "entities":  [{"type":"organization","name":"Acme Robotics","description":"…",
//!                  "snippet":"…verbatim from the source…"}],
//!   "relations": [{"subject":"Acme Robotics","predicate":"customer_of",
//!                  "object":"Globex Media","snippet":"…verbatim…"}] }
//! ```
//!
//! [`validate`] refuses the WHOLE reply on the first rule it breaks (a bad fact that looks
//! finished is worse than a missing one). The rules, in the order they are checked:
//!
//! 1. the reply parses as JSON ([`Refusal::NotJson`]); surrounding whitespace and one Markdown
//!    code fence around the JSON are tolerated;
//! 2. it has the contract's shape ([`Refusal::BadShape`]): both arrays present, `type`, `name`,
//!    `snippet`, `subject`, `predicate`, `object` strings, `description` a string, null or
//!    absent; extra fields anywhere are ignored; an entity type that normalizes to nothing is a
//!    shape error too;
//! 3. per entity, in order: the name is not empty once trimmed and normalized
//!    ([`Refusal::EmptyName`]); the snippet is a non-empty verbatim substring of the source
//!    text ([`Refusal::SnippetNotVerbatim`]);
//! 4. per relation, in order: the predicate normalizes ([`Refusal::BadPredicate`]); subject and
//!    object each name (compared by [`name_norm`]) an entity of the same reply
//!    ([`Refusal::UnknownRelationEntity`]); the snippet is verbatim.
//!
//! What passes becomes an [`Extraction`]: entities deduplicated on `(type, name_norm)` (the
//! first spelling is the display name, the longest description is kept, every snippet becomes
//! a [`Mention`]); relations point at entities by index and are deduplicated on
//! `(subject, predicate, object)` the same way. When two entities of different types share a
//! normalized name, a relation naming it joins the first one in reply order.

use serde::{Deserialize, Serialize};

use crate::normalize::{name_norm, predicate_norm, type_norm};

/// One entity as the contract spells it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RawEntity {
    #[serde(rename = "type")]
    pub entity_type: String,
    pub name: String,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub description: String,
    pub snippet: String,
}

/// One relation as the contract spells it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RawRelation {
    pub subject: String,
    pub predicate: String,
    pub object: String,
    pub snippet: String,
}

/// A whole reply as the contract spells it. Backends that build replies (the rules backend)
/// serialize this; [`validate`] parses it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RawReply {
    pub entities: Vec<RawEntity>,
    pub relations: Vec<RawRelation>,
}

fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

/// Where a fact was stated: the verbatim snippet and its offset in the source text, in
/// characters (Unicode scalar values), of its first occurrence.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Mention {
    pub snippet: String,
    pub char_offset: usize,
}

/// A validated, deduplicated entity.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entity {
    /// Normalized with [`type_norm`]; never empty.
    #[serde(rename = "type")]
    pub entity_type: String,
    /// The first spelling seen in the reply, trimmed.
    pub name: String,
    /// [`name_norm`] of `name`; never empty.
    pub name_norm: String,
    /// The longest description seen (trimmed; possibly empty).
    pub description: String,
    /// Every snippet that stated the entity, in reply order, without duplicates; never empty.
    pub mentions: Vec<Mention>,
}

/// A validated, deduplicated relation between two entities of the same [`Extraction`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Relation {
    /// Index into [`Extraction::entities`].
    pub subject: usize,
    /// lower_snake_case ([`predicate_norm`]).
    pub predicate: String,
    /// Index into [`Extraction::entities`].
    pub object: usize,
    /// Every snippet that stated the relation, in reply order, without duplicates; never empty.
    pub mentions: Vec<Mention>,
}

/// A reply that passed [`validate`].
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Extraction {
    pub entities: Vec<Entity>,
    pub relations: Vec<Relation>,
}

impl Extraction {
    /// The entity a relation end points at.
    pub fn entity(&self, index: usize) -> Option<&Entity> {
        self.entities.get(index)
    }

    /// The number of mentions (entity and relation) in the extraction.
    pub fn mention_count(&self) -> usize {
        self.entities
            .iter()
            .map(|e| e.mentions.len())
            .sum::<usize>()
            + self
                .relations
                .iter()
                .map(|r| r.mentions.len())
                .sum::<usize>()
    }
}

/// Why a reply was refused: one variant per rule, carrying the offending value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The reply is not JSON at all (the parser's message).
    #[error("reply is not JSON: {error}")]
    NotJson { error: String },
    /// JSON, but not the contract's shape (the parser's message).
    #[error("reply does not have the contract's shape: {error}")]
    BadShape { error: String },
    /// A snippet is empty or not a verbatim substring of the text given.
    #[error("snippet is not verbatim from the source text: {snippet:?}")]
    SnippetNotVerbatim { snippet: String },
    /// An entity's name is empty once trimmed and normalized (the raw name).
    #[error("entity name is empty: {name:?}")]
    EmptyName { name: String },
    /// A relation's subject or object is not the name of an entity in the same reply.
    #[error("relation names an entity that is not in the reply: {name:?}")]
    UnknownRelationEntity { name: String },
    /// A predicate normalizes to nothing.
    #[error("predicate is not usable: {predicate:?}")]
    BadPredicate { predicate: String },
}

impl Refusal {
    /// A stable machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            Refusal::NotJson { .. } => "NOT_JSON",
            Refusal::BadShape { .. } => "BAD_SHAPE",
            Refusal::SnippetNotVerbatim { .. } => "SNIPPET_NOT_VERBATIM",
            Refusal::EmptyName { .. } => "EMPTY_NAME",
            Refusal::UnknownRelationEntity { .. } => "UNKNOWN_RELATION_ENTITY",
            Refusal::BadPredicate { .. } => "BAD_PREDICATE",
        }
    }
}

/// Strip surrounding whitespace and one Markdown code fence (```` ```json … ``` ````).
pub fn unfence(raw: &str) -> &str {
    let t = raw.trim();
    if let Some(rest) = t.strip_prefix("```") {
        if let Some(body) = rest.strip_suffix("```") {
            // Drop the info string ("json") up to the first newline.
            let body = match body.find('\n') {
                Some(nl) if body[..nl].chars().all(|c| c.is_ascii_alphanumeric()) => {
                    &body[nl + 1..]
                }
                _ => body,
            };
            return body.trim();
        }
    }
    t
}

/// Parse a reply into the contract's raw types without checking it against a source.
pub fn parse(raw_reply: &str) -> Result<RawReply, Refusal> {
    let value: serde_json::Value =
        serde_json::from_str(unfence(raw_reply)).map_err(|e| Refusal::NotJson {
            error: e.to_string(),
        })?;
    serde_json::from_value(value).map_err(|e| Refusal::BadShape {
        error: e.to_string(),
    })
}

/// Char offset of the first occurrence of `snippet` in `source`, refusing an empty or
/// non-verbatim snippet.
fn locate(snippet: &str, source: &str) -> Result<Mention, Refusal> {
    let refuse = || Refusal::SnippetNotVerbatim {
        snippet: snippet.to_string(),
    };
    if snippet.is_empty() {
        return Err(refuse());
    }
    let byte = source.find(snippet).ok_or_else(refuse)?;
    Ok(Mention {
        snippet: snippet.to_string(),
        char_offset: source[..byte].chars().count(),
    })
}

fn push_mention(mentions: &mut Vec<Mention>, m: Mention) {
    if !mentions.contains(&m) {
        mentions.push(m);
    }
}

/// Validate a raw reply against the text the extractor was given (see the module docs for the
/// rules). The whole reply is refused on the first broken rule.
pub fn validate(raw_reply: &str, source_text: &str) -> Result<Extraction, Refusal> {
    let reply = parse(raw_reply)?;
    let mut out = Extraction::default();
    // (type, name_norm) -> index, in insertion order (replies are small: a linear scan is fine).
    let mut keys: Vec<(String, String)> = Vec::new();

    for (i, e) in reply.entities.iter().enumerate() {
        let entity_type = type_norm(&e.entity_type);
        if entity_type.is_empty() {
            return Err(Refusal::BadShape {
                error: format!("entities[{i}].type is empty"),
            });
        }
        let name = e.name.trim();
        let norm = name_norm(name);
        if norm.is_empty() {
            return Err(Refusal::EmptyName {
                name: e.name.clone(),
            });
        }
        let mention = locate(&e.snippet, source_text)?;
        let description = e.description.trim();
        let key = (entity_type, norm);
        match keys.iter().position(|k| *k == key) {
            Some(idx) => {
                let ent = &mut out.entities[idx];
                if description.chars().count() > ent.description.chars().count() {
                    ent.description = description.to_string();
                }
                push_mention(&mut ent.mentions, mention);
            }
            None => {
                out.entities.push(Entity {
                    entity_type: key.0.clone(),
                    name: name.to_string(),
                    name_norm: key.1.clone(),
                    description: description.to_string(),
                    mentions: vec![mention],
                });
                keys.push(key);
            }
        }
    }

    let find = |name: &str| -> Result<usize, Refusal> {
        let norm = name_norm(name);
        keys.iter()
            .position(|(_, n)| !norm.is_empty() && *n == norm)
            .ok_or_else(|| Refusal::UnknownRelationEntity {
                name: name.to_string(),
            })
    };
    for r in &reply.relations {
        let predicate = predicate_norm(&r.predicate).ok_or_else(|| Refusal::BadPredicate {
            predicate: r.predicate.clone(),
        })?;
        let subject = find(&r.subject)?;
        let object = find(&r.object)?;
        let mention = locate(&r.snippet, source_text)?;
        match out
            .relations
            .iter_mut()
            .find(|x| x.subject == subject && x.object == object && x.predicate == predicate)
        {
            Some(existing) => push_mention(&mut existing.mentions, mention),
            None => out.relations.push(Relation {
                subject,
                predicate,
                object,
                mentions: vec![mention],
            }),
        }
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    const SRC: &str = "Acme Robotics, a maker of warehouse robots, is based in Berlin. \
                       Jane Doe works at Acme Robotics. ACME robotics bought Globex.";

    fn ok_reply() -> serde_json::Value {
        json!({
            "entities": [
                {"type": "organization", "name": "Acme Robotics",
                 "description": "maker of warehouse robots",
                 "snippet": "Acme Robotics, a maker of warehouse robots, is based in Berlin."},
                {"type": "Place", "name": "Berlin", "description": "",
                 "snippet": "is based in Berlin."},
                {"type": "person", "name": "Jane Doe",
                 "snippet": "Jane Doe works at Acme Robotics.", "extra": 1},
                {"type": "organization", "name": "ACME robotics", "description": "a robot maker in Berlin, Germany",
                 "snippet": "ACME robotics bought Globex."},
                {"type": "organization", "name": "Globex", "description": null,
                 "snippet": "ACME robotics bought Globex."}
            ],
            "relations": [
                {"subject": "Acme Robotics", "predicate": "Located In", "object": "Berlin",
                 "snippet": "is based in Berlin."},
                {"subject": "Jane Doe", "predicate": "works-at", "object": "acme robotics inc",
                 "snippet": "Jane Doe works at Acme Robotics."},
                {"subject": "ACME robotics", "predicate": "acquired", "object": "Globex",
                 "snippet": "ACME robotics bought Globex."},
                {"subject": "Acme Robotics", "predicate": "acquired", "object": "Globex",
                 "snippet": "bought Globex."}
            ],
            "notes": "tolerated"
        })
    }

    fn refusal(v: &serde_json::Value) -> Refusal {
        match validate(&v.to_string(), SRC) {
            Err(r) => r,
            Ok(x) => panic!("expected a refusal, got {x:?}"),
        }
    }

    #[test]
    fn valid_reply_is_deduplicated_with_mentions() {
        let x = validate(&ok_reply().to_string(), SRC).unwrap();
        assert_eq!(x.entities.len(), 4);
        let acme = &x.entities[0];
        assert_eq!(acme.name, "Acme Robotics");
        assert_eq!(acme.name_norm, "acme robotics");
        assert_eq!(acme.description, "a robot maker in Berlin, Germany");
        assert_eq!(acme.mentions.len(), 2);
        assert_eq!(acme.mentions[0].char_offset, 0);
        assert_eq!(
            acme.mentions[1].char_offset,
            SRC.find("ACME robotics bought").unwrap()
        );
        assert_eq!(x.entities[1].entity_type, "place");
        assert_eq!(x.entities[3].description, "");
        assert_eq!(x.relations.len(), 3);
        assert_eq!(x.relations[0].predicate, "located_in");
        assert_eq!((x.relations[0].subject, x.relations[0].object), (0, 1));
        assert_eq!(x.relations[1].predicate, "works_at");
        assert_eq!((x.relations[1].subject, x.relations[1].object), (2, 0));
        assert_eq!(x.relations[2].mentions.len(), 2);
        assert_eq!(x.mention_count(), 5 + 4);
    }

    #[test]
    fn char_offsets_count_characters_not_bytes() {
        let src = "Zürich café. Acme Robotics is here.";
        let r = json!({"entities": [{"type": "organization", "name": "Acme Robotics",
            "description": "", "snippet": "Acme Robotics is here."}], "relations": []});
        let x = validate(&r.to_string(), src).unwrap();
        assert_eq!(x.entities[0].mentions[0].char_offset, 13);
    }

    #[test]
    fn code_fences_are_tolerated() {
        let fenced = format!("```json\n{}\n```\n", ok_reply());
        assert!(validate(&fenced, SRC).is_ok());
        let bare = format!("```{}```", ok_reply());
        assert!(validate(&bare, SRC).is_ok());
    }

    #[test]
    fn refuses_non_json() {
        for raw in [
            "",
            "Sure! Here are the entities:",
            "{\"entities\": [",
            "[1, 2",
        ] {
            let r = validate(raw, SRC).unwrap_err();
            assert_eq!(r.code(), "NOT_JSON", "{raw:?}");
        }
    }

    #[test]
    fn refuses_wrong_shape() {
        let cases = [
            json!([]),
            json!({"entities": []}),
            json!({"relations": []}),
            json!({"entities": {}, "relations": []}),
            json!({"entities": [{"type": "person", "name": 3, "description": "", "snippet": "Jane"}], "relations": []}),
            json!({"entities": [{"type": "person", "name": "Jane Doe", "description": ""}], "relations": []}),
            json!({"entities": [{"type": "  ", "name": "Jane Doe", "description": "", "snippet": "Jane"}], "relations": []}),
            json!({"entities": [], "relations": [{"subject": "a", "predicate": "b", "object": "c"}]}),
            json!({"entities": [{"type": "person", "name": "Jane Doe", "description": 5, "snippet": "Jane"}], "relations": []}),
        ];
        for c in &cases {
            assert_eq!(refusal(c).code(), "BAD_SHAPE", "{c}");
        }
    }

    #[test]
    fn refuses_non_verbatim_and_empty_snippets() {
        let mut v = ok_reply();
        v["entities"][1]["snippet"] = json!("is located in Berlin.");
        assert_eq!(
            refusal(&v),
            Refusal::SnippetNotVerbatim {
                snippet: "is located in Berlin.".into()
            }
        );
        let mut v = ok_reply();
        v["entities"][1]["snippet"] = json!("");
        assert_eq!(refusal(&v).code(), "SNIPPET_NOT_VERBATIM");
        // Case and whitespace differences are not verbatim.
        let mut v = ok_reply();
        v["relations"][1]["snippet"] = json!("jane doe works at Acme Robotics.");
        assert_eq!(refusal(&v).code(), "SNIPPET_NOT_VERBATIM");
        let mut v = ok_reply();
        v["relations"][1]["snippet"] = json!("Jane Doe  works at Acme Robotics.");
        assert_eq!(refusal(&v).code(), "SNIPPET_NOT_VERBATIM");
    }

    #[test]
    fn refuses_empty_names() {
        for name in ["", "   ", "\t\n", "...", " , "] {
            let mut v = ok_reply();
            v["entities"][2]["name"] = json!(name);
            assert_eq!(
                refusal(&v),
                Refusal::EmptyName {
                    name: name.to_string()
                }
            );
        }
    }

    #[test]
    fn refuses_relations_to_unknown_entities() {
        let mut v = ok_reply();
        v["relations"][0]["object"] = json!("Munich");
        assert_eq!(
            refusal(&v),
            Refusal::UnknownRelationEntity {
                name: "Munich".into()
            }
        );
        let mut v = ok_reply();
        v["relations"][2]["subject"] = json!("");
        assert_eq!(refusal(&v).code(), "UNKNOWN_RELATION_ENTITY");
        // An entity named only in another reply does not count: no entities at all here.
        let v = json!({"entities": [], "relations": [{"subject": "Acme Robotics",
            "predicate": "located_in", "object": "Berlin", "snippet": "is based in Berlin."}]});
        assert_eq!(refusal(&v).code(), "UNKNOWN_RELATION_ENTITY");
    }

    #[test]
    fn refuses_bad_predicates() {
        for p in ["", "  ", "--", "42", "!!!"] {
            let mut v = ok_reply();
            v["relations"][1]["predicate"] = json!(p);
            assert_eq!(
                refusal(&v),
                Refusal::BadPredicate {
                    predicate: p.to_string()
                }
            );
        }
    }

    #[test]
    fn one_bad_fact_refuses_the_whole_reply() {
        let mut v = ok_reply();
        v["relations"][3]["snippet"] = json!("bought Globex Media.");
        assert!(validate(&v.to_string(), SRC).is_err());
    }

    #[test]
    fn empty_reply_is_a_valid_extraction() {
        let x = validate(r#"{"entities":[],"relations":[]}"#, SRC).unwrap();
        assert!(x.entities.is_empty() && x.relations.is_empty());
    }

    #[test]
    fn codes_are_distinct() {
        let all = [
            Refusal::NotJson {
                error: String::new(),
            },
            Refusal::BadShape {
                error: String::new(),
            },
            Refusal::SnippetNotVerbatim {
                snippet: String::new(),
            },
            Refusal::EmptyName {
                name: String::new(),
            },
            Refusal::UnknownRelationEntity {
                name: String::new(),
            },
            Refusal::BadPredicate {
                predicate: String::new(),
            },
        ];
        let mut codes: Vec<_> = all.iter().map(Refusal::code).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), 6);
    }
}
