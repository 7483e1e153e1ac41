#!/usr/bin/env bash
# Makes a scan of a real PDF for the OCR tests: pages FIRST..LAST rasterized the way a
# scanner writes them (300 dpi, grey, JPEG quality 85) and wrapped, one image per page, into a
# PDF that has no text layer at all. Needs poppler-utils (pdftoppm) and img2pdf, which the
# README's test command installs.
#
# Usage: scripts/make-scan.sh IN.pdf FIRST LAST OUT.pdf
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: $0 IN.pdf FIRST LAST OUT.pdf" >&2; exit 2; }
in=$1 first=$2 last=$3 out=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pdftoppm -r 300 -gray -jpeg -jpegopt quality=85 -f "$first" -l "$last" "$in" "$work/page"
# pdftoppm pads page numbers to the same width, so the names sort in page order.
img2pdf "$work"/page-*.jpg -o "$out"
