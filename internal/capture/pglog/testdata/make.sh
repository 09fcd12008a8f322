#!/bin/sh
# make.sh regenerates the recorded logs of this directory from a real
# PostgreSQL 15 (see README.md). Run as root from anywhere; the server runs
# as the postgres OS user in a directory under /tmp, removed at the end.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bin=/usr/lib/postgresql/15/bin
work=$(mktemp -d /tmp/pglog-make.XXXXXX)
chown postgres "$work"
port=54329
trap 'su postgres -c "$bin/pg_ctl -D $work/data -m immediate stop" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

su postgres -c "$bin/initdb -D $work/data -U postgres --auth=trust -E UTF8 --locale=C.UTF-8" >/dev/null
echo "include_if_exists = 'mode.conf'" >>"$work/data/postgresql.conf"

export PGHOST="$work" PGPORT="$port" PGUSER=postgres
dsn="host=$work port=$port user=postgres dbname=bench application_name=hand"

# start MODE SETTINGS: the server logging into $work/MODE with the common
# settings plus SETTINGS (lines of postgresql.conf).
start() {
	cat >"$work/data/mode.conf" <<EOF
port = $port
unix_socket_directories = '$work'
listen_addresses = ''
logging_collector = on
log_destination = 'csvlog,jsonlog,stderr'
log_directory = '$work/$1'
log_filename = 'postgresql.log'
log_line_prefix = '%m [%p] %q%c %l %e user=%u db=%d app=%a '
log_timezone = 'UTC'
lc_messages = 'C'
log_connections = on
log_disconnections = on
$2
EOF
	su postgres -c "$bin/pg_ctl -D $work/data -w -l $work/server.log start" >/dev/null
}

stop() {
	su postgres -c "$bin/pg_ctl -D $work/data -w stop" >/dev/null
	for ext in log csv json; do
		gzip -9 -n -c "$work/$1/postgresql.$ext" >"$here/$1.$ext.gz"
	done
}

bench() { # protocols rate seconds
	for m in $1; do
		"$bin/pgbench" -n -c 4 -T "$3" -R "$2" -M "$m" bench >/dev/null
	done
}

# both: log_statement = all and log_min_duration_statement = 0.
start both "log_statement = 'all'
log_min_duration_statement = 0"
"$bin/createdb" bench
"$bin/pgbench" -i -s 1 -q bench >/dev/null 2>&1
(cd "$here" && go run ./gen "$dsn")
bench "simple extended prepared" 40 3
stop both

# duration: log_min_duration_statement = 0 alone (statements logged at their end).
start duration "log_min_duration_statement = 0"
"$bin/psql" -qc 'DROP TABLE hand' bench
(cd "$here" && go run ./gen "$dsn")
bench "simple extended prepared" 20 3
stop duration

# statement: log_statement = all alone (statements logged at their start).
start statement "log_statement = 'all'"
"$bin/psql" -qc 'DROP TABLE hand' bench
(cd "$here" && go run ./gen "$dsn")
bench "extended prepared" 20 2
stop statement
