#!/usr/bin/env bash
# Fetches a real multi-page PDF that Cairn did not make, for end-to-end and extraction
# tests, and prints its path. Idempotent: a second run only prints the path.
#
# Source: the Debian package `xmlstarlet` (main, bookworm 1.6.1-3) ships its user guide as
# /usr/share/doc/xmlstarlet/xmlstarlet-ug.pdf.gz: a 32-page, ~95 KB PDF 1.4 written by
# Apache FOP 2.7 from DocBook, with embedded fonts. The .deb is ~210 KB. We never commit
# the PDF; it lands in /var/tmp/cairn-test-data/ (override with CAIRN_TEST_DATA).
#
# Usage:  CAIRN_TEST_REAL_PDF="$(scripts/fetch-test-pdf.sh)" cargo test -p cairn-extract
set -euo pipefail

dest_dir="${CAIRN_TEST_DATA:-/var/tmp/cairn-test-data}"
dest="$dest_dir/xmlstarlet-ug.pdf"
pkg=xmlstarlet
member=usr/share/doc/xmlstarlet/xmlstarlet-ug.pdf.gz

is_pdf() { [ -s "$1" ] && [ "$(head -c 5 "$1")" = "%PDF-" ]; }

if is_pdf "$dest"; then
  echo "$dest"
  exit 0
fi

mkdir -p "$dest_dir"
work="$(mktemp -d "$dest_dir/.fetch.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# apt's download sandbox user must be able to write here.
chmod 0777 "$work"

download() { (cd "$work" && apt-get download -q "$pkg" >/dev/null 2>&1); }
if ! download; then
  # A fresh machine may have no package lists yet.
  apt-get update -q >/dev/null 2>&1 || true
  download || { echo "fetch-test-pdf: apt-get download $pkg failed" >&2; exit 1; }
fi

deb="$(ls "$work"/${pkg}_*.deb 2>/dev/null | head -n 1)"
[ -n "$deb" ] || { echo "fetch-test-pdf: no .deb for $pkg was downloaded" >&2; exit 1; }
dpkg-deb -x "$deb" "$work/root"
[ -f "$work/root/$member" ] || { echo "fetch-test-pdf: $member not in $(basename "$deb")" >&2; exit 1; }
gzip -dc "$work/root/$member" >"$work/out.pdf"
is_pdf "$work/out.pdf" || { echo "fetch-test-pdf: $member is not a PDF" >&2; exit 1; }
mv -f "$work/out.pdf" "$dest"
echo "$dest"
