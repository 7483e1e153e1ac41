#!/usr/bin/env bash
# Runs Cairn: builds the console and the server, caches the embedding model, and starts on
# http://127.0.0.1:8080 with SQLite under ./data. Idempotent; safe to run again.
# Extra arguments go to `cairn serve` (e.g. --bind 127.0.0.1:9000).
set -euo pipefail
. "$(dirname "$0")/common.sh"
cd "$ROOT"

ensure_rust
# OCR for scanned PDFs and images: Tesseract (English) and poppler's pdftoppm.
ensure_apt ca-certificates gcc pkg-config python3 python3-pip nodejs npm tesseract-ocr tesseract-ocr-eng poppler-utils
CAIRN_EMBED_MODEL=${CAIRN_EMBED_MODEL:-$(bash scripts/fetch-model.sh)}
export CAIRN_EMBED_MODEL
# The console (its toolchain, then the wasm) and the server build side by side: each build
# leaves cores idle in its serial stretches (build scripts, the last crates, linking), which
# the other fills. The console's output goes to a log; its failure stops the run.
console_log=${CARGO_TARGET_DIR}/console-build.log
mkdir -p "$CARGO_TARGET_DIR"
log "building the console (log: $console_log) and the server (release) ..."
bash scripts/build-console.sh > "$console_log" 2>&1 &
console=$!
trap 'kill "$console" 2>/dev/null || true' EXIT
cargo build --release -p cairn-server --bin cairn
if ! wait "$console"; then
  tail -n 40 "$console_log" >&2
  log "the console did not build (full log: $console_log)"
  exit 1
fi
trap - EXIT
exec "$CARGO_TARGET_DIR/release/cairn" serve "$@"
