//! An inference-only BERT encoder over candle, reading the same weights and
//! `candle_transformers::models::bert::Config` as `candle_transformers::models::bert::BertModel`,
//! restructured for CPU throughput the way text-embeddings-inference's own BERT is:
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

use candle_core::{CpuStorage, CustomOp1, DType, Device, Layout, Module, Shape, Tensor};
use candle_nn::{embedding, layer_norm, linear, Embedding, LayerNorm, Linear, VarBuilder};
use candle_transformers::models::bert::{Config, HiddenAct, PositionEmbeddingType};

/// A dense layer, `y = x · Wᵀ + b`, with `W` kept as `(out, in)`.
///
/// `x · Wᵀ` hands candle's CPU matrix multiply (the `gemm` crate) the weight as a transposed
/// view, which it re-lays out on every call. For a short input (a search query: a dozen
/// tokens) that copy of the whole weight costs more than the arithmetic: profiled, half of a
/// 5-word query's 21 ms went into it. Below [`SHORT_ROWS`] rows the product is taken the other
/// way round, `y = (W · xᵀ)ᵀ`, which reads `W` in its stored layout and only transposes the
/// few input rows (measured: 21 → 10-12 ms). Long inputs amortize the copy, and keep `x · Wᵀ`.
struct Dense {
    w: Tensor,
    bias: Tensor,
}

/// Inputs with fewer rows (tokens in the batch) than this multiply as `(W · xᵀ)ᵀ`.
const SHORT_ROWS: usize = 64;

impl Dense {
    fn new(l: &Linear) -> candle_core::Result<Self> {
        let bias = l
            .bias()
            .cloned()
            .ok_or_else(|| candle_core::Error::Msg("dense layer without bias".into()))?;
        Ok(Self {
            w: l.weight().contiguous()?,
            bias,
        })
    }

    /// `(…, in)` → `(…, out)`.
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
    /// `embeddings.*` and `encoder.*`).
    pub fn load(vb: &VarBuilder, cfg: &Config) -> candle_core::Result<Self> {
        if cfg.position_embedding_type != PositionEmbeddingType::Absolute {
            candle_core::bail!("only absolute position embeddings are supported");
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
            .map(|i| Layer::load(&vb.pp(format!("encoder.layer.{i}")), cfg))
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
            x = layer.forward(&x, &bias)?;
        }
        Ok(x)
    }
}

impl Layer {
    fn load(vb: &VarBuilder, cfg: &Config) -> candle_core::Result<Self> {
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
            qkv: Dense::new(&qkv)?,
            heads: cfg.num_attention_heads,
            head_dim: h / cfg.num_attention_heads,
            attn_out: Dense::new(&linear(h, h, vb.pp("attention.output.dense"))?)?,
            attn_norm: layer_norm(h, cfg.layer_norm_eps, vb.pp("attention.output.LayerNorm"))?,
            intermediate: Dense::new(&linear(
                h,
                cfg.intermediate_size,
                vb.pp("intermediate.dense"),
            )?)?,
            act: cfg.hidden_act,
            output: Dense::new(&linear(cfg.intermediate_size, h, vb.pp("output.dense"))?)?,
            out_norm: layer_norm(h, cfg.layer_norm_eps, vb.pp("output.LayerNorm"))?,
        })
    }

    fn forward(&self, x: &Tensor, mask_bias: &Tensor) -> candle_core::Result<Tensor> {
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
        let scores = (q.matmul(&k.t()?)? * scale)?.broadcast_add(mask_bias)?;
        let probs = candle_nn::ops::softmax_last_dim(&scores)?;
        let ctx = probs
            .matmul(&v)?
            .transpose(1, 2)?
            .contiguous()?
            .reshape((b, seq, h))?;
        let x = self
            .attn_norm
            .forward(&(self.attn_out.forward(&ctx)? + x)?)?;
        let inner = self.activate(&self.intermediate.forward(&x)?)?;
        self.out_norm.forward(&(self.output.forward(&inner)? + x)?)
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
        let CpuStorage::F32(data) = storage else {
            candle_core::bail!("cairn-gelu-erf: f32 only");
        };
        let Some((start, end)) = layout.contiguous_offsets() else {
            candle_core::bail!("cairn-gelu-erf: contiguous input only");
        };
        let src = &data[start..end];
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

fn gelu_slice(src: &[f32], dst: &mut [f32]) {
    for (d, &x) in dst.iter_mut().zip(src) {
        *d = 0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2));
    }
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
    use super::erf;

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
