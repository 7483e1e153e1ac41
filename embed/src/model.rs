//! Loading a sentence-transformers style BERT directory and running it: the synchronous core
//! the worker threads drive. Nothing here knows about channels or async.

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use candle_core::{DType, Device, IndexOp, Tensor, D};
use candle_nn::VarBuilder;
use serde::Deserialize;
use tokenizers::{Encoding, Tokenizer, TruncationParams};

use crate::batch;
use crate::bert::{Bert, Config as BertConfig, LayerMaxima};
use crate::error::EmbedError;
use crate::{BatchDone, EmbedConfig, Pooling, Precision};

/// The suffix of the word-embedding table; whatever stands before it in the safetensors file is
/// the weights' prefix ("" for sentence-transformers exports, "bert." for `BertFor*` checkpoints).
const WORD_EMBEDDINGS: &str = "embeddings.word_embeddings.weight";

/// Padded tokens per forward pass on CPU; a batch larger than this runs as several passes.
const CPU_SLICE_TOKENS: usize = 2048;

/// A row shorter than this share of its slice's padded length starts a new slice (see
/// [`cpu_slices`]): padding stays under a fifth of a slice. Measured on the ingest benchmark's
/// folder (115 documents, one request each): 1.03x the real tokens, against 1.61x with the
/// whole batch padded to its longest row and 1.22x with slices padded each but not split.
const SLICE_MIN_FILL: f64 = 0.8;

/// A loaded model: weights, tokenizer (padding off, truncation at `max_seq_len`), pooling rule,
/// and its compute lanes.
///
/// # Compute lanes
///
/// A lane is a rayon pool of one thread. Each CPU slice of a batch (rows are independent) runs
/// whole on one lane, and a batch's slices run on all lanes at once. Inside a lane candle's
/// kernels (matrix multiply, softmax, element-wise ops) find a pool of one thread and run
/// sequentially, so the lanes never contend for the same cores the way one forward pass split
/// op by op does (measured on 2 cores: op-level threads scaled 1.39x from 1 to 2 threads,
/// because every op forks, joins and waits for its slowest half). A slice is at most
/// [`CPU_SLICE_TOKENS`] padded tokens, padded to its own longest row, and a batch with rows
/// enough is cut into at least one slice per lane ([`cpu_slices`]); a plan of one slice runs
/// on one lane, and search queries on none (the query thread runs them itself). A lane that
/// finishes takes the next slice not yet taken, from any batch of the plan
/// ([`Model::run_plan`]): there is no barrier between batches.
pub(crate) struct Model {
    bert: Bert,
    /// Where `bert` is 8-bit: the f32 model, which embeds search queries (see
    /// [`Model::bert_for`]). `None` otherwise (queries and passages share `bert`).
    query_bert: Option<Bert>,
    lanes: Vec<rayon::ThreadPool>,
    /// Where the next plan starts on `lanes` (round robin), so that plans smaller than the
    /// lanes (a query, a one-slice document) do not all queue on the first lane while another
    /// worker's plan may leave a different one idle.
    next_lane: AtomicUsize,
    tokenizer: Tokenizer,
    device: Device,
    pub pooling: Pooling,
    pub normalize: bool,
    pub max_seq_len: usize,
    pub batch_token_budget: usize,
    pad_id: u32,
}

/// `1_Pooling/config.json` (only the keys this crate reads).
#[derive(Debug, Default, Deserialize)]
struct PoolingConfig {
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
    #[serde(default)]
    pooling_mode_max_tokens: bool,
    #[serde(default)]
    pooling_mode_mean_sqrt_len_tokens: bool,
    #[serde(default)]
    pooling_mode_weightedmean_tokens: bool,
    #[serde(default)]
    pooling_mode_lasttoken: bool,
}

/// One entry of `modules.json`.
#[derive(Debug, Deserialize)]
struct ModuleEntry {
    #[serde(default)]
    path: String,
    #[serde(rename = "type", default)]
    kind: String,
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, EmbedError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| EmbedError::load(format!("reading {}", path.display()), e))?;
    serde_json::from_str(&text)
        .map_err(|e| EmbedError::load(format!("parsing {}", path.display()), e))
}

/// Reads `modules.json` if present: the pooling directory (default `1_Pooling`) and whether a
/// `Normalize` module follows.
fn read_modules(dir: &Path) -> Result<(PathBuf, bool), EmbedError> {
    let path = dir.join("modules.json");
    if !path.exists() {
        return Ok((dir.join("1_Pooling"), false));
    }
    let modules: Vec<ModuleEntry> = read_json(&path)?;
    let pooling_dir = modules
        .iter()
        .find(|m| m.kind.ends_with(".Pooling") || m.kind == "Pooling")
        .filter(|m| !m.path.is_empty())
        .map_or_else(|| dir.join("1_Pooling"), |m| dir.join(&m.path));
    let normalize = modules
        .iter()
        .any(|m| m.kind.ends_with(".Normalize") || m.kind == "Normalize");
    Ok((pooling_dir, normalize))
}

fn read_pooling(pooling_dir: &Path) -> Result<Pooling, EmbedError> {
    let path = pooling_dir.join("config.json");
    if !path.exists() {
        return Ok(Pooling::Mean);
    }
    let cfg: PoolingConfig = read_json(&path)?;
    let unsupported = [
        (cfg.pooling_mode_max_tokens, "pooling_mode_max_tokens"),
        (
            cfg.pooling_mode_mean_sqrt_len_tokens,
            "pooling_mode_mean_sqrt_len_tokens",
        ),
        (
            cfg.pooling_mode_weightedmean_tokens,
            "pooling_mode_weightedmean_tokens",
        ),
        (cfg.pooling_mode_lasttoken, "pooling_mode_lasttoken"),
    ];
    if let Some((_, name)) = unsupported.iter().find(|(on, _)| *on) {
        return Err(EmbedError::ModelLoad(format!(
            "{}: {name} is not supported (only mean or CLS pooling)",
            path.display()
        )));
    }
    match (cfg.pooling_mode_mean_tokens, cfg.pooling_mode_cls_token) {
        (true, true) => Err(EmbedError::ModelLoad(format!(
            "{}: both mean and CLS pooling are on (concatenated pooling is not supported)",
            path.display()
        ))),
        (false, true) => Ok(Pooling::Cls),
        _ => Ok(Pooling::Mean),
    }
}

fn device_name(device: &Device) -> &'static str {
    match device {
        Device::Cpu => "cpu",
        Device::Cuda(_) => "cuda",
        Device::Metal(_) => "metal",
    }
}

fn select_device() -> Result<Device, EmbedError> {
    #[cfg(feature = "cuda")]
    {
        Device::cuda_if_available(0).map_err(|e| EmbedError::load("opening CUDA device 0", e))
    }
    #[cfg(not(feature = "cuda"))]
    {
        Ok(Device::Cpu)
    }
}

/// Text the 8-bit kernel is calibrated on when the model loads (passages of several kinds,
/// written for Cairn, separated by `---` lines): its smoothing needs each layer-normed
/// input channel's typical largest value, a property of the model more than of the text.
const CALIBRATION: &str = include_str!("calibration.txt");

/// Each layer's input maxima ([`Bert::input_maxima`]) over every calibration passage, from
/// the f32 model.
fn calibrate(
    bert: &Bert,
    tokenizer: &Tokenizer,
    device: &Device,
) -> Result<Vec<LayerMaxima>, EmbedError> {
    let mut all: Vec<LayerMaxima> = Vec::new();
    for passage in CALIBRATION.split("\n---\n") {
        let enc = tokenizer
            .encode(passage.trim(), true)
            .map_err(|e| EmbedError::Tokenizer(format!("calibration text: {e}")))?;
        let found = Tensor::new(enc.get_ids(), device)
            .and_then(|t| t.unsqueeze(0))
            .and_then(|ids| bert.input_maxima(&ids))
            .map_err(|e| EmbedError::load("calibrating the 8-bit kernel", e))?;
        if all.is_empty() {
            all = found;
        } else {
            for (a, b) in all.iter_mut().zip(&found) {
                a.merge(b);
            }
        }
    }
    Ok(all)
}

/// What a model directory declares, read without its weights or tokenizer (a few small JSON
/// files): enough to describe the embedder, and to refuse a directory or a setting that cannot
/// load before anything heavy is read. [`Model::load`] starts from it; `Embedder::start`
/// describes the embedder from it while the weights load on a thread of their own.
pub struct Layout {
    bert_cfg: BertConfig,
    device: Device,
    weights_path: PathBuf,
    tokenizer_path: PathBuf,
    pub pooling: Pooling,
    pub normalize: bool,
    pub max_seq_len: usize,
    /// Resolved: `F32`, `Bf16` or `Int8`.
    pub precision: Precision,
}

impl Layout {
    pub fn read(cfg: &EmbedConfig) -> Result<Self, EmbedError> {
        let dir = &cfg.model_dir;
        if !dir.is_dir() {
            return Err(EmbedError::ModelLoad(format!(
                "{} is not a directory",
                dir.display()
            )));
        }
        if cfg.max_seq_len < 2 {
            return Err(EmbedError::ModelLoad(format!(
                "max_seq_len must be at least 2 (room for [CLS] and [SEP]), got {}",
                cfg.max_seq_len
            )));
        }
        let bert_cfg: BertConfig = read_json(&dir.join("config.json"))?;
        let device = select_device()?;

        let max_seq_len = if cfg.max_seq_len > bert_cfg.max_position_embeddings {
            tracing::warn!(
                requested = cfg.max_seq_len,
                max_position_embeddings = bert_cfg.max_position_embeddings,
                "max_seq_len exceeds the model's position embeddings; capping it"
            );
            bert_cfg.max_position_embeddings
        } else {
            cfg.max_seq_len
        };

        let precision = match cfg.precision {
            Precision::Auto if !device.is_cpu() => Precision::F32,
            p => p.resolve(),
        };
        if precision == Precision::Bf16 && !(crate::bf16::supported() && device.is_cpu()) {
            return Err(EmbedError::ModelLoad(
                "precision bf16 needs a CPU with AVX-512 BF16 (use f32, or auto to pick per CPU)"
                    .into(),
            ));
        }
        if precision == Precision::Int8 && !(crate::int8::supported() && device.is_cpu()) {
            return Err(EmbedError::ModelLoad(
                "precision int8 needs a CPU with AVX2 (use f32, or auto to pick per CPU)".into(),
            ));
        }
        let (pooling_dir, normalize) = read_modules(dir)?;
        let pooling = read_pooling(&pooling_dir)?;
        let weights_path = dir.join("model.safetensors");
        let tokenizer_path = dir.join("tokenizer.json");
        for file in [&weights_path, &tokenizer_path] {
            if !file.is_file() {
                return Err(EmbedError::ModelLoad(format!(
                    "{} is missing",
                    file.display()
                )));
            }
        }
        Ok(Self {
            bert_cfg,
            device,
            weights_path,
            tokenizer_path,
            pooling,
            normalize,
            max_seq_len,
            precision,
        })
    }

    /// The embedding dimension (the model's hidden size).
    pub fn dim(&self) -> usize {
        self.bert_cfg.hidden_size
    }

    pub fn device_name(&self) -> &'static str {
        device_name(&self.device)
    }
}

impl Model {
    /// Reads the weights and the tokenizer of the directory `layout` describes (blocking; the
    /// heavy part of a load: ~0.23 s on 2 cores for MiniLM in bf16), and starts the lanes.
    pub fn load(cfg: &EmbedConfig, layout: Layout) -> Result<Self, EmbedError> {
        let Layout {
            bert_cfg,
            device,
            weights_path,
            tokenizer_path,
            pooling,
            normalize,
            max_seq_len,
            precision,
        } = layout;
        let tensors = candle_core::safetensors::load(&weights_path, &device)
            .map_err(|e| EmbedError::load(format!("reading {}", weights_path.display()), e))?;
        let prefix = tensors
            .keys()
            .filter_map(|k| k.strip_suffix(WORD_EMBEDDINGS))
            .min_by_key(|p| p.len())
            .map(|p| p.trim_end_matches('.').to_string())
            .ok_or_else(|| {
                EmbedError::ModelLoad(format!(
                    "{}: no tensor named [prefix.]{WORD_EMBEDDINGS}; not a BERT checkpoint",
                    weights_path.display()
                ))
            })?;
        let vb = VarBuilder::from_tensors(tensors, DType::F32, &device);
        let vb = if prefix.is_empty() {
            vb
        } else {
            vb.pp(&prefix)
        };
        let mut tokenizer = Tokenizer::from_file(&tokenizer_path).map_err(|e| {
            EmbedError::Tokenizer(format!("loading {}: {e}", tokenizer_path.display()))
        })?;
        // The shipped tokenizer.json may bake in fixed padding/truncation (MiniLM's says 128):
        // no padding here (each batch pads to its own longest row) and truncation at max_seq_len.
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_seq_len,
                ..TruncationParams::default()
            }))
            .map_err(|e| EmbedError::Tokenizer(format!("setting truncation: {e}")))?;

        let (maxima, query_bert) = if precision == Precision::Int8 {
            let f32_bert = Bert::load(&vb, &bert_cfg, Precision::F32, None).map_err(|e| {
                EmbedError::load(format!("building BERT from {}", weights_path.display()), e)
            })?;
            let maxima = calibrate(&f32_bert, &tokenizer, &device)?;
            (Some(maxima), Some(f32_bert))
        } else {
            (None, None)
        };
        let bert = Bert::load(&vb, &bert_cfg, precision, maxima.as_deref()).map_err(|e| {
            EmbedError::load(format!("building BERT from {}", weights_path.display()), e)
        })?;

        let pad_id = u32::try_from(bert_cfg.pad_token_id).unwrap_or(0);
        let lane_count = match cfg.compute_threads {
            0 => std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get),
            n => n,
        };
        let lanes = (0..lane_count)
            .map(|i| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(1)
                    .thread_name(move |_| format!("cairn-embed-lane-{i}"))
                    .build()
                    .map_err(|e| EmbedError::load("starting an embedding compute lane", e))
            })
            .collect::<Result<Vec<_>, _>>()?;

        Ok(Self {
            bert,
            query_bert,
            lanes,
            next_lane: AtomicUsize::new(0),
            tokenizer,
            device,
            pooling,
            normalize,
            max_seq_len,
            batch_token_budget: cfg.batch_token_budget.max(1),
            pad_id,
        })
    }

    /// Tokenizes with the configured truncation; returns the encodings and, per input, whether
    /// it was truncated.
    pub fn tokenize(&self, texts: &[String]) -> Result<Vec<Encoding>, EmbedError> {
        let inputs: Vec<&str> = texts.iter().map(String::as_str).collect();
        self.tokenizer
            .encode_batch_fast(inputs, true)
            .map_err(|e| EmbedError::Tokenizer(e.to_string()))
    }

    /// The model that embeds search queries (`query`) or passages: the same one, except under
    /// [`Precision::Int8`], where queries run at f32.
    ///
    /// Why: a query is one short text that a person waits on, so 8-bit arithmetic saves little
    /// there (its time is tokenizing, attention and the per-call overhead as much as the dense
    /// layers), while its rounding error lands on every score it is compared by. Passages are
    /// where the throughput is needed (an ingest), and their error is each vector's own. With
    /// both sides rounded, the errors add up in every score; with the query exact, only the
    /// passage's remains. Measured on the retrieval test's tuning half
    /// (`embed/examples/quant_eval.rs`): see the note in [`Precision::Int8`].
    fn bert_for(&self, query: bool) -> &Bert {
        match (&self.query_bert, query) {
            (Some(bert), true) => bert,
            _ => &self.bert,
        }
    }

    /// Embeds `texts` (search queries when `query`, see [`Model::bert_for`]), returning vectors
    /// in input order. `on_batch` is called after every batch and may return `false` to stop
    /// early (the caller went away); the result is then `Ok(None)`.
    pub fn embed(
        &self,
        texts: &[String],
        query: bool,
        mut on_batch: impl FnMut(BatchDone) -> bool,
    ) -> Result<Option<EmbedOutput>, EmbedError> {
        let total = texts.len();
        let mut done = 0;
        self.embed_batches(texts, query, |indices, lengths| {
            done += indices.len();
            let tokens = indices.iter().map(|&i| lengths[i]).sum();
            on_batch(BatchDone {
                done,
                total,
                tokens,
            })
        })
    }

    /// [`Model::embed`], telling `on_batch` which inputs each batch held (their indices into
    /// `texts`) and every input's real token count: several callers' texts embedded as one
    /// plan can each be told their own progress.
    pub fn embed_batches(
        &self,
        texts: &[String],
        query: bool,
        mut on_batch: impl FnMut(&[usize], &[usize]) -> bool,
    ) -> Result<Option<EmbedOutput>, EmbedError> {
        let encodings = self.tokenize(texts)?;
        let truncated = encodings
            .iter()
            .filter(|e| !e.get_overflowing().is_empty())
            .count();
        let lengths: Vec<usize> = encodings.iter().map(Encoding::len).collect();
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        let batches = batch::plan(&lengths, self.batch_token_budget);
        let bert = self.bert_for(query);
        let finished = self.run_plan(bert, !query, &encodings, &batches, |b, vectors| {
            for (&idx, v) in batches[b].indices.iter().zip(vectors) {
                out[idx] = v;
            }
            on_batch(&batches[b].indices, &lengths)
        })?;
        if !finished {
            return Ok(None);
        }
        Ok(Some(EmbedOutput {
            vectors: out,
            truncated,
        }))
    }

    /// Every batch of a plan through the model, then pooling and normalization. `done` gets
    /// each batch's vectors (in its row order) as soon as that batch and every batch before it
    /// are complete, and may return `false` to stop (the result is then `Ok(false)`).
    ///
    /// On CPU every batch is cut into slices (rows are independent, so the vectors are the
    /// same), each padded only to its own first (longest) row: see [`cpu_slices`]. The plan's
    /// slices, all batches' in order, form **one queue**: a lane that finishes a slice takes
    /// the next one, whichever batch it belongs to, so no lane waits at the end of a batch for
    /// the other lane's last slice (with a barrier per batch, two lanes were busy 82% of an
    /// ingest's embedding time). Off the CPU each batch is one pass padded to its length.
    ///
    /// Without `on_lanes` (search queries) everything runs on the calling thread: the query
    /// thread, which has a pool of its own, so that a query never waits for an ingest's plans.
    fn run_plan(
        &self,
        bert: &Bert,
        on_lanes: bool,
        encodings: &[Encoding],
        batches: &[batch::Batch],
        mut done: impl FnMut(usize, Vec<Vec<f32>>) -> bool,
    ) -> Result<bool, EmbedError> {
        let cpu = matches!(self.device, Device::Cpu);
        let rows: Vec<Vec<&Encoding>> = batches
            .iter()
            .map(|b| b.indices.iter().map(|&i| &encodings[i]).collect())
            .collect();
        let mut work: Vec<(usize, Slice)> = Vec::new();
        for (b, (batch, rows)) in batches.iter().zip(&rows).enumerate() {
            if cpu {
                let lengths: Vec<usize> = rows
                    .iter()
                    .map(|e| e.len().clamp(1, batch.padded_len))
                    .collect();
                work.extend(
                    cpu_slices(&lengths, self.lanes.len())
                        .into_iter()
                        .map(|sl| (b, sl)),
                );
            } else {
                work.push((
                    b,
                    Slice {
                        start: 0,
                        rows: rows.len(),
                        padded_len: batch.padded_len,
                    },
                ));
            }
        }
        let run = |&(b, sl): &(usize, Slice)| -> SliceResult {
            let (ids, type_ids, mask) =
                self.padded(&rows[b][sl.start..sl.start + sl.rows], sl.padded_len)?;
            self.forward_pooled(bert, &ids, &type_ids, &mask)
        };
        let mut plan = PlanResults::new(batches.len(), &work);
        let lanes = if cpu && on_lanes {
            self.lanes.len().min(work.len())
        } else {
            0
        };
        // The lanes this plan runs on, starting where the last plan did not.
        let first = match self.lanes.len() {
            0 => 0,
            n => self.next_lane.fetch_add(1, Ordering::Relaxed) % n,
        };
        let mine: Vec<&rayon::ThreadPool> = (0..lanes)
            .map(|i| &self.lanes[(first + i) % self.lanes.len()])
            .collect();
        if lanes <= 1 {
            // One lane (a one-slice plan, or a single-lane embedder): in order, on it. No lane
            // (a query, or not on CPU): in order, here.
            for (k, item) in work.iter().enumerate() {
                let vectors = match mine.first() {
                    Some(lane) => lane.install(|| run(item))?,
                    None => run(item)?,
                };
                if !plan.absorb(k, vectors, &mut done) {
                    return Ok(false);
                }
            }
            return Ok(true);
        }
        let next = AtomicUsize::new(0);
        let stop = AtomicBool::new(false);
        let started = Instant::now();
        let busy_us = AtomicU64::new(0);
        let outcome = std::thread::scope(|scope| {
            let (tx, rx) = std::sync::mpsc::channel::<(usize, SliceResult)>();
            for lane in mine {
                let (tx, work, run, next, stop, busy_us) =
                    (tx.clone(), &work, &run, &next, &stop, &busy_us);
                scope.spawn(move || {
                    lane.install(|| {
                        while !stop.load(Ordering::Relaxed) {
                            let k = next.fetch_add(1, Ordering::Relaxed);
                            let Some(item) = work.get(k) else { break };
                            let t = Instant::now();
                            // A panic in a kernel becomes this slice's error, not the lane's
                            // silent end: the plan then fails as a whole.
                            let result = std::panic::catch_unwind(AssertUnwindSafe(|| run(item)))
                                .unwrap_or_else(|_| {
                                    Err(EmbedError::Inference("a compute lane panicked".into()))
                                });
                            let us = u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX);
                            busy_us.fetch_add(us, Ordering::Relaxed);
                            if tx.send((k, result)).is_err() {
                                break;
                            }
                        }
                    })
                });
            }
            drop(tx);
            // The lanes' results as they come (in any order); batches are handed on in order.
            let mut outcome = Ok(true);
            for (k, result) in rx {
                if !matches!(outcome, Ok(true)) {
                    continue; // stopping: the lanes finish the slice they hold
                }
                match result {
                    Ok(vectors) => {
                        if !plan.absorb(k, vectors, &mut done) {
                            stop.store(true, Ordering::Relaxed);
                            outcome = Ok(false);
                        }
                    }
                    Err(e) => {
                        stop.store(true, Ordering::Relaxed);
                        outcome = Err(e);
                    }
                }
            }
            if matches!(outcome, Ok(true)) && !plan.complete() {
                outcome = Err(EmbedError::Inference(
                    "a compute lane ended before the plan was done".into(),
                ));
            }
            outcome
        });
        // For tuning: `busy_ms` sums the lanes' time in slices; `wall_ms` also counts the wait
        // behind another worker's plan on the same lanes.
        tracing::debug!(
            slices = work.len(),
            lanes,
            wall_ms = started.elapsed().as_secs_f64() * 1e3,
            busy_ms = busy_us.load(Ordering::Relaxed) as f64 / 1e3,
            "plan done"
        );
        outcome
    }

    /// `rows` padded to `padded_len`: token ids, token type ids and the attention mask.
    fn padded(
        &self,
        rows: &[&Encoding],
        padded_len: usize,
    ) -> Result<(Tensor, Tensor, Tensor), EmbedError> {
        let n = rows.len();
        let mut ids = vec![self.pad_id; n * padded_len];
        let mut type_ids = vec![0u32; n * padded_len];
        let mut mask = vec![0u32; n * padded_len];
        for (r, enc) in rows.iter().enumerate() {
            let base = r * padded_len;
            let len = enc.len().min(padded_len);
            ids[base..base + len].copy_from_slice(&enc.get_ids()[..len]);
            type_ids[base..base + len].copy_from_slice(&enc.get_type_ids()[..len]);
            mask[base..base + len].fill(1);
        }
        let shape = (n, padded_len);
        let t =
            |v: Vec<u32>| Tensor::from_vec(v, shape, &self.device).map_err(EmbedError::inference);
        Ok((t(ids)?, t(type_ids)?, t(mask)?))
    }

    fn forward_pooled(
        &self,
        bert: &Bert,
        ids: &Tensor,
        type_ids: &Tensor,
        mask: &Tensor,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let hidden = bert
            .forward(ids, type_ids, mask)
            .map_err(EmbedError::inference)?;
        let pooled = self.pool(&hidden, mask).map_err(EmbedError::inference)?;
        let pooled = if self.normalize {
            l2_normalize(&pooled).map_err(EmbedError::inference)?
        } else {
            pooled
        };
        pooled.to_vec2::<f32>().map_err(EmbedError::inference)
    }

    fn pool(&self, hidden: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
        match self.pooling {
            Pooling::Cls => hidden.i((.., 0))?.contiguous(),
            Pooling::Mean => {
                // sum(hidden * mask) / sum(mask), as sentence-transformers does (count clamped
                // at 1e-9 there; every row here has at least [CLS] and [SEP]).
                let mask = mask.to_dtype(DType::F32)?.unsqueeze(D::Minus1)?;
                let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
                let counts = mask.sum(1)?.maximum(1e-9)?;
                summed.broadcast_div(&counts)
            }
        }
    }
}

/// `x / max(‖x‖₂, 1e-12)` per row, as `torch.nn.functional.normalize` does.
fn l2_normalize(x: &Tensor) -> candle_core::Result<Tensor> {
    let norm = x.sqr()?.sum_keepdim(1)?.sqrt()?.maximum(1e-12)?;
    x.broadcast_div(&norm)
}

/// Consecutive rows of a batch run as one forward pass, padded to `padded_len`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slice {
    start: usize,
    rows: usize,
    padded_len: usize,
}

/// A CPU batch's slices. `lengths` are the rows' token counts, longest first (as
/// [`batch::plan`] orders them). A slice starts at a row, is padded to that row's length, and
/// takes the rows after it while
/// * its padded tokens stay within [`CPU_SLICE_TOKENS`] (activations stay in cache, where one
///   pass over a full 16k-token batch streams ~100 MB of intermediates through memory and
///   page-faults on every fresh allocation: measured on 2 cores, ~1.3-1.5x more sentences/s);
/// * it has fewer than `rows / lanes` rows (rounded up), so every lane gets work;
/// * the next row is at least [`SLICE_MIN_FILL`] of the slice's length: a row much shorter
///   starts a slice of its own instead of being padded. One document's chunks (a long run of
///   full chunks and a short last one) padded together as one slice cost 1.5x their real
///   tokens (the ingest benchmark's folder: 426k padded tokens for 265k real).
fn cpu_slices(lengths: &[usize], lanes: usize) -> Vec<Slice> {
    let cap = lengths.len().div_ceil(lanes.max(1)).max(1);
    let mut out: Vec<Slice> = Vec::new();
    for (i, &len) in lengths.iter().enumerate() {
        let len = len.max(1);
        if let Some(sl) = out.last_mut() {
            let fits = (sl.rows + 1) * sl.padded_len <= CPU_SLICE_TOKENS
                && sl.rows < cap
                && len as f64 >= SLICE_MIN_FILL * sl.padded_len as f64;
            if fits && len <= sl.padded_len {
                sl.rows += 1;
                continue;
            }
        }
        out.push(Slice {
            start: i,
            rows: 1,
            padded_len: len,
        });
    }
    out
}

/// One slice's vectors, or why not.
type SliceResult = Result<Vec<Vec<f32>>, EmbedError>;

/// A plan's slice results, gathered per batch until the batch is whole, and handed on in
/// batch order (see [`Model::run_plan`]).
struct PlanResults {
    /// Per work item: its batch and its first row within the batch.
    item: Vec<(usize, usize)>,
    /// Per batch: slices not yet back.
    left: Vec<usize>,
    /// Per batch: the slices back so far, as (first row, vectors).
    parts: Vec<Vec<(usize, Vec<Vec<f32>>)>>,
    /// The first batch not yet handed on.
    next: usize,
}

impl PlanResults {
    fn new(batches: usize, work: &[(usize, Slice)]) -> Self {
        let mut left = vec![0; batches];
        for &(b, _) in work {
            left[b] += 1;
        }
        Self {
            item: work.iter().map(|&(b, sl)| (b, sl.start)).collect(),
            left,
            parts: (0..batches).map(|_| Vec::new()).collect(),
            next: 0,
        }
    }

    /// Takes work item `k`'s vectors; hands every batch now complete (in order) to `done`.
    /// Returns `false` as soon as `done` does.
    fn absorb(
        &mut self,
        k: usize,
        vectors: Vec<Vec<f32>>,
        done: &mut impl FnMut(usize, Vec<Vec<f32>>) -> bool,
    ) -> bool {
        let (b, start) = self.item[k];
        self.parts[b].push((start, vectors));
        self.left[b] -= 1;
        while self.next < self.left.len() && self.left[self.next] == 0 {
            let mut parts = std::mem::take(&mut self.parts[self.next]);
            parts.sort_by_key(|(start, _)| *start);
            let vectors = parts.into_iter().flat_map(|(_, v)| v).collect();
            let b = self.next;
            self.next += 1;
            if !done(b, vectors) {
                return false;
            }
        }
        true
    }

    fn complete(&self) -> bool {
        self.next == self.left.len()
    }
}

pub(crate) struct EmbedOutput {
    pub vectors: Vec<Vec<f32>>,
    /// How many inputs were cut at `max_seq_len`.
    pub truncated: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(lengths: &[usize], lanes: usize) -> Vec<Slice> {
        let slices = cpu_slices(lengths, lanes);
        let cap = lengths.len().div_ceil(lanes).max(1);
        let mut next = 0;
        for sl in &slices {
            assert_eq!(sl.start, next, "slices cover the rows in order: {slices:?}");
            assert!(sl.rows >= 1 && sl.rows <= cap);
            let rows = &lengths[sl.start..sl.start + sl.rows];
            assert_eq!(sl.padded_len, rows[0].max(1), "padded to its first row");
            for &l in rows {
                assert!(l <= sl.padded_len);
                assert!(l as f64 >= SLICE_MIN_FILL * sl.padded_len as f64);
            }
            assert!(sl.rows == 1 || sl.rows * sl.padded_len <= CPU_SLICE_TOKENS);
            next += sl.rows;
        }
        assert_eq!(next, lengths.len());
        slices
    }

    /// Slices come back in any order (two lanes); batches are handed on whole, in order,
    /// each batch's vectors in row order, and a `false` from the receiver stops the hand-on.
    #[test]
    fn plan_results_hand_on_whole_batches_in_order() {
        let sl = |start, rows| Slice {
            start,
            rows,
            padded_len: 8,
        };
        // Batch 0: rows 0..3 in two slices; batch 1: one slice; batch 2: rows 0..4 in two.
        let work = vec![
            (0, sl(0, 2)),
            (0, sl(2, 1)),
            (1, sl(0, 1)),
            (2, sl(0, 2)),
            (2, sl(2, 2)),
        ];
        let vecs = |first: f32, n: usize| -> Vec<Vec<f32>> {
            (0..n).map(|i| vec![first + i as f32]).collect()
        };
        let mut plan = PlanResults::new(3, &work);
        let seen: std::cell::RefCell<Vec<(usize, Vec<Vec<f32>>)>> = Default::default();
        let mut take = |b: usize, v: Vec<Vec<f32>>| {
            seen.borrow_mut().push((b, v));
            true
        };
        assert!(plan.absorb(2, vecs(10.0, 1), &mut take));
        assert!(plan.absorb(4, vecs(22.0, 2), &mut take));
        assert!(plan.absorb(1, vecs(2.0, 1), &mut take));
        assert!(seen.borrow().is_empty(), "batch 0 is not whole yet");
        assert!(plan.absorb(0, vecs(0.0, 2), &mut take));
        assert_eq!(
            seen.borrow().iter().map(|(b, _)| *b).collect::<Vec<_>>(),
            vec![0, 1],
            "batch 2 still waits for its first slice"
        );
        assert!(!plan.complete());
        assert!(plan.absorb(3, vecs(20.0, 2), &mut take));
        assert!(plan.complete());
        let flat: Vec<Vec<Vec<f32>>> = seen.take().into_iter().map(|(_, v)| v).collect();
        assert_eq!(
            flat,
            vec![
                vecs(0.0, 3),
                vecs(10.0, 1),
                vec![vec![20.0], vec![21.0], vec![22.0], vec![23.0]]
            ]
        );

        let mut plan = PlanResults::new(3, &work);
        let mut handed = 0;
        let mut stop_after_first = |_b: usize, _v: Vec<Vec<f32>>| {
            handed += 1;
            false
        };
        assert!(plan.absorb(2, vecs(10.0, 1), &mut stop_after_first));
        assert!(plan.absorb(1, vecs(2.0, 1), &mut stop_after_first));
        assert!(!plan.absorb(0, vecs(0.0, 2), &mut stop_after_first));
        assert_eq!(handed, 1, "nothing is handed on after a stop");
    }

    #[test]
    fn slices_pad_to_their_own_rows_and_split_where_rows_get_short() {
        // A document: eleven full chunks and a short last one.
        let mut doc = vec![256; 11];
        doc.push(40);
        let slices = check(&doc, 2);
        // 6 + 5 full rows (a share per lane), then the short row alone, unpadded.
        assert_eq!(
            slices
                .iter()
                .map(|s| (s.rows, s.padded_len))
                .collect::<Vec<_>>(),
            vec![(6, 256), (5, 256), (1, 40)]
        );
        let padded: usize = slices.iter().map(|s| s.rows * s.padded_len).sum();
        assert_eq!(padded, 11 * 256 + 40);
    }

    #[test]
    fn slices_hold_every_row_once_within_the_budget() {
        check(&[], 2);
        check(&[1], 2);
        check(&[300], 1);
        let lengths: Vec<usize> = (0..400).map(|i| 256 - (i * 7 % 250)).collect();
        let mut sorted = lengths.clone();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        for lanes in [1, 2, 3, 8] {
            check(&sorted, lanes);
        }
        // Equal short rows fill a slice up to the budget.
        let slices = check(&[16; 300], 1);
        assert_eq!(slices[0].rows, CPU_SLICE_TOKENS / 16);
    }
}
