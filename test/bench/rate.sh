#!/usr/bin/env bash
# test/bench/rate.sh — max_rate and rate_burst (1.2): how exactly a budget
# keeps its rate, what a burst after an idle period gets, what statements
# waiting for a token cost the server, and which limit governs when a budget
# has both max_active and max_rate.
#
# Usage (as root; as another user only with --no-install):
#   test/bench/rate.sh                   # 10 s windows, 3 repetitions (~8 min)
#   test/bench/rate.sh --quick           # 3 s windows, 1 repetition
#   test/bench/rate.sh --scenario accuracy,burst --reps 5 --out DIR
#
# Options:
#   --scenario LIST   accuracy, burst, waiting, governs (default all four)
#   --window S        seconds of every measured window (default 10)
#   --reps N          repetitions of every point (default 3; burst: twice
#                     as many)
#   --rates LIST      accuracy: max_rate values (default 50,500,5000)
#   --bursts LIST     accuracy: rate_burst values (default 1,10: 1 is the
#                     target's; 10 shows what a bucket of a few tokens does
#                     with the time a woken waiter needs to take its token)
#   --out DIR         results directory (default test/bench/results/rate)
#   --no-install      do not apt-get anything, do not build (assume installed)
#   --no-build        do not run make && make install in the repository
#   --quick           3 s windows, 1 repetition
#
# One cluster with PostgreSQL's default settings and dbgate preloaded; the
# role "bench" is moved between budgets (all fair, 'fifo', max_queued 64).
# A window starts 1.5 s after the clients and is read from dbgate.status by
# the server's clock (clock_timestamp() and the counters in one query), so
# connection set-up and pgbench's start and end are outside it.
#
#   accuracy  32 clients of SELECT 1 on budgets of max_active 32 and max_rate
#             50, 500, 5000 (rate_burst 1, then 10): admitted in the window against
#             max_rate x window (target: within 2 % plus the burst); the queue
#             length is sampled every 100 ms to show that the clients kept
#             the budget busy (a queue that runs empty measures the clients)
#   burst     max_rate 10, rate_burst 50, max_active 64: after an idle period
#             long enough to refill the bucket (at least 2 s), 51 clients send
#             one SELECT 1 each at once: the time until the first 50 are all
#             admitted, and the 51st's wait against 1 / max_rate (100 ms);
#             from pgbench's per-transaction log and dbgate.status
#   waiting   max_rate 10: the CPU time of the cluster's processes (from
#             /proc/<pid>/stat) with 64 clients queued against 1 client at
#             the same admitted rate and an idle server: what the waiting
#             costs beyond the work admitted
#   governs   32 clients of SELECT pg_sleep(0.01): max_active 8 with max_rate
#             100 (the rate is tighter: ~100/s) and max_active 1 with
#             max_rate 1000 (the slot is tighter: ~1 / statement time)
#
# Output in OUT: summary.md (printed), runs.csv, raw/ (pgbench output,
# samples-*.txt, server log).
set -euo pipefail

BENCH_NAME=rate
BENCH_OUT_DEFAULT=repo
BENCH_ROLES=bench
# shellcheck source=test/bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SCENARIOS=accuracy,burst,waiting,governs
WINDOW=10
REPS=3
RATES=50,500,5000
BURSTS=1,10
OUT=

while [ $# -gt 0 ]; do
	case "$1" in
	--scenario) SCENARIOS=$2; shift ;;
	--window) WINDOW=$2; shift ;;
	--reps) REPS=$2; shift ;;
	--rates) RATES=$2; shift ;;
	--bursts) BURSTS=$2; shift ;;
	--out) OUT=$2; shift ;;
	--no-install) INSTALL=0; BUILD=0 ;;
	--no-build) BUILD=0 ;;
	--quick) WINDOW=3; REPS=1 ;;
	-h | --help) usage; exit 0 ;;
	*) die "unknown option $1 (see --help)" ;;
	esac
	shift
done
for s in ${SCENARIOS//,/ }; do
	case "$s" in accuracy | burst | waiting | governs) ;; *) die "unknown scenario '$s'" ;; esac
done
want() { case ",$SCENARIOS," in *",$1,"*) return 0 ;; esac; return 1; }
need_ints "$WINDOW" "$REPS" ${RATES//,/ } ${BURSTS//,/ }
need_root

bench_install
bench_build
bench_tools
bench_dirs
rm -f "$OUT/runs.csv" "$OUT/summary.md" "$OUT/meta.txt"
PORT=5471
WARM=1.5

sql() { psql_at "$PORT" postgres -c "$1"; }

log "creating the cluster in $WORK"
cluster_create data "$PORT" <<-EOF
	shared_preload_libraries = 'dbgate'
EOF
cluster_start data
as_pg "$PGBIN/createdb" -h "$WORK" -p "$PORT" "$DB"
sql "CREATE EXTENSION dbgate; CREATE ROLE bench LOGIN"
bench_loaded
echo 'SELECT 1;' >"$WORK/select1.sql"
echo 'SELECT pg_sleep(0.01);' >"$WORK/sleep10.sql"
sql "SELECT dbgate.create_budget('r', 32, 64)" >/dev/null
sql "SELECT dbgate.assign_role('bench', 'r')" >/dev/null

# set_budget ARGS: the budget's fields (named arguments of alter_budget);
# every change of max_rate or rate_burst fills its bucket.
set_budget() { sql "SELECT dbgate.alter_budget('r', $1)" >/dev/null; }

# counters: "epoch admitted rate_limited admitted_after_wait active_time_total
# wait_time_max queued active" of budget r, read at one instant
counters() {
	sql "SELECT extract(epoch FROM clock_timestamp()), admitted, rate_limited, admitted_after_wait,
		active_time_total, wait_time_max, queued, active FROM dbgate.status WHERE budget = 'r'" | tr '|' ' '
}

{
	meta_common
	echo "mode=$WINDOW s windows, $REPS repetition(s), windows start $WARM s after the clients"
	echo "server=PostgreSQL's defaults but max_connections 200; unix sockets"
} >"$OUT/meta.txt"
CSV="scenario,contender,rep,t0,t1,window_s,admitted,admitted_per_s,max_rate,max_active,rate_limited,admitted_after_wait,wait_time_max_ms,mean_hold_ms,server_cpu_pct,first50_ms,last_ms,start_spread_ms,other_cpu_pct,status,note"
echo "$CSV" >"$OUT/runs.csv"

# After a point: slots back, nothing refused or canceled.
check_budget() {
	local row
	row=$(sql "SELECT active, queued, rejected_full, rejected_timeout, canceled_waiting
		FROM dbgate.status WHERE budget = 'r'")
	[ "$row" = "0|0|0|0|0" ] || NOTE="${NOTE:+$NOTE; }active|queued|rejected_full|rejected_timeout|canceled_waiting = $row"
}

# window_point SCENARIO CONTENDER REP CLIENTS SCRIPT MAX_RATE MAX_ACTIVE LABEL [BURST]:
# pgbench for WARM + WINDOW + 2 s, counters read WARM s after its start and
# WINDOW s later; also the server's CPU over the window and, for the
# accuracy points, samples of the queue.  Appends to runs.csv and logs.
window_point() {
	local scn=$1 con=$2 rep=$3 clients=$4 script=$5 rate=$6 active=$7 label=$8 burst=${9:-1} pid
	local tag="$scn-$con-r$rep"
	STATUS=ok NOTE=
	set_budget "max_active => $active, max_rate => $rate, rate_burst => $burst"
	sql "SELECT dbgate.reset_stats('r')" >/dev/null
	[ "$scn" = accuracy ] && sampler_start "$RAW/samples-$tag.txt" "$PORT" r
	cpu_begin
	local dur
	dur=$(awk -v w="$WINDOW" -v a="$WARM" 'BEGIN { printf "%d", w + a + 2.5 }')
	if [ "$clients" -gt 0 ]; then
		pgbench_bg "$tag" "$PORT" bench "$clients" -T "$dur" -f "$script"
		pid=$BG_PID
	fi
	sleep "$WARM"
	local c0 c1 k0 k1
	read -r -a c0 < <(counters)
	k0=$(server_ticks data)
	sleep "$WINDOW"
	read -r -a c1 < <(counters)
	k1=$(server_ticks data)
	if [ "$clients" -gt 0 ]; then
		pgbench_wait "$tag" "$pid"
		[ "$R_STATUS" = ok ] || { STATUS=$R_STATUS NOTE=$R_NOTE; }
	else
		sleep 2.5
	fi
	sampler_stop
	wait_idle "$PORT" || NOTE="${NOTE:+$NOTE; }sessions still connected 15 s after the run; terminated"
	cpu_end
	check_budget
	local line
	line=$(python3 - "$OUT/runs.csv" "$scn,$con,$rep" "$rate" "$active" "$k0" "$k1" "$CLK_TCK" "$R_OTHER" "$STATUS" "${NOTE//,/;}" "${c0[@]}" "${c1[@]}" <<-'EOF'
		import sys
		out, key, rate, active, k0, k1, hz, other, status, note = sys.argv[1:11]
		c0 = [float(x) for x in sys.argv[11:19]]
		c1 = [float(x) for x in sys.argv[19:27]]
		secs = c1[0] - c0[0]
		adm = c1[1] - c0[1]
		hold = (c1[4] - c0[4]) / adm if adm else float("nan")
		cpu = 100.0 * (int(k1) - int(k0)) / float(hz) / secs
		with open(out, "a") as f:
		    f.write("%s,%.6f,%.6f,%.3f,%d,%.2f,%s,%s,%d,%d,%.1f,%.3f,%.2f,,,,%s,%s,%s\n" % (
		        key, c0[0], c1[0], secs, adm, adm / secs, rate, active, c1[2] - c0[2], c1[3] - c0[3],
		        c1[5], hold, cpu, other, status, note))
		print("%d admitted in %.2f s = %.1f/s (max_rate %s, max_active %s), server CPU %.1f %% of one core"
		      % (adm, secs, adm / secs, rate, active, cpu))
	EOF
	)
	log_point "$scn" "$label" "$rep" "$line, other processes ${R_OTHER}% CPU"
}

log_point() { log "$1 $2 rep $3: $4${NOTE:+ — $NOTE}"; }

accuracy_point() { # RATE-bBURST rep
	local rate=${1%-b*} burst=${1#*-b}
	window_point accuracy "$1" "$2" 32 "$WORK/select1.sql" "$rate" 32 "max_rate $rate, rate_burst $burst" "$burst"
}

# waiting point: idle | one | many
waiting_point() {
	local n
	case "$1" in idle) n=0 ;; one) n=1 ;; many) n=64 ;; esac
	window_point waiting "$1" "$2" "$n" "$WORK/select1.sql" 10 64 "$1 ($n clients)"
}

# governs point: rate (max_active 8, max_rate 100) | slot (1, 1000)
governs_point() {
	case "$1" in
	rate) window_point governs rate "$2" 32 "$WORK/sleep10.sql" 100 8 "rate-bound" ;;
	slot) window_point governs slot "$2" 32 "$WORK/sleep10.sql" 1000 1 "slot-bound" ;;
	esac
}

# burst point: 51 clients, one SELECT 1 each, at once, after the bucket of
# 50 had time to fill
burst_point() {
	local rep=$2 tag="burst-r$2"
	STATUS=ok NOTE=
	local idle
	idle=$(awk 'BEGIN { v = 50 / 10 + 0.5; if (v < 2) v = 2; print v }')
	sql "SELECT dbgate.reset_stats('r')" >/dev/null
	sleep "$idle"
	cpu_begin
	run_pgbench "$tag" "$PORT" bench 51 - keep -t 1 -f "$WORK/select1.sql"
	[ "$R_STATUS" = ok ] || { STATUS=$R_STATUS NOTE=$R_NOTE; }
	wait_idle "$PORT" || NOTE="${NOTE:+$NOTE; }sessions still connected 15 s after the run; terminated"
	cpu_end
	check_budget
	local c
	read -r -a c < <(counters)
	local b
	b=$(python3 - "$TXLOG/$tag".* <<-'EOF'
		import sys
		tx = []
		for p in sys.argv[1:]:
		    for line in open(p):
		        w = line.split()
		        if len(w) >= 6:
		            lat = int(w[2]) / 1e6
		            end = int(w[4]) + int(w[5]) / 1e6
		            tx.append((end - lat, end, lat))
		tx.sort(key=lambda x: x[1])
		t0 = min(x[0] for x in tx)
		first50 = max(x[1] for x in tx[:50]) - t0
		last = tx[-1][2]
		spread = max(x[0] for x in tx) - t0
		print("%.3f %.3f %.3f %d" % (first50 * 1000, last * 1000, spread * 1000, len(tx)))
	EOF
	)
	rm -f "$TXLOG/$tag".*
	local f50 last spr n
	read -r f50 last spr n <<<"$b"
	[ "$n" = 51 ] || NOTE="${NOTE:+$NOTE; }$n transactions logged, not 51"
	echo "burst,burst50,$rep,,,,${c[1]},,10,64,${c[2]},${c[3]},${c[5]},,,$f50,$last,$spr,$R_OTHER,$STATUS,${NOTE//,/;}" >>"$OUT/runs.csv"
	log_point burst "rate_burst 50" "$rep" "first 50 admitted and done within $f50 ms of the first start (starts spread over $spr ms); the 51st took $last ms; server: admitted ${c[1]}, after a wait ${c[3]}, rate_limited ${c[2]}, longest wait ${c[5]} ms"
}

START=$(date +%s)
if want accuracy; then
	log "scenario accuracy: 32 clients of SELECT 1, max_rate $RATES, rate_burst $BURSTS"
	pts=()
	for b in ${BURSTS//,/ }; do
		for r in ${RATES//,/ }; do pts+=("$r-b$b"); done
	done
	repeat_points accuracy_point "${pts[@]}"
fi
if want burst; then
	log "scenario burst: max_rate 10, rate_burst 50, 51 statements at once"
	set_budget "max_active => 64, max_rate => 10, rate_burst => 50"
	REPS=$((2 * REPS)) repeat_points burst_point burst
fi
if want waiting; then
	log "scenario waiting: max_rate 10, server CPU with 0, 1 and 64 clients"
	repeat_points waiting_point idle one many
fi
if want governs; then
	log "scenario governs: SELECT pg_sleep(0.01), max_active 8 / max_rate 100 and max_active 1 / max_rate 1000"
	repeat_points governs_point rate slot
fi
echo "load average at end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/meta.txt"
log "done in $(( ($(date +%s) - START) / 60 )) min; results in $OUT"
rc=0
python3 "$HERE/report.py" rate "$OUT" || rc=$?
[ $rc -eq 0 ] || exit 3
