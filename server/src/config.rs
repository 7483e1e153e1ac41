//! One typed configuration, read from flags and the environment (clap with `env`).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, ValueEnum};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// The embedding model's dense-layer arithmetic (`cairn_embed::Precision`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum EmbedPrecision {
    /// f32: vectors match sentence-transformers' to 1e-4, on any CPU.
    F32,
    /// bfloat16 on AVX-512 BF16 (about 1.6-1.8x the f32 throughput here; every vector within
    /// cosine 0.99 of f32's, measured ~0.99997). The model does not load on other CPUs.
    Bf16,
    /// Passages in 8-bit integers on AVX2 (weights per output column, activations per token,
    /// exact integer sums), search queries in f32, for CPUs without AVX-512 BF16: about
    /// 1.6-2.0x the f32 throughput on a Zen 3; every vector within cosine 0.99 of f32's
    /// (measured ≥ 0.9977), retrieval MRR@10 at most 0.005 below f32's (tested). The model
    /// does not load on CPUs without AVX2.
    Int8,
    /// bf16 where the CPU has AVX-512 BF16, else int8 where it has AVX2, else f32.
    Auto,
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

    /// The console (index.html and its assets, written by `scripts/build-console.sh`), looked
    /// at on every request: it may appear after the server has started.
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

    /// The embedding model directory (any BERT-family sentence-transformers layout).
    /// Default: the cache that scripts/fetch-model.sh fills.
    #[arg(long, env = "CAIRN_EMBED_MODEL", global = true)]
    pub embed_model: Option<PathBuf>,

    /// The embedder's arithmetic: auto (the default: bf16 where the CPU has AVX-512 BF16,
    /// else int8 where it has AVX2, else f32), f32 (the same vectors on every CPU, matching
    /// sentence-transformers to 1e-4), bf16 or int8. Vectors of every precision can share one
    /// index: each is within cosine 0.99 of f32's (measured ≥ 0.9977) and they rank alike
    /// (the retrieval test holds MRR@10 at most 0.005 below f32's).
    #[arg(
        long,
        env = "CAIRN_EMBED_PRECISION",
        value_enum,
        default_value_t = EmbedPrecision::Auto,
        global = true
    )]
    pub embed_precision: EmbedPrecision,

    /// Embedding plans in flight at once, each on all the embedder's compute lanes (one per
    /// core): with two, the next plan takes a lane as soon as the running one has nothing
    /// left for it. Search queries have a thread of their own whatever this says.
    #[arg(long, env = "CAIRN_EMBED_THREADS", default_value_t = cairn_embed::DEFAULT_THREADS, global = true)]
    pub embed_threads: usize,

    /// Job workers in this process. Four by default, whatever the cores: an ingest job spends
    /// most of its time waiting on the embedder, and the embedder merges the requests that
    /// wait together into one plan, so more documents in flight keep its compute lanes busy
    /// between one document and the next (measured on 2 cores, `cairn ingest` of 115 real
    /// files in bf16: the lanes busy 82% of the embedding time with 2 workers, 93% with 4;
    /// 34.9 → 30.6 s).
    #[arg(long, env = "CAIRN_WORKERS", default_value_t = 4, global = true)]
    pub workers: usize,

    /// A running job's lease: another worker may take it over this long after its last sign
    /// of life (a crash or restart is recovered within it).
    #[arg(
        long,
        env = "CAIRN_JOB_LEASE_SECS",
        default_value_t = 30,
        global = true
    )]
    pub job_lease_secs: u64,

    /// Longest time text extraction may take for one document, in seconds.
    #[arg(
        long,
        env = "CAIRN_EXTRACT_TIMEOUT_SECS",
        default_value_t = 120,
        global = true
    )]
    pub extract_timeout_secs: u64,

    /// Address-space limit of the child process that extracts one document, in MiB.
    #[arg(
        long,
        env = "CAIRN_EXTRACT_MEMORY_MB",
        default_value_t = 2048,
        global = true
    )]
    pub extract_memory_mb: u64,

    /// Read scanned PDF pages (pages without a text layer) and images by OCR (Tesseract, with
    /// poppler's pdftoppm for PDF pages), when Tesseract is installed.
    #[arg(long, env = "CAIRN_OCR", default_value_t = true, action = clap::ArgAction::Set, global = true)]
    pub ocr: bool,

    /// Tesseract's language(s) for OCR, e.g. `eng` or `deu+eng` (each must be installed).
    #[arg(long, env = "CAIRN_OCR_LANGUAGE", default_value = "eng", global = true)]
    pub ocr_language: String,

    /// Resolution PDF pages are rendered at for OCR, in dots per inch.
    #[arg(long, env = "CAIRN_OCR_DPI", default_value_t = 300, global = true)]
    pub ocr_dpi: u32,

    /// Longest time OCR may take for one page (rendering and recognition each), in seconds.
    #[arg(
        long,
        env = "CAIRN_OCR_PAGE_TIMEOUT_SECS",
        default_value_t = 60,
        global = true
    )]
    pub ocr_page_timeout_secs: u64,

    /// Address-space limit of each OCR program run (one page), in MiB.
    #[arg(
        long,
        env = "CAIRN_OCR_PAGE_MEMORY_MB",
        default_value_t = 1024,
        global = true
    )]
    pub ocr_page_memory_mb: u64,

    /// Pages one document's OCR recognizes at once (0: the number of cores, at most 4).
    #[arg(long, env = "CAIRN_OCR_JOBS", default_value_t = 0, global = true)]
    pub ocr_jobs: usize,

    /// Target chunk size in characters.
    #[arg(long, env = "CAIRN_CHUNK_SIZE", default_value_t = 1500, global = true)]
    pub chunk_size: usize,

    /// Trailing-paragraph overlap between chunks, in characters.
    #[arg(
        long,
        env = "CAIRN_CHUNK_OVERLAP",
        default_value_t = 200,
        global = true
    )]
    pub chunk_overlap: usize,

    /// pgvector `hnsw.ef_search` for the vector channel on PostgreSQL (higher: better recall,
    /// slower). Filtered scans continue iteratively until the channel depth is reached.
    #[arg(long, env = "CAIRN_PG_EF_SEARCH", default_value_t = 100, global = true)]
    pub pg_ef_search: u32,

    /// Base URL of an OpenAI-compatible chat API for the `chat` role (answers), everything
    /// before `/chat/completions`, e.g. `http://127.0.0.1:11434/v1`. Unset: answers are
    /// extractive.
    #[arg(long, env = "CAIRN_LLM_URL", global = true)]
    pub llm_url: Option<String>,

    /// Model name sent to the `chat` role's endpoint.
    #[arg(
        long,
        env = "CAIRN_LLM_MODEL",
        default_value = "gpt-4o-mini",
        global = true
    )]
    pub llm_model: String,

    /// Bearer key for the LLM endpoints (both roles).
    #[arg(long, env = "CAIRN_LLM_API_KEY", global = true, hide_env_values = true)]
    pub llm_api_key: Option<String>,

    /// Longest wait for one LLM reply, in seconds; past it the request fails with LLM_TIMEOUT.
    #[arg(
        long,
        env = "CAIRN_LLM_TIMEOUT_SECS",
        default_value_t = 60,
        global = true
    )]
    pub llm_timeout_secs: u64,

    /// Price of a million input tokens in USD (for `usage` rows and answer costs).
    #[arg(
        long,
        env = "CAIRN_LLM_PRICE_INPUT",
        default_value_t = 0.0,
        global = true
    )]
    pub llm_price_input: f64,

    /// Price of a million output tokens in USD.
    #[arg(
        long,
        env = "CAIRN_LLM_PRICE_OUTPUT",
        default_value_t = 0.0,
        global = true
    )]
    pub llm_price_output: f64,

    /// Base URL for the `utility` role (knowledge extraction); default: the `chat` role's.
    #[arg(long, env = "CAIRN_LLM_UTILITY_URL", global = true)]
    pub llm_utility_url: Option<String>,

    /// Model for the `utility` role; default: the `chat` role's.
    #[arg(long, env = "CAIRN_LLM_UTILITY_MODEL", global = true)]
    pub llm_utility_model: Option<String>,

    /// The instance's secret key (32 bytes as 64 hex digits or base64), which seals the API
    /// keys of teams' own model endpoints. Unset: `secret.key` in the data directory, created
    /// on first start. Instances sharing one PostgreSQL database must all set the same key.
    #[arg(long, env = "CAIRN_SECRET_KEY", global = true, hide_env_values = true)]
    pub secret_key: Option<String>,

    /// Names to hide from the LLM (comma-separated), besides emails, phone numbers and IBANs.
    #[arg(long, env = "CAIRN_PII_NAMES", value_delimiter = ',', global = true)]
    pub pii_names: Vec<String>,

    /// A file with more names to hide, one per line.
    #[arg(long, env = "CAIRN_PII_NAMES_FILE", global = true)]
    pub pii_names_file: Option<PathBuf>,

    /// Knowledge-graph extractor: `rules` (offline, deterministic), `llm` (the `utility` LLM
    /// role in JSON mode) or `local` (a GGUF model, `CAIRN_KG_LOCAL_MODEL`).
    #[arg(
        long,
        env = "CAIRN_KG_EXTRACTOR",
        default_value = "rules",
        global = true
    )]
    pub kg_extractor: String,

    /// The GGUF file (with `tokenizer.json` beside it) of the `local` extractor.
    #[arg(long, env = "CAIRN_KG_LOCAL_MODEL", global = true)]
    pub kg_local_model: Option<PathBuf>,

    /// Queue a knowledge extraction of each document right after it is ingested.
    #[arg(
        long,
        env = "CAIRN_KG_AUTO_EXTRACT",
        default_value_t = false,
        global = true
    )]
    pub kg_auto_extract: bool,

    /// Documents one team may have in extraction at once, across all its `kg_extract` runs
    /// (in this process).
    #[arg(
        long,
        env = "CAIRN_KG_TEAM_CONCURRENCY",
        default_value_t = 2,
        global = true
    )]
    pub kg_team_concurrency: usize,

    /// Documents one team may have extracted in a rolling 24 hours (counted from the
    /// `kg_extractions` markers); 0 means unlimited. When spent, `extractKnowledge` answers
    /// QUOTA_EXCEEDED and a run in progress stops taking documents.
    #[arg(
        long,
        env = "CAIRN_KG_DAILY_DOCS",
        default_value_t = 2000,
        global = true
    )]
    pub kg_daily_docs: u64,

    /// Searches (`search`, `searchAll`, `answer`) one user may start per second, sustained
    /// (a token bucket per user); 0 means unlimited. Past it: RATE_LIMITED.
    #[arg(long, env = "CAIRN_SEARCH_RATE", default_value_t = 10.0, global = true)]
    pub search_rate: f64,

    /// How many searches one user may start at once before the rate applies (the bucket's
    /// size).
    #[arg(long, env = "CAIRN_SEARCH_BURST", default_value_t = 40, global = true)]
    pub search_burst: u32,

    /// Whether `suggestedContext` also pre-fetches the top 25 entries of the `data_catalog`
    /// system corpus (seed 004 keeps it off: the model calls the catalog search itself).
    #[arg(
        long,
        env = "CAIRN_PREFETCH_DATA_CATALOG",
        default_value_t = false,
        global = true
    )]
    pub prefetch_data_catalog: bool,

    /// BM25's term-frequency saturation `k1` for the lexical channel (Lucene's default).
    #[arg(long, env = "CAIRN_BM25_K1", default_value_t = 1.2, global = true)]
    pub bm25_k1: f64,

    /// BM25's length normalization `b` (0: none, 1: full; Lucene's default 0.75).
    #[arg(long, env = "CAIRN_BM25_B", default_value_t = 0.75, global = true)]
    pub bm25_b: f64,

    /// How many body occurrences a term's occurrence in a chunk's heading counts as.
    #[arg(
        long,
        env = "CAIRN_LEXICAL_HEADING_WEIGHT",
        default_value_t = 2.0,
        global = true
    )]
    pub lexical_heading_weight: f64,

    /// HYBRID's RRF constant for the vector channel (a rank-r hit adds 1 / (k + r)).
    #[arg(
        long,
        env = "CAIRN_RRF_K_VECTOR",
        default_value_t = 60.0,
        global = true
    )]
    pub rrf_k_vector: f64,

    /// HYBRID's RRF constant for the lexical channel.
    #[arg(
        long,
        env = "CAIRN_RRF_K_LEXICAL",
        default_value_t = 60.0,
        global = true
    )]
    pub rrf_k_lexical: f64,

    /// The lexical channel's weight in HYBRID (a rank-r hit adds weight / (k + r)).
    #[arg(
        long,
        env = "CAIRN_RRF_LEXICAL_WEIGHT",
        default_value_t = 1.0,
        global = true
    )]
    pub rrf_lexical_weight: f64,

    /// processDocument looks for a better type (and may extend the taxonomy) when the
    /// classification's confidence is under this.
    #[arg(
        long,
        env = "CAIRN_PROCESS_MIN_CONFIDENCE",
        default_value_t = 0.5,
        global = true
    )]
    pub process_min_confidence: f64,

    /// Log format on stderr.
    #[arg(long, env = "CAIRN_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,
}

/// An LLM role's endpoint as configured.
pub struct LlmRole {
    pub url: String,
    pub model: String,
}

impl Config {
    /// The `chat` role (answers), if an endpoint is configured.
    pub fn llm_chat(&self) -> Option<LlmRole> {
        self.llm_url.as_ref().map(|url| LlmRole {
            url: url.clone(),
            model: self.llm_model.clone(),
        })
    }

    /// The `utility` role (knowledge extraction): its own endpoint or model, else the chat
    /// role's.
    pub fn llm_utility(&self) -> Option<LlmRole> {
        let url = self.llm_utility_url.as_ref().or(self.llm_url.as_ref())?;
        Some(LlmRole {
            url: url.clone(),
            model: self
                .llm_utility_model
                .clone()
                .unwrap_or_else(|| self.llm_model.clone()),
        })
    }

    /// Every configured PII name: the list, then the file's lines.
    pub fn pii_name_list(&self) -> std::io::Result<Vec<String>> {
        let mut names: Vec<String> = self
            .pii_names
            .iter()
            .map(|n| n.trim().to_owned())
            .filter(|n| !n.is_empty())
            .collect();
        if let Some(f) = &self.pii_names_file {
            names.extend(
                std::fs::read_to_string(f)?
                    .lines()
                    .map(|l| l.trim().to_owned())
                    .filter(|l| !l.is_empty() && !l.starts_with('#')),
            );
        }
        Ok(names)
    }

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
            embed_model: None,
            embed_precision: EmbedPrecision::Auto,
            embed_threads: cairn_embed::DEFAULT_THREADS,
            workers: 2,
            job_lease_secs: 30,
            extract_timeout_secs: 120,
            extract_memory_mb: 2048,
            ocr: true,
            ocr_language: "eng".into(),
            ocr_dpi: 300,
            ocr_page_timeout_secs: 60,
            ocr_page_memory_mb: 1024,
            ocr_jobs: 0,
            chunk_size: 1500,
            chunk_overlap: 200,
            pg_ef_search: 100,
            llm_url: None,
            llm_model: "gpt-4o-mini".into(),
            llm_api_key: None,
            llm_timeout_secs: 60,
            llm_price_input: 0.0,
            llm_price_output: 0.0,
            llm_utility_url: None,
            llm_utility_model: None,
            secret_key: None,
            pii_names: Vec::new(),
            pii_names_file: None,
            kg_extractor: "rules".into(),
            kg_local_model: None,
            kg_auto_extract: false,
            kg_team_concurrency: 2,
            kg_daily_docs: 2000,
            search_rate: 10.0,
            search_burst: 40,
            prefetch_data_catalog: false,
            bm25_k1: 1.2,
            bm25_b: 0.75,
            lexical_heading_weight: 2.0,
            rrf_k_vector: 60.0,
            rrf_k_lexical: 60.0,
            rrf_lexical_weight: 1.0,
            process_min_confidence: 0.5,
            log_format: LogFormat::Text,
        }
    }

    /// The knowledge-extraction limits.
    /// OCR as configured, when it is switched on and Tesseract with the language is found on
    /// `PATH`; `Err` says why not (for a warning at start).
    pub fn ocr(&self) -> Result<Option<cairn_extract::ocr::Ocr>, String> {
        if !self.ocr {
            return Ok(None);
        }
        let path = std::env::var("PATH").ok();
        let mut ocr = cairn_extract::ocr::Ocr::locate(path.as_deref(), &self.ocr_language)?;
        ocr.dpi = self.ocr_dpi;
        ocr.page_timeout = std::time::Duration::from_secs(self.ocr_page_timeout_secs.max(1));
        ocr.page_memory_mb = self.ocr_page_memory_mb;
        if self.ocr_jobs > 0 {
            ocr.jobs = self.ocr_jobs;
        }
        Ok(Some(ocr))
    }

    pub fn kg_limits(&self) -> crate::knowledge::KgLimits {
        crate::knowledge::KgLimits {
            team_concurrency: self.kg_team_concurrency.max(1),
            daily_docs: self.kg_daily_docs,
        }
    }

    /// The per-user search rate limit.
    pub fn search_limit(&self) -> crate::service::RateLimit {
        crate::service::RateLimit {
            per_second: self.search_rate.max(0.0),
            burst: self.search_burst.max(1),
        }
    }

    /// The lexical channel's BM25 parameters (out-of-range values are clamped).
    pub fn bm25(&self) -> crate::domain::lexical::Bm25 {
        crate::domain::lexical::Bm25 {
            k1: self.bm25_k1.max(0.0),
            b: self.bm25_b.clamp(0.0, 1.0),
            heading_weight: self.lexical_heading_weight.max(0.0),
        }
    }

    /// HYBRID's fusion (constants at least 1, weight at least 0).
    pub fn fusion(&self) -> crate::domain::search::Fusion {
        crate::domain::search::Fusion {
            k_vector: self.rrf_k_vector.max(1.0),
            k_lexical: self.rrf_k_lexical.max(1.0),
            lexical_weight: self.rrf_lexical_weight.max(0.0),
        }
    }

    /// The embedding model directory: configured, or the default cache.
    pub fn embed_model_dir(&self) -> PathBuf {
        self.embed_model.clone().unwrap_or_else(|| {
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_default();
            home.join(".cache/cairn/models/all-MiniLM-L6-v2")
        })
    }
}
