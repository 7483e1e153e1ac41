//! Assembling and running a server: open the store, migrate, bootstrap, build the schema and
//! the router, serve until told to stop.

use std::future::Future;
use std::net::SocketAddr;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::config::Config;
use crate::graphql::{self, Limits};
use crate::http::{self, metrics::Metrics, HttpState};
use crate::service::{Bootstrap, Cairn, ServiceError};
use crate::store::{Store, StoreError};

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
    #[error("metrics: {0}")]
    Metrics(#[from] prometheus::Error),
    #[error("server: {0}")]
    Io(#[from] std::io::Error),
}

/// Opens the configured database and applies migrations.
pub async fn open_store(cfg: &Config) -> Result<Store, StoreError> {
    let store = Store::connect(cfg.database_url.as_deref(), &cfg.data_dir).await?;
    store.migrate().await?;
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
    /// Stops accepting, finishes in-flight requests, and waits.
    pub async fn stop(mut self) -> Result<(), StartError> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        match self.task.await {
            Ok(r) => Ok(r?),
            Err(e) => Err(StartError::Io(std::io::Error::other(e))),
        }
    }

    /// Resolves when the server stops by itself (an I/O error).
    pub async fn wait(self) -> Result<(), StartError> {
        match self.task.await {
            Ok(r) => Ok(r?),
            Err(e) => Err(StartError::Io(std::io::Error::other(e))),
        }
    }
}

/// Starts a server on `cfg.bind` (port 0 picks a free port; see [`Running::addr`]).
pub async fn start(cfg: &Config) -> Result<Running, StartError> {
    let store = open_store(cfg).await?;
    let cairn = Cairn::new(store);
    let bootstrap = cairn.bootstrap_if_empty(&cfg.data_dir).await?;
    let schema = graphql::build_schema(
        cairn.clone(),
        Limits {
            max_depth: cfg.graphql_max_depth,
            max_complexity: cfg.graphql_max_complexity,
        },
    );
    let state = HttpState {
        cairn: cairn.clone(),
        schema,
        metrics: Metrics::new()?,
    };
    let router = http::router(state, cfg.console_dir.clone(), cfg.max_upload_bytes);
    let listener = TcpListener::bind(cfg.bind)
        .await
        .map_err(|source| StartError::Bind {
            addr: cfg.bind,
            source,
        })?;
    let addr = listener.local_addr()?;
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(serve(listener, router, async {
        let _ = rx.await;
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

async fn serve(
    listener: TcpListener,
    router: axum::Router,
    stop: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router)
        .with_graceful_shutdown(stop)
        .await
}
