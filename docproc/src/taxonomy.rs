//! A team's document types: the name and description rules, the optional field schema, and
//! the starter set every team begins with.
//!
//! A type's schema is a small subset of JSON Schema, enough to say which values to take from a
//! document and of what kind:
//!
//! ```json
//! {"type": "object",
//!  "properties": {"invoice_number": {"type": "string", "description": "as printed"},
//!                 "total":          {"type": "number"},
//!                 "issued":         {"type": "string", "format": "date"}},
//!  "required": ["invoice_number"]}
//! ```
//!
//! Property types: `string`, `number`, `integer`, `boolean`, and `string` with `format: date`
//! (an ISO `YYYY-MM-DD` value). Nesting, arrays and `$ref` are refused with a clear message:
//! every value must be one verbatim fact of the document.

use serde_json::{json, Map, Value};

/// Most characters of a type name.
pub const MAX_NAME_CHARS: usize = 64;
/// Most characters of a type description.
pub const MAX_DESCRIPTION_CHARS: usize = 600;
/// Most fields in a schema.
pub const MAX_FIELDS: usize = 40;

/// Why a taxonomy input was refused (the field it concerns and why).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct TaxonomyError {
    pub field: &'static str,
    pub message: String,
}

fn refuse(field: &'static str, message: impl Into<String>) -> TaxonomyError {
    TaxonomyError {
        field,
        message: message.into(),
    }
}

/// A type name in its one stored form: lowercase ASCII letters, digits and `_`, starting with
/// a letter (`"Meeting notes"` → `meeting_notes`). `None` when nothing usable is left.
pub fn type_name(raw: &str) -> Option<String> {
    let mut out = String::new();
    for c in raw.trim().chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if (c.is_whitespace() || c == '_' || c == '-' || c == '/') && !out.ends_with('_') {
            out.push('_');
        }
    }
    let out = out.trim_matches('_').to_owned();
    let ok = out.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && out.chars().count() <= MAX_NAME_CHARS;
    ok.then_some(out)
}

/// Checks a name as an admin typed it; the stored form is [`type_name`].
pub fn checked_name(raw: &str) -> Result<String, TaxonomyError> {
    type_name(raw).ok_or_else(|| {
        refuse(
            "name",
            format!("must start with a letter and have at most {MAX_NAME_CHARS} letters, digits or underscores"),
        )
    })
}

/// Checks a description: trimmed, not empty, at most [`MAX_DESCRIPTION_CHARS`].
pub fn checked_description(raw: &str) -> Result<String, TaxonomyError> {
    let d = raw.trim();
    if d.is_empty() {
        return Err(refuse("description", "must not be empty"));
    }
    if d.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(refuse(
            "description",
            format!("at most {MAX_DESCRIPTION_CHARS} characters"),
        ));
    }
    Ok(d.to_owned())
}

/// One document type.
#[derive(Debug, Clone, PartialEq)]
pub struct DocType {
    pub name: String,
    pub description: String,
    pub schema: Option<FieldSchema>,
}

impl DocType {
    /// The text the zero-shot classifier embeds for this type: its name in words, then its
    /// description.
    pub fn anchor_text(&self) -> String {
        format!("{}: {}", self.name.replace('_', " "), self.description)
    }
}

/// What kind of value a field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    String,
    Number,
    Integer,
    Boolean,
    /// An ISO date (`YYYY-MM-DD`), written as `{"type":"string","format":"date"}`.
    Date,
}

impl FieldKind {
    /// The words a refusal uses.
    pub fn expected(self) -> &'static str {
        match self {
            FieldKind::String => "a string",
            FieldKind::Number => "a number",
            FieldKind::Integer => "an integer",
            FieldKind::Boolean => "true or false",
            FieldKind::Date => "a date as YYYY-MM-DD",
        }
    }
}

/// One field of a schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub name: String,
    pub kind: FieldKind,
    pub description: String,
    pub required: bool,
}

/// A type's schema: the fields to take from a document of that type.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldSchema {
    pub fields: Vec<Field>,
}

fn field_name_ok(n: &str) -> bool {
    let mut cs = n.chars();
    cs.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && cs.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && n.len() <= MAX_NAME_CHARS
}

impl FieldSchema {
    /// Reads the JSON Schema subset (see the module docs); refuses anything outside it.
    pub fn parse(v: &Value) -> Result<FieldSchema, TaxonomyError> {
        let bad = |m: String| refuse("schema", m);
        let o = v
            .as_object()
            .ok_or_else(|| bad("must be a JSON object".into()))?;
        if let Some(t) = o.get("type") {
            if t != "object" {
                return Err(bad("\"type\" must be \"object\"".into()));
            }
        }
        let props = o
            .get("properties")
            .and_then(Value::as_object)
            .ok_or_else(|| bad("needs \"properties\": an object of fields".into()))?;
        if props.is_empty() {
            return Err(bad("needs at least one property".into()));
        }
        if props.len() > MAX_FIELDS {
            return Err(bad(format!("at most {MAX_FIELDS} properties")));
        }
        let required: Vec<&str> = match o.get("required") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .map(|x| {
                    x.as_str()
                        .ok_or_else(|| bad("\"required\" must list property names".into()))
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(bad("\"required\" must be an array".into())),
        };
        for r in &required {
            if !props.contains_key(*r) {
                return Err(bad(format!(
                    "\"required\" names {r:?}, which is not a property"
                )));
            }
        }
        let mut fields = Vec::with_capacity(props.len());
        for (name, p) in props {
            if !field_name_ok(name) {
                return Err(bad(format!(
                    "property name {name:?} must be letters, digits and underscores"
                )));
            }
            let p = p
                .as_object()
                .ok_or_else(|| bad(format!("property {name:?} must be an object")))?;
            let format = p.get("format").and_then(Value::as_str);
            let kind = match (p.get("type").and_then(Value::as_str), format) {
                (Some("string"), Some("date")) => FieldKind::Date,
                (Some("string"), _) => FieldKind::String,
                (Some("number"), _) => FieldKind::Number,
                (Some("integer"), _) => FieldKind::Integer,
                (Some("boolean"), _) => FieldKind::Boolean,
                (Some(other), _) => {
                    return Err(bad(format!(
                        "property {name:?} has type {other:?}; use string, number, integer, boolean or a string with format date"
                    )))
                }
                (None, _) => return Err(bad(format!("property {name:?} needs a \"type\""))),
            };
            let description = match p.get("description") {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(s)) => s.trim().chars().take(MAX_DESCRIPTION_CHARS).collect(),
                Some(_) => {
                    return Err(bad(format!(
                        "property {name:?}: \"description\" must be a string"
                    )))
                }
            };
            fields.push(Field {
                name: name.clone(),
                kind,
                description,
                required: required.contains(&name.as_str()),
            });
        }
        Ok(FieldSchema { fields })
    }

    /// The schema as JSON, in its canonical form (what is stored and shown).
    pub fn to_json(&self) -> Value {
        let mut props = Map::new();
        for f in &self.fields {
            let mut p = Map::new();
            let (t, format) = match f.kind {
                FieldKind::String => ("string", None),
                FieldKind::Number => ("number", None),
                FieldKind::Integer => ("integer", None),
                FieldKind::Boolean => ("boolean", None),
                FieldKind::Date => ("string", Some("date")),
            };
            p.insert("type".into(), t.into());
            if let Some(fm) = format {
                p.insert("format".into(), fm.into());
            }
            if !f.description.is_empty() {
                p.insert("description".into(), f.description.clone().into());
            }
            props.insert(f.name.clone(), Value::Object(p));
        }
        let required: Vec<&str> = self
            .fields
            .iter()
            .filter(|f| f.required)
            .map(|f| f.name.as_str())
            .collect();
        json!({"type": "object", "properties": props, "required": required})
    }

    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// The types every team starts with (an admin edits or removes them like any other). Their
/// descriptions are also what the zero-shot classifier compares a document with, so they say
/// what such a document *reads like*; they were written against the tuning half of the
/// offline set (tests/fixtures/doc_kinds).
pub fn starter_types() -> Vec<DocType> {
    let t = |name: &str, description: &str, schema: Option<Value>| DocType {
        name: name.into(),
        description: description.into(),
        schema: schema.and_then(|s| FieldSchema::parse(&s).ok()),
    };
    vec![
        t(
            "manual",
            "a manual page for a command. NAME, SYNOPSIS, DESCRIPTION, OPTIONS, EXAMPLES, SEE ALSO. Usage: command [options] file. -f, --force: do it even if the target exists. -v, --verbose: report each step",
            None,
        ),
        t(
            "changelog",
            "a changelog, the history of releases: version 1.2-3, new upstream release, fixed a bug, updated the translation, closes: #12345; maintainer name and email, Mon, 01 Jan 2024",
            Some(json!({"type": "object", "properties": {
                "latest_version": {"type": "string", "description": "the newest version listed"},
                "latest_date": {"type": "string", "description": "the date of the newest entry, as written"}},
                "required": ["latest_version"]})),
        ),
        t(
            "license",
            "a license: permission is granted to copy, distribute and modify the software under these terms and conditions; the program is provided without warranty; copyright holder",
            Some(json!({"type": "object", "properties": {
                "license_name": {"type": "string", "description": "the license's name as written"},
                "version": {"type": "string", "description": "the license's version"}},
                "required": ["license_name"]})),
        ),
        t(
            "readme",
            "a README: this is the introduction to a free software package: what it does, how to compile and install it (./configure, make, make install), where to download it, mailing lists and reporting bugs",
            None,
        ),
        t(
            "invoice",
            "an invoice or bill: invoice number, seller and buyer, items with quantities and prices, subtotal, tax, total amount due and payment date",
            Some(json!({"type": "object", "properties": {
                "invoice_number": {"type": "string"},
                "issue_date": {"type": "string", "format": "date"},
                "seller": {"type": "string"},
                "buyer": {"type": "string"},
                "total": {"type": "number"}},
                "required": ["invoice_number", "total"]})),
        ),
        t(
            "contract",
            "a contract or agreement between parties: the parties, obligations, term and termination, governing law and signatures",
            Some(json!({"type": "object", "properties": {
                "parties": {"type": "string"},
                "effective_date": {"type": "string", "format": "date"},
                "governing_law": {"type": "string"}},
                "required": ["parties"]})),
        ),
        t(
            "meeting_notes",
            "minutes or notes of a meeting: date, attendees, agenda, discussion, decisions and action items",
            None,
        ),
        t(
            "report",
            "a report or article that presents findings, analysis or news about a subject",
            None,
        ),
    ]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn names_fold_to_one_form() {
        assert_eq!(
            type_name(" Meeting notes ").as_deref(),
            Some("meeting_notes")
        );
        assert_eq!(
            type_name("Purchase-Order").as_deref(),
            Some("purchase_order")
        );
        assert_eq!(type_name("__x__").as_deref(), Some("x"));
        assert_eq!(type_name("9lives"), None);
        assert_eq!(type_name("  "), None);
        assert_eq!(type_name("ünïcode"), Some("ncode".into()));
        assert!(checked_name("").is_err());
        assert!(checked_description(" ").is_err());
    }

    #[test]
    fn schemas_round_trip_and_refuse_what_they_cannot_hold() {
        let s = json!({"type":"object","properties":{
            "n":{"type":"string","description":"the number"},
            "t":{"type":"number"},"d":{"type":"string","format":"date"},
            "c":{"type":"integer"},"b":{"type":"boolean"}},"required":["n"]});
        let parsed = FieldSchema::parse(&s).unwrap();
        assert_eq!(parsed.fields.len(), 5);
        assert_eq!(parsed.field("d").unwrap().kind, FieldKind::Date);
        assert!(parsed.field("n").unwrap().required);
        assert_eq!(FieldSchema::parse(&parsed.to_json()).unwrap(), parsed);
        for bad in [
            json!([]),
            json!({"type":"array","properties":{"a":{"type":"string"}}}),
            json!({"properties":{}}),
            json!({"properties":{"a":{"type":"array"}}}),
            json!({"properties":{"a":{"type":"object"}}}),
            json!({"properties":{"a b":{"type":"string"}}}),
            json!({"properties":{"a":{}}}),
            json!({"properties":{"a":{"type":"string"}},"required":["z"]}),
        ] {
            assert!(FieldSchema::parse(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_starter_set_is_valid() {
        let s = starter_types();
        assert!(s.len() >= 4);
        for t in &s {
            assert_eq!(type_name(&t.name).as_deref(), Some(t.name.as_str()));
            assert!(checked_description(&t.description).is_ok());
        }
        assert!(s.iter().filter(|t| t.schema.is_some()).count() >= 3);
    }
}
