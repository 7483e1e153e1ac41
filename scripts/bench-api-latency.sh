#!/usr/bin/env bash
# Round trips of cheap API calls, one keep-alive client as an agent or a script makes them:
# GraphQL `{__typename}` (HTTP and the schema's own cost), MCP `tools/list` and the
# `knowledge_summary` tool (the Streamable HTTP transport, a session, a store read). Prints
# p50/p95 per call and the load average at start and end. It found the 44 ms per MCP call
# that Nagle's algorithm and the client's delayed ACK added (issue 14, goal 4; fixed by
# TCP_NODELAY on accepted connections, app.rs). Embedding and search are the search bench's.
#
#   bash scripts/bench-api-latency.sh [ROUNDS]      # default 2 rounds, each a fresh server
set -euo pipefail

# shellcheck source=scripts/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$ROOT"
ensure_rust
ensure_apt python3
model=$(bash scripts/fetch-model.sh)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
log "building cairn (release, SQLite only, as scripts/run.sh builds it)"
cargo build --release -p cairn-server --bin cairn --no-default-features >"$work/build.log" 2>&1 ||
  { tail -20 "$work/build.log"; exit 1; }
cairn="${CARGO_TARGET_DIR:-$ROOT/target}/release/cairn"
echo "API latency benchmark: release cairn serve, SQLite, $(nproc) cores, $(date -u +%FT%TZ)"
echo "load average at start: $(cat /proc/loadavg)"
for round in $(seq 1 "${1:-2}"); do
  echo "round $round"
  CAIRN_EMBED_MODEL="$model" python3 scripts/bench-api-latency.py "$cairn" $((20000 + RANDOM % 20000))
done
echo "load average at end: $(cat /proc/loadavg)"
