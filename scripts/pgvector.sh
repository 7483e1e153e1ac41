#!/usr/bin/env bash
# start-pgvector.sh — local PostgreSQL 15 (Debian bookworm) + pgvector, registry-only.
#
#   ./start-pgvector.sh [start]   install if needed, initdb if needed, start, print URL (idempotent)
#   ./start-pgvector.sh stop      stop the server (pg_ctl stop -m fast)
#   ./start-pgvector.sh status    pg_ctl status
#   ./start-pgvector.sh url       print the connection URL
#
# Where things come from (all via ordinary clients, no other network):
#   * postgresql-15, postgresql-server-dev-15 : Debian bookworm (apt-get install)
#   * pgvector C source : Debian *source* package "pgvector" (trixie), fetched with
#     `apt-get source --download-only` through a PRIVATE apt config (system sources untouched),
#     built with PGXS against bookworm's PG15 and installed with `make install`.
#
# Env knobs: PGV_ROOT (/var/tmp/pgvector)  PGV_PORT (25432)  PGV_DB (app)
#            PGV_PASSWORD (postgres)  PGV_FAST=1 (fsync=off etc., for CI; default 1)
#            PGV_OS_USER (OS user that runs postgres when invoked as root; default postgres)
set -euo pipefail

PGV_ROOT=${PGV_ROOT:-/var/tmp/pgvector}
PGV_PORT=${PGV_PORT:-25432}   # below the ephemeral range (32768+)
PGV_DB=${PGV_DB:-app}
PGV_PASSWORD=${PGV_PASSWORD:-postgres}
PGV_FAST=${PGV_FAST:-1}
PGV_OS_USER=${PGV_OS_USER:-postgres}
PG_MAJOR=15
PGVECTOR_DEB_VERSION=${PGVECTOR_DEB_VERSION:-0.8.0-1}
PGVECTOR_ORIG_SHA256=867a2c328d4928a5a9d6f052cd3bc78c7d60228a9b914ad32aa3db88e9de27b0  # pgvector_0.8.0.orig.tar.gz

PGBIN=/usr/lib/postgresql/$PG_MAJOR/bin
DATA=$PGV_ROOT/data
RUN=$PGV_ROOT/run
LOG=$PGV_ROOT/postgres.log
URL="postgres://postgres:${PGV_PASSWORD}@127.0.0.1:${PGV_PORT}/${PGV_DB}"

log() { echo "[pgvector] $*" >&2; }

# Run a command as the DB owner: PostgreSQL refuses to run as root.
as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u "$PGV_OS_USER" -- "$@"; else "$@"; fi
}

install_packages() {
  if [ -x "$PGBIN/postgres" ] && [ -x "$PGBIN/pg_config" ] && [ -f "$("$PGBIN/pg_config" --includedir-server)/postgres.h" ] \
     && command -v make >/dev/null && command -v gcc >/dev/null; then
    return
  fi
  [ "$(id -u)" = 0 ] || { log "need root to apt-get install postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR"; exit 1; }
  log "apt-get install postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR ..."
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # policy-rc.d in Docker-like images stops the package from auto-starting the 'main' cluster;
  # on a full system the Debian cluster 15/main may start on :5432 — harmless, we use our own.
  apt-get install -y -qq --no-install-recommends \
    postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR make gcc ca-certificates >/dev/null
}

install_pgvector() {
  local sharedir; sharedir=$("$PGBIN/pg_config" --sharedir)
  if [ -f "$sharedir/extension/vector.control" ] && [ -f "$("$PGBIN/pg_config" --pkglibdir)/vector.so" ]; then
    return
  fi
  [ "$(id -u)" = 0 ] || { log "need root to install pgvector into $sharedir"; exit 1; }
  local apt=$PGV_ROOT/apt src=$PGV_ROOT/src
  mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$src"
  # deb-src only: we never install trixie *binaries*, we only read the signed Sources index.
  # The mirror is the one this machine's apt already uses (first "URIs:" line, or a "deb" line).
  local mirror
  mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
  [ -n "$mirror" ] || mirror=$(awk '$1=="deb"{print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  [ -n "$mirror" ] || { log "cannot find the Debian mirror in the apt sources"; exit 1; }
  mirror=${mirror%-security}
  echo "deb-src $mirror trixie main" > "$apt/sources.list"
  local o=(-o Dir::Etc::SourceList="$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
           -o Dir::State::Lists="$apt/lists" -o Dir::Cache="$apt/cache" -o APT::Sandbox::User=root)
  log "fetching Debian source package pgvector=$PGVECTOR_DEB_VERSION (trixie) ..."
  apt-get "${o[@]}" update -qq
  rm -f "$src"/pgvector_*
  ( cd "$src" && { apt-get "${o[@]}" source --download-only -qq "pgvector=$PGVECTOR_DEB_VERSION" ||
      { log "pinned $PGVECTOR_DEB_VERSION gone from trixie; taking current version"; apt-get "${o[@]}" source --download-only -qq pgvector; }; } )
  local tarball; tarball=$(ls "$src"/pgvector_*.orig.tar.* | head -1)
  if [ "$(basename "$tarball")" = pgvector_0.8.0.orig.tar.gz ]; then
    echo "$PGVECTOR_ORIG_SHA256  $tarball" | sha256sum -c --quiet -
  fi
  local dir="$src/build"; rm -rf "$dir"; mkdir -p "$dir"
  tar xf "$tarball" -C "$dir" --strip-components=1
  log "building pgvector ($(basename "$tarball")) against $("$PGBIN/pg_config" --version) ..."
  # OPTFLAGS="" = portable build (no -march=native), same as Debian's 'no-native' patch.
  make -s -C "$dir" -j"$(nproc)" PG_CONFIG="$PGBIN/pg_config" OPTFLAGS="" >"$src/build.log" 2>&1 \
    || { tail -30 "$src/build.log"; exit 1; }
  make -s -C "$dir" install PG_CONFIG="$PGBIN/pg_config" OPTFLAGS="" >>"$src/build.log" 2>&1
  rm -rf "$apt"   # the private trixie Sources index (~22 MB) is no longer needed
  # undo: make -C "$dir" uninstall PG_CONFIG="$PGBIN/pg_config"
}

init_cluster() {
  [ -f "$DATA/PG_VERSION" ] && return
  log "initdb $DATA ..."
  mkdir -p "$PGV_ROOT"
  if [ "$(id -u)" = 0 ]; then id "$PGV_OS_USER" >/dev/null 2>&1 || useradd --system --home-dir "$PGV_ROOT" --shell /usr/sbin/nologin "$PGV_OS_USER"; fi
  local tmp=$DATA.initdb.$$; rm -rf "$tmp" "$DATA"
  mkdir -p "$tmp" "$RUN"
  [ "$(id -u)" = 0 ] && chown "$PGV_OS_USER": "$tmp" "$RUN"
  chmod 700 "$tmp"
  local pw; pw=$(mktemp); printf '%s\n' "$PGV_PASSWORD" > "$pw"
  [ "$(id -u)" = 0 ] && chown "$PGV_OS_USER": "$pw"
  as_pg "$PGBIN/initdb" -D "$tmp" -U postgres --pwfile="$pw" -E UTF8 --locale=C.UTF-8 \
    --auth-local=trust --auth-host=scram-sha-256 --no-sync >"$PGV_ROOT/initdb.log" 2>&1 \
    || { rm -f "$pw"; cat "$PGV_ROOT/initdb.log"; exit 1; }
  rm -f "$pw"
  {  # listen address, port and socket dir are passed at start (pg_ctl -o), so env changes apply
    echo "shared_buffers = 256MB"
    echo "maintenance_work_mem = 512MB   # HNSW builds are much faster when the graph fits"
    if [ "$PGV_FAST" = 1 ]; then
      echo "fsync = off"; echo "synchronous_commit = off"; echo "full_page_writes = off"
    fi
  } >> "$tmp/postgresql.conf"
  mv "$tmp" "$DATA"     # atomic: a half-done initdb never looks like a cluster
}

# pg_ctl status = "PID in postmaster.pid answers kill -0". After a crash/kill -9 the dead
# postmaster can linger as a zombie (some PID-1s, e.g. in containers/microVMs, reap late),
# so a zombie PID counts as "not running" and its stale postmaster.pid / socket lock are removed.
running() {
  local pid state
  pid=$(head -1 "$DATA/postmaster.pid" 2>/dev/null) || return 1
  state=$(sed -E 's/^[0-9]+ \(.*\) (.).*/\1/' "/proc/$pid/stat" 2>/dev/null || true)
  if [ -z "$state" ] || [ "$state" = Z ]; then
    rm -f "$DATA/postmaster.pid"
    local lock="$RUN/.s.PGSQL.$PGV_PORT.lock"
    [ "$(head -1 "$lock" 2>/dev/null)" = "$pid" ] && rm -f "$lock" "$RUN/.s.PGSQL.$PGV_PORT"
    return 1
  fi
  as_pg "$PGBIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1
}

start() {
  install_packages
  install_pgvector
  init_cluster
  if running; then
    log "already running"
  else
    # Don't probe with connect(): a port in the ephemeral range can self-connect and then
    # sit in TIME_WAIT, which itself blocks postgres' bind(). Look at listeners only.
    if command -v ss >/dev/null && [ -n "$(ss -Htln "sport = :$PGV_PORT")" ]; then
      log "port $PGV_PORT is already listened on by another process"; exit 1
    fi
    [ "$(id -u)" = 0 ] && { mkdir -p "$RUN"; chown "$PGV_OS_USER": "$RUN"; touch "$LOG"; chown "$PGV_OS_USER": "$LOG"; }
    as_pg "$PGBIN/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 \
      -o "-c listen_addresses=127.0.0.1 -c port=$PGV_PORT -c unix_socket_directories=$RUN" start >/dev/null 9>&- \
      || { tail -20 "$LOG"; exit 1; }
  fi
  for _ in $(seq 1 100); do
    "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$PGV_PORT" && break; sleep 0.1
  done
  "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$PGV_PORT" || { log "server not ready"; tail -20 "$LOG"; exit 1; }
  local psql=("$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$RUN" -p "$PGV_PORT" -U postgres)
  if [ "$(as_pg "${psql[@]}" -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname='$PGV_DB'")" != 1 ]; then
    as_pg "${psql[@]}" -d postgres -c "CREATE DATABASE \"$PGV_DB\""
  fi
  as_pg env PGOPTIONS="-c client_min_messages=warning" "${psql[@]}" -d "$PGV_DB" \
    -c "CREATE EXTENSION IF NOT EXISTS vector; CREATE EXTENSION IF NOT EXISTS pg_trgm;"
  echo "$URL"
}

stop() {
  if [ -f "$DATA/PG_VERSION" ] && running; then
    as_pg "$PGBIN/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null && log "stopped"
  else
    log "not running"
  fi
}

mkdir -p "$PGV_ROOT"
# serialise concurrent invocations (parallel CI jobs); fd 9 is closed for the postmaster (9>&-),
# otherwise the long-lived server would inherit and hold the lock forever.
exec 9>>"$PGV_ROOT/.start-pgvector.lock"
flock 9

case "${1:-start}" in
  start)  start ;;
  stop)   stop ;;
  status) as_pg "$PGBIN/pg_ctl" -D "$DATA" status ;;
  url)    echo "$URL" ;;
  *) echo "usage: $0 [start|stop|status|url]" >&2; exit 2 ;;
esac
