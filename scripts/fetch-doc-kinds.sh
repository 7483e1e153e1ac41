#!/usr/bin/env bash
# Fetches the offline document-classification set and prints its directory: 52 real documents
# of four kinds, none written by us, taken from Debian's packages at test time (never
# committed). Idempotent: a second run only checks the stamp and prints the path.
#
#   changelog  13  usr/share/doc/<pkg>/changelog.Debian.gz of sqlite3 tmux grep wget bzip2 sed
#                  curl jq rsync xmlstarlet gzip less tar (decompressed)
#   license    14  usr/share/common-licenses/* of base-files (Apache-2.0 … MPL-2.0)
#   readme     12  README, README.gz, README.FHS, README.Debian files of those packages
#   manual     13  git-doc's HTML manual pages (12 commands) and xmlstarlet's HTML user guide
#
# The kind of each file comes from its role in the package (a Debian changelog is a
# changelog), so the labels do not depend on the packages' versions, which are not pinned:
# Debian's archive serves only the current ones, and a newer changelog is still a changelog.
# Files are renamed doc-NN.<ext> so no name gives a kind away; labels.tsv says
# `file<TAB>kind<TAB>half<TAB>source`, where half alternates tune/test within each kind in
# source order. Parameters (type descriptions, the zero-shot temperature) are chosen on the
# tune half only; the test half is reported.
#
# Usage:  CAIRN_TEST_DOC_KINDS="$(scripts/fetch-doc-kinds.sh)" cargo test ... --test doc_kinds
set -euo pipefail

# shellcheck source=scripts/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

data_dir="${CAIRN_TEST_DATA:-/var/tmp/cairn-test-data}"
mkdir -p "$data_dir"
data_dir="$(cd "$data_dir" && pwd)"
dest="$data_dir/doc-kinds"
stamp_version=1

if [ -f "$dest/.stamp" ] && [ "$(cat "$dest/.stamp")" = "$stamp_version" ]; then
  echo "$dest"
  exit 0
fi

command -v dpkg-deb >/dev/null || { echo "fetch-doc-kinds: dpkg-deb not found (needs a Debian system)" >&2; exit 1; }

pkgs=(base-files git-doc sqlite3 tmux grep wget bzip2 sed curl jq rsync xmlstarlet gzip less tar)
work="$(mktemp -d "$data_dir/.fetch-kinds.XXXXXX")"
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"

log "fetch-doc-kinds: downloading ${#pkgs[@]} packages (~12 MB) from Debian's archive ..."
if ! (cd "$work" && apt-get download -q "${pkgs[@]}" >/dev/null 2>"$work/apt.err"); then
  if [ "$(id -u)" = 0 ]; then
    log "fetch-doc-kinds: apt-get update ..."
    apt-get update -qq >&2 || true
  fi
  (cd "$work" && apt-get download -q "${pkgs[@]}" >/dev/null 2>"$work/apt.err") || {
    cat "$work/apt.err" >&2
    echo "fetch-doc-kinds: apt-get download failed" >&2
    exit 1
  }
fi
for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$work/x"; done
doc="$work/x/usr/share/doc"
lic="$work/x/usr/share/common-licenses"

out="$work/out"
mkdir -p "$out"
n=0
declare -A seen_kind=()
# add KIND SOURCE EXT: copies (decompressing .gz) to doc-NN.EXT and records the label.
add() {
  local kind="$1" src="$2" ext="$3" name half
  [ -s "$src" ] || { echo "fetch-doc-kinds: missing $src" >&2; exit 1; }
  n=$((n + 1))
  name=$(printf 'doc-%02d.%s' "$n" "$ext")
  case "$src" in
    *.gz) gzip -dc "$src" >"$out/$name" ;;
    *) cp "$src" "$out/$name" ;;
  esac
  seen_kind[$kind]=$(( ${seen_kind[$kind]:-0} + 1 ))
  if [ $(( ${seen_kind[$kind]} % 2 )) -eq 1 ]; then half=tune; else half=test; fi
  printf '%s\t%s\t%s\t%s\n' "$name" "$kind" "$half" "${src#"$work/x/"}" >>"$out/labels.tsv"
}

for p in sqlite3 tmux grep wget bzip2 sed curl jq rsync xmlstarlet gzip less tar; do
  add changelog "$doc/$p/changelog.Debian.gz" txt
done
for l in Apache-2.0 Artistic BSD CC0-1.0 GFDL-1.2 GFDL-1.3 GPL-1 GPL-2 GPL-3 LGPL-2 LGPL-2.1 LGPL-3 MPL-1.1 MPL-2.0; do
  add license "$lic/$l" txt
done
for r in tmux/README grep/README wget/README sed/README jq/README xmlstarlet/README gzip/README.gz \
         base-files/README base-files/README.FHS rsync/README.Debian less/README.Debian tar/README.Debian; do
  add readme "$doc/$r" txt
done
for g in git-mv git-prune git-shell git-bugreport git-instaweb git-request-pull git-count-objects \
         git-merge-file git-name-rev git-credential-cache git-stripspace git-whatchanged; do
  add manual "$doc/git-doc/$g.html" html
done
add manual "$doc/xmlstarlet/xmlstarlet-ug.html" html

rm -rf "$dest"
mv "$out" "$dest"
echo "$stamp_version" >"$dest/.stamp"
log "fetch-doc-kinds: $n documents in $dest"
echo "$dest"
