//! Prompts for LLM backends (the local GGUF model here; an OpenAI-compatible client in the
//! server). The prompt states the contract, the starter types and suggested predicates; only
//! [`crate::reply::validate`] enforces anything.

use crate::normalize::STARTER_TYPES;

/// Predicates the prompt suggests (not enforced: predicates are free text, normalized).
pub const SUGGESTED_PREDICATES: [&str; 12] = [
    "works_at",
    "part_of",
    "located_in",
    "founded_by",
    "acquired",
    "customer_of",
    "partner_of",
    "depends_on",
    "produces",
    "member_of",
    "leads",
    "owns",
];

/// The system prompt: the task, the strict output contract and its rules.
pub fn system_prompt() -> String {
    format!(
        "You extract a knowledge graph from one document: the named things in it (entities) \
and the facts that connect them (relations).\n\
\n\
Reply with ONE JSON object and nothing else, exactly this shape:\n\
{{\"entities\":[{{\"type\":\"organization\",\"name\":\"Acme Robotics\",\"description\":\"a maker of warehouse robots\",\"snippet\":\"Acme Robotics, a maker of warehouse robots, is based in Berlin.\"}},\
{{\"type\":\"place\",\"name\":\"Berlin\",\"description\":\"\",\"snippet\":\"Acme Robotics, a maker of warehouse robots, is based in Berlin.\"}}],\
\"relations\":[{{\"subject\":\"Acme Robotics\",\"predicate\":\"located_in\",\"object\":\"Berlin\",\"snippet\":\"Acme Robotics, a maker of warehouse robots, is based in Berlin.\"}}]}}\n\
\n\
Rules:\n\
- \"snippet\" is copied VERBATIM from the document, character for character: the sentence that \
states the entity or relation. Never paraphrase, shorten words, fix typos or change case. \
A reply with any snippet that is not an exact substring of the document is rejected whole.\n\
- \"type\" is one of: {types}. Use another single lowercase word only when none fits.\n\
- \"name\" is the entity's name as written in the document; never empty.\n\
- \"description\" is a short phrase about the entity taken from the document, or \"\".\n\
- Every relation's \"subject\" and \"object\" must be the \"name\" of an entity in your \
\"entities\" list.\n\
- \"predicate\" is lower_snake_case, preferably one of: {predicates}.\n\
- Only facts the document states. No guesses, no outside knowledge. If there is nothing, \
reply {{\"entities\":[],\"relations\":[]}}.",
        types = STARTER_TYPES.join(", "),
        predicates = SUGGESTED_PREDICATES.join(", "),
    )
}

/// The user message carrying the document.
pub fn user_prompt(text: &str) -> String {
    format!(
        "Document:\n<<<\n{text}\n>>>\n\nReply with the JSON object for this document \
(entities and relations, snippets copied verbatim)."
    )
}

/// The user message for the single retry after a refused reply.
pub fn retry_prompt(text: &str) -> String {
    format!(
        "{}\n\nYour previous reply was rejected. Copy every snippet exactly as it appears in \
the document, name only entities you list, and reply with the JSON object only.",
        user_prompt(text)
    )
}

/// The user message for `attempt` (1: [`user_prompt`], later: [`retry_prompt`]).
pub fn prompt_for_attempt(text: &str, attempt: u32) -> String {
    if attempt <= 1 {
        user_prompt(text)
    } else {
        retry_prompt(text)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn system_prompt_states_the_contract() {
        let p = system_prompt();
        for needle in [
            "\"entities\"",
            "\"relations\"",
            "VERBATIM",
            "person, organization, product, place, event, concept",
            "works_at",
            "owns",
        ] {
            assert!(p.contains(needle), "{needle}");
        }
        // The example in the prompt is itself a valid reply for its own snippet.
        let start = p.find("{\"entities\"").unwrap();
        let end = p[start..].find("}]}").unwrap() + start + 3;
        let example = &p[start..end];
        let src = "Acme Robotics, a maker of warehouse robots, is based in Berlin.";
        let x = crate::reply::validate(example, src).unwrap();
        assert_eq!((x.entities.len(), x.relations.len()), (2, 1));
    }

    #[test]
    fn user_prompt_carries_the_text() {
        assert!(user_prompt("Hello Acme.").contains("Hello Acme."));
        assert!(prompt_for_attempt("x", 2).contains("rejected"));
        assert!(!prompt_for_attempt("x", 1).contains("rejected"));
    }
}
