//! The prompts of the three LLM contracts. They state the contract; only the validators in
//! [`crate::classify`] and [`crate::fields`] enforce anything. Each says "JSON" (OpenAI's JSON
//! mode requires the word in a message).

use crate::taxonomy::{DocType, FieldSchema};

fn document(text: &str) -> String {
    format!("Document:\n<<<\n{text}\n>>>")
}

/// The retry line: what was wrong with the first reply.
pub fn retry_note(refusal: &crate::Refusal) -> String {
    format!(
        "Your previous reply was rejected ({}: {refusal}). Reply again with ONE JSON object that follows every rule.",
        refusal.code()
    )
}

/// Classification: system and user messages.
pub fn classify(taxonomy: &[DocType], text: &str) -> (String, String) {
    let types: Vec<String> = taxonomy
        .iter()
        .map(|t| format!("- {}: {}", t.name, t.description))
        .collect();
    (
        format!(
            "You classify one document into exactly one type of this taxonomy:\n{}\n\n\
Reply with ONE JSON object and nothing else: {{\"type\":\"<one name from the list>\",\
\"confidence\":<a number from 0 to 1>,\"reason\":\"<one sentence>\"}}. Use a name from the \
list exactly. When no type fits well, pick the closest and give a low confidence.",
            types.join("\n")
        ),
        document(text),
    )
}

/// Suggesting a new type for a document the taxonomy does not describe well.
pub fn suggest(taxonomy: &[DocType], text: &str) -> (String, String) {
    let names: Vec<&str> = taxonomy.iter().map(|t| t.name.as_str()).collect();
    (
        format!(
            "None of these document types fits the document well: {}.\n\
Propose one new, general document type for it (a kind of document, not its topic). Reply \
with ONE JSON object and nothing else: {{\"name\":\"<lower_snake_case>\",\"description\":\
\"<one sentence: what such a document is and reads like>\"}}.",
            names.join(", ")
        ),
        document(text),
    )
}

/// Generating a schema for a type that has none.
pub fn schema_for(doc_type: &DocType, text: &str) -> (String, String) {
    (
        format!(
            "Documents of type \"{}\" ({}) need a schema: the facts worth taking from any \
document of this type. Reply with ONE JSON object and nothing else, a JSON Schema of this \
form: {{\"type\":\"object\",\"properties\":{{\"<field>\":{{\"type\":\"string|number|integer|\
boolean\",\"description\":\"...\"}},...}},\"required\":[...]}}. Dates are {{\"type\":\"string\",\
\"format\":\"date\"}}. 3 to 10 fields, flat (no objects or arrays), names in lower_snake_case. \
The example document follows.",
            doc_type.name, doc_type.description
        ),
        document(text),
    )
}

/// Extraction: system and user messages.
pub fn extract(schema: &FieldSchema, text: &str) -> (String, String) {
    let fields: Vec<String> = schema
        .fields
        .iter()
        .map(|f| {
            format!(
                "- {} ({}{}){}",
                f.name,
                f.kind.expected(),
                if f.required { ", required" } else { "" },
                if f.description.is_empty() {
                    String::new()
                } else {
                    format!(": {}", f.description)
                }
            )
        })
        .collect();
    (
        format!(
            "You take values from one document. The fields:\n{}\n\n\
Reply with ONE JSON object and nothing else: {{\"fields\":{{\"<field>\":{{\"value\":<value or \
null>,\"evidence\":\"<the sentence or line that states it, copied VERBATIM from the document>\"}},\
...}}}}. Rules: every value must be stated in its evidence; evidence is an exact substring of \
the document, character for character; when the document does not state a field, its value \
and evidence are null. Never guess. A reply with any value that is not stated verbatim is \
rejected whole.",
            fields.join("\n")
        ),
        document(text),
    )
}
