//! Dense layers in 8-bit integers: `y = x · Wᵀ + b` (optionally GELU'd) with the weight
//! rounded once to integers in `[-90, 90]` per output column and the activations rounded per
//! row (per token) to unsigned bytes in `[0, 181]`, every product summed exactly in `i32`, on
//! AVX2's `vpmaddubsw`.
//!
//! This is the fast path of CPUs without AVX-512 BF16 (the [`crate::bf16`] kernel's), for
//! example AMD's Zen 2 and Zen 3 and Intel's client cores: on those, one `vpmaddubsw` (32
//! byte products summed in pairs) plus one `vpmaddwd` against ones (pairs summed into 8 `i32`
//! lanes) do 32 multiply-adds, where an f32 FMA does 8, and the two issue on separate ports
//! (measured on a Zen 3: 94 billion integer multiply-adds per second on one core against 50
//! for f32 FMA), so the dense layers, most of a BERT forward pass, can run up to twice as fast.
//!
//! # Numbers
//!
//! * Weight: per output column `c`, `s_w[c] = max|W[c]| / WMAX` and `q_w = round(W / s_w)` in
//!   `[-WMAX, WMAX]`.
//! * Activation: per row, an asymmetric grid spanning `[min(x, 0), max(x, 0)]`:
//!   `s_x = range / AMAX`, zero point `z = round(-min / s_x)` in `[0, AMAX]`, `q_x = round(x /
//!   s_x) + z` clamped to `[0, AMAX]`. Zero is exact; a row's outliers set its own grid only.
//! * Why `AMAX = 181` and `WMAX = 90`, not 255 and 127: `vpmaddubsw` saturates its pair sums
//!   at `i16`, so `2 · AMAX · WMAX` must stay ≤ 32 767 (a compile-time check below). Of the
//!   splits of that budget, the balanced one makes the two roundings err about equally (a
//!   layer's inputs span ~10 standard deviations, its weights' columns ~5) and so the least in
//!   sum: measured as the mean `1 − cos` of the handbook's 1 662 chunk vectors to their f32
//!   selves, 2.62·10⁻³ at 255/63 (the 7-bit weights oneDNN uses without VNNI), 2.16·10⁻³ at
//!   200/81, **2.07·10⁻³ at 181/90**, 2.17·10⁻³ at 160/102, 2.71·10⁻³ at 127/127
//!   (`embed/examples/quant_eval.rs`). Same instructions, same speed.
//! * Smoothing ([`PackedI8::smoothed`]): the inputs of the QKV projection and of the
//!   intermediate layer are layer-norm outputs, where a few channels run far larger than the
//!   rest in every token (in all-MiniLM-L6-v2 a token's largest value is ~5-6 times its
//!   root mean square, mostly in the same handful of channels) and so stretch every token's
//!   grid. As SmoothQuant does (α = ½), each such channel `j` is divided by `s_j = √(max|x_j|
//!   / max_c |W[c][j]|)` before rounding and its weights multiplied by it at packing: the
//!   product is unchanged, the outliers move halfway into the weights. `max|x_j|` comes from
//!   the f32 model run over a short calibration text when the model loads (`calibration.txt`,
//!   `model.rs`). Measured by `embed/examples/quant_eval.rs`: mean `1 − cos` to f32
//!   2.07·10⁻³ → 1.21·10⁻³ on the handbook's chunks, 2.08·10⁻³ → 0.96·10⁻³ on its queries.
//!   The other two layers are not smoothed: the attention output's inputs have no such
//!   channels, and smoothing the output projection (inputs: GELU outputs, heavy-tailed in
//!   every channel) measured no better.
//! * `y[r][c] = s_x[r] · s_w[c] · (Σ q_x · q_w − z[r] · Σ_k q_w[c]) + b[c]`: the sum is exact
//!   integer arithmetic (at most `1 536 · 181 · 90 ≈ 2.5 · 10⁷`, far from `i32`'s limit), so the
//!   kernel and the scalar reference agree bit for bit; the only error is the two roundings.
//!   The parity test holds every embedding to cosine ≥ 0.99 of f32's; the retrieval test holds
//!   its MRR@10 at most 0.005 below f32's, with search queries embedded at f32 (see
//!   [`crate::Precision::Int8`]).
//!
//! # Layout
//!
//! The weight is packed once, at load, into blocks of [`NR`] output columns: for each quad of
//! input positions `p`, a block holds `q_w[col][4p..4p+4]` for its 16 columns side by side,
//! which is exactly two registers of `vpmaddubsw` operands. The activations are rounded per
//! call into rows of byte quads, so that one 32-bit broadcast gives a row's quad `p`. The
//! micro-kernel keeps a tile of up to [`MR`] rows × 16 columns in eight `i32` registers and
//! walks `p`; rows go in panels of [`MC`], so that a panel's activations and a block's weights
//! stay in cache while every block of the panel is computed. The tile's store applies the
//! scales, the zero-point correction, the bias and the residual to its integer sums in AVX2
//! registers; GELU, when packed, then runs over the stored rows (also AVX2). The smoothing
//! factors are applied as the activations are rounded, before the kernel.
//!
//! A [`PackedI8`] exists only on a CPU that has AVX2 ([`supported`]); that is the invariant the
//! `unsafe` calls below rely on.

/// Output columns per packed block (two 8-lane registers).
const NR: usize = 16;
/// Rows per micro-kernel tile: 4 × 2 accumulators + 2 weights + broadcast, product, ones ≤ 16.
const MR: usize = 4;
/// Rows per panel.
const MC: usize = 64;
/// The largest weight magnitude after rounding (see the module docs).
const WMAX: f32 = WTOP as f32;
const WTOP: i8 = 90;
/// The top of an activation grid (its bottom is 0; see the module docs).
const AMAX: f32 = ATOP as f32;
const ATOP: u8 = 181;
// `vpmaddubsw` sums two byte products into an `i16`, saturating: the largest pair must fit.
const _: () = assert!(2 * (ATOP as i32) * (WTOP as i32) <= i16::MAX as i32);

/// Whether this CPU runs the 8-bit kernel (AVX2, and FMA for its store), decided at run time;
/// also what picks the AVX2 copies of `bert`'s element-wise loops.
pub(crate) fn supported() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// A dense layer's weight and bias, rounded and packed for the 8-bit kernel.
pub(crate) struct PackedI8 {
    /// Output features.
    n: usize,
    /// Input features.
    k: usize,
    /// Input quads, `⌈k / 4⌉` (the tail is padded with zero weights).
    kq: usize,
    /// `[⌈n / NR⌉][kq][NR][4]` weights in `[-WMAX, WMAX]`; columns past `n` are zero.
    data: Vec<i8>,
    /// `⌈n / NR⌉ · NR` column scales `s_w`; past `n` zero.
    scale: Vec<f32>,
    /// `⌈n / NR⌉ · NR` column sums `Σ_k q_w`, for the activations' zero points.
    colsum: Vec<i32>,
    /// `⌈n / NR⌉ · NR` biases; past `n` zero.
    bias: Vec<f32>,
    /// Apply exact GELU to the output.
    gelu: bool,
    /// Per input channel `j`, `1 / s_j` of the smoothing (see [`PackedI8::smoothed`]): the
    /// activations are multiplied by it as they are rounded (by 1, exactly, where a layer is
    /// not smoothed).
    inv_smooth: Vec<f32>,
}

/// The smoothing factor of each input channel, SmoothQuant's with α = ½: `s_j = √(max|x_j| /
/// max_c |W[c][j]|)`, from the channel's largest activation seen in calibration. Dividing the
/// channel's activations by `s_j` and multiplying its weights by it leaves `x · Wᵀ` unchanged
/// and moves the channel's outliers halfway into the weights, where rounding per output column
/// absorbs them better than a token's one grid does. A channel that never fired (or any
/// non-finite ratio) keeps `s_j = 1`.
fn smoothing(w: &[f32], n: usize, k: usize, x_max: &[f32]) -> Vec<f32> {
    let mut w_max = vec![0f32; k];
    for row in w.chunks_exact(k).take(n) {
        for (m, v) in w_max.iter_mut().zip(row) {
            *m = m.max(v.abs());
        }
    }
    x_max
        .iter()
        .zip(&w_max)
        .map(|(&x, &w)| {
            let s = (x / w).sqrt();
            if s.is_finite() && s > 0.0 {
                s
            } else {
                1.0
            }
        })
        .collect()
}

/// A row's activation grid: `x ≈ scale · (q − zero)`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Grid {
    scale: f32,
    zero: i32,
}

/// A row's grid and the two numbers that put a value on it: `q = round(x · inv + zero)`.
struct Rounding {
    grid: Grid,
    inv: f32,
    zero: f32,
}

/// The grid of a row whose values span `[lo, hi]` (`lo ≤ 0 ≤ hi`), or, as `Err`, the grid of
/// a row with nothing to round: a NaN scale for non-finite input (NaN in, NaN out, as f32
/// arithmetic would give), a zero scale for a row of zeros. Either way its bytes are 0.
fn rounding(lo: f32, hi: f32, finite: bool) -> Result<Rounding, Grid> {
    let range = hi - lo;
    if !(finite && range.is_finite()) {
        return Err(Grid {
            scale: f32::NAN,
            zero: 0,
        });
    }
    if range == 0.0 {
        return Err(Grid {
            scale: 0.0,
            zero: 0,
        });
    }
    let inv = AMAX / range;
    let zero = (-lo * inv).round_ties_even().clamp(0.0, AMAX);
    Ok(Rounding {
        grid: Grid {
            scale: range / AMAX,
            zero: zero as i32,
        },
        inv,
        zero,
    })
}

/// Quads `from..` of `dst` from `src` times `smooth` (per channel), one value at a time:
/// `clamp(x · smooth · inv + zero, 0, AMAX)` (a product, then one fused multiply-add) rounded
/// half to even, which is exactly what the vector path computes; padding bytes are the zero
/// point, which meets zero weights.
#[inline(always)]
fn fill_quads(src: &[f32], smooth: &[f32], dst: &mut [u32], r: &Rounding, from: usize) {
    let q = |v: f32| v.mul_add(r.inv, r.zero).clamp(0.0, AMAX).round_ties_even() as u8;
    let pad = r.zero as u8;
    for (quad, out) in dst.iter_mut().enumerate().skip(from) {
        let byte = |i: usize| {
            let j = 4 * quad + i;
            src.get(j).map_or(pad, |&v| q(v * smooth[j]))
        };
        *out = u32::from_le_bytes([byte(0), byte(1), byte(2), byte(3)]);
    }
}

/// Rounds one row of activations, each multiplied by its channel's `smooth` factor, onto the
/// row's own 8-bit grid, writing byte quads into `dst` (`⌈len / 4⌉` of them). The reference
/// for the kernel's vector version (`avx2::quantize`), which must agree with it bit for bit.
fn quantize_row(src: &[f32], smooth: &[f32], dst: &mut [u32]) -> Grid {
    let (mut lo, mut hi, mut finite) = (0f32, 0f32, true);
    for (&v, &s) in src.iter().zip(smooth) {
        let v = v * s;
        lo = if v < lo { v } else { lo };
        hi = if v > hi { v } else { hi };
        finite &= v.is_finite();
    }
    match rounding(lo, hi, finite) {
        Err(grid) => {
            dst.fill(0);
            grid
        }
        Ok(r) => {
            fill_quads(src, smooth, dst, &r, 0);
            r.grid
        }
    }
}

impl PackedI8 {
    /// Rounds and packs `w` (`n` rows of `k`, the `(out, in)` layout of a linear layer) and
    /// `bias` (`n`). `None` when this CPU lacks AVX2 ([`supported`]) or the sizes disagree.
    #[cfg(test)]
    pub fn new(w: &[f32], n: usize, k: usize, bias: &[f32], gelu: bool) -> Option<Self> {
        Self::smoothed(w, n, k, bias, gelu, None)
    }

    /// [`PackedI8::new`], with the input channels smoothed when `x_max` (the largest `|x_j|`
    /// of each of the `k` input channels, seen in calibration) is given: the weight's column
    /// `j` is packed multiplied by `s_j` (see [`smoothing`]) and every call's activations are
    /// divided by it before they are rounded, so the product is the layer's own.
    pub fn smoothed(
        w: &[f32],
        n: usize,
        k: usize,
        bias: &[f32],
        gelu: bool,
        x_max: Option<&[f32]>,
    ) -> Option<Self> {
        if !supported() || n == 0 || k == 0 || w.len() != n * k || bias.len() != n {
            return None;
        }
        if x_max.is_some_and(|x| x.len() != k) {
            return None;
        }
        let smooth = x_max.map(|x| smoothing(w, n, k, x));
        let scaled: Vec<f32>;
        let w = match &smooth {
            Some(s) => {
                scaled = w
                    .chunks_exact(k)
                    .flat_map(|row| row.iter().zip(s).map(|(v, s)| v * s))
                    .collect();
                &scaled[..]
            }
            None => w,
        };
        let inv_smooth =
            smooth.map_or_else(|| vec![1.0; k], |s| s.iter().map(|s| 1.0 / s).collect());
        let kq = k.div_ceil(4);
        let blocks = n.div_ceil(NR);
        let mut data = vec![0i8; blocks * kq * NR * 4];
        let mut scale = vec![0f32; blocks * NR];
        let mut colsum = vec![0i32; blocks * NR];
        for (col, row) in w.chunks_exact(k).enumerate() {
            let (j, c) = (col / NR, col % NR);
            let max = row.iter().fold(0f32, |m, v| m.max(v.abs()));
            let s = if max > 0.0 { max / WMAX } else { 1.0 };
            scale[col] = s;
            for (kk, &v) in row.iter().enumerate() {
                let q = (v / s).round().clamp(-WMAX, WMAX) as i8;
                data[((j * kq + kk / 4) * NR + c) * 4 + kk % 4] = q;
                colsum[col] += i32::from(q);
            }
        }
        let mut padded_bias = vec![0f32; blocks * NR];
        padded_bias[..n].copy_from_slice(bias);
        Some(Self {
            n,
            k,
            kq,
            data,
            scale,
            colsum,
            bias: padded_bias,
            gelu,
            inv_smooth,
        })
    }

    pub fn in_dim(&self) -> usize {
        self.k
    }

    pub fn out_dim(&self) -> usize {
        self.n
    }

    /// Whether the output is GELU'd.
    pub fn gelu(&self) -> bool {
        self.gelu
    }

    /// `x` holds `m` rows of `in_dim()`; returns `m` rows of `out_dim()`, with `residual`
    /// (`m` rows of `out_dim()`, when given) added: `x · Wᵀ + b + residual`, the residual
    /// connection (and GELU, when packed with it) applied in the kernel's store.
    pub fn forward(&self, x: &[f32], m: usize, residual: Option<&[f32]>) -> Vec<f32> {
        assert_eq!(x.len(), m * self.k, "int8 dense: input size");
        if let Some(res) = residual {
            assert_eq!(res.len(), m * self.n, "int8 dense: residual size");
        }
        let len = m * self.n;
        let mut out: Vec<f32> = Vec::with_capacity(len);
        if m == 0 {
            return out;
        }
        QUADS.with_borrow_mut(|a| {
            if a.len() < m * self.kq {
                a.resize(m * self.kq, 0);
            }
            let a = &mut a[..m * self.kq];
            #[cfg(target_arch = "x86_64")]
            #[allow(unsafe_code)]
            // SAFETY: a `PackedI8` is only built where `supported()` (AVX2) holds (see `new`);
            // `a` holds `m · kq` quads, `x` and `residual` have the lengths asserted above and
            // `out` has capacity for `m · n`, which the kernel writes entirely (every row,
            // every column below `n`) before `set_len`.
            unsafe {
                let grids = avx2::quantize(x, &self.inv_smooth, self.kq, a);
                avx2::forward(self, a, &grids, residual, out.as_mut_ptr());
                out.set_len(len);
            }
            #[cfg(not(target_arch = "x86_64"))]
            {
                let grids = quantize_rows(x, &self.inv_smooth, self.kq, a);
                out.resize(len, 0.0);
                self.forward_scalar(a, &grids, residual, &mut out);
            }
        });
        out
    }

    /// The kernel's arithmetic one product at a time, over rows `a` already rounded onto
    /// `grids`: the reference the kernel is tested against (and the path on other
    /// architectures, where `new` refuses, so it is never reached there).
    #[cfg_attr(target_arch = "x86_64", allow(dead_code))]
    fn forward_scalar(&self, a: &[u32], grids: &[Grid], residual: Option<&[f32]>, out: &mut [f32]) {
        for (r, g) in grids.iter().enumerate() {
            for col in 0..self.n {
                let (j, c) = (col / NR, col % NR);
                let mut sum = 0i32;
                for q in 0..self.kq {
                    let xs = a[r * self.kq + q].to_le_bytes();
                    for (i, &xv) in xs.iter().enumerate() {
                        let w = self.data[((j * self.kq + q) * NR + c) * 4 + i];
                        sum += i32::from(xv) * i32::from(w);
                    }
                }
                let exact = sum - g.zero * self.colsum[col];
                let mut v = g.scale * self.scale[col] * exact as f32 + self.bias[col];
                if let Some(res) = residual {
                    v += res[r * self.n + col];
                }
                out[r * self.n + col] = if self.gelu { crate::bert::gelu(v) } else { v };
            }
        }
    }
}

/// Every row of `x` (rows of `k = smooth.len()`), smoothed, onto its own grid, into `a`
/// (rows of `kq` quads).
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn quantize_rows(x: &[f32], smooth: &[f32], kq: usize, a: &mut [u32]) -> Vec<Grid> {
    let k = smooth.len();
    let mut grids = Vec::with_capacity(x.len() / k);
    for (src, dst) in x.chunks_exact(k).zip(a.chunks_exact_mut(kq)) {
        grids.push(quantize_row(src, smooth, dst));
    }
    grids
}

thread_local! {
    /// The activations rounded to byte quads, reused from call to call on each thread (a
    /// compute lane), so that no call allocates and page-faults a fresh buffer.
    static QUADS: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
}

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod avx2 {
    use std::arch::x86_64::{
        __m256, __m256i, _mm256_add_epi32, _mm256_add_ps, _mm256_cmp_ps, _mm256_cvtepi32_ps,
        _mm256_cvtps_epi32, _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_loadu_si256,
        _mm256_madd_epi16, _mm256_maddubs_epi16, _mm256_max_ps, _mm256_min_ps, _mm256_movemask_ps,
        _mm256_mul_ps, _mm256_mullo_epi32, _mm256_or_ps, _mm256_packus_epi16, _mm256_packus_epi32,
        _mm256_permutevar8x32_epi32, _mm256_set1_epi16, _mm256_set1_epi32, _mm256_set1_ps,
        _mm256_setr_epi32, _mm256_setzero_ps, _mm256_setzero_si256, _mm256_storeu_ps,
        _mm256_storeu_si256, _mm256_sub_epi32, _CMP_UNORD_Q,
    };

    use super::{Grid, PackedI8, MC, MR, NR};

    /// Every row of `x` (rows of `k = smooth.len()`), smoothed, onto its own grid, into `a`
    /// (rows of `kq` quads): the vector version of [`super::quantize_rows`], bit for bit.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA; `a` holds `x.len() / k · kq` quads and `kq = ⌈k / 4⌉`.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn quantize(
        x: &[f32],
        smooth: &[f32],
        kq: usize,
        a: &mut [u32],
    ) -> Vec<Grid> {
        let k = smooth.len();
        let mut grids = Vec::with_capacity(x.len() / k);
        for (src, dst) in x.chunks_exact(k).zip(a.chunks_exact_mut(kq)) {
            // SAFETY: the caller's guarantees; `dst` holds `⌈src.len() / 4⌉` quads and
            // `smooth` as many values as `src`.
            grids.push(unsafe { quantize_row(src, smooth, dst) });
        }
        grids
    }

    /// One row, each value times its channel's `smooth` factor: min and max (and whether any
    /// value is NaN) 8 at a time, then 32 values per step rounded, packed to bytes and stored
    /// as 8 quads.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA; `smooth` holds `src.len()` values and `dst` `⌈src.len() / 4⌉`.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn quantize_row(src: &[f32], smooth: &[f32], dst: &mut [u32]) -> Grid {
        // SAFETY: loads stay below `src.len()` (whole groups of 8, then 32), as long as
        // `smooth` is, and stores below `dst.len()` (8 quads per 32 values, `dst` holding
        // ⌈len / 4⌉).
        unsafe {
            let p = src.as_ptr();
            let sp = smooth.as_ptr();
            let eights = src.len() / 8;
            let (mut lo, mut hi) = (_mm256_setzero_ps(), _mm256_setzero_ps());
            let mut nan = _mm256_setzero_ps();
            for i in 0..eights {
                let v = _mm256_mul_ps(
                    _mm256_loadu_ps(p.add(8 * i)),
                    _mm256_loadu_ps(sp.add(8 * i)),
                );
                // `min(v, lo)` returns `lo` where `v` is NaN: NaN is caught by `nan` instead.
                lo = _mm256_min_ps(v, lo);
                hi = _mm256_max_ps(v, hi);
                nan = _mm256_or_ps(nan, _mm256_cmp_ps::<_CMP_UNORD_Q>(v, v));
            }
            let (mut los, mut his) = ([0f32; 8], [0f32; 8]);
            _mm256_storeu_ps(los.as_mut_ptr(), lo);
            _mm256_storeu_ps(his.as_mut_ptr(), hi);
            let mut finite = _mm256_movemask_ps(nan) == 0;
            let (mut lo, mut hi) = (0f32, 0f32);
            let tail = src[8 * eights..]
                .iter()
                .zip(&smooth[8 * eights..])
                .map(|(v, s)| v * s);
            for v in los.into_iter().chain(his).chain(tail) {
                lo = if v < lo { v } else { lo };
                hi = if v > hi { v } else { hi };
                finite &= !v.is_nan();
            }
            let r = match super::rounding(lo, hi, finite && hi.is_finite() && lo.is_finite()) {
                Ok(r) => r,
                Err(grid) => {
                    dst.fill(0);
                    return grid;
                }
            };
            let (inv, zero) = (_mm256_set1_ps(r.inv), _mm256_set1_ps(r.zero));
            let (bottom, top) = (_mm256_setzero_ps(), _mm256_set1_ps(super::AMAX));
            let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
            let whole = src.len() / 32;
            for b in 0..whole {
                let (at, st) = (p.add(32 * b), sp.add(32 * b));
                let q = |o: usize| {
                    let v = _mm256_mul_ps(_mm256_loadu_ps(at.add(o)), _mm256_loadu_ps(st.add(o)));
                    let y = _mm256_fmadd_ps(v, inv, zero);
                    // Rounded to nearest even (the default rounding mode).
                    _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(y, bottom), top))
                };
                // Within each 128-bit half: 16-bit [a0-3 b0-3], then bytes [a0-3 b0-3 c0-3
                // d0-3] and [a4-7 b4-7 c4-7 d4-7]; the permutation puts the quads in order.
                let ab = _mm256_packus_epi32(q(0), q(8));
                let cd = _mm256_packus_epi32(q(16), q(24));
                let bytes = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(ab, cd), order);
                _mm256_storeu_si256(dst.as_mut_ptr().add(8 * b).cast::<__m256i>(), bytes);
            }
            super::fill_quads(src, smooth, dst, &r, 8 * whole);
            r.grid
        }
    }

    /// # Safety
    /// The CPU has AVX2 and FMA; `a` holds `grids.len() · p.kq` quads, `residual` (if any)
    /// `grids.len() · p.n` values, and `out` points to room for `grids.len() · p.n` values, all
    /// of which this writes.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn forward(
        p: &PackedI8,
        a: &[u32],
        grids: &[Grid],
        residual: Option<&[f32]>,
        out: *mut f32,
    ) {
        let (kq, n, m) = (p.kq, p.n, grids.len());
        let blocks = n.div_ceil(NR);
        // SAFETY: every offset below stays inside the buffers the caller vouches for: rows
        // `r < m` of `a`, `residual` and `out`, block `j < blocks` of the packed arrays (each
        // padded to whole blocks), and columns below `n` of `out` (`cols`).
        unsafe {
            for m0 in (0..m).step_by(MC) {
                let panel_end = (m0 + MC).min(m);
                for j in 0..blocks {
                    let c0 = j * NR;
                    let cols = NR.min(n - c0);
                    let mut r = m0;
                    while r < panel_end {
                        let rows = MR.min(panel_end - r);
                        let at = r * n + c0;
                        let t = Tile {
                            a: a.as_ptr().add(r * kq),
                            kq,
                            b: p.data.as_ptr().add(j * kq * NR * 4),
                            grids: grids.as_ptr().add(r),
                            scale: p.scale.as_ptr().add(c0),
                            colsum: p.colsum.as_ptr().add(c0),
                            bias: p.bias.as_ptr().add(c0),
                            res: residual.map_or(std::ptr::null(), |res| res.as_ptr().add(at)),
                            c: out.add(at),
                            ldc: n,
                            cols,
                        };
                        match rows {
                            4 => tile::<4>(&t),
                            3 => tile::<3>(&t),
                            2 => tile::<2>(&t),
                            _ => tile::<1>(&t),
                        }
                        if p.gelu {
                            for i in 0..rows {
                                gelu_row(std::slice::from_raw_parts_mut(t.c.add(i * n), cols));
                            }
                        }
                        r += rows;
                    }
                }
            }
        }
    }

    /// A tile's operands: `R` rows of quads at `a` (stride `kq`) and their grids, a packed
    /// block at `b` with its 16 columns' scales, sums and biases, the residual rows at `res`
    /// (null: none) and the output rows at `c` (both of stride `ldc`), of which `cols` columns
    /// are real.
    struct Tile {
        a: *const u32,
        kq: usize,
        b: *const i8,
        grids: *const Grid,
        scale: *const f32,
        colsum: *const i32,
        bias: *const f32,
        res: *const f32,
        c: *mut f32,
        ldc: usize,
        cols: usize,
    }

    /// `R` rows × 16 columns: 2·R `i32` accumulators in registers over every input quad, then
    /// `y = s_x · s_w · (Σ − z · Σ q_w) + b (+ residual)` stored as f32.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn tile<const R: usize>(t: &Tile) {
        // SAFETY: see `forward`.
        unsafe {
            let ones = _mm256_set1_epi16(1);
            let mut acc: [[__m256i; 2]; R] = [[_mm256_setzero_si256(); 2]; R];
            for q in 0..t.kq {
                let bp = t.b.add(q * NR * 4).cast::<__m256i>();
                let w0 = _mm256_loadu_si256(bp);
                let w1 = _mm256_loadu_si256(bp.add(1));
                for (r, row) in acc.iter_mut().enumerate() {
                    let x = _mm256_set1_epi32(*t.a.add(r * t.kq + q) as i32);
                    let p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(x, w0), ones);
                    let p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(x, w1), ones);
                    row[0] = _mm256_add_epi32(row[0], p0);
                    row[1] = _mm256_add_epi32(row[1], p1);
                }
            }
            let scale = [_mm256_loadu_ps(t.scale), _mm256_loadu_ps(t.scale.add(8))];
            let bias = [_mm256_loadu_ps(t.bias), _mm256_loadu_ps(t.bias.add(8))];
            let colsum = [
                _mm256_loadu_si256(t.colsum.cast::<__m256i>()),
                _mm256_loadu_si256(t.colsum.add(8).cast::<__m256i>()),
            ];
            for (r, row) in acc.iter().enumerate() {
                let g = *t.grids.add(r);
                let zero = _mm256_set1_epi32(g.zero);
                let sx = _mm256_set1_ps(g.scale);
                let c = t.c.add(r * t.ldc);
                for v in 0..2 {
                    let lo = v * 8;
                    if lo >= t.cols {
                        break;
                    }
                    let exact = _mm256_sub_epi32(row[v], _mm256_mullo_epi32(zero, colsum[v]));
                    let y = _mm256_fmadd_ps(
                        _mm256_mul_ps(sx, scale[v]),
                        _mm256_cvtepi32_ps(exact),
                        bias[v],
                    );
                    if lo + 8 <= t.cols {
                        let y = if t.res.is_null() {
                            y
                        } else {
                            _mm256_add_ps(y, _mm256_loadu_ps(t.res.add(r * t.ldc + lo)))
                        };
                        _mm256_storeu_ps(c.add(lo), y);
                    } else {
                        store_partial(y, t.res, r * t.ldc + lo, c.add(lo), t.cols - lo);
                    }
                }
            }
        }
    }

    /// The first `live` (< 8) lanes of `y`, plus the residual's (when `res` is not null).
    #[target_feature(enable = "avx2,fma")]
    unsafe fn store_partial(y: __m256, res: *const f32, at: usize, c: *mut f32, live: usize) {
        let mut lanes = [0f32; 8];
        // SAFETY: `lanes` holds 8 values; `c` and `res + at` have `live` values (the caller's).
        unsafe {
            _mm256_storeu_ps(lanes.as_mut_ptr(), y);
            for (i, &v) in lanes.iter().enumerate().take(live) {
                let extra = if res.is_null() { 0.0 } else { *res.add(at + i) };
                *c.add(i) = v + extra;
            }
        }
    }

    /// GELU in place, compiled with AVX2 so the rational erf vectorizes 8 wide.
    #[target_feature(enable = "avx2,fma")]
    fn gelu_row(row: &mut [f32]) {
        for v in row {
            *v = crate::bert::gelu(*v);
        }
    }
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    /// The largest `|x|` of each of the `k` channels of rows `x`: a calibration.
    fn channel_max(x: &[f32], k: usize) -> Vec<f32> {
        let mut out = vec![0f32; k];
        for row in x.chunks_exact(k) {
            for (mx, v) in out.iter_mut().zip(row) {
                *mx = mx.max(v.abs());
            }
        }
        out
    }

    /// A deterministic pseudo-random f32 in [-1, 1) (xorshift), so the test needs no crate.
    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect()
    }

    #[test]
    fn a_row_grid_keeps_zero_exact_and_spans_the_row() {
        let src = [-1.0, 0.0, 0.5, 3.0, 2.0];
        let mut dst = [0u32; 2];
        let g = quantize_row(&src, &[1.0; 5], &mut dst);
        assert_eq!(g.scale, 4.0 / 181.0);
        assert_eq!(g.zero, 45); // round(1 / (4 / 181)) = round(45.25)
        let bytes: Vec<u8> = dst.iter().flat_map(|q| q.to_le_bytes()).collect();
        assert_eq!(bytes[1], 45, "zero is the zero point exactly");
        assert_eq!(bytes[3], 181, "the row's maximum is the top of its grid");
        assert_eq!(bytes[0], 0, "the row's minimum is the bottom");
        assert_eq!(&bytes[5..], &[45, 45, 45], "padding is the zero point");
        for (&v, &q) in src.iter().zip(&bytes) {
            let back = g.scale * (i32::from(q) - g.zero) as f32;
            assert!(
                (back - v).abs() <= g.scale / 2.0 + 1e-6,
                "{v} came back as {back}"
            );
        }
        // A row of zeros, and a row with a NaN.
        assert_eq!(quantize_row(&[0.0; 3], &[1.0; 3], &mut dst).scale, 0.0);
        assert!(quantize_row(&[1.0, f32::NAN], &[1.0; 2], &mut dst)
            .scale
            .is_nan());
    }

    /// The vector rounding against the scalar one on rows that test its edges: zeros, a NaN
    /// or an infinity past the first group of 8, one large outlier, ties, a length that is no
    /// multiple of 8 or 32, all-negative and all-positive rows.
    #[test]
    fn vector_rounding_matches_scalar_on_edge_rows() {
        if !supported() {
            return;
        }
        let mut rows: Vec<Vec<f32>> = vec![vec![0.0; 64], values(37, 1), values(96, 2)];
        let mut nan = values(64, 3);
        nan[40] = f32::NAN;
        let mut inf = values(64, 4);
        inf[33] = f32::NEG_INFINITY;
        let mut outlier = values(64, 5);
        outlier[50] = 300.0;
        let ties: Vec<f32> = (0..64).map(|i| i as f32 * 0.5 - 10.0).collect();
        let negative: Vec<f32> = values(64, 6).iter().map(|v| -v.abs() - 0.1).collect();
        let positive: Vec<f32> = values(71, 7).iter().map(|v| v.abs() + 0.1).collect();
        rows.extend([nan, inf, outlier, ties, negative, positive]);
        // Each row unsmoothed (factors of 1) and smoothed (factors in [1/4, 4]).
        let cases = rows.iter().flat_map(|row| {
            let ones = vec![1.0f32; row.len()];
            let smooth: Vec<f32> = values(row.len(), 8).iter().map(|v| 4f32.powf(*v)).collect();
            [(row, ones), (row, smooth)]
        });
        for (i, (row, smooth)) in cases.enumerate() {
            let kq = row.len().div_ceil(4);
            let (mut want, mut got) = (vec![7u32; kq], vec![9u32; kq]);
            let g = quantize_row(row, &smooth, &mut want);
            #[allow(unsafe_code)]
            // SAFETY: AVX2 and FMA are present (`supported`); `got` holds ⌈k / 4⌉ quads and
            // `smooth` as many values as the row.
            let vg = unsafe { avx2::quantize(row, &smooth, kq, &mut got) };
            assert_eq!(vg.len(), 1);
            let same_grid = vg[0] == g || (vg[0].scale.is_nan() && g.scale.is_nan());
            assert!(same_grid, "case {i}: grid {:?}, scalar {g:?}", vg[0]);
            assert_eq!(got, want, "case {i}: bytes");
        }
    }

    /// The kernel against the scalar reference over shapes that exercise every tile height,
    /// a partial column block (wider and narrower than a register), input widths that are not
    /// multiples of 4, several panels, the residual, GELU and smoothing. The integer sums are exact in
    /// both; the stores differ only in f32 rounding (a fused multiply-add).
    #[test]
    fn kernel_matches_scalar_reference() {
        if !supported() {
            eprintln!("skipped: this CPU has no AVX2");
            return;
        }
        for &(m, n, k, gelu) in &[
            (1, 16, 4, false),
            (7, 100, 45, true),
            (13, 384, 384, false),
            (130, 40, 1537, true),
            (5, 3, 3, false),
            (6, 21, 64, false),
        ] {
            let w = values(n * k, 1 + (m * n * k) as u64);
            let b = values(n, 7 + n as u64);
            let x = values(m * k, 11 + k as u64);
            // Smoothed (by the input's own channel maxima) for even `m`.
            let x_max = channel_max(&x, k);
            let smooth = (m % 2 == 0).then_some(x_max.as_slice());
            let p = PackedI8::smoothed(&w, n, k, &b, gelu, smooth).expect("supported");
            let res = values(m * n, 13);
            let residual = (m % 2 == 1).then_some(res.as_slice());
            let got = p.forward(&x, m, residual);
            let mut a = vec![0u32; m * p.kq];
            let grids = quantize_rows(&x, &p.inv_smooth, p.kq, &mut a);
            let mut va = vec![0u32; m * p.kq];
            #[allow(unsafe_code)]
            // SAFETY: AVX2 and FMA are present (`supported`); `va` holds `m · kq` quads.
            let vgrids = unsafe { avx2::quantize(&x, &p.inv_smooth, p.kq, &mut va) };
            assert_eq!(vgrids, grids, "m={m} n={n} k={k}: grids");
            assert_eq!(
                va, a,
                "m={m} n={n} k={k}: the vector rounding differs from the scalar"
            );
            let mut want = vec![0f32; m * n];
            p.forward_scalar(&a, &grids, residual, &mut want);
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (g - w).abs() <= 1e-5 * w.abs().max(1.0),
                    "m={m} n={n} k={k} at {i}: kernel {g}, reference {w}"
                );
            }
        }
    }

    /// Smoothing leaves the layer's product as it is and shrinks the error an outlier input
    /// channel causes: with channel 5 forty times the others (as layer-normed BERT inputs
    /// have a few), the smoothed layer errs less against exact f32 than the plain one. A
    /// calibration of the wrong width is refused.
    #[test]
    fn smoothing_tames_an_outlier_channel() {
        if !supported() {
            return;
        }
        let (m, n, k) = (16, 64, 384);
        let w = values(n * k, 21);
        let b = values(n, 22);
        let mut x = values(m * k, 23);
        for row in x.chunks_exact_mut(k) {
            row[5] *= 40.0;
        }
        let x_max = channel_max(&x, k);
        let exact: Vec<f32> = (0..m * n)
            .map(|i| {
                let (r, c) = (i / n, i % n);
                b[c] + (0..k).map(|j| x[r * k + j] * w[c * k + j]).sum::<f32>()
            })
            .collect();
        let err = |got: &[f32]| -> f32 {
            got.iter()
                .zip(&exact)
                .map(|(g, e)| (g - e).abs())
                .sum::<f32>()
                / exact.len() as f32
        };
        let plain = PackedI8::smoothed(&w, n, k, &b, false, None).expect("supported");
        let smooth = PackedI8::smoothed(&w, n, k, &b, false, Some(&x_max)).expect("supported");
        let (e_plain, e_smooth) = (
            err(&plain.forward(&x, m, None)),
            err(&smooth.forward(&x, m, None)),
        );
        assert!(
            e_smooth < 0.7 * e_plain,
            "mean error smoothed {e_smooth}, plain {e_plain}"
        );
        // The product is the layer's own: close to exact f32's, relative to its size.
        let size = exact.iter().map(|e| e.abs()).sum::<f32>() / exact.len() as f32;
        assert!(
            e_smooth < 0.01 * size,
            "mean error smoothed {e_smooth}, mean |y| {size}"
        );
        assert!(PackedI8::smoothed(&w, n, k, &b, false, Some(&x_max[..k - 1])).is_none());
    }

    /// The whole layer against exact f32 arithmetic: the error is the two roundings (half a
    /// step of the row's grid per activation, half a step of the column's per weight), with
    /// GELU and the residual applied as the f32 path applies them.
    #[test]
    fn close_to_f32() {
        if !supported() {
            return;
        }
        let (m, n, k) = (9, 384, 1536);
        let w = values(n * k, 3);
        let b = values(n, 5);
        let x = values(m * k, 9);
        let res = values(m * n, 13);
        for gelu in [false, true] {
            let got = PackedI8::new(&w, n, k, &b, gelu)
                .expect("supported")
                .forward(&x, m, (!gelu).then_some(res.as_slice()));
            let mut worst = 0f32;
            for r in 0..m {
                for c in 0..n {
                    let mut exact: f32 =
                        b[c] + (0..k).map(|i| x[r * k + i] * w[c * k + i]).sum::<f32>();
                    if gelu {
                        exact = crate::bert::gelu(exact);
                    } else {
                        exact += res[r * n + c];
                    }
                    // Each product errs by at most about (|x| · step_w + |w| · step_x) / 2;
                    // summed as independent roundings over k terms, a few times √k of that.
                    let step_x = 2.0 / AMAX;
                    let step_w = 1.0 / WMAX;
                    let bound = 4.0 * (k as f32).sqrt() * (step_x + step_w) / 2.0;
                    let err = (got[r * n + c] - exact).abs();
                    worst = worst.max(err / bound);
                    assert!(
                        err <= bound,
                        "r={r} c={c}: int8 {}, f32 {exact}",
                        got[r * n + c]
                    );
                }
            }
            eprintln!("gelu={gelu}: worst error {worst:.3} of the bound");
        }
    }

    #[test]
    fn refuses_mismatched_sizes() {
        assert!(PackedI8::new(&[0.0; 6], 2, 4, &[0.0; 2], false).is_none());
        assert!(PackedI8::new(&[0.0; 8], 2, 4, &[0.0; 3], false).is_none());
    }
}
