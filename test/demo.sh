#!/usr/bin/env bash
#
# test/demo.sh - set up a throwaway PostgreSQL cluster with dbgate and show
# it admitting, queueing and rejecting statements.
#
# Usage: sudo test/demo.sh [--no-install]
#
# As root on a fresh Debian 12 machine it installs the packages it needs,
# builds and installs dbgate, then, as the postgres user:
#   1. creates a cluster in a temporary directory with
#      shared_preload_libraries = 'dbgate' (Unix socket in that directory,
#      TCP on 127.0.0.1 at a free port);
#   2. creates the extension, a role "reporting" and a budget for it with
#      max_active = 1, max_queued = 1, queue_timeout = 5s;
#   3. runs three sessions as "reporting": the first is admitted, the second
#      waits in the queue, the third is rejected at once (SQLSTATE 53300);
#   4. waits for the first two and prints dbgate.status.
# The cluster is stopped and removed at the end, also on error or Ctrl-C.
# The script checks what it shows and exits non-zero if dbgate misbehaves.
#
# --no-install uses the dbgate already installed and may run as any user.
# DEMO_KEEP=1 keeps the cluster directory.  PG_MAJOR, PG_CONFIG and
# DBGATE_OS_USER as in test/lib.sh.

set -euo pipefail

# shellcheck source=test/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

do_install=1
for arg in "$@"; do
	case $arg in
	--no-install) do_install= ;;
	*)
		sed -n '/^# Usage:/s/^# //p' "${BASH_SOURCE[0]}" >&2
		exit 2
		;;
	esac
done
if [[ $EUID -ne 0 && -n $do_install ]]; then
	echo "error: run as root (sudo $0), or with --no-install" >&2
	exit 2
fi

DEMO='' PORT='' BG_PIDS=()

cleanup() {
	local rc=$? pid
	trap - EXIT INT TERM HUP
	trap "" PIPE # output may be cut off: go on cleaning up
	set +e # clean up even when output can no longer be written
	for pid in ${BG_PIDS[@]+"${BG_PIDS[@]}"}; do
		kill "$pid" 2>/dev/null || true
	done
	if [[ -n $DEMO ]]; then
		heading "Clean-up"
		if [[ -f $DEMO/data/postmaster.pid ]]; then
			"${AS_PG[@]}" "$BINDIR/pg_ctl" -D "$DEMO/data" -m fast -w stop >/dev/null 2>&1 ||
				stop_servers "$DEMO"
		fi
		if [[ -n ${DEMO_KEEP:-} ]]; then
			echo "cluster stopped, directory kept: $DEMO"
		else
			rm -rf "$DEMO"
			echo "cluster stopped and removed"
		fi
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'echo "*** interrupted"; exit 130' INT TERM HUP
# Output cut off (a closed pipe): still stop the cluster.
trap 'trap "" PIPE; exit 141' PIPE

fail() {
	echo "*** demo FAILED: $*" >&2
	if [[ -n $DEMO && -f $DEMO/server.log ]]; then
		echo "--- last lines of the server log:" >&2
		tail -n 30 "$DEMO/server.log" >&2
	fi
	exit 1
}

# psql_admin ARGS...: psql as the superuser (never gated).
psql_admin() {
	"${AS_PG[@]}" "$BINDIR/psql" -X -q -h "$DEMO" -p "$PORT" -U postgres \
		-d postgres -v ON_ERROR_STOP=1 "$@"
}

# psql_reporting ARGS...: psql as the gated role "reporting".
psql_reporting() {
	"${AS_PG[@]}" "$BINDIR/psql" -X -h "$DEMO" -p "$PORT" -U reporting \
		-d postgres "$@"
}

# value SQL: one value, unaligned.
value() {
	psql_admin -At -c "$1"
}

# wait_for SQL SECONDS: poll until SQL returns true.
wait_for() {
	local i
	for ((i = 0; i < $2 * 20; i++)); do
		[[ $(value "$1") == t ]] && return 0
		sleep 0.05
	done
	return 1
}

free_port() {
	local p
	for ((p = 54320; p < 54420; p++)); do
		# Nothing answers on 127.0.0.1:p (bash's /dev/tcp connects).
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

# ---------------------------------------------------------------------------

if [[ -n $do_install ]]; then
	heading "Install packages, build and install dbgate"
	install_packages postgresql-"$PG_MAJOR" postgresql-server-dev-"$PG_MAJOR" \
		build-essential libkrb5-dev || fail "package installation"
	pg_paths || exit 1
	BUILD=$(make_scratch dbgate-build)
	copy_tree "$BUILD/tree" || fail "copying the source tree"
	if ! build_install "$BUILD/tree" install >"$BUILD/make.log" 2>&1; then
		cat "$BUILD/make.log"
		rm -rf "$BUILD"
		fail "build"
	fi
	rm -rf "$BUILD"
	echo "dbgate built and installed for $("$PG_CONFIG" --version)"
fi
pg_paths || exit 1

heading "Start a throwaway cluster with shared_preload_libraries = 'dbgate'"
DEMO=$(make_scratch dbgate-demo)
cd "$DEMO" # the server user may not be able to enter the caller's directory
PORT=$(free_port) || fail "no free port in 54320-54419"
"${AS_PG[@]}" "$BINDIR/initdb" -D "$DEMO/data" -U postgres -A trust \
	--no-locale -E UTF8 >"$DEMO/initdb.log" 2>&1 ||
	{
		cat "$DEMO/initdb.log"
		fail "initdb"
	}
"${AS_PG[@]}" tee -a "$DEMO/data/postgresql.conf" >/dev/null <<EOF
shared_preload_libraries = 'dbgate'
port = $PORT
listen_addresses = '127.0.0.1'
unix_socket_directories = '$DEMO'
EOF
"${AS_PG[@]}" "$BINDIR/pg_ctl" -D "$DEMO/data" -l "$DEMO/server.log" -w start \
	>/dev/null || fail "server start"
echo "data directory $DEMO/data, port $PORT, socket in $DEMO"
echo "connect while it runs: psql -h $DEMO -p $PORT -U postgres postgres"

heading "Create the extension, role \"reporting\" and its budget"
cat <<'EOF'
  CREATE EXTENSION dbgate;
  CREATE ROLE reporting LOGIN;
  SELECT dbgate.create_budget('reporting', max_active => 1, max_queued => 1,
                              queue_timeout => '5s');
  SELECT dbgate.assign_role('reporting', 'reporting');
EOF
psql_admin <<'EOF' || fail "setup"
\o /dev/null
CREATE EXTENSION dbgate;
CREATE ROLE reporting LOGIN;
SELECT dbgate.create_budget('reporting', max_active => 1, max_queued => 1,
                            queue_timeout => '5s');
SELECT dbgate.assign_role('reporting', 'reporting');
\o
\pset footer off
SELECT budget, max_active, max_queued, queue_timeout, roles FROM dbgate.budgets;
EOF
echo "Superusers are never gated: the sessions below log in as \"reporting\"."

heading "Session 1: SELECT pg_sleep(3) -- admitted, takes the only slot"
psql_reporting -c "SELECT 'done' AS session_1 FROM pg_sleep(3)" >"$DEMO/s1.out" 2>&1 &
BG_PIDS+=($!)
wait_for "SELECT count(*) = 1 FROM dbgate.backends WHERE state = 'active'" 10 ||
	fail "session 1 was not admitted"
psql_admin -c "SELECT pid, role, budget, state, queue_position FROM dbgate.backends"

heading "Session 2: the same budget is full -- it waits in the queue"
# Runs at admission, so it shows how long the statement waited in the queue.
psql_reporting -c "SELECT round(extract(epoch FROM clock_timestamp() - \
statement_timestamp())::numeric, 1) AS session_2_seconds_queued" \
	>"$DEMO/s2.out" 2>&1 &
BG_PIDS+=($!)
wait_for "SELECT EXISTS (SELECT FROM dbgate.backends b JOIN pg_stat_activity a
	USING (pid) WHERE b.state = 'queued' AND b.queue_position = 1
	AND a.wait_event_type = 'Extension')" 10 ||
	fail "session 2 is not shown queued (queue_position 1, wait_event_type Extension)"
psql_admin <<'EOF'
SELECT b.pid, b.state, b.queue_position, a.wait_event_type, a.wait_event,
       left(a.query, 40) AS query
FROM dbgate.backends b JOIN pg_stat_activity a USING (pid)
ORDER BY b.state, b.queue_position;
EOF

heading "Session 3: one active and one queued, max_queued = 1 -- rejected at once"
echo '  \set VERBOSITY verbose'
echo '  SELECT 1;'
t0=$(date +%s%N)
set +e
s3=$(psql_reporting 2>&1 <<'EOF'
\set VERBOSITY verbose
SELECT 1;
\echo SQLSTATE :LAST_ERROR_SQLSTATE
EOF
)
s3_rc=$?
set -e
t1=$(date +%s%N)
# shellcheck disable=SC2001 # indent every line
sed "s/^/  /" <<<"$s3"
echo "  (answered $(((t1 - t0) / 1000000)) ms after psql started, exit status $s3_rc)"
grep -q '53300' <<<"$s3" || fail "session 3 was not rejected with SQLSTATE 53300"

heading "Wait for sessions 1 and 2"
for pid in "${BG_PIDS[@]}"; do
	wait "$pid" || fail "session 1 or 2 failed: $(cat "$DEMO/s1.out" "$DEMO/s2.out")"
done
BG_PIDS=()
sed 's/^/  /' "$DEMO/s1.out" "$DEMO/s2.out"
echo "Session 2 ran as soon as session 1 returned the slot."

heading "SELECT * FROM dbgate.status"
psql_admin -x -c "SELECT * FROM dbgate.status"
counts=$(value "SELECT admitted, admitted_after_wait, rejected_full, active, queued
	FROM dbgate.status WHERE budget = 'reporting'")
[[ $counts == "2|1|1|0|0" ]] ||
	fail "expected admitted 2, admitted_after_wait 1, rejected_full 1," \
		"active 0, queued 0; got $counts"
echo "demo: dbgate admitted, queued and rejected as configured"
