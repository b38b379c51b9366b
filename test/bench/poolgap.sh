#!/usr/bin/env bash
# test/bench/poolgap.sh — the gate against PgBouncer at 32 and 64 clients
# (issue 50): the throughput and p99 of the ungated server, the best dbgate
# budget and the best PgBouncer pool, and, for the 64-client cells at the
# same B, where a slot's time goes on each side.
#
# Usage (as root; as another user only with --no-install --no-diag):
#   test/bench/poolgap.sh                # ~100 min
#   test/bench/poolgap.sh --quick        # tooling check: 3 s points, 1 repetition
#   test/bench/poolgap.sh --reps 5 --duration 6 --tpcb-b 2,4 --select-b 2,4,8
#
# Options:
#   --cells LIST      of tpcb-c32, tpcb-c64, select-c64, selectp-c64 (default all)
#   --tpcb-b LIST     budget max_active of the TPC-B cells (default 2,4,8)
#   --tpcb-pools LIST PgBouncer pool sizes of the TPC-B cells (default: --tpcb-b's)
#   --select-b LIST   budget max_active of the pgbench -S cells (default 2,4,8)
#   --select-pools LIST  pool sizes of the -S cells (default: --select-b's)
#   --duration S      seconds per measured point (default 8)
#   --reps N          repetitions of every point (default 5; 0: the diagnosis only)
#   --diag-b-tpcb B   B of the TPC-B diagnosis (default 2)
#   --diag-b-select B B of the -S diagnosis (default 4)
#   --diag-reps N     repetitions of the diagnosis (default 3; 0: none)
#   --diag-duration S seconds of a diagnosis run (default 40: under load the
#                     psql reads around the window took 10 s and more with -S)
#   --trace-secs S    length of the diagnosis's scheduler trace (default 2;
#                     the cycles of the tail need more: 6 gives ~60 per
#                     backend at 1,500 TPS over 64 clients)
#   --overtake-limit MS  the 'lifo' budgets' overtake_limit (default 100)
#   --no-perf         the diagnosis without perf (no trace, no profile)
#   --huge-pages      the server with huge_pages = on (200 huge pages of
#                     2 MB reserved in vm.nr_hugepages for the run, given
#                     back at its end); default PostgreSQL's try
#   --out DIR         results directory (default test/bench/results/poolgap)
#   --no-install      do not apt-get anything, do not build (assume installed)
#   --no-build        do not run make && make install in the repository
#   --quick           5 s points, 1 repetition, 1 diagnosis repetition of 16 s
#
# One cluster with PostgreSQL's default settings (fsync on, parallel query
# on) but max_connections = 200, dbgate preloaded, unix sockets only.  The
# cells (issue 50):
#   tpcb-c32, tpcb-c64    pgbench's TPC-B-like script, scale 1, 32 / 64
#                         clients
#   select-c64            pgbench -S, scale 10, 64 clients
#   selectp-c64           pgbench -S -M prepared, scale 10, 64 clients; the
#                         pool's clients -M extended (PgBouncer 1.18, Debian
#                         12's, keeps no prepared statement in transaction
#                         pooling: "prepared statement P_0 already exists")
# Contenders of a cell, alternated within each repetition (forwards in odd,
# backwards in even ones):
#   ungated      role "bench" in no budget
#   fifo-B       (TPC-B only) a 'fifo' budget of max_active B, max_queued 64,
#                scope 'transaction'
#   lifo-B       the same with queue_order 'lifo' (overtake_limit 100 ms,
#                or --overtake-limit's);
#                for -S scope 'statement'
#   nonfair-B    'fifo' with fair => false (a newcomer takes a free slot
#                while others wait); scope as lifo-B's
#   bouncer-B    PgBouncer, transaction pooling, pool size B, over its unix
#                socket, in front of the same cluster (role ungated)
# The summary takes, per case, the best budget and the best pool (highest
# median TPS) and the median of the ratios within each repetition.
#
# The diagnosis (64-client cells; each repetition alternates the sides):
# TPC-B fifo-B, lifo-B and bouncer-B; -S lifo-B and bouncer-B, at the same
# B.  During each run, once the clients have connected:
#   - a window of /proc (poolgap.py window): the CPU (utime+stime and
#     schedstat's run time), the time runnable but waiting for a CPU
#     (schedstat) and the context switches (/proc/PID/status) of the
#     role's backends, summed, and /proc/stat's procs_running every 10 ms;
#     PgBouncer's and pgbench's CPU; dbgate.status before and after (slot
#     time: active_time_total / admitted); transactions: the pgbench log's
#     ends inside the window; other processes' CPU as everywhere;
#   - a 2 s trace (perf record -a) of sched_switch, sched_wakeup and uprobes
#     on dbgate.so (gate()'s return: the slot is held; dbgate_admit_slow():
#     the backend queues; dbgate_admission_return(): the slot goes back),
#     read by poolgap.py trace into the time on a CPU / runnable / asleep
#     per phase, and per cycle of a backend (one slot return to the next,
#     one transaction here) into its time outside, queued and in the slot:
#     their percentiles, where the slowest 1 % of cycles spent their time,
#     and how many grants overtook an earlier waiter;
#   - the latency percentiles of the transactions that ended in the window
#     (pgbench's per-transaction log), and whether its slowest 1 % cluster
#     in a few 100 ms bins (stalls) or spread over the window;
#   - a 3 s cpu-clock profile (perf record -a), its top entries by command
#     and shared object, and by symbol (raw/perf-*.top, *.sym).
#
# Output: OUT/summary.md (also printed), OUT/runs.csv, OUT/diag.csv,
# OUT/meta.txt, OUT/raw/ (pgbench output, diagnosis JSON, perf reports).
set -euo pipefail

BENCH_NAME=poolgap
BENCH_OUT_DEFAULT=repo
BENCH_ROLES=bench
BOUNCER_USERS="bench postgres"
# shellcheck source=test/bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CELLS=tpcb-c32,tpcb-c64,select-c64,selectp-c64
TPCB_B=2,4,8
SELECT_B=2,4,8
TPCB_POOLS=
SELECT_POOLS=
DUR=8
REPS=5
DIAG_B_TPCB=2
DIAG_B_SELECT=4
DIAG_REPS=3
DIAG_DUR=40
TRACE_SECS=2
OVERTAKE=100
PERF=1
HUGE=
OUT=

while [ $# -gt 0 ]; do
	case "$1" in
	--cells) CELLS=$2; shift ;;
	--tpcb-b) TPCB_B=$2; shift ;;
	--select-b) SELECT_B=$2; shift ;;
	--tpcb-pools) TPCB_POOLS=$2; shift ;;
	--select-pools) SELECT_POOLS=$2; shift ;;
	--duration) DUR=$2; shift ;;
	--reps) REPS=$2; shift ;;
	--diag-b-tpcb) DIAG_B_TPCB=$2; shift ;;
	--diag-b-select) DIAG_B_SELECT=$2; shift ;;
	--diag-reps) DIAG_REPS=$2; shift ;;
	--diag-duration) DIAG_DUR=$2; shift ;;
	--trace-secs) TRACE_SECS=$2; shift ;;
	--overtake-limit) OVERTAKE=$2; shift ;;
	--no-perf) PERF=0 ;;
	--huge-pages) HUGE=on ;;
	--out) OUT=$2; shift ;;
	--no-install) INSTALL=0; BUILD=0 ;;
	--no-build) BUILD=0 ;;
	--quick) DUR=5; REPS=1; DIAG_REPS=1; DIAG_DUR=16 ;;
	-h | --help) usage; exit 0 ;;
	*) die "unknown option $1 (see --help)" ;;
	esac
	shift
done
TPCB_POOLS=${TPCB_POOLS:-$TPCB_B}
SELECT_POOLS=${SELECT_POOLS:-$SELECT_B}
need_ints "$TRACE_SECS" "$OVERTAKE" ${TPCB_POOLS//,/ } ${SELECT_POOLS//,/ } "$DUR" "$DIAG_B_TPCB" "$DIAG_B_SELECT" "$DIAG_DUR" ${TPCB_B//,/ } ${SELECT_B//,/ }
[[ "$DIAG_REPS" =~ ^[0-9]+$ ]] && [[ "$REPS" =~ ^[0-9]+$ ]] || die "--reps and --diag-reps take an integer"
[ "$DIAG_DUR" -ge $((14 + TRACE_SECS)) ] ||
	die "--diag-duration must be at least $((14 + TRACE_SECS)) (connections, a 4 s window, a $TRACE_SECS s trace, a 3 s profile)"
for c in ${CELLS//,/ }; do
	case "$c" in tpcb-c32 | tpcb-c64 | select-c64 | selectp-c64) ;; *) die "unknown cell '$c'" ;; esac
done
has_cell() { case ",$CELLS," in *",$1,"*) return 0 ;; esac; return 1; }
need_root

bench_install pgbouncer
[ "$PERF" = 1 ] && [ "$DIAG_REPS" -gt 0 ] && [ "$INSTALL" = 1 ] && ! command -v perf >/dev/null &&
	bench_install linux-perf
bench_build
bench_tools
[ -x "$BOUNCER" ] || die "pgbouncer not found"
if [ "$PERF" = 1 ] && [ "$DIAG_REPS" -gt 0 ]; then
	command -v perf >/dev/null || die "perf not found (install linux-perf, or --no-perf)"
	[ "$(id -u)" = 0 ] || die "the diagnosis's perf needs root (or --no-perf)"
fi
bench_dirs
rm -f "$OUT/runs.csv" "$OUT/diag.csv" "$OUT/summary.md"
[ -n "$HUGE" ] && bench_huge_pages 200
PORT=5453
SO=$("$PG_CONFIG" --pkglibdir)/dbgate.so
PROBES=0

sql() { psql_at "$PORT" postgres -c "$1"; }

# the uprobes go with the script
probes_del() {
	[ "$PROBES" = 1 ] || return 0
	perf probe -q -d 'probe_dbgate:*' >/dev/null 2>&1 || true
	PROBES=0
}
# set +e first: under set -e the (exit $rc) that hands bench_cleanup the
# status would end the trap before it stops the servers
trap 'rc=$?; set +e; probes_del; (exit $rc); bench_cleanup' EXIT

log "creating the cluster in $WORK"
cluster_create data "$PORT" <<-EOF
	shared_preload_libraries = 'dbgate'
	${HUGE:+huge_pages = on}
EOF
cluster_start data
as_pg "$PGBIN/createdb" -h "$WORK" -p "$PORT" "$DB"
sql "CREATE EXTENSION dbgate; CREATE ROLE bench LOGIN"
bench_loaded
for B in $(echo "${TPCB_B//,/ } ${SELECT_B//,/ } $DIAG_B_TPCB $DIAG_B_SELECT" | tr ' ' '\n' | sort -un); do
	sql "SELECT dbgate.create_budget('fifo_tx_$B', max_active => $B, max_queued => 64, scope => 'transaction')" >/dev/null
	sql "SELECT dbgate.create_budget('lifo_tx_$B', max_active => $B, max_queued => 64,
		scope => 'transaction', queue_order => 'lifo', overtake_limit => '$OVERTAKE ms')" >/dev/null
	sql "SELECT dbgate.create_budget('lifo_stmt_$B', max_active => $B, max_queued => 64,
		queue_order => 'lifo', overtake_limit => '$OVERTAKE ms')" >/dev/null
	sql "SELECT dbgate.create_budget('nonfair_tx_$B', max_active => $B, max_queued => 64,
		scope => 'transaction', fair => false)" >/dev/null
	sql "SELECT dbgate.create_budget('nonfair_stmt_$B', max_active => $B, max_queued => 64,
		fair => false)" >/dev/null
done

if [ "$PERF" = 1 ] && [ "$DIAG_REPS" -gt 0 ]; then
	perf probe -q -d 'probe_dbgate:*' >/dev/null 2>&1 || true
	PROBES=1
	perf probe -q -x "$SO" -a 'gate%return' -a dbgate_admit_slow -a dbgate_admission_return \
		>"$RAW/perf-probe.log" 2>&1 || die "perf probe on $SO failed (see $RAW/perf-probe.log; or --no-perf)"
fi

assign() { # budget or ''
	if [ -z "$1" ]; then
		sql "SELECT dbgate.unassign_role('bench') FROM dbgate.budgets WHERE 'bench' = ANY(roles)" >/dev/null
	else
		sql "SELECT dbgate.assign_role('bench', '$1')" >/dev/null
	fi
}

# cell_args CELL: sets CLIENTS and ARGS (pgbench) and BUDGET_KIND
cell_args() {
	case $1 in
	tpcb-c32) CLIENTS=32 ARGS=() KIND=tx ;;
	tpcb-c64) CLIENTS=64 ARGS=() KIND=tx ;;
	select-c64) CLIENTS=64 ARGS=(-S) KIND=stmt ;;
	selectp-c64) CLIENTS=64 ARGS=(-S -M prepared) KIND=stmt ;;
	esac
}

# contender_start CONTENDER: assigns the role, starts PgBouncer; sets
# C_PORT and C_BUDGET
contender_start() {
	local c=$1
	C_PORT=$PORT C_BUDGET=
	case $c in
	ungated) ;;
	fifo-*) C_BUDGET=fifo_tx_${c#fifo-} ;;
	lifo-*) C_BUDGET=lifo_${KIND}_${c#lifo-} ;;
	nonfair-*) C_BUDGET=nonfair_${KIND}_${c#nonfair-} ;;
	bouncer-*)
		bouncer_start "${c#bouncer-}" "$PORT"
		C_PORT=$PORT_BOUNCER
		# PgBouncer before 1.21 keeps no prepared statements across the
		# server connections of transaction pooling
		[ "$CELL" = selectp-c64 ] && ARGS=(-S -M extended)
		;;
	esac
	assign "$C_BUDGET"
	[ -z "$C_BUDGET" ] || sql "SELECT dbgate.reset_stats('$C_BUDGET')" >/dev/null
}

# gate_counters BUDGET: "admitted|admitted_after_wait|active_time_total|active|queued|peak_active"
gate_counters() {
	sql "SELECT admitted, admitted_after_wait, round(active_time_total::numeric, 3), active, queued,
		peak_active FROM dbgate.status WHERE budget = '$1'"
}

# run_point CONTENDER REP (CELL global): one measured run; appends to runs.csv
run_point() {
	local c=$1 rep=$2 tag=$CELL-$1-r$2
	cell_args "$CELL"
	contender_start "$c"
	cpu_begin
	run_pgbench "$tag" "$C_PORT" bench "$CLIENTS" "$DUR" keep ${ARGS[@]+"${ARGS[@]}"}
	[ "$R_STATUS" = ok ] || log "run $tag: $R_STATUS $R_NOTE (see $RAW/$tag.txt)"
	# the latency without the run's first second (every backend's first
	# transactions, caches empty)
	local s50=nan s99=nan
	if compgen -G "$TXLOG/$tag.*" >/dev/null; then
		read -r _ s50 s99 < <(python3 "$HERE/poolgap.py" steady 1 "$TXLOG/$tag".*)
		rm -f "$TXLOG/$tag".*
	fi
	[ "${c%%-*}" = bouncer ] && bouncer_stop
	wait_idle "$PORT" || R_NOTE="${R_NOTE:+$R_NOTE; }sessions still connected 15 s after the run; terminated"
	cpu_end
	local adm='' aw='' att='' act='' q='' peak='' p50 p99
	if [ -n "$C_BUDGET" ]; then
		IFS='|' read -r adm aw att act q peak < <(gate_counters "$C_BUDGET")
		if [ "$act" != 0 ] || [ "$q" != 0 ] || [ "$peak" -gt "${c#*-}" ]; then
			R_STATUS=error R_NOTE="${R_NOTE:+$R_NOTE; }inconsistent counters: active $act queued $q peak_active $peak"
		fi
	fi
	p50=$(awk -v v="${R_P50:-}" 'BEGIN { if (v == "" || v == "nan") print "nan"; else printf "%.2f", v / 1000 }')
	p99=$(awk -v v="${R_P99:-}" 'BEGIN { if (v == "" || v == "nan") print "nan"; else printf "%.2f", v / 1000 }')
	s50=$(awk -v v="$s50" 'BEGIN { if (v == "" || v == "nan") print "nan"; else printf "%.2f", v / 1000 }')
	s99=$(awk -v v="$s99" 'BEGIN { if (v == "" || v == "nan") print "nan"; else printf "%.2f", v / 1000 }')
	echo "$CELL,$CLIENTS,$c,$rep,${R_TPS:-nan},$p99,$p50,$s99,$s50,${R_PROC:-},$adm,$aw,$att,$R_OTHER,$R_STATUS,${R_NOTE//,/;}" >>"$OUT/runs.csv"
	[ "$R_STATUS" = ok ] || ANOMALIES+=("$tag: $R_NOTE")
	log "$tag: tps ${R_TPS:-?} p99 $p99 ms (after the first second $s99 ms)${C_BUDGET:+ admitted $adm after wait $aw}, other processes ${R_OTHER}% CPU"
}

# wait_connected N: until N sessions of role bench are on the server (10 s)
wait_connected() {
	local i
	for i in $(seq 100); do
		[ "$(sql "SELECT count(*) FROM pg_stat_activity WHERE usename = 'bench'")" -ge "$1" ] && return 0
		sleep 0.1
	done
	return 1
}

# diag_point CONTENDER REP (CELL global): one diagnosis run; appends to diag.csv
diag_point() {
	local c=$1 rep=$2 tag=diag-$CELL-$1-r$2 nconn pids s0='' s1='' w tr='{}' t0 t1 ntx txs
	cell_args "$CELL"
	nconn=$CLIENTS
	contender_start "$c"
	[ "${c%%-*}" = bouncer ] && nconn=${c#bouncer-}
	cpu_begin
	pgbench_bg "$tag" "$C_PORT" bench "$CLIENTS" -T "$DIAG_DUR" -l "--log-prefix=$TXLOG/$tag" ${ARGS[@]+"${ARGS[@]}"}
	local pgb=$BG_PID
	wait_connected "$nconn" || log "$tag: only $(sql "SELECT count(*) FROM pg_stat_activity WHERE usename = 'bench'") of $nconn sessions after 10 s"
	sleep 1
	pids=$(sql "SELECT pid FROM pg_stat_activity WHERE usename = 'bench'" | tr '\n' ' ')
	local pb0 pb1 bp0=0 bp1=0
	pb0=$(python3 "$HERE/stats.py" ticks "$pgb")
	[ -n "$BOUNCER_PID" ] && bp0=$(python3 "$HERE/stats.py" ticks "$BOUNCER_PID")
	[ -n "$C_BUDGET" ] && s0=$(gate_counters "$C_BUDGET")
	# shellcheck disable=SC2086
	w=$(python3 "$HERE/poolgap.py" window 4 $pids)
	[ -n "$C_BUDGET" ] && s1=$(gate_counters "$C_BUDGET")
	pb1=$(python3 "$HERE/stats.py" ticks "$pgb")
	[ -n "$BOUNCER_PID" ] && bp1=$(python3 "$HERE/stats.py" ticks "$BOUNCER_PID")
	echo "$w" >"$RAW/$tag.window.json"
	echo "$pids" >"$RAW/$tag.pids"
	local early=''
	kill -0 "$pgb" 2>/dev/null || early="pgbench ended inside the window (--diag-duration too short for the connections)"
	if [ "$PERF" = 1 ]; then
		local pe=()
		[ "$PROBES" = 1 ] && pe=(-e 'probe_dbgate:*')
		perf record -q -o "$WORK/trace.data" -e sched:sched_switch -e sched:sched_wakeup \
			${pe[@]+"${pe[@]}"} -a sleep "$TRACE_SECS" >"$RAW/$tag.perf.log" 2>&1 || true
		perf record -q -o "$WORK/prof.data" -e cpu-clock -a sleep 3 >>"$RAW/$tag.perf.log" 2>&1 || true
		perf script -i "$WORK/trace.data" -F pid,tid,time,event,trace >"$WORK/trace.txt" 2>>"$RAW/$tag.perf.log" || true
		# shellcheck disable=SC2086
		tr=$(python3 "$HERE/poolgap.py" trace "$WORK/trace.txt" $pids)
		echo "$tr" >"$RAW/$tag.trace.json"
		perf report -i "$WORK/prof.data" --stdio --sort comm,dso --percent-limit 1.5 2>/dev/null |
			grep -v '^#' | grep -v '^$' | head -n 15 >"$RAW/perf-$tag.top" || true
		perf report -i "$WORK/prof.data" --stdio --comms postgres,pgbouncer --sort comm,dso,sym 2>/dev/null |
			grep -v '^#' | grep -v '^$' | head -n 40 >"$RAW/perf-$tag.sym" || true
		rm -f "$WORK/trace.data" "$WORK/prof.data" "$WORK/trace.txt"
	fi
	pgbench_wait "$tag" "$pgb"
	[ -z "$early" ] || R_STATUS=error R_NOTE="${R_NOTE:+$R_NOTE; }$early"
	[ "${c%%-*}" = bouncer ] && bouncer_stop
	wait_idle "$PORT" || R_NOTE="${R_NOTE:+$R_NOTE; }sessions still connected 15 s after the run; terminated"
	cpu_end
	t0=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["t0"])' "$w")
	t1=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["t1"])' "$w")
	txs=$(python3 "$HERE/poolgap.py" txstats "$t0" "$t1" "$TXLOG/$tag".*)
	ntx=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["n"])' "$txs")
	rm -f "$TXLOG/$tag".*
	local row
	row=$(python3 "$HERE/poolgap.py" diagrow "$w" "$tr" "$txs" "$s0" "$s1" "$c" "$CLK_TCK" "$((pb1 - pb0))" "$((bp1 - bp0))")
	[ -s "$OUT/diag.csv" ] || echo "cell,contender,rep,$(python3 "$HERE/poolgap.py" diagrow),other_cpu_pct,status" >"$OUT/diag.csv"
	echo "$CELL,$c,$rep,$row,$R_OTHER,$R_STATUS" >>"$OUT/diag.csv"
	[ "$R_STATUS" = ok ] || ANOMALIES+=("$tag: $R_NOTE")
	log "$tag: window $ntx transactions, other processes ${R_OTHER}% CPU"
}

point() { run_point "$1" "$2"; }
dpoint() { diag_point "$1" "$2"; }

contenders() { # cell
	local list pools B
	cell_args "$1"
	CONTENDERS=(ungated)
	if [ "$KIND" = tx ]; then list=$TPCB_B pools=$TPCB_POOLS; else list=$SELECT_B pools=$SELECT_POOLS; fi
	for B in ${list//,/ }; do
		[ "$KIND" = tx ] && CONTENDERS+=("fifo-$B")
		CONTENDERS+=("lifo-$B" "nonfair-$B")
	done
	for B in ${pools//,/ }; do CONTENDERS+=("bouncer-$B"); done
}

ANOMALIES=()
START=$(date +%s)
{
	meta_common
	echo "PgBouncer=$("$BOUNCER" --version 2>&1 | head -n 1 | sed 's/^PgBouncer //')"
	echo "mode=$DUR s per point, $REPS repetition(s), cells $CELLS, TPC-B B $TPCB_B pools $TPCB_POOLS, 'lifo' overtake_limit $OVERTAKE ms, -S B $SELECT_B pools $SELECT_POOLS; diagnosis: $DIAG_REPS repetition(s) of $DIAG_DUR s at B $DIAG_B_TPCB (TPC-B) and $DIAG_B_SELECT (-S), perf $([ "$PERF" = 1 ] && echo on || echo off)"
	echo "server=PostgreSQL's defaults (fsync on, synchronous_commit on, parallel query on) but max_connections 200${HUGE:+, huge_pages = on}; unix sockets; PgBouncer in transaction pooling mode over its unix socket; vm.nr_hugepages $(cat /proc/sys/vm/nr_hugepages)"
} >"$OUT/meta.txt"
echo "cell,clients,contender,rep,tps,p99_ms,p50_ms,p99_steady_ms,p50_steady_ms,transactions,admitted,admitted_after_wait,active_time_total_ms,other_cpu_pct,status,note" >"$OUT/runs.csv"
for SCALE in 1 10; do
	if [ "$SCALE" = 1 ]; then phase_cells="tpcb-c32 tpcb-c64"; else phase_cells="select-c64 selectp-c64"; fi
	any=0
	for CELL in $phase_cells; do has_cell "$CELL" && any=1; done
	[ $any = 1 ] || continue
	log "pgbench -i -s $SCALE"
	"$PGBIN/pgbench" -i -q -s "$SCALE" -h "$WORK" -p "$PORT" -U postgres "$DB" >"$RAW/init-s$SCALE.log" 2>&1
	sql "GRANT SELECT, INSERT, UPDATE ON pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history TO bench"
	sql "VACUUM ANALYZE" && sql "CHECKPOINT"
	for CELL in $phase_cells; do
		has_cell "$CELL" || continue
		contenders "$CELL"
		repeat_points point "${CONTENDERS[@]}"
	done
	[ "$DIAG_REPS" -gt 0 ] || continue
	for CELL in $phase_cells; do
		has_cell "$CELL" && [ "${CELL#*-}" = c64 ] || continue
		cell_args "$CELL"
		if [ "$KIND" = tx ]; then
			D=("fifo-$DIAG_B_TPCB" "lifo-$DIAG_B_TPCB" "bouncer-$DIAG_B_TPCB")
		else
			D=("lifo-$DIAG_B_SELECT" "bouncer-$DIAG_B_SELECT")
		fi
		REPS=$DIAG_REPS repeat_points dpoint "${D[@]}"
	done
done
echo "load average at end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/meta.txt"
probes_del
log "done in $(( ($(date +%s) - START) / 60 )) min; results in $OUT"

python3 "$HERE/poolgap.py" report "$OUT"
if [ ${#ANOMALIES[@]} -gt 0 ]; then
	{
		echo
		echo "## Anomalies"
		echo
		for a in "${ANOMALIES[@]}"; do echo "- $a"; done
	} | tee -a "$OUT/summary.md"
	exit 3
fi
