#!/bin/bash
#
# What the lock-holder check costs while many statements wait.
#
# Every statement queued for deadlock_timeout or longer checks whether a
# slot holder of its budget waits, directly or through other waits, for a
# lock it holds (see src/lockgraph.c).  The check calls pg_blocking_pids(),
# which takes every lock-manager partition lock.  The case where that is
# dearest: the slot holders themselves wait for a lock (here: a row lock
# held by a superuser's idle transaction), so every check has work to do,
# and N statements wait behind them.
#
# The script starts a throwaway cluster with the dbgate that is installed,
# a budget of 2 slots, 2 holders waiting for a row lock and N waiters
# (default 200), and measures the CPU time that the server's processes use
# in SECONDS (default 20) of that standstill, from /proc/<pid>/stat.
# Run it once per build to compare them.  It prints figures, not a verdict.
#
# Usage (as root, or as a user that can run PostgreSQL):
#     test/bench/lockcheck.sh [N] [SECONDS]
#
set -euo pipefail

N=${1:-200}
SECS=${2:-20}
PG_CONFIG=${PG_CONFIG:-pg_config}
BINDIR=$("$PG_CONFIG" --bindir)
if [ "$(id -u)" = 0 ]; then
	RUNAS=(runuser -u postgres --)
else
	RUNAS=()
fi

WORK=$(mktemp -d /tmp/dbgate-lockcheck.XXXXXX)
chmod 755 "$WORK"
[ "$(id -u)" = 0 ] && chown postgres "$WORK"
PORT=$((20000 + RANDOM % 20000))
PIDS=()
cleanup() {
	for p in ${PIDS[@]+"${PIDS[@]}"}; do kill "$p" 2>/dev/null || true; done
	"${RUNAS[@]}" "$BINDIR/pg_ctl" -D "$WORK/data" stop -m immediate >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT

"${RUNAS[@]}" "$BINDIR/initdb" -D "$WORK/data" -A trust >/dev/null
cat >>"$WORK/data/postgresql.conf" <<EOF
shared_preload_libraries = 'dbgate'
port = $PORT
unix_socket_directories = '$WORK'
listen_addresses = ''
max_connections = $((N + 50))
EOF
"${RUNAS[@]}" "$BINDIR/pg_ctl" -D "$WORK/data" -l "$WORK/log" -w start >/dev/null
psql_() { "${RUNAS[@]}" "$BINDIR/psql" -h "$WORK" -p "$PORT" -X -q -At "$@"; }

psql_ -d postgres <<EOF
CREATE EXTENSION dbgate;
CREATE ROLE lc_user LOGIN;
CREATE TABLE t (id int PRIMARY KEY, v int);
INSERT INTO t VALUES (1, 0);
GRANT SELECT, UPDATE ON t TO lc_user;
SELECT dbgate.create_budget('lc', max_active => 2, max_queued => $((N + 10)));
SELECT dbgate.assign_role('lc_user', 'lc');
EOF

# the superuser's idle transaction holds the row lock
mkfifo "$WORK/locker.in"
"${RUNAS[@]}" "$BINDIR/psql" -h "$WORK" -p "$PORT" -X -q -d postgres <"$WORK/locker.in" >/dev/null 2>&1 &
PIDS+=($!)
exec 3>"$WORK/locker.in"
echo "BEGIN; UPDATE t SET v = v + 1 WHERE id = 1;" >&3

# two slot holders wait for it
for i in 1 2; do
	psql_ -U lc_user -d postgres -c "UPDATE t SET v = v + 1 WHERE id = 1" >/dev/null 2>&1 &
	PIDS+=($!)
done
until [ "$(psql_ -d postgres -c "SELECT count(*) FROM dbgate.backends b JOIN pg_stat_activity a USING (pid) WHERE b.state = 'active' AND a.wait_event_type = 'Lock'")" = 2 ]; do
	sleep 0.2
done
# N statements queue behind them
for ((i = 0; i < N; i++)); do
	psql_ -U lc_user -d postgres -c "SELECT 1" >/dev/null 2>&1 &
	PIDS+=($!)
done
until [ "$(psql_ -d postgres -c "SELECT queued FROM dbgate.status WHERE budget = 'lc'")" = "$N" ]; do
	sleep 0.2
done
# every waiter past its first deadlock_timeout
sleep 2

server_ticks() {
	local pm total=0 p
	pm=$(head -n 1 "$WORK/data/postmaster.pid")
	for p in $pm $(pgrep -P "$pm"); do
		[ -r "/proc/$p/stat" ] || continue
		total=$((total + $(awk '{ print $14 + $15 }' "/proc/$p/stat")))
	done
	echo "$total"
}
hz=$(getconf CLK_TCK)
t0=$(server_ticks)
s0=$(date +%s.%N)
sleep "$SECS"
t1=$(server_ticks)
s1=$(date +%s.%N)

echo "dbgate $(psql_ -d postgres -c "SELECT extversion FROM pg_extension WHERE extname = 'dbgate'") library, PostgreSQL $("$PG_CONFIG" --version | awk '{ print $2 }')"
echo "waiters $N, slot holders 2 (both waiting for a row lock), deadlock_timeout $(psql_ -d postgres -c 'SHOW deadlock_timeout')"
awk -v t="$((t1 - t0))" -v hz="$hz" -v s0="$s0" -v s1="$s1" 'BEGIN {
	secs = s1 - s0
	printf "server CPU while nothing can move: %.2f s in %.1f s = %.1f %% of one core\n", t / hz, secs, 100 * t / hz / secs
}'
echo "lock-holder admissions (should be 0: nobody waits for itself): $(psql_ -d postgres -c "SELECT admitted_lock_holder FROM dbgate.status WHERE budget = 'lc'")"

echo "COMMIT;" >&3
exec 3>&-
