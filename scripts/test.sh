#!/usr/bin/env bash
# Runs every test: formatting and lints, unit tests, and the end-to-end suite on SQLite AND on
# PostgreSQL (+pgvector, started on 127.0.0.1 for the run), plus the console in headless
# Chromium. Installs what it needs, idempotently.
set -euo pipefail
. "$(dirname "$0")/common.sh"
cd "$ROOT"

ensure_rust
# OCR (Tesseract, pdftoppm) as the server uses it, img2pdf, which makes the test scans, and
# pandoc, which turns a real HTML chapter into the DOCX of the table-extraction test.
ensure_apt ca-certificates gcc pkg-config python3 python3-pip nodejs npm chromium chromium-driver \
  tesseract-ocr tesseract-ocr-eng poppler-utils img2pdf pandoc

log "PostgreSQL + pgvector ..."
CAIRN_TEST_PG_URL=$(bash scripts/pgvector.sh start)
export CAIRN_TEST_PG_URL
# Databases left by interrupted earlier runs.
PGDATA_RUN=${PGV_ROOT:-/var/tmp/pgvector}/run
for db in $(runuser -u postgres -- psql -X -qAt -h "$PGDATA_RUN" -p "${PGV_PORT:-25432}" -U postgres -d postgres \
      -c "SELECT datname FROM pg_database WHERE datname LIKE 'cairn_t_%'" 2>/dev/null || true); do
  runuser -u postgres -- psql -X -q -h "$PGDATA_RUN" -p "${PGV_PORT:-25432}" -U postgres -d postgres \
    -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
done

log "embedding model ..."
CAIRN_EMBED_MODEL=${CAIRN_EMBED_MODEL:-$(bash scripts/fetch-model.sh)}
export CAIRN_EMBED_MODEL

log "a real multi-page PDF (Debian's xmlstarlet user guide) ..."
CAIRN_TEST_REAL_PDF=$(bash scripts/fetch-test-pdf.sh)
export CAIRN_TEST_REAL_PDF

log "evaluation texts (gensim's lee_background.cor, from the PyPI wheel) ..."
CAIRN_TEST_LEE_CORPUS=$(bash scripts/fetch-eval-texts.sh)
export CAIRN_TEST_LEE_CORPUS

log "second evaluation corpus (The Debian Administrator's Handbook, from Debian's debian-handbook package) ..."
CAIRN_TEST_HANDBOOK=$(bash scripts/fetch-eval-docs.sh)
export CAIRN_TEST_HANDBOOK

log "document-classification set (changelogs, licences, READMEs, manuals from Debian's packages) ..."
CAIRN_TEST_DOC_KINDS=$(bash scripts/fetch-doc-kinds.sh)
export CAIRN_TEST_DOC_KINDS

log "real tables (readxl's datasets.xls; a Debian Reference chapter as DOCX by pandoc) ..."
CAIRN_TEST_REAL_TABLES=$(bash scripts/fetch-real-tables.sh)
export CAIRN_TEST_REAL_TABLES

log "reference retrieval pipeline (rank_bm25, sentence-transformers on Debian's CPU torch) ..."
CAIRN_PEER_PYTHON=$(bash scripts/peer-python.sh)
export CAIRN_PEER_PYTHON

log "small instruct model for the local knowledge extractor (SmolLM2-135M, from PyPI) ..."
CAIRN_KG_LOCAL_MODEL=$(bash kg/fetch-local-model.sh)
export CAIRN_KG_LOCAL_MODEL

log "console (wasm) ..."
bash scripts/build-console.sh

log "console: cargo fmt --check, clippy (wasm32), unit tests (native)"
(
  cd frontend
  cargo fmt --check
  CARGO_TARGET_DIR=${CAIRN_CONSOLE_TARGET_DIR:-/var/tmp/cairn-frontend-target} \
    "${PREFIX:-/opt/wasm-toolchain}/bin/wasm-env" cargo clippy --target wasm32-unknown-unknown -- -D warnings
  CARGO_TARGET_DIR=${CAIRN_CONSOLE_NATIVE_TARGET_DIR:-/var/tmp/cairn-frontend-native} cargo test
)

log "cargo fmt --check"
cargo fmt --all --check
log "cargo clippy --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings
# The server as scripts/run.sh builds it for SQLite (without the `postgres` feature).
cargo clippy -p cairn-server --no-default-features --all-targets -- -D warnings

log "cargo test (unit + end-to-end, SQLite and PostgreSQL, console in Chromium)"
export CAIRN_REPORT_DIR=${CAIRN_REPORT_DIR:-$CARGO_TARGET_DIR/cairn-reports}
rm -rf "$CAIRN_REPORT_DIR/console"
cargo test --workspace --no-fail-fast -- --test-threads="${CAIRN_TEST_THREADS:-4}"

for r in "$CAIRN_REPORT_DIR"/retrieval-*.txt "$CAIRN_REPORT_DIR"/doc-kinds.txt; do
  [ -f "$r" ] && { log "report: $r"; cat "$r" >&2; }
done
if ls "$CAIRN_REPORT_DIR"/console/*.png >/dev/null 2>&1; then
  log "console screenshots (artifacts): $CAIRN_REPORT_DIR/console/"
  ls -1 "$CAIRN_REPORT_DIR"/console/*.png >&2
fi
