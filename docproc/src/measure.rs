//! The measured schema of a JSON value (seed 004: "schema must be measured, not declared"):
//! a JSON Schema walked from the value itself, never written by hand.
//!
//! Scalars give their type (`integer` for whole numbers, `number` otherwise); an array gives
//! `items`, the merge of its elements' schemas; an object gives `properties` (each the merge
//! over every object seen at that place) and `required` (the keys every one of them had).
//! Different types at one place merge into `"type": [..]`, sorted; `integer` and `number`
//! merge into `number`.

use serde_json::{json, Map, Value};

/// The JSON type's name (`integer` for a whole number).
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The schema of `v` (see the module docs).
pub fn measure_schema(v: &Value) -> Value {
    match v {
        Value::Array(a) => {
            let items = a.iter().map(measure_schema).reduce(|x, y| merge(&x, &y));
            match items {
                Some(i) => json!({"type": "array", "items": i}),
                None => json!({"type": "array"}),
            }
        }
        Value::Object(o) => {
            let props: Map<String, Value> = o
                .iter()
                .map(|(k, x)| (k.clone(), measure_schema(x)))
                .collect();
            let required: Vec<&String> = o.keys().collect();
            json!({"type": "object", "properties": props, "required": required})
        }
        other => json!({"type": type_name(other)}),
    }
}

fn types_of(s: &Value) -> Vec<String> {
    match s.get("type") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|t| t.as_str().map(String::from))
            .collect(),
        _ => Vec::new(),
    }
}

/// Two schemas of values seen at the same place, as one.
fn merge(a: &Value, b: &Value) -> Value {
    let mut types = types_of(a);
    for t in types_of(b) {
        if !types.contains(&t) {
            types.push(t);
        }
    }
    if types.contains(&"number".to_owned()) {
        types.retain(|t| t != "integer");
    }
    types.sort();
    let mut out = Map::new();
    out.insert(
        "type".into(),
        match types.as_slice() {
            [one] => Value::String(one.clone()),
            many => Value::Array(many.iter().cloned().map(Value::String).collect()),
        },
    );
    match (a.get("items"), b.get("items")) {
        (Some(x), Some(y)) => {
            out.insert("items".into(), merge(x, y));
        }
        (Some(x), None) | (None, Some(x)) => {
            out.insert("items".into(), x.clone());
        }
        (None, None) => {}
    }
    let (pa, pb) = (a.get("properties"), b.get("properties"));
    if pa.is_some() || pb.is_some() {
        let empty = Map::new();
        let pa = pa.and_then(Value::as_object).unwrap_or(&empty);
        let pb = pb.and_then(Value::as_object).unwrap_or(&empty);
        let mut props = pa.clone();
        for (k, v) in pb {
            let merged = match pa.get(k) {
                Some(x) => merge(x, v),
                None => v.clone(),
            };
            props.insert(k.clone(), merged);
        }
        let req = |s: &Value| -> Vec<String> {
            s.get("required")
                .and_then(Value::as_array)
                .map(|r| {
                    r.iter()
                        .filter_map(|x| x.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default()
        };
        // Required where both were objects that had the key; a non-object side requires
        // nothing of its own.
        let (ra, rb) = (req(a), req(b));
        let required: Vec<String> = match (a.get("properties"), b.get("properties")) {
            (Some(_), Some(_)) => ra.into_iter().filter(|k| rb.contains(k)).collect(),
            (Some(_), None) => ra,
            _ => rb,
        };
        out.insert("properties".into(), Value::Object(props));
        out.insert("required".into(), json!(required));
    }
    Value::Object(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn schemas_are_walked_from_the_value() {
        let v = json!({"tables": [
            {"name": "a", "rows": [{"x": 1, "y": "s"}, {"x": 2.5, "y": null}]},
            {"name": "b", "rows": [{"x": 3}], "page": 2}
        ]});
        let s = measure_schema(&v);
        let table = &s["properties"]["tables"]["items"];
        assert_eq!(table["required"], json!(["name", "rows"]));
        assert_eq!(table["properties"]["page"]["type"], "integer");
        let row = &table["properties"]["rows"]["items"];
        assert_eq!(row["properties"]["x"]["type"], "number");
        assert_eq!(row["properties"]["y"]["type"], json!(["null", "string"]));
        assert_eq!(row["required"], json!(["x"]));
        assert_eq!(measure_schema(&json!([]))["type"], "array");
    }
}
