//! Cairn's local sentence embedder: a BERT-family model (default all-MiniLM-L6-v2) run with
//! candle, shaped after text-embeddings-inference.
//!
//! # Thread model
//!
//! The model never runs on the async runtime. [`Embedder::load`] loads the model (blocking: call
//! it from `spawn_blocking` or before the runtime starts) and spawns [`EmbedConfig::threads`]
//! plain `std::thread` workers that share it; [`Embedder::start`] checks the model directory,
//! returns, and does the same on a thread of its own (requests wait in the queues meanwhile). [`Embedder`] is a cheap `Clone` handle holding the
//! sending side of a bounded request queue; each request carries a
//! [`tokio::sync::oneshot`] sender for its reply. Tokenization, batching, the forward pass and
//! pooling all happen on the worker that picked the request up, so an `.await` on
//! [`Embedder::embed`] only ever waits for queue room and for the reply.
//!
//! * Requests waiting together are embedded as one plan: see `worker`.
//! * Search queries ([`Embedder::embed_query`]) have a queue and a thread of their own, which
//!   runs each query's forward pass itself (`query_worker`), so a query never waits behind an
//!   ingest's plans.
//! * A full queue makes `embed` wait (back-pressure) rather than grow without bound.
//! * If the caller drops the future, the worker notices the closed reply channel after the
//!   current batch and abandons the rest of the request.
//! * A panic inside a request is caught and returned as [`EmbedError::Inference`]; the worker
//!   keeps serving. When every handle is dropped, the queue closes and the workers exit.
//! * The forward pass itself runs on the model's *compute lanes* ([`EmbedConfig::compute_threads`],
//!   default one per core): single-thread pools, each taking whole slices of a batch (rows are
//!   independent), so a batch keeps every core busy without candle's per-op fork/join. A
//!   plan of one slice runs on one lane (plans start on the lanes in turn). With `threads` > 1
//!   (default 2) a second plan waits on every lane behind the running one and takes each lane
//!   as soon as the running plan has no slice left for it, so a plan's end never idles a
//!   core while more work waits ([`DEFAULT_THREADS`]). Call
//!   [`configure_process`] first thing in `main` (see there why).
//!
//! # Batching
//!
//! One `embed` call tokenizes all its texts (truncating each at `max_seq_len` tokens, special
//! tokens included), sorts them by token length, longest first, and packs consecutive texts
//! into a batch while `rows × longest row` stays within [`EmbedConfig::batch_token_budget`]
//! padded tokens. Each batch is padded only to its own longest row, so sorting keeps padding
//! (wasted compute) small. On CPU a batch larger than 2048 padded tokens goes through the model
//! in slices of rows of about that size (rows are independent, so the vectors are unchanged):
//! measured on 2 cores, one pass over a full 16k-token batch was ~1.3-1.5x slower, its
//! ~100 MB intermediates streaming through memory instead of staying in cache. The budget still
//! bounds the batch, the unit of progress reports and usage rows. Vectors come back in the
//! caller's original order. After every batch
//! a [`BatchDone`] goes to the optional progress channel: the running count of texts done, the
//! total, and the real (unpadded) tokens in that batch, which the server turns into progress
//! events and usage rows.
//!
//! # Pooling and normalization
//!
//! The model directory is a sentence-transformers export: `config.json` (a BERT config),
//! `model.safetensors` (weights with or without a `bert.`-style prefix), `tokenizer.json`.
//! Its baked-in padding and truncation are overridden: no fixed padding, truncation at
//! `max_seq_len` (capped at the model's `max_position_embeddings`).
//!
//! * **Pooling** comes from the Pooling module's `config.json` (the directory `modules.json`
//!   names for it, else `1_Pooling/`): `pooling_mode_cls_token` alone gives [`Pooling::Cls`]
//!   (the first token's hidden state); `pooling_mode_mean_tokens`, or no pooling config at all,
//!   gives [`Pooling::Mean`] (the average of the hidden states over the attention mask, so
//!   padding never counts). Other modes (max, mean-sqrt-len, weighted mean, last token, several
//!   at once) are refused at load time rather than silently approximated.
//! * **Normalization**: vectors are L2-normalized exactly when `modules.json` lists a
//!   `Normalize` module (type `sentence_transformers.models.Normalize`), as sentence-transformers
//!   itself would. all-MiniLM-L6-v2 does, so its vectors have unit length and cosine similarity
//!   is a dot product. No `modules.json` means no normalization.
//!
//! # Model
//!
//! `config.json` is read into the crate's own `bert::Config` (Hugging Face's `BertConfig`
//! fields), and the encoder is this crate's inference-only BERT (module `bert`), which takes the same weights but fuses the
//! query/key/value projections into one matmul, uses candle's fused softmax and runs exact GELU
//! as a vectorized CPU op, the way text-embeddings-inference restructures BERT for speed. The
//! parity test holds its output to sentence-transformers' within 1e-4 (measured: ~2e-7).
//!
//! # Device
//!
//! CPU, f32 by default; [`Precision::Bf16`] (or [`Precision::Auto`] on a CPU that has AVX-512
//! BF16) runs the dense layers in bfloat16 on this crate's own kernel (module `bf16`), about
//! 1.5-2x faster; [`Precision::Int8`] (or `Auto` on a CPU with AVX2 but no AVX-512 BF16) runs
//! passages in 8-bit integers (module `int8`) and queries in f32. Built with the `cuda` feature, the first CUDA device is used when present (untested
//! here). The default `avx512` feature switches on the AVX-512 kernels of candle's matrix
//! multiply (`gemm`'s `x86-v4`), chosen at run time only on CPUs that have AVX-512.

mod batch;
mod bert;
mod bf16;
mod error;
mod int8;
mod model;

use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use tokio::sync::{mpsc, oneshot};

pub use error::EmbedError;

use model::{Layout, Model};

/// Default truncation length in tokens (sentence-transformers' `max_seq_length` for MiniLM).
pub const DEFAULT_MAX_SEQ_LEN: usize = 256;
/// Default budget of padded tokens per batch.
pub const DEFAULT_BATCH_TOKEN_BUDGET: usize = 16_384;
/// Default number of worker threads (each serving one plan at a time, on all compute lanes).
/// Two, so that a plan's last slices never leave a lane idle: the second worker's plan is
/// queued on every lane behind the first one's and starts on each lane as soon as that lane
/// finds nothing left of the first plan. Measured on 2 cores, `cairn ingest` of 115 real
/// documents in bf16: with one worker the lanes were busy 93% of the plans' time (58 plans,
/// each ending on one lane); the ingest took 14.60-15.62 s with one, 14.10-14.86 s with two.
pub const DEFAULT_THREADS: usize = 2;
/// Requests that may wait in the queue before `embed` waits for room.
const QUEUE_CAPACITY: usize = 64;

/// How the embedder is set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbedConfig {
    /// A sentence-transformers model directory (`config.json`, `model.safetensors`,
    /// `tokenizer.json`, optional `modules.json` and `1_Pooling/config.json`).
    pub model_dir: PathBuf,
    /// Inputs longer than this many tokens (special tokens included) are truncated.
    pub max_seq_len: usize,
    /// Most padded tokens (rows × longest row) in one forward pass.
    pub batch_token_budget: usize,
    /// Bulk worker threads, each serving one plan at a time on every compute lane (0 is taken
    /// as 1; default [`DEFAULT_THREADS`]). Search queries have one more thread of their own.
    pub threads: usize,
    /// Compute lanes: single-thread pools that run a batch's slices side by side (0: one per
    /// available core). See the crate docs' thread model.
    pub compute_threads: usize,
    /// The dense layers' arithmetic (see [`Precision`]).
    pub precision: Precision,
}

/// The arithmetic of the dense layers (the matrix multiplies that are most of a forward pass).
/// Attention, layer norms and pooling stay in f32 whatever this says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Precision {
    /// f32 throughout: the vectors match sentence-transformers' to 1e-4. The default, so that
    /// vectors do not depend on the CPU they were computed on.
    #[default]
    F32,
    /// Weights and activations rounded to bfloat16, products summed in f32, on AVX-512 BF16
    /// (`vdpbf16ps`: twice an f32 FMA's multiply-adds per instruction). Each vector keeps a
    /// cosine ≥ 0.99 to its f32 self (tested; measured ~0.9999). Loading fails with
    /// [`EmbedError::ModelLoad`] on a CPU without AVX-512 BF16.
    Bf16,
    /// Passages in 8-bit integers, search queries in f32. For passages, the dense layers'
    /// weights are rounded to integers in `[-90, 90]` per output column, activations to bytes
    /// in `[0, 181]` per token (layer-normed inputs smoothed per channel, calibrated when the
    /// model loads), products summed exactly in `i32`, on AVX2 (`vpmaddubsw`: 32 multiply-adds
    /// per instruction pair, against 8 for an f32 FMA; module `int8`), for CPUs without AVX-512
    /// BF16. Each vector keeps a cosine ≥ 0.99 to its f32 self (tested; measured ≥ 0.9977).
    ///
    /// [`Embedder::embed_query`] runs the f32 model (kept beside the 8-bit one: its dense
    /// weights are 10.6 million f32s, ~42 MB; idle RSS of the server 151 MB against f32's 133): a
    /// query is one short text a person waits on, where 8-bit saves little, and its rounding
    /// would add to every passage's in every score. Measured on the retrieval test's tuning
    /// half (`embed/examples/quant_eval.rs`, a Zen 3): with queries rounded too, the spread of
    /// score errors over each query's f32 top 20 is 4.36·10⁻³ (handbook) and 3.81·10⁻³ (lee),
    /// document MRR@10 0.034 below f32's on the handbook's tuning half; with f32 queries,
    /// 3.43·10⁻³ and 3.06·10⁻³, and MRR equal to f32's. In the retrieval test (all its labelled
    /// queries) every MRR@10 is at most 0.0039 below f32's. Loading fails with
    /// [`EmbedError::ModelLoad`] on a CPU without AVX2.
    Int8,
    /// The fastest precision this CPU runs at f32's retrieval quality, chosen when the model
    /// loads: `Bf16` where the CPU has AVX-512 BF16, else `Int8` where it has AVX2 and FMA,
    /// else `F32`.
    Auto,
}

impl Precision {
    /// `Auto` made concrete for this CPU; `F32` and `Bf16` stay as they are.
    pub fn resolve(self) -> Self {
        match self {
            Self::Auto if bf16::supported() => Self::Bf16,
            Self::Auto if int8::supported() => Self::Int8,
            Self::Auto => Self::F32,
            p => p,
        }
    }

    /// `"f32"`, `"bf16"`, `"int8"` or `"auto"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::F32 => "f32",
            Self::Bf16 => "bf16",
            Self::Int8 => "int8",
            Self::Auto => "auto",
        }
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Precision {
    type Err = EmbedError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "f32" => Ok(Self::F32),
            "bf16" => Ok(Self::Bf16),
            "int8" => Ok(Self::Int8),
            "auto" => Ok(Self::Auto),
            other => Err(EmbedError::ModelLoad(format!(
                "unknown embedding precision {other:?} (expected f32, bf16, int8 or auto)"
            ))),
        }
    }
}

impl EmbedConfig {
    /// The defaults for a model directory: 256 tokens, 16384 padded tokens per batch,
    /// [`DEFAULT_THREADS`] workers, one compute lane per core, f32.
    pub fn new(model_dir: impl Into<PathBuf>) -> Self {
        Self {
            model_dir: model_dir.into(),
            max_seq_len: DEFAULT_MAX_SEQ_LEN,
            batch_token_budget: DEFAULT_BATCH_TOKEN_BUDGET,
            threads: DEFAULT_THREADS,
            compute_threads: 0,
            precision: Precision::F32,
        }
    }
}

/// How token states become one vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// Average over the non-padding tokens.
    Mean,
    /// The first token's (`[CLS]`) hidden state.
    Cls,
}

/// Sent on the progress channel after every batch of an [`Embedder::embed`] call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchDone {
    /// Texts of this call embedded so far, this batch included.
    pub done: usize,
    /// Texts in this call.
    pub total: usize,
    /// Real (unpadded) tokens in this batch, special tokens included: the usage to record.
    pub tokens: usize,
}

struct Job {
    texts: Vec<String>,
    progress: Option<mpsc::UnboundedSender<BatchDone>>,
    /// Set for [`Embedder::embed_query`]: warn when the text is truncated.
    query: bool,
    reply: oneshot::Sender<Result<Vec<Vec<f32>>, EmbedError>>,
}

#[derive(Debug)]
struct Info {
    model_name: String,
    dim: usize,
    max_seq_len: usize,
    pooling: Pooling,
    normalize: bool,
    device: &'static str,
    precision: Precision,
}

/// A cheap, cloneable handle to the embedding worker(s). Dropping the last handle stops them.
#[derive(Clone)]
pub struct Embedder {
    queue: mpsc::Sender<Job>,
    /// Search queries: served by a thread of their own (see [`query_worker`]).
    queries: mpsc::Sender<Job>,
    info: Arc<Info>,
    model: Arc<Loaded>,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("info", &self.info)
            .finish()
    }
}

/// The model once its weights are read: at once after [`Embedder::load`], some time after
/// [`Embedder::start`].
struct Loaded {
    state: Mutex<Option<Result<Arc<Model>, String>>>,
    ready: Condvar,
}

impl Loaded {
    fn new() -> Self {
        Self {
            state: Mutex::new(None),
            ready: Condvar::new(),
        }
    }

    fn set(&self, outcome: Result<Arc<Model>, String>) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        *state = Some(outcome);
        self.ready.notify_all();
    }

    /// Blocks until the load ended; the model, or why it did not load.
    fn wait(&self) -> Result<Arc<Model>, EmbedError> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            match &*state {
                Some(Ok(model)) => return Ok(Arc::clone(model)),
                Some(Err(why)) => return Err(EmbedError::ModelLoad(why.clone())),
                None => {
                    state = self
                        .ready
                        .wait(state)
                        .unwrap_or_else(PoisonError::into_inner)
                }
            }
        }
    }
}

fn log_loaded(info: &Info, threads: usize, took: Option<std::time::Duration>) {
    tracing::info!(
        model = %info.model_name,
        dim = info.dim,
        max_seq_len = info.max_seq_len,
        pooling = ?info.pooling,
        normalize = info.normalize,
        device = info.device,
        precision = %info.precision,
        threads = threads.max(1),
        load_ms = took.map(|t| t.as_secs_f64() * 1e3),
        "embedder loaded"
    );
}

/// The receiving ends of an embedder's two queues, before anything serves them.
struct Queues {
    bulk: mpsc::Receiver<Job>,
    queries: mpsc::Receiver<Job>,
}

impl Queues {
    /// Starts `threads` workers on the bulk queue and the query thread.
    fn serve(self, model: &Arc<Model>, threads: usize) -> Result<(), EmbedError> {
        let rx = Arc::new(Mutex::new(self.bulk));
        for n in 0..threads.max(1) {
            let model = Arc::clone(model);
            let rx = Arc::clone(&rx);
            std::thread::Builder::new()
                .name(format!("cairn-embed-{n}"))
                .spawn(move || worker(&model, &rx))
                .map_err(|e| EmbedError::load("spawning embedding worker thread", e))?;
        }
        // The query thread's own pool of one thread: candle's kernels look for the current
        // rayon pool, and the global one would split a query's ops across the busy cores.
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .thread_name(|_| "cairn-embed-query".to_owned())
            .build()
            .map_err(|e| EmbedError::load("starting the query thread", e))?;
        let model = Arc::clone(model);
        let queries = self.queries;
        std::thread::Builder::new()
            .name("cairn-embed-queries".to_owned())
            .spawn(move || query_worker(&model, &pool, queries))
            .map_err(|e| EmbedError::load("spawning the query thread", e))?;
        Ok(())
    }

    /// Answers every request, until the handles are gone, with why the model did not load.
    fn refuse(self, why: &str) {
        let Self {
            mut bulk,
            mut queries,
        } = self;
        let refused = why.to_owned();
        let spawned = std::thread::Builder::new()
            .name("cairn-embed-queries".to_owned())
            .spawn(move || {
                while let Some(job) = queries.blocking_recv() {
                    let _ = job.reply.send(Err(EmbedError::ModelLoad(refused.clone())));
                }
            });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "spawning the query thread");
        }
        while let Some(job) = bulk.blocking_recv() {
            let _ = job.reply.send(Err(EmbedError::ModelLoad(why.to_owned())));
        }
    }
}

impl Embedder {
    /// Loads the model directory and starts the worker thread(s). Blocking (reads the weights).
    pub fn load(cfg: EmbedConfig) -> Result<Self, EmbedError> {
        let layout = Layout::read(&cfg)?;
        let (embedder, queues) = Self::handle(&cfg, &layout);
        let model = Arc::new(Model::load(&cfg, layout)?);
        embedder.model.set(Ok(Arc::clone(&model)));
        queues.serve(&model, cfg.threads)?;
        log_loaded(&embedder.info, cfg.threads, None);
        Ok(embedder)
    }

    /// Checks the model directory and returns at once (blocking only to read its small JSON
    /// files), while the weights and the tokenizer load on a thread of their own (~0.3 s for
    /// MiniLM on 2 cores): requests made meanwhile wait for them, so a server or `cairn
    /// ingest` opens its database, takes uploads and extracts the first documents during the
    /// load instead of after it. A directory that is missing, or whose `config.json`, pooling,
    /// weights or tokenizer file is missing or wrong, or a precision the CPU lacks, fails here
    /// as in [`Embedder::load`]; weights that turn out unreadable fail every request with
    /// [`EmbedError::ModelLoad`] (and an `error!` line at the moment the load fails).
    pub fn start(cfg: EmbedConfig) -> Result<Self, EmbedError> {
        let layout = Layout::read(&cfg)?;
        let (embedder, queues) = Self::handle(&cfg, &layout);
        // The loading thread keeps the description and the model's slot, not the senders
        // (holding those would keep the queues open after the last real handle is dropped).
        let (info, slot) = (Arc::clone(&embedder.info), Arc::clone(&embedder.model));
        std::thread::Builder::new()
            .name("cairn-embed-load".to_owned())
            .spawn(move || {
                let started = std::time::Instant::now();
                let loaded = Model::load(&cfg, layout).map(Arc::new);
                match loaded {
                    Ok(model) => {
                        slot.set(Ok(Arc::clone(&model)));
                        match queues.serve(&model, cfg.threads) {
                            Ok(()) => {
                                log_loaded(&info, cfg.threads, Some(started.elapsed()));
                            }
                            Err(e) => tracing::error!(error = %e, "the embedder did not start"),
                        }
                    }
                    Err(e) => {
                        tracing::error!(error = %e, dir = %cfg.model_dir.display(),
                            "the embedding model did not load: every embedding request fails");
                        let why = match e {
                            EmbedError::ModelLoad(why) => why,
                            other => other.to_string(),
                        };
                        slot.set(Err(why.clone()));
                        queues.refuse(&why);
                    }
                }
            })
            .map_err(|e| EmbedError::load("spawning the model-loading thread", e))?;
        Ok(embedder)
    }

    /// A handle and its queues' receiving ends, described from `layout`.
    fn handle(cfg: &EmbedConfig, layout: &Layout) -> (Self, Queues) {
        let model_name = std::fs::canonicalize(&cfg.model_dir)
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| cfg.model_dir.display().to_string());
        let info = Arc::new(Info {
            model_name,
            dim: layout.dim(),
            max_seq_len: layout.max_seq_len,
            pooling: layout.pooling,
            normalize: layout.normalize,
            device: layout.device_name(),
            precision: layout.precision,
        });
        let (queue, bulk) = mpsc::channel::<Job>(QUEUE_CAPACITY);
        let (queries, query_rx) = mpsc::channel::<Job>(QUEUE_CAPACITY);
        (
            Self {
                queue,
                queries,
                info,
                model: Arc::new(Loaded::new()),
            },
            Queues {
                bulk,
                queries: query_rx,
            },
        )
    }

    /// Embedding dimension (the model's hidden size).
    pub fn dim(&self) -> usize {
        self.info.dim
    }

    /// The model directory's name, e.g. `all-MiniLM-L6-v2`.
    pub fn model_name(&self) -> &str {
        &self.info.model_name
    }

    /// The effective truncation length in tokens.
    pub fn max_seq_len(&self) -> usize {
        self.info.max_seq_len
    }

    /// The pooling read from the model directory.
    pub fn pooling(&self) -> Pooling {
        self.info.pooling
    }

    /// Whether vectors are L2-normalized (the model directory lists a `Normalize` module).
    pub fn normalizes(&self) -> bool {
        self.info.normalize
    }

    /// `"cpu"` or `"cuda"`.
    pub fn device(&self) -> &'static str {
        self.info.device
    }

    /// The dense layers' precision in use (never [`Precision::Auto`]: that is resolved at load).
    pub fn precision(&self) -> Precision {
        self.info.precision
    }

    /// The token ids the model sees for `text` (special tokens included, truncated at
    /// `max_seq_len`). Runs the tokenizer on the calling thread: cheap, but CPU work, so keep
    /// it to single texts on an async runtime (chunk sizing, tests). After
    /// [`Embedder::start`], it first waits for the model to load.
    pub fn tokenize(&self, text: &str) -> Result<Vec<u32>, EmbedError> {
        let mut encodings = self.model.wait()?.tokenize(&[text.to_owned()])?;
        Ok(encodings
            .pop()
            .map(|e| e.get_ids().to_vec())
            .unwrap_or_default())
    }

    /// Embeds `texts`, returning one vector per text in the same order. Texts longer than
    /// `max_seq_len` tokens are truncated (one `warn!` per call counts them). `progress`, if
    /// given, receives a [`BatchDone`] after every batch.
    pub async fn embed(
        &self,
        texts: Vec<String>,
        progress: Option<mpsc::UnboundedSender<BatchDone>>,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let (reply, rx) = oneshot::channel();
        let job = Job {
            texts,
            progress,
            query: false,
            reply,
        };
        self.queue
            .send(job)
            .await
            .map_err(|_| EmbedError::WorkerGone)?;
        rx.await.map_err(|_| EmbedError::WorkerGone)?
    }

    /// Embeds one search query. A query longer than `max_seq_len` tokens is truncated with a
    /// `tracing::warn!`, never refused.
    pub async fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let (reply, rx) = oneshot::channel();
        let job = Job {
            texts: vec![text.to_owned()],
            progress: None,
            query: true,
            reply,
        };
        self.queries
            .send(job)
            .await
            .map_err(|_| EmbedError::WorkerGone)?;
        single(rx.await.map_err(|_| EmbedError::WorkerGone)??)
    }

    /// [`Embedder::embed`] for synchronous callers (benches, the CLI). Blocks the calling
    /// thread; panics if called from inside an async runtime (tokio forbids blocking there).
    pub fn embed_blocking(
        &self,
        texts: Vec<String>,
        progress: Option<mpsc::UnboundedSender<BatchDone>>,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let (reply, rx) = oneshot::channel();
        let job = Job {
            texts,
            progress,
            query: false,
            reply,
        };
        self.queue
            .blocking_send(job)
            .map_err(|_| EmbedError::WorkerGone)?;
        rx.blocking_recv().map_err(|_| EmbedError::WorkerGone)?
    }
}

/// Prepares the process for the compute lanes; call it first thing in `main`, before any other
/// thread exists (it sets an environment variable, which is only sound while the process has
/// one thread).
///
/// candle runs its element-wise CPU ops on a process-wide spinning pool sized by
/// `CANDLE_NUM_THREADS` (default: one thread per core), one op at a time behind a lock. The
/// compute lanes already keep every core busy, each with a slice of its own, so that pool only
/// makes them queue for each other: this sets `CANDLE_NUM_THREADS=1` (each op runs on the lane
/// that asked) unless the variable is already set. Measured on 2 cores, 1,000 sentences of ~40
/// tokens: 114 sentences/s without it, 133 with it. Without the call everything still works.
///
/// On glibc it also sets the allocator's mmap and trim thresholds ([`MMAP_THRESHOLD`],
/// [`TRIM_THRESHOLD`]) unless `GLIBC_TUNABLES` or a `MALLOC_*_` variable already says
/// something: see there why.
pub fn configure_process() {
    if std::env::var_os("CANDLE_NUM_THREADS").is_none() {
        std::env::set_var("CANDLE_NUM_THREADS", "1");
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("GLIBC_TUNABLES").is_none()
        && std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none()
        && std::env::var_os("MALLOC_TRIM_THRESHOLD_").is_none()
    {
        for (param, value) in [
            (libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD),
            (libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD),
        ] {
            #[allow(unsafe_code)]
            // SAFETY: `mallopt` only sets a parameter of glibc's allocator, which takes its
            // own lock; both values are in the ranges glibc accepts (the mmap threshold at
            // most 32 MiB on 64-bit).
            let accepted = unsafe { libc::mallopt(param, value) };
            if accepted != 1 {
                tracing::debug!(param, value, "mallopt refused; the allocator keeps its own");
            }
        }
    }
}

/// Allocations below this many bytes come from the allocator's heaps, above it from fresh
/// `mmap`s, on glibc once [`configure_process`] has run.
///
/// A forward pass allocates every op's output anew (candle's tensors own their buffers), and
/// on a slice of ~180-token chunks many of those are megabytes: attention scores of 12 heads,
/// the intermediate layer's 1,536 columns. glibc's default threshold starts at 128 KiB and
/// grows only when such a block is freed, and its heaps give memory back to the kernel once
/// 128 KiB lie free at their top, so each pass faulted the same pages in again, zeroed one
/// by one. Measured on a Zen 3 (2 cores, 397 chunks of ~180 tokens, the throughput bench, as
/// `GLIBC_TUNABLES` first): int8, 2.1 million minor faults and 5.4 s of system time in 41 s
/// of CPU by default, 0.15 million and 0.55 s with both thresholds set (5-14% more chunks
/// per second); f32 3.3 million → 1.7 million. Setting only the trim threshold is far worse
/// (10 million faults: it also pins the mmap threshold at its 128 KiB start); only the mmap
/// threshold leaves 0.4 million (int8).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub const MMAP_THRESHOLD: i32 = 32 << 20;

/// Free memory the allocator keeps at the top of a heap before giving it back to the kernel
/// (see [`MMAP_THRESHOLD`]): above a forward pass's working set, so that one pass's buffers
/// are the next one's. The cost is that a process keeps its peak embedding memory after an
/// ingest (measured: peak RSS of the throughput bench 363-385 MB by default, 376-418 MB).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub const TRIM_THRESHOLD: i32 = 128 << 20;

fn single(mut vectors: Vec<Vec<f32>>) -> Result<Vec<f32>, EmbedError> {
    match (vectors.pop(), vectors.is_empty()) {
        (Some(v), true) => Ok(v),
        _ => Err(EmbedError::Inference(
            "expected exactly one vector for one input".into(),
        )),
    }
}

/// A worker: takes one request at a time off the shared queue until it closes.
/// Most texts one merged plan takes from the queue (see [`worker`]).
const MERGE_TEXTS: usize = 1024;

/// Serves the queue. Whatever is waiting when a request is taken joins it, up to
/// [`MERGE_TEXTS`] texts, and they run as **one plan**, their texts sorted by length together
/// (queries never come here: see [`query_worker`]), so that several small
/// requests (an ingest's documents, a few chunks each) fill batches of near-equal lengths
/// instead of each padding its own short batches (measured on an ingest of 114 documents:
/// 19% more padded tokens per document than over all of them). Each request is still told its
/// own progress and gets its own vectors back.
fn worker(model: &Model, queue: &Mutex<mpsc::Receiver<Job>>) {
    loop {
        let mut jobs = Vec::new();
        {
            // Only the receive happens under the lock; a poisoned lock still guards a usable
            // receiver (nothing panics while holding it).
            let mut rx = match queue.lock() {
                Ok(guard) => guard,
                Err(poisoned) => poisoned.into_inner(),
            };
            let waiting = std::time::Instant::now();
            let Some(first) = rx.blocking_recv() else {
                break;
            };
            tracing::trace!(
                waited_ms = waiting.elapsed().as_secs_f64() * 1e3,
                "embedding worker took a request"
            );
            let mut texts = first.texts.len();
            jobs.push(first);
            while texts < MERGE_TEXTS {
                match rx.try_recv() {
                    Ok(job) => {
                        texts += job.texts.len();
                        jobs.push(job);
                    }
                    Err(_) => break,
                }
            }
        }
        match jobs.len() {
            0 => {}
            1 => {
                if let Some(job) = jobs.pop() {
                    serve(model, job);
                }
            }
            _ => serve_merged(model, jobs),
        }
    }
    tracing::debug!("embedding worker exiting: queue closed");
}

/// Serves search queries ([`Embedder::embed_query`]), one at a time, each on this thread
/// inside `pool` (one thread), never on the compute lanes: a query is one short text that a
/// person waits on, and behind an ingest's plans it would wait for all of them. While an
/// ingest runs, the query shares the cores with the lanes for its few milliseconds.
fn query_worker(model: &Model, pool: &rayon::ThreadPool, mut queue: mpsc::Receiver<Job>) {
    while let Some(job) = queue.blocking_recv() {
        pool.install(|| serve(model, job));
    }
    tracing::debug!("query thread exiting: queue closed");
}

/// Several requests as one plan (see [`worker`]).
fn serve_merged(model: &Model, jobs: Vec<Job>) {
    let mut jobs: Vec<Job> = jobs.into_iter().filter(|j| !j.reply.is_closed()).collect();
    if jobs.len() <= 1 {
        if let Some(job) = jobs.pop() {
            serve(model, job);
        }
        return;
    }
    let mut texts = Vec::new();
    let mut owner = Vec::new();
    let totals: Vec<usize> = jobs.iter().map(|j| j.texts.len()).collect();
    for (k, job) in jobs.iter_mut().enumerate() {
        owner.extend(std::iter::repeat_n(k, job.texts.len()));
        texts.append(&mut job.texts);
    }
    let mut done = vec![0usize; jobs.len()];
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
        model.embed_batches(&texts, false, |indices, lengths| {
            let mut count = vec![0usize; jobs.len()];
            let mut tokens = vec![0usize; jobs.len()];
            for &i in indices {
                count[owner[i]] += 1;
                tokens[owner[i]] += lengths[i];
            }
            for (k, job) in jobs.iter().enumerate() {
                if count[k] == 0 {
                    continue;
                }
                done[k] += count[k];
                if let Some(p) = &job.progress {
                    let _ = p.send(BatchDone {
                        done: done[k],
                        total: totals[k],
                        tokens: tokens[k],
                    });
                }
            }
            jobs.iter().any(|j| !j.reply.is_closed())
        })
    }));
    let result = match outcome {
        Ok(Ok(Some(out))) => {
            if out.truncated > 0 {
                tracing::warn!(
                    truncated = out.truncated,
                    total = texts.len(),
                    requests = jobs.len(),
                    max_seq_len = model.max_seq_len,
                    "texts longer than max_seq_len tokens were truncated"
                );
            }
            Ok(out.vectors)
        }
        Ok(Ok(None)) => return,
        Ok(Err(e)) => Err(e),
        Err(panic) => Err(EmbedError::Inference(format!(
            "worker panicked: {}",
            panic_message(&panic)
        ))),
    };
    match result {
        Ok(vectors) => {
            let mut per: Vec<Vec<Vec<f32>>> =
                totals.iter().map(|&n| Vec::with_capacity(n)).collect();
            for (v, &k) in vectors.into_iter().zip(&owner) {
                per[k].push(v);
            }
            for (job, vectors) in jobs.into_iter().zip(per) {
                let _ = job.reply.send(Ok(vectors));
            }
        }
        Err(e) => {
            tracing::error!(error = %e, requests = jobs.len(), "embedding a merged plan failed");
            for job in jobs {
                let _ = job.reply.send(Err(e.clone()));
            }
        }
    }
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned())
}

fn serve(model: &Model, job: Job) {
    let Job {
        texts,
        progress,
        query,
        reply,
    } = job;
    if reply.is_closed() {
        return;
    }
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
        model.embed(&texts, query, |done| {
            if let Some(p) = &progress {
                // A dropped progress receiver is the caller's business, not an error.
                let _ = p.send(done);
            }
            !reply.is_closed()
        })
    }));
    let result = match outcome {
        Ok(Ok(Some(out))) => {
            if out.truncated > 0 {
                if query {
                    tracing::warn!(
                        chars = texts.first().map_or(0, |t| t.chars().count()),
                        max_seq_len = model.max_seq_len,
                        "query longer than max_seq_len tokens; truncated"
                    );
                } else {
                    tracing::warn!(
                        truncated = out.truncated,
                        total = texts.len(),
                        max_seq_len = model.max_seq_len,
                        "texts longer than max_seq_len tokens were truncated"
                    );
                }
            }
            Ok(out.vectors)
        }
        // The caller went away mid-request: nobody to answer.
        Ok(Ok(None)) => return,
        Ok(Err(e)) => Err(e),
        Err(panic) => {
            let msg = panic_message(&panic);
            tracing::error!(%msg, "embedding request panicked");
            Err(EmbedError::Inference(format!("worker panicked: {msg}")))
        }
    };
    // The caller may have given up in the meantime; then there is nobody to tell.
    let _ = reply.send(result);
}
