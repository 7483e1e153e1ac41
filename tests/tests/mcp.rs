//! The MCP server on `/mcp` through a real client: the official Python SDK (`mcp`, installed
//! into the peer venv by scripts/peer-python.sh) over Streamable HTTP, driven by
//! tests/mcp_client.py with `$CAIRN_PEER_PYTHON`. The tools' texts are asserted line by line
//! against the seed's contracts; a second user never reads a private document's text; a
//! revoked token fails on the session's next call.

use std::process::Stdio;
use std::time::Duration;

use cairn_llm::stub::{StubReply, StubServer};
use cairn_tests::{both_backends, repo_root, require_model, Backend, TestServer};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

both_backends!(
    tools_keep_their_text_contracts,
    private_text_and_revocation,
    synthesis_is_anonymized_and_sources_are_whole,
    suggested_context_tool,
    processing_tools,
);

const NEWS: &str = "Team news.\n\nAcme Robotics is based in Berlin. The Acme Robotics team ships warehouse robots.";
/// Alice's private memo; its canary word must never reach Bob.
const MEMO: &str = "Board memo.\n\nAcme Robotics acquired Zorblat Quantix in March. The codeword for the deal is zorblatquux.";
const CANARY: &str = "zorblat";

/// A Markdown document of three sections, well over one 25,000-character page.
fn long_document() -> String {
    let mut text = String::from("# Harbour operations manual\n\n");
    for part in 1..=3 {
        text.push_str(&format!("## Part {part}\n\n"));
        for i in 0..60 {
            text.push_str(&format!(
                "Paragraph {i} of part {part}: the crane crew inspects hoist cable {i} and logs \
                 the brake test of berth {part} before the tide turns; every entry is signed.\n\n"
            ));
        }
    }
    text
}

/// What the client saw: `tools` (names, schemas), `calls` (text / is_error / error).
struct Client {
    out: Value,
}

impl Client {
    fn call(&self, i: usize) -> &Value {
        &self.out["calls"][i]
    }

    /// The text of call `i`, which must have succeeded as a tool call.
    fn text(&self, i: usize) -> String {
        let c = self.call(i);
        assert!(c.get("error").is_none(), "call {i} failed: {c}");
        c["text"].as_str().unwrap_or_default().to_owned()
    }

    fn tool_names(&self) -> Vec<String> {
        self.out["tools"]
            .as_array()
            .map(|t| {
                t.iter()
                    .filter_map(|x| x["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Runs tests/mcp_client.py with `steps`; at each `{"pause": label}` step, awaits
/// `on_pause(label)` before letting the client go on.
async fn mcp_client<F, Fut>(s: &TestServer, token: &str, steps: Value, mut on_pause: F) -> Client
where
    F: FnMut(String) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let python = match std::env::var("CAIRN_PEER_PYTHON") {
        Ok(p) if !p.is_empty() => p,
        _ => panic!(
            "CAIRN_PEER_PYTHON is not set: the MCP tests need the Python MCP SDK \
             (scripts/peer-python.sh installs it; scripts/test.sh sets the variable)"
        ),
    };
    let may_end = steps
        .as_array()
        .is_some_and(|s| s.iter().any(|x| x.get("pause").is_some()));
    let script = repo_root().join("tests/mcp_client.py");
    let mut child = tokio::process::Command::new(&python)
        .arg(&script)
        .arg(format!("{}/mcp", s.url))
        .arg(token)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("{python} {}: {e}", script.display()));
    let mut stdin = child.stdin.take().unwrap_or_else(|| panic!("no stdin"));
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    stdin
        .write_all(format!("{steps}\n").as_bytes())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut lines = BufReader::new(stdout).lines();
    let run = async {
        loop {
            let line = lines
                .next_line()
                .await
                .unwrap_or_else(|e| panic!("{e}"))
                .unwrap_or_else(|| panic!("the MCP client ended without a result"));
            if let Some(label) = line.strip_prefix("PAUSE ") {
                on_pause(label.to_owned()).await;
                stdin
                    .write_all(b"go\n")
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
            } else if let Some(json) = line.strip_prefix("RESULT ") {
                return serde_json::from_str::<Value>(json)
                    .unwrap_or_else(|e| panic!("bad result {json}: {e}"));
            }
        }
    };
    let out = tokio::time::timeout(Duration::from_secs(300), run)
        .await
        .unwrap_or_else(|_| panic!("the MCP client did not finish in 300 s"));
    // A run with a pause revokes the token there: the server then ends the session, and the
    // client may see that as its session dying (its event stream refused) instead of as
    // refused calls one by one. Elsewhere the client must finish cleanly.
    if !may_end {
        assert!(out.get("fatal").is_none(), "the MCP client failed: {out}");
    }
    let _ = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
    Client { out }
}

/// Saves what the client saw to `$CAIRN_REPORT_DIR/mcp/NAME.json` (test.sh keeps reports as
/// artifacts; the README's examples come from there).
fn keep_report(name: &str, out: &Value) {
    let Some(dir) = std::env::var_os("CAIRN_REPORT_DIR") else {
        return;
    };
    let dir = std::path::PathBuf::from(dir).join("mcp");
    let _ = std::fs::create_dir_all(&dir);
    let text = serde_json::to_string_pretty(out).unwrap_or_default();
    let _ = std::fs::write(dir.join(format!("{name}.json")), text);
}

/// A JSON-RPC ping on MCP session `session` with `token`: the status.
async fn mcp_ping(s: &TestServer, token: &str, session: &str) -> u16 {
    reqwest::Client::new()
        .post(format!("{}/mcp", s.url))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-11-25")
        .json(&json!({ "jsonrpc": "2.0", "id": 99, "method": "ping" }))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .status()
        .as_u16()
}

async fn no_pause(label: String) {
    panic!("unexpected pause {label}");
}

/// `[Source N (document_id=D), relevance: P%, vec#V/lex#L]` → (N, D, P, V, L).
fn source_line(line: &str) -> Option<(usize, String, u32, String, String)> {
    let rest = line.strip_prefix("[Source ")?.strip_suffix(']')?;
    let (n, rest) = rest.split_once(" (document_id=")?;
    let (doc, rest) = rest.split_once("), relevance: ")?;
    let (pct, rest) = rest.split_once("%, vec#")?;
    let (v, l) = rest.split_once("/lex#")?;
    let rank_ok = |r: &str| r == "-" || r.parse::<u32>().is_ok();
    if !(rank_ok(v) && rank_ok(l) && doc.chars().all(|c| c.is_ascii_digit())) {
        return None;
    }
    Some((
        n.parse().ok()?,
        doc.to_owned(),
        pct.parse().ok()?,
        v.to_owned(),
        l.to_owned(),
    ))
}

async fn tools_keep_their_text_contracts(backend: Backend) {
    require_model();
    let s = TestServer::start(backend).await;
    let owner = s.owner_token.clone();
    let corpus = s.create_corpus(&owner, "handbook").await;
    let archive = s.create_corpus(&owner, "archive").await;
    let long = s
        .ingest_text(&owner, &corpus, "Manual", &long_document(), "TEAM")
        .await;
    let news = s.ingest_text(&owner, &corpus, "News", NEWS, "TEAM").await;
    s.extract_all(&owner).await;

    let steps = json!([
        { "list_tools": true },
        { "tool": "search_documents", "args": { "query": "Where is Acme Robotics based?" } },
        { "tool": "get_document_text", "args": { "document_id": long.parse::<i64>().unwrap_or_default() } },
        { "tool": "get_document_text", "args": { "document_id": long.parse::<i64>().unwrap_or_default(), "page": 2 } },
        { "tool": "get_document_text", "args": { "document_id": long.parse::<i64>().unwrap_or_default(), "page": 9 } },
        { "tool": "get_document_text", "args": { "document_id": news.parse::<i64>().unwrap_or_default() } },
        { "tool": "get_document_text", "args": { "document_id": 987654321 } },
        { "tool": "kg_query", "args": { "name": "Acme Robotics", "hops": 1 } },
        { "tool": "kg_query", "args": { "name": "Nobody Anywhere" } },
        { "tool": "knowledge_summary", "args": {} },
        { "tool": "create_corpus", "args": { "name": "fresh", "description": "made by an agent" } },
        { "tool": "move_documents", "args": { "to_corpus_id": archive.parse::<i64>().unwrap_or_default() } },
        { "tool": "move_documents", "args": { "to_corpus_id": archive.parse::<i64>().unwrap_or_default(), "document_ids": [news.parse::<i64>().unwrap_or_default()] } },
        { "tool": "search_documents", "args": { "query": "crane", "corpus_ids": [987654321] } },
        { "tool": "search_documents", "args": { "query": "hoist cable brake test of berth", "top_k": 3 } },
    ]);
    let c = mcp_client(&s, &owner, steps, no_pause).await;
    keep_report(&format!("tools-{backend:?}"), &c.out);

    // The tools, with typed input schemas.
    let names = c.tool_names();
    for t in [
        "search_documents",
        "get_document_text",
        "kg_query",
        "knowledge_summary",
        "create_corpus",
        "move_documents",
        "suggested_context",
    ] {
        assert!(names.contains(&t.to_owned()), "{t} missing from {names:?}");
    }
    assert_eq!(c.out["server"], "cairn", "{}", c.out);

    // search_documents: the relevance line first, then every excerpt in full.
    let text = c.text(0);
    assert_eq!(c.call(0)["is_error"], false);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("**Search relevance: ")
            && ["HIGH**", "MODERATE**", "LOW**", "LEXICAL MATCH**"]
                .iter()
                .any(|r| lines[0].contains(r)),
        "{text}"
    );
    if lines[0].contains("LOW**") {
        assert!(lines[0].contains("do not re-search"), "{text}");
    }
    // No chat model is configured: no synthesis.
    assert!(!text.contains("## Synthesis"), "{text}");
    let sources: Vec<(usize, usize)> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with("[Source "))
        .map(|(i, l)| {
            let parsed = source_line(l).unwrap_or_else(|| panic!("bad source line {l:?}"));
            (i, parsed.0)
        })
        .collect();
    assert!(!sources.is_empty() && sources.len() <= 10, "{text}");
    for (k, (_, n)) in sources.iter().enumerate() {
        assert_eq!(*n, k + 1, "sources are numbered in order: {text}");
    }
    // The news document is one chunk: its excerpt is the whole body, untruncated.
    let news_at = lines
        .iter()
        .position(|l| l.starts_with(&format!("[Source 1 (document_id={news})")))
        .unwrap_or_else(|| panic!("the news document is not the first source: {text}"));
    let block: String = lines[news_at + 1..]
        .iter()
        .take_while(|l| !l.starts_with("[Source "))
        .copied()
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        block.starts_with("From \"News\"")
            && block.contains(NEWS.trim_start_matches("Team news.\n\n")),
        "{block}"
    );
    let (_, _, pct, v, _) = source_line(lines[news_at]).unwrap_or_default();
    assert!(pct > 0 && pct <= 100 && v != "-", "{}", lines[news_at]);

    // get_document_text on a two-page document: header, page, calls to move on.
    let p1 = c.text(1);
    let l1: Vec<&str> = p1.lines().collect();
    assert_eq!(
        l1[0],
        format!("# Manual (document_id={long}, version 1), page 1 of 2"),
        "{}",
        &p1[..200.min(p1.len())]
    );
    assert!(p1.chars().count() <= 25_000 + 400, "{}", p1.chars().count());
    assert!(l1.contains(&"Page 1 of 2."), "{}", tail(&p1));
    assert!(
        l1.contains(&format!("Next page: get_document_text(document_id={long}, page=2)").as_str()),
        "{}",
        tail(&p1)
    );
    assert!(!p1.contains("Previous page:"), "{}", tail(&p1));
    // The page ends at a paragraph's end, not mid-word.
    let footer = l1.iter().rposition(|l| *l == "---").unwrap_or_default();
    let last_text = l1[..footer].iter().rev().find(|l| !l.is_empty());
    assert!(
        last_text.is_some_and(|l| l.ends_with("every entry is signed.")),
        "{last_text:?}"
    );
    assert!(
        l1.last().is_some_and(|l| l
            .starts_with("To find a passage without reading every page: search_documents(query=")
            && l.ends_with(&format!("corpus_ids=[{corpus}])"))),
        "{}",
        tail(&p1)
    );
    let p2 = c.text(2);
    let l2: Vec<&str> = p2.lines().collect();
    assert_eq!(
        l2[0],
        format!("# Manual (document_id={long}, version 1), page 2 of 2")
    );
    assert!(
        l2[2].starts_with("## ") && l2[2].ends_with(" (continued)"),
        "page 2 opens inside a section: {:?}",
        &l2[..4.min(l2.len())]
    );
    assert!(
        l2.contains(
            &format!("Previous page: get_document_text(document_id={long}, page=1)").as_str()
        ),
        "{}",
        tail(&p2)
    );
    assert!(!p2.contains("Next page:"), "{}", tail(&p2));
    // Both pages together hold every paragraph.
    for part in 1..=3 {
        for i in [0, 59] {
            let needle = format!("Paragraph {i} of part {part}:");
            assert!(
                p1.contains(&needle) || p2.contains(&needle),
                "{needle} on neither page"
            );
        }
    }
    // A page past the end: a tool result saying what to do.
    assert_eq!(c.call(3)["is_error"], true, "{}", c.call(3));
    let t = c.text(3);
    assert!(
        t.contains("page must be between 1 and 2")
            && t.contains(&format!("get_document_text(document_id={long}, page=1)")),
        "{t}"
    );
    // A single-page document: no pagination text.
    let one = c.text(4);
    let lo: Vec<&str> = one.lines().collect();
    assert_eq!(lo[0], format!("# News (document_id={news}, version 1)"));
    assert!(one.contains("Acme Robotics is based in Berlin."), "{one}");
    for absent in ["Page ", "page=", "get_document_text(", "search_documents("] {
        assert!(!one.contains(absent), "{absent:?} in {one}");
    }
    // An unknown document.
    assert_eq!(c.call(5)["is_error"], true);
    assert!(
        c.text(5)
            .starts_with("No document with document_id=987654321 is visible to you."),
        "{}",
        c.text(5)
    );

    // kg_query: one fact per line, each cited with document, version and sentence.
    let facts = c.text(6);
    assert!(!facts.trim().is_empty());
    for line in facts.lines() {
        assert!(line.ends_with("\"]"), "uncited line {line:?}");
        assert!(line.contains(&format!("[doc {news} v1: \"")), "{line:?}");
    }
    assert!(
        facts.lines().any(|l| l.starts_with("Acme Robotics (")),
        "{facts}"
    );
    assert_eq!(c.call(7)["is_error"], true, "{}", c.call(7));
    assert!(c.text(7).contains("search_documents"), "{}", c.text(7));

    // knowledge_summary: the [KNOWLEDGE] line.
    let k = c.text(8);
    assert_eq!(k.lines().count(), 1, "{k}");
    assert!(
        k.starts_with("[KNOWLEDGE] Knowledge: 2 documents across "),
        "{k}"
    );
    assert!(k.contains(&format!("handbook (corpus_id={corpus})")), "{k}");
    assert!(
        k.trim_end()
            .ends_with("Use `search_documents` to find content."),
        "{k}"
    );

    // create_corpus and move_documents.
    let created = c.text(9);
    assert!(
        created.starts_with("Created corpus \"fresh\" (corpus_id="),
        "{created}"
    );
    let listed = c.text(10);
    assert!(
        listed.starts_with("Give document_ids (or move_all=true"),
        "{listed}"
    );
    assert!(
        listed.contains(&format!("Corpus \"handbook\" (corpus_id={corpus}):")),
        "{listed}"
    );
    assert!(
        listed.contains(&format!("- document_id={news}: News")),
        "{listed}"
    );
    assert!(
        listed.contains(&format!("- document_id={long}: Manual")),
        "{listed}"
    );
    assert_eq!(
        c.text(11),
        format!("Moved 1 document into corpus_id={archive}.\n")
    );
    let d = s
        .gql_ok(
            &owner,
            "query($id: ID!) { document(id: $id) { corpus { id } } }",
            json!({ "id": news }),
        )
        .await;
    assert_eq!(d["document"]["corpus"]["id"], json!(archive), "{d}");
    // An unknown corpus in search: a tool result, not an MCP error.
    assert_eq!(c.call(12)["is_error"], true, "{}", c.call(12));
    assert!(c.text(12).contains("knowledge_summary"), "{}", c.text(12));
    // top_k bounds the excerpts; the long document's excerpts come back whole.
    let t = c.text(13);
    let n = t.lines().filter(|l| l.starts_with("[Source ")).count();
    assert!((1..=3).contains(&n), "{t}");

    // No token, or a wrong one: 401 before any tool.
    let http = reqwest::Client::new();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    for auth in [None, Some("Bearer cairn_not_a_real_token")] {
        let mut req = http
            .post(format!("{}/mcp", s.url))
            .header("accept", "application/json, text/event-stream")
            .json(&init);
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        let resp = req.send().await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(resp.status().as_u16(), 401, "{auth:?}");
        let body: Value = resp.json().await.unwrap_or_default();
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("UNAUTHENTICATED")),
            "{body}"
        );
    }

    // A client that keeps its event stream open does not hold up the server's stop.
    let stream = open_event_stream(&s, &owner).await;
    tokio::time::timeout(Duration::from_secs(20), s.stop())
        .await
        .unwrap_or_else(|_| panic!("the server did not stop with an MCP stream open"));
    drop(stream);
}

/// An MCP session opened by hand (initialize, initialized) and its GET event stream, open.
async fn open_event_stream(s: &TestServer, token: &str) -> reqwest::Response {
    let http = reqwest::Client::new();
    let post = |body: Value, session: Option<&str>| {
        let mut req = http
            .post(format!("{}/mcp", s.url))
            .bearer_auth(token)
            .header("accept", "application/json, text/event-stream")
            .json(&body);
        if let Some(id) = session {
            req = req
                .header("mcp-session-id", id)
                .header("mcp-protocol-version", "2025-11-25");
        }
        req.send()
    };
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let resp = post(init, None).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(resp.status().as_u16(), 200);
    let session = resp
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_else(|| panic!("no mcp-session-id"))
        .to_owned();
    let _ = tokio::time::timeout(Duration::from_secs(10), resp.text()).await;
    let done = post(
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        Some(&session),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(done.status().is_success(), "{}", done.status());
    let stream = http
        .get(format!("{}/mcp", s.url))
        .bearer_auth(token)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(stream.status().as_u16(), 200, "the GET stream did not open");
    stream
}

fn tail(s: &str) -> &str {
    let start = s.char_indices().rev().nth(600).map(|(i, _)| i).unwrap_or(0);
    &s[start..]
}

async fn private_text_and_revocation(backend: Backend) {
    require_model();
    let s = TestServer::start(backend).await;
    let (_, alice) = s.user_with_token("alice", "MEMBER").await;
    // Bob's first token stays valid: it probes his session after the other one is revoked.
    let (bob_id, bob_other) = s.user_with_token("bob", "MEMBER").await;
    // Bob's MCP token, whose id the test revokes mid-session.
    let d = s
        .gql_ok(
            &s.owner_token,
            "mutation($u: ID!) { createToken(userId: $u, label: \"mcp\") { token apiToken { id } } }",
            json!({ "u": bob_id.to_string() }),
        )
        .await;
    let bob = d["createToken"]["token"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let bob_token_id = d["createToken"]["apiToken"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let corpus = s.create_corpus(&s.owner_token, "kg").await;
    let memo = s
        .ingest_text(&alice, &corpus, "Memo", MEMO, "PRIVATE")
        .await;
    let news = s
        .ingest_text(&s.owner_token, &corpus, "News", NEWS, "TEAM")
        .await;
    s.extract_all(&alice).await;
    let memo_id = memo.parse::<i64>().unwrap_or_default();

    // Alice reads her memo (the control).
    let a = mcp_client(
        &s,
        &alice,
        json!([
            { "tool": "search_documents", "args": { "query": "Zorblat Quantix codeword" } },
            { "tool": "get_document_text", "args": { "document_id": memo_id } },
            { "tool": "kg_query", "args": { "name": "Acme Robotics", "hops": 2 } },
        ]),
        no_pause,
    )
    .await;
    for i in 0..3 {
        assert!(
            a.text(i).to_lowercase().contains(CANARY),
            "alice's call {i} lacks her own memo: {}",
            a.text(i)
        );
    }

    // A viewer reads but may not create: a tool result that says so, not an MCP error.
    let (_, viewer) = s.user_with_token("vic", "VIEWER").await;
    let v = mcp_client(
        &s,
        &viewer,
        json!([
            { "tool": "create_corpus", "args": { "name": "mine" } },
            { "tool": "kg_query", "args": { "name": "Acme Robotics", "hops": 3 } },
        ]),
        no_pause,
    )
    .await;
    assert_eq!(v.call(0)["is_error"], true, "{}", v.call(0));
    assert!(v.text(0).starts_with("Not allowed: "), "{}", v.text(0));
    assert_eq!(v.call(1)["is_error"], true, "{}", v.call(1));
    assert!(
        v.text(1)
            .starts_with("Invalid input: hops must be between 0 and 2."),
        "{}",
        v.text(1)
    );

    // Bob: every tool, then his token is revoked, then the same session calls again.
    let server = &s;
    let revoke = |label: String| {
        let id = bob_token_id.clone();
        let bob_other = bob_other.clone();
        async move {
            let (label, session) = label.split_once(' ').unwrap_or((&label, "-"));
            assert_eq!(label, "revoke");
            assert!(session != "-", "the client saw no MCP session id");
            let session = session.to_owned();
            // The session is Bob's: another user's valid token finds no such session.
            assert_eq!(mcp_ping(server, &server.owner_token, &session).await, 404);
            // Before: the session answers.
            assert_eq!(mcp_ping(server, &bob_other, &session).await, 200);
            let d = server
                .gql_ok(
                    &server.owner_token,
                    "mutation($id: ID!) { revokeToken(id: $id) }",
                    json!({ "id": id }),
                )
                .await;
            assert_eq!(d["revokeToken"], true, "{d}");
            // The revocation ends the session at once (the bus), not only at its next call:
            // the session is gone even for Bob's other, valid token.
            let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
            loop {
                let status = mcp_ping(server, &bob_other, &session).await;
                if status == 404 {
                    break;
                }
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the session outlived its token's revocation ({status})"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    let b = mcp_client(
        &s,
        &bob,
        json!([
            { "tool": "search_documents", "args": { "query": "Zorblat Quantix codeword" } },
            { "tool": "search_documents", "args": { "query": "What did Acme Robotics acquire in March?" } },
            { "tool": "get_document_text", "args": { "document_id": memo_id } },
            { "tool": "kg_query", "args": { "name": "Acme Robotics", "hops": 2 } },
            { "tool": "kg_query", "args": { "name": "Zorblat Quantix" } },
            { "tool": "knowledge_summary", "args": {} },
            { "tool": "move_documents", "args": { "to_corpus_id": corpus.parse::<i64>().unwrap_or_default() } },
            { "pause": "revoke" },
            { "tool": "search_documents", "args": { "query": "Acme Robotics" } },
            { "tool": "get_document_text", "args": { "document_id": news.parse::<i64>().unwrap_or_default() } },
        ]),
        revoke,
    )
    .await;
    // Everything the server said to Bob (his own queries name the canary; its answers never).
    for (i, c) in b.out["calls"].as_array().into_iter().flatten().enumerate() {
        let said = format!("{} {}", c["text"], c["error"]).to_lowercase();
        assert!(
            !said.contains(CANARY),
            "bob's call {i} shows the private memo: {c}"
        );
    }
    // What Bob can read, he reads.
    assert!(
        b.text(1).contains("Acme Robotics is based in Berlin."),
        "{}",
        b.text(1)
    );
    assert_eq!(b.call(2)["is_error"], true);
    assert!(
        b.text(2).starts_with(&format!(
            "No document with document_id={memo} is visible to you."
        )),
        "{}",
        b.text(2)
    );
    assert!(
        b.text(3)
            .lines()
            .all(|l| !l.contains(&format!("[doc {memo} "))),
        "{}",
        b.text(3)
    );
    assert_eq!(b.call(4)["is_error"], true, "{}", b.call(4));
    assert_eq!(
        b.text(5),
        format!("[KNOWLEDGE] Knowledge: 1 document across 1 corpus: kg (corpus_id={corpus}). Use `search_documents` to find content.\n")
    );
    assert!(
        !b.text(6).contains(&format!("document_id={memo}")),
        "{}",
        b.text(6)
    );
    // After the revocation: every call refused (no text), or the session ended under the
    // client (it reports the failure instead of the remaining calls).
    let calls = b.out["calls"].as_array().cloned().unwrap_or_default();
    assert!(
        calls.len() == 9 || b.out.get("fatal").is_some(),
        "calls after the revocation neither failed nor ended the session: {}",
        b.out
    );
    for (i, c) in calls.iter().enumerate().skip(7) {
        assert!(
            c.get("text").is_none(),
            "call {i} after revocation answered: {c}"
        );
        let err = c["error"].as_str().unwrap_or_default();
        assert!(
            err.contains("UNAUTHENTICATED"),
            "call {i} did not fail so: {c}"
        );
    }
    s.stop().await;
}

const ROTA: &str = "# Station rota\n\nThe glacier station rota for March lists the night shift supervisor as the person who holds the keys to the snowcat shed.\n\n## Contacts\n\nFor the shed keys, write to jonas.whitfield@example.org or call +44 20 7946 0958 during the day.";

/// With a `chat` model: the synthesis follows the relevance line, written from an anonymized
/// question (the model never sees the name or the address) and de-anonymized; the excerpts
/// after it are the stored text, whole and not anonymized.
async fn synthesis_is_anonymized_and_sources_are_whole(backend: Backend) {
    require_model();
    let stub = StubServer::start(vec![StubReply::from_fn(|req: &Value| {
        let text = req.to_string();
        let found: Vec<&str> = ["[NAME_1]", "[EMAIL_1]"]
            .into_iter()
            .filter(|t| text.contains(t))
            .collect();
        format!(
            "{} holds the snowcat shed keys on the March night shift [1]; write to {} [2].",
            found.first().copied().unwrap_or_default(),
            found.get(1).copied().unwrap_or_default()
        )
    })])
    .await;
    let base = stub.base_url();
    let s = TestServer::start_tuned(backend, |c| {
        c.llm_url = Some(base);
        c.llm_model = "stub-model".into();
        c.pii_names = vec!["Jonas Whitfield".into()];
    })
    .await;
    let corpus = s.create_corpus(&s.owner_token, "station").await;
    let doc = s
        .ingest_text(&s.owner_token, &corpus, "Rota", ROTA, "TEAM")
        .await;
    let question =
        "Does Jonas Whitfield (jonas.whitfield@example.org) hold the snowcat shed keys in March?";
    let c = mcp_client(
        &s,
        &s.owner_token,
        json!([{ "tool": "search_documents", "args": { "query": question } }]),
        no_pause,
    )
    .await;
    let text = c.text(0);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("**Search relevance: "), "{text}");
    let synthesis = lines
        .iter()
        .position(|l| *l == "## Synthesis")
        .unwrap_or_else(|| panic!("no synthesis: {text}"));
    let sources = lines
        .iter()
        .position(|l| *l == "## Sources")
        .unwrap_or_else(|| panic!("no sources: {text}"));
    assert!(synthesis < sources, "{text}");
    let answer = lines[synthesis + 1..sources].join("\n");
    assert!(
        answer.contains("Jonas Whitfield holds the snowcat shed keys")
            && answer.contains("jonas.whitfield@example.org"),
        "{answer}"
    );
    let sent = stub
        .requests()
        .iter()
        .map(Value::to_string)
        .collect::<String>();
    assert!(!sent.is_empty());
    for original in ["Jonas Whitfield", "jonas.whitfield@example.org"] {
        assert!(
            !sent.contains(original),
            "{original:?} reached the LLM: {sent}"
        );
    }
    // The excerpts: the stored text itself, contact details included.
    let rest = lines[sources + 1..].join("\n");
    assert!(
        rest.contains(&format!("(document_id={doc}), relevance: ")),
        "{rest}"
    );
    assert!(
        rest.contains(
            "write to jonas.whitfield@example.org or call +44 20 7946 0958 during the day."
        ),
        "{rest}"
    );
    s.stop().await;
}

/// `suggested_context`: a sentence without system corpora; the service's block once the
/// operator has filled `operational_patterns`.
async fn suggested_context_tool(backend: Backend) {
    require_model();
    let s = TestServer::start(backend).await;
    let message = "schedule turbine maintenance for the wind farm";
    let step = json!([{ "tool": "suggested_context", "args": { "message": message } }]);
    let c = mcp_client(&s, &s.owner_token, step.clone(), no_pause).await;
    assert_eq!(c.text(0), "No suggested context for this message.\n");

    let store = &s.cairn().store;
    let p = s.owner_principal().await;
    let corpus = store
        .create_corpus(None, "operational_patterns", None)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let job = s
        .cairn()
        .operator_upload(
            &p,
            cairn::service::UploadRequest {
                corpus_id: corpus.id,
                filename: "pattern.md".into(),
                visibility: None,
                document_id: None,
                title: None,
                source_url: None,
            },
            std::io::Cursor::new(
                b"Turbine maintenance: list the open work orders of the wind farm first.".to_vec(),
            ),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let events = s.follow_job(&s.owner_token, &job.id.to_string()).await;
    assert_eq!(
        events.last().map(|e| e["stage"].clone()),
        Some(json!("searchable"))
    );
    let c = mcp_client(&s, &s.owner_token, step, no_pause).await;
    let block = c.text(0);
    assert_eq!(c.call(0)["is_error"], false);
    assert!(block.starts_with("[SUGGESTED CONTEXT]\n"), "{block}");
    assert!(
        block.trim_end().ends_with("[/SUGGESTED CONTEXT]"),
        "{block}"
    );
    assert!(block.contains("list the open work orders"), "{block}");
    s.stop().await;
}

const STOCK: &str = "# Depot stock\n\nCounted on Monday.\n\n| Depot | Crates | Inspected |\n| --- | --- | --- |\n| Leeds | 1,200 | yes |\n| York | 40 | no |";

/// `classify_document`, `extract_document`, `process_document` without a model (zero-shot,
/// tables): their text cards; a schema without a model is an MCP error naming UNAVAILABLE;
/// another user's private document is "not found", never its text.
async fn processing_tools(backend: Backend) {
    require_model();
    let s = TestServer::start(backend).await;
    let owner = s.owner_token.clone();
    let corpus = s.create_corpus(&owner, "depots").await;
    let stock: i64 = s
        .ingest_text(&owner, &corpus, "Stock", STOCK, "TEAM")
        .await
        .parse()
        .unwrap_or_default();
    let (_, member) = s.user_with_token("mia", "MEMBER").await;
    let memo: i64 = s
        .ingest_text(
            &member,
            &corpus,
            "memo",
            &format!("Private memo. {CANARY} crates."),
            "PRIVATE",
        )
        .await
        .parse()
        .unwrap_or_default();
    let steps = json!([
        { "list_tools": true },
        { "tool": "classify_document", "args": { "document_id": stock } },
        { "tool": "extract_document", "args": { "document_id": stock } },
        { "tool": "extract_document", "args": { "document_id": stock, "schema": { "properties": { "depot": { "type": "string" } } } } },
        { "tool": "process_document", "args": { "document_id": stock } },
        { "tool": "classify_document", "args": { "document_id": memo } },
        { "tool": "extract_document", "args": { "document_id": memo } },
        { "tool": "process_document", "args": { "document_id": memo } },
    ]);
    let c = mcp_client(&s, &owner, steps, no_pause).await;
    keep_report(&format!("processing-{backend:?}"), &c.out);
    let names = c.tool_names();
    for t in ["classify_document", "extract_document", "process_document"] {
        assert!(names.contains(&t.to_owned()), "{t} missing from {names:?}");
    }
    let text = c.text(0);
    assert!(
        text.starts_with(&format!(
            "[CLASSIFICATION] document_id={stock} version=1\ntype: "
        )),
        "{text}"
    );
    assert!(text.contains("zero-shot, embedder"), "{text}");
    let text = c.text(1);
    assert!(
        text.starts_with(&format!("[EXTRACTION] document_id={stock} mode=tables\n")),
        "{text}"
    );
    assert!(text.contains("## Depot stock: 2 rows\ncolumns: Depot (string), Crates (integer), Inspected (boolean)"), "{text}");
    assert!(
        text.contains(r#"{"Crates":1200,"Depot":"Leeds","Inspected":true}"#),
        "{text}"
    );
    assert!(text.contains("schema (measured): "), "{text}");
    let err = c.call(2)["error"].as_str().unwrap_or_default().to_owned();
    assert!(err.contains("UNAVAILABLE"), "{}", c.call(2));
    let text = c.text(3);
    assert!(
        text.starts_with(&format!("[PROCESSING] document_id={stock} job=")),
        "{text}"
    );
    assert!(
        text.contains("state=succeeded") && text.contains("\"mode\":\"tables\""),
        "{text}"
    );
    for i in 4..=6 {
        assert_eq!(c.call(i)["is_error"], true, "{}", c.call(i));
        let t = c.call(i).to_string();
        assert!(
            t.contains("is visible to you") && !t.contains(CANARY),
            "{t}"
        );
    }
    s.stop().await;
}
