# Shared by scripts/run.sh and scripts/test.sh: system packages and the Rust build cache.
# shellcheck shell=bash

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/tmp/cairn-target}
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

log() { echo "[cairn] $*" >&2; }

# apt packages the build and the tests need; installs only what is missing. A tool that is
# already on the PATH from elsewhere (python3 from pyenv, node and npm from nodesource) counts.
ensure_apt() {
  local missing=()
  for p in "$@"; do
    case "$p" in
      python3|nodejs|npm|chromium) command -v "${p/nodejs/node}" >/dev/null 2>&1 && continue ;;
      python3-pip) python3 -m pip --version >/dev/null 2>&1 && continue ;;
      chromium-driver) command -v chromedriver >/dev/null 2>&1 && continue ;;
    esac
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return
  [ "$(id -u)" = 0 ] || { log "please install: ${missing[*]} (needs root)"; exit 1; }
  log "apt-get install ${missing[*]} ..."
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

ensure_rust() {
  command -v cargo >/dev/null || { [ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"; }
  command -v cargo >/dev/null || { log "cargo not found: install Rust (https://rustup.rs)"; exit 1; }
}
