#!/usr/bin/env bash
# test/bench/shares.sh — parent budgets (1.2): how a parent's slots are
# shared by weight, whether an idle child's slots are used by the others
# (work-conserving), what the tree costs in throughput against one budget,
# and a bulkhead that lends its slots while the interactive side is idle;
# (1.3) a reservation that keeps a slot of the parent for the interactive
# side.
#
# Usage (as root; as another user only with --no-install):
#   test/bench/shares.sh                 # 12 s per point, 3 repetitions (~10 min)
#   test/bench/shares.sh --quick         # 3 s per point, 1 repetition
#   test/bench/shares.sh --reps 5 --out DIR
#
# Options:
#   --scenario LIST   shares, bulkhead, reserve (default shares,bulkhead)
#   --duration S      seconds of the measured part of a point (default 12)
#   --reps N          repetitions of every point (default 3)
#   --scale N         pgbench scale factor (default 10)
#   --clients N       clients of A and of B each (default 32)
#   --statements LIST the ~1 ms statement of A and B: cpu (a range sum over
#                     pgbench_accounts, calibrated to ~1 ms for one client as
#                     run.sh does), sleep (SELECT pg_sleep(0.001): holds its
#                     slot without using a CPU) or both (default cpu,sleep)
#   --range-width N   width of the cpu statement (default: calibrated)
#   --heavy-rows N    reporting flood: SELECT count(*) FROM generate_series(1, N)
#                     (default 300000)
#   --reserve-rate R  reserve: statements per second of the 4 interactive
#                     clients together (default 100)
#   --out DIR         results directory (default test/bench/results/shares)
#   --no-install      do not apt-get anything, do not build (assume installed)
#   --no-build        do not run make && make install in the repository
#   --quick           3 s per point, 1 repetition, short calibration
#
# One cluster with PostgreSQL's default settings (parallel query on) and
# dbgate preloaded; pgbench -i at SCALE.  Budgets:
#   shares (max_active 8) parent of  a (max_active 8, weight 3)  role a_user
#                                    b (max_active 8, weight 1)  role b_user
#   flat (max_active 8): a_user and b_user together, for the throughput
#   pool4 (max_active 4) parent of   inter (max_active 4, weight 10)  role interactive
#                                    rep (max_active 4, weight 1)     role reporting
# Every child has max_queued 64, 'fifo'.  dbgate.status and
# dbgate.wait_histogram are sampled every 100 ms during each point.
#
# Scenario shares, points per repetition (alternating order), for each
# statement (the cpu statement cannot fill 8 slots when the clients and the
# server share a few cores: the sleep statement shows the weights whatever
# the machine):
#   a8    A alone with 8 clients through the tree (never queues in A):
#         A's statement time, p99 from pgbench's per-transaction log
#   tree  A's clients start; DURATION/3 s later (at least 3 s) B's start;
#         both run DURATION s together.  A's time-averaged active while
#         alone; B's first admissions (the first transaction of each of its
#         clients, and B's histogram at its first sample with an
#         admission); A's, B's and their sum's time-averaged active while
#         both run (targets 6 +- 0.5, 2 +- 0.5, >= 7.6); admissions per
#         second of A + B while both run
#   flat  the same clients, both roles in one budget of 8: admissions per
#         second of the same window, against tree's
# Scenario bulkhead, points per repetition:
#   alone          interactive (pgbench -S, 4 clients) alone for DURATION s
#   flood          reporting (32 clients of the flood query) starts 3 s
#                  before interactive and ends after it: interactive p99
#                  against alone; reporting's active in the 3 s (interactive
#                  idle) and while interactive runs
#   flood-cap3     the same with reporting's max_active 3: one slot of the
#                  parent is always left to interactive (no borrowing of it)
#   flood-ungated  the same with both roles in no budget (reference)
# Scenario reserve (1.3, item 4 of issue 28): rpool (max_active 4) parent
# of rinter (max_active 1, role interactive) and rrep (max_active 4, role
# reporting); reporting: 16 clients of SELECT pg_sleep(0.03), starting 3 s
# before interactive and ending after it; interactive: 4 clients of SELECT
# pg_sleep(0.001) at --reserve-rate statements per second together (so
# that it seldom has two at once: its own max_active 1 then holds the
# second back, not reporting).  Points per repetition:
#   reserve     rinter reserved => 1: interactive's wait_time_max (target
#               <= 1 ms)
#   noreserve   the same without the reservation: interactive waits for
#               reporting's 30 ms statements
#   cap3        no reservation, reporting's max_active 3: reporting's
#               throughput with 3 slots of its own, against reserve's
#               (target >= 0.95 x)
# Where the installed dbgate has no 'reserved', the scenario is skipped with
# a line that says so.
#
# Output in OUT: summary.md (printed), runs.csv (one row per point and
# repetition), raw/ (pgbench output, samples-*.txt, server log).
set -euo pipefail

BENCH_NAME=shares
BENCH_OUT_DEFAULT=repo
BENCH_ROLES="a_user b_user interactive reporting"
# shellcheck source=test/bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SCENARIOS=shares,bulkhead
STATEMENTS=cpu,sleep
DUR=12
REPS=3
CAL_DUR=4
SCALE=10
NCLI=32
RANGE_WIDTH=
HEAVY_ROWS=300000
RESERVE_RATE=100
OUT=

while [ $# -gt 0 ]; do
	case "$1" in
	--scenario) SCENARIOS=$2; shift ;;
	--duration) DUR=$2; shift ;;
	--reps) REPS=$2; shift ;;
	--scale) SCALE=$2; shift ;;
	--clients) NCLI=$2; shift ;;
	--statements) STATEMENTS=$2; shift ;;
	--range-width) RANGE_WIDTH=$2; shift ;;
	--heavy-rows) HEAVY_ROWS=$2; shift ;;
	--reserve-rate) RESERVE_RATE=$2; shift ;;
	--out) OUT=$2; shift ;;
	--no-install) INSTALL=0; BUILD=0 ;;
	--no-build) BUILD=0 ;;
	--quick) DUR=3; REPS=1; CAL_DUR=2 ;;
	-h | --help) usage; exit 0 ;;
	*) die "unknown option $1 (see --help)" ;;
	esac
	shift
done
for s in ${SCENARIOS//,/ }; do
	case "$s" in shares | bulkhead | reserve) ;; *) die "unknown scenario '$s'" ;; esac
done
for s in ${STATEMENTS//,/ }; do
	case "$s" in cpu | sleep) ;; *) die "unknown statement '$s' (cpu or sleep)" ;; esac
done
want() { case ",$SCENARIOS," in *",$1,"*) return 0 ;; esac; return 1; }
need_ints "$DUR" "$REPS" "$SCALE" "$NCLI" "$HEAVY_ROWS" "$RESERVE_RATE" ${RANGE_WIDTH:+"$RANGE_WIDTH"}
need_root

bench_install
bench_build
bench_tools
bench_dirs
rm -f "$OUT/runs.csv" "$OUT/summary.md" "$OUT/meta.txt"
PORT=5461
ALONE=$((DUR / 3 > 3 ? DUR / 3 : 3))   # A alone before B starts
LEAD=3                                  # flood alone before interactive starts

sql() { psql_at "$PORT" postgres -c "$1"; }
budget() { sql "SELECT dbgate.create_budget($1)" >/dev/null; }
assign() { # role budget
	sql "SELECT dbgate.assign_role('$1', '$2')" >/dev/null
}
unassign() { # role
	sql "SELECT dbgate.unassign_role('$1') FROM dbgate.budgets WHERE '$1' = ANY(roles)" >/dev/null
}

log "creating the cluster in $WORK (scale $SCALE)"
cluster_create data "$PORT" <<-EOF
	shared_preload_libraries = 'dbgate'
EOF
cluster_start data
as_pg "$PGBIN/createdb" -h "$WORK" -p "$PORT" "$DB"
"$PGBIN/pgbench" -i -q -s "$SCALE" -h "$WORK" -p "$PORT" -U postgres "$DB" >"$RAW/pgbench-init.log" 2>&1
sql "CREATE EXTENSION dbgate"
bench_loaded
for r in $BENCH_ROLES; do
	sql "CREATE ROLE $r LOGIN; GRANT SELECT ON pgbench_accounts, pgbench_branches, pgbench_tellers TO $r"
done
sql "VACUUM ANALYZE"
sql "CHECKPOINT"
budget "'shares', 8"
budget "'a', 8, 64, parent => 'shares', weight => 3"
budget "'b', 8, 64, parent => 'shares', weight => 1"
budget "'flat', 8, 128"
budget "'pool4', 4"
budget "'inter', 4, 64, parent => 'pool4', weight => 10"
budget "'rep', 4, 64, parent => 'pool4', weight => 1"
budget "'rpool', 4"
budget "'rinter', 1, 64, parent => 'rpool'"
budget "'rrep', 4, 64, parent => 'rpool'"
# 'reserved' (1.3): an argument of alter_budget where the installed dbgate has it
HAS_RESERVED=$(sql "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
	WHERE n.nspname = 'dbgate' AND p.proname = 'alter_budget' AND 'reserved' = ANY(p.proargnames)")

echo "SELECT count(*) FROM generate_series(1, $HEAVY_ROWS);" >"$WORK/heavy.sql"
echo "SELECT pg_sleep(0.001);" >"$WORK/sleep.sql"
echo "SELECT pg_sleep(0.03);" >"$WORK/sleep30.sql"
LAT_RANGE= LAT_HEAVY= LAT_S= LAT_SLEEP=
if want shares; then
	case ",$STATEMENTS," in *,cpu,*) calibrate_range "$PORT" a_user ;; esac
	case ",$STATEMENTS," in *,sleep,*) LAT_SLEEP=$(one_client_p50 "$PORT" a_user sleep -f "$WORK/sleep.sql") ;; esac
fi
if want bulkhead; then
	LAT_S=$(one_client_p50 "$PORT" interactive select-only -S)
	LAT_HEAVY=$(one_client_p50 "$PORT" reporting heavy -f "$WORK/heavy.sql")
fi
log "one client p50 (ungated):${LAT_RANGE:+ range($RANGE_WIDTH) $LAT_RANGE us}${LAT_SLEEP:+ pg_sleep(0.001) $LAT_SLEEP us}${LAT_S:+ pgbench -S $LAT_S us}${LAT_HEAVY:+ flood $LAT_HEAVY us}"

{
	meta_common
	echo "mode=$DUR s per point, $REPS repetition(s), pgbench scale $SCALE, $NCLI clients each for A and B, A alone $ALONE s before B, flood alone $LEAD s before interactive"
	echo "statements=${LAT_RANGE:+cpu: SELECT sum(abalance) FROM pgbench_accounts WHERE aid BETWEEN :a AND :a + $RANGE_WIDTH ($LAT_RANGE us with one client); }${LAT_SLEEP:+sleep: SELECT pg_sleep(0.001) ($LAT_SLEEP us); }${LAT_S:+interactive: pgbench -S ($LAT_S us); }${LAT_HEAVY:+flood: SELECT count(*) FROM generate_series(1, $HEAVY_ROWS) ($LAT_HEAVY us)}"
	echo "server=PostgreSQL's defaults (parallel query on) but max_connections 200; unix sockets"
} >"$OUT/meta.txt"

CSV="scenario,group,contender,rep,t0,t1,t2,tps_a,tps_b,p50_a_ms,p99_a_ms,p99_b_ms,first_b_ms,first_b_p50_ms,first_b_max_ms,first_b_n,wait_max_a_ms,over1_a,admitted_a,other_cpu_pct,status,note"
echo "$CSV" >"$OUT/runs.csv"
ms() { awk -v v="${1:-}" 'BEGIN { if (v == "" || v == "nan") print ""; else printf "%.3f", v / 1000 }'; }

# After a point: every slot back, nothing refused or canceled; notes go to NOTE.
check_budgets() { # budget...
	local b row
	for b in "$@"; do
		row=$(sql "SELECT active, queued, rejected_full, rejected_timeout, canceled_waiting
			FROM dbgate.status WHERE budget = '$b'")
		[ "$row" = "0|0|0|0|0" ] || NOTE="${NOTE:+$NOTE; }$b: active|queued|rejected_full|rejected_timeout|canceled_waiting = $row"
	done
}

# shares point: STATEMENT:CONTENDER, CONTENDER = a8 | tree | flat
shares_point() {
	local grp=${1%%:*} con=${1#*:} rep=$2 t0 t1 t2 pa pb
	local tag="shares-$grp-$con-r$rep" samples="$RAW/samples-shares-$grp-$con-r$rep.txt"
	local stmt=$WORK/range.sql
	[ "$grp" = sleep ] && stmt=$WORK/sleep.sql
	STATUS=ok NOTE=
	case "$con" in
	a8 | tree) assign a_user a; assign b_user b ;;
	flat) assign a_user flat; assign b_user flat ;;
	esac
	sql "SELECT dbgate.reset_stats()" >/dev/null
	sampler_start "$samples" "$PORT" a b shares flat
	cpu_begin
	local TPS_A= TPS_B= P50_A= P99_A= P99_B= FIRST=(nan nan nan 0)
	if [ "$con" = a8 ]; then
		t0=$(server_epoch "$PORT")
		run_pgbench "$tag-a" "$PORT" a_user 8 "$DUR" 1 -f "$stmt"
		t1=$(server_epoch "$PORT") t2=$t1
		TPS_A=$R_TPS P50_A=$(ms "$R_P50") P99_A=$(ms "$R_P99")
		[ "$R_STATUS" = ok ] || { STATUS=$R_STATUS NOTE=$R_NOTE; }
	else
		t0=$(server_epoch "$PORT")
		pgbench_bg "$tag-a" "$PORT" a_user "$NCLI" -T $((ALONE + DUR + 2)) -l "--log-prefix=$TXLOG/$tag-a" -f "$stmt"
		pa=$BG_PID
		sleep "$ALONE"
		t1=$(server_epoch "$PORT")
		pgbench_bg "$tag-b" "$PORT" b_user "$NCLI" -T "$DUR" -l "--log-prefix=$TXLOG/$tag-b" -f "$stmt"
		pb=$BG_PID
		pgbench_wait "$tag-b" "$pb"
		t2=$(server_epoch "$PORT")
		TPS_B=$R_TPS P99_B=$(ms "$R_P99")
		[ "$R_STATUS" = ok ] || { STATUS=$R_STATUS NOTE=$R_NOTE; }
		read -r -a FIRST < <(python3 "$HERE/report.py" firsts "$TXLOG/$tag-b".*)
		pgbench_wait "$tag-a" "$pa"
		TPS_A=$R_TPS P50_A=$(ms "$R_P50") P99_A=$(ms "$R_P99")
		[ "$R_STATUS" = ok ] || { STATUS=$R_STATUS NOTE="${NOTE:+$NOTE; }$R_NOTE"; }
		rm -f "$TXLOG/$tag"-[ab].*
	fi
	wait_idle "$PORT" || NOTE="${NOTE:+$NOTE; }sessions still connected 15 s after the run; terminated"
	cpu_end
	sampler_stop
	check_budgets a b flat
	echo "shares,$grp,$con,$rep,$t0,$t1,$t2,$TPS_A,$TPS_B,$P50_A,$P99_A,$P99_B,${FIRST[0]},${FIRST[1]},${FIRST[2]},${FIRST[3]},,,,$R_OTHER,$STATUS,${NOTE//,/;}" >>"$OUT/runs.csv"
	log "shares $grp $con rep $rep: A ${TPS_A:-?} tps p99 ${P99_A:-?} ms${TPS_B:+; B $TPS_B tps, first admissions ${FIRST[0]} ms (first to finish) / ${FIRST[2]} ms (last of $NCLI clients)}; other processes ${R_OTHER}% CPU $STATUS${NOTE:+ — $NOTE}"
}

# bulkhead point: alone | flood | flood-cap3 | flood-ungated
bulkhead_point() {
	local con=$1 rep=$2 tag="bulkhead-$1-r$2" t0 t1 t2 pf
	local samples="$RAW/samples-bulkhead-$con-r$rep.txt"
	STATUS=ok NOTE=
	if [ "$con" = flood-ungated ]; then
		unassign interactive; unassign reporting
	else
		assign interactive inter; assign reporting rep
	fi
	local cap=4
	[ "$con" = flood-cap3 ] && cap=3
	sql "SELECT dbgate.alter_budget('rep', max_active => $cap)" >/dev/null
	sql "SELECT dbgate.reset_stats()" >/dev/null
	sampler_start "$samples" "$PORT" inter rep pool4
	cpu_begin
	local TPS_A= TPS_B= P50_A= P99_A=
	t0=$(server_epoch "$PORT")
	if [ "$con" != alone ]; then
		pgbench_bg "$tag-flood" "$PORT" reporting 32 -T $((LEAD + DUR + 2)) -f "$WORK/heavy.sql"
		pf=$BG_PID
		sleep "$LEAD"
	fi
	t1=$(server_epoch "$PORT")
	run_pgbench "$tag" "$PORT" interactive 4 "$DUR" 1 -S
	t2=$(server_epoch "$PORT")
	TPS_A=$R_TPS P50_A=$(ms "$R_P50") P99_A=$(ms "$R_P99")
	[ "$R_STATUS" = ok ] || { STATUS=$R_STATUS NOTE=$R_NOTE; }
	if [ "$con" != alone ]; then
		pgbench_wait "$tag-flood" "$pf"
		TPS_B=$R_TPS
		[ "$R_STATUS" = ok ] || { STATUS=$R_STATUS NOTE="${NOTE:+$NOTE; }$R_NOTE"; }
	fi
	wait_idle "$PORT" || NOTE="${NOTE:+$NOTE; }sessions still connected 15 s after the run; terminated"
	cpu_end
	sampler_stop
	check_budgets inter rep
	echo "bulkhead,,$con,$rep,$t0,$t1,$t2,$TPS_A,$TPS_B,$P50_A,$P99_A,,,,,,,,,$R_OTHER,$STATUS,${NOTE//,/;}" >>"$OUT/runs.csv"
	log "bulkhead $con rep $rep: interactive ${TPS_A:-?} tps p99 ${P99_A:-?} ms${TPS_B:+; reporting $TPS_B tps}; other processes ${R_OTHER}% CPU $STATUS${NOTE:+ — $NOTE}"
}

# reserve point: reserve | noreserve | cap3
reserve_point() {
	local con=$1 rep=$2 tag="reserve-$1-r$2" t0 t1 t2 pf
	local samples="$RAW/samples-reserve-$con-r$rep.txt"
	STATUS=ok NOTE=
	assign interactive rinter; assign reporting rrep
	local res=0 cap=4
	[ "$con" = reserve ] && res=1
	[ "$con" = cap3 ] && cap=3
	sql "SELECT dbgate.alter_budget('rinter', reserved => $res)" >/dev/null
	sql "SELECT dbgate.alter_budget('rrep', max_active => $cap)" >/dev/null
	sql "SELECT dbgate.reset_stats()" >/dev/null
	sampler_start "$samples" "$PORT" rinter rrep rpool
	cpu_begin
	local TPS_A= TPS_B= P50_A= P99_A= WMAX= ADM= OVER1=
	t0=$(server_epoch "$PORT")
	pgbench_bg "$tag-flood" "$PORT" reporting 16 -T $((LEAD + DUR + 2)) -f "$WORK/sleep30.sql"
	pf=$BG_PID
	sleep "$LEAD"
	t1=$(server_epoch "$PORT")
	run_pgbench "$tag" "$PORT" interactive 4 "$DUR" 1 -R "$RESERVE_RATE" -f "$WORK/sleep.sql"
	t2=$(server_epoch "$PORT")
	TPS_A=$R_TPS P50_A=$(ms "$R_P50") P99_A=$(ms "$R_P99")
	[ "$R_STATUS" = ok ] || { STATUS=$R_STATUS NOTE=$R_NOTE; }
	# the longest wait, the admissions and those that waited over 1 ms
	# (the histogram is cumulative)
	IFS='|' read -r WMAX ADM OVER1 < <(sql "SELECT round(s.wait_time_max::numeric, 3), s.admitted,
		(SELECT max(count) - min(count) FROM dbgate.wait_histogram h
		 WHERE h.budget = s.budget AND h.le_ms IN (1, 'Infinity'))
		FROM dbgate.status s WHERE s.budget = 'rinter'")
	pgbench_wait "$tag-flood" "$pf"
	TPS_B=$R_TPS
	[ "$R_STATUS" = ok ] || { STATUS=$R_STATUS NOTE="${NOTE:+$NOTE; }$R_NOTE"; }
	wait_idle "$PORT" || NOTE="${NOTE:+$NOTE; }sessions still connected 15 s after the run; terminated"
	cpu_end
	sampler_stop
	check_budgets rinter rrep
	echo "reserve,,$con,$rep,$t0,$t1,$t2,$TPS_A,$TPS_B,$P50_A,$P99_A,,,,,,$WMAX,$OVER1,$ADM,$R_OTHER,$STATUS,${NOTE//,/;}" >>"$OUT/runs.csv"
	log "reserve $con rep $rep: interactive ${TPS_A:-?} tps p99 ${P99_A:-?} ms wait_time_max ${WMAX:-?} ms (${OVER1:-?} of ${ADM:-?} waited over 1 ms); reporting ${TPS_B:-?} tps; other processes ${R_OTHER}% CPU $STATUS${NOTE:+ — $NOTE}"
}

START=$(date +%s)
if want shares; then
	log "scenario shares: A (weight 3) and B (weight 1) under a parent of 8, $NCLI clients each"
	pts=()
	for s in ${STATEMENTS//,/ }; do pts+=("$s:a8" "$s:tree" "$s:flat"); done
	repeat_points shares_point "${pts[@]}"
fi
if want bulkhead; then
	log "scenario bulkhead: interactive (weight 10) and reporting (weight 1) under a parent of 4"
	repeat_points bulkhead_point alone flood flood-cap3 flood-ungated
fi
rm -f "$OUT/reserve-skipped.txt"
if want reserve; then
	if [ "$HAS_RESERVED" = 1 ]; then
		log "scenario reserve: interactive (max_active 1, reserved 1 or 0) and reporting (16 clients of 30 ms) under a parent of 4"
		repeat_points reserve_point reserve noreserve cap3
	else
		log "scenario reserve skipped: the installed dbgate has no 'reserved' (1.3)"
		echo "the installed dbgate has no 'reserved' argument of alter_budget (1.3)" >"$OUT/reserve-skipped.txt"
	fi
fi
echo "load average at end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/meta.txt"
log "done in $(( ($(date +%s) - START) / 60 )) min; results in $OUT"
rc=0
python3 "$HERE/report.py" shares "$OUT" || rc=$?
[ $rc -eq 0 ] || exit 3
