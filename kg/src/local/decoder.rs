//! The decoder-only transformer the local extractor runs: llama-family (SmolLM2, Llama) and
//! qwen2 GGUF models, on candle-core's quantized matrix multiply.
//!
//! Written here rather than taken from candle-transformers, whose hundred-odd model files cost
//! about 100 s of every cold release build (issue 14's first run) for the two architectures
//! this crate runs; the maths follows llama.cpp's conventions, as candle's quantized models do.
//! The parity test below holds the logits to candle-transformers' `quantized_llama` (a
//! dev-dependency only) on a real GGUF (SmolLM2-135M, `CAIRN_KG_LOCAL_MODEL`), prompt chunks and
//! single tokens alike. qwen2 differs only by its q/k/v biases and NEOX rotary pairs (as in
//! candle's `quantized_qwen2`); no qwen2 GGUF is fetched by the tests.
//!
//! The weights are read-only and shared; the attention keys and values live in a [`Cache`]
//! that each request owns, so a request never clones or clears the model, and nothing (masks
//! included) is kept between requests.

use candle_core::quantized::{gguf_file, QMatMul};
use candle_core::{DType, Device, IndexOp, Module, Result, Tensor};

use super::LocalError;

/// One transformer block's weights.
struct Block {
    attn_norm: Tensor,
    wq: QMatMul,
    wk: QMatMul,
    wv: QMatMul,
    /// qwen2's q/k/v biases (llama has none).
    bias: Option<[Tensor; 3]>,
    wo: QMatMul,
    ffn_norm: Tensor,
    gate: QMatMul,
    up: QMatMul,
    down: QMatMul,
}

/// A loaded model: weights and the rotary tables, never mutated after load.
pub(crate) struct Decoder {
    embeddings: Tensor,
    blocks: Vec<Block>,
    norm: Tensor,
    output: QMatMul,
    eps: f32,
    n_head: usize,
    n_kv_head: usize,
    head_dim: usize,
    /// Rotary convention: NEOX pairs (i, i + d/2) (qwen2); otherwise pairs (2i, 2i + 1).
    neox: bool,
    cos: Tensor,
    sin: Tensor,
    context: usize,
}

/// One sequence's attention keys and values, per block, and how many positions they hold.
#[derive(Clone)]
pub(crate) struct Cache {
    kv: Vec<Option<(Tensor, Tensor)>>,
    len: usize,
}

impl Cache {
    /// How many positions the sequence has read so far.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

/// Longest rotary table built for llama models whose GGUF claims more (as candle's llama
/// does): the tables are `context × head_dim / 2` floats, twice.
const LLAMA_MAX_CONTEXT: usize = 4096;

impl Decoder {
    /// Reads the weights of a `llama` or `qwen2` GGUF. Mixture-of-experts llama files
    /// (`llama.expert_count` > 1) are refused.
    pub(crate) fn from_gguf<R: std::io::Seek + std::io::Read>(
        arch: &str,
        ct: &gguf_file::Content,
        reader: &mut R,
        device: &Device,
    ) -> std::result::Result<Self, LocalError> {
        let neox = match arch {
            "llama" => false,
            "qwen2" => true,
            other => {
                return Err(LocalError::Unsupported(format!(
                    "architecture {other:?} (llama and qwen2 are supported)"
                )))
            }
        };
        let key = |k: &str| format!("{arch}.{k}");
        let md = |k: &str| {
            ct.metadata
                .get(&key(k))
                .ok_or_else(|| LocalError::Gguf(format!("no {} in the metadata", key(k))))
        };
        let md_u32 = |k: &str| -> std::result::Result<usize, LocalError> {
            Ok(md(k)?.to_u32().map_err(gguf_error)? as usize)
        };
        if ct
            .metadata
            .get(&key("expert_count"))
            .and_then(|v| v.to_u32().ok())
            .is_some_and(|n| n > 1)
        {
            return Err(LocalError::Unsupported(
                "mixture-of-experts models are not supported".into(),
            ));
        }
        let n_head = md_u32("attention.head_count")?;
        let n_kv_head = md_u32("attention.head_count_kv")?;
        let n_blocks = md_u32("block_count")?;
        let embedding = md_u32("embedding_length")?;
        if n_head == 0
            || n_kv_head == 0
            || !n_head.is_multiple_of(n_kv_head)
            || !embedding.is_multiple_of(n_head)
        {
            return Err(LocalError::Gguf(format!(
                "inconsistent attention shape: {n_head} heads, {n_kv_head} key/value heads, width {embedding}"
            )));
        }
        let head_dim = embedding / n_head;
        let eps = md("attention.layer_norm_rms_epsilon")?
            .to_f32()
            .map_err(gguf_error)?;
        let freq_base = md("rope.freq_base")
            .ok()
            .and_then(|v| v.to_f32().ok())
            .unwrap_or(10_000.0);
        let claimed = md_u32("context_length").unwrap_or(2048);
        let (rope_dim, context) = if neox {
            (head_dim, claimed)
        } else {
            let dim = md_u32("rope.dimension_count").unwrap_or(head_dim);
            (dim, claimed.min(LLAMA_MAX_CONTEXT))
        };
        let (cos, sin) = rotary_tables(rope_dim, freq_base, context, device)?;

        let mut tensor = |name: &str| ct.tensor(reader, name, device);
        let dense = |q: candle_core::quantized::QTensor| q.dequantize(device);
        let embeddings_q = tensor("token_embd.weight")?;
        let embeddings = dense(embeddings_q)?;
        let norm = dense(tensor("output_norm.weight")?)?;
        // Tied embeddings when the file has no output matrix.
        let output = match tensor("output.weight") {
            Ok(q) => q,
            Err(_) => tensor("token_embd.weight")?,
        };
        let mut blocks = Vec::with_capacity(n_blocks);
        for i in 0..n_blocks {
            let mut w = |n: &str| tensor(&format!("blk.{i}.{n}"));
            let bias = if neox {
                Some([
                    dense(w("attn_q.bias")?)?,
                    dense(w("attn_k.bias")?)?,
                    dense(w("attn_v.bias")?)?,
                ])
            } else {
                None
            };
            blocks.push(Block {
                attn_norm: dense(w("attn_norm.weight")?)?,
                wq: QMatMul::from_qtensor(w("attn_q.weight")?)?,
                wk: QMatMul::from_qtensor(w("attn_k.weight")?)?,
                wv: QMatMul::from_qtensor(w("attn_v.weight")?)?,
                bias,
                wo: QMatMul::from_qtensor(w("attn_output.weight")?)?,
                ffn_norm: dense(w("ffn_norm.weight")?)?,
                gate: QMatMul::from_qtensor(w("ffn_gate.weight")?)?,
                up: QMatMul::from_qtensor(w("ffn_up.weight")?)?,
                down: QMatMul::from_qtensor(w("ffn_down.weight")?)?,
            });
        }
        Ok(Decoder {
            embeddings,
            blocks,
            norm,
            output: QMatMul::from_qtensor(output)?,
            eps,
            n_head,
            n_kv_head,
            head_dim,
            neox,
            cos,
            sin,
            context,
        })
    }

    /// The longest sequence the model can read (its rotary tables' length).
    pub(crate) fn context(&self) -> usize {
        self.context
    }

    /// An empty sequence.
    pub(crate) fn cache(&self) -> Cache {
        Cache {
            kv: vec![None; self.blocks.len()],
            len: 0,
        }
    }

    /// Reads `ids` after what `cache` holds and returns the next-token logits (f32, one per
    /// vocabulary entry) at the last of them.
    pub(crate) fn forward(&self, ids: &[u32], cache: &mut Cache) -> Result<Vec<f32>> {
        let device = self.embeddings.device();
        let n = ids.len();
        let pos = cache.len;
        if n == 0 || pos + n > self.context {
            candle_core::bail!(
                "{n} tokens after {pos} do not fit the {} token context",
                self.context
            );
        }
        let input = Tensor::new(ids, device)?;
        let mut x = self.embeddings.index_select(&input, 0)?.unsqueeze(0)?;
        let mask = if n > 1 {
            Some(causal_mask(n, pos, device)?)
        } else {
            None
        };
        let cos = self.cos.narrow(0, pos, n)?;
        let sin = self.sin.narrow(0, pos, n)?;
        for (block, kv) in self.blocks.iter().zip(cache.kv.iter_mut()) {
            let h = candle_nn::ops::rms_norm(&x, &block.attn_norm, self.eps)?;
            let h = self.attention(block, &h, kv, mask.as_ref(), &cos, &sin)?;
            x = (h + &x)?;
            let h = candle_nn::ops::rms_norm(&x, &block.ffn_norm, self.eps)?;
            let h = (candle_nn::ops::silu(&block.gate.forward(&h)?)? * block.up.forward(&h)?)?;
            x = (block.down.forward(&h)? + &x)?;
        }
        cache.len += n;
        let x = candle_nn::ops::rms_norm(&x, &self.norm, self.eps)?;
        let last = x.i((.., n - 1, ..))?;
        self.output
            .forward(&last)?
            .squeeze(0)?
            .to_dtype(DType::F32)?
            .to_vec1()
    }

    fn attention(
        &self,
        block: &Block,
        x: &Tensor,
        kv: &mut Option<(Tensor, Tensor)>,
        mask: Option<&Tensor>,
        cos: &Tensor,
        sin: &Tensor,
    ) -> Result<Tensor> {
        let (b, n, width) = x.dims3()?;
        let (mut q, mut k, mut v) = (
            block.wq.forward(x)?,
            block.wk.forward(x)?,
            block.wv.forward(x)?,
        );
        if let Some([bq, bk, bv]) = &block.bias {
            q = q.broadcast_add(bq)?;
            k = k.broadcast_add(bk)?;
            v = v.broadcast_add(bv)?;
        }
        let heads = |t: Tensor, h: usize| -> Result<Tensor> {
            t.reshape((b, n, h, self.head_dim))?
                .transpose(1, 2)?
                .contiguous()
        };
        let q = self.rotate(&heads(q, self.n_head)?, cos, sin)?;
        let k = self.rotate(&heads(k, self.n_kv_head)?, cos, sin)?;
        let v = heads(v, self.n_kv_head)?;
        let (k, v) = match kv.take() {
            Some((pk, pv)) => (Tensor::cat(&[&pk, &k], 2)?, Tensor::cat(&[&pv, &v], 2)?),
            None => (k, v),
        };
        *kv = Some((k.clone(), v.clone()));
        let group = self.n_head / self.n_kv_head;
        let (k, v) = (repeat_kv(k, group)?, repeat_kv(v, group)?);
        let scores = (q.matmul(&k.t()?)? / (self.head_dim as f64).sqrt())?;
        let scores = match mask {
            Some(m) => {
                let m = m.broadcast_as(scores.shape())?;
                let neg = Tensor::new(f32::NEG_INFINITY, scores.device())?
                    .broadcast_as(scores.shape())?;
                m.where_cond(&neg, &scores)?
            }
            None => scores,
        };
        let p = candle_nn::ops::softmax_last_dim(&scores)?;
        let y = p.matmul(&v.contiguous()?)?;
        block
            .wo
            .forward(&y.transpose(1, 2)?.reshape((b, n, width))?)
    }

    fn rotate(&self, x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
        if self.neox {
            candle_nn::rotary_emb::rope(x, cos, sin)
        } else {
            candle_nn::rotary_emb::rope_i(x, cos, sin)
        }
    }
}

fn gguf_error(e: candle_core::Error) -> LocalError {
    LocalError::Gguf(e.to_string())
}

/// cos and sin of position × frequency, `context × dim / 2` each.
fn rotary_tables(
    dim: usize,
    base: f32,
    context: usize,
    device: &Device,
) -> Result<(Tensor, Tensor)> {
    let freqs: Vec<f32> = (0..dim)
        .step_by(2)
        .map(|i| 1.0 / base.powf(i as f32 / dim as f32))
        .collect();
    let freqs = Tensor::new(freqs.as_slice(), device)?;
    let angles = Tensor::arange(0, context as u32, device)?
        .to_dtype(DType::F32)?
        .reshape((context, 1))?
        .matmul(&freqs.reshape((1, freqs.elem_count()))?)?;
    Ok((angles.cos()?, angles.sin()?))
}

/// 1 where query `i` (at position `pos + i`) may not see key `j`: `n × (pos + n)`.
fn causal_mask(n: usize, pos: usize, device: &Device) -> Result<Tensor> {
    let mask: Vec<u8> = (0..n)
        .flat_map(|i| (0..pos + n).map(move |j| u8::from(j > pos + i)))
        .collect();
    Tensor::from_slice(&mask, (n, pos + n), device)
}

/// Each key/value head repeated for the `group` query heads that share it.
fn repeat_kv(x: Tensor, group: usize) -> Result<Tensor> {
    if group == 1 {
        return Ok(x);
    }
    let (b, h, n, d) = x.dims4()?;
    Tensor::cat(&vec![&x; group], 2)?.reshape((b, h * group, n, d))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn the_mask_hides_only_later_positions() {
        let m: Vec<u8> = causal_mask(3, 2, &Device::Cpu)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        assert_eq!(m, [0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn repeated_heads_keep_their_order() {
        let x = Tensor::arange(0f32, 8.0, &Device::Cpu)
            .unwrap()
            .reshape((1, 2, 2, 2))
            .unwrap();
        let r: Vec<f32> = repeat_kv(x, 2)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        assert_eq!(
            r,
            [0., 1., 2., 3., 0., 1., 2., 3., 4., 5., 6., 7., 4., 5., 6., 7.]
        );
    }

    /// Our logits against candle-transformers' llama on the same GGUF: a two-chunk prompt
    /// (256 + 44 ids, the second after a cached prefix) then single tokens.
    #[test]
    fn logits_match_candle_transformers_llama() {
        use candle_transformers::models::quantized_llama::ModelWeights;
        let Some(path) = std::env::var("CAIRN_KG_LOCAL_MODEL")
            .ok()
            .filter(|p| !p.is_empty())
        else {
            println!("skipped: CAIRN_KG_LOCAL_MODEL is not set (kg/fetch-local-model.sh)");
            return;
        };
        let device = Device::Cpu;
        let open = || {
            let mut f = std::fs::File::open(&path).unwrap();
            let ct = gguf_file::Content::read(&mut f).unwrap();
            (ct, f)
        };
        let (ct, mut f) = open();
        let ours = Decoder::from_gguf("llama", &ct, &mut f, &device).unwrap();
        let (ct, mut f) = open();
        let mut theirs = ModelWeights::from_gguf(ct, &mut f, &device).unwrap();
        let vocab = ours.embeddings.dim(0).unwrap() as u32;
        let prompt: Vec<u32> = (0..300u32).map(|i| (i * 7919 + 13) % vocab).collect();
        let chunks: Vec<&[u32]> = prompt.chunks(256).collect();
        let mut cache = ours.cache();
        let mut next = 0u32;
        let mut worst = 0f32;
        for step in 0..8 {
            let feed: Vec<u32> = chunks.get(step).map_or_else(|| vec![next], |c| c.to_vec());
            let pos = cache.len();
            let a = ours.forward(&feed, &mut cache).unwrap();
            let input = Tensor::new(feed.as_slice(), &device)
                .unwrap()
                .unsqueeze(0)
                .unwrap();
            let b: Vec<f32> = theirs
                .forward(&input, pos)
                .unwrap()
                .squeeze(0)
                .unwrap()
                .to_vec1()
                .unwrap();
            assert_eq!(a.len(), b.len());
            let scale = b.iter().fold(0f32, |m, x| m.max(x.abs()));
            let diff = a
                .iter()
                .zip(&b)
                .fold(0f32, |m, (x, y)| m.max((x - y).abs()));
            worst = worst.max(diff / scale);
            // The next single token: our argmax (theirs too, when the logits agree).
            next = a
                .iter()
                .enumerate()
                .max_by(|x, y| x.1.total_cmp(y.1))
                .map(|(i, _)| i as u32)
                .unwrap();
        }
        println!("largest logit difference, relative to the largest logit: {worst:e}");
        assert!(worst <= 1e-5, "logits differ by {worst:e} of the largest");
    }
}
