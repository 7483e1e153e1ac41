//! An inference-only BERT encoder over candle, reading the same weights and `config.json` as
//! Hugging Face's `BertModel` (and candle-transformers' port of it), restructured for CPU
//! throughput the way text-embeddings-inference's own BERT is:
//!
//! * query, key and value are one fused `hidden → 3·hidden` matmul instead of three;
//! * the attention softmax is candle's fused last-dimension kernel (`softmax_last_dim`) instead
//!   of the four-pass generic softmax;
//! * exact (erf) GELU runs as a vectorizable custom CPU op (a rational approximation of erf
//!   accurate to a few float ulps, see [`erf`]) instead of a scalar `erff` per element, which
//!   was a fifth of the CPU time; other devices keep candle's `gelu_erf`.
//!
//! Numerics otherwise follow Hugging Face's `BertModel` (additive `f32::MIN` attention mask,
//! post-layer-norm residual blocks); the parity test holds the result to sentence-transformers.

use candle_core::{CpuStorage, CustomOp1, CustomOp2, DType, Device, Layout, Module, Shape, Tensor};
use candle_nn::{embedding, layer_norm, linear, Embedding, LayerNorm, Linear, VarBuilder};
use serde::Deserialize;

use crate::bf16::PackedBf16;
use crate::int8::{supported as avx2_fma, PackedI8};
use crate::Precision;

/// The fields of a BERT `config.json` the encoder reads (Hugging Face's `BertConfig`; unknown
/// fields are ignored). Kept here rather than taken from candle-transformers, whose whole model
/// zoo took about 100 s of every cold release build for this one struct.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Config {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub hidden_act: HiddenAct,
    pub max_position_embeddings: usize,
    pub type_vocab_size: usize,
    pub layer_norm_eps: f64,
    pub pad_token_id: usize,
    /// Only `absolute` is supported (refused at load otherwise).
    #[serde(default = "absolute")]
    pub position_embedding_type: String,
}

fn absolute() -> String {
    "absolute".into()
}

/// The intermediate layer's activation (`hidden_act`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HiddenAct {
    /// Exact (erf) GELU.
    Gelu,
    /// Tanh-approximated GELU.
    #[serde(alias = "gelu_new", alias = "gelu_pytorch_tanh")]
    GeluApproximate,
    Relu,
}

/// A dense layer, `y = x · Wᵀ + b`, in f32, bfloat16 or 8-bit integers ([`crate::Precision`]).
enum Dense {
    F32(DenseF32),
    /// The bfloat16 kernel, with GELU fused into it when the layer is the intermediate one.
    Bf16(PackedBf16),
    /// The 8-bit kernel, likewise.
    Int8(PackedI8),
}

/// What the bfloat16 and 8-bit kernels share: a packed layer that multiplies rows of f32, with
/// the residual connection (and GELU, when packed with it) applied in its store.
trait Packed: Sync {
    /// The candle op's name.
    const NAME: &'static str;
    fn in_dim(&self) -> usize;
    fn out_dim(&self) -> usize;
    fn forward(&self, x: &[f32], m: usize, residual: Option<&[f32]>) -> Vec<f32>;
}

impl Packed for PackedBf16 {
    const NAME: &'static str = "cairn-dense-bf16";
    fn in_dim(&self) -> usize {
        PackedBf16::in_dim(self)
    }
    fn out_dim(&self) -> usize {
        PackedBf16::out_dim(self)
    }
    fn forward(&self, x: &[f32], m: usize, residual: Option<&[f32]>) -> Vec<f32> {
        PackedBf16::forward(self, x, m, residual)
    }
}

impl Packed for PackedI8 {
    const NAME: &'static str = "cairn-dense-int8";
    fn in_dim(&self) -> usize {
        PackedI8::in_dim(self)
    }
    fn out_dim(&self) -> usize {
        PackedI8::out_dim(self)
    }
    fn forward(&self, x: &[f32], m: usize, residual: Option<&[f32]>) -> Vec<f32> {
        PackedI8::forward(self, x, m, residual)
    }
}

impl Dense {
    /// `gelu`: the layer is followed by exact GELU, which the bfloat16 and 8-bit kernels apply
    /// themselves (the f32 path leaves it to [`Layer::activate`]). `x_max`: the largest `|x|`
    /// of each input channel seen in calibration, which the 8-bit kernel smooths by (others
    /// ignore it).
    fn new(
        l: &Linear,
        precision: Precision,
        gelu: bool,
        x_max: Option<&[f32]>,
    ) -> candle_core::Result<Self> {
        let bias = l
            .bias()
            .cloned()
            .ok_or_else(|| candle_core::Error::Msg("dense layer without bias".into()))?;
        let w = l.weight().contiguous()?;
        let (n, k) = w.dims2()?;
        // The packed kernels read the weight and bias as plain f32 rows.
        let plain = || -> candle_core::Result<(Vec<f32>, Vec<f32>)> {
            Ok((w.flatten_all()?.to_vec1()?, bias.to_vec1()?))
        };
        let refused = |what: &str| candle_core::Error::Msg(format!("this CPU has no {what}"));
        match precision {
            Precision::Bf16 => {
                let (wv, bv) = plain()?;
                PackedBf16::new(&wv, n, k, &bv, gelu)
                    .map(Self::Bf16)
                    .ok_or_else(|| refused("AVX-512 BF16"))
            }
            Precision::Int8 => {
                if let Some(x) = x_max.filter(|x| x.len() != k) {
                    candle_core::bail!("calibration of {} channels for a layer of {k}", x.len());
                }
                let (wv, bv) = plain()?;
                PackedI8::smoothed(&wv, n, k, &bv, gelu, x_max)
                    .map(Self::Int8)
                    .ok_or_else(|| refused("AVX2"))
            }
            Precision::F32 | Precision::Auto => Ok(Self::F32(DenseF32 { w, bias })),
        }
    }

    /// Whether `forward` already applied GELU.
    fn fused_gelu(&self) -> bool {
        match self {
            Self::F32(_) => false,
            Self::Bf16(p) => p.gelu(),
            Self::Int8(p) => p.gelu(),
        }
    }

    /// `(…, in)` → `(…, out)`.
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        match self {
            Self::F32(d) => d.forward(x),
            Self::Bf16(p) => x.contiguous()?.apply_op1_no_bwd(&DensePacked(p)),
            Self::Int8(p) => x.contiguous()?.apply_op1_no_bwd(&DensePacked(p)),
        }
    }

    /// `forward(x) + residual`, the residual connection (fused into the packed kernels).
    fn forward_add(&self, x: &Tensor, residual: &Tensor) -> candle_core::Result<Tensor> {
        match self {
            Self::F32(d) => d.forward(x)? + residual,
            Self::Bf16(p) => x
                .contiguous()?
                .apply_op2_no_bwd(&residual.contiguous()?, &DensePackedResidual(p)),
            Self::Int8(p) => x
                .contiguous()?
                .apply_op2_no_bwd(&residual.contiguous()?, &DensePackedResidual(p)),
        }
    }
}

/// The f32 dense layer, `W` kept as `(out, in)`.
///
/// `x · Wᵀ` hands candle's CPU matrix multiply (the `gemm` crate) the weight as a transposed
/// view, which it re-lays out on every call. For a short input (a search query: a dozen
/// tokens) that copy of the whole weight costs more than the arithmetic: profiled, half of a
/// 5-word query's 21 ms went into it. Below [`SHORT_ROWS`] rows the product is taken the other
/// way round, `y = (W · xᵀ)ᵀ`, which reads `W` in its stored layout and only transposes the
/// few input rows (measured: 21 → 10-12 ms). Long inputs amortize the copy, and keep `x · Wᵀ`.
struct DenseF32 {
    w: Tensor,
    bias: Tensor,
}

/// Inputs with fewer rows (tokens in the batch) than this multiply as `(W · xᵀ)ᵀ`.
const SHORT_ROWS: usize = 64;

impl DenseF32 {
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let dims = x.dims().to_vec();
        let k = dims.last().copied().unwrap_or(0);
        let rows: usize = dims[..dims.len().saturating_sub(1)].iter().product();
        let x2 = x.contiguous()?.reshape((rows, k))?;
        let y = if rows < SHORT_ROWS {
            self.w.matmul(&x2.t()?)?.t()?
        } else {
            x2.matmul(&self.w.t()?)?
        };
        let y = y.broadcast_add(&self.bias)?;
        let mut out = dims;
        if let Some(last) = out.last_mut() {
            *last = self.w.dim(0)?;
        }
        y.reshape(out)
    }
}

/// The f32 values of a custom op's CPU input, which must be contiguous (the ops here read
/// rows as slices).
fn contiguous_f32<'a>(
    op: &str,
    storage: &'a CpuStorage,
    layout: &Layout,
) -> candle_core::Result<&'a [f32]> {
    let CpuStorage::F32(data) = storage else {
        candle_core::bail!("{op}: f32 inputs only");
    };
    let Some((start, end)) = layout.contiguous_offsets() else {
        candle_core::bail!("{op}: contiguous inputs only");
    };
    Ok(&data[start..end])
}

/// A packed kernel as a candle op on a contiguous f32 CPU tensor `(…, in)`.
struct DensePacked<'a, P>(&'a P);

impl<P: Packed> CustomOp1 for DensePacked<'_, P> {
    fn name(&self) -> &'static str {
        P::NAME
    }

    fn cpu_fwd(
        &self,
        storage: &CpuStorage,
        layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let x = contiguous_f32(self.name(), storage, layout)?;
        let mut dims = layout.shape().dims().to_vec();
        let k = dims.last().copied().unwrap_or(0);
        if k != self.0.in_dim() {
            candle_core::bail!(
                "{}: input width {k}, layer expects {}",
                P::NAME,
                self.0.in_dim()
            );
        }
        let out = self.0.forward(x, x.len() / k, None);
        if let Some(last) = dims.last_mut() {
            *last = self.0.out_dim();
        }
        Ok((CpuStorage::F32(out), Shape::from(dims)))
    }
}

/// `x · Wᵀ + b + residual` on a packed kernel as a candle op on two contiguous f32 CPU
/// tensors, `x: (…, in)` and `residual: (…, out)`.
struct DensePackedResidual<'a, P>(&'a P);

impl<P: Packed> CustomOp2 for DensePackedResidual<'_, P> {
    fn name(&self) -> &'static str {
        P::NAME
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let x = contiguous_f32(self.name(), s1, l1)?;
        let res = contiguous_f32(self.name(), s2, l2)?;
        let k = l1.shape().dims().last().copied().unwrap_or(0);
        let m = x.len().checked_div(k).unwrap_or(0);
        if k != self.0.in_dim() || res.len() != m * self.0.out_dim() {
            candle_core::bail!(
                "{} (residual): shapes {:?} and {:?} for a {}→{} layer",
                P::NAME,
                l1.shape(),
                l2.shape(),
                self.0.in_dim(),
                self.0.out_dim()
            );
        }
        let out = self.0.forward(x, m, Some(res));
        Ok((CpuStorage::F32(out), l2.shape().clone()))
    }
}

pub(crate) struct Bert {
    embeddings: Embeddings,
    layers: Vec<Layer>,
}

struct Embeddings {
    word: Embedding,
    position: Embedding,
    token_type: Embedding,
    norm: LayerNorm,
}

struct Layer {
    qkv: Dense,
    heads: usize,
    head_dim: usize,
    attn_out: Dense,
    attn_norm: LayerNorm,
    intermediate: Dense,
    act: HiddenAct,
    output: Dense,
    out_norm: LayerNorm,
}

impl Bert {
    /// Loads from a `VarBuilder` already pointed at the encoder's prefix (the one holding
    /// `embeddings.*` and `encoder.*`). `maxima`: per layer, the largest input of each channel
    /// of its two layer-normed inputs ([`Bert::input_maxima`] of the f32 model), which the
    /// 8-bit kernel smooths by.
    pub fn load(
        vb: &VarBuilder,
        cfg: &Config,
        precision: Precision,
        maxima: Option<&[LayerMaxima]>,
    ) -> candle_core::Result<Self> {
        if cfg.position_embedding_type != "absolute" {
            candle_core::bail!(
                "only absolute position embeddings are supported, not {:?}",
                cfg.position_embedding_type
            );
        }
        let heads = cfg.num_attention_heads;
        if heads == 0 || (cfg.hidden_size / heads) * heads != cfg.hidden_size {
            candle_core::bail!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                cfg.hidden_size,
                cfg.num_attention_heads
            );
        }
        let h = cfg.hidden_size;
        let e = vb.pp("embeddings");
        let embeddings = Embeddings {
            word: embedding(cfg.vocab_size, h, e.pp("word_embeddings"))?,
            position: embedding(cfg.max_position_embeddings, h, e.pp("position_embeddings"))?,
            token_type: embedding(cfg.type_vocab_size, h, e.pp("token_type_embeddings"))?,
            norm: layer_norm(h, cfg.layer_norm_eps, e.pp("LayerNorm"))?,
        };
        let layers = (0..cfg.num_hidden_layers)
            .map(|i| {
                let m = maxima.and_then(|m| m.get(i));
                Layer::load(&vb.pp(format!("encoder.layer.{i}")), cfg, precision, m)
            })
            .collect::<candle_core::Result<Vec<_>>>()?;
        Ok(Self { embeddings, layers })
    }

    /// `(batch, seq)` ids, type ids and 0/1 mask → `(batch, seq, hidden)` last hidden states.
    pub fn forward(
        &self,
        ids: &Tensor,
        type_ids: &Tensor,
        mask: &Tensor,
    ) -> candle_core::Result<Tensor> {
        self.run(ids, type_ids, mask, None)
    }

    /// Per layer, the largest `|x|` of each channel of the inputs of its QKV projection and of
    /// its intermediate layer (both outputs of a layer norm), over one unpadded sequence of
    /// `ids`: the calibration the 8-bit kernel's smoothing needs. Meant for the f32 model.
    pub fn input_maxima(&self, ids: &Tensor) -> candle_core::Result<Vec<LayerMaxima>> {
        let mut out = Vec::with_capacity(self.layers.len());
        self.run(ids, &ids.zeros_like()?, &ids.ones_like()?, Some(&mut out))?;
        Ok(out)
    }

    /// The forward pass, recording each layer's input maxima into `record` when given.
    fn run(
        &self,
        ids: &Tensor,
        type_ids: &Tensor,
        mask: &Tensor,
        mut record: Option<&mut Vec<LayerMaxima>>,
    ) -> candle_core::Result<Tensor> {
        let (_, seq) = ids.dims2()?;
        let positions = Tensor::arange(0u32, seq as u32, ids.device())?;
        let x = self
            .embeddings
            .word
            .forward(ids)?
            .add(&self.embeddings.token_type.forward(type_ids)?)?
            .broadcast_add(&self.embeddings.position.forward(&positions)?)?;
        let mut x = self.embeddings.norm.forward(&x)?;
        // (batch, 1, 1, seq): 0 where attended, f32::MIN at padding (Hugging Face's extended mask).
        let bias = ((mask.to_dtype(DType::F32)? - 1.0)? * f64::from(f32::MAX))?
            .unsqueeze(1)?
            .unsqueeze(1)?;
        for layer in &self.layers {
            x = layer.forward(&x, &bias, record.as_deref_mut())?;
        }
        Ok(x)
    }
}

/// The largest `|x|` of each channel (the last dimension) of `t`.
fn channel_max(t: &Tensor) -> candle_core::Result<Vec<f32>> {
    t.abs()?
        .flatten_to(t.rank().saturating_sub(2))?
        .max(0)?
        .to_vec1()
}

/// A layer's calibration: the largest `|x|` of each input channel of its QKV projection and
/// of its intermediate layer.
pub(crate) struct LayerMaxima {
    qkv: Vec<f32>,
    intermediate: Vec<f32>,
}

impl LayerMaxima {
    /// The larger of each channel's two maxima.
    pub fn merge(&mut self, other: &Self) {
        for (mine, theirs) in [
            (&mut self.qkv, &other.qkv),
            (&mut self.intermediate, &other.intermediate),
        ] {
            for (a, b) in mine.iter_mut().zip(theirs) {
                *a = a.max(*b);
            }
        }
    }
}

impl Layer {
    fn load(
        vb: &VarBuilder,
        cfg: &Config,
        precision: Precision,
        maxima: Option<&LayerMaxima>,
    ) -> candle_core::Result<Self> {
        let h = cfg.hidden_size;
        let sa = vb.pp("attention.self");
        let q = linear(h, h, sa.pp("query"))?;
        let k = linear(h, h, sa.pp("key"))?;
        let v = linear(h, h, sa.pp("value"))?;
        let bias = |l: &Linear| {
            l.bias()
                .cloned()
                .ok_or_else(|| candle_core::Error::Msg("attention projection without bias".into()))
        };
        let qkv = Linear::new(
            Tensor::cat(&[q.weight(), k.weight(), v.weight()], 0)?,
            Some(Tensor::cat(&[bias(&q)?, bias(&k)?, bias(&v)?], 0)?),
        );
        Ok(Self {
            qkv: Dense::new(&qkv, precision, false, maxima.map(|m| m.qkv.as_slice()))?,
            heads: cfg.num_attention_heads,
            head_dim: h / cfg.num_attention_heads,
            attn_out: Dense::new(
                &linear(h, h, vb.pp("attention.output.dense"))?,
                precision,
                false,
                None,
            )?,
            attn_norm: layer_norm(h, cfg.layer_norm_eps, vb.pp("attention.output.LayerNorm"))?,
            intermediate: Dense::new(
                &linear(h, cfg.intermediate_size, vb.pp("intermediate.dense"))?,
                precision,
                matches!(cfg.hidden_act, HiddenAct::Gelu),
                maxima.map(|m| m.intermediate.as_slice()),
            )?,
            act: cfg.hidden_act,
            output: Dense::new(
                &linear(cfg.intermediate_size, h, vb.pp("output.dense"))?,
                precision,
                false,
                None,
            )?,
            out_norm: layer_norm(h, cfg.layer_norm_eps, vb.pp("output.LayerNorm"))?,
        })
    }

    /// The layer; with `record`, its two layer-normed inputs' channel maxima pushed to it.
    ///
    /// One function on purpose: split in two (attention, then feed-forward), the attention's
    /// tensors were freed before the feed-forward's were allocated, and the allocator handed
    /// the pages back and faulted fresh ones in: measured 12% slower on 40-token sentences.
    fn forward(
        &self,
        x: &Tensor,
        mask_bias: &Tensor,
        record: Option<&mut Vec<LayerMaxima>>,
    ) -> candle_core::Result<Tensor> {
        let qkv_max = match record {
            Some(_) => channel_max(x)?,
            None => Vec::new(),
        };
        let (b, seq, h) = x.dims3()?;
        // (b, seq, 3h) → (3, b, heads, seq, head_dim)
        let qkv = self
            .qkv
            .forward(x)?
            .reshape((b, seq, 3, self.heads, self.head_dim))?
            .permute((2, 0, 3, 1, 4))?;
        let q = qkv.get(0)?.contiguous()?;
        let k = qkv.get(1)?.contiguous()?;
        let v = qkv.get(2)?.contiguous()?;
        let scale = 1.0 / (self.head_dim as f64).sqrt();
        let scores = q.matmul(&k.t()?)?;
        let probs = match scores.device() {
            Device::Cpu => scores.apply_op2_no_bwd(
                &mask_bias.contiguous()?,
                &MaskedSoftmax {
                    scale: scale as f32,
                },
            )?,
            _ => candle_nn::ops::softmax_last_dim(&(scores * scale)?.broadcast_add(mask_bias)?)?,
        };
        let ctx = probs
            .matmul(&v)?
            .transpose(1, 2)?
            .contiguous()?
            .reshape((b, seq, h))?;
        let x = self
            .attn_norm
            .forward(&self.attn_out.forward_add(&ctx, x)?)?;
        if let Some(r) = record {
            r.push(LayerMaxima {
                qkv: qkv_max,
                intermediate: channel_max(&x)?,
            });
        }
        let inner = self.intermediate.forward(&x)?;
        let inner = if self.intermediate.fused_gelu() {
            inner
        } else {
            self.activate(&inner)?
        };
        self.out_norm.forward(&self.output.forward_add(&inner, &x)?)
    }

    fn activate(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        match self.act {
            HiddenAct::Gelu => match x.device() {
                Device::Cpu if x.dtype() == DType::F32 => x.apply_op1_no_bwd(&GeluErf),
                _ => x.gelu_erf(),
            },
            HiddenAct::GeluApproximate => x.gelu(),
            HiddenAct::Relu => x.relu(),
        }
    }
}

/// The attention softmax in one pass on CPU: `softmax(scores · scale + mask)` over the last
/// dimension, `scores: (batch, heads, queries, keys)` and the additive mask `(batch, 1, 1, keys)`
/// (0 or `f32::MIN`), both contiguous f32. It replaces a scale, a broadcast add and candle's
/// softmax, whose `exp` is a scalar libm call per element: profiled on 180-token passages,
/// `expf` alone was 14% of a bfloat16 forward pass. [`exp`] here vectorizes.
struct MaskedSoftmax {
    scale: f32,
}

impl CustomOp2 for MaskedSoftmax {
    fn name(&self) -> &'static str {
        "cairn-masked-softmax"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let scores = contiguous_f32(self.name(), s1, l1)?;
        let mask = contiguous_f32(self.name(), s2, l2)?;
        let (b, _, _, k) = l1.shape().dims4()?;
        if k == 0 || mask.len() != b * k {
            candle_core::bail!(
                "cairn-masked-softmax: mask {:?} does not fit scores {:?}",
                l2.shape(),
                l1.shape()
            );
        }
        let rows_per_batch = scores.len() / (b * k);
        let mut out = vec![0f32; scores.len()];
        softmax_rows(scores, mask, k, rows_per_batch, self.scale, &mut out);
        Ok((CpuStorage::F32(out), l1.shape().clone()))
    }
}

// The element-wise loops below: the crate is built for the baseline x86-64 (SSE2: 4 lanes), so
// each loop also has a copy compiled for AVX2 (8 lanes), chosen at run time where the CPU has
// AVX2 and FMA (`avx2_fma`, the 8-bit kernel's own test). Rust never fuses a multiply and an
// add on its own, so the two copies compute the same roundings and agree bit for bit (tested).
// The softmax, the larger of the two (12% of an ingest's samples in its AVX2 copy, measured on
// an AMD EPYC with AVX-512), has a third copy for AVX-512 (16 lanes: its partial maxima and
// sums are 16 wide), chosen first where the CPU has it.

/// Whether this CPU runs the softmax's AVX-512 copy.
#[cfg(target_arch = "x86_64")]
fn avx512() -> bool {
    std::arch::is_x86_feature_detected!("avx512f") && avx2_fma()
}

/// Every row (of `k`) of `scores` into `out`, softmaxed after `· scale + mask`, where the mask
/// row is the batch row's (`rows_per_batch` score rows each). Measured by `perf` on an int8
/// ingest of 115 documents (rows of ~180 tokens): 12% of the samples in its baseline build.
fn softmax_rows(
    scores: &[f32],
    mask: &[f32],
    k: usize,
    rows_per_batch: usize,
    scale: f32,
    out: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    if avx512() {
        #[allow(unsafe_code)]
        // SAFETY: the CPU has AVX-512F, AVX2 and FMA (just checked), all the function requires.
        unsafe {
            softmax_rows_avx512(scores, mask, k, rows_per_batch, scale, out);
        }
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if avx2_fma() {
        #[allow(unsafe_code)]
        // SAFETY: the CPU has AVX2 and FMA (just checked), all the function requires.
        unsafe {
            softmax_rows_avx2(scores, mask, k, rows_per_batch, scale, out);
        }
        return;
    }
    softmax_rows_any(scores, mask, k, rows_per_batch, scale, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
fn softmax_rows_avx512(
    scores: &[f32],
    mask: &[f32],
    k: usize,
    rows_per_batch: usize,
    scale: f32,
    out: &mut [f32],
) {
    softmax_rows_any(scores, mask, k, rows_per_batch, scale, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn softmax_rows_avx2(
    scores: &[f32],
    mask: &[f32],
    k: usize,
    rows_per_batch: usize,
    scale: f32,
    out: &mut [f32],
) {
    softmax_rows_any(scores, mask, k, rows_per_batch, scale, out);
}

#[inline(always)]
fn softmax_rows_any(
    scores: &[f32],
    mask: &[f32],
    k: usize,
    rows_per_batch: usize,
    scale: f32,
    out: &mut [f32],
) {
    for (i, (src, dst)) in scores
        .chunks_exact(k)
        .zip(out.chunks_exact_mut(k))
        .enumerate()
    {
        let bi = i / rows_per_batch;
        softmax_row(src, &mask[bi * k..(bi + 1) * k], scale, dst);
    }
}

/// Lanes of the partial maxima and sums, so that the reductions vectorize.
const LANES: usize = 16;

#[inline(always)]
fn softmax_row(src: &[f32], mask: &[f32], scale: f32, dst: &mut [f32]) {
    let mut max = [f32::MIN; LANES];
    for ((d, &s), &m) in dst.iter_mut().zip(src).zip(mask) {
        *d = s * scale + m;
    }
    let mut chunks = dst.chunks_exact(LANES);
    for c in &mut chunks {
        for (m, &v) in max.iter_mut().zip(c) {
            *m = if v > *m { v } else { *m };
        }
    }
    let max = chunks
        .remainder()
        .iter()
        .chain(&max)
        .fold(f32::MIN, |a, &v| if v > a { v } else { a });
    let mut sum = [0f32; LANES];
    let mut chunks = dst.chunks_exact_mut(LANES);
    for c in &mut chunks {
        for (s, v) in sum.iter_mut().zip(c) {
            *v = exp(*v - max);
            *s += *v;
        }
    }
    let mut total: f32 = 0.0;
    for v in chunks.into_remainder() {
        *v = exp(*v - max);
        total += *v;
    }
    total += sum.iter().sum::<f32>();
    let inv = 1.0 / total;
    for v in dst {
        *v *= inv;
    }
}

/// eˣ for f32 as a branch-free polynomial (Cephes' `expf`: range reduction by ln 2 in two
/// parts, a degree-6 polynomial, the power of two put in the exponent bits), so loops over it
/// vectorize; error about 1 ulp. Below -87 it returns e⁻⁸⁷ (≈ 1.6e-38), which a softmax row
/// with any unmasked entry cannot tell from 0.
#[inline(always)]
#[allow(clippy::excessive_precision)]
fn exp(x: f32) -> f32 {
    let x = x.clamp(-87.0, 88.0);
    // Round x·log₂e to the nearest integer by adding 1.5·2²³ (no SSE4.1 round): the sum's low
    // mantissa bits then hold that integer, read without a float → int conversion (whose
    // saturating `as` does not vectorize).
    const SHIFT: f32 = 12_582_912.0;
    let t = x * std::f32::consts::LOG2_E + SHIFT;
    let n = t - SHIFT;
    let ni = (t.to_bits() as i32).wrapping_sub(SHIFT.to_bits() as i32);
    let r = x - n * 0.693_359_375 + n * 2.121_944_4e-4;
    let mut p = 1.987_569_15e-4_f32;
    p = p * r + 1.398_199_95e-3;
    p = p * r + 8.333_451_9e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 5.000_000_1e-1;
    let e = p * r * r + r + 1.0;
    e * f32::from_bits(((ni + 127) as u32) << 23)
}

/// Exact GELU, `x · ½ · (1 + erf(x / √2))`, on contiguous f32 CPU tensors.
struct GeluErf;

/// Below this many elements the op stays on the calling thread.
const PARALLEL_MIN: usize = 1 << 15;

impl CustomOp1 for GeluErf {
    fn name(&self) -> &'static str {
        "cairn-gelu-erf"
    }

    fn cpu_fwd(
        &self,
        storage: &CpuStorage,
        layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let src = contiguous_f32(self.name(), storage, layout)?;
        let mut dst = vec![0f32; src.len()];
        // The pool this runs in: one thread inside a compute lane.
        let threads = rayon::current_num_threads().max(1);
        if threads == 1 || src.len() < PARALLEL_MIN {
            gelu_slice(src, &mut dst);
        } else {
            let chunk = src.len().div_ceil(threads);
            std::thread::scope(|s| {
                for (i, o) in src.chunks(chunk).zip(dst.chunks_mut(chunk)) {
                    s.spawn(move || gelu_slice(i, o));
                }
            });
        }
        Ok((CpuStorage::F32(dst), layout.shape().clone()))
    }
}

/// GELU of `src` into `dst`, in the AVX2 copy where the CPU has it (see `softmax_rows`).
fn gelu_slice(src: &[f32], dst: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if avx2_fma() {
        #[allow(unsafe_code)]
        // SAFETY: the CPU has AVX2 and FMA (just checked), all the function requires.
        unsafe {
            gelu_slice_avx2(src, dst);
        }
        return;
    }
    gelu_slice_any(src, dst);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn gelu_slice_avx2(src: &[f32], dst: &mut [f32]) {
    gelu_slice_any(src, dst);
}

#[inline(always)]
fn gelu_slice_any(src: &[f32], dst: &mut [f32]) {
    for (d, &x) in dst.iter_mut().zip(src) {
        *d = gelu(x);
    }
}

/// Exact (erf) GELU of one value; the f32 op above and the bfloat16 kernel's fused store.
#[inline(always)]
pub(crate) fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// erf for f32 as a branch-free rational function, so loops over it vectorize: on [-4, 4]
/// `erf(x) ≈ x·P(x²)/Q(x²)` with the degree-13/8 minimax coefficients that Eigen and XLA use
/// for float erf (error a few ulp); outside it erf is ±1 to f32 precision.
#[inline(always)]
#[allow(clippy::excessive_precision)]
pub(crate) fn erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = -2.72614225801306e-10_f32;
    p = p * x2 + 2.77068142495902e-08;
    p = p * x2 - 2.10102402082508e-06;
    p = p * x2 - 5.69250639462346e-05;
    p = p * x2 - 7.34990630326855e-04;
    p = p * x2 - 2.95459980854025e-03;
    p = p * x2 - 1.60960333262415e-02;
    let mut q = -1.45660718464996e-05_f32;
    q = q * x2 - 2.13374055278905e-04;
    q = q * x2 - 1.68282697438203e-03;
    q = q * x2 - 7.37332916720468e-03;
    q = q * x2 - 1.42647390514189e-02;
    x * p / q
}

#[cfg(test)]
mod tests {
    use super::{
        avx2_fma, erf, exp, gelu_slice, gelu_slice_any, softmax_row, softmax_rows, softmax_rows_any,
    };
    #[cfg(target_arch = "x86_64")]
    use super::{avx512, softmax_rows_avx2, softmax_rows_avx512};

    /// The run-time chosen copies (AVX2 here, where the CPU has it) against the baseline
    /// build of the same loops, bit for bit, on rows of several lengths (lane multiples and
    /// remainders), two batch rows with their own masks, and values across GELU's range.
    #[test]
    fn vector_copies_match_the_baseline_bit_for_bit() {
        if !avx2_fma() {
            println!("this CPU has no AVX2: one copy only");
        }
        for k in [1usize, 7, 16, 33, 180, 256] {
            let rows_per_batch = 3;
            let scores: Vec<f32> = (0..2 * rows_per_batch * k)
                .map(|i| (i as f32 * 0.731).sin() * 9.0)
                .collect();
            let mask: Vec<f32> = (0..2 * k)
                .map(|i| if i % k >= k - k / 5 { f32::MIN } else { 0.0 })
                .collect();
            let (mut a, mut b) = (vec![0f32; scores.len()], vec![0f32; scores.len()]);
            softmax_rows(&scores, &mask, k, rows_per_batch, 0.125, &mut a);
            softmax_rows_any(&scores, &mask, k, rows_per_batch, 0.125, &mut b);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&a), bits(&b), "softmax, rows of {k}");
            // Each vector copy this CPU can run, not only the one the dispatch picks.
            #[cfg(target_arch = "x86_64")]
            #[allow(unsafe_code)]
            {
                if avx2_fma() {
                    // SAFETY: the CPU has AVX2 and FMA (just checked).
                    unsafe { softmax_rows_avx2(&scores, &mask, k, rows_per_batch, 0.125, &mut a) };
                    assert_eq!(bits(&a), bits(&b), "softmax (AVX2), rows of {k}");
                }
                if avx512() {
                    // SAFETY: the CPU has AVX-512F, AVX2 and FMA (just checked).
                    unsafe {
                        softmax_rows_avx512(&scores, &mask, k, rows_per_batch, 0.125, &mut a)
                    };
                    assert_eq!(bits(&a), bits(&b), "softmax (AVX-512), rows of {k}");
                } else {
                    println!("this CPU has no AVX-512: the softmax's AVX-512 copy is not run");
                }
            }
            let (mut a, mut b) = (vec![0f32; scores.len()], vec![0f32; scores.len()]);
            gelu_slice(&scores, &mut a);
            gelu_slice_any(&scores, &mut b);
            assert_eq!(bits(&a), bits(&b), "gelu, {} values", scores.len());
        }
    }

    #[test]
    fn exp_matches_std() {
        let mut worst = 0.0f32;
        let mut x = -87.0f32;
        while x <= 88.0 {
            let (got, want) = (exp(x), x.exp());
            worst = worst.max(((got - want) / want).abs());
            x += 1e-3;
        }
        assert!(worst < 4e-7, "max relative exp error {worst}");
        assert!(exp(f32::MIN) < 1e-37);
    }

    #[test]
    fn masked_softmax_row() {
        // 20 keys (a whole lane chunk and a remainder), the last three masked.
        let src: Vec<f32> = (0..20).map(|i| (i as f32 * 0.37).sin() * 4.0).collect();
        let mask: Vec<f32> = (0..20)
            .map(|i| if i >= 17 { f32::MIN } else { 0.0 })
            .collect();
        let mut got = vec![0f32; 20];
        softmax_row(&src, &mask, 0.5, &mut got);
        let live: Vec<f64> = src[..17].iter().map(|&s| f64::from(s * 0.5)).collect();
        let max = live.iter().cloned().fold(f64::MIN, f64::max);
        let total: f64 = live.iter().map(|v| (v - max).exp()).sum();
        for (i, &g) in got.iter().enumerate() {
            let want = if i < 17 {
                (live[i] - max).exp() / total
            } else {
                0.0
            };
            assert!((f64::from(g) - want).abs() < 1e-6, "key {i}: {g} vs {want}");
        }
    }

    /// erf in f64 by its Maclaurin series (|x| ≤ 3) or continued fraction for erfc (|x| > 3):
    /// a reference independent of the approximation under test.
    fn erf_ref(x: f64) -> f64 {
        let ax = x.abs();
        let r = if ax <= 3.0 {
            // Σ (-1)ⁿ x^(2n+1) / (n! (2n+1))
            let mut sum = 0.0;
            let mut term = ax;
            for n in 0..120 {
                sum += term / f64::from(2 * n + 1);
                term *= -ax * ax / f64::from(n + 1);
            }
            sum * 2.0 / std::f64::consts::PI.sqrt()
        } else {
            // erfc(x) = exp(-x²)/√π · 1/(x + 1/2/(x + 1/(x + 3/2/(x + ...))))
            let mut f = 0.0;
            for k in (1..60).rev() {
                f = (k as f64 / 2.0) / (ax + f);
            }
            1.0 - (-ax * ax).exp() / std::f64::consts::PI.sqrt() / (ax + f)
        };
        r.copysign(x)
    }

    #[test]
    fn erf_matches_reference() {
        let mut worst = 0.0f64;
        let mut x = -6.0f64;
        while x <= 6.0 {
            let got = f64::from(erf(x as f32));
            let want = erf_ref(f64::from(x as f32));
            worst = worst.max((got - want).abs());
            x += 1e-3;
        }
        assert!(worst < 5e-7, "max |erf error| {worst}");
        assert_eq!(erf(0.0), 0.0);
        assert!(erf(f32::INFINITY) > 0.999_999);
        assert!(erf(-1e30) < -0.999_999);
    }
}
