//! The MCP server (Model Context Protocol, Streamable HTTP transport) on `/mcp`: the agent
//! surface of seed 004's knowledge tools and seed 001's `kg_query`. The only module that names
//! `rmcp`; it names `service` and `domain` only, like `graphql`, and is as thin as the
//! resolvers: each tool parses its arguments, calls the service, and renders text an LLM
//! reads ([`text`] holds the text contracts).
//!
//! Authentication: `http` resolves every request's bearer token through
//! [`crate::service::Cairn::authenticate`] (the function GraphQL uses) before the request
//! reaches this module, refuses a missing or invalid one with 401, ends the request's MCP
//! session when its token no longer authenticates ([`McpEndpoint::end_session`]; a watcher
//! on each session's token does so at once on revocation), and hands the [`Principal`] to
//! the tools in the request's extensions. A tool never runs without one.

mod text;

use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::Extension;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, ErrorData, Implementation, ServerCapabilities, ServerConfig,
};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::{
    SessionId, StreamableHttpServerConfig, StreamableHttpService,
};
use rmcp::{schemars, tool, tool_handler, tool_router, ServerHandler};
use serde::Deserialize;

use crate::domain::search::SearchMode;
use crate::service::search::SearchRequest;
use crate::service::{AuthError, Cairn, Principal, ServiceError};
use text::Recoverable;

/// `search_documents`'s default number of excerpts (seed 004: `settings.top_k`, 10).
pub const DEFAULT_TOP_K: usize = 10;
/// `kg_query`'s default depth.
const DEFAULT_HOPS: i32 = 1;
/// How many documents `move_documents` lists per corpus when asked what it may move.
const LISTED_PER_CORPUS: u64 = 100;
/// How many corpora it lists them from.
const LISTED_CORPORA: u64 = 100;

/// The HTTP service `http` mounts on `/mcp`, and its sessions.
#[derive(Clone)]
pub struct McpEndpoint {
    service: StreamableHttpService<Tools, LocalSessionManager>,
    sessions: Arc<LocalSessionManager>,
}

/// The endpoint over this core: one [`Tools`] per MCP session, sessions kept in memory (idle
/// ones expire after rmcp's five minutes). `stopping` ends every session and stream when the
/// server stops.
pub fn endpoint(cairn: Cairn, stopping: tokio_util::sync::CancellationToken) -> McpEndpoint {
    let sessions = Arc::new(LocalSessionManager::default());
    // Host validation guards unauthenticated local servers against DNS rebinding; every
    // request here carries a bearer token a rebinding page cannot know, and Cairn is served
    // under whatever host name the operator chose, so the list is not used.
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .with_cancellation_token(stopping);
    let service = StreamableHttpService::new(
        move || Ok(Tools::new(cairn.clone())),
        sessions.clone(),
        config,
    );
    McpEndpoint { service, sessions }
}

impl McpEndpoint {
    /// The tower service answering POST, GET and DELETE on `/mcp`.
    pub fn service(&self) -> StreamableHttpService<Tools, LocalSessionManager> {
        self.service.clone()
    }

    /// Ends the MCP session `id` (its token was revoked or no longer authenticates): its
    /// open streams close and later requests naming it get 404.
    pub async fn end_session(&self, id: &str) {
        let id: SessionId = Arc::from(id);
        if let Err(e) = self.sessions.close_session(&id).await {
            tracing::debug!(error = %e, "closing an MCP session");
        }
    }

    /// Whether the MCP session `id` is open.
    pub async fn has_session(&self, id: &str) -> bool {
        let id: SessionId = Arc::from(id);
        self.sessions.has_session(&id).await.unwrap_or(false)
    }

    /// Resolves once the MCP session `id` is gone (closed by its client, expired, or ended),
    /// looking every `every`.
    pub async fn session_gone(&self, id: &str, every: std::time::Duration) {
        while self.has_session(id).await {
            tokio::time::sleep(every).await;
        }
    }
}

/// The tools of one MCP session.
#[derive(Clone)]
pub struct Tools {
    cairn: Cairn,
    tool_router: ToolRouter<Tools>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SearchArgs {
    /// What to look for, in natural language or keywords.
    pub query: String,
    /// Only these corpora (ids from `knowledge_summary`); all readable corpora when absent.
    pub corpus_ids: Option<Vec<i64>>,
    /// How many excerpts to return (1-100, default 10).
    pub top_k: Option<usize>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct DocumentTextArgs {
    /// The document's id (`document_id=` in search results).
    pub document_id: i64,
    /// The page to read (1-based, 25,000 characters a page; default 1).
    pub page: Option<usize>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct KgQueryArgs {
    /// The entity's name (case and spacing do not matter).
    pub name: Option<String>,
    /// The entity's id, instead of its name.
    pub id: Option<i64>,
    /// How far to follow relations: 0, 1 (default) or 2.
    pub hops: Option<i32>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SuggestedContextArgs {
    /// The user's message.
    pub message: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct CreateCorpusArgs {
    /// The new corpus's name (unique in the team).
    pub name: String,
    /// What it holds.
    pub description: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct MoveDocumentsArgs {
    /// The documents to move.
    pub document_ids: Option<Vec<i64>>,
    /// Only documents of this corpus (with `move_all`: every document of it).
    pub from_corpus_id: Option<i64>,
    /// The corpus to move them into.
    pub to_corpus_id: i64,
    /// Move every document you may move (of `from_corpus_id` when given).
    pub move_all: Option<bool>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ClassifyArgs {
    /// The document's id (`document_id=` in search results).
    pub document_id: i64,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ExtractArgs {
    /// The document's id.
    pub document_id: i64,
    /// A JSON Schema of flat fields to extract (string, number, integer, boolean, string with
    /// format date); every value comes with its verbatim evidence.
    pub schema: Option<serde_json::Value>,
    /// Instead of `schema`, the name of a document type whose schema to use.
    pub schema_name: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ProcessArgs {
    /// The document's id.
    pub document_id: i64,
    /// A job this tool started earlier: report it instead of starting another.
    pub job_id: Option<i64>,
}

/// How long `process_document` waits for its job before answering with the job's id.
const PROCESS_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// The principal `http` attached to this request (never absent behind `/mcp`'s check).
fn principal(parts: &::http::request::Parts) -> Result<&Principal, ErrorData> {
    parts.extensions.get::<Principal>().ok_or_else(|| {
        ErrorData::invalid_request("UNAUTHENTICATED: send Authorization: Bearer <token>", None)
    })
}

fn ok(text: String) -> Result<CallToolResult, ErrorData> {
    Ok(CallToolResult::success(vec![ContentBlock::text(text)]))
}

/// A service error as the tool's answer: a recoverable mistake becomes a tool result that
/// says what to do next (`hint`); an infrastructure failure becomes an MCP error.
fn failed(e: ServiceError, hint: Recoverable) -> Result<CallToolResult, ErrorData> {
    let said = match &e {
        ServiceError::NotFound(what) => text::not_found(what, &hint),
        ServiceError::Invalid(i) => text::invalid(&i.to_string(), &hint),
        ServiceError::Conflict(m) => text::conflict(m),
        ServiceError::RateLimited(m) | ServiceError::QuotaExceeded(m) => text::later(m),
        ServiceError::Auth(AuthError::Forbidden(_)) => text::forbidden(&e.to_string()),
        ServiceError::Auth(AuthError::SystemCorpus) => text::system_corpus(&e.to_string()),
        ServiceError::Auth(_) => {
            return Err(ErrorData::invalid_request(
                "UNAUTHENTICATED: invalid or revoked token",
                None,
            ))
        }
        ServiceError::Unavailable(m) => {
            return Err(ErrorData::internal_error(format!("UNAVAILABLE: {m}"), None))
        }
        ServiceError::Upstream { code, message } => {
            return Err(ErrorData::internal_error(
                format!("{code}: {message}"),
                None,
            ))
        }
        ServiceError::TooLarge(_) | ServiceError::Internal(_) => {
            tracing::error!(error = %e, "MCP tool failed");
            return Err(ErrorData::internal_error("INTERNAL: internal error", None));
        }
    };
    Ok(CallToolResult::error(vec![ContentBlock::text(said)]))
}

impl Tools {
    fn new(cairn: Cairn) -> Tools {
        Tools {
            cairn,
            tool_router: Self::tool_router(),
        }
    }
}

#[tool_router]
impl Tools {
    #[tool(
        description = "Search the documents you can read (hybrid: meaning and words). The first line rates the relevance: LOW means the documents do not hold the content, so do not re-search with other keywords. Every excerpt is returned in full with its document_id."
    )]
    async fn search_documents(
        &self,
        Extension(parts): Extension<::http::request::Parts>,
        Parameters(args): Parameters<SearchArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let p = principal(&parts)?;
        let found = match self
            .cairn
            .search(
                p,
                SearchRequest {
                    query: args.query.clone(),
                    corpus_ids: args.corpus_ids,
                    top_k: args.top_k.unwrap_or(DEFAULT_TOP_K),
                    mode: SearchMode::Hybrid,
                },
            )
            .await
        {
            Ok(f) => f,
            Err(e) => return failed(e, Recoverable::Search),
        };
        let synthesis = match self
            .cairn
            .synthesize(p, &args.query, &found.hits, found.relevance)
            .await
        {
            Ok(s) => s,
            Err(e) => return failed(e, Recoverable::Search),
        };
        ok(text::search(&found, synthesis.as_ref()))
    }

    #[tool(
        description = "Read a document's text, 25,000 characters a page. Multi-page documents say how to read the next and previous pages."
    )]
    async fn get_document_text(
        &self,
        Extension(parts): Extension<::http::request::Parts>,
        Parameters(args): Parameters<DocumentTextArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let p = principal(&parts)?;
        let page = args.page.unwrap_or(1);
        match self.cairn.document_text(p, args.document_id, page).await {
            Ok(d) => ok(text::document_page(&d)),
            Err(e) => failed(e, Recoverable::Document(args.document_id)),
        }
    }

    #[tool(
        description = "What the knowledge graph knows about an entity (by name or id) and its neighbours up to 2 hops: one fact per line, each with its citations (document id, version, the verbatim sentence)."
    )]
    async fn kg_query(
        &self,
        Extension(parts): Extension<::http::request::Parts>,
        Parameters(args): Parameters<KgQueryArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let p = principal(&parts)?;
        let hops = args.hops.unwrap_or(DEFAULT_HOPS);
        let name = args
            .name
            .as_deref()
            .map(str::trim)
            .filter(|n| !n.is_empty());
        match self.cairn.kg_query(p, args.id, name, hops).await {
            Ok(facts) => ok(text::facts(&facts, name, args.id)),
            Err(e) => failed(e, Recoverable::Entity),
        }
    }

    #[tool(
        description = "The [KNOWLEDGE] line: how many documents you can read across your team's corpora, and each corpus's id."
    )]
    async fn knowledge_summary(
        &self,
        Extension(parts): Extension<::http::request::Parts>,
    ) -> Result<CallToolResult, ErrorData> {
        let p = principal(&parts)?;
        match self.cairn.knowledge_summary(p).await {
            Ok(line) => ok(text::knowledge(line.as_deref())),
            Err(e) => failed(e, Recoverable::Nothing),
        }
    }

    #[tool(
        description = "The [SUGGESTED CONTEXT] block for a user's message: the instance's operational patterns and user-behaviour notes (system corpora) that match it. Never fails: with nothing to suggest it says so."
    )]
    async fn suggested_context(
        &self,
        Extension(parts): Extension<::http::request::Parts>,
        Parameters(args): Parameters<SuggestedContextArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let p = principal(&parts)?;
        let block = self.cairn.suggested_context(p, &args.message).await;
        ok(text::suggested(&block))
    }

    #[tool(description = "Create a corpus (a collection of documents) in your team.")]
    async fn create_corpus(
        &self,
        Extension(parts): Extension<::http::request::Parts>,
        Parameters(args): Parameters<CreateCorpusArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let p = principal(&parts)?;
        match self
            .cairn
            .create_corpus(p, &args.name, args.description.as_deref())
            .await
        {
            Ok(c) => ok(text::corpus_created(&c)),
            Err(e) => failed(e, Recoverable::Nothing),
        }
    }

    #[tool(
        description = "Classify a document into one type of your team's taxonomy (the team's model, or the zero-shot classifier without one): type, confidence, reason. Stored with the document."
    )]
    async fn classify_document(
        &self,
        Extension(parts): Extension<::http::request::Parts>,
        Parameters(args): Parameters<ClassifyArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let p = principal(&parts)?;
        match self.cairn.classify_document(p, args.document_id).await {
            Ok(c) => ok(text::classification(args.document_id, &c)),
            Err(e) => failed(e, Recoverable::Document(args.document_id)),
        }
    }

    #[tool(
        description = "Extract from a document. With a schema (or schema_name, a document type's): each field's value with the verbatim sentence that states it. Without: the document's tables (spreadsheets, Markdown/DOCX/HTML tables) as typed rows. Ends with the result's measured schema."
    )]
    async fn extract_document(
        &self,
        Extension(parts): Extension<::http::request::Parts>,
        Parameters(args): Parameters<ExtractArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let p = principal(&parts)?;
        match self
            .cairn
            .extract_document(
                p,
                args.document_id,
                args.schema,
                args.schema_name.as_deref(),
            )
            .await
        {
            Ok(x) => ok(text::extraction(args.document_id, &x)),
            Err(e) => failed(e, Recoverable::Document(args.document_id)),
        }
    }

    #[tool(
        description = "Process a document: classify it, find a better type when unsure (the taxonomy grows when your team allows it), find or write the type's schema, extract, and store the result. Waits up to a minute; a longer job answers with its job_id to ask again with."
    )]
    async fn process_document(
        &self,
        Extension(parts): Extension<::http::request::Parts>,
        Parameters(args): Parameters<ProcessArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let p = principal(&parts)?;
        let hint = Recoverable::Document(args.document_id);
        let job = match args.job_id {
            Some(id) => self.cairn.visible_job(p, id).await,
            None => self.cairn.process_document(p, args.document_id).await,
        };
        let mut job = match job {
            Ok(j) => j,
            Err(e) => return failed(e, hint),
        };
        let deadline = tokio::time::Instant::now() + PROCESS_WAIT;
        while !job.state.is_terminal() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            job = match self.cairn.visible_job(p, job.id).await {
                Ok(j) => j,
                Err(e) => return failed(e, hint),
            };
        }
        let result = if job.state.is_terminal() {
            match self.cairn.document_processing(p, &[args.document_id]).await {
                Ok(mut r) => r.pop().filter(|r| r.job_id == Some(job.id)),
                Err(e) => return failed(e, hint),
            }
        } else {
            None
        };
        ok(text::processed(args.document_id, &job, result.as_ref()))
    }

    #[tool(
        description = "Move documents into another corpus: by id, or every document (of from_corpus_id) with move_all. With neither, lists the documents you may move."
    )]
    async fn move_documents(
        &self,
        Extension(parts): Extension<::http::request::Parts>,
        Parameters(args): Parameters<MoveDocumentsArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let p = principal(&parts)?;
        let move_all = args.move_all.unwrap_or(false);
        let ids = args.document_ids.filter(|d| !d.is_empty());
        if ids.is_none() && !move_all {
            return self.movable(p, args.to_corpus_id).await;
        }
        let from = args.from_corpus_id;
        match self
            .cairn
            .move_documents(p, args.to_corpus_id, ids.as_deref(), from)
            .await
        {
            Ok(n) => ok(text::moved(n, args.to_corpus_id)),
            Err(e) => failed(e, Recoverable::Corpus(args.to_corpus_id)),
        }
    }
}

impl Tools {
    /// `move_documents` without ids or `move_all`: what the caller can read, corpus by corpus.
    async fn movable(&self, p: &Principal, to: i64) -> Result<CallToolResult, ErrorData> {
        let corpora = match self.cairn.corpora(p, None, LISTED_CORPORA).await {
            Ok(c) => c,
            Err(e) => return failed(e, Recoverable::Nothing),
        };
        // Only the team's own corpora hold documents a token may move.
        let own: Vec<_> = corpora
            .into_iter()
            .filter(|c| c.team_id == Some(p.team_id))
            .collect();
        let ids: Vec<i64> = own.iter().map(|c| c.id).collect();
        let docs = match self
            .cairn
            .corpora_documents(p, &ids, None, LISTED_PER_CORPUS)
            .await
        {
            Ok(d) => d,
            Err(e) => return failed(e, Recoverable::Nothing),
        };
        ok(text::movable(&own, &docs, to))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("cairn", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Cairn: the documents and knowledge graph of your team. Start with \
                 knowledge_summary, find passages with search_documents, read whole documents \
                 with get_document_text, ask about entities with kg_query; classify_document, \
                 extract_document and process_document work on one document.",
            )
    }
}
