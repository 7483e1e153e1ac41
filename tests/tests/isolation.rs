//! Content-addressed storage across teams, on both backends (seed 004, "Content-addressable
//! storage"): the same bytes uploaded by two ordinary teams are one blob (one row, one file);
//! by an isolated team and another, two. Reference counts are computed from live rows: deleting
//! one team's document never removes a file another team's document still uses, and the last
//! one out removes it. Heal-on-write: a blob row whose file is gone is pointed at the file of
//! the next upload of the same bytes. Only admins switch isolation.

use cairn_tests::{both_backends, error_code, require_model, Backend, TestServer};
use serde_json::{json, Value};

both_backends!(blobs_are_shared_only_between_teams_that_do_not_isolate);

const BYTES: &str = "# Cold-chain audit\n\nThe reefer containers at berth 7 held 3.5 °C through the night of the audit.\n";
const OTHER: &str = "# Berth 9\n\nThe crane at berth 9 was serviced on Tuesday.\n";

async fn upload(s: &TestServer, token: &str, corpus: &str, name: &str, text: &str) -> Value {
    let events = s
        .upload_watched(token, corpus, name, text.as_bytes().to_vec())
        .await;
    let last = events.last().cloned().unwrap_or(Value::Null);
    assert_eq!(last["state"], "SUCCEEDED", "{events:?}");
    last["result"].clone()
}

async fn delete(s: &TestServer, token: &str, id: &Value) {
    let d = s
        .gql_ok(
            token,
            "mutation($id: ID!) { deleteDocument(id: $id) }",
            json!({ "id": id.to_string() }),
        )
        .await;
    assert_eq!(d["deleteDocument"], true, "{d}");
}

/// (content hash, storage uri, whether the file is there) of every blob row.
async fn blobs(s: &TestServer) -> Vec<(String, String, bool)> {
    s.cairn()
        .store
        .blob_rows()
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .map(|b| {
            let there = s.cairn().blobs.exists(&b.storage_uri);
            (b.content_hash, b.storage_uri, there)
        })
        .collect()
}

async fn blobs_are_shared_only_between_teams_that_do_not_isolate(backend: Backend) {
    require_model();
    let s = TestServer::start(backend).await;
    let (_, _, beta) = s.other_team("beta").await;
    let (_, _, gamma) = s.other_team("gamma").await;
    let (_, member) = s.user_with_token("mo", "MEMBER").await;
    let alpha = s.owner_token.clone();

    // Only admins switch isolation; the switch is the caller's team's alone.
    let body = s
        .gql(
            &member,
            "mutation { setContentIsolation(enabled: true) { isolateContent } }",
            json!({}),
        )
        .await;
    assert_eq!(error_code(&body), Some("FORBIDDEN"), "{body}");
    let d = s
        .gql_ok(
            &gamma,
            "mutation { setContentIsolation(enabled: true) { name isolateContent } }",
            json!({}),
        )
        .await;
    assert_eq!(
        d["setContentIsolation"],
        json!({ "name": "gamma", "isolateContent": true })
    );
    for token in [&alpha, &beta] {
        let d = s
            .gql_ok(token, "{ me { team { isolateContent } } }", json!({}))
            .await;
        assert_eq!(d["me"]["team"]["isolateContent"], false, "{d}");
    }

    let ca = s.create_corpus(&alpha, "audits").await;
    let cb = s.create_corpus(&beta, "audits").await;
    let cg = s.create_corpus(&gamma, "audits").await;
    let a = upload(&s, &alpha, &ca, "audit.md", BYTES).await;
    let b = upload(&s, &beta, &cb, "audit.md", BYTES).await;
    let g = upload(&s, &gamma, &cg, "audit.md", BYTES).await;
    for r in [&a, &b, &g] {
        assert_eq!(r["duplicate"], false, "each team has its own document: {r}");
    }
    // Two ordinary teams: one blob. The isolated team: a blob of its own.
    let rows = blobs(&s).await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(rows.iter().all(|(_, _, there)| *there), "{rows:?}");
    // Within the isolated team, the same bytes are still the same document.
    let again = upload(&s, &gamma, &cg, "audit-copy.md", BYTES).await;
    assert_eq!(again["duplicate"], true, "{again}");
    assert_eq!(again["documentId"], g["documentId"]);

    // Which row is whose: alpha's and beta's documents name the same hash, gamma's another.
    let hash_of = |token: &str, doc: &Value| {
        let q = "query($id: ID!) { document(id: $id) { versions { contentHash } } }";
        let vars = json!({ "id": doc["documentId"].to_string() });
        let token = token.to_owned();
        let s = &s;
        async move {
            let d = s.gql_ok(&token, q, vars).await;
            d["document"]["versions"][0]["contentHash"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        }
    };
    let (ha, hb, hg) = (
        hash_of(&alpha, &a).await,
        hash_of(&beta, &b).await,
        hash_of(&gamma, &g).await,
    );
    assert_eq!(ha, hb, "two ordinary teams share the blob");
    assert_ne!(ha, hg, "the isolated team's hash is its own");
    // An ordinary team's hash is the plain SHA-256 of the bytes, as any tool computes it.
    assert_eq!(ha, sha256_hex(BYTES.as_bytes()));
    let uri = |h: &str| {
        rows.iter()
            .find(|(hash, _, _)| hash == h)
            .map(|(_, u, _)| u.clone())
            .unwrap_or_else(|| panic!("no row for {h}: {rows:?}"))
    };
    let (shared_uri, gamma_uri) = (uri(&ha), uri(&hg));
    assert_ne!(shared_uri, gamma_uri);

    // Deleting alpha's document leaves beta's file (beta's version still counts).
    delete(&s, &alpha, &a["documentId"]).await;
    assert!(
        s.cairn().blobs.exists(&shared_uri),
        "beta's file was removed"
    );
    let d = s
        .gql_ok(
            &beta,
            "query($id: ID!) { document(id: $id) { chunkCount } }",
            json!({ "id": b["documentId"].to_string() }),
        )
        .await;
    assert_eq!(d["document"]["chunkCount"], 1, "{d}");
    // The last reference gone, the row and the file go; gamma's stay.
    delete(&s, &beta, &b["documentId"]).await;
    assert!(!s.cairn().blobs.exists(&shared_uri));
    let rows = blobs(&s).await;
    assert_eq!(
        rows.iter()
            .map(|(h, _, t)| (h.clone(), *t))
            .collect::<Vec<_>>(),
        vec![(hg.clone(), true)]
    );

    // Heal-on-write: a row whose file is gone (written under an older layout) is pointed at
    // the file of the next upload of the same bytes, a duplicate included.
    let o = upload(&s, &alpha, &ca, "berth9.md", OTHER).await;
    let h9 = hash_of(&alpha, &o).await;
    s.cairn()
        .store
        .set_blob_uri(&h9, "blobs/legacy/gone")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let dup = upload(&s, &alpha, &ca, "berth9-again.md", OTHER).await;
    assert_eq!(dup["duplicate"], true, "{dup}");
    let rows = blobs(&s).await;
    let healed = rows
        .iter()
        .find(|(h, _, _)| *h == h9)
        .cloned()
        .unwrap_or_else(|| panic!("{rows:?}"));
    assert_ne!(
        healed.1, "blobs/legacy/gone",
        "the row was not healed: {rows:?}"
    );
    assert!(healed.2, "the healed row's file is there: {rows:?}");
    s.stop().await;
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}
