//! Schema extraction: the reply contract where every value carries its evidence, and its
//! validation.
//!
//! The contract, one entry per field of the schema:
//!
//! ```json
//! {"fields": {"invoice_number": {"value": "INV-0042", "evidence": "Invoice no. INV-0042"},
//!             "total":          {"value": 1250.5,     "evidence": "Total due: 1,250.50 EUR"},
//!             "buyer":          {"value": null,       "evidence": null}}}
//! ```
//!
//! [`validate`] refuses the whole reply on the first broken rule, in this order per field (in
//! the reply's order): the shape (`BAD_SHAPE`: a `fields` object of `{value, evidence}`
//! objects); a field the schema does not have (`UNKNOWN_FIELD`); a value of the wrong kind
//! (`WRONG_TYPE`); a value without a verbatim evidence snippet of the text given
//! (`EVIDENCE_NOT_VERBATIM`); evidence that does not state the value (`VALUE_NOT_IN_EVIDENCE`:
//! a string's words, folding case and whitespace; a number's digits, folding thousands
//! separators; a date's year, month number or name, and day; booleans are not checked beyond
//! the evidence). Then every required field must have a value (`MISSING_REQUIRED`). A field
//! the reply leaves out is null.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::taxonomy::{FieldKind, FieldSchema};
use crate::{json_object, Refusal};

/// One extracted value with where the document states it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExtractedField {
    pub name: String,
    /// Null when the document does not state it.
    pub value: Value,
    pub evidence: Option<String>,
    /// The evidence's offset in the text given, in characters.
    pub offset: Option<usize>,
}

/// A validated extraction: every field of the schema, in the schema's order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldValues {
    pub fields: Vec<ExtractedField>,
}

impl FieldValues {
    /// `{"name": {"value": …, "evidence": …, "offset": …}, …}`: the stored and shown form.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        for f in &self.fields {
            m.insert(
                f.name.clone(),
                serde_json::json!({"value": f.value, "evidence": f.evidence, "offset": f.offset}),
            );
        }
        Value::Object(m)
    }

    /// Fields with a value.
    pub fn filled(&self) -> usize {
        self.fields.iter().filter(|f| !f.value.is_null()).count()
    }
}

/// Validates a reply against the schema and the exact text the model was given.
pub fn validate(raw: &str, schema: &FieldSchema, text: &str) -> Result<FieldValues, Refusal> {
    let o = json_object(raw)?;
    let fields = o
        .get("fields")
        .and_then(Value::as_object)
        .ok_or_else(|| Refusal::BadShape("\"fields\" must be an object".into()))?;
    let mut found: Vec<ExtractedField> = Vec::new();
    for (name, entry) in fields {
        let e = entry.as_object().ok_or_else(|| {
            Refusal::BadShape(format!(
                "field {name:?} must be {{\"value\", \"evidence\"}}"
            ))
        })?;
        let field = schema
            .field(name)
            .ok_or_else(|| Refusal::UnknownField(name.clone()))?;
        let value = e.get("value").cloned().unwrap_or(Value::Null);
        let evidence = match e.get("evidence") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => {
                return Err(Refusal::BadShape(format!(
                    "evidence of {name:?} must be a string or null"
                )))
            }
        };
        if value.is_null() {
            found.push(ExtractedField {
                name: name.clone(),
                value,
                evidence: None,
                offset: None,
            });
            continue;
        }
        let value = typed(&value, field.kind).ok_or_else(|| Refusal::WrongType {
            field: name.clone(),
            expected: field.kind.expected(),
        })?;
        let ev = evidence.unwrap_or_default();
        let byte = (!ev.trim().is_empty())
            .then(|| text.find(&ev))
            .flatten()
            .ok_or_else(|| Refusal::EvidenceNotVerbatim {
                field: name.clone(),
                evidence: ev.clone(),
            })?;
        if !states(&ev, &value, field.kind) {
            return Err(Refusal::ValueNotInEvidence {
                field: name.clone(),
                value: value.to_string(),
            });
        }
        found.push(ExtractedField {
            name: name.clone(),
            value,
            offset: Some(text[..byte].chars().count()),
            evidence: Some(ev),
        });
    }
    let mut out = Vec::with_capacity(schema.fields.len());
    for f in &schema.fields {
        match found.iter().position(|x| x.name == f.name) {
            Some(i) => out.push(found.swap_remove(i)),
            None => out.push(ExtractedField {
                name: f.name.clone(),
                value: Value::Null,
                evidence: None,
                offset: None,
            }),
        }
        if f.required && out.last().is_some_and(|x| x.value.is_null()) {
            return Err(Refusal::MissingRequired(f.name.clone()));
        }
    }
    Ok(FieldValues { fields: out })
}

/// The value in its field's kind (an integer-valued float is an integer; a numeric string is
/// not a number).
fn typed(v: &Value, kind: FieldKind) -> Option<Value> {
    match kind {
        FieldKind::String => v.as_str().map(|s| Value::String(s.trim().to_owned())),
        FieldKind::Number => v.as_f64().filter(|f| f.is_finite()).map(|_| v.clone()),
        FieldKind::Integer => match v {
            Value::Number(n) if n.is_i64() || n.is_u64() => Some(v.clone()),
            Value::Number(n) => n
                .as_f64()
                .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                // Exact: an integral value under 2^53.
                .map(|f| Value::from(f as i64)),
            _ => None,
        },
        FieldKind::Boolean => v.as_bool().map(Value::Bool),
        FieldKind::Date => v
            .as_str()
            .and_then(|s| chrono::NaiveDate::parse_from_str(s.trim(), "%Y-%m-%d").ok())
            .map(|d| Value::String(d.format("%Y-%m-%d").to_string())),
    }
}

/// Lowercased words (letters and digits), one space between.
fn folded(s: &str) -> String {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The numbers written in `s` (`1,250.50` → 1250.5; `-3` → -3).
fn numbers_in(s: &str) -> Vec<f64> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let flush = |cur: &mut String, out: &mut Vec<f64>| {
        let t = cur.trim_end_matches(['.', ',']).replace(',', "");
        if let Ok(f) = t.parse::<f64>() {
            out.push(f);
        }
        cur.clear();
    };
    let chars: Vec<char> = s.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        let digit_next = chars.get(i + 1).is_some_and(char::is_ascii_digit);
        let inner_separator = (c == '.' || c == ',') && !cur.is_empty() && digit_next;
        let sign = c == '-' && cur.is_empty() && digit_next;
        if c.is_ascii_digit() || inner_separator || sign {
            cur.push(c);
        } else if !cur.is_empty() {
            flush(&mut cur, &mut out);
        }
    }
    if !cur.is_empty() {
        flush(&mut cur, &mut out);
    }
    out
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];

/// Whether `evidence` states `value` (see the module docs).
fn states(evidence: &str, value: &Value, kind: FieldKind) -> bool {
    match kind {
        FieldKind::String => {
            let v = folded(value.as_str().unwrap_or_default());
            !v.is_empty() && format!(" {} ", folded(evidence)).contains(&format!(" {v} "))
        }
        FieldKind::Number | FieldKind::Integer => {
            let Some(v) = value.as_f64() else {
                return false;
            };
            numbers_in(evidence)
                .iter()
                .any(|n| (n - v).abs() <= 1e-9 * v.abs().max(1.0) || (-n - v).abs() < 1e-9)
        }
        FieldKind::Boolean => true,
        FieldKind::Date => {
            let Some(d) = value
                .as_str()
                .and_then(|s| chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").ok())
            else {
                return false;
            };
            use chrono::Datelike;
            let nums = numbers_in(&evidence.replace(['-', '/', '.'], " "));
            let has = |n: u32| nums.iter().any(|x| (*x - f64::from(n)).abs() < 1e-9);
            let lower = evidence.to_lowercase();
            let month_named = MONTHS
                .get(d.month0() as usize)
                .is_some_and(|m| lower.contains(m));
            let year = d.year();
            has(u32::try_from(year).unwrap_or(0)) && (has(d.month()) || month_named) && has(d.day())
        }
    }
}

/// Validates a generated schema (the schema-generation contract: the schema itself, as JSON).
pub fn validate_schema(raw: &str) -> Result<FieldSchema, Refusal> {
    let o = json_object(raw)?;
    FieldSchema::parse(&Value::Object(o)).map_err(|e| Refusal::BadSchema(e.message))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    const TEXT: &str = "INVOICE\nInvoice no. INV-0042, issued 3 March 2026.\nBilled to: Globex Media GmbH\nTotal due: 1,250.50 EUR\nPaid: no";

    fn schema() -> FieldSchema {
        FieldSchema::parse(&json!({"properties":{
            "invoice_number":{"type":"string"},"issued":{"type":"string","format":"date"},
            "buyer":{"type":"string"},"total":{"type":"number"},"lines":{"type":"integer"},
            "paid":{"type":"boolean"}},"required":["invoice_number","total"]}))
        .unwrap()
    }

    fn reply(fields: Value) -> String {
        json!({ "fields": fields }).to_string()
    }

    #[test]
    fn a_reply_with_verbatim_evidence_passes() {
        let r = reply(json!({
            "invoice_number": {"value": "INV-0042", "evidence": "Invoice no. INV-0042"},
            "issued": {"value": "2026-03-03", "evidence": "issued 3 March 2026"},
            "buyer": {"value": "Globex Media GmbH", "evidence": "Billed to: Globex Media GmbH"},
            "total": {"value": 1250.5, "evidence": "Total due: 1,250.50 EUR"},
            "paid": {"value": false, "evidence": "Paid: no"}
        }));
        let v = validate(&r, &schema(), TEXT).unwrap();
        assert_eq!(v.fields.len(), 6, "every schema field, lines as null");
        assert_eq!(v.filled(), 5);
        let number = v
            .fields
            .iter()
            .find(|f| f.name == "invoice_number")
            .unwrap();
        assert_eq!(number.offset, Some(8));
        let j = v.to_json();
        assert_eq!(j["total"]["value"], 1250.5);
        assert!(j["lines"]["value"].is_null());
    }

    #[test]
    fn each_rule_refuses_the_whole_reply() {
        let base = json!({
            "invoice_number": {"value": "INV-0042", "evidence": "Invoice no. INV-0042"},
            "total": {"value": 1250.5, "evidence": "Total due: 1,250.50 EUR"}
        });
        assert!(validate(&reply(base.clone()), &schema(), TEXT).is_ok());
        let with = |k: &str, v: Value| {
            let mut b = base.clone();
            b[k] = v;
            validate(&reply(b), &schema(), TEXT).unwrap_err().code()
        };
        assert_eq!(
            with("color", json!({"value":"red","evidence":"INVOICE"})),
            "UNKNOWN_FIELD"
        );
        assert_eq!(
            with(
                "total",
                json!({"value":"1250","evidence":"Total due: 1,250.50 EUR"})
            ),
            "WRONG_TYPE"
        );
        assert_eq!(
            with("lines", json!({"value":2.5,"evidence":"Total"})),
            "WRONG_TYPE"
        );
        assert_eq!(
            with(
                "issued",
                json!({"value":"March 3","evidence":"issued 3 March 2026"})
            ),
            "WRONG_TYPE"
        );
        // A hallucinated value: evidence that is not in the text.
        assert_eq!(
            with(
                "buyer",
                json!({"value":"Initech","evidence":"Billed to: Initech"})
            ),
            "EVIDENCE_NOT_VERBATIM"
        );
        assert_eq!(
            with("buyer", json!({"value":"Initech","evidence":null})),
            "EVIDENCE_NOT_VERBATIM"
        );
        // A hallucinated value: verbatim evidence that does not state it.
        assert_eq!(
            with(
                "buyer",
                json!({"value":"Initech","evidence":"Billed to: Globex Media GmbH"})
            ),
            "VALUE_NOT_IN_EVIDENCE"
        );
        assert_eq!(
            with(
                "total",
                json!({"value":1350.5,"evidence":"Total due: 1,250.50 EUR"})
            ),
            "VALUE_NOT_IN_EVIDENCE"
        );
        assert_eq!(
            with(
                "issued",
                json!({"value":"2026-04-03","evidence":"issued 3 March 2026"})
            ),
            "VALUE_NOT_IN_EVIDENCE"
        );
        assert_eq!(
            with(
                "buyer",
                json!({"value":"Media Gm","evidence":"Billed to: Globex Media GmbH"})
            ),
            "VALUE_NOT_IN_EVIDENCE"
        );
        assert_eq!(
            with("total", json!({"value":null,"evidence":null})),
            "MISSING_REQUIRED"
        );
        assert_eq!(
            validate("{\"fields\":[]}", &schema(), TEXT)
                .unwrap_err()
                .code(),
            "BAD_SHAPE"
        );
        assert_eq!(
            validate("nope", &schema(), TEXT).unwrap_err().code(),
            "NOT_JSON"
        );
    }

    #[test]
    fn numbers_are_read_with_separators() {
        assert_eq!(
            numbers_in("Total: 1,250.50 EUR, -3 and 4."),
            vec![1250.5, -3.0, 4.0]
        );
        assert!(
            numbers_in("v2.39.5").is_empty(),
            "a version is not a number"
        );
    }

    #[test]
    fn generated_schemas_are_checked() {
        assert!(validate_schema(r#"{"properties":{"a":{"type":"string"}}}"#).is_ok());
        assert_eq!(
            validate_schema(r#"{"properties":{}}"#).unwrap_err().code(),
            "BAD_SCHEMA"
        );
    }
}
