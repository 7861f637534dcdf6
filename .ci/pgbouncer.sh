#!/usr/bin/env bash
# Runs a PgBouncer of its own, in transaction pooling mode, in front of a
# PostgreSQL server, for the tests that go through a pooler (pgstore's exec
# mode matrix reads SAFERETRY_PGBOUNCER_URL).
#
#   .ci/pgbouncer.sh start   start it (in the background, not the system
#                            service), wait until it answers, print the URL
#   .ci/pgbouncer.sh stop    stop the one started from the same directory
#   .ci/pgbouncer.sh status  exit 0 when the one of that directory runs
#   .ci/pgbouncer.sh url     print the URL
#
# Settings (environment): PGBOUNCER_PORT (16432), PGBOUNCER_DIR (where the
# config, log and pid file go; /tmp/saferetry-pgbouncer-$PGBOUNCER_PORT),
# PGBOUNCER_POOL_SIZE (server connections per database and user; 20),
# PG_HOST / PG_PORT / PG_DB / PG_USER (127.0.0.1, 5432, test, postgres).
# Authentication is trust, from loopback only: a test setup, not a deployment.
#
# Example: eval "$(.ci/pgbouncer.sh start | sed 's/^/export SAFERETRY_PGBOUNCER_URL=/')"
set -euo pipefail

port=${PGBOUNCER_PORT:-16432}
dir=${PGBOUNCER_DIR:-/tmp/saferetry-pgbouncer-$port}
pool_size=${PGBOUNCER_POOL_SIZE:-20}
pg_host=${PG_HOST:-127.0.0.1}
pg_port=${PG_PORT:-5432}
pg_db=${PG_DB:-test}
pg_user=${PG_USER:-postgres}
url="postgres://$pg_user@127.0.0.1:$port/$pg_db?sslmode=disable"

running() {
  [ -f "$dir/pgbouncer.pid" ] && kill -0 "$(cat "$dir/pgbouncer.pid")" 2>/dev/null
}

answers() { # PgBouncer is up and hands out a server connection
  psql "$url" -XAtqc 'SELECT 1' >/dev/null 2>&1
}

start() {
  command -v pgbouncer >/dev/null || { echo "pgbouncer.sh: pgbouncer is not on PATH (apt-get install -y pgbouncer)" >&2; exit 1; }
  if running; then
    echo "pgbouncer.sh: already running (pid $(cat "$dir/pgbouncer.pid"), $dir)" >&2
  else
    mkdir -p "$dir"
    cat >"$dir/pgbouncer.ini" <<EOF
[databases]
$pg_db = host=$pg_host port=$pg_port dbname=$pg_db

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = transaction
default_pool_size = $pool_size
max_client_conn = 1000
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
EOF
    printf '"%s" ""\n' "$pg_user" >"$dir/userlist.txt"
    : >"$dir/pgbouncer.log"
    # PgBouncer refuses to run as root; as root, it runs as postgres.
    local as=()
    if [ "$(id -u)" = 0 ]; then
      as=(-u postgres)
      chown -R postgres "$dir"
    fi
    pgbouncer -d "${as[@]}" "$dir/pgbouncer.ini"
  fi
  for _ in $(seq 1 50); do
    if answers; then echo "$url"; return 0; fi
    sleep 0.1
  done
  echo "pgbouncer.sh: PgBouncer on 127.0.0.1:$port did not answer; log:" >&2
  tail -n 20 "$dir/pgbouncer.log" >&2 || true
  exit 1
}

stop() {
  [ -f "$dir/pgbouncer.pid" ] || return 0
  local pid
  pid=$(cat "$dir/pgbouncer.pid")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  rm -f "$dir/pgbouncer.pid"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
status) running ;;
url) echo "$url" ;;
*)
  echo "usage: $0 start|stop|status|url" >&2
  exit 2
  ;;
esac
