#!/usr/bin/env bash
# Builds the web console (frontend/, a Leptos CSR app) into frontend/dist, which the cairn
# server serves at "/". Idempotent and safe to re-run: the wasm toolchain is cached under
# $PREFIX (first run ~10 min on 2 cores, mostly `cargo install trunk`), crates are fetched
# once, and Trunk then builds offline (rebuilds take seconds).
#
#   scripts/build-console.sh            # release build into frontend/dist
#
# Environment: PREFIX (toolchain, default /opt/wasm-toolchain), CAIRN_CONSOLE_TARGET_DIR
# (cargo target dir for the wasm build, default /var/tmp/cairn-frontend-target, outside the
# clone), WASM_ROUTE (rustup | debian: force how the wasm32 std is provided).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PREFIX=${PREFIX:-/opt/wasm-toolchain}
TARGET_DIR=${CAIRN_CONSOLE_TARGET_DIR:-/var/tmp/cairn-frontend-target}
say() { echo "[build-console] $*" >&2; }
started=$(date +%s)
cd "$ROOT"

# The toolchain script reads the wasm-bindgen version from the lock file.
if [ ! -f frontend/Cargo.lock ]; then
  say "frontend/Cargo.lock is missing: generating it"
  (cd frontend && cargo generate-lockfile)
fi

route=$(scripts/wasm-toolchain.sh frontend)
say "wasm toolchain ready under $PREFIX (route: $route) after $(( $(date +%s) - started ))s"

# Trunk builds offline (TRUNK_OFFLINE in wasm-env): fetch everything the wasm build needs.
(cd frontend && "$PREFIX/bin/wasm-env" cargo fetch --target wasm32-unknown-unknown)

# From the repository root, so Trunk.toml (target frontend/index.html, dist frontend/dist)
# applies.
CARGO_TARGET_DIR=$TARGET_DIR "$PREFIX/bin/wasm-env" trunk build --release

[ -f frontend/dist/index.html ] || { say "trunk finished but frontend/dist/index.html is missing"; exit 1; }
# Precompressed twins, served to browsers that accept gzip (the server's ServeDir looks for them).
for f in frontend/dist/*.wasm frontend/dist/*.js frontend/dist/*.css; do
  [ -f "$f" ] && gzip -9 -k -f "$f"
done
# GraphiQL's files, served by Cairn itself (no CDN): see scripts/fetch-graphiql.sh.
bash scripts/fetch-graphiql.sh frontend/dist
say "console built in $(( $(date +%s) - started ))s: $ROOT/frontend/dist"
ls -l frontend/dist >&2
