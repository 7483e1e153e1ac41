#!/usr/bin/env bash
# Builds the web console (frontend/, a Leptos CSR app) into frontend/dist, which the cairn
# server serves at "/". Idempotent and safe to re-run: the wasm toolchain is cached under
# $PREFIX (first run ~3 min on 2 cores, mostly `cargo install wasm-bindgen-cli`), crates are
# fetched once, and the build then runs offline (rebuilds take seconds).
#
#   scripts/build-console.sh            # release build into frontend/dist
#
# The steps Trunk used to run, without Trunk (whose `cargo install` took 6-11 of a first
# run's minutes): cargo builds the wasm, wasm-bindgen writes its JS glue, wasm-opt -Oz
# shrinks it, and frontend/index.html gets the module script, the stylesheet and preload
# links, every asset named by a hash of its content and checked by Subresource Integrity.
#
# Environment: PREFIX (toolchain, default /opt/wasm-toolchain), CAIRN_CONSOLE_TARGET_DIR
# (cargo target dir for the wasm build, default /var/tmp/cairn-frontend-target, outside the
# clone), WASM_ROUTE (rustup | debian: force how the wasm32 std is provided).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PREFIX=${PREFIX:-/opt/wasm-toolchain}
TARGET_DIR=${CAIRN_CONSOLE_TARGET_DIR:-/var/tmp/cairn-frontend-target}
APP=cairn-console
say() { echo "[build-console] $*" >&2; }
started=$(date +%s)
cd "$ROOT"
# While this runs, frontend/dist.building says so: a server that is already up (scripts/run.sh
# starts it before the console is ready) answers "being built" and its page reloads itself.
marker=frontend/dist.building
stage=
echo "pid $$ since $(date -u +%FT%TZ)" > "$marker"
trap 'rm -f "$marker"; [ -z "$stage" ] || rm -rf "$stage"' EXIT

# The toolchain script reads the wasm-bindgen version from the lock file.
if [ ! -f frontend/Cargo.lock ]; then
  say "frontend/Cargo.lock is missing: generating it"
  (cd frontend && cargo generate-lockfile)
fi

route=$(scripts/wasm-toolchain.sh frontend)
say "wasm toolchain ready under $PREFIX (route: $route) after $(( $(date +%s) - started ))s"
env=("$PREFIX/bin/wasm-env")

# Fetch once, then build offline. Twice: for wasm32 (on the debian route that also brings
# build-std's own dependencies), and for every platform, because the build scripts and proc
# macros run on the host and some of their dependencies are host-only (cpufeatures, on
# x86_64): a fetch for wasm32 alone skips them, and the offline build then failed on a fresh
# machine whose cargo cache had never seen them.
(cd frontend && "${env[@]}" cargo fetch --target wasm32-unknown-unknown)
(cd frontend && "${env[@]}" cargo fetch)
(cd frontend && CARGO_TARGET_DIR=$TARGET_DIR "${env[@]}" cargo build --release --offline \
  --target wasm32-unknown-unknown --bin "$APP")
wasm=$TARGET_DIR/wasm32-unknown-unknown/release/$APP.wasm
[ -f "$wasm" ] || { say "cargo finished but $wasm is missing"; exit 1; }

# wasm-bindgen's glue and the optimized module, in a staging directory first: a failed
# build leaves the previous frontend/dist in place.
stage=$(mktemp -d "${TMPDIR:-/tmp}/cairn-console.XXXXXX")
hash=$(sha256sum "$wasm" | cut -c1-16)
name=$APP-$hash
"${env[@]}" wasm-bindgen --target=web --no-typescript --out-dir="$stage/bindgen" \
  --out-name="$name" "$wasm"
mkdir -p "$stage/dist"
"${env[@]}" wasm-opt -Oz --output="$stage/dist/${name}_bg.wasm" "$stage/bindgen/${name}_bg.wasm"
cp "$stage/bindgen/$name.js" "$stage/dist/"
css=style-$(sha256sum frontend/style.css | cut -c1-16).css
cp frontend/style.css "$stage/dist/$css"

# index.html: the template's head gets the module script (it loads the wasm), the stylesheet
# and preloads, each with its SHA-384 integrity.
python3 - "$stage/dist" "$name" "$css" frontend/index.html <<'PY'
import base64, hashlib, pathlib, sys
dist, name, css, template = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
def sri(f):
    return "sha384-" + base64.b64encode(hashlib.sha384((dist / f).read_bytes()).digest()).decode()
js, wasm = f"{name}.js", f"{name}_bg.wasm"
head = f"""<script type="module">
import init from '/{js}';
await init({{ module_or_path: '/{wasm}' }});
</script>
    <link rel="stylesheet" href="/{css}" integrity="{sri(css)}"/>
    <link rel="modulepreload" href="/{js}" crossorigin="anonymous" integrity="{sri(js)}">
    <link rel="preload" href="/{wasm}" crossorigin="anonymous" integrity="{sri(wasm)}" as="fetch" type="application/wasm">
"""
html = pathlib.Path(template).read_text()
out = html.replace("</head>", head + "  </head>", 1)
if head not in out:
    sys.exit("frontend/index.html has no </head>")
(dist / "index.html").write_text(out)
PY

# Precompressed twins, served to browsers that accept gzip (the server's ServeDir looks for them).
for f in "$stage"/dist/*.wasm "$stage"/dist/*.js "$stage"/dist/*.css; do
  gzip -9 -k -f "$f"
done
# GraphiQL's files, served by Cairn itself (no CDN): see scripts/fetch-graphiql.sh.
bash scripts/fetch-graphiql.sh "$stage/dist"
rm -rf frontend/dist
mv "$stage/dist" frontend/dist
say "console built in $(( $(date +%s) - started ))s: $ROOT/frontend/dist"
ls -l frontend/dist >&2
