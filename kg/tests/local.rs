//! The local GGUF backend for real. Skipped (with a printed reason) unless
//! `CAIRN_KG_LOCAL_MODEL` names a GGUF file; `kg/fetch-local-model.sh` fetches SmolLM2-135M
//! and prints its path:
//!
//! ```sh
//! CAIRN_KG_LOCAL_MODEL=$(kg/fetch-local-model.sh) cargo test -p cairn-kg --test local -- --nocapture
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use cairn_kg::grammar::{GrammarConfig, JsonGrammar};
use cairn_kg::reply::parse;
use cairn_kg::{extract, ExtractError, Extractor, LocalConfig, LocalGguf};

const DOC: &str = "Acme Robotics is a warehouse automation company based in Berlin. \
Jane Doe is the CEO of Acme Robotics. \
Last year Acme Robotics opened a second factory in Munich. \
The company plans to hire 200 engineers.";

const MORE: [&str; 2] = [
    "Globex Media is headquartered in London. Peter Novak founded Globex Media in 2009.",
    "Initech signed a partnership with Umbrella Group. Maria Garcia leads Initech from Madrid.",
];

fn model_path() -> Option<String> {
    match std::env::var("CAIRN_KG_LOCAL_MODEL") {
        Ok(p) if !p.is_empty() => Some(p),
        _ => {
            println!(
                "skipped: CAIRN_KG_LOCAL_MODEL is not set (run kg/fetch-local-model.sh and set it \
                 to the GGUF path it prints)"
            );
            None
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_model_end_to_end() {
    let Some(path) = model_path() else {
        return;
    };
    let config = LocalConfig {
        max_new_tokens: 384,
        ..LocalConfig::default()
    };
    let t0 = Instant::now();
    let local = tokio::task::spawn_blocking(move || LocalGguf::load(path, config))
        .await
        .unwrap()
        .unwrap();
    println!(
        "loaded {:?} in {:.2}s",
        local.info(),
        t0.elapsed().as_secs_f64()
    );
    assert_eq!(local.name(), "local");

    // The raw reply is grammatical JSON of the contract, with snippets from the source.
    let t = Instant::now();
    let reply = local.reply(DOC, 1).await.unwrap();
    let secs = t.elapsed().as_secs_f64();
    println!(
        "raw reply ({} prompt tokens, {} output tokens, {:.2}s, {:.1} tokens/s):\n{}",
        reply.input_tokens,
        reply.output_tokens,
        secs,
        reply.output_tokens as f64 / secs,
        reply.raw
    );
    let raw = parse(&reply.raw).expect("the constrained reply must parse as the contract");
    let mut g = JsonGrammar::new(GrammarConfig::default(), DOC);
    assert!(
        g.advance(reply.raw.as_bytes()),
        "the reply must satisfy the grammar"
    );
    assert!(g.is_done());
    for e in &raw.entities {
        assert!(
            DOC.contains(&e.snippet),
            "snippet not verbatim: {:?}",
            e.snippet
        );
    }
    assert!(reply.output_tokens > 0 && reply.output_tokens <= 384);

    // Through extract: a validated extraction, or a refusal; either way the pipeline ran.
    let mut docs = vec![DOC];
    docs.extend(MORE);
    let t = Instant::now();
    for d in &docs {
        match extract(&local, d).await {
            Ok(out) => {
                println!(
                    "extracted (attempts {}, {} output tokens): {}",
                    out.attempts,
                    out.usage.output_tokens,
                    serde_json::to_string(&out.extraction).unwrap()
                );
                assert!(out.attempts >= 1);
                for e in &out.extraction.entities {
                    assert!(d.contains(&e.mentions[0].snippet));
                }
            }
            Err(ExtractError::Refused { first, second, .. }) => {
                println!("refused twice: {first} / {second}");
            }
            Err(e) => panic!("backend failed: {e}"),
        }
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "local: {} documents in {:.1}s = {:.3} documents/s",
        docs.len(),
        secs,
        docs.len() as f64 / secs
    );
}
