#!/usr/bin/env bash
# The first run (issue 14, goal 7: scripts/run.sh on a fresh machine to a listening server in
# at most 12 minutes), measured: runs scripts/run.sh with everything it builds or downloads
# pointed at empty directories (CARGO_HOME for the crate registry and its downloads, the
# server's and the console's target directories, the wasm toolchain's PREFIX, the model
# cache, the data directory) and times it until /readyz answers. What a fresh machine has
# and this one cannot forget is not counted: apt packages already installed, the Rust
# toolchain (rustup's), the npm cache (GraphiQL's files, the binaryen package).
#
#   bash scripts/bench-first-run.sh            # ~7-13 min on 2 cores (694, 729, 797, 578, 440 s on 2026-12-07)
#
# Prints each stage's end (from run.sh's and build-console.sh's log lines), the total to a
# listening server (the goal), then the time until the console is served ("/" answers 200:
# run.sh starts the server while the console may still be building), and the load average at
# start, when listening, and at the end. The console's dist (frontend/dist) is removed first
# and rebuilt in place.
set -euo pipefail

# shellcheck source=scripts/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$ROOT"
ensure_rust
ensure_apt curl
fresh=${CAIRN_FIRST_RUN_DIR:-/var/tmp/cairn-first-run}
rm -rf "$fresh"
mkdir -p "$fresh"
# A fresh machine has no console yet: without this, an earlier build's frontend/dist answered
# "/" with 200 from the first second and the console's time measured nothing.
rm -rf frontend/dist
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; true' EXIT
port=$((20000 + RANDOM % 20000))

echo "first-run benchmark: scripts/run.sh with empty caches under $fresh, $(nproc) cores, $(date -u +%FT%TZ)"
echo "load average at start: $(cat /proc/loadavg)"
start=$(date +%s)
# CARGO_HOME empty: the registry index and every crate are downloaded again. rustup's
# toolchain stays where RUSTUP_HOME says (its proxies are on the PATH).
export RUSTUP_HOME=${RUSTUP_HOME:-$HOME/.rustup}
PATH="$HOME/.cargo/bin:$PATH" \
CARGO_HOME="$fresh/cargo-home" \
CARGO_TARGET_DIR="$fresh/target" \
CAIRN_CONSOLE_TARGET_DIR="$fresh/console-target" \
PREFIX="$fresh/wasm-toolchain" \
CAIRN_MODEL_CACHE="$fresh/models" \
CAIRN_EMBED_MODEL= \
CAIRN_DATA_DIR="$fresh/data" \
  bash scripts/run.sh --bind "127.0.0.1:$port" >"$fresh/run.log" 2>&1 &
pid=$!
stamp() { echo "  $(( $(date +%s) - start )) s  $*"; }
seen=""
while kill -0 "$pid" 2>/dev/null; do
  if curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; then
    stamp "listening: /readyz answers"
    break
  fi
  for mark in "run.log:building the server" "run.log:Finished" "run.log:still building" \
              "target/console-build.log:wasm toolchain ready" "target/console-build.log:console built"; do
    case "$seen" in *"|$mark|"*) continue ;; esac
    if grep -q "${mark#*:}" "$fresh/${mark%%:*}" 2>/dev/null; then
      seen="$seen|$mark|"
      stamp "${mark#*:} (${mark%%:*})"
    fi
  done
  sleep 1
done
curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 || { tail -30 "$fresh/run.log"; exit 1; }
total=$(( $(date +%s) - start ))
echo "total: $total s ($(( total / 60 )) min $(( total % 60 )) s; goal <= 12 min: $([ "$total" -le 720 ] && echo met || echo NOT met))"
echo "load average when listening: $(cat /proc/loadavg)"
# The server starts before the console when the console is still building (scripts/run.sh):
# the console is there once "/" answers 200 instead of the "being built" page.
while kill -0 "$pid" 2>/dev/null; do
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/" || true)
  if [ "$code" = 200 ]; then
    console=$(( $(date +%s) - start ))
    echo "console served: $console s ($(( console / 60 )) min $(( console % 60 )) s)"
    break
  fi
  if grep -q "the console did not build" "$fresh/run.log" 2>/dev/null; then
    tail -30 "$fresh/run.log"; exit 1
  fi
  sleep 1
done
echo "load average at end: $(cat /proc/loadavg)"
