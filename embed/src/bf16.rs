//! Dense layers in bfloat16: `y = x · Wᵀ + b` (optionally GELU'd) with the weight and the
//! activations rounded to bfloat16 and every product summed in f32, on AVX-512 BF16's
//! `vdpbf16ps`.
//!
//! One `vdpbf16ps` on a 512-bit register does 32 multiply-adds (16 f32 lanes, each the sum of
//! two bfloat16 products), twice the 16 of an f32 FMA, so the dense layers, which are most of
//! a BERT forward pass, can run up to twice as fast as in f32. bfloat16 keeps f32's exponent
//! and 8 bits of mantissa: the rounding error of each input is at most 2⁻⁹ relative, and sums
//! stay in f32, so an embedding keeps a cosine above 0.999 to its f32 self (the parity test
//! holds it to ≥ 0.99 per vector, and the retrieval test's MRR to f32's).
//!
//! # Layout
//!
//! The weight is packed once, at load, into blocks of [`NR`] output columns: for each pair of
//! input positions `p`, a block holds `W[col][2p], W[col][2p+1]` for its 64 columns side by
//! side, which is exactly four registers of `vdpbf16ps` operands. The activations are rounded
//! per call into rows of bfloat16 pairs, so that one 32-bit broadcast gives a row's pair `p`.
//! The micro-kernel keeps a tile of up to [`MR`] rows × 64 columns in 24 registers (bias
//! preloaded) and walks `p`; rows go in panels of [`MC`], so that a panel's activations and a
//! block's weights stay in L2 while every block of the panel is computed.
//!
//! A [`PackedBf16`] exists only on a CPU that has AVX-512F and AVX-512 BF16 ([`supported`]);
//! that is the invariant the `unsafe` calls below rely on.

/// Output columns per packed block (four 16-lane registers).
const NR: usize = 64;
/// Rows per micro-kernel tile: 6 × 4 accumulators + 4 weight registers + 1 broadcast ≤ 32.
const MR: usize = 6;
/// Rows per panel.
const MC: usize = 48;

/// Whether this CPU runs the bfloat16 kernels (AVX-512F and AVX-512 BF16), decided at run time.
pub(crate) fn supported() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bf16")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// f32 → bfloat16 bits, rounding to nearest even (as `vcvtne2ps2bf16` does); NaN stays NaN.
pub(crate) fn to_bf16(x: f32) -> u16 {
    if x.is_nan() {
        return 0x7fc0;
    }
    let b = x.to_bits();
    let round = 0x7fff + ((b >> 16) & 1);
    (b.wrapping_add(round) >> 16) as u16
}

/// bfloat16 bits → f32 (exact).
pub(crate) fn from_bf16(h: u16) -> f32 {
    f32::from_bits(u32::from(h) << 16)
}

/// A dense layer's weight and bias, packed for the bfloat16 kernel.
pub(crate) struct PackedBf16 {
    /// Output features.
    n: usize,
    /// Input features.
    k: usize,
    /// Input pairs, `⌈k / 2⌉` (an odd `k` is padded with a zero).
    kp: usize,
    /// `[⌈n / NR⌉][kp][NR][2]` bfloat16 bits; columns past `n` are zero.
    data: Vec<u16>,
    /// `⌈n / NR⌉ · NR` biases; past `n` zero.
    bias: Vec<f32>,
    /// Apply exact GELU to the output (fused into the tile's store).
    gelu: bool,
}

impl PackedBf16 {
    /// Packs `w` (`n` rows of `k`, the `(out, in)` layout of a linear layer) and `bias` (`n`).
    /// `None` when this CPU lacks the instructions ([`supported`]) or the sizes disagree.
    pub fn new(w: &[f32], n: usize, k: usize, bias: &[f32], gelu: bool) -> Option<Self> {
        if !supported() || n == 0 || k == 0 || w.len() != n * k || bias.len() != n {
            return None;
        }
        let kp = k.div_ceil(2);
        let blocks = n.div_ceil(NR);
        let mut data = vec![0u16; blocks * kp * NR * 2];
        for (col, row) in w.chunks_exact(k).enumerate() {
            let (j, c) = (col / NR, col % NR);
            for (kk, &v) in row.iter().enumerate() {
                data[((j * kp + kk / 2) * NR + c) * 2 + kk % 2] = to_bf16(v);
            }
        }
        let mut padded_bias = vec![0f32; blocks * NR];
        padded_bias[..n].copy_from_slice(bias);
        Some(Self {
            n,
            k,
            kp,
            data,
            bias: padded_bias,
            gelu,
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
    /// connection fused into the kernel's store.
    pub fn forward(&self, x: &[f32], m: usize, residual: Option<&[f32]>) -> Vec<f32> {
        assert_eq!(x.len(), m * self.k, "bf16 dense: input size");
        if let Some(res) = residual {
            assert_eq!(res.len(), m * self.n, "bf16 dense: residual size");
        }
        let len = m * self.n;
        let mut out: Vec<f32> = Vec::with_capacity(len);
        if m == 0 {
            return out;
        }
        #[cfg(target_arch = "x86_64")]
        #[allow(unsafe_code)]
        // SAFETY: a `PackedBf16` is only built where `supported()` holds (see `new`); `x` and
        // `residual` have the lengths asserted above and `out` has capacity for `m · n`, which
        // the kernel writes entirely (every row, every column below `n`) before `set_len`.
        unsafe {
            avx512::forward(self, x, m, residual, out.as_mut_ptr());
            out.set_len(len);
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            out.resize(len, 0.0);
            self.forward_scalar(x, m, residual, &mut out);
        }
        out
    }

    /// The same arithmetic one product at a time: rounded inputs, f32 sums. The reference the
    /// kernel is tested against (and the path on other architectures, where `new` refuses).
    #[cfg_attr(target_arch = "x86_64", allow(dead_code))]
    fn forward_scalar(&self, x: &[f32], m: usize, residual: Option<&[f32]>, out: &mut [f32]) {
        for r in 0..m {
            let xr: Vec<f32> = x[r * self.k..(r + 1) * self.k]
                .iter()
                .map(|&v| from_bf16(to_bf16(v)))
                .collect();
            for col in 0..self.n {
                let (j, c) = (col / NR, col % NR);
                let mut acc = self.bias[col] + residual.map_or(0.0, |res| res[r * self.n + col]);
                for (kk, &xv) in xr.iter().enumerate() {
                    let w = from_bf16(self.data[((j * self.kp + kk / 2) * NR + c) * 2 + kk % 2]);
                    acc += xv * w;
                }
                out[r * self.n + col] = if self.gelu {
                    crate::bert::gelu(acc)
                } else {
                    acc
                };
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod avx512 {
    use std::arch::x86_64::{
        __m512, __m512bh, __m512i, _mm512_add_ps, _mm512_cvtne2ps_pbh, _mm512_dpbf16_ps,
        _mm512_loadu_ps, _mm512_loadu_si512, _mm512_mask_storeu_ps, _mm512_maskz_loadu_ps,
        _mm512_set1_epi32, _mm512_storeu_ps, _mm512_storeu_si512,
    };

    use std::cell::RefCell;

    use super::{to_bf16, PackedBf16, MC, MR, NR};
    use crate::bert::gelu;

    thread_local! {
        /// The activations rounded to bfloat16 pairs, reused from call to call on each thread
        /// (a compute lane), so that no call allocates and page-faults a fresh buffer. It keeps
        /// its largest size: 6 MB per lane for a 2,048-token slice into a 1,536-wide layer.
        static PAIRS: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
    }

    /// # Safety
    /// The CPU has AVX-512F and AVX-512 BF16; `x` is `m · p.k` long, `residual` (if any)
    /// `m · p.n`, and `out` points to room for `m · p.n` values, all of which this writes.
    #[target_feature(enable = "avx512f,avx512bf16")]
    pub(super) unsafe fn forward(
        p: &PackedBf16,
        x: &[f32],
        m: usize,
        residual: Option<&[f32]>,
        out: *mut f32,
    ) {
        PAIRS.with_borrow_mut(|a| {
            if a.len() < m * p.kp {
                a.resize(m * p.kp, 0);
            }
            // SAFETY: the caller's guarantees, and `a` holds at least `m · kp` pairs.
            unsafe { forward_with(p, x, m, residual, out, a) }
        });
    }

    #[target_feature(enable = "avx512f,avx512bf16")]
    unsafe fn forward_with(
        p: &PackedBf16,
        x: &[f32],
        m: usize,
        residual: Option<&[f32]>,
        out: *mut f32,
        a: &mut [u32],
    ) {
        let (k, kp, n) = (p.k, p.kp, p.n);
        // The activations as rows of bfloat16 pairs (one u32 per pair).
        for (src, dst) in x.chunks_exact(k).zip(a.chunks_exact_mut(kp)) {
            round_row(src, dst);
        }
        let blocks = n.div_ceil(NR);
        for m0 in (0..m).step_by(MC) {
            let panel_end = (m0 + MC).min(m);
            for j in 0..blocks {
                let b = p.data.as_ptr().add(j * kp * NR * 2);
                let bias = p.bias.as_ptr().add(j * NR);
                let cols = NR.min(n - j * NR);
                let mut r = m0;
                while r < panel_end {
                    let rows = MR.min(panel_end - r);
                    let ap = a.as_ptr().add(r * kp);
                    let at = r * n + j * NR;
                    let t = Tile {
                        a: ap,
                        kp,
                        b,
                        bias,
                        res: residual.map_or(std::ptr::null(), |res| res.as_ptr().add(at)),
                        c: out.add(at),
                        ldc: n,
                        cols,
                        gelu: p.gelu,
                    };
                    match rows {
                        6 => tile::<6>(&t),
                        5 => tile::<5>(&t),
                        4 => tile::<4>(&t),
                        3 => tile::<3>(&t),
                        2 => tile::<2>(&t),
                        _ => tile::<1>(&t),
                    }
                    r += rows;
                }
            }
        }
    }

    /// One row of f32 → bfloat16 pairs, 32 values per conversion.
    #[target_feature(enable = "avx512f,avx512bf16")]
    unsafe fn round_row(src: &[f32], dst: &mut [u32]) {
        let whole = src.len() / 32;
        for i in 0..whole {
            let lo = _mm512_loadu_ps(src.as_ptr().add(i * 32));
            let hi = _mm512_loadu_ps(src.as_ptr().add(i * 32 + 16));
            let h: __m512bh = _mm512_cvtne2ps_pbh(hi, lo);
            _mm512_storeu_si512(
                dst.as_mut_ptr().add(i * 16).cast::<__m512i>(),
                std::mem::transmute::<__m512bh, __m512i>(h),
            );
        }
        for (q, pair) in dst.iter_mut().enumerate().skip(whole * 16) {
            let lo = src.get(2 * q).copied().map_or(0, to_bf16);
            let hi = src.get(2 * q + 1).copied().map_or(0, to_bf16);
            *pair = u32::from(lo) | (u32::from(hi) << 16);
        }
    }

    /// A tile's operands: `R` rows of pairs at `a` (stride `kp`), a packed block at `b`, its
    /// biases, the residual rows at `res` (null: none) and the output rows at `c` (both of
    /// stride `ldc`), of which `cols` columns are real.
    struct Tile {
        a: *const u32,
        kp: usize,
        b: *const u16,
        bias: *const f32,
        res: *const f32,
        c: *mut f32,
        ldc: usize,
        cols: usize,
        gelu: bool,
    }

    /// `R` rows × 64 columns: 4·R accumulators in registers over every input pair.
    #[target_feature(enable = "avx512f,avx512bf16")]
    unsafe fn tile<const R: usize>(t: &Tile) {
        let bias: [__m512; 4] = [
            _mm512_loadu_ps(t.bias),
            _mm512_loadu_ps(t.bias.add(16)),
            _mm512_loadu_ps(t.bias.add(32)),
            _mm512_loadu_ps(t.bias.add(48)),
        ];
        let mut acc: [[__m512; 4]; R] = [bias; R];
        for q in 0..t.kp {
            let bp = t.b.add(q * NR * 2).cast::<__m512i>();
            let w: [__m512bh; 4] = [
                std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(bp)),
                std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(bp.add(1))),
                std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(bp.add(2))),
                std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(bp.add(3))),
            ];
            for (r, row) in acc.iter_mut().enumerate() {
                let pair = *t.a.add(r * t.kp + q);
                let x = std::mem::transmute::<__m512i, __m512bh>(_mm512_set1_epi32(pair as i32));
                row[0] = _mm512_dpbf16_ps(row[0], x, w[0]);
                row[1] = _mm512_dpbf16_ps(row[1], x, w[1]);
                row[2] = _mm512_dpbf16_ps(row[2], x, w[2]);
                row[3] = _mm512_dpbf16_ps(row[3], x, w[3]);
            }
        }
        for (r, row) in acc.iter().enumerate() {
            let c = t.c.add(r * t.ldc);
            for (v, &y) in row.iter().enumerate() {
                let lo = v * 16;
                let y = if t.res.is_null() || lo >= t.cols {
                    y
                } else {
                    let res = t.res.add(r * t.ldc + lo);
                    _mm512_add_ps(y, _mm512_maskz_loadu_ps(lane_mask(t.cols - lo), res))
                };
                if lo + 16 <= t.cols {
                    _mm512_storeu_ps(c.add(lo), y);
                } else if lo < t.cols {
                    _mm512_mask_storeu_ps(c.add(lo), lane_mask(t.cols - lo), y);
                }
            }
            if t.gelu {
                gelu_row(std::slice::from_raw_parts_mut(c, t.cols));
            }
        }
    }

    /// The first `live` of 16 lanes (all of them from 16 on).
    fn lane_mask(live: usize) -> u16 {
        if live >= 16 {
            u16::MAX
        } else {
            ((1u32 << live) - 1) as u16
        }
    }

    /// GELU in place, compiled with AVX-512 so the rational erf vectorizes 16 wide.
    #[target_feature(enable = "avx512f")]
    unsafe fn gelu_row(row: &mut [f32]) {
        for v in row {
            *v = gelu(*v);
        }
    }
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

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
    fn rounding_is_nearest_even() {
        assert_eq!(to_bf16(1.0), 0x3f80);
        // 1 + 2⁻⁸ is halfway between 1 and 1 + 2⁻⁷: ties go to the even mantissa (1.0).
        assert_eq!(to_bf16(1.0 + 1.0 / 256.0), 0x3f80);
        // Just above halfway rounds up.
        assert_eq!(to_bf16(1.0 + 1.0 / 256.0 + 1.0 / 65536.0), 0x3f81);
        assert_eq!(from_bf16(to_bf16(-2.5)), -2.5);
        assert!(from_bf16(to_bf16(f32::NAN)).is_nan());
        assert_eq!(from_bf16(to_bf16(f32::INFINITY)), f32::INFINITY);
    }

    /// The kernel against the scalar reference over shapes that exercise every tile height,
    /// a partial column block, an odd input width and a width that is not a multiple of 32.
    #[test]
    fn kernel_matches_scalar_reference() {
        if !supported() {
            eprintln!("skipped: this CPU has no AVX-512 BF16");
            return;
        }
        for &(m, n, k, gelu) in &[
            (1, 64, 32, false),
            (7, 100, 45, false),
            (13, 384, 384, true),
            (50, 130, 1536, false),
            (49, 64, 3, true),
        ] {
            let w = values(n * k, 1 + (m * n * k) as u64);
            let b = values(n, 7 + n as u64);
            let x = values(m * k, 11 + k as u64);
            let p = PackedBf16::new(&w, n, k, &b, gelu).expect("supported");
            let res = values(m * n, 13);
            let residual = (m % 2 == 1).then_some(res.as_slice());
            let got = p.forward(&x, m, residual);
            let mut want = vec![0f32; m * n];
            p.forward_scalar(&x, m, residual, &mut want);
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                // Same products, different summation order: f32 rounding only.
                let tol = 1e-4 * (k as f32).sqrt().max(1.0);
                assert!(
                    (g - w).abs() <= tol,
                    "m={m} n={n} k={k} at {i}: kernel {g}, reference {w}"
                );
            }
        }
    }

    /// bfloat16 against exact f32 arithmetic: the error is the inputs' rounding (≤ 2⁻⁸
    /// relative per product), not anything larger.
    #[test]
    fn close_to_f32() {
        if !supported() {
            return;
        }
        let (m, n, k) = (9, 384, 384);
        let w = values(n * k, 3);
        let b = values(n, 5);
        let x = values(m * k, 9);
        let got = PackedBf16::new(&w, n, k, &b, false)
            .expect("supported")
            .forward(&x, m, None);
        for r in 0..m {
            for c in 0..n {
                let exact: f32 = b[c] + (0..k).map(|i| x[r * k + i] * w[c * k + i]).sum::<f32>();
                let scale: f32 = (0..k).map(|i| (x[r * k + i] * w[c * k + i]).abs()).sum();
                assert!((got[r * n + c] - exact).abs() <= scale / 128.0);
            }
        }
    }

    #[test]
    fn refuses_mismatched_sizes() {
        assert!(PackedBf16::new(&[0.0; 6], 2, 4, &[0.0; 2], false).is_none());
        assert!(PackedBf16::new(&[0.0; 8], 2, 4, &[0.0; 3], false).is_none());
    }
}
