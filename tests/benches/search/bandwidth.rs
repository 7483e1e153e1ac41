//! This machine's memory bandwidth, the exact path's reference.

use std::time::Instant;

/// Sum with 16 independent lanes (vectorizes like the index's dot product).
fn sum16(v: &[f32]) -> f32 {
    let mut acc = [0.0_f32; 16];
    let c = v.chunks_exact(16);
    let tail: f32 = c.remainder().iter().sum();
    for x in c {
        for i in 0..16 {
            acc[i] += x[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// Best-of-`reps` GB/s reading `buf` split across `threads`.
fn bandwidth(buf: &[f32], threads: usize, reps: usize) -> f64 {
    let bytes = std::mem::size_of_val(buf) as f64;
    let mut best = f64::MAX;
    for _ in 0..reps {
        let t = Instant::now();
        let total: f32 = if threads == 1 {
            sum16(std::hint::black_box(buf))
        } else {
            let share = buf.len().div_ceil(threads);
            std::thread::scope(|s| {
                let hs: Vec<_> = buf
                    .chunks(share)
                    .map(|part| s.spawn(move || sum16(std::hint::black_box(part))))
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap_or(0.0)).sum()
            })
        };
        std::hint::black_box(total);
        best = best.min(t.elapsed().as_secs_f64());
    }
    bytes / best / 1e9
}

/// (1 thread, `cores` threads) GB/s over a fresh 1 GiB buffer.
pub(crate) fn measure_bandwidth(cores: usize) -> (f64, f64) {
    let buf = vec![1.0_f32; (1 << 30) / 4];
    let one = bandwidth(&buf, 1, 7);
    let all = bandwidth(&buf, cores, 7);
    (one, all)
}
