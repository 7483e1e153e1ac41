//! Schemaless table extraction (`extractDocument` without a schema, no model) on real files we
//! did not write, fetched by `scripts/fetch-real-tables.sh`: readxl's example workbook (R's
//! iris, mtcars, chickwts and quakes datasets, one sheet each) and a chapter of the Debian
//! Reference turned into DOCX by pandoc. The facts asserted are the datasets' own: iris has
//! 150 rows of four measurements and a species, mtcars 32 cars, quakes 1000 events; the
//! Debian Reference lists packages with an integer size.

use cairn_tests::{require_model, Backend, TestServer};
use serde_json::{json, Value};

const EXTRACT: &str = "mutation($d: ID!) { extractDocument(documentId: $d) { mode tables data measuredSchema llmCalls } }";

async fn tables_of(s: &TestServer, corpus: &str, dir: &str, file: &str) -> Value {
    let bytes = std::fs::read(format!("{dir}/{file}")).unwrap_or_else(|e| panic!("{file}: {e}"));
    let events = s.upload_watched(&s.owner_token, corpus, file, bytes).await;
    let last = events.last().cloned().unwrap_or_default();
    assert_eq!(last["stage"], "searchable", "{file}: {events:?}");
    let doc = last["result"]["documentId"].to_string();
    let d = s
        .gql_ok(
            &s.owner_token,
            EXTRACT,
            json!({ "d": doc.trim_matches('"') }),
        )
        .await;
    let x = d["extractDocument"].clone();
    assert_eq!(x["mode"], "TABLES", "{x}");
    assert_eq!(x["llmCalls"], 0);
    x
}

fn table<'a>(x: &'a Value, name: &str) -> &'a Value {
    x["data"]["tables"]
        .as_array()
        .and_then(|ts| ts.iter().find(|t| t["name"] == name))
        .unwrap_or_else(|| panic!("no table {name} in {}", x["data"]))
}

fn column_types(t: &Value) -> Vec<(String, String)> {
    t["columns"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap_or_default().to_owned(),
                c["type"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn rows(t: &Value) -> usize {
    t["rows"].as_array().map_or(0, Vec::len)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_spreadsheet_and_docx_tables_come_back_typed() {
    require_model();
    let dir = std::env::var("CAIRN_TEST_REAL_TABLES").unwrap_or_else(|_| {
        panic!("CAIRN_TEST_REAL_TABLES is not set: run scripts/fetch-real-tables.sh (the README's test command does)")
    });
    let s = TestServer::start(Backend::Sqlite).await;
    let corpus = s.create_corpus(&s.owner_token, "tables").await;

    let x = tables_of(&s, &corpus, &dir, "datasets.xls").await;
    assert_eq!(x["tables"], 4, "{}", x["data"]);
    let iris = table(&x, "iris");
    assert_eq!(rows(iris), 150, "every iris row, across chunks");
    assert_eq!(
        column_types(iris),
        [
            ("Sepal.Length", "number"),
            ("Sepal.Width", "number"),
            ("Petal.Length", "number"),
            ("Petal.Width", "number"),
            ("Species", "string"),
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    assert_eq!(iris["rows"][0]["Species"], "setosa");
    assert_eq!(iris["rows"][0]["Sepal.Length"], 5.1);
    let mtcars = table(&x, "mtcars");
    assert_eq!(rows(mtcars), 32);
    let types: std::collections::HashMap<String, String> =
        column_types(mtcars).into_iter().collect();
    assert_eq!(
        types.get("mpg").map(String::as_str),
        Some("number"),
        "{types:?}"
    );
    assert_eq!(
        types.get("cyl").map(String::as_str),
        Some("integer"),
        "{types:?}"
    );
    assert_eq!(rows(table(&x, "quakes")), 1000);
    assert_eq!(rows(table(&x, "chickwts")), 71);
    // The measured schema says what the rows hold.
    let row_schema =
        &x["measuredSchema"]["properties"]["tables"]["items"]["properties"]["rows"]["items"];
    assert_eq!(
        row_schema["properties"]["Species"]["type"], "string",
        "{row_schema}"
    );

    let x = tables_of(&s, &corpus, &dir, "reference.docx").await;
    let listed: Vec<&Value> = x["data"]["tables"]
        .as_array()
        .map(|ts| {
            ts.iter()
                .filter(|t| column_types(t).iter().any(|(n, _)| n == "package"))
                .collect()
        })
        .unwrap_or_default();
    assert!(!listed.is_empty(), "no package tables in {}", x["data"]);
    for t in &listed {
        let types: std::collections::HashMap<String, String> =
            column_types(t).into_iter().collect();
        assert_eq!(
            types.get("size").map(String::as_str),
            Some("integer"),
            "{t}"
        );
        assert_eq!(
            types.get("popcon").map(String::as_str),
            Some("string"),
            "{t}"
        );
        assert!(rows(t) >= 1);
    }
    assert!(
        listed.iter().any(|t| t["rows"]
            .as_array()
            .is_some_and(|r| r.iter().any(|row| row["package"] == "ibus"))),
        "ibus is listed"
    );
    s.stop().await;
}
