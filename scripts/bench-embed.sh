#!/usr/bin/env bash
# Embedding throughput, Cairn against its peer in the same run: cairn-embed (candle, its compute
# lanes; f32, bfloat16 where the CPU has AVX-512 BF16 and 8-bit where it has AVX2: `auto`
# picks the first of bf16, int8, f32 the CPU runs) and sentence-transformers (PyTorch f32, the
# same MiniLM directory, as many threads as cores) embed the same texts, alternately (Cairn
# f32, Cairn bf16, Cairn int8, peer; again), on two sets:
#   - sentences: 1,000 generated English sentences of ~40 tokens (embed/benches/throughput.rs);
#   - chunks: real news text, gensim's lee_background.cor cut into 180-word passages (~180
#     tokens each; the retrieval test's held-out kind of text).
# Prints texts/s and tokens/s of each run, the Cairn/peer ratio per round, each path's share of
# the machine's peak (measured first: f32 FMA, bf16 and int8 dot-product loops on every core; a
# forward pass counted as 24·h² FLOP per token and layer for the dense layers plus 4·seq·h for
# attention) and the load average at start and end. Installs what it needs (the model, the peer's Python, the corpus).
#
#   bash scripts/bench-embed.sh            ROUNDS=3 for more rounds
set -euo pipefail

# shellcheck source=scripts/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$ROOT"
ensure_rust

rounds=${ROUNDS:-2}
model=$(bash scripts/fetch-model.sh)
py=$(bash scripts/peer-python.sh)
lee=$(bash scripts/fetch-eval-texts.sh)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
threads=$(nproc)

log "building the throughput bench (release)"
cargo bench --workspace --bench throughput --no-run >"$work/build.log" 2>&1 || { tail -20 "$work/build.log"; exit 1; }
bench() { CAIRN_EMBED_MODEL="$model" cargo bench -q --workspace --bench throughput -- "$@" 2>/dev/null; }

bench --emit-sentences "$work/sentences.txt" >/dev/null
"$py" - "$lee" "$work/chunks.txt" <<'EOF'
import sys
out = []
for line in open(sys.argv[1], encoding="utf-8"):
    words = line.split()
    for i in range(0, len(words), 180):
        part = words[i:i + 180]
        if len(part) >= 60:
            out.append(" ".join(part))
open(sys.argv[2], "w", encoding="utf-8").write("\n".join(out) + "\n")
EOF

echo "embedding benchmark: cairn-embed vs sentence-transformers, $threads cores, $(date -u +%FT%TZ)"
echo "load average at start: $(cat /proc/loadavg)"
peak=$(bench --peak)
echo "$peak"
for set in sentences chunks; do
  file="$work/$set.txt"
  echo
  echo "== $set ($(wc -l <"$file") texts) =="
  for r in $(seq 1 "$rounds"); do
    c=$(bench --texts "$file" --reps 2 --precision f32)
    b=$(bench --texts "$file" --reps 2 --precision bf16 || true)
    i=$(bench --texts "$file" --reps 2 --precision int8 || true)
    p=$("$py" embed/bench/peer.py "$model" "$file" --reps 2 --threads "$threads" 2>/dev/null)
    "$py" - "$r" "$c" "$b" "$p" "$peak" "$i" <<'EOF'
import re, sys
r, c, b, p, peak, i8 = sys.argv[1:7]
def parse(text, who):
    rate = float(re.search(who + r": median ([\d.]+)", text).group(1))
    tokens = float(re.search(r"mean ([\d.]+) tokens", text).group(1))
    return rate, rate * tokens, tokens
f32_peak, bf16_peak, int8_peak = (float(x) for x in re.search(r"peak f32 ([\d.]+) GFLOP/s, bf16 ([\d.]+) GFLOP/s, int8 ([\d.]+)", peak).groups())
h, layers = 384, 6
def share(tokens_per_s, seq, peak):
    flop = layers * (24 * h * h + 4 * seq * h)
    return tokens_per_s * flop / 1e9, (tokens_per_s * flop / 1e9 / peak if peak else 0.0)
pr, pt, seq = parse(p, "sentence-transformers")
rows = [("cairn f32 ", parse(c, "cairn-embed"), f32_peak)]
if "bf16), load" in b:
    rows.append(("cairn bf16", parse(b, "cairn-embed"), bf16_peak))
else:
    print(f"  round {r}: this CPU has no AVX-512 BF16; no bf16 row")
if "int8), load" in i8:
    rows.append(("cairn int8", parse(i8, "cairn-embed"), int8_peak))
else:
    print(f"  round {r}: this CPU has no AVX2; no int8 row")
for name, (cr, ct, _), pk in rows:
    g, sh = share(ct, seq, pk)
    print(f"  round {r}: {name} {cr:7.1f} texts/s {ct:8.0f} tokens/s ({g:5.1f} GFLOP/s, {100 * sh:4.1f}% of its peak) | cairn/peer {cr / pr:.2f}")
g, sh = share(pt, seq, f32_peak)
print(f"  round {r}: peer       {pr:7.1f} texts/s {pt:8.0f} tokens/s ({g:5.1f} GFLOP/s, {100 * sh:4.1f}% of the f32 peak)")
EOF
  done
done
echo
echo "load average at end: $(cat /proc/loadavg)"
