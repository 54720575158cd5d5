#!/usr/bin/env bash
# Start Debian's PgBouncer in transaction pooling mode in front of the local
# PostgreSQL, on 127.0.0.1:${PGBOUNCER_PORT:-6432}, for the test suite.
#
#   scripts/pgbouncer.sh          # start (installs pgbouncer when missing, as root)
#   scripts/pgbouncer.sh stop
#
# Every database of the server is reachable through it, trusted like the
# server itself (the CI machine's PostgreSQL trusts local connections).
set -euo pipefail
PORT="${PGBOUNCER_PORT:-6432}"
DIR="${PGBOUNCER_DIR:-/tmp/agentstate-pgbouncer}"
RUN_AS="${PGBOUNCER_USER:-postgres}"

if [ "${1:-}" = stop ]; then
  [ -f "$DIR/pgbouncer.pid" ] && kill "$(cat "$DIR/pgbouncer.pid")" 2>/dev/null || true
  exit 0
fi

if ! command -v pgbouncer >/dev/null 2>&1 && [ ! -x /usr/sbin/pgbouncer ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "==> installing PgBouncer"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null
    # Debian's package starts a server of its own on 6432; ours takes its place.
    service pgbouncer stop >/dev/null 2>&1 || true
  else
    echo "PgBouncer is not installed: apt-get install pgbouncer" >&2
    exit 1
  fi
fi
PGBOUNCER="$(command -v pgbouncer || echo /usr/sbin/pgbouncer)"

up() { pg_isready -q -h 127.0.0.1 -p "$PORT"; }
if up; then
  echo "==> PgBouncer already answers on 127.0.0.1:$PORT"
  exit 0
fi

mkdir -p "$DIR"
cat >"$DIR/pgbouncer.ini" <<INI
[databases]
* = host=127.0.0.1 port=5432

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $PORT
unix_socket_dir =
auth_type = trust
auth_file = $DIR/users.txt
pool_mode = transaction
max_client_conn = 1000
default_pool_size = 40
; the suite drops its test databases: idle server connections must not hold them
server_idle_timeout = 1
server_lifetime = 60
ignore_startup_parameters = extra_float_digits,options
admin_users = postgres
logfile = $DIR/pgbouncer.log
pidfile = $DIR/pgbouncer.pid
INI
printf '"postgres" ""\n"root" ""\n' >"$DIR/users.txt"
if [ "$(id -u)" = 0 ]; then
  chown -R "$RUN_AS" "$DIR"
  runuser -u "$RUN_AS" -- "$PGBOUNCER" -d "$DIR/pgbouncer.ini"
else
  "$PGBOUNCER" -d "$DIR/pgbouncer.ini"
fi
for _ in $(seq 30); do up && break; sleep 0.5; done
up || { echo "PgBouncer did not start: see $DIR/pgbouncer.log" >&2; exit 1; }
echo "==> PgBouncer (transaction pooling) on 127.0.0.1:$PORT"
