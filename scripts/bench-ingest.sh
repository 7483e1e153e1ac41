#!/usr/bin/env bash
# Ingest throughput, Cairn against a plain Python pipeline in the same run, on one folder of
# real documents nobody at Cairn wrote (built from Debian packages by the fetch scripts):
#   - HTML: The Debian Administrator's Handbook's pages (scripts/fetch-eval-docs.sh), but the
#     first 12, which pandoc turns into
#   - DOCX: those 12 pages, plus a Debian Reference chapter (scripts/fetch-real-tables.sh);
#   - PDF: xmlstarlet's 32-page user guide (scripts/fetch-test-pdf.sh).
# Runs, alternately, each round:
#   - `cairn ingest FOLDER` into a fresh data directory (the release binary, whole command:
#     start, model load, extraction in child processes, chunking, embedding, storing), with
#     CAIRN_EMBED_PRECISION=f32 and =auto (bf16 where the CPU has AVX-512 BF16);
#   - embed/bench/ingest_peer.py: pypdf, python-docx, lxml, sentence-transformers (f32, as many
#     threads as cores), SQLite;
#   - the embedding alone of the chunks Cairn stored (the throughput bench on their text, the
#     median of ALONE_REPS=3 passes: one pass varied by up to 11% between rounds on a shared
#     2-core machine), the bound a pipelined ingest approaches.
# Prints chunks, seconds and chunks/s of each, the ratios Cairn/Python and ingest/embedding
# alone, and the load average at start and end.
#
#   bash scripts/bench-ingest.sh            ROUNDS=3 for more rounds
set -euo pipefail

# shellcheck source=scripts/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$ROOT"
ensure_rust
ensure_apt pandoc sqlite3

rounds=${ROUNDS:-2}
model=$(bash scripts/fetch-model.sh)
py=$(bash scripts/peer-python.sh)
handbook=$(bash scripts/fetch-eval-docs.sh)
tables=$(bash scripts/fetch-real-tables.sh)
pdf=$(bash scripts/fetch-test-pdf.sh)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
threads=$(nproc)

log "building cairn and the throughput bench (release)"
cargo build --release --workspace --bin cairn >"$work/build.log" 2>&1 || { tail -20 "$work/build.log"; exit 1; }
cargo bench --workspace --bench throughput --no-run >>"$work/build.log" 2>&1 || { tail -20 "$work/build.log"; exit 1; }
cairn="${CARGO_TARGET_DIR:-$ROOT/target}/release/cairn"

docs="$work/docs"
mkdir -p "$docs"
mapfile -t pages < <(ls "$handbook"/*.html | sort)
for i in "${!pages[@]}"; do
  name=$(basename "${pages[$i]}" .html)
  if [ "$i" -lt 12 ]; then
    pandoc --from html --to docx -o "$docs/$name.docx" "${pages[$i]}" 2>/dev/null
  else
    cp "${pages[$i]}" "$docs/"
  fi
done
cp "$tables/reference.docx" "$docs/debian-reference-ch08.docx"
cp "$pdf" "$docs/"
echo "ingest benchmark: cairn ingest vs a Python pipeline, $threads cores, $(date -u +%FT%TZ)"
echo "folder: $(ls "$docs" | wc -l) files ($(ls "$docs"/*.html | wc -l) HTML, $(ls "$docs"/*.docx | wc -l) DOCX, $(ls "$docs"/*.pdf | wc -l) PDF), $(du -sh "$docs" | cut -f1)"
echo "load average at start: $(cat /proc/loadavg)"

secs() { python3 -c 'import sys,time; print(f"{time.time()-float(sys.argv[1]):.2f}")' "$1"; }

cairn_run() { # precision → "chunks seconds"
  local data="$work/data-$1" t0
  rm -rf "$data"
  t0=$(date +%s.%N)
  NO_COLOR=1 CAIRN_DATA_DIR="$data" CAIRN_EMBED_MODEL="$model" CAIRN_EMBED_PRECISION="$1" \
    "$cairn" ingest --corpus bench "$docs" >"$work/cairn-$1.log" 2>&1 || { tail -20 "$work/cairn-$1.log" >&2; exit 1; }
  local s
  s=$(secs "$t0")
  echo "$(sqlite3 -separator ' ' "$data/cairn.db" 'SELECT count(*), sum(length(content)) FROM chunks') $s"
}

embed_alone() { # precision → "chunks seconds" for the chunks the f32 run stored
  sqlite3 "$work/data-f32/cairn.db" "SELECT replace(replace(content, char(10), ' '), char(13), ' ') FROM chunks" >"$work/chunks.txt"
  local out
  out=$(CAIRN_EMBED_MODEL="$model" cargo bench -q --workspace --bench throughput -- \
    --texts "$work/chunks.txt" --reps "${ALONE_REPS:-3}" --precision "$1" 2>/dev/null)
  python3 - "$out" <<'PY'
import re, sys
out = sys.argv[1]
n = int(re.search(r"; (\d+) sentences", out).group(1))
rate = float(re.search(r"cairn-embed: median ([\d.]+)", out).group(1))
print(n, f"{n / rate:.2f}")
PY
}

for r in $(seq 1 "$rounds"); do
  read -r cf xf sf < <(cairn_run f32)
  read -r cb xb sb < <(cairn_run auto)
  prec=$(sed 's/\x1b\[[0-9;]*m//g' "$work/cairn-auto.log" | grep -o 'precision=[a-z0-9]*' | head -1 | cut -d= -f2 || true)
  read -r pc ps px < <("$py" embed/bench/ingest_peer.py "$model" "$docs" "$work/peer.sqlite" --threads "$threads" 2>/dev/null | awk '{print $4, $6, $8}')
  read -r ef es < <(embed_alone f32)
  read -r eb eb_s < <(embed_alone auto)
  python3 - "$r" "$cf" "$xf" "$sf" "$cb" "$xb" "$sb" "${prec:-auto}" "$pc" "$px" "$ps" "$ef" "$es" "$eb" "$eb_s" <<'PY'
import sys
r, cf, xf, sf, cb, xb, sb, prec, pc, px, ps, ef, es, eb, ebs = sys.argv[1:]
cf, xf, sf, cb, xb, sb, pc, px, ps, ef, es, eb, ebs = map(float, (cf, xf, sf, cb, xb, sb, pc, px, ps, ef, es, eb, ebs))
print(f"round {r} (folder time ratio: python seconds / cairn seconds; chars/s: embedded characters per second):")
for name, c, x, s, e, t in (("f32", cf, xf, sf, ef, es), (prec, cb, xb, sb, eb, ebs)):
    print(f"  cairn ingest {name:<5} {c:5.0f} chunks {x / 1e6:5.2f} M chars {s:6.1f} s | folder {ps / s:.2f}x python | chars/s {(x / s) / (px / ps):.2f}x python | chunks/s {(c / s) / (e / t):.2f}x its embedding alone")
print(f"  python pipeline    {pc:5.0f} chunks {px / 1e6:5.2f} M chars {ps:6.1f} s")
print(f"  embedding alone    f32 {ef / es:5.1f} chunks/s, {prec} {eb / ebs:5.1f} chunks/s (the f32 run's chunks)")
PY
done
echo "load average at end: $(cat /proc/loadavg)"
