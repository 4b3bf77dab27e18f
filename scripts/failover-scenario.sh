#!/usr/bin/env bash
# failover-scenario.sh: exactly-once across a failover, from the command line (docs/reliability.md,
# "Exactly-once across failover"). It sets up the database with the engines' own tools, starts two
# `idemwork serve --dev-auth`, and runs the scenario's load (internal/failover/driver: keyed creates
# and same-key storms from several clients) while it fails the database over; then every key is
# retried once the new primary answers, and the answers are compared with the rows: keys executed
# twice, acknowledged keys lost, partial rows, and `idemwork verify --all`.
#
#   scripts/failover-scenario.sh pgaf    pg_auto_failover: monitor + two nodes (synchronous); faults:
#                                        pg_autoctl perform failover; replication stalled 1.5 s, then
#                                        the primary's node killed (the monitor promotes); the node
#                                        restarted (it rejoins); the primary's postmaster killed
#   scripts/failover-scenario.sh async   a primary and a plain pg_basebackup -R standby (asynchronous);
#                                        fault: replication stalled 1.5 s, the primary killed, the
#                                        standby promoted (pg_ctl promote)
#
# Environment: DIR (default /tmp/idemwork-failover-<engine>, emptied first), PORT_BASE (default
# 7610: it uses PORT_BASE..PORT_BASE+12 on 127.0.0.1), CLIENTS (8), RATE (keys per second, 0 as
# fast as they can), BETWEEN (keys acknowledged before, between and after the faults, 300), BIN
# (bin/idemwork, built when missing). Everything it starts is stopped when it ends. It prints the
# driver's report (one JSON object: keys, acknowledged, failovers, unavailable, commitUnknown,
# executedTwice, lost, partial, unresolved, violations, …) and exits 0 when exactly-once held, 1
# when it did not.
set -euo pipefail
cd "$(dirname "$0")/.."
engine=${1:?usage: scripts/failover-scenario.sh pgaf|async}
case $engine in pgaf | async | fault) ;; *) echo "usage: scripts/failover-scenario.sh pgaf|async" >&2; exit 2 ;; esac
DIR=${DIR:-/tmp/idemwork-failover-$engine}
BASE=${PORT_BASE:-7610}
CLIENTS=${CLIENTS:-8}
RATE=${RATE:-0}
BETWEEN=${BETWEEN:-300}
BIN=${BIN:-bin/idemwork}
[ -x "$BIN" ] || make build >/dev/null
BIN=$(realpath "$BIN")
PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
export PATH="$PGBIN:$PATH" PGUSER=postgres PGCONNECT_TIMEOUT=5


log() { echo "failover-scenario: $*" >&2; }
# as_pg CMD...: run CMD as the server user (PostgreSQL refuses root), in DIR's environment.
as_pg() {
	local env=(HOME="$DIR" XDG_CONFIG_HOME="$DIR/config" XDG_DATA_HOME="$DIR/data" XDG_RUNTIME_DIR="$DIR/run" PATH="$PATH" LC_ALL=C)
	if [ "$(id -u)" = 0 ]; then runuser -u postgres -- env "${env[@]}" "$@"; else env "${env[@]}" "$@"; fi
}
# spawn NAME CMD...: start CMD as the server user in a session of its own — its whole process
# tree is one process group, whose id DIR/NAME.pid holds, killed at once by kill_tree — with its
# output in DIR/NAME.log.
spawn() {
	local name=$1
	shift
	rm -f "$DIR/$name.pid"
	as_pg setsid sh -c 'echo $$ >"$0"; exec "$@"' "$DIR/$name.pid" "$@" >>"$DIR/$name.log" 2>&1 &
	wait_for 30 "$name to start" test -s "$DIR/$name.pid"
}
descendants() { # PID: every descendant of PID
	local c
	for c in $(ps -o pid= --ppid "$1"); do
		echo "$c"
		descendants "$c"
	done
}
# kill_tree NAME: SIGKILL to NAME's process group and every descendant (the machine died): a
# PostgreSQL backend leads a process group of its own, which a group kill does not reach — a
# stopped WAL sender would hold the dead server's shared memory forever.
kill_tree() {
	local pgid
	pgid=$(cat "$DIR/$1.pid" 2>/dev/null) || return 0
	# shellcheck disable=SC2046
	kill -KILL -- "-$pgid" $(descendants "$pgid") 2>/dev/null || true
}
sql() { psql -X -qAt -v ON_ERROR_STOP=1 "$@"; }
wait_for() { # SECONDS WHAT CMD...: poll CMD until it succeeds
	local until=$((SECONDS + $1)) what=$2
	shift 2
	until "$@" >/dev/null 2>&1; do
		[ $SECONDS -lt "$until" ] || { log "gave up waiting for $what"; exit 3; }
		sleep 0.2
	done
}

monitor_sql() { sql "postgres://autoctl_node@127.0.0.1:$BASE/pg_auto_failover?sslmode=disable" -c "$1"; }
# primary_port: the settled primary's port, from the monitor
primary_port() { monitor_sql "SELECT nodeport FROM pgautofailover.node WHERE reportedstate = goalstate AND reportedstate IN ('primary', 'wait_primary', 'single') LIMIT 1"; }
is_primary() { [ "$(primary_port 2>/dev/null)" = "$1" ]; } # PORT: the settled primary listens on PORT
in_sync() { [ "$(monitor_sql "SELECT count(*) FROM pgautofailover.node WHERE reportedstate = goalstate AND reportedstate IN ('primary', 'secondary') AND health = 1")" = 2 ]; }
stall_walsenders() { # PORT: SIGSTOP the WAL senders of the server on PORT
	local pids
	pids=$(sql "postgres://127.0.0.1:$1/postgres?sslmode=disable" -c "SELECT pid FROM pg_stat_replication")
	[ -n "$pids" ] || { log "no WAL sender on port $1 to stall"; exit 3; }
	# shellcheck disable=SC2086
	kill -STOP $pids
}

# Fault mode: the driver runs `failover-scenario.sh fault KIND` while the load goes on; it returns
# once the database accepts writes again.
if [ "$engine" = fault ]; then
	kind=${2:?fault kind}
	case $kind in
	planned)
		as_pg pg_autoctl perform failover --pgdata "$DIR/monitor" --wait 0 >>"$DIR/faults.log" 2>&1
		wait_for 600 "the formation in sync after the failover" in_sync
		;;
	kill-node)
		wait_for 600 "the formation in sync" in_sync
		p=$(primary_port)
		stall_walsenders "$p"
		sleep 1.5 # the stall is the fault: it lasts 1.5 s
		kill_tree "node$((p - BASE))"
		wait_for 300 "the promotion" is_primary $((2 * BASE + 3 - p))
		;;
	rejoin)
		for n in node1 node2; do
			kill -0 -- "-$(cat "$DIR/$n.pid")" 2>/dev/null || spawn "$n" pg_autoctl run --pgdata "$DIR/$n"
		done
		wait_for 600 "the killed node back as the secondary" in_sync
		;;
	kill-postmaster)
		p=$(primary_port)
		kill -KILL "$(head -1 "$DIR/node$((p - BASE))/postmaster.pid")"
		wait_for 300 "the primary back" sql "postgres://127.0.0.1:$p/postgres?sslmode=disable" -c "SELECT 1"
		;;
	kill-promote)
		stall_walsenders $((BASE + 1))
		sleep 1.5 # the stall is the fault: it lasts 1.5 s
		kill_tree primary
		as_pg pg_ctl -D "$DIR/standby" promote -w >>"$DIR/faults.log" 2>&1
		;;
	*) echo "unknown fault $kind" >&2; exit 2 ;;
	esac
	exit 0
fi


rm -rf "$DIR" && mkdir -p "$DIR" && chmod 755 "$DIR"
[ "$(id -u)" = 0 ] && chown postgres: "$DIR"
SERVES=()
cleanup() {
	set +e
	touch "$DIR/stop"
	for p in "${SERVES[@]}"; do kill -TERM "$p" 2>/dev/null; done
	# pg_autoctl stops its Postgres on SIGTERM, a postmaster shuts down fast on SIGINT; what is
	# left after 10 s is killed.
	for n in node1 node2 monitor; do [ -f "$DIR/$n.pid" ] && kill -TERM "$(cat "$DIR/$n.pid")" 2>/dev/null; done
	for n in primary standby; do [ -f "$DIR/$n.pid" ] && kill -INT "$(cat "$DIR/$n.pid")" 2>/dev/null; done
	for _ in $(seq 1 50); do
		alive=0
		for n in node1 node2 monitor primary standby; do
			[ -f "$DIR/$n.pid" ] && kill -0 -- "-$(cat "$DIR/$n.pid")" 2>/dev/null && alive=1
		done
		[ $alive = 0 ] && break
		sleep 0.2
	done
	for n in node1 node2 monitor primary standby; do kill_tree "$n"; done
	wait 2>/dev/null
}
trap cleanup EXIT

if [ "$engine" = pgaf ]; then
	common=(--pgctl "$PGBIN/pg_ctl" --hostname 127.0.0.1 --auth trust --no-ssl --run)
	log "starting a pg_auto_failover formation in $DIR (monitor :$BASE, nodes :$((BASE + 1)) :$((BASE + 2)))"
	spawn monitor pg_autoctl create monitor --pgdata "$DIR/monitor" --pgport "$BASE" --listen 127.0.0.1 "${common[@]}"
	wait_for 120 "the monitor" monitor_sql "SELECT 1 FROM pgautofailover.formation"
	# Seconds, not the defaults' tens of seconds, to declare the dead primary dead.
	for s in health_check_period=1000 health_check_timeout=1000 health_check_retry_delay=200 health_check_max_retries=1 \
		node_considered_unhealthy_timeout=2000 primary_demote_timeout=10000; do
		sql "postgres://127.0.0.1:$BASE/postgres?sslmode=disable" -c "ALTER SYSTEM SET pgautofailover.${s%%=*} = ${s#*=}"
	done
	sql "postgres://127.0.0.1:$BASE/postgres?sslmode=disable" -c "SELECT pg_reload_conf()" >/dev/null
	monitor_uri="postgres://autoctl_node@127.0.0.1:$BASE/pg_auto_failover?sslmode=disable"
	spawn node1 pg_autoctl create postgres --pgdata "$DIR/node1" --pgport $((BASE + 1)) --listen 127.0.0.1 --name node1 --monitor "$monitor_uri" "${common[@]}"
	wait_for 180 "node1 as the primary" is_primary $((BASE + 1))
	spawn node2 pg_autoctl create postgres --pgdata "$DIR/node2" --pgport $((BASE + 2)) --listen 127.0.0.1 --name node2 --monitor "$monitor_uri" "${common[@]}"
	wait_for 300 "node2 as the synchronous secondary" in_sync
	uri=$(as_pg pg_autoctl show uri --pgdata "$DIR/monitor" --formation default)
	log "formation up: $uri"
	sql "$uri" -c "CREATE DATABASE idemwork"
	dsn=${uri/\/postgres\?//idemwork?}
else
	log "starting a primary (:$((BASE + 1))) and a pg_basebackup -R standby (:$((BASE + 2))) in $DIR"
	as_pg initdb -D "$DIR/primary" -U postgres -A trust --no-instructions >/dev/null
	printf "listen_addresses = '127.0.0.1'\nport = %d\nunix_socket_directories = '%s'\nwal_level = replica\nmax_wal_senders = 10\nhot_standby = on\n" \
		$((BASE + 1)) "$DIR" >>"$DIR/primary/postgresql.conf"
	spawn primary postgres -D "$DIR/primary"
	wait_for 60 "the primary" sql "postgres://127.0.0.1:$((BASE + 1))/postgres?sslmode=disable" -c "SELECT 1"
	as_pg pg_basebackup -D "$DIR/standby" -R -X stream -c fast -d "postgres://postgres@127.0.0.1:$((BASE + 1))/postgres?sslmode=disable"
	sed -i "s/^port = .*/port = $((BASE + 2))/" "$DIR/standby/postgresql.conf"
	spawn standby postgres -D "$DIR/standby"
	wait_for 60 "the standby" sql "postgres://127.0.0.1:$((BASE + 2))/postgres?sslmode=disable" -c "SELECT 1"
	sql "postgres://127.0.0.1:$((BASE + 1))/postgres?sslmode=disable" -c "CREATE DATABASE idemwork"
	dsn="postgres://127.0.0.1:$((BASE + 1)),127.0.0.1:$((BASE + 2))/idemwork?target_session_attrs=read-write&sslmode=disable"
fi

export IDEMWORK_DSN=$dsn XDG_CONFIG_HOME="$DIR/idemwork-config"
"$BIN" --allow-writes migrate >/dev/null
urls=()
for i in 1 2; do
	"$BIN" --allow-writes serve --addr "127.0.0.1:$((BASE + 10 + i))" --dev-auth >"$DIR/serve$i.out" 2>"$DIR/serve$i.log" &
	SERVES+=($!)
	urls+=(--url "http://127.0.0.1:$((BASE + 10 + i))")
	wait_for 60 "serve $i" curl -sf "http://127.0.0.1:$((BASE + 10 + i))/healthz"
done
log "two serve processes up; the load starts"
go build -o "$DIR/driver" ./internal/failover/driver
# The faults run this script again (fault mode, below), with its settings.
export DIR PORT_BASE=$BASE
self=$(realpath "$0")
if [ "$engine" = pgaf ]; then
	faults=(--fault "failover:pg_autoctl perform failover=$self fault planned"
		--fault "failover:replication stalled 1.5 s, then the primary's node killed=$self fault kill-node"
		--fault "the killed node restarted: it rejoins as the secondary=$self fault rejoin"
		--fault "the primary's postmaster killed (its keeper restarts it)=$self fault kill-postmaster")
else
	faults=(--fault "failover:replication stalled 1.5 s, then the primary killed and the standby promoted=$self fault kill-promote")
fi
set +e
"$DIR/driver" "${urls[@]}" --dsn "$dsn" --idemwork "$BIN" --clients "$CLIENTS" --rate "$RATE" --between "$BETWEEN" "${faults[@]}" | tee "$DIR/report.json"
status=${PIPESTATUS[0]}
set -e
exit "$status"
