//! Throughput of the embedder at its default settings: 1000 deterministic English sentences of
//! about 40 tokens, embedded in one call, reported as sentences per second.
//!
//! ```sh
//! CAIRN_EMBED_MODEL=$(scripts/fetch-model.sh) cargo bench -p cairn-embed --bench throughput
//! # the same sentences for the sentence-transformers peer (embed/bench/peer.py):
//! cargo bench -p cairn-embed --bench throughput -- --emit-sentences /tmp/sentences.txt
//! ```
//!
//! Options (after `--`): `--emit-sentences PATH` writes the sentences, one a line, and exits;
//! `--texts PATH` embeds PATH's lines instead (at least 64; real chunks, for instance);
//! `--query-latency` times up to 380 queries of 5 words one at a time (after 20 untimed)
//! instead; `--reps N` (default 3) timed runs; `--threads N`, `--compute-threads N`,
//! `--budget N` override the defaults; `--precision f32|bf16|int8|auto` picks the dense layers'
//! arithmetic (default f32);
//! `--vectors PATH` writes the last run's vectors as JSON (compare with peer.py's);
//! `--peak` measures the machine's peak f32 and bfloat16 GFLOP/s instead.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use cairn_embed::{EmbedConfig, Embedder};

const N: usize = 1000;

/// A small linear congruential generator: the same sentences on every machine.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) as usize
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.next() % xs.len()]
    }
}

const OPENERS: &[&str] = &[
    "Early on a cold Monday morning in the harbour district,",
    "Last spring, in the quiet northern suburbs,",
    "According to people who attended the meeting,",
    "For the third time in as many years,",
    "In a short interview with the regional radio station,",
    "Late on Friday evening, after a long discussion,",
    "Following a request from several schools in the area,",
    "During the busy summer season in the old town,",
];
const SUBJECTS: &[&str] = &[
    "The city council",
    "A retired engineer",
    "The research team",
    "Our neighbour",
    "The museum",
    "A small bakery",
    "The orchestra",
    "The hospital board",
    "An old fisherman",
    "The startup",
    "The school library",
    "A local farmer",
    "The weather service",
    "The football club",
    "A young architect",
    "The railway company",
];
const VERBS: &[&str] = &[
    "announced",
    "postponed",
    "reviewed",
    "celebrated",
    "questioned",
    "rebuilt",
    "documented",
    "funded",
    "criticised",
    "opened",
    "translated",
    "measured",
    "designed",
    "replaced",
];
const OBJECTS: &[&str] = &[
    "a new bridge across the river",
    "the annual budget for public transport",
    "an exhibition of medieval maps",
    "the results of a long clinical trial",
    "a community garden near the station",
    "plans for a solar farm on the hills",
    "the history of the harbour district",
    "a series of evening lectures on astronomy",
    "the damaged roof of the town hall",
    "a cheaper way to recycle plastic bottles",
    "the rules for parking in the old town",
    "a report on air quality in winter",
];
const CLAUSES: &[&str] = &[
    "after months of heated debate among residents",
    "because the previous contract had expired in March",
    "although several experts warned about the costs",
    "while volunteers collected signatures outside the library",
    "despite heavy rain throughout the whole weekend",
    "so that visitors could arrive by bicycle or bus",
    "according to a statement published on Tuesday morning",
    "even though nobody expected such strong public interest",
];
const ENDINGS: &[&str] = &[
    "and the decision surprised many people.",
    "and a second phase is planned for next year.",
    "which should be finished before the summer holidays.",
    "with support from two regional universities.",
    "so local newspapers covered the story in detail.",
    "but the final vote will take place in October.",
];

fn sentences() -> Vec<String> {
    let mut rng = Lcg(0x00ca_19e5);
    (0..N)
        .map(|_| {
            format!(
                "{} {} {} {} {}, {}",
                rng.pick(OPENERS),
                rng.pick(SUBJECTS).to_lowercase(),
                rng.pick(VERBS),
                rng.pick(OBJECTS),
                rng.pick(CLAUSES),
                rng.pick(ENDINGS)
            )
        })
        .collect()
}

fn arg_value(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// The machine's measured peak: every core running independent chains of f32 FMAs (512-bit, 32
/// FLOP each, where the CPU has AVX-512; else 256-bit, 16 FLOP), of bfloat16 dot products
/// (`vdpbf16ps`, 64 FLOP each) or of 8-bit dot products (AVX2 `vpmaddubsw` + `vpmaddwd` +
/// `vpaddd`, 64 integer operations per triple, the int8 kernel's inner step), for the share of
/// peak the forward pass reaches. Prints `peak f32 X GFLOP/s, bf16 Y GFLOP/s, int8 Z GOP/s (N
/// threads)`.
#[allow(unsafe_code)]
fn peak() {
    #[cfg(target_arch = "x86_64")]
    mod k {
        use std::arch::x86_64::*;
        pub const ITERS: usize = 20_000_000;
        /// 24 independent accumulators hide the instructions' latency.
        #[target_feature(enable = "avx512f")]
        pub unsafe fn fma() -> f32 {
            let mut acc = [_mm512_setzero_ps(); 24];
            let (a, b) = (_mm512_set1_ps(1.0), _mm512_set1_ps(1e-9));
            for _ in 0..ITERS {
                for x in acc.iter_mut() {
                    *x = _mm512_fmadd_ps(a, b, *x);
                }
            }
            acc.iter().map(|x| _mm512_reduce_add_ps(*x)).sum()
        }
        #[target_feature(enable = "avx2,fma")]
        pub unsafe fn fma256() -> f32 {
            let mut acc = [_mm256_setzero_ps(); 24];
            let (a, b) = (_mm256_set1_ps(1.0), _mm256_set1_ps(1e-9));
            for _ in 0..ITERS {
                for x in acc.iter_mut() {
                    *x = _mm256_fmadd_ps(a, b, *x);
                }
            }
            let mut out = [0f32; 8];
            let sum = acc
                .iter()
                .fold(_mm256_setzero_ps(), |s, x| _mm256_add_ps(s, *x));
            _mm256_storeu_ps(out.as_mut_ptr(), sum);
            out.iter().sum()
        }
        /// The weights differ per accumulator (as a tile's columns do), so that no product
        /// is shared between chains.
        #[target_feature(enable = "avx2")]
        pub unsafe fn dot_int8() -> f32 {
            let mut acc = [_mm256_setzero_si256(); 12];
            let w: [__m256i; 12] = std::array::from_fn(|i| _mm256_set1_epi8(i as i8 - 6));
            let ones = _mm256_set1_epi16(1);
            let mut a = _mm256_set1_epi8(3);
            for _ in 0..ITERS * 2 {
                // A new broadcast each step, as the kernel loads one per row and quad.
                a = std::hint::black_box(a);
                for (x, w) in acc.iter_mut().zip(&w) {
                    *x = _mm256_add_epi32(*x, _mm256_madd_epi16(_mm256_maddubs_epi16(a, *w), ones));
                }
            }
            let mut out = [0i32; 8];
            let sum = acc
                .iter()
                .fold(_mm256_setzero_si256(), |s, x| _mm256_add_epi32(s, *x));
            _mm256_storeu_si256(out.as_mut_ptr().cast(), sum);
            out.iter().map(|&v| v as f32).sum()
        }
        #[target_feature(enable = "avx512f,avx512bf16")]
        pub unsafe fn dot_bf16() -> f32 {
            let mut acc = [_mm512_setzero_ps(); 24];
            let a: __m512bh = std::mem::transmute(_mm512_set1_epi32(0x3f80_3f80));
            let b: __m512bh = std::mem::transmute(_mm512_set1_epi32(0x3000_3000));
            for _ in 0..ITERS {
                for x in acc.iter_mut() {
                    *x = _mm512_dpbf16_ps(*x, a, b);
                }
            }
            acc.iter().map(|x| _mm512_reduce_add_ps(*x)).sum()
        }
    }
    #[cfg(target_arch = "x86_64")]
    {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let run = |f: unsafe fn() -> f32, flop_per_op: f64| -> f64 {
            let t = Instant::now();
            std::thread::scope(|s| {
                for _ in 0..threads {
                    // SAFETY: called only where the CPU has the features (checked below).
                    s.spawn(move || std::hint::black_box(unsafe { f() }));
                }
            });
            (threads * k::ITERS * 24) as f64 * flop_per_op / t.elapsed().as_secs_f64() / 1e9
        };
        let f32_peak = if std::arch::is_x86_feature_detected!("avx512f") {
            run(k::fma, 32.0)
        } else if std::arch::is_x86_feature_detected!("fma") {
            run(k::fma256, 16.0)
        } else {
            0.0
        };
        let bf16_peak = if std::arch::is_x86_feature_detected!("avx512bf16") {
            run(k::dot_bf16, 64.0)
        } else {
            0.0
        };
        // 12 chains × 2 (ITERS · 2 steps) per ITERS · 24 counted by `run`: 64 operations each.
        let int8_peak = if std::arch::is_x86_feature_detected!("avx2") {
            run(k::dot_int8, 64.0)
        } else {
            0.0
        };
        println!("peak f32 {f32_peak:.1} GFLOP/s, bf16 {bf16_peak:.1} GFLOP/s, int8 {int8_peak:.1} GOP/s ({threads} threads; 0: no FMA / AVX-512 BF16 / AVX2)");
    }
}

fn main() {
    cairn_embed::configure_process();
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--peak") {
        peak();
        return;
    }
    // `--texts PATH`: one text a line (real chunks, for instance) instead of the sentences.
    let texts = match arg_value(&args, "--texts") {
        Some(path) => std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_owned)
            .collect(),
        None => sentences(),
    };
    if let Some(path) = arg_value(&args, "--emit-sentences") {
        std::fs::write(&path, texts.join("\n") + "\n").unwrap();
        eprintln!("wrote {} sentences to {path}", texts.len());
        return;
    }
    let model_dir = std::env::var("CAIRN_EMBED_MODEL").unwrap_or_else(|_| {
        panic!("CAIRN_EMBED_MODEL is not set: run scripts/fetch-model.sh and export its output")
    });
    let mut cfg = EmbedConfig::new(model_dir);
    if let Some(t) = arg_value(&args, "--threads") {
        cfg.threads = t.parse().unwrap();
    }
    if let Some(t) = arg_value(&args, "--compute-threads") {
        cfg.compute_threads = t.parse().unwrap();
    }
    if let Some(p) = arg_value(&args, "--precision") {
        cfg.precision = p.parse().unwrap();
    }
    if let Some(b) = arg_value(&args, "--budget") {
        cfg.batch_token_budget = b.parse().unwrap();
    }
    let reps: usize = arg_value(&args, "--reps").map_or(3, |r| r.parse().unwrap());

    let t0 = Instant::now();
    let e = Embedder::load(cfg.clone()).unwrap();
    let load_s = t0.elapsed().as_secs_f64();
    let tokens: usize = texts.iter().map(|t| e.tokenize(t).unwrap().len()).sum();
    println!(
        "model {} (dim {}, {}, {}), load {:.2}s; {} sentences, mean {:.1} tokens; budget {} padded tokens, {} worker thread(s), rayon threads {}",
        e.model_name(),
        e.dim(),
        e.device(),
        e.precision(),
        load_s,
        texts.len(),
        tokens as f64 / texts.len() as f64,
        cfg.batch_token_budget,
        cfg.threads,
        std::env::var("RAYON_NUM_THREADS").unwrap_or_else(|_| "default".into()),
    );

    if args.iter().any(|a| a == "--query-latency") {
        // One short query at a time, as a search embeds it: the first 5 words of each sentence.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let mut ms: Vec<f64> = texts
            .iter()
            .take(400)
            .map(|t| {
                let q: String = t.split_whitespace().take(5).collect::<Vec<_>>().join(" ");
                let start = Instant::now();
                rt.block_on(e.embed_query(&q)).unwrap();
                start.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        let ms = &mut ms[20..]; // the first 20 warm up
        ms.sort_by(f64::total_cmp);
        println!(
            "embed_query (5 words): p50 {:.2} ms, p95 {:.2} ms, n={}",
            ms[ms.len() / 2],
            ms[ms.len() * 95 / 100],
            ms.len()
        );
        return;
    }

    // Warm-up (allocator, caches).
    e.embed_blocking(texts[..64].to_vec(), None).unwrap();

    let mut rates = Vec::new();
    let mut last = Vec::new();
    for rep in 0..reps {
        let t = Instant::now();
        let v = e.embed_blocking(texts.clone(), None).unwrap();
        let s = t.elapsed().as_secs_f64();
        assert_eq!(v.len(), texts.len());
        last = v;
        let rate = texts.len() as f64 / s;
        println!("rep {rep}: {s:.2}s, {rate:.1} sentences/s");
        rates.push(rate);
    }
    rates.sort_by(f64::total_cmp);
    println!(
        "cairn-embed: median {:.1} sentences/s, best {:.1} sentences/s",
        rates[rates.len() / 2],
        rates[rates.len() - 1]
    );
    if let Some(path) = arg_value(&args, "--vectors") {
        std::fs::write(&path, serde_json::to_string(&last).unwrap()).unwrap();
        eprintln!("wrote {} vectors to {path}", last.len());
    }
}
