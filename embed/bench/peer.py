#!/usr/bin/env python3
"""sentence-transformers on the same sentences as embed/benches/throughput.rs, for the ratio.

    python3 -m venv /var/tmp/cairn-bench-venv
    /var/tmp/cairn-bench-venv/bin/pip install sentence-transformers   # pulls torch (~2 GB+)
    cargo bench -p cairn-embed --bench throughput -- --emit-sentences /tmp/sentences.txt
    /var/tmp/cairn-bench-venv/bin/python embed/bench/peer.py "$CAIRN_EMBED_MODEL" /tmp/sentences.txt

Options: --batch-size N (default 32, sentence-transformers' default), --reps N (default 3),
--threads N (torch intra-op threads; default: torch's choice), --vectors OUT.json (write the
vectors), --compare RUST.json (max |diff| against the Rust bench's --vectors output).
"""

import argparse
import json
import statistics
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("sentences")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--vectors")
    ap.add_argument("--compare", help="JSON vectors from the Rust bench's --vectors")
    args = ap.parse_args()

    import torch
    from sentence_transformers import SentenceTransformer

    if args.threads:
        torch.set_num_threads(args.threads)
    with open(args.sentences, encoding="utf-8") as f:
        sentences = [line.rstrip("\n") for line in f if line.strip()]

    t0 = time.perf_counter()
    model = SentenceTransformer(args.model_dir, device="cpu")
    load_s = time.perf_counter() - t0
    tokens = sum(len(model.tokenizer(s)["input_ids"]) for s in sentences)
    print(
        f"sentence-transformers {__import__('sentence_transformers').__version__}, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"max_seq_length {model.max_seq_length}, load {load_s:.2f}s; {len(sentences)} sentences, "
        f"mean {tokens / len(sentences):.1f} tokens; batch size {args.batch_size}"
    )

    model.encode(sentences[:64], batch_size=args.batch_size)  # warm-up
    rates = []
    vectors = None
    for rep in range(args.reps):
        t = time.perf_counter()
        vectors = model.encode(sentences, batch_size=args.batch_size, show_progress_bar=False)
        s = time.perf_counter() - t
        rates.append(len(sentences) / s)
        print(f"rep {rep}: {s:.2f}s, {rates[-1]:.1f} sentences/s")
    print(
        f"sentence-transformers: median {statistics.median(rates):.1f} sentences/s, "
        f"best {max(rates):.1f} sentences/s"
    )
    if args.vectors and vectors is not None:
        with open(args.vectors, "w", encoding="utf-8") as f:
            json.dump(vectors.tolist(), f)
    if args.compare and vectors is not None:
        with open(args.compare, encoding="utf-8") as f:
            rust = json.load(f)
        worst = max(
            abs(a - b) for rv, pv in zip(rust, vectors.tolist(), strict=True) for a, b in zip(rv, pv)
        )
        print(f"max |diff| vs Rust over {len(rust)} vectors: {worst:.3e}")


if __name__ == "__main__":
    main()
