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
bash scripts/build-console.sh
log "building the server (release) ..."
cargo build --release -p cairn-server --bin cairn
exec "$CARGO_TARGET_DIR/release/cairn" serve "$@"
