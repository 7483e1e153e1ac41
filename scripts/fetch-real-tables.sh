#!/usr/bin/env bash
# Fetches the real tables of the schemaless-extraction test and prints their directory:
#
#   datasets.xls   readxl's example workbook (R's classic datasets iris, mtcars, chickwts and
#                  quakes, one sheet each), from Debian's r-cran-readxl package
#                  (usr/lib/R/site-library/readxl/extdata/datasets.xls). Its .xlsx twin is
#                  not used: calamine 0.31 refuses the whole workbook over numbers written
#                  with a leading space (`<v> 41</v>` in the quakes sheet), a known gap.
#   reference.docx chapter 8 (I18N and L10N) of the Debian Reference, from Debian's
#                  debian-reference-en package (docs/ch08.en.html, whose tables list packages
#                  with their popcon and size), turned into DOCX by Debian's pandoc at test time.
#
# Neither file is committed; both come from their packages each time the stamp is missing.
# The tables' facts the test asserts (150 iris rows, 32 mtcars rows, integer sizes) are the
# datasets' own, not ours. Needs dpkg-deb and pandoc (the test command installs pandoc).
#
# Usage:  CAIRN_TEST_REAL_TABLES="$(scripts/fetch-real-tables.sh)" cargo test ... --test tables_real
set -euo pipefail

# shellcheck source=scripts/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

data_dir="${CAIRN_TEST_DATA:-/var/tmp/cairn-test-data}"
mkdir -p "$data_dir"
data_dir="$(cd "$data_dir" && pwd)"
dest="$data_dir/real-tables"
stamp_version=2

if [ -f "$dest/.stamp" ] && [ "$(cat "$dest/.stamp")" = "$stamp_version" ]; then
  echo "$dest"
  exit 0
fi
command -v dpkg-deb >/dev/null || { echo "fetch-real-tables: dpkg-deb not found" >&2; exit 1; }
command -v pandoc >/dev/null || { echo "fetch-real-tables: pandoc not found (apt-get install pandoc)" >&2; exit 1; }

work="$(mktemp -d "$data_dir/.fetch-tables.XXXXXX")"
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
pkgs=(r-cran-readxl debian-reference-en)
log "fetch-real-tables: downloading ${pkgs[*]} from Debian's archive ..."
if ! (cd "$work" && apt-get download -q "${pkgs[@]}" >/dev/null 2>"$work/apt.err"); then
  [ "$(id -u)" = 0 ] && apt-get update -qq >&2 || true
  (cd "$work" && apt-get download -q "${pkgs[@]}" >/dev/null 2>"$work/apt.err") || {
    cat "$work/apt.err" >&2
    exit 1
  }
fi
for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$work/x"; done
mkdir -p "$work/out"
cp "$work/x/usr/lib/R/site-library/readxl/extdata/datasets.xls" "$work/out/datasets.xls"
pandoc --from html --to docx -o "$work/out/reference.docx" \
  "$work/x/usr/share/doc/debian-reference-en/docs/ch08.en.html"
rm -rf "$dest"
mv "$work/out" "$dest"
echo "$stamp_version" >"$dest/.stamp"
echo "$dest"
