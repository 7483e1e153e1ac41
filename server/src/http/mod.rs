//! The axum router: `/graphql` (POST, GET = GraphiQL), `/graphql/ws`, `/mcp`, health, metrics, and
//! the console (static files with an index.html fallback so client routes survive a reload).
//! Knows HTTP; calls `graphql` and `service`, nothing below them. [`graphql`](self::graphql)
//! is the one place here that knows async-graphql: it mounts the schema on POST and on the
//! WebSocket. [`mcp`](self::mcp) mounts the MCP server (`crate::mcp`) on `/mcp` behind its
//! bearer-token check.

mod graphql;
mod mcp;
pub mod metrics;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{middleware, Router};
use tower_http::services::{ServeDir, ServeFile};
use tower_http::trace::TraceLayer;

use crate::graphql::CairnSchema;
use crate::service::Cairn;
use graphql::{graphql_http, graphql_ws};
use metrics::Metrics;

#[derive(Clone)]
pub struct HttpState {
    pub cairn: Cairn,
    pub schema: CairnSchema,
    pub metrics: Metrics,
    /// Where the console's files are (see [`ConsoleFiles`]).
    pub console: ConsoleFiles,
    /// Cancelled when the server stops (ends the MCP server's open streams).
    pub stopping: tokio_util::sync::CancellationToken,
}

/// The console's folder (`scripts/build-console.sh` writes it), looked at on every request
/// rather than once at start-up: `scripts/run.sh` starts the server as soon as the server is
/// built, while the console may still be building beside it (issue 14, goal 7), and the
/// console appears when its folder does. Until then each console request costs one `stat`;
/// once `index.html` has been seen it is remembered, and requests cost nothing extra (a later
/// rebuild swaps the folder whole, see `scripts/build-console.sh`).
#[derive(Clone, Debug)]
pub struct ConsoleFiles {
    dir: Arc<Path>,
    seen: Arc<AtomicBool>,
}

impl ConsoleFiles {
    pub fn new(dir: PathBuf) -> Self {
        Self {
            dir: dir.into(),
            seen: Arc::default(),
        }
    }

    fn index(&self) -> PathBuf {
        self.dir.join("index.html")
    }

    fn built(&self) -> bool {
        if self.seen.load(Ordering::Relaxed) {
            return true;
        }
        let built = self.index().is_file();
        if built {
            self.seen.store(true, Ordering::Relaxed);
        }
        built
    }

    /// Whether GraphiQL's files are in the console's folder (see [`graphiql`]).
    fn graphiql_installed(&self) -> bool {
        self.dir.join("graphiql/graphiql.min.js").is_file()
    }

    /// `scripts/build-console.sh` holds `<dir>.building` (beside the folder, which it replaces
    /// whole when done) while it runs.
    fn building(&self) -> bool {
        let mut marker = self.dir.as_os_str().to_owned();
        marker.push(".building");
        Path::new(&marker).is_file()
    }
}

pub fn router(state: HttpState, max_body: u64) -> Router {
    let files = state.console.clone();
    if !files.built() {
        tracing::warn!(dir = %files.dir.display(), building = files.building(),
            "console not built yet: it is served once scripts/build-console.sh has written it");
    }
    // `scripts/build-console.sh` writes `.gz` twins of the wasm, JS and CSS; a browser that
    // accepts gzip gets those (the wasm shrinks to about 40%).
    let console = Router::new()
        .fallback_service(
            ServeDir::new(&*files.dir)
                .precompressed_gzip()
                .fallback(ServeFile::new(files.index())),
        )
        .layer(middleware::from_fn_with_state(files.clone(), console_built));
    let metrics_state = state.metrics.clone();
    // GraphiQL's own files, whether or not the console is built.
    let graphiql_files = ServeDir::new(files.dir.join("graphiql")).precompressed_gzip();
    let endpoint = crate::mcp::endpoint(state.cairn.clone(), state.stopping.clone());
    let mcp_state = mcp::McpState::new(state.cairn.clone(), endpoint.clone());
    let mcp_routes = Router::new()
        .route_service("/mcp", endpoint.service())
        .route_layer(middleware::from_fn_with_state(mcp_state, mcp::authenticate));
    Router::new()
        .nest_service("/graphiql", graphiql_files)
        .route("/graphql", get(graphiql).post(graphql_http))
        .route("/graphql/ws", get(graphql_ws))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .layer(DefaultBodyLimit::max(
            usize::try_from(max_body).unwrap_or(usize::MAX),
        ))
        .with_state(state)
        .merge(mcp_routes)
        .merge(console)
        .layer(middleware::from_fn_with_state(
            metrics_state,
            metrics::track,
        ))
        .layer(TraceLayer::new_for_http().on_failure(log_failure))
}

/// tower-http logs every 5xx as an error. A 503 is Cairn saying "not yet" on purpose (the
/// console's page while it builds, reloaded every 10 s; `/readyz` while the database is away,
/// which logs its own warning), so it is logged at debug; everything else stays an error.
fn log_failure(
    class: tower_http::classify::ServerErrorsFailureClass,
    latency: std::time::Duration,
    _span: &tracing::Span,
) {
    use tower_http::classify::ServerErrorsFailureClass as Class;
    let ms = latency.as_millis();
    match class {
        Class::StatusCode(StatusCode::SERVICE_UNAVAILABLE) => {
            tracing::debug!(latency_ms = ms, "503 Service Unavailable");
        }
        class => tracing::error!(classification = %class, latency_ms = ms, "response failed"),
    }
}

/// GraphiQL, from files Cairn serves itself (`/graphiql/*`, put into the console's folder by
/// `scripts/fetch-graphiql.sh` from the npm registry, pinned): no CDN, so it works offline and
/// no third-party script runs on the console's origin. The page's CSP says the same.
const GRAPHIQL_PAGE: &str = r#"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="robots" content="noindex">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Cairn GraphQL</title>
<style>body{height:100%;margin:0;width:100%;overflow:hidden}#graphiql{height:100vh}</style>
<link rel="stylesheet" href="/graphiql/graphiql.min.css">
<script src="/graphiql/react.production.min.js"></script>
<script src="/graphiql/react-dom.production.min.js"></script>
<script src="/graphiql/graphiql.min.js"></script>
</head>
<body>
<div id="graphiql">Loading…</div>
<script>
const wsUrl = new URL('/graphql/ws', window.location.origin);
wsUrl.protocol = wsUrl.protocol === 'https:' ? 'wss:' : 'ws:';
ReactDOM.createRoot(document.getElementById('graphiql')).render(
  React.createElement(GraphiQL, {
    fetcher: GraphiQL.createFetcher({ url: '/graphql', subscriptionUrl: wsUrl.toString() }),
    defaultEditorToolsVisibility: true,
  })
);
</script>
</body>
</html>"#;

/// The GraphiQL page's policy: scripts, styles and connections from this origin only.
const GRAPHIQL_CSP: &str = "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; connect-src 'self' ws: wss:";

async fn graphiql(State(s): State<HttpState>) -> Response {
    if !s.console.graphiql_installed() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Html("<!doctype html><title>Cairn GraphQL</title><p>GraphiQL's files are not installed. Run <code>scripts/build-console.sh</code> (it runs <code>scripts/fetch-graphiql.sh</code>), or POST queries to <code>/graphql</code>.</p>"),
        )
            .into_response();
    }
    (
        [(header::CONTENT_SECURITY_POLICY, GRAPHIQL_CSP)],
        Html(GRAPHIQL_PAGE),
    )
        .into_response()
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(s): State<HttpState>) -> Response {
    match s.cairn.ping().await {
        Ok(()) => (StatusCode::OK, "ready").into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "readiness check failed");
            (StatusCode::SERVICE_UNAVAILABLE, "database unavailable").into_response()
        }
    }
}

async fn metrics_text(State(s): State<HttpState>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        s.metrics.render(),
    )
        .into_response()
}

/// The console's files once they are built; until then a page that says so (and, while
/// `scripts/build-console.sh` runs, reloads itself every 10 s, so the console appears in
/// the tab that was opened on the first run).
async fn console_built(State(files): State<ConsoleFiles>, req: Request, next: Next) -> Response {
    if files.built() {
        return next.run(req).await;
    }
    if files.building() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "10")],
            Html("<!doctype html><meta http-equiv=\"refresh\" content=\"10\"><title>Cairn</title><p>The console is being built (<code>scripts/build-console.sh</code>; a few minutes on a first run). This page reloads itself until it is ready. The API already answers at <a href=\"/graphql\">/graphql</a>.</p>"),
        )
            .into_response();
    }
    (
        StatusCode::SERVICE_UNAVAILABLE,
        Html("<!doctype html><title>Cairn</title><p>The console is not built. Run <code>scripts/build-console.sh</code>, or use the API at <a href=\"/graphql\">/graphql</a>.</p>"),
    )
        .into_response()
}
