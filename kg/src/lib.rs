//! cairn-kg: the extraction side of Cairn's knowledge graph (seed 001, DESIGN.md §7). No
//! database and no HTTP: text in, a validated [`Extraction`] out. The server stores it
//! (entities, relations, mentions keyed by document version) and applies the mention rule.
//!
//! # Layout
//!
//! | module | what |
//! |---|---|
//! | [`normalize`] | [`normalize::name_norm`], [`normalize::predicate_norm`], [`normalize::type_norm`], [`normalize::STARTER_TYPES`]: the dedup keys |
//! | [`reply`] | the seed's output contract as serde types, [`validate`], [`Extraction`], [`Refusal`] |
//! | [`extractor`] | the model seam [`Extractor`], [`extract`] (cap at [`MAX_CHARS`], ask, validate, retry once) |
//! | [`prompt`] | system and user prompts for LLM backends (the server's OpenAI-compatible client uses them too) |
//! | [`scripted`] | canned replies for tests |
//! | [`rules`] | the offline deterministic backend |
//! | [`grammar`] | the JSON state machine that constrains local decoding |
//! | [`local`] | a GGUF instruct model (SmolLM2-135M by default) run by candle on its own thread |
//!
//! # Decisions
//!
//! * **Validation is the provenance, and it refuses the whole reply** (seed: "a bad fact that
//!   looks finished is worse than a missing one"). Six rules, one [`Refusal`] variant each with
//!   a stable [`Refusal::code`]: `NOT_JSON`, `BAD_SHAPE`, `SNIPPET_NOT_VERBATIM`, `EMPTY_NAME`,
//!   `UNKNOWN_RELATION_ENTITY`, `BAD_PREDICATE`. Extra JSON fields are tolerated (models add
//!   them; they carry no facts), wrong types are not; `description` may be null or absent (the
//!   column is nullable); one Markdown code fence around the JSON is tolerated. A snippet must
//!   be a non-empty, exact (case- and whitespace-sensitive) substring of the text the extractor
//!   was given.
//! * **One retry.** [`extract`] asks again once after a refusal (attempt 2; LLM backends use
//!   [`prompt::retry_prompt`]); two refusals give [`ExtractError::Refused`] with both reasons
//!   and the usage spent, and the document is recorded as failed without facts. Backend errors
//!   are not retried here ([`ExtractorError::Transient`] tells the job runner a later retry may
//!   help). A blank document is not sent at all (`attempts == 0`, empty extraction).
//! * **12,000 characters.** [`cap_text`] cuts on a char boundary at the last paragraph break,
//!   else sentence end, else whitespace before the cap (if that keeps at least half of it), and
//!   the reply is validated against exactly the capped text, so every snippet offset is an
//!   offset into the stored document.
//! * **Dedup inside one reply** on `(type_norm, name_norm)`: first spelling kept, longest
//!   description kept, every snippet kept as a [`Mention`] with its char offset. Relations
//!   point at entities by index and dedup on `(subject, predicate, object)` the same way. A
//!   relation's end that matches two entities of different types by normalized name joins the
//!   first one. The cross-document dedup is the database's unique key on the same fields.
//! * **Names** ([`normalize::name_norm`]): case, whitespace, end punctuation (keeping `+ # &`)
//!   and one trailing legal suffix from `inc, ltd, llc, gmbh, corp, co, plc, ag, sa, bv,
//!   limited, incorporated, corporation` (never the whole name). **Predicates** become
//!   `^[a-z][a-z0-9_]*$` without `__` or a trailing `_` (the database's check), ASCII only.
//!   **Types** are lowercased with `_` for spaces; the vocabulary is open.
//! * **Backends** share one contract and one validator. `rules` is offline and deterministic
//!   (precision over recall); `local` constrains a small model's output to the contract's JSON
//!   *and* binds names and snippets to substrings of the source, relation ends to emitted names
//!   and types to the starter set, so a 135M model's reply usually validates; whatever it
//!   emits is still validated. `scripted` drives tests.
//! * **Threads.** Only `local` does heavy work; it owns a `std::thread` and the runtime awaits a
//!   oneshot (the same rule as cairn-embed). `rules` runs inline (well under a millisecond
//!   per document).

pub mod extractor;
pub mod grammar;
pub mod local;
pub mod normalize;
pub mod prompt;
pub mod reply;
pub mod rules;
pub mod scripted;

pub use extractor::{
    cap_text, cap_text_at, extract, ExtractError, Extractor, ExtractorError, Outcome, Reply, Usage,
    MAX_CHARS,
};
pub use local::{LocalConfig, LocalError, LocalGguf};
pub use reply::{validate, Entity, Extraction, Mention, Refusal, Relation};
pub use rules::Rules;
pub use scripted::Scripted;
