#!/usr/bin/env bash
# Puts GraphiQL's browser files (pinned versions, from the npm registry) into DIR/graphiql/,
# where the server serves them at /graphiql/*: `GET /graphql` loads no third-party script
# and works offline. npm checks each tarball against the registry's integrity hash.
#
#   scripts/fetch-graphiql.sh DIR      # DIR: the console's dist folder
set -euo pipefail
DIR=${1:?usage: fetch-graphiql.sh DIR}
GRAPHIQL=3.8.3
REACT=18.3.1
OUT="$DIR/graphiql"
STAMP="$OUT/.versions"
want="graphiql@$GRAPHIQL react@$REACT react-dom@$REACT"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] \
   && [ -f "$OUT/graphiql.min.js" ] && [ -f "$OUT/react-dom.production.min.js" ]; then
  exit 0
fi
CACHE=${CAIRN_NPM_CACHE:-/var/tmp/cairn-npm}
mkdir -p "$CACHE" "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
( cd "$CACHE" && for p in $want; do
    f="$(echo "$p" | tr '@' '-').tgz"
    [ -f "$f" ] || npm pack --silent "$p" >/dev/null
  done )
tar -xzf "$CACHE/graphiql-$GRAPHIQL.tgz" -C "$work" package/graphiql.min.js package/graphiql.min.css
cp "$work/package/graphiql.min.js" "$work/package/graphiql.min.css" "$OUT/"
rm -rf "$work/package"
tar -xzf "$CACHE/react-$REACT.tgz" -C "$work" package/umd/react.production.min.js
cp "$work/package/umd/react.production.min.js" "$OUT/"
rm -rf "$work/package"
tar -xzf "$CACHE/react-dom-$REACT.tgz" -C "$work" package/umd/react-dom.production.min.js
cp "$work/package/umd/react-dom.production.min.js" "$OUT/"
for f in "$OUT"/*.js "$OUT"/*.css; do gzip -9 -k -f "$f"; done
echo "$want" > "$STAMP"
echo "[fetch-graphiql] $want -> $OUT" >&2
