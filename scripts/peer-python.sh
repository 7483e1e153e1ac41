#!/usr/bin/env bash
# Builds (idempotently) the Python environment of the retrieval test's reference pipeline
# (tests/retrieval_peer.py: rank_bm25 + PyStemmer, sentence-transformers on the same MiniLM
# directory, RRF k=60) and of the MCP tests' client (tests/mcp_client.py: the Python `mcp` SDK),
# and prints the path of its python on stdout. Logs go to stderr.
#
#   PEER_PY="$(scripts/peer-python.sh)"     venv: ${CAIRN_PEER_VENV:-/var/tmp/cairn-peer-venv}
#
# Torch: PyPI's Linux x86_64 torch wheels are CUDA builds whose libtorch_cpu.so itself links
# libcudart/libcupti, so `pip install --no-deps torch` does not even import without the
# gigabytes of nvidia-* wheels, and the CPU wheels live on a host we cannot reach. Debian's
# python3-torch (bookworm: 1.13.1+dfsg-4, CPU only, ~151 MB of .debs, ~650 MB installed) is
# used instead: the venv is made from Debian's /usr/bin/python3.11 with --system-site-packages,
# so it sees that torch and Debian's numpy 1.24.2 (pinned below so pip never replaces the numpy
# torch was built against). Everything else comes from PyPI, pinned, installed --no-deps, so
# pip can never pull a CUDA torch. Versions are chosen to fit torch 1.13 (transformers 4.41,
# sentence-transformers 3.0). Debian's torch calls BLAS through libblas.so.3, which is the slow
# reference BLAS unless an optimized one is installed: libopenblas0-openmp takes over that
# alternative system-wide (about 8x faster MiniLM encoding here). Needs root for apt on a fresh
# machine (CI runs as root). First run: ~70 s apt (~155 MB of .debs) + ~25 s pip (~73 MB from
# PyPI), venv ~390 MB; later runs check a stamp and print the path at once.
set -euo pipefail

# shellcheck source=scripts/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

venv="${CAIRN_PEER_VENV:-/var/tmp/cairn-peer-venv}"
base_python=/usr/bin/python3.11

# Pinned PyPI packages (the full closure; torch, numpy, sympy, typing-extensions, PyYAML come
# from Debian). Change together with the stamp below.
pins=(
  rank-bm25==0.2.2
  PyStemmer==3.1.0
  sentence-transformers==3.0.1
  transformers==4.41.2
  tokenizers==0.19.1
  safetensors==0.8.0
  huggingface_hub==0.36.2
  hf-xet==1.8.0
  fsspec==2026.9.0
  filelock==4.3.1
  packaging==26.4
  regex==2026.11.19
  tqdm==4.70.1
  scikit-learn==1.9.1
  scipy==1.15.3
  joblib==1.6.0
  threadpoolctl==3.8.0
  pillow==13.0.0
  narwhals==2.29.0
  cloudpickle==3.1.3
)
stamp_text="debian:python3-torch=1.13.1+dfsg-4,libopenblas0-openmp ${pins[*]}"
stamp="$venv/.cairn-peer-stamp"

# The MCP tests' client (tests/mcp_client.py): the official Python MCP SDK and its closure,
# pinned, --no-deps like the rest (cryptography, for PyJWT[crypto], is Debian's). Its own
# stamp, so adding it to an existing venv costs one pip run (~5 s), not a rebuild.
mcp_pins=(
  mcp==2.3.0
  mcp-types==2.3.0
  anyio==4.16.0
  httpx2==2.16.2
  httpcore2==2.16.2
  h11==0.16.0
  idna==3.20
  pydantic==2.14.4
  pydantic_core==2.50.5
  annotated-types==0.8.0
  typing-inspection==0.4.5
  typing_extensions==4.16.0
  jsonschema==4.26.0
  jsonschema-specifications==2025.9.1
  referencing==0.37.0
  rpds-py==2026.9.1
  PyJWT==2.15.1
  click==8.5.1
  opentelemetry-api==1.45.2
  python-multipart==0.0.34
  sse-starlette==3.7.1
  starlette==1.10.0
  truststore==0.10.5
  uvicorn==0.55.0
)
# The ingest benchmark's Python pipeline (embed/bench/ingest_peer.py): pypdf and python-docx
# (lxml is Debian's python3-lxml, installed here: a fresh machine does not have it;
# typing_extensions comes with the MCP pins). Its own stamp as well.
ingest_pins=(
  pypdf==7.1.1
  python-docx==1.2.0
)

# install_extra WHAT STAMP CHECK PIN...: pip-installs the pins into the venv (--no-deps, like the
# rest) unless STAMP already lists exactly them, runs the Python import check CHECK, then
# writes the stamp.
install_extra() {
  local what=$1 stamp_file=$2 check=$3
  shift 3
  if [ -f "$stamp_file" ] && [ "$(cat "$stamp_file")" = "$*" ]; then
    return 0
  fi
  log "peer-python: installing $what ($# pinned packages) ..."
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    "$@" >&2
  "$venv/bin/python" -c "$check" >&2
  echo "$*" > "$stamp_file"
}

install_extras() {
  install_extra "the MCP client" "$venv/.cairn-peer-mcp-stamp" \
    'import mcp, httpx2; from mcp.client.streamable_http import streamable_http_client' "${mcp_pins[@]}"
  ensure_apt python3-lxml
  install_extra "the ingest peer" "$venv/.cairn-peer-ingest-stamp" 'import pypdf, docx' "${ingest_pins[@]}"
}

if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$stamp_text" ]; then
  install_extras
  echo "$venv/bin/python"
  exit 0
fi

ensure_apt python3.11-venv python3-torch libopenblas0-openmp
[ -x "$base_python" ] || { log "peer-python: $base_python not found (Debian bookworm's python3.11)"; exit 1; }

log "peer-python: creating $venv ..."
rm -rf "$venv"
"$base_python" -m venv --system-site-packages "$venv"
torch_version="$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("torch"))')"
log "peer-python: Debian torch $torch_version; installing ${#pins[@]} pinned packages from PyPI ..."
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
  "${pins[@]}" >&2
# numpy must stay Debian's (torch's ABI); fail loudly if anything shadows it or torch.
"$venv/bin/python" - <<'PY' >&2
import numpy, torch
assert numpy.__file__.startswith("/usr/lib/python3/dist-packages/"), numpy.__file__
assert torch.__file__.startswith("/usr/lib/python3/dist-packages/"), torch.__file__
x = torch.randn(2, 2) @ torch.randn(2, 2)
import rank_bm25, Stemmer, sentence_transformers, transformers
if "openblas" not in open("/proc/self/maps").read():
    print("peer-python: warning: torch is not using OpenBLAS; encoding will be very slow")
print("peer-python: torch", torch.__version__, "numpy", numpy.__version__,
      "sentence-transformers", sentence_transformers.__version__,
      "transformers", transformers.__version__, "ok", tuple(x.shape))
PY
echo "$stamp_text" > "$stamp"
install_extras
log "peer-python: ready ($(du -sh "$venv" | cut -f1) in $venv)"
echo "$venv/bin/python"
