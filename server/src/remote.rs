//! `cairn ingest --server URL`: the same bulk load through a running server's API, as any
//! client would do it (the token's user uploads into the token's team): the corpus is found
//! by name (or created), each file goes up as a GraphQL multipart upload, and each job is
//! followed by polling `job(id)` (durable state; its result is delivered by the first read
//! after success). Same progress bars, summary and exit status as the local path.

use std::collections::HashMap;
use std::path::PathBuf;

use indicatif::{MultiProgress, ProgressBar};
use serde_json::{json, Value};

use cairn::IngestResult;

use crate::bulk::{bar_style, collect, Summary, POLL};

struct Api {
    http: reqwest::Client,
    endpoint: String,
    token: String,
}

impl Api {
    /// `data` of a GraphQL reply, or its first error as text (with its code).
    fn data(body: Value) -> Result<Value, String> {
        if let Some(e) = body["errors"].get(0) {
            let code = e["extensions"]["code"].as_str().unwrap_or("ERROR");
            let msg = e["message"].as_str().unwrap_or("request failed");
            return Err(format!("{code}: {msg}"));
        }
        Ok(body["data"].clone())
    }

    async fn gql(&self, query: &str, variables: Value) -> Result<Value, String> {
        let request = self
            .http
            .post(&self.endpoint)
            .json(&json!({ "query": query, "variables": variables }));
        self.send(request).await
    }

    /// Sends one signed request to the endpoint; the reply's `data` (see [`Api::data`]).
    async fn send(&self, request: reqwest::RequestBuilder) -> Result<Value, String> {
        let resp = request
            .bearer_auth(&self.token)
            .send()
            .await
            .map_err(|e| format!("{}: {e}", self.endpoint))?;
        let body: Value = resp
            .json()
            .await
            .map_err(|e| format!("{}: not a GraphQL reply: {e}", self.endpoint))?;
        Self::data(body)
    }

    async fn upload(
        &self,
        corpus: &str,
        path: &PathBuf,
        name: &str,
        private: bool,
    ) -> Result<i64, String> {
        let bytes = tokio::fs::read(path)
            .await
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let ops = json!({
            "query": "mutation($c: ID!, $f: Upload!, $v: Visibility) { uploadDocument(corpusId: $c, file: $f, visibility: $v) { id } }",
            "variables": { "c": corpus, "f": null, "v": if private { "PRIVATE" } else { "TEAM" } },
        });
        let form = reqwest::multipart::Form::new()
            .text("operations", ops.to_string())
            .text("map", json!({ "0": ["variables.f"] }).to_string())
            .part(
                "0",
                reqwest::multipart::Part::bytes(bytes).file_name(name.to_owned()),
            );
        let data = self
            .send(self.http.post(&self.endpoint).multipart(form))
            .await?;
        data["uploadDocument"]["id"]
            .as_str()
            .and_then(|id| id.parse().ok())
            .ok_or_else(|| "the server answered no job id".to_owned())
    }
}

pub async fn ingest(
    server: &str,
    token: &str,
    paths: &[PathBuf],
    corpus_name: &str,
    private: bool,
) -> Result<(), String> {
    let mut files = Vec::new();
    collect(paths, &mut files)?;
    if files.is_empty() {
        return Err("no files to ingest".into());
    }
    let api = Api {
        http: reqwest::Client::new(),
        endpoint: format!("{}/graphql", server.trim_end_matches('/')),
        token: token.to_owned(),
    };
    // The corpus: the team's own one of that name, or a new one.
    let mut after: Option<String> = None;
    let corpus = loop {
        let d = api
            .gql(
                "query($a: String) { corpora(first: 100, after: $a) { edges { cursor node { id name system } } pageInfo { hasNextPage } } }",
                json!({ "a": after }),
            )
            .await?;
        let edges = d["corpora"]["edges"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let found = edges
            .iter()
            .map(|e| &e["node"])
            .find(|n| n["name"] == corpus_name && n["system"] == false)
            .and_then(|n| n["id"].as_str().map(str::to_owned));
        if found.is_some() || d["corpora"]["pageInfo"]["hasNextPage"] != true {
            break found;
        }
        after = edges
            .last()
            .and_then(|e| e["cursor"].as_str().map(str::to_owned));
    };
    let corpus = match corpus {
        Some(c) => c,
        None => api
            .gql(
                "mutation($n: String!) { createCorpus(name: $n) { id } }",
                json!({ "n": corpus_name }),
            )
            .await?["createCorpus"]["id"]
            .as_str()
            .map(str::to_owned)
            .ok_or("the server created no corpus")?,
    };

    let started = std::time::Instant::now();
    let bars = MultiProgress::new();
    let style = bar_style()?;
    let mut summary = Summary::default();
    let mut pending: HashMap<i64, (ProgressBar, String)> = HashMap::new();
    for f in &files {
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let bar = bars.add(ProgressBar::new(1));
        bar.set_style(style.clone());
        bar.set_prefix(name.clone());
        match api.upload(&corpus, f, &name, private).await {
            Ok(job) => {
                bar.set_message("queued");
                pending.insert(job, (bar, name));
            }
            Err(e) => {
                bar.abandon_with_message(format!("refused: {e}"));
                summary.failed.push((name, format!("refused: {e}")));
            }
        }
    }
    while !pending.is_empty() {
        tokio::time::sleep(POLL).await;
        let ids: Vec<i64> = pending.keys().copied().collect();
        for id in ids {
            let d = api
                .gql(
                    "query($id: ID!) { job(id: $id) { state stage progress { done total } error result } }",
                    json!({ "id": id.to_string() }),
                )
                .await?;
            let job = &d["job"];
            let Some((bar, _)) = pending.get(&id) else {
                continue;
            };
            if let (Some(done), Some(total)) = (
                job["progress"]["done"].as_u64(),
                job["progress"]["total"].as_u64(),
            ) {
                bar.set_length(total.max(1));
                bar.set_position(done);
            }
            bar.set_message(job["stage"].as_str().unwrap_or_default().to_owned());
            let state = job["state"].as_str().unwrap_or_default();
            if !matches!(state, "SUCCEEDED" | "FAILED" | "CANCELLED") {
                continue;
            }
            let Some((bar, name)) = pending.remove(&id) else {
                continue;
            };
            // The API's `result` is an ingest's typed result (delivered to this first read).
            if state == "SUCCEEDED" {
                // The API's `result` is an ingest's typed result, delivered to the first read
                // after success (this one); a job someone else read first has none.
                let r = serde_json::from_value::<IngestResult>(job["result"].clone()).ok();
                summary.succeeded(r.as_ref());
                bar.finish_with_message(r.map_or_else(|| "done".to_owned(), |r| r.message));
            } else {
                let reason = job["error"].as_str().unwrap_or(state).to_owned();
                bar.abandon_with_message(format!("{}: {reason}", state.to_lowercase()));
                summary.failed.push((name, reason));
            }
        }
    }
    summary.finish(files.len(), started.elapsed().as_secs_f64())
}
