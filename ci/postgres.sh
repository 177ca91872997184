#!/usr/bin/env bash
# A throwaway PostgreSQL for the history tests: `ci/postgres.sh start DIR` makes a cluster
# in DIR (initdb, trust authentication, fsync off: nothing in it is kept), starts it on a
# free port of the loopback only, as an unprivileged user (postgres, when run as root:
# the server refuses to run as root), and prints its URL; `ci/postgres.sh stop DIR` stops
# it at once. The server is Debian's PostgreSQL 15 (bookworm's), installed by .ci/run.
set -euo pipefail
action=${1:?start or stop} dir=${2:?the cluster folder}
major=15
bin=/usr/lib/postgresql/$major/bin
as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
case $action in
start)
  "$bin/postgres" --version | grep -q "^postgres (PostgreSQL) $major\." || {
    echo "ci/postgres.sh: $bin/postgres is not PostgreSQL $major" >&2
    exit 1
  }
  mkdir -p "$dir"
  [ "$(id -u)" = 0 ] && chown postgres: "$dir"
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  as_owner "$bin/initdb" --pgdata="$dir/data" --username=accprobe --auth=trust \
    --encoding=UTF8 --no-sync >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
  as_owner "$bin/pg_ctl" --pgdata="$dir/data" --log="$dir/server.log" --wait --timeout=60 \
    -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir -c fsync=off -c max_connections=100" \
    start >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
  echo "postgres://accprobe@127.0.0.1:$port/postgres"
  ;;
stop)
  [ -d "$dir/data" ] && as_owner "$bin/pg_ctl" --pgdata="$dir/data" --mode=immediate stop >/dev/null 2>&1 || true
  ;;
*)
  echo "usage: ci/postgres.sh start|stop DIR" >&2
  exit 2
  ;;
esac
