//! One typed configuration, read from flags and the environment (clap with `env`).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, ValueEnum};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Args, Clone, Debug)]
pub struct Config {
    /// Where the SQLite database, blobs and the initial token live.
    #[arg(long, env = "CAIRN_DATA_DIR", default_value = "./data", global = true)]
    pub data_dir: PathBuf,

    /// `postgres://…` selects PostgreSQL (with pgvector); unset means SQLite in the data dir.
    #[arg(long, env = "DATABASE_URL", global = true, hide_env_values = true)]
    pub database_url: Option<String>,

    /// Address the console and API listen on.
    #[arg(
        long,
        env = "CAIRN_BIND",
        default_value = "127.0.0.1:8080",
        global = true
    )]
    pub bind: SocketAddr,

    /// Largest request body accepted (uploads included), in bytes.
    #[arg(long, env = "CAIRN_MAX_UPLOAD_BYTES", default_value_t = 64 * 1024 * 1024, global = true)]
    pub max_upload_bytes: u64,

    /// The console's Trunk build (index.html and assets).
    #[arg(
        long,
        env = "CAIRN_CONSOLE_DIR",
        default_value = "frontend/dist",
        global = true
    )]
    pub console_dir: PathBuf,

    /// Deepest GraphQL selection accepted.
    #[arg(
        long,
        env = "CAIRN_GRAPHQL_MAX_DEPTH",
        default_value_t = 12,
        global = true
    )]
    pub graphql_max_depth: usize,

    /// Highest GraphQL complexity accepted (each field costs 1; lists multiply by `first`).
    #[arg(
        long,
        env = "CAIRN_GRAPHQL_MAX_COMPLEXITY",
        default_value_t = 5000,
        global = true
    )]
    pub graphql_max_complexity: usize,

    /// Log format on stderr.
    #[arg(long, env = "CAIRN_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,
}

impl Config {
    /// A configuration with every default, for tests and embedding.
    pub fn with_data_dir(data_dir: impl Into<PathBuf>) -> Config {
        Config {
            data_dir: data_dir.into(),
            database_url: None,
            bind: SocketAddr::from(([127, 0, 0, 1], 8080)),
            max_upload_bytes: 64 * 1024 * 1024,
            console_dir: PathBuf::from("frontend/dist"),
            graphql_max_depth: 12,
            graphql_max_complexity: 5000,
            log_format: LogFormat::Text,
        }
    }
}
