//! A local GGUF instruct model as an extractor, with decoding constrained to the reply
//! contract's JSON.
//!
//! # Thread model
//!
//! The model never runs on the async runtime. [`LocalGguf::load`] starts one plain
//! `std::thread` that loads the GGUF and then owns the model; [`LocalGguf`] is a handle holding
//! the sending side of a bounded request queue, each request carrying a
//! [`tokio::sync::oneshot`] sender for its reply. Requests run one at a time. A caller that
//! drops its future is noticed between tokens and the request is abandoned; a panic inside a
//! request is caught and returned as an error; dropping every handle ends the thread.
//!
//! # Model
//!
//! `general.architecture` `llama` (SmolLM2, Llama) or `qwen2`, run by [`decoder`] (this
//! crate's own decoder on candle-core's quantized matmul). The tokenizer and chat template come
//! from the GGUF metadata ([`vocab`]). CPU only.
//!
//! Per request the prompt is the crate's [`crate::prompt`] pair in the chat template. When the
//! prompt and the output budget do not fit the context (capped at 4096 for llama models), the
//! document is cut further with [`crate::cap_text_at`]; snippets are then constrained to the
//! text the model saw, a prefix of the text `extract` validates against, so they stay
//! verbatim.
//!
//! The weights are shared and never change; each request owns its attention cache
//! ([`decoder::Cache`]) and reads its prompt in chunks of 256 tokens. With a ChatML template the
//! cache starts from a copy of one that read the system prompt at load time (its turn ends in
//! a special token, so the ids are the same as when the whole prompt is encoded), which saves
//! most of the prefill of a short document.
//!
//! # Speed
//!
//! candle 0.11 has no SIMD kernel for Q4_1 (SmolLM2's quantization): its dot products run the
//! generic code. Setting `CANDLE_DEQUANTIZE_ALL=1` in the process environment makes candle
//! dequantize every weight to f32 at load (≈540 MB for 135M parameters instead of ≈90 MB) and
//! use its f32 matmul, about twice as fast here. It is read once per thread by candle; this crate
//! never sets it.
//!
//! # Decoding
//!
//! Greedy, constrained by [`crate::grammar::JsonGrammar`]: at each step the highest-scoring
//! token whose bytes the grammar accepts is chosen (the same choice as masking every rejected
//! token's logit and taking the argmax, without scoring the whole vocabulary when the best
//! token is allowed). Each vocabulary token's bytes are computed once at load. The output stops
//! when the grammar is complete or after [`LocalConfig::max_new_tokens`]; then
//! [`crate::grammar::JsonGrammar::finish`] closes it after the last complete item. What comes
//! out is a raw reply like any other backend's and goes through [`crate::reply::validate`].

mod decoder;
pub mod vocab;

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use candle_core::quantized::gguf_file;
use candle_core::Device;
use tokio::sync::{mpsc, oneshot};

use crate::extractor::{cap_text_at, Extractor, ExtractorError, Reply};
use crate::grammar::{GrammarConfig, JsonGrammar};
use crate::prompt;
use decoder::{Cache, Decoder};
use vocab::{ChatTemplate, Vocabulary};

/// Why a local model could not be loaded or run.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error("cannot read the model file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid GGUF: {0}")]
    Gguf(String),
    #[error("unsupported model: {0}")]
    Unsupported(String),
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    #[error("inference: {0}")]
    Inference(String),
}

impl From<candle_core::Error> for LocalError {
    fn from(e: candle_core::Error) -> Self {
        LocalError::Inference(e.to_string())
    }
}

/// Settings of the local backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalConfig {
    /// Most tokens generated per reply.
    pub max_new_tokens: usize,
    /// The output grammar (entity/relation caps, source-bound strings).
    pub grammar: GrammarConfig,
    /// Requests that may wait in the queue.
    pub queue: usize,
}

impl Default for LocalConfig {
    fn default() -> Self {
        LocalConfig {
            max_new_tokens: 512,
            grammar: GrammarConfig::default(),
            queue: 16,
        }
    }
}

/// Facts about the loaded model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelInfo {
    /// The file name without `.gguf`.
    pub name: String,
    pub architecture: String,
    pub vocab_size: usize,
    /// Usable context (prompt + output), in tokens.
    pub context: usize,
}

struct Job {
    text: String,
    attempt: u32,
    reply: oneshot::Sender<Result<Reply, ExtractorError>>,
}

/// The local GGUF extractor (see the module docs). Cheap to share behind an `Arc`.
pub struct LocalGguf {
    tx: mpsc::Sender<Job>,
    info: ModelInfo,
}

impl std::fmt::Debug for LocalGguf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalGguf")
            .field("info", &self.info)
            .finish()
    }
}

impl LocalGguf {
    /// Load the GGUF at `path` on a new thread and wait until it is ready. Blocking: call it
    /// from `spawn_blocking` or before the runtime starts.
    pub fn load(path: impl AsRef<Path>, config: LocalConfig) -> Result<Self, LocalError> {
        let path = path.as_ref().to_path_buf();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (tx, rx) = mpsc::channel::<Job>(config.queue.max(1));
        std::thread::Builder::new()
            .name("cairn-kg-local".into())
            .spawn(move || match Engine::load(&path, config) {
                Ok(engine) => {
                    let _ = ready_tx.send(Ok(engine.info.clone()));
                    engine.serve(rx);
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                }
            })
            .map_err(|e| LocalError::Inference(format!("cannot start the model thread: {e}")))?;
        let info = ready_rx
            .recv()
            .map_err(|_| LocalError::Inference("the model thread ended while loading".into()))??;
        Ok(LocalGguf { tx, info })
    }

    pub fn info(&self) -> &ModelInfo {
        &self.info
    }
}

#[async_trait]
impl Extractor for LocalGguf {
    fn name(&self) -> &str {
        "local"
    }

    fn model(&self) -> &str {
        &self.info.name
    }

    async fn reply(&self, text: &str, attempt: u32) -> Result<Reply, ExtractorError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Job {
                text: text.to_string(),
                attempt,
                reply,
            })
            .await
            .map_err(|_| ExtractorError::Permanent("the local model thread has ended".into()))?;
        rx.await
            .map_err(|_| ExtractorError::Permanent("the local model thread has ended".into()))?
    }
}

/// Prompt chunk size for prefill: bounds the attention scores held at once.
const PREFILL_CHUNK: usize = 256;

struct Engine {
    decoder: Decoder,
    /// A cache that has read the system prompt, and its ids: requests whose prompt starts
    /// with those ids start from a copy of it.
    primed: Option<(Cache, Vec<u32>)>,
    vocab: Vocabulary,
    first_byte: Vec<Vec<u32>>,
    cfg: LocalConfig,
    info: ModelInfo,
}

impl Engine {
    fn load(path: &Path, cfg: LocalConfig) -> Result<Self, LocalError> {
        let io = |source| LocalError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = std::fs::File::open(path).map_err(io)?;
        let ct =
            gguf_file::Content::read(&mut file).map_err(|e| LocalError::Gguf(e.to_string()))?;
        let arch = ct
            .metadata
            .get("general.architecture")
            .and_then(|v| v.to_string().ok())
            .cloned()
            .unwrap_or_else(|| "llama".into());
        let vocab = Vocabulary::from_gguf(&ct)?;
        let decoder = Decoder::from_gguf(&arch, &ct, &mut file, &Device::Cpu)?;
        let context = decoder.context();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().trim_end_matches(".gguf").to_string())
            .unwrap_or_else(|| "local".into());
        let info = ModelInfo {
            name,
            architecture: arch,
            vocab_size: vocab.token_bytes.len(),
            context,
        };
        tracing::info!(model = %info.name, arch = %info.architecture, context, "local extraction model loaded");
        let mut engine = Engine {
            decoder,
            primed: None,
            first_byte: by_first_byte(&vocab.token_bytes),
            vocab,
            cfg,
            info,
        };
        engine.prime()?;
        Ok(engine)
    }

    /// Read the system prompt once into a cache (ChatML only: its turn ends in a special
    /// token, so encoding it apart gives the same ids as encoding the whole prompt).
    fn prime(&mut self) -> Result<(), LocalError> {
        if self.vocab.template != ChatTemplate::ChatMl {
            return Ok(());
        }
        let prefix = self
            .vocab
            .encode(&self.vocab.template.system_turn(&prompt::system_prompt()))?;
        let mut cache = self.decoder.cache();
        for chunk in prefix.chunks(PREFILL_CHUNK) {
            self.decoder.forward(chunk, &mut cache)?;
        }
        self.primed = Some((cache, prefix));
        Ok(())
    }

    fn serve(mut self, mut rx: mpsc::Receiver<Job>) {
        while let Some(job) = rx.blocking_recv() {
            if job.reply.is_closed() {
                continue;
            }
            let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
                self.generate(&job.text, job.attempt, &job.reply)
            }));
            let result = match result {
                Ok(Ok(r)) => Ok(r),
                Ok(Err(e)) => Err(ExtractorError::Permanent(e.to_string())),
                Err(_) => Err(ExtractorError::Permanent(
                    "the local model panicked on this document".into(),
                )),
            };
            let _ = job.reply.send(result);
        }
    }

    /// The prompt ids for `text`, cutting the document until prompt + output fit the context.
    /// Returns the ids and the document text actually shown.
    fn prompt_ids(&self, text: &str, attempt: u32) -> Result<(Vec<u32>, String), LocalError> {
        let budget = self.info.context.saturating_sub(self.cfg.max_new_tokens);
        let mut shown = text.to_string();
        for _ in 0..8 {
            let user = prompt::prompt_for_attempt(&self.vocab.neutralize(&shown), attempt);
            let rendered = self.vocab.template.render(&prompt::system_prompt(), &user);
            let ids = self.vocab.encode(&rendered)?;
            if ids.len() <= budget {
                return Ok((ids, shown));
            }
            let chars = shown.chars().count();
            if chars == 0 {
                break;
            }
            let keep = (chars as f64 * budget as f64 / ids.len() as f64 * 0.9) as usize;
            shown = cap_text_at(&shown, keep.min(chars.saturating_sub(1))).to_string();
        }
        Err(LocalError::Inference(format!(
            "the prompt does not fit the model's {} token context",
            self.info.context
        )))
    }

    fn generate(
        &mut self,
        text: &str,
        attempt: u32,
        reply: &oneshot::Sender<Result<Reply, ExtractorError>>,
    ) -> Result<Reply, LocalError> {
        let (ids, shown) = self.prompt_ids(text, attempt)?;
        let mut grammar = JsonGrammar::new(self.cfg.grammar.clone(), &shown);
        let mut cache = match &self.primed {
            Some((cache, prefix)) if ids.starts_with(prefix) && ids.len() > prefix.len() => {
                cache.clone()
            }
            _ => self.decoder.cache(),
        };
        let ids_in = ids.len();
        let ids = &ids[cache.len()..];
        let t_start = std::time::Instant::now();
        let mut t_pick = std::time::Duration::ZERO;
        let mut logits = Vec::new();
        for chunk in ids.chunks(PREFILL_CHUNK) {
            logits = self.decoder.forward(chunk, &mut cache)?;
        }
        let mut generated = 0usize;
        while generated < self.cfg.max_new_tokens && !grammar.is_done() {
            if reply.is_closed() {
                return Err(LocalError::Inference("request abandoned".into()));
            }
            let tp = std::time::Instant::now();
            let picked = pick(&self.vocab.token_bytes, &self.first_byte, &logits, &grammar);
            t_pick += tp.elapsed();
            let Some(tok) = picked else {
                break;
            };
            let Some(bytes) = self
                .vocab
                .token_bytes
                .get(tok as usize)
                .and_then(|b| b.as_ref())
            else {
                break;
            };
            if !grammar.advance(bytes) {
                break;
            }
            generated += 1;
            if grammar.is_done() || cache.len() + 1 >= self.info.context {
                break;
            }
            logits = self.decoder.forward(&[tok], &mut cache)?;
        }
        tracing::debug!(
            prompt_tokens = ids_in,
            fed_tokens = ids.len(),
            generated,
            total_ms = t_start.elapsed().as_millis() as u64,
            pick_ms = t_pick.as_millis() as u64,
            complete = grammar.is_done(),
            "local extraction reply"
        );
        Ok(Reply {
            raw: grammar.finish(),
            input_tokens: ids_in as u64,
            output_tokens: generated as u64,
            cost_usd: 0.0,
        })
    }
}

/// Vocabulary tokens grouped by their first byte (control tokens left out).
fn by_first_byte(token_bytes: &[Option<Vec<u8>>]) -> Vec<Vec<u32>> {
    let mut buckets = vec![Vec::new(); 256];
    for (i, b) in token_bytes.iter().enumerate() {
        if let Some(first) = b.as_ref().and_then(|b| b.first()) {
            buckets[*first as usize].push(i as u32);
        }
    }
    buckets
}

/// The best-scoring token the grammar accepts (the same token as masking every rejected
/// logit and taking the argmax). Fast path: one of the 8 best tokens is allowed. Otherwise
/// only tokens whose first byte the grammar accepts are considered, keeping a running
/// maximum and asking the grammar only about tokens that would beat it.
fn pick(
    token_bytes: &[Option<Vec<u8>>],
    first_byte: &[Vec<u32>],
    logits: &[f32],
    grammar: &JsonGrammar,
) -> Option<u32> {
    let n = logits.len().min(token_bytes.len());
    let allowed = |i: usize| {
        token_bytes[i]
            .as_deref()
            .is_some_and(|b| grammar.accepts(b))
    };
    let k = 8.min(n);
    if k > 0 {
        let mut top: Vec<u32> = (0..n as u32).collect();
        top.select_nth_unstable_by(k - 1, |&a, &b| {
            logits[b as usize].total_cmp(&logits[a as usize])
        });
        top.truncate(k);
        top.sort_unstable_by(|&a, &b| logits[b as usize].total_cmp(&logits[a as usize]));
        if let Some(&t) = top.iter().find(|&&t| allowed(t as usize)) {
            return Some(t);
        }
    }
    let mut best: Option<(u32, f32)> = None;
    for b in 0..=255u8 {
        if !grammar.accepts(&[b]) {
            continue;
        }
        for &t in &first_byte[b as usize] {
            let Some(&l) = logits.get(t as usize) else {
                continue;
            };
            if best.is_none_or(|(_, bl)| l > bl) && allowed(t as usize) {
                best = Some((t, l));
            }
        }
    }
    best.map(|(t, _)| t)
}
