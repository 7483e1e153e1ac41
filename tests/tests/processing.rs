//! Document processing (seed 004: classify_document, extract_document, process_document), end
//! to end on both backends, the model being an OpenAI-compatible stub server set as the
//! team's `utility` role:
//!
//! - a classification, a refused reply and its retry (the retry names the refusal), and a
//!   reply refused twice (LLM_REFUSED, nothing stored);
//! - a schema extraction whose values all carry evidence found verbatim in the document, a
//!   hallucinated value refused (evidence not in the text; evidence that does not state it);
//! - processDocument: a low-confidence classification makes the model suggest a type, the
//!   taxonomy gains it (the team allows it), the model writes its schema, the values are
//!   extracted, a result is stored; the job's stages arrive on `jobProgress`; every model
//!   call is a `usage` row of role `utility` with the job's id;
//! - a private document never widens: the type suggested for it (whose description quotes
//!   its canary word) is not added, and no colleague reads the canary anywhere;
//! - without any model: the zero-shot classifier and the tables, and schema extraction
//!   refused with UNAVAILABLE;
//! - the taxonomy: starter set, admin-only changes with codes, audit rows.

use cairn_llm::stub::{StubReply, StubServer};
use cairn_tests::{both_backends, error_code, require_model, stages, Backend, TestServer};
use serde_json::{json, Value};

both_backends!(
    classification_refusal_and_retry,
    schema_extraction_keeps_only_verbatim_values,
    processing_extends_the_taxonomy_but_never_with_private_text,
    without_a_model_zero_shot_and_tables,
    the_taxonomy_is_the_admins,
);

const INVOICE: &str = "INVOICE\n\nInvoice no. INV-0042, issued 2026-03-03.\nSeller: Acme Robotics GmbH\nBilled to: Globex Media Ltd\n\n| Item | Qty | Price |\n| --- | --- | --- |\n| Gripper arm | 2 | 1,100.25 |\n| Cable set | 10 | 5 |\n\nTotal due: 2,250.50 EUR\nPayment within 30 days.";

const SET: &str = "mutation($r: ModelRole!, $i: TeamModelInput!) { setTeamModel(role: $r, input: $i) { source } }";
const CLASSIFY: &str = "mutation($d: ID!) { classifyDocument(documentId: $d) { type confidence reason method model version } }";
const EXTRACT: &str = "mutation($d: ID!, $s: JSON, $t: String) { extractDocument(documentId: $d, schema: $s, type: $t) { mode data measuredSchema schema filled tables llmCalls } }";
const PROCESS: &str = "mutation($d: ID!) { processDocument(documentId: $d) { id } }";
const DOC: &str = "query($d: ID!) { document(id: $d) { classification { type confidence method reason } processing { type confidence extendedTaxonomy schemaGenerated schema result measuredSchema } } }";
const TYPES: &str = "{ documentTypes { id name description schema origin } }";

async fn use_stub(s: &TestServer, token: &str, stub: &StubServer) {
    let d = s
        .gql_ok(
            token,
            SET,
            json!({ "r": "UTILITY", "i": { "url": stub.base_url(), "model": "stub-utility", "priceInput": 2.0, "priceOutput": 4.0 } }),
        )
        .await;
    assert_eq!(d["setTeamModel"]["source"], "TEAM");
}

async fn invoice(s: &TestServer, token: &str) -> String {
    let c = s.create_corpus(token, "bills").await;
    s.ingest_text(token, &c, "INV-0042", INVOICE, "TEAM").await
}

fn system_of(req: &Value) -> String {
    req["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn last_user(req: &Value) -> String {
    req["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

async fn usage_rows(s: &TestServer, team: i64) -> Vec<entity::prelude::Usage> {
    s.cairn()
        .store
        .team_usage(team, "llm")
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

async fn team_of(s: &TestServer, token: &str) -> i64 {
    let d = s.gql_ok(token, "{ me { team { id } } }", json!({})).await;
    d["me"]["team"]["id"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no team in {d}"))
}

async fn classification_refusal_and_retry(backend: Backend) {
    require_model();
    let stub = StubServer::start(vec![
        // Refused: a type the taxonomy does not have.
        StubReply::content(r#"{"type":"poem","confidence":0.9,"reason":"rhymes"}"#),
        StubReply::content(
            r#"{"type":"Invoice","confidence":0.93,"reason":"it asks Globex Media Ltd to pay a total"}"#,
        ),
        // The next classification: refused twice.
        StubReply::content(r#"{"type":"invoice","confidence":7,"reason":"x"}"#),
        StubReply::content("not json at all"),
    ])
    .await;
    let s = TestServer::start(backend).await;
    let token = s.owner_token.clone();
    let team = team_of(&s, &token).await;
    let doc = invoice(&s, &token).await;
    use_stub(&s, &token, &stub).await;

    let d = s.gql_ok(&token, CLASSIFY, json!({ "d": doc })).await;
    let c = &d["classifyDocument"];
    assert_eq!(c["type"], "invoice", "{c}");
    assert_eq!(c["method"], "LLM");
    assert_eq!(c["model"], "stub-utility");
    assert_eq!(c["version"], 1);
    assert!((c["confidence"].as_f64().unwrap_or_default() - 0.93).abs() < 1e-9);
    let reqs = stub.requests();
    assert_eq!(reqs.len(), 2, "one refusal, one retry");
    assert!(
        system_of(&reqs[0]).contains("- invoice: "),
        "the taxonomy is in the prompt"
    );
    assert!(last_user(&reqs[0]).contains("Invoice no. INV-0042"));
    let retry = last_user(&reqs[1]);
    assert!(
        retry.contains("UNKNOWN_TYPE"),
        "the retry names the refusal: {retry}"
    );
    // Stored and shown with the document.
    let d = s.gql_ok(&token, DOC, json!({ "d": doc })).await;
    assert_eq!(d["document"]["classification"]["type"], "invoice", "{d}");

    // Refused twice: a coded error, and the stored classification is untouched.
    let body = s.gql(&token, CLASSIFY, json!({ "d": doc })).await;
    assert_eq!(error_code(&body), Some("LLM_REFUSED"), "{body}");
    let msg = body.to_string();
    assert!(
        msg.contains("BAD_CONFIDENCE") && msg.contains("NOT_JSON"),
        "{msg}"
    );
    let d = s.gql_ok(&token, DOC, json!({ "d": doc })).await;
    assert_eq!(
        d["document"]["classification"]["reason"],
        "it asks Globex Media Ltd to pay a total"
    );

    // Every call is a usage row of the utility role, priced by the team's setting.
    let rows = usage_rows(&s, team).await;
    assert_eq!(rows.len(), 4, "{rows:?}");
    for r in &rows {
        assert_eq!(r.role.as_deref(), Some("utility"));
        assert_eq!(r.model, "stub-utility");
        let price = r.input_tokens as f64 * 2e-6 + r.output_tokens as f64 * 4e-6;
        assert!((r.cost_usd - price).abs() < 1e-12);
    }
    s.stop().await;
}

const INVOICE_SCHEMA: &str = r#"{"type":"object","properties":{
  "invoice_number":{"type":"string"},"issue_date":{"type":"string","format":"date"},
  "seller":{"type":"string"},"buyer":{"type":"string"},"total":{"type":"number"},
  "due_days":{"type":"integer"}},"required":["invoice_number","total"]}"#;

fn fields(pairs: &[(&str, Value, Option<&str>)]) -> String {
    let mut m = serde_json::Map::new();
    for (k, v, e) in pairs {
        m.insert((*k).into(), json!({ "value": v, "evidence": e }));
    }
    json!({ "fields": m }).to_string()
}

fn good_fields() -> String {
    fields(&[
        (
            "invoice_number",
            json!("INV-0042"),
            Some("Invoice no. INV-0042"),
        ),
        ("issue_date", json!("2026-03-03"), Some("issued 2026-03-03")),
        (
            "seller",
            json!("Acme Robotics GmbH"),
            Some("Seller: Acme Robotics GmbH"),
        ),
        (
            "buyer",
            json!("Globex Media Ltd"),
            Some("Billed to: Globex Media Ltd"),
        ),
        ("total", json!(2250.5), Some("Total due: 2,250.50 EUR")),
        ("due_days", json!(30), Some("Payment within 30 days.")),
    ])
}

async fn schema_extraction_keeps_only_verbatim_values(backend: Backend) {
    require_model();
    let stub = StubServer::start(vec![
        // Hallucinated: a buyer the document never names, with made-up evidence.
        StubReply::content(fields(&[
            (
                "invoice_number",
                json!("INV-0042"),
                Some("Invoice no. INV-0042"),
            ),
            ("buyer", json!("Initech"), Some("Billed to: Initech")),
            ("total", json!(2250.5), Some("Total due: 2,250.50 EUR")),
        ])),
        StubReply::content(good_fields()),
        // Then: verbatim evidence that does not state the value, twice.
        StubReply::content(fields(&[
            (
                "invoice_number",
                json!("INV-0042"),
                Some("Invoice no. INV-0042"),
            ),
            ("total", json!(9999.0), Some("Total due: 2,250.50 EUR")),
        ])),
    ])
    .await;
    let s = TestServer::start(backend).await;
    let token = s.owner_token.clone();
    let doc = invoice(&s, &token).await;
    use_stub(&s, &token, &stub).await;
    let schema: Value = serde_json::from_str(INVOICE_SCHEMA).unwrap_or_default();

    let d = s
        .gql_ok(&token, EXTRACT, json!({ "d": doc, "s": schema }))
        .await;
    let x = &d["extractDocument"];
    assert_eq!(x["mode"], "SCHEMA", "{x}");
    assert_eq!(x["filled"], 6);
    assert_eq!(x["llmCalls"], 2);
    let got = x["data"]["fields"].as_object().cloned().unwrap_or_default();
    assert_eq!(got.len(), 6);
    for (name, f) in &got {
        let ev = f["evidence"]
            .as_str()
            .unwrap_or_else(|| panic!("{name} has no evidence"));
        assert!(INVOICE.contains(ev), "{name}: {ev:?} is not verbatim");
        let offset = f["offset"].as_u64().unwrap_or(u64::MAX) as usize;
        let at: String = INVOICE
            .chars()
            .skip(offset)
            .take(ev.chars().count())
            .collect();
        assert_eq!(at, ev, "{name}: the offset points at the evidence");
    }
    assert_eq!(got["total"]["value"], 2250.5);
    assert_eq!(got["buyer"]["value"], "Globex Media Ltd");
    assert!(
        !x.to_string().contains("Initech"),
        "the refused value is gone"
    );
    assert!(last_user(&stub.requests()[1]).contains("EVIDENCE_NOT_VERBATIM"));
    // The measured schema describes the data actually returned.
    assert_eq!(
        x["measuredSchema"]["properties"]["fields"]["properties"]["total"]["properties"]["value"]
            ["type"],
        "number",
        "{x}"
    );

    // A value its evidence does not state is refused, twice: a coded error.
    let body = s
        .gql(&token, EXTRACT, json!({ "d": doc, "s": schema }))
        .await;
    assert_eq!(error_code(&body), Some("LLM_REFUSED"), "{body}");
    assert!(body.to_string().contains("VALUE_NOT_IN_EVIDENCE"), "{body}");

    // A bad schema is refused before any call.
    let calls = stub.requests().len();
    let body = s
        .gql(
            &token,
            EXTRACT,
            json!({ "d": doc, "s": { "properties": { "a": { "type": "array" } } } }),
        )
        .await;
    assert_eq!(error_code(&body), Some("BAD_USER_INPUT"), "{body}");
    assert_eq!(stub.requests().len(), calls);
    // A viewer may read but not run workflows; another team cannot see the document.
    let (_, viewer) = s.user_with_token("vera", "VIEWER").await;
    let body = s.gql(&viewer, EXTRACT, json!({ "d": doc })).await;
    assert_eq!(error_code(&body), Some("FORBIDDEN"), "{body}");
    let (_, _, other) = s.other_team("beta").await;
    let body = s.gql(&other, EXTRACT, json!({ "d": doc })).await;
    assert_eq!(error_code(&body), Some("NOT_FOUND"), "{body}");
    s.stop().await;
}

/// A scripted model that answers by the kind of request (its system prompt).
fn scripted_model(suggested_description: &'static str) -> StubReply {
    StubReply::from_fn(move |req| {
        let system = system_of(req);
        if system.starts_with("You classify") {
            json!({"type": "report", "confidence": 0.2, "reason": "no type fits well"}).to_string()
        } else if system.starts_with("None of these document types") {
            json!({"name": "Purchase Order", "description": suggested_description}).to_string()
        } else if system.contains("need a schema") {
            json!({"type": "object", "properties": {
                "po_number": {"type": "string", "description": "the order's number"},
                "quantity": {"type": "integer"}}, "required": ["po_number"]})
            .to_string()
        } else {
            fields(&[
                (
                    "po_number",
                    json!("PO-7731"),
                    Some("Purchase order PO-7731"),
                ),
                ("quantity", json!(40), Some("Quantity: 40 crates")),
            ])
        }
    })
}

const ORDER: &str = "Purchase order PO-7731\n\nPlease deliver the goods below to the Leeds depot.\nQuantity: 40 crates\nDelivery by Friday.";
const CANARY: &str = "QUARZELBLAU";

async fn processing_extends_the_taxonomy_but_never_with_private_text(backend: Backend) {
    require_model();
    let stub = StubServer::start(vec![scripted_model(
        "an order a buyer sends to a supplier: items, quantities and delivery",
    )])
    .await;
    let s = TestServer::start(backend).await;
    let token = s.owner_token.clone();
    let team = team_of(&s, &token).await;
    use_stub(&s, &token, &stub).await;
    let body = s
        .gql_ok(
            &token,
            "mutation { setTaxonomyExtension(enabled: true) }",
            json!({}),
        )
        .await;
    assert_eq!(body["setTaxonomyExtension"], true);
    let c = s.create_corpus(&token, "orders").await;
    let doc = s.ingest_text(&token, &c, "PO-7731", ORDER, "TEAM").await;

    let d = s.gql_ok(&token, PROCESS, json!({ "d": doc })).await;
    let job = d["processDocument"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let events = s.follow_job(&token, &job).await;
    // The subscription begins with the job's state when it subscribed, and the job may be past
    // its first stages by then (seen once in a full run: the snapshot was "suggesting"); from
    // there on, every stage in order, up to "processed". The classification itself is checked
    // on the result below.
    let seen = stages(&events);
    let expected = [
        "classifying",
        "suggesting",
        "schema",
        "extracting",
        "processed",
    ];
    let known: Vec<&str> = seen
        .iter()
        .map(String::as_str)
        .filter(|st| expected.contains(st))
        .collect();
    let from = known
        .first()
        .and_then(|first| expected.iter().position(|st| st == first))
        .unwrap_or_else(|| panic!("no stage of the job seen: {seen:?}"));
    assert_eq!(known, expected[from..], "stages after the first: {seen:?}");
    let last = events.last().cloned().unwrap_or_default();
    assert_eq!(last["state"], "SUCCEEDED", "{events:?}");
    let r = &last["result"];
    assert_eq!(r["type"], "purchase_order", "{r}");
    assert_eq!(r["extendedTaxonomy"], true, "{r}");
    assert_eq!(r["schemaGenerated"], true, "{r}");
    assert_eq!(r["mode"], "schema", "{r}");
    assert_eq!(r["fields"], 2, "{r}");

    // The taxonomy gained the type, with the schema the model wrote.
    let d = s.gql_ok(&token, TYPES, json!({})).await;
    let types = d["documentTypes"].as_array().cloned().unwrap_or_default();
    let po = types
        .iter()
        .find(|t| t["name"] == "purchase_order")
        .unwrap_or_else(|| panic!("no purchase_order in {types:?}"));
    assert_eq!(po["origin"], "suggested");
    assert_eq!(po["schema"]["properties"]["quantity"]["type"], "integer");
    // The stored result, on the document.
    let d = s.gql_ok(&token, DOC, json!({ "d": doc })).await;
    let pr = &d["document"]["processing"];
    assert_eq!(pr["type"], "purchase_order", "{d}");
    assert_eq!(
        pr["result"]["extraction"]["fields"]["po_number"]["value"],
        "PO-7731"
    );
    assert_eq!(pr["result"]["suggestedType"]["name"], "purchase_order");
    assert_eq!(pr["measuredSchema"]["type"], "object");
    assert_eq!(d["document"]["classification"]["type"], "report");
    // Four calls (classify, suggest, schema, extract), each a usage row with the job's id.
    assert_eq!(stub.requests().len(), 4);
    let rows = usage_rows(&s, team).await;
    assert_eq!(rows.len(), 4, "{rows:?}");
    assert!(rows.iter().all(|r| r.role.as_deref() == Some("utility")
        && r.job_id.map(|j| j.to_string()) == Some(job.clone())));

    // A member's private document: the model quotes its canary in the suggested type.
    let private_stub = StubServer::start(vec![scripted_model(
        "an order for QUARZELBLAU crates to the Leeds depot",
    )])
    .await;
    use_stub(&s, &token, &private_stub).await;
    let (_, member) = s.user_with_token("mia", "MEMBER").await;
    let (_, colleague) = s.user_with_token("carl", "MEMBER").await;
    let text = format!("Order for {CANARY} crates\n\nQuantity: 40 crates\nPurchase order PO-7731");
    let private_doc = s
        .ingest_text(&member, &c, "secret order", &text, "PRIVATE")
        .await;
    let d = s
        .gql_ok(&member, PROCESS, json!({ "d": private_doc }))
        .await;
    let job = d["processDocument"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let events = s.follow_job(&member, &job).await;
    let last = events.last().cloned().unwrap_or_default();
    assert_eq!(last["state"], "SUCCEEDED", "{events:?}");
    assert_eq!(last["result"]["extendedTaxonomy"], false, "{last}");
    // The member sees the suggestion in their own result ...
    let d = s.gql_ok(&member, DOC, json!({ "d": private_doc })).await;
    assert!(d.to_string().contains(CANARY), "{d}");
    // ... and no colleague, admin included, reads the canary in any field.
    for t in [&colleague, &token] {
        for (q, v) in [
            (TYPES, json!({})),
            (DOC, json!({ "d": private_doc })),
            (
                "query($j: ID!) { job(id: $j) { result error stage } }",
                json!({ "j": job }),
            ),
        ] {
            let body = s.gql(t, q, v).await;
            assert!(!body.to_string().contains(CANARY), "{q}: {body}");
        }
    }
    s.stop().await;
}

const TABLES_DOC: &str = "# Depot stock\n\nCounted on Monday.\n\n| Depot | Crates | Weight kg | Inspected | Since |\n| --- | --- | --- | --- | --- |\n| Leeds | 1,200 | 3.5 | yes | 2024-05-01 |\n| York | 40 | 12 | no | 2023-11-30 |\n| Hull |  | 0.25 | yes | 2022-01-15 |";

async fn without_a_model_zero_shot_and_tables(backend: Backend) {
    require_model();
    let s = TestServer::start(backend).await;
    let token = s.owner_token.clone();
    let doc = invoice(&s, &token).await;
    let d = s.gql_ok(&token, CLASSIFY, json!({ "d": doc })).await;
    let c = &d["classifyDocument"];
    assert_eq!(c["method"], "ZERO_SHOT", "{c}");
    let conf = c["confidence"].as_f64().unwrap_or(-1.0);
    assert!(conf > 0.0 && conf <= 1.0, "{c}");
    let types = s.gql_ok(&token, TYPES, json!({})).await;
    let names: Vec<String> = types["documentTypes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect();
    assert!(
        names.contains(&c["type"].as_str().unwrap_or_default().to_owned()),
        "{c} {names:?}"
    );
    assert_eq!(c["type"], "invoice", "an invoice reads like one: {c}");

    let corpus = s.create_corpus(&token, "stock").await;
    let stock = s
        .ingest_text(&token, &corpus, "stock", TABLES_DOC, "TEAM")
        .await;
    let d = s.gql_ok(&token, EXTRACT, json!({ "d": stock })).await;
    let x = &d["extractDocument"];
    assert_eq!(x["mode"], "TABLES", "{x}");
    assert_eq!(x["tables"], 1);
    assert_eq!(x["llmCalls"], 0);
    let t = &x["data"]["tables"][0];
    assert_eq!(t["name"], "Depot stock");
    let types: Vec<&str> = t["columns"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|c| c["type"].as_str())
        .collect();
    assert_eq!(
        types,
        ["string", "integer", "number", "boolean", "date"],
        "{t}"
    );
    assert_eq!(
        t["rows"][0],
        json!({"Depot": "Leeds", "Crates": 1200, "Weight kg": 3.5, "Inspected": true, "Since": "2024-05-01"})
    );
    assert!(t["rows"][2]["Crates"].is_null());
    assert_eq!(
        x["measuredSchema"]["properties"]["tables"]["items"]["properties"]["rows"]["items"]
            ["properties"]["Crates"]["type"],
        json!(["integer", "null"]),
        "{x}"
    );

    // Schema extraction needs a model.
    let schema: Value = serde_json::from_str(INVOICE_SCHEMA).unwrap_or_default();
    let body = s
        .gql(&token, EXTRACT, json!({ "d": doc, "s": schema }))
        .await;
    assert_eq!(error_code(&body), Some("UNAVAILABLE"), "{body}");
    // processDocument without a model: zero-shot, then the tables.
    let d = s.gql_ok(&token, PROCESS, json!({ "d": stock })).await;
    let job = d["processDocument"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let events = s.follow_job(&token, &job).await;
    let last = events.last().cloned().unwrap_or_default();
    assert_eq!(last["state"], "SUCCEEDED", "{events:?}");
    assert_eq!(last["result"]["mode"], "tables", "{last}");
    assert_eq!(last["result"]["tables"], 1, "{last}");
    assert_eq!(last["result"]["llmCalls"], 0, "{last}");
    s.stop().await;
}

async fn the_taxonomy_is_the_admins(backend: Backend) {
    let s = TestServer::start(backend).await;
    let token = s.owner_token.clone();
    let (_, member) = s.user_with_token("mo", "MEMBER").await;
    // Everyone starts with the starter set; a member reads it.
    let d = s.gql_ok(&member, TYPES, json!({})).await;
    let starters = d["documentTypes"].as_array().cloned().unwrap_or_default();
    assert!(starters.len() >= 4, "{d}");
    assert!(starters.iter().all(|t| t["origin"] == "starter"));
    let create = "mutation($i: DocumentTypeInput!) { createDocumentType(input: $i) { id name description schema origin } }";
    let input = json!({ "name": "Delivery Note", "description": "a note that goods were delivered",
        "schema": { "properties": { "note_number": { "type": "string" } }, "required": ["note_number"] } });
    let body = s.gql(&member, create, json!({ "i": input })).await;
    assert_eq!(error_code(&body), Some("FORBIDDEN"), "{body}");
    let d = s.gql_ok(&token, create, json!({ "i": input })).await;
    let t = &d["createDocumentType"];
    assert_eq!(t["name"], "delivery_note");
    assert_eq!(t["origin"], "admin");
    assert_eq!(t["schema"]["required"], json!(["note_number"]));
    let id = t["id"].as_str().unwrap_or_default().to_owned();
    // Bad input: codes, nothing written.
    for bad in [
        json!({ "name": "9x", "description": "d" }),
        json!({ "name": "ok_name", "description": "  " }),
        json!({ "name": "ok_name", "description": "d", "schema": { "properties": { "a": { "type": "object" } } } }),
    ] {
        let body = s.gql(&token, create, json!({ "i": bad })).await;
        assert_eq!(error_code(&body), Some("BAD_USER_INPUT"), "{body}");
    }
    let body = s.gql(&token, create, json!({ "i": input })).await;
    assert_eq!(error_code(&body), Some("CONFLICT"), "{body}");
    let update = "mutation($id: ID!, $i: DocumentTypeInput!) { updateDocumentType(id: $id, input: $i) { name description schema } }";
    let d = s
        .gql_ok(
            &token,
            update,
            json!({ "id": id, "i": { "description": "proof of delivery", "schema": null } }),
        )
        .await;
    assert_eq!(d["updateDocumentType"]["description"], "proof of delivery");
    assert!(d["updateDocumentType"]["schema"].is_null());
    assert_eq!(d["updateDocumentType"]["name"], "delivery_note");
    let body = s
        .gql(
            &member,
            update,
            json!({ "id": id, "i": { "description": "x" } }),
        )
        .await;
    assert_eq!(error_code(&body), Some("FORBIDDEN"), "{body}");
    // Another team's admin cannot touch it.
    let (_, _, other) = s.other_team("beta").await;
    let body = s
        .gql(
            &other,
            update,
            json!({ "id": id, "i": { "description": "x" } }),
        )
        .await;
    assert_eq!(error_code(&body), Some("NOT_FOUND"), "{body}");
    let d = s.gql_ok(&other, TYPES, json!({})).await;
    assert!(!d.to_string().contains("delivery_note"), "{d}");
    let del = "mutation($id: ID!) { deleteDocumentType(id: $id) }";
    let d = s.gql_ok(&other, del, json!({ "id": id })).await;
    assert_eq!(d["deleteDocumentType"], false);
    let d = s.gql_ok(&token, del, json!({ "id": id })).await;
    assert_eq!(d["deleteDocumentType"], true);
    let d = s.gql_ok(&token, TYPES, json!({})).await;
    assert!(!d.to_string().contains("delivery_note"), "{d}");
    // Audited, by action.
    let rows = s
        .cairn()
        .store
        .audit_rows()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let actions: Vec<&str> = rows.iter().map(|r| r.action.as_str()).collect();
    for a in [
        "document_type.create",
        "document_type.update",
        "document_type.delete",
    ] {
        assert_eq!(
            actions.iter().filter(|x| **x == a).count(),
            1,
            "{a}: {actions:?}"
        );
    }
    s.stop().await;
}
