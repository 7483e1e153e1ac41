#!/usr/bin/env bash
# Memory of the release server (issue 14, goal 6: idle RSS with the model <= 300 MB): starts
# `cairn serve` on a fresh SQLite data directory for each embedding precision, waits for
# /readyz, and prints its resident memory (VmRSS) and peak (VmHWM) idle, then again after 50
# searches (each embeds its query). The 100k-chunk figure (goal: <= 1 GB on SQLite) is the
# search bench's (README, Benchmarks).
#
#   bash scripts/bench-memory.sh
set -euo pipefail

# shellcheck source=scripts/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$ROOT"
ensure_rust
ensure_apt curl
model=$(bash scripts/fetch-model.sh)
work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT

log "building cairn (release)"
cargo build --release --workspace --bin cairn >"$work/build.log" 2>&1 || { tail -20 "$work/build.log"; exit 1; }
cairn="${CARGO_TARGET_DIR:-$ROOT/target}/release/cairn"
port=$((20000 + RANDOM % 20000))

rss() { awk '/^VmRSS/ {r=$2} /^VmHWM/ {h=$2} END {printf "RSS %.1f MB (peak %.1f MB)", r/1024, h/1024}' "/proc/$1/status"; }

echo "memory benchmark: release cairn serve, SQLite, $(nproc) cores, $(date -u +%FT%TZ)"
echo "load average at start: $(cat /proc/loadavg)"
for precision in f32 auto; do
  data="$work/data-$precision"
  NO_COLOR=1 CAIRN_DATA_DIR="$data" CAIRN_EMBED_MODEL="$model" CAIRN_EMBED_PRECISION="$precision" \
    CAIRN_BIND="127.0.0.1:$port" "$cairn" serve >"$work/serve-$precision.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do
    curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
    sleep 0.1
  done
  curl -fs "http://127.0.0.1:$port/readyz" >/dev/null || { tail -20 "$work/serve-$precision.log"; exit 1; }
  sleep 2
  idle=$(rss "$pid")
  token=$(cat "$data/initial-token")
  for i in $(seq 1 50); do
    curl -fs -H "authorization: Bearer $token" -H 'content-type: application/json' \
      -d "{\"query\":\"{ search(query: \\\"how do I configure the network interface number $i\\\", mode: VECTOR) { results { chunkId } } }\"}" \
      "http://127.0.0.1:$port/graphql" >/dev/null
  done
  sleep 1
  used=$(sed 's/\x1b\[[0-9;]*m//g' "$work/serve-$precision.log" | grep -o 'precision=[a-z0-9]*' | head -1 | cut -d= -f2 || true)
  echo "  $precision (${used:-?}): idle $idle | after 50 searches $(rss "$pid") | goal idle <= 300 MB"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  pid=
done
echo "load average at end: $(cat /proc/loadavg)"
