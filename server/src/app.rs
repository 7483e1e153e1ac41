//! Assembling and running a server: open the store, migrate, bootstrap, build the schema and
//! the router, serve until told to stop.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use cairn_embed::{EmbedConfig, Embedder, Precision};
use cairn_extract::chunk::ChunkConfig;
use cairn_extract::Limits;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::config::{Config, EmbedPrecision};
use crate::events::Bus;
use crate::graphql;
use crate::http::{self, metrics::Metrics, HttpState};
use crate::ingest::blobs::BlobStore;
use crate::ingest::{IngestRunner, IngestSettings};
use crate::jobs::{Queue, QueueConfig, Runner};
use crate::service::{Bootstrap, Cairn, Models, ServiceError};
use crate::store::{Store, StoreError, Tuning};

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("database: {0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Service(#[from] ServiceError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("configuration: {0}")]
    Config(String),
    #[error("metrics: {0}")]
    Metrics(#[from] prometheus::Error),
    #[error("server: {0}")]
    Io(#[from] std::io::Error),
}

/// Opens the configured database and applies migrations.
pub async fn open_store(cfg: &Config) -> Result<Store, StoreError> {
    let store = Store::connect_tuned(
        cfg.database_url.as_deref(),
        &cfg.data_dir,
        Tuning {
            ef_search: cfg.pg_ef_search,
        },
    )
    .await?;
    store.migrate().await?;
    // Chunks with no lexical entry (stored before migration 4, or before migration 8 packed
    // postings into blocks and emptied the lexical tables) are indexed once. A
    // failure (another process backfilling the same rows at the same moment) is not fatal:
    // the next start finishes the work.
    match store.backfill_lexical().await {
        Ok(0) => {}
        Ok(n) => tracing::info!(
            documents = n,
            "lexical postings written for older documents"
        ),
        Err(e) => {
            tracing::warn!(error = %e, "lexical backfill stopped; it resumes at the next start")
        }
    }
    Ok(store)
}

/// A server running in this process (used by `cairn serve` and by the tests).
pub struct Running {
    pub addr: SocketAddr,
    pub cairn: Cairn,
    /// Set when this start created the first team (the token is shown only here).
    pub bootstrap: Option<Bootstrap>,
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<std::io::Result<()>>,
}

impl Running {
    /// Stops accepting, finishes in-flight requests, and waits; then ends the event bus's
    /// cross-instance tasks (the PostgreSQL LISTEN connection).
    pub async fn stop(mut self) -> Result<(), StartError> {
        self.cairn.queue.shutdown();
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        let served = self.task.await;
        self.cairn.bus.shutdown();
        match served {
            Ok(r) => Ok(r?),
            Err(e) => Err(StartError::Io(std::io::Error::other(e))),
        }
    }

    /// Resolves when the server stops by itself (an I/O error).
    pub async fn wait(self) -> Result<(), StartError> {
        let served = self.task.await;
        self.cairn.queue.shutdown();
        self.cairn.bus.shutdown();
        match served {
            Ok(r) => Ok(r?),
            Err(e) => Err(StartError::Io(std::io::Error::other(e))),
        }
    }
}

/// Starts the embedder: the model directory is checked here (on a blocking thread), its
/// weights load on the embedder's own thread while the caller opens the database and takes
/// work (requests wait for them; see `Embedder::start`). A missing model is not fatal: the
/// server starts, and ingest jobs fail with a message saying how to get the model.
pub async fn load_embedder(cfg: &Config) -> Option<Embedder> {
    let mut embed_cfg = EmbedConfig::new(cfg.embed_model_dir());
    embed_cfg.precision = match cfg.embed_precision {
        EmbedPrecision::F32 => Precision::F32,
        EmbedPrecision::Bf16 => Precision::Bf16,
        EmbedPrecision::Int8 => Precision::Int8,
        EmbedPrecision::Auto => Precision::Auto,
    };
    embed_cfg.threads = cfg.embed_threads;
    let loaded = tokio::task::spawn_blocking(move || Embedder::start(embed_cfg)).await;
    match loaded {
        Ok(Ok(e)) => {
            tracing::info!(
                model = e.model_name(),
                dim = e.dim(),
                precision = %e.precision(),
                "embedding model loading"
            );
            Some(e)
        }
        Ok(Err(e)) => {
            tracing::error!(error = %e, dir = %cfg.embed_model_dir().display(),
                "no embedding model: ingestion will fail until one is configured (scripts/fetch-model.sh)");
            None
        }
        Err(e) => {
            tracing::error!(error = %e, "loading the embedding model panicked");
            None
        }
    }
}

/// Starts a server on `cfg.bind` (port 0 picks a free port; see [`Running::addr`]), loading
/// the embedding model itself.
pub async fn start(cfg: &Config) -> Result<Running, StartError> {
    let embedder = load_embedder(cfg).await;
    start_with(cfg, embedder).await
}

/// The core with its job workers and no HTTP (command-line bulk loads).
pub async fn start_headless(cfg: &Config) -> Result<Cairn, StartError> {
    let embedder = load_embedder(cfg).await;
    build_core(cfg, embedder).await
}

async fn build_core(cfg: &Config, embedder: Option<Embedder>) -> Result<Cairn, StartError> {
    let store = open_store(cfg).await?;
    let bus = Bus::for_store(&store).await;
    let blobs = BlobStore::new(&cfg.data_dir);
    let ingest = IngestRunner {
        store: store.clone(),
        blobs: blobs.clone(),
        embedder: embedder.clone(),
        chunking: ChunkConfig {
            chunk_size: cfg.chunk_size,
            chunk_overlap: cfg.chunk_overlap,
        },
        limits: Limits::default(),
        extract_timeout: Duration::from_secs(cfg.extract_timeout_secs),
        extract_bin: std::env::current_exe()
            .ok()
            .filter(|p| p.file_stem().is_some_and(|n| n == "cairn")),
        extract_memory_mb: cfg.extract_memory_mb,
        ocr: match cfg.ocr() {
            Ok(Some(ocr)) => {
                tracing::info!(tesseract = %ocr.tesseract.display(), language = %ocr.language, pdf_pages = ocr.pdftoppm.is_some(), "OCR on");
                Some(ocr)
            }
            Ok(None) => None,
            Err(why) => {
                tracing::warn!("OCR off: {why}; scanned pages and images are stored without text");
                None
            }
        },
        auto_kg: cfg.kg_auto_extract,
    };
    let utility = llm_client(cfg, cfg.llm_utility())?;
    let secret = crate::roles::SecretKey::load(cfg.secret_key.as_deref(), &cfg.data_dir)
        .map_err(|e| StartError::Config(format!("secret key: {e}")))?;
    let roles = crate::roles::ModelRoles::new(
        store.clone(),
        secret.clone(),
        crate::roles::InstanceModels {
            chat: llm_client(cfg, cfg.llm_chat())?,
            utility: utility.clone(),
        },
        Duration::from_secs(cfg.llm_timeout_secs.max(1)),
    );
    let kg = crate::knowledge::KgRunner::new(
        store.clone(),
        embedder.clone(),
        kg_extractor(cfg, utility).await?,
        roles.clone(),
        cfg.kg_limits(),
    );
    let processing = crate::processing::ProcessRunner {
        processor: Arc::new(crate::processing::Processor::new(
            store.clone(),
            embedder.clone(),
            roles.clone(),
            cfg.process_min_confidence,
        )),
    };
    let mut runners: HashMap<&'static str, Arc<dyn Runner>> = HashMap::new();
    runners.insert(crate::jobs::INGEST, Arc::new(ingest));
    runners.insert(crate::jobs::KG_EXTRACT, Arc::new(kg));
    runners.insert(crate::jobs::PROCESS_DOCUMENT, Arc::new(processing));
    let queue = Queue::start(
        store.clone(),
        bus.clone(),
        runners,
        QueueConfig {
            workers: cfg.workers,
            lease: Duration::from_secs(cfg.job_lease_secs.max(1)),
            ..QueueConfig::default()
        },
    );
    Ok(Cairn::new(
        store,
        bus,
        blobs,
        queue,
        IngestSettings {
            max_upload_bytes: cfg.max_upload_bytes,
        },
    )
    .with_kg_limits(cfg.kg_limits())
    .with_search_limit(cfg.search_limit())
    .with_bm25(cfg.bm25())
    .with_fusion(cfg.fusion())
    .with_prefetch_data_catalog(cfg.prefetch_data_catalog)
    .with_process_min_confidence(cfg.process_min_confidence)
    .with_roles(roles)
    .with_secret(secret)
    .with_models(Models {
        embedder,
        pii: Some(
            cairn_llm::Anonymizer::new(cfg.pii_name_list()?)
                .map_err(|e| StartError::Config(format!("PII names: {e}")))?,
        ),
    }))
}

/// The knowledge-graph extractor `CAIRN_KG_EXTRACTOR` names.
async fn kg_extractor(
    cfg: &Config,
    utility: Option<cairn_llm::LlmClient>,
) -> Result<Arc<dyn cairn_kg::Extractor>, StartError> {
    match cfg.kg_extractor.as_str() {
        "rules" => Ok(Arc::new(cairn_kg::Rules::new())),
        "llm" => {
            let client = utility.ok_or_else(|| {
                StartError::Config(
                    "CAIRN_KG_EXTRACTOR=llm needs an LLM endpoint (CAIRN_LLM_UTILITY_URL or CAIRN_LLM_URL)".into(),
                )
            })?;
            Ok(Arc::new(crate::knowledge::LlmExtractor { client }))
        }
        "local" => {
            let path = cfg.kg_local_model.clone().ok_or_else(|| {
                StartError::Config("CAIRN_KG_EXTRACTOR=local needs CAIRN_KG_LOCAL_MODEL".into())
            })?;
            let local = tokio::task::spawn_blocking(move || {
                cairn_kg::LocalGguf::load(path, cairn_kg::LocalConfig::default())
            })
            .await
            .map_err(|e| StartError::Config(format!("local extractor: {e}")))?
            .map_err(|e| StartError::Config(format!("local extractor: {e}")))?;
            Ok(Arc::new(local))
        }
        other => Err(StartError::Config(format!(
            "CAIRN_KG_EXTRACTOR must be rules, llm or local (not {other:?})"
        ))),
    }
}

/// A client for an LLM role, or `None` when the role has no endpoint.
fn llm_client(
    cfg: &Config,
    role: Option<crate::config::LlmRole>,
) -> Result<Option<cairn_llm::LlmClient>, StartError> {
    let Some(role) = role else {
        return Ok(None);
    };
    let client = cairn_llm::LlmClient::new(cairn_llm::LlmConfig {
        base_url: role.url,
        model: role.model,
        api_key: cfg.llm_api_key.clone(),
        timeout: Duration::from_secs(cfg.llm_timeout_secs.max(1)),
        price_in_per_mtok: cfg.llm_price_input,
        price_out_per_mtok: cfg.llm_price_output,
    })
    .map_err(|e| StartError::Config(format!("LLM: {e}")))?;
    Ok(Some(client))
}

/// Starts a server with an already loaded embedder (tests share one between servers).
pub async fn start_with(cfg: &Config, embedder: Option<Embedder>) -> Result<Running, StartError> {
    let cairn = build_core(cfg, embedder).await?;
    let bootstrap = cairn.bootstrap_if_empty(&cfg.data_dir).await?;
    let schema = graphql::build_schema(
        cairn.clone(),
        graphql::Limits {
            max_depth: cfg.graphql_max_depth,
            max_complexity: cfg.graphql_max_complexity,
        },
    );
    // Fired when the server stops: long-lived responses (the MCP server's event streams) end,
    // so the graceful shutdown does not wait on a client that never hangs up.
    let stopping = tokio_util::sync::CancellationToken::new();
    let state = HttpState {
        cairn: cairn.clone(),
        schema,
        metrics: Metrics::new()?,
        console: http::ConsoleFiles::new(cfg.console_dir.clone()),
        stopping: stopping.clone(),
    };
    let router = http::router(state, cfg.max_upload_bytes);
    let listener = TcpListener::bind(cfg.bind)
        .await
        .map_err(|source| StartError::Bind {
            addr: cfg.bind,
            source,
        })?;
    let addr = listener.local_addr()?;
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(serve(listener, router, async move {
        let _ = rx.await;
        stopping.cancel();
    }));
    tracing::info!(%addr, backend = ?cairn.store.backend(), "cairn listening");
    Ok(Running {
        addr,
        cairn,
        bootstrap,
        shutdown: Some(tx),
        task,
    })
}

/// Serves the router on every accepted connection with Nagle's algorithm off (TCP_NODELAY).
/// Without it a response written in more than one piece (the MCP server's event-stream answer:
/// head, then the event) waited for the client's delayed ACK: every MCP tool call over a
/// keep-alive connection took 44 ms (p50, measured with `scripts/bench-api-latency.sh`)
/// whatever the tool did; a GraphQL answer, written at once, was not affected.
async fn serve(
    listener: TcpListener,
    router: axum::Router,
    stop: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use axum::serve::ListenerExt;
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY not set on an accepted connection");
        }
    });
    axum::serve(listener, router)
        .with_graceful_shutdown(stop)
        .await
}
