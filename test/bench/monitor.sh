#!/usr/bin/env bash
# test/bench/monitor.sh — what the monitoring views show while a standing
# queue builds and drains: dbgate.status (queued, active, oldest_wait) and
# dbgate.wait_histogram sampled every 100 ms, plotted over time.
#
# Usage (as root; as another user only with --no-install):
#   test/bench/monitor.sh                # 'fifo' and 'lifo', ~1.5 min
#   test/bench/monitor.sh --orders lifo --max-active 2 --out DIR
#
# Options:
#   --orders LIST     queue orders to picture, one run each (default fifo,lifo)
#   --max-active N    the budget's max_active (default 4)
#   --sleep-ms MS     each statement is SELECT pg_sleep(MS / 1000): it holds
#                     its slot MS ms without using a CPU (default 20), so the
#                     picture does not depend on the machine's speed
#   --calm S          seconds of base load before the burst (default 3)
#   --burst S         seconds of the burst (default 6)
#   --after S         seconds of base load after the burst (default 9)
#   --out DIR         results directory (default test/bench/results/monitor)
#   --no-install      do not apt-get anything, do not build (assume installed)
#   --no-build        do not run make && make install in the repository
#
# One cluster with PostgreSQL's default settings and dbgate preloaded; role
# "bench" in budget "mon" (max_active B, max_queued 256, fair).  The budget
# serves at most B / (MS / 1000) statements per second (200/s by default).
# Two pgbench processes with fixed arrival rates (-R; -L 200 skips a
# statement instead of sending it once it is 200 ms behind its schedule, so
# that clients held up by the queue do not catch up afterwards), so that the
# queue follows the offered load, not the clients' patience:
#   base   16 clients at 70 % of that capacity for the whole run
#   burst  112 clients at 120 % of it, from CALM s to CALM + BURST s
# Together they offer 190 % of the capacity during the burst: a standing
# queue builds up to the clients available, then drains at 30 % of the
# capacity once the burst ends.  A psql samples dbgate.status and
# dbgate.wait_histogram every 100 ms throughout (lib.sh sampler_start).
#
# Output in OUT, per order O: monitor-O.png (top: queued, active and
# oldest_wait over time; bottom: how long the statements admitted in each
# 100 ms waited, from the differences of consecutive histograms), the data
# (queue-O.dat, hist-O.dat, phases-O.dat), summary.md (printed), raw/.
set -euo pipefail

BENCH_NAME=monitor
BENCH_OUT_DEFAULT=repo
BENCH_ROLES=bench
# shellcheck source=test/bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ORDERS=fifo,lifo
B=4
SLEEP_MS=20
CALM=3
BURST=6
AFTER=9
OUT=

while [ $# -gt 0 ]; do
	case "$1" in
	--orders) ORDERS=$2; shift ;;
	--max-active) B=$2; shift ;;
	--sleep-ms) SLEEP_MS=$2; shift ;;
	--calm) CALM=$2; shift ;;
	--burst) BURST=$2; shift ;;
	--after) AFTER=$2; shift ;;
	--out) OUT=$2; shift ;;
	--no-install) INSTALL=0; BUILD=0 ;;
	--no-build) BUILD=0 ;;
	-h | --help) usage; exit 0 ;;
	*) die "unknown option $1 (see --help)" ;;
	esac
	shift
done
for o in ${ORDERS//,/ }; do
	case "$o" in fifo | lifo) ;; *) die "unknown queue order '$o' (fifo or lifo)" ;; esac
done
need_ints "$B" "$SLEEP_MS" "$CALM" "$BURST" "$AFTER"
need_root

bench_install gnuplot-nox
bench_build
bench_tools
bench_dirs
rm -f "$OUT"/*.png "$OUT"/*.dat "$OUT/summary.md" "$OUT/meta.txt"
PORT=5481
CAP=$((B * 1000 / SLEEP_MS))                   # statements per second the budget serves
BASE_RATE=$((CAP * 70 / 100))
BURST_RATE=$((CAP * 120 / 100))
TOTAL=$((CALM + BURST + AFTER))

sql() { psql_at "$PORT" postgres -c "$1"; }

log "creating the cluster in $WORK"
cluster_create data "$PORT" <<-EOF
	shared_preload_libraries = 'dbgate'
	max_connections = 300
EOF
cluster_start data
as_pg "$PGBIN/createdb" -h "$WORK" -p "$PORT" "$DB"
sql "CREATE EXTENSION dbgate; CREATE ROLE bench LOGIN"
bench_loaded
sql "SELECT dbgate.create_budget('mon', $B, 256)" >/dev/null
sql "SELECT dbgate.assign_role('bench', 'mon')" >/dev/null
awk -v ms="$SLEEP_MS" 'BEGIN { printf "SELECT pg_sleep(%.3f);\n", ms / 1000 }' >"$WORK/stmt.sql"

{
	meta_common
	echo "load=budget mon: max_active $B, max_queued 256; statement SELECT pg_sleep($SLEEP_MS ms), capacity $CAP/s; base 16 clients at $BASE_RATE/s for $TOTAL s; burst 112 clients at $BURST_RATE/s from $CALM s for $BURST s"
	echo "server=PostgreSQL's defaults but max_connections 300; unix sockets"
} >"$OUT/meta.txt"

picture() { # order
	local o=$1 pb pu t0 t1 t2 t3 note=
	sql "SELECT dbgate.alter_budget('mon', queue_order => '$o')" >/dev/null
	sql "SELECT dbgate.reset_stats('mon')" >/dev/null
	log "$o: base load $BASE_RATE/s for $TOTAL s, burst $BURST_RATE/s from $CALM s for $BURST s"
	sampler_start "$RAW/samples-$o.txt" "$PORT" mon
	t0=$(server_epoch "$PORT")
	pgbench_bg "base-$o" "$PORT" bench 16 -T "$TOTAL" -R "$BASE_RATE" -L 200 -f "$WORK/stmt.sql"
	pb=$BG_PID
	sleep "$CALM"
	t1=$(server_epoch "$PORT")
	pgbench_bg "burst-$o" "$PORT" bench 112 -T "$BURST" -R "$BURST_RATE" -L 200 -f "$WORK/stmt.sql"
	pu=$BG_PID
	pgbench_wait "burst-$o" "$pu"
	[ "$R_STATUS" = ok ] || note="$R_NOTE"
	t2=$(server_epoch "$PORT")
	pgbench_wait "base-$o" "$pb"
	[ "$R_STATUS" = ok ] || note="${note:+$note; }$R_NOTE"
	t3=$(server_epoch "$PORT")
	sleep 0.5
	sampler_stop
	wait_idle "$PORT" || note="${note:+$note; }sessions still connected 15 s after the run; terminated"
	# t1: burst starts; t2: its last statement has returned
	echo "$o $t0 $t1 $t2 $t3 $B $SLEEP_MS $BURST ${note//[ ]/_}" >"$OUT/phases-$o.dat"
	python3 "$HERE/report.py" monitor-data "$OUT" "$o"
	if [ -n "$GNUPLOT" ]; then
		local bs be
		bs=$(awk -v a="$t1" -v b="$t0" 'BEGIN { printf "%.3f", a - b }')
		be=$(awk -v a="$bs" -v d="$BURST" 'BEGIN { printf "%.3f", a + d }')
		"$GNUPLOT" -e "dir='$OUT'; order='$o'; bstart=$bs; bend=$be; B=$B; ms=$SLEEP_MS" \
			"$HERE/monitor.gp" 2>>"$RAW/gnuplot.log" ||
			echo "monitor.sh: plot failed (see raw/gnuplot.log)" >&2
	fi
}

for o in ${ORDERS//,/ }; do picture "$o"; done
echo "load average at end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/meta.txt"
rc=0
python3 "$HERE/report.py" monitor "$OUT" || rc=$?
log "results in $OUT"
[ $rc -eq 0 ] || exit 3
