//! Parity with sentence-transformers and the embedder's contract, on the real model.
//!
//! The model directory comes from `CAIRN_EMBED_MODEL` (put it in place with
//! `scripts/fetch-model.sh`, which prints the directory). Unset, these tests fail: they never
//! skip silently.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::OnceLock;

use cairn_embed::{BatchDone, EmbedConfig, EmbedError, Embedder, Pooling, Precision};
use serde::Deserialize;

#[derive(Deserialize)]
struct Fixture {
    sentences: Vec<String>,
    token_ids: Vec<Vec<u32>>,
    embeddings: Vec<Vec<f32>>,
    dim: usize,
    max_seq_length: usize,
}

fn fixture() -> Fixture {
    // Run-time CARGO_MANIFEST_DIR first (see extract/tests/formats.rs).
    let dir =
        std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").into());
    let path = format!("{dir}/tests/fixtures/minilm_reference_embeddings.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn model_dir() -> PathBuf {
    match std::env::var_os("CAIRN_EMBED_MODEL") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => panic!(
            "CAIRN_EMBED_MODEL is not set: run `scripts/fetch-model.sh` (it prints the model \
             directory) and export CAIRN_EMBED_MODEL=<that directory>"
        ),
    }
}

/// One embedder (default settings) shared by the tests: its workers are plain threads, so it
/// serves every test's runtime.
fn embedder() -> &'static Embedder {
    static E: OnceLock<Embedder> = OnceLock::new();
    E.get_or_init(|| Embedder::load(EmbedConfig::new(model_dir())).expect("load model"))
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn norm(v: &[f32]) -> f32 {
    v.iter().map(|x| x * x).sum::<f32>().sqrt()
}

fn words(n: usize) -> String {
    const W: [&str; 12] = [
        "river", "stone", "ancient", "library", "quietly", "measured", "the", "northern",
        "archive", "of", "glass", "harbour",
    ];
    (0..n)
        .map(|i| W[(i * 7 + i / 3) % W.len()])
        .collect::<Vec<_>>()
        .join(" ")
}

#[tokio::test]
async fn matches_sentence_transformers_reference() {
    let fx = fixture();
    let e = embedder();
    assert_eq!(e.dim(), fx.dim);
    assert_eq!(e.max_seq_len(), fx.max_seq_length);
    assert_eq!(
        e.model_name(),
        model_dir()
            .canonicalize()
            .unwrap()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
    );
    assert_eq!(e.pooling(), Pooling::Mean);
    assert!(e.normalizes(), "all-MiniLM-L6-v2 lists a Normalize module");

    for (s, ids) in fx.sentences.iter().zip(&fx.token_ids) {
        assert_eq!(&e.tokenize(s).unwrap(), ids, "token ids for {s:?}");
    }

    let got = e.embed(fx.sentences.clone(), None).await.unwrap();
    assert_eq!(got.len(), fx.embeddings.len());
    let mut worst = 0.0f32;
    for (i, (g, r)) in got.iter().zip(&fx.embeddings).enumerate() {
        let d = max_abs_diff(g, r);
        println!("sentence {i}: max |diff| vs sentence-transformers = {d:e}");
        assert!(d <= 1e-4, "sentence {i}: max |diff| {d} > 1e-4");
        assert!((norm(g) - 1.0).abs() < 1e-5);
        worst = worst.max(d);
    }
    println!("parity: worst max |diff| = {worst:e}");
}

#[tokio::test]
async fn order_is_preserved_across_mixed_lengths_and_batches() {
    let model = model_dir();
    // A small budget forces several batches; lengths vary from a few tokens to past truncation.
    let mut cfg = EmbedConfig::new(model);
    cfg.batch_token_budget = 300;
    let e = Embedder::load(cfg).unwrap();
    let texts: Vec<String> = [1usize, 120, 3, 40, 400, 8, 2, 75, 15, 250, 5, 33]
        .iter()
        .enumerate()
        .map(|(i, &n)| format!("item {i}: {}", words(n)))
        .collect();

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<BatchDone>();
    let batched = e.embed(texts.clone(), Some(tx)).await.unwrap();
    assert_eq!(batched.len(), texts.len());

    let mut messages = Vec::new();
    while let Some(m) = rx.recv().await {
        messages.push(m);
    }
    assert!(
        messages.len() > 1,
        "budget 300 should need several batches: {messages:?}"
    );
    let mut prev = 0;
    let mut in_batches = 0;
    for m in &messages {
        assert_eq!(m.total, texts.len());
        assert!(m.done > prev);
        in_batches += m.done - prev;
        prev = m.done;
        assert!(m.tokens > 0);
    }
    assert_eq!(in_batches, texts.len(), "progress sums to the input count");
    assert_eq!(messages.last().unwrap().done, texts.len());
    let tokens: usize = messages.iter().map(|m| m.tokens).sum();
    let expected: usize = texts.iter().map(|t| e.tokenize(t).unwrap().len()).sum();
    assert_eq!(tokens, expected, "tokens are the unpadded token counts");

    for (i, t) in texts.iter().enumerate() {
        let alone = e.embed(vec![t.clone()], None).await.unwrap().remove(0);
        let d = max_abs_diff(&batched[i], &alone);
        assert!(d <= 1e-5, "text {i}: batched vs alone differ by {d}");
        // And it is not some other input's vector.
        for (j, other) in batched.iter().enumerate() {
            if j != i {
                assert!(
                    max_abs_diff(other, &alone) > 1e-3,
                    "text {i} looks like text {j}"
                );
            }
        }
    }
}

#[tokio::test]
async fn progress_covers_every_input_at_default_budget() {
    let e = embedder();
    let texts: Vec<String> = (0..50)
        .map(|i| format!("{i} {}", words(i % 17 + 1)))
        .collect();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let v = e.embed(texts.clone(), Some(tx)).await.unwrap();
    assert_eq!(v.len(), 50);
    let mut last = BatchDone {
        done: 0,
        total: 0,
        tokens: 0,
    };
    let mut sum = 0;
    while let Some(m) = rx.recv().await {
        sum += m.done - last.done;
        last = m;
    }
    assert_eq!(sum, 50);
    assert_eq!(last.done, 50);
    assert_eq!(last.total, 50);
}

#[tokio::test]
async fn embed_query_equals_embed() {
    let e = embedder();
    let q = "Who conducted pioneering research on radioactivity?";
    let via_query = e.embed_query(q).await.unwrap();
    let via_embed = e.embed(vec![q.to_owned()], None).await.unwrap().remove(0);
    assert_eq!(via_query.len(), e.dim());
    let d = max_abs_diff(&via_query, &via_embed);
    assert!(d <= 1e-6, "embed_query vs embed: {d}");
}

#[tokio::test]
async fn overlong_text_is_truncated_not_refused() {
    let e = embedder();
    let long = words(2000);
    let ids = e.tokenize(&long).unwrap();
    assert_eq!(
        ids.len(),
        e.max_seq_len(),
        "tokenizer truncates at max_seq_len"
    );

    let v = e.embed_query(&long).await.unwrap();
    assert_eq!(v.len(), e.dim());
    assert!((norm(&v) - 1.0).abs() < 1e-5);
    // Words past the cut do not matter.
    let longer = format!("{long} and then a completely different ending about volcanoes");
    let w = e.embed(vec![longer], None).await.unwrap().remove(0);
    assert!(max_abs_diff(&v, &w) <= 1e-6);
}

#[tokio::test]
async fn empty_input_and_blocking_api() {
    let e = embedder();
    assert!(e.embed(Vec::new(), None).await.unwrap().is_empty());
    let fx = fixture();
    let e2 = e.clone();
    let blocking = tokio::task::spawn_blocking(move || e2.embed_blocking(fx.sentences, None))
        .await
        .unwrap()
        .unwrap();
    assert!(max_abs_diff(&blocking[0], &fx.embeddings[0]) <= 1e-4);
}

/// Copies the model directory's small files and writes the weights under `prefix` (e.g. "bert."),
/// so the loader's prefix detection and pooling rules can be tested on the real weights.
fn variant_dir(prefix: &str, pooling_cls: bool, normalize: bool) -> tempfile::TempDir {
    let src = model_dir();
    let dir = tempfile::tempdir().unwrap();
    for f in ["config.json", "tokenizer.json"] {
        std::fs::copy(src.join(f), dir.path().join(f)).unwrap();
    }
    let tensors =
        candle_core::safetensors::load(src.join("model.safetensors"), &candle_core::Device::Cpu)
            .unwrap();
    let renamed: std::collections::HashMap<String, candle_core::Tensor> = tensors
        .into_iter()
        .map(|(k, v)| (format!("{prefix}{k}"), v))
        .collect();
    candle_core::safetensors::save(&renamed, dir.path().join("model.safetensors")).unwrap();
    std::fs::create_dir(dir.path().join("1_Pooling")).unwrap();
    std::fs::write(
        dir.path().join("1_Pooling/config.json"),
        format!(
            r#"{{"word_embedding_dimension": 384, "pooling_mode_cls_token": {pooling_cls},
                "pooling_mode_mean_tokens": {}}}"#,
            !pooling_cls
        ),
    )
    .unwrap();
    let mut modules = vec![
        r#"{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"}"#,
        r#"{"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"}"#,
    ];
    if normalize {
        modules.push(r#"{"idx":2,"name":"2","path":"2_Normalize","type":"sentence_transformers.models.Normalize"}"#);
    }
    std::fs::write(
        dir.path().join("modules.json"),
        format!("[{}]", modules.join(",")),
    )
    .unwrap();
    dir
}

#[tokio::test]
async fn prefixed_weights_cls_pooling_and_no_normalize() {
    let fx = fixture();

    let prefixed = variant_dir("bert.", false, true);
    let e = Embedder::load(EmbedConfig::new(prefixed.path())).unwrap();
    let v = e.embed(fx.sentences.clone(), None).await.unwrap();
    for (g, r) in v.iter().zip(&fx.embeddings) {
        assert!(
            max_abs_diff(g, r) <= 1e-4,
            "bert.-prefixed weights load the same model"
        );
    }

    let cls = variant_dir("", true, false);
    let e = Embedder::load(EmbedConfig::new(cls.path())).unwrap();
    assert_eq!(e.pooling(), Pooling::Cls);
    assert!(!e.normalizes());
    let v = e.embed(fx.sentences.clone(), None).await.unwrap();
    assert_eq!(v[0].len(), 384);
    assert!(
        (norm(&v[0]) - 1.0).abs() > 1e-2,
        "no Normalize module: raw CLS vector"
    );
    assert!(
        max_abs_diff(&v[0], &fx.embeddings[0]) > 1e-2,
        "CLS differs from mean pooling"
    );
}

#[test]
fn load_errors_are_model_load() {
    let dir = tempfile::tempdir().unwrap();
    match Embedder::load(EmbedConfig::new(dir.path())) {
        Err(EmbedError::ModelLoad(msg)) => assert!(msg.contains("config.json"), "{msg}"),
        other => panic!("expected ModelLoad, got {other:?}"),
    }
    match Embedder::load(EmbedConfig::new(dir.path().join("missing"))) {
        Err(EmbedError::ModelLoad(_)) => {}
        other => panic!("expected ModelLoad, got {other:?}"),
    }
}

#[tokio::test]
async fn one_large_batch_gives_the_same_vectors_as_single_texts() {
    // 160 texts of ~30-45 tokens: one batch under the default budget, more padded tokens than
    // one CPU forward slice, so the batch runs as several passes.
    let e = embedder();
    let texts: Vec<String> = (0..160)
        .map(|i| format!("sentence number {i} says {}", words(20 + i % 13)))
        .collect();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let all = e.embed(texts.clone(), Some(tx)).await.unwrap();
    let mut batches = 0;
    while rx.recv().await.is_some() {
        batches += 1;
    }
    assert_eq!(
        batches, 1,
        "160 short texts fit one batch of the default budget"
    );
    for (i, t) in texts.iter().enumerate().step_by(7) {
        let alone = e.embed_query(t).await.unwrap();
        let d = max_abs_diff(&all[i], &alone);
        assert!(d <= 1e-5, "text {i}: {d}");
    }
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    dot / (norm(a) * norm(b))
}

/// Whether this CPU runs the 8-bit path (AVX2 and FMA), as the crate decides it.
fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// What `auto` must pick on this CPU, given whether it has AVX-512 BF16: bf16, else int8
/// where it has AVX2 and FMA, else f32.
fn expected_auto(bf16: bool) -> Precision {
    if bf16 {
        Precision::Bf16
    } else if has_avx2() {
        Precision::Int8
    } else {
        Precision::F32
    }
}

/// A quantized path (issue 14): every vector within cosine 0.99 of the f32 path's and of
/// sentence-transformers' reference, on the reference sentences and on texts of every length
/// up to truncation; a single query the same as in a batch.
async fn stays_within_cosine_099_of_f32(q: &Embedder) {
    let name = q.precision().as_str();
    let fx = fixture();
    let got = q.embed(fx.sentences.clone(), None).await.unwrap();
    let mut worst_ref = 1.0f32;
    for (i, (g, r)) in got.iter().zip(&fx.embeddings).enumerate() {
        let c = cosine(g, r);
        assert!(
            c >= 0.99,
            "reference sentence {i}: cosine({name}, reference) {c}"
        );
        assert!((norm(g) - 1.0).abs() < 1e-5);
        worst_ref = worst_ref.min(c);
    }
    println!("{name} against sentence-transformers' reference: lowest cosine {worst_ref:.6}");

    let mut texts = fx.sentences.clone();
    texts.extend(
        [1usize, 3, 8, 15, 33, 60, 120, 180, 250, 400]
            .iter()
            .cycle()
            .take(120)
            .enumerate()
            .map(|(i, &n)| format!("passage {i}: {}", words(n + i % 7))),
    );
    let f32e = embedder();
    let exact = f32e.embed(texts.clone(), None).await.unwrap();
    let rounded = q.embed(texts.clone(), None).await.unwrap();
    let mut worst = 1.0f32;
    for (i, (a, b)) in exact.iter().zip(&rounded).enumerate() {
        let c = cosine(a, b);
        assert!(c >= 0.99, "text {i}: cosine({name}, f32) = {c}");
        worst = worst.min(c);
    }
    println!(
        "{name} against f32 over {} texts: lowest cosine {worst:.6}",
        texts.len()
    );

    // Alone, a text is padded differently, so the f32 parts (attention) sum in a different
    // order; a difference in the last f32 bit can move a value across a rounding boundary,
    // so the two agree closely but not to f32's 1e-5.
    // A search query is embedded by the query path: the same arithmetic as passages, except
    // under int8, whose queries run at f32 (`Precision::Int8`): then it is f32's query.
    for (i, t) in texts.iter().enumerate().step_by(11) {
        let alone = q.embed(vec![t.clone()], None).await.unwrap().remove(0);
        let c = cosine(&rounded[i], &alone);
        assert!(
            c >= 0.9999,
            "text {i}: {name} passage alone vs in its batch: cosine {c}"
        );
        let query = q.embed_query(t).await.unwrap();
        let expected = if q.precision() == Precision::Int8 {
            f32e.embed_query(t).await.unwrap()
        } else {
            alone
        };
        let d = max_abs_diff(&query, &expected);
        assert!(d <= 1e-6, "text {i}: {name} query path: {d} from expected");
    }
}

/// The bfloat16 path. On a CPU without AVX-512 BF16, `bf16` must refuse to load with a clear
/// error and `auto` must fall back to f32.
#[tokio::test]
async fn bf16_stays_within_cosine_099_of_f32() {
    let mut cfg = EmbedConfig::new(model_dir());
    cfg.precision = Precision::Bf16;
    let bf16 = match Embedder::load(cfg.clone()) {
        Ok(e) => e,
        Err(EmbedError::ModelLoad(msg)) => {
            assert!(msg.contains("AVX-512 BF16"), "{msg}");
            cfg.precision = Precision::Auto;
            let auto = Embedder::load(cfg).unwrap().precision();
            assert_eq!(auto, expected_auto(false));
            println!("this CPU has no AVX-512 BF16: bf16 refused, auto picked {auto}");
            return;
        }
        Err(e) => panic!("loading bf16: {e}"),
    };
    assert_eq!(bf16.precision(), Precision::Bf16);
    cfg.precision = Precision::Auto;
    assert_eq!(
        Embedder::load(cfg).unwrap().precision(),
        expected_auto(true),
        "auto picks bf16 where the CPU has it"
    );
    assert_eq!(embedder().precision(), Precision::F32, "f32 is the default");
    stays_within_cosine_099_of_f32(&bf16).await;
}

/// The 8-bit path, on every CPU with AVX2, the AVX-512 machines included (where `auto` picks
/// bf16 instead). Without AVX2, `int8` must refuse to load with a clear error.
#[tokio::test]
async fn int8_stays_within_cosine_099_of_f32() {
    let mut cfg = EmbedConfig::new(model_dir());
    cfg.precision = Precision::Int8;
    let int8 = match Embedder::load(cfg.clone()) {
        Ok(e) => e,
        Err(EmbedError::ModelLoad(msg)) => {
            assert!(!has_avx2(), "int8 refused on a CPU with AVX2: {msg}");
            assert!(msg.contains("AVX2"), "{msg}");
            println!("this CPU has no AVX2: int8 refused");
            return;
        }
        Err(e) => panic!("loading int8: {e}"),
    };
    assert_eq!(int8.precision(), Precision::Int8);
    stays_within_cosine_099_of_f32(&int8).await;
}

#[test]
fn precision_parses_and_refuses_unknown_names() {
    assert_eq!("bf16".parse::<Precision>().unwrap(), Precision::Bf16);
    assert_eq!("F32".parse::<Precision>().unwrap(), Precision::F32);
    assert_eq!("auto".parse::<Precision>().unwrap(), Precision::Auto);
    assert_eq!("int8".parse::<Precision>().unwrap(), Precision::Int8);
    match "int4".parse::<Precision>() {
        Err(EmbedError::ModelLoad(msg)) => {
            assert!(msg.contains("f32, bf16, int8 or auto"), "{msg}")
        }
        other => panic!("int4 parsed as {other:?}"),
    }
}

/// Requests that wait in the queue together are embedded as one plan (the worker merges
/// them): each must still get exactly its own vectors, in its own order, and its own
/// progress (counts of its texts, its tokens), whatever else shared the batches.
#[tokio::test]
async fn queued_requests_merged_into_one_plan_keep_their_own_vectors_and_progress() {
    let e = embedder();
    // A long request first keeps the worker busy while the others queue behind it.
    let busy: Vec<String> = (0..200)
        .map(|i| format!("busy {i}: {}", words(60 + i % 50)))
        .collect();
    let requests: Vec<Vec<String>> = (0..5)
        .map(|r| {
            (0..3 + r * 4)
                .map(|i| {
                    format!(
                        "request {r} text {i}: {}",
                        words(5 + (i * 37 + r * 11) % 140)
                    )
                })
                .collect()
        })
        .collect();
    let busy_call = tokio::spawn(e.embed(busy, None));
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let mut rxs = Vec::new();
    let mut calls = Vec::new();
    for texts in &requests {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<BatchDone>();
        rxs.push(rx);
        calls.push(tokio::spawn(e.embed(texts.clone(), Some(tx))));
    }
    busy_call.await.unwrap().unwrap();
    let mut outs = Vec::new();
    for c in calls {
        outs.push(c.await.unwrap());
    }
    for (r, (texts, out)) in requests.iter().zip(outs).enumerate() {
        let got = out.unwrap();
        assert_eq!(got.len(), texts.len(), "request {r}");
        let alone = e.embed(texts.clone(), None).await.unwrap();
        for (i, (g, a)) in got.iter().zip(&alone).enumerate() {
            let d = max_abs_diff(g, a);
            assert!(d <= 1e-5, "request {r} text {i}: {d} from its vector alone");
        }
        let mut last = BatchDone {
            done: 0,
            total: 0,
            tokens: 0,
        };
        let mut tokens = 0;
        while let Ok(m) = rxs[r].try_recv() {
            assert_eq!(m.total, texts.len());
            assert!(m.done > last.done);
            tokens += m.tokens;
            last = m;
        }
        assert_eq!(
            last.done,
            texts.len(),
            "request {r}: progress ends at its total"
        );
        let want: usize = texts.iter().map(|t| e.tokenize(t).unwrap().len()).sum();
        assert_eq!(tokens, want, "request {r}: progress counts its own tokens");
    }
}

/// A search query never waits behind bulk work (it has a thread of its own): while long
/// requests hold every bulk worker (one being embedded, its progress started and far from its
/// end; the other waiting for the lanes behind it), `embed_query` answers, with the vector it
/// gives when the embedder is idle. Before the query thread, the query queued behind whole
/// requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_is_answered_while_long_requests_are_still_running() {
    let mut cfg = EmbedConfig::new(model_dir());
    // Small batches: the long requests report progress early and often.
    cfg.batch_token_budget = 2048;
    cfg.threads = 2;
    let e = Embedder::load(cfg).expect("load model");
    let q = "where is the northern archive of glass kept";
    let idle = e.embed_query(q).await.unwrap();
    let total = 2000;
    let long = |r: usize| -> Vec<String> {
        (0..total)
            .map(|i| format!("bulk {r} {i}: {}", words(50 + i % 20)))
            .collect()
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<BatchDone>();
    let first = tokio::spawn({
        let (e, texts) = (e.clone(), long(0));
        async move { e.embed(texts, Some(tx)).await }
    });
    let mut done = rx
        .recv()
        .await
        .expect("the long request reports progress")
        .done;
    assert!(done < total);
    let second = tokio::spawn({
        let (e, texts) = (e.clone(), long(1));
        async move { e.embed(texts, None).await }
    });
    // The second worker takes the second request.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let busy = e.embed_query(q).await.unwrap();
    assert!(
        !first.is_finished(),
        "the query was answered only after the whole long request"
    );
    while let Ok(b) = rx.try_recv() {
        done = b.done;
    }
    assert!(
        done < total / 2,
        "the query waited while {done} of the long request's {total} texts were embedded"
    );
    let d = max_abs_diff(&idle, &busy);
    assert!(d <= 1e-6, "the query's vector under load differs by {d}");
    first.abort();
    second.abort();
}

/// A copy of the model directory (symlinks to its files) with `model.safetensors` replaced by
/// `weights` bytes.
fn dir_with_weights(weights: &[u8]) -> tempfile::TempDir {
    let src = model_dir();
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(&src).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() != "model.safetensors" {
            std::os::unix::fs::symlink(entry.path(), dir.path().join(entry.file_name())).unwrap();
        }
    }
    std::fs::write(dir.path().join("model.safetensors"), weights).unwrap();
    dir
}

#[tokio::test]
async fn a_started_embedder_describes_itself_at_once_and_embeds_as_a_loaded_one() {
    // `start` returns before the weights are read; what it says of itself and the vectors
    // it gives are those of `load`.
    let fx = fixture();
    let loaded = embedder();
    let started = Embedder::start(EmbedConfig::new(model_dir())).unwrap();
    assert_eq!(started.dim(), loaded.dim());
    assert_eq!(started.max_seq_len(), loaded.max_seq_len());
    assert_eq!(started.pooling(), loaded.pooling());
    assert_eq!(started.normalizes(), loaded.normalizes());
    assert_eq!(started.precision(), loaded.precision());
    assert_eq!(started.model_name(), loaded.model_name());
    // Requests made during the load wait for it: a query and a bulk request at once.
    let (q, v) = tokio::join!(
        started.embed_query(&fx.sentences[0]),
        started.embed(fx.sentences.clone(), None)
    );
    let (q, v) = (q.unwrap(), v.unwrap());
    let want = loaded.embed(fx.sentences.clone(), None).await.unwrap();
    // (Within rounding: the shared embedder may batch these with another test's texts.)
    for (a, b) in v.iter().zip(&want) {
        assert!(
            max_abs_diff(a, b) <= 1e-5,
            "the same model, the same vectors"
        );
    }
    assert!(max_abs_diff(&q, &loaded.embed_query(&fx.sentences[0]).await.unwrap()) <= 1e-5);
    assert_eq!(
        started.tokenize(&fx.sentences[0]).unwrap(),
        loaded.tokenize(&fx.sentences[0]).unwrap()
    );
}

#[tokio::test]
async fn weights_that_do_not_load_fail_every_request_of_a_started_embedder() {
    // What `load` refuses at once, `start` refuses as soon as it knows: the directory is
    // checked before it returns ...
    let no_weights = dir_with_weights(b"");
    std::fs::remove_file(no_weights.path().join("model.safetensors")).unwrap();
    match Embedder::start(EmbedConfig::new(no_weights.path())) {
        Err(EmbedError::ModelLoad(msg)) => assert!(msg.contains("model.safetensors"), "{msg}"),
        other => panic!("expected ModelLoad, got {other:?}"),
    }
    // ... and weights that are there but unreadable fail every request, bulk, query and
    // tokenizer alike, with the load's reason, instead of leaving a caller waiting.
    let corrupt = dir_with_weights(b"not a safetensors file");
    assert!(matches!(
        Embedder::load(EmbedConfig::new(corrupt.path())),
        Err(EmbedError::ModelLoad(_))
    ));
    let e = Embedder::start(EmbedConfig::new(corrupt.path())).unwrap();
    let wait = std::time::Duration::from_secs(60);
    let bulk = tokio::time::timeout(wait, e.embed(vec!["a kettle".into()], None))
        .await
        .expect("a request to a model that did not load is answered");
    match bulk {
        Err(EmbedError::ModelLoad(msg)) => assert!(msg.contains("model.safetensors"), "{msg}"),
        other => panic!("expected ModelLoad, got {other:?}"),
    }
    let query = tokio::time::timeout(wait, e.embed_query("a kettle"))
        .await
        .expect("a query to a model that did not load is answered");
    assert!(matches!(query, Err(EmbedError::ModelLoad(_))), "{query:?}");
    assert!(matches!(
        e.tokenize("a kettle"),
        Err(EmbedError::ModelLoad(_))
    ));
}
