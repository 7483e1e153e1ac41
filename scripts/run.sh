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
mkdir -p "$CARGO_TARGET_DIR"
# The embedding model downloads while the builds run.
model_path=$CARGO_TARGET_DIR/run-model-path
if [ -z "${CAIRN_EMBED_MODEL:-}" ]; then
  bash scripts/fetch-model.sh > "$model_path" &
  model=$!
fi
# The server and the console build side by side, the server first: the console's build runs
# at idle priority, so it takes only the cores the server's build leaves idle (downloads,
# build scripts, the last serial crates), and the server starts as soon as it is built. The
# console appears when its own build ends (the server looks for it on every request and
# meanwhile answers a page that reloads itself). Idle priority needs two things on Linux:
# SCHED_IDLE for its processes (chrt --idle; nice 19 where chrt is missing) and, because the
# console's build is a session of its own (setsid, so that stopping the run stops all of it)
# and the kernel groups each session's processes for fair sharing (autogroup), the lowest
# weight for that group too (nice 19 in /proc/self/autogroup): without it the group took
# half the machine whatever its processes' policy. Measured on 2 cores with empty caches:
# README, "Benchmarks". The console's output goes to a log; its failure is reported here,
# and stops the run only if it comes before the server is ready.
console_log=${CARGO_TARGET_DIR}/console-build.log
log "building the server (release) and, beside it at idle priority, the console (log: $console_log) ..."
idle=(nice -n 19)
chrt --idle 0 true 2>/dev/null && idle=(chrt --idle 0)
setsid "${idle[@]}" bash -c '
  echo 19 2>/dev/null > /proc/self/autogroup || true
  if bash scripts/build-console.sh > "$1" 2>&1; then
    echo "[cairn] console built: reload the page" >&2
  else
    tail -n 40 "$1" >&2
    echo "[cairn] the console did not build (full log: $1)" >&2
    exit 1
  fi' console-build "$console_log" &
console=$!
trap 'kill -- -"$console" 2>/dev/null || true' EXIT
# PostgreSQL's driver only when the configured database is PostgreSQL (DATABASE_URL or
# --database-url among the arguments): the default SQLite server does not compile it.
features=(--no-default-features)
for arg in "${DATABASE_URL:-}" "$@"; do
  case "$arg" in postgres://* | postgresql://* | --database-url=postgres*) features=(--features postgres) ;; esac
done
cargo build --release -p cairn-server --bin cairn "${features[@]}"
if [ -n "${model:-}" ]; then
  wait "$model" || { log "the embedding model could not be fetched"; exit 1; }
  CAIRN_EMBED_MODEL=$(cat "$model_path")
fi
export CAIRN_EMBED_MODEL
server=$CARGO_TARGET_DIR/release/cairn
if ! kill -0 "$console" 2>/dev/null; then
  # The console is done: the server is all that is left.
  wait "$console" || exit 1
  trap - EXIT
  exec "$server" serve "$@"
fi
log "the console is still building: starting the server now, the console appears when it is built"
"$server" serve "$@" &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null || true' INT TERM
status=0
# `wait` returns early when a signal's trap runs; wait again until the server has stopped.
while kill -0 "$pid" 2>/dev/null; do
  wait "$pid" && status=0 || status=$?
done
exit "$status"
