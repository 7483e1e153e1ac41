#!/usr/bin/env bash
# Embedding throughput, Cairn against its peer in the same run: cairn-embed (candle, f32, its
# compute lanes) and sentence-transformers (PyTorch, the same MiniLM directory, as many threads
# as cores) embed the same texts, alternately (Cairn, peer, Cairn, peer), on two sets:
#   - sentences: 1,000 generated English sentences of ~40 tokens (embed/benches/throughput.rs);
#   - chunks: real news text, gensim's lee_background.cor cut into 180-word passages (~180
#     tokens each; the retrieval test's held-out kind of text).
# Prints texts/s and tokens/s of each run, the Cairn/peer ratio per round and the load average
# at start and end. Installs what it needs (the model, the peer's Python, the corpus).
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
for set in sentences chunks; do
  file="$work/$set.txt"
  echo
  echo "== $set ($(wc -l <"$file") texts) =="
  for r in $(seq 1 "$rounds"); do
    c=$(bench --texts "$file" --reps 2)
    p=$("$py" embed/bench/peer.py "$model" "$file" --reps 2 --threads "$threads" 2>/dev/null)
    "$py" - "$r" "$c" "$p" <<'EOF'
import re, sys
r, c, p = sys.argv[1], sys.argv[2], sys.argv[3]
def parse(text, who):
    rate = float(re.search(who + r": median ([\d.]+)", text).group(1))
    tokens = float(re.search(r"mean ([\d.]+) tokens", text).group(1))
    return rate, rate * tokens
cr, ct = parse(c, "cairn-embed")
pr, pt = parse(p, "sentence-transformers")
print(f"  round {r}: cairn {cr:7.1f} texts/s {ct:8.0f} tokens/s | peer {pr:7.1f} texts/s {pt:8.0f} tokens/s | cairn/peer {cr / pr:.2f}")
EOF
  done
done
echo
echo "load average at end: $(cat /proc/loadavg)"
