#!/usr/bin/env bash
# test/bench/adapt.sh — the adaptive limit (1.3): does a budget with
# adapt => 'on' find the knee of the throughput curve, and how fast?  Each
# case runs the adaptive budget beside fixed budgets of every size and the
# ungated server, alternating, and the targets of issue 31 are printed as
# checked lines.
#
# Usage (as root; as another user only with --no-install):
#   test/bench/adapt.sh                  # 20 s per point, 30 s phases, 3 reps (~45 min)
#   test/bench/adapt.sh --quick          # 3 s per point, 8 s phases, 1 rep (tooling check)
#   test/bench/adapt.sh --cases cpu,tpcb --reps 5 --out DIR
#
# Options:
#   --cases LIST      of cpu, sleep, shift, mixed, tpcb (default all)
#   --duration S      seconds of every point of cpu, sleep, mixed, tpcb (default 20)
#   --phase S         seconds of each of the three phases of shift (default 30)
#   --reps N          repetitions of every point (default 3)
#   --clients N       clients of every point (default 64)
#   --max-active N    max_active of the adaptive budget (default 64)
#   --fixed LIST      max_active of the fixed budgets (default 1,2,4,8,16,32,64)
#   --cpu-ms MS       the cpu statement's median latency for one client that
#                     the calibration aims at (default 5)
#   --width N         rows summed by the cpu statement (default: calibrated)
#   --out DIR         results directory (default test/bench/results/adapt)
#   --no-install      do not apt-get anything, do not build (assume installed)
#   --no-build        do not run make && make install in the repository
#   --quick           3 s per point, 8 s phases, 1 repetition, short calibration
# Environment: PG_CONFIG, BENCH_UNLOCK_FD (lib.sh: the lock held around the
# install is let go once the server runs with dbgate loaded).
#
# One cluster with PostgreSQL's default settings (fsync and
# synchronous_commit on) but max_connections 200 and dbgate preloaded;
# role bench with jit and parallel query off (one statement = one backend
# on at most one CPU, no compile time).  Database bench: pgbench -i -s 1
# and a table burn(id, v) of 1,000,000 rows.  Budgets: adaptive
# (max_active --max-active, adapt 'on', adapt_min 1; L is set back to
# max_active before every run by turning adapt off and on) and fixed_B for
# every B of --fixed; max_queued = clients, 'fifo', scope 'statement'.
#
# Statements (the cpu one calibrated like run.sh's ~1 ms query: the width
# is adjusted until one client's median latency is within 15 % of --cpu-ms):
#   cpu    SELECT sum(v) FROM burn WHERE id BETWEEN :a AND :a + W
#   sleep  SELECT pg_sleep(0.01), sum(v) over W/20 rows (a little CPU)
#   light  SELECT max(v) over W/100 rows (another query id, 1/100 the work)
# Cases, contenders of every point: adaptive, fixed-B, ungated:
#   cpu    64 clients of cpu: L settles within 10 s, TPS >= 0.95 x the best
#          fixed B, p99 <= 1.25 x that B's p99
#   sleep  64 clients of sleep: TPS >= 0.95 x fixed-64
#   mixed  64 clients of cpu and light, 50/50 (-f cpu.sql@1 -f light.sql@1):
#          L's standard deviation in the second half <= 0.2 x its mean,
#          TPS >= 0.9 x the best fixed B
#   tpcb   pgbench's built-in TPC-B-like script, scale 1: TPS >= 0.95 x the
#          best fixed B and >= 1.0 x ungated
#   shift  (adaptive only) sleep for PHASE s, cpu for PHASE s, sleep for
#          PHASE s, one pgbench per phase: L re-settles within 10 s after
#          each change; L over time in shift-rN.dat and shift.png
# L (dbgate.status.adaptive_limit) is sampled every 250 ms during every
# adaptive run.  "Settled" at t: from t to the end of the run (phase) L
# stays within +-25 % of its final median (the median of its last third).
# The instructions the statement path costs with adapt are measured by
# test/bench/instructions.sh (mode adapt), not here.
#
# Output in OUT: summary.md (printed), runs.csv (one row per run and
# repetition), meta.txt, shift-rN.dat and shift.png, raw/ (pgbench output,
# L samples, server log).
set -euo pipefail

BENCH_NAME=adapt
BENCH_OUT_DEFAULT=repo
BENCH_ROLES=bench
# shellcheck source=test/bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CASES=cpu,sleep,shift,mixed,tpcb
DUR=20
PHASE=30
REPS=3
CAL_DUR=4
NCLI=64
MAXA=64
FIXED=1,2,4,8,16,32,64
CPU_MS=5
WIDTH=
ROWS=1000000
SCALE=1
OUT=

while [ $# -gt 0 ]; do
	case "$1" in
	--cases) CASES=$2; shift ;;
	--duration) DUR=$2; shift ;;
	--phase) PHASE=$2; shift ;;
	--reps) REPS=$2; shift ;;
	--clients) NCLI=$2; shift ;;
	--max-active) MAXA=$2; shift ;;
	--fixed) FIXED=$2; shift ;;
	--cpu-ms) CPU_MS=$2; shift ;;
	--width) WIDTH=$2; shift ;;
	--out) OUT=$2; shift ;;
	--no-install) INSTALL=0; BUILD=0 ;;
	--no-build) BUILD=0 ;;
	--quick) DUR=3; PHASE=8; REPS=1; CAL_DUR=2 ;;
	-h | --help) usage; exit 0 ;;
	*) die "unknown option $1 (see --help)" ;;
	esac
	shift
done
for c in ${CASES//,/ }; do
	case "$c" in cpu | sleep | shift | mixed | tpcb) ;; *) die "unknown case '$c'" ;; esac
done
want() { case ",$CASES," in *",$1,"*) return 0 ;; esac; return 1; }
need_ints "$DUR" "$PHASE" "$REPS" "$NCLI" "$MAXA" "$CPU_MS" ${FIXED//,/ } ${WIDTH:+"$WIDTH"}
[ -z "$WIDTH" ] || [ "$WIDTH" -le $((ROWS / 2)) ] || die "--width at most $((ROWS / 2))"
need_root

bench_install gnuplot-nox
bench_build
bench_tools
bench_dirs
rm -f "$OUT/runs.csv" "$OUT/summary.md" "$OUT/meta.txt" "$OUT"/shift-r*.dat "$OUT/shift-phases.dat" "$OUT/shift.png"
PORT=5471

sql() { psql_at "$PORT" postgres -c "$1"; }
assign() { # budget or ''
	if [ -z "$1" ]; then
		sql "SELECT dbgate.unassign_role('bench') FROM dbgate.budgets WHERE 'bench' = ANY(roles)" >/dev/null
	else
		sql "SELECT dbgate.assign_role('bench', '$1')" >/dev/null
	fi
}

log "creating the cluster in $WORK"
cluster_create data "$PORT" <<-EOF
	shared_preload_libraries = 'dbgate'
EOF
cluster_start data
as_pg "$PGBIN/createdb" -h "$WORK" -p "$PORT" "$DB"
"$PGBIN/pgbench" -i -q -s "$SCALE" -h "$WORK" -p "$PORT" -U postgres "$DB" >"$RAW/pgbench-init.log" 2>&1
sql "CREATE EXTENSION dbgate"
bench_loaded
sql "CREATE ROLE bench LOGIN; ALTER ROLE bench SET jit = off; ALTER ROLE bench SET max_parallel_workers_per_gather = 0"
sql "GRANT SELECT, INSERT, UPDATE ON pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history TO bench"
sql "CREATE TABLE burn (id int PRIMARY KEY, v int NOT NULL);
	INSERT INTO burn SELECT g, g % 1000 FROM generate_series(1, $ROWS) g;
	GRANT SELECT ON burn TO bench" >/dev/null
sql "VACUUM ANALYZE"
sql "CHECKPOINT"
sql "SELECT dbgate.create_budget('adaptive', max_active => $MAXA, max_queued => $NCLI, adapt => 'on')" >/dev/null
for B in ${FIXED//,/ }; do
	sql "SELECT dbgate.create_budget('fixed_$B', max_active => $B, max_queued => $NCLI)" >/dev/null
done
# the data in shared buffers before anything is measured
sql "SELECT count(*) FROM burn" >/dev/null
sql "SELECT count(*) FROM pgbench_accounts" >/dev/null

# write_statements W: cpu.sql, sleep.sql, light.sql in WORK
write_statements() {
	local w=$1 ws=$(($1 / 20 > 1 ? $1 / 20 : 1)) wl=$(($1 / 100 > 1 ? $1 / 100 : 1))
	printf '\\set a random(1, %d)\nSELECT sum(v) FROM burn WHERE id BETWEEN :a AND :a + %d;\n' \
		$((ROWS - w)) "$w" >"$WORK/cpu.sql"
	printf '\\set a random(1, %d)\nSELECT pg_sleep(0.01), sum(v) FROM burn WHERE id BETWEEN :a AND :a + %d;\n' \
		$((ROWS - ws)) "$ws" >"$WORK/sleep.sql"
	printf '\\set a random(1, %d)\nSELECT max(v) FROM burn WHERE id BETWEEN :a AND :a + %d;\n' \
		$((ROWS - wl)) "$wl" >"$WORK/light.sql"
	cp "$WORK/cpu.sql" "$WORK/sleep.sql" "$WORK/light.sql" "$RAW/"
}

# calibrate: unless --width, adjust W until one ungated client's median
# latency of cpu.sql is within 15 % of CPU_MS (three tries); then the
# one-client medians of all three statements (LAT_CPU, LAT_SLEEP, LAT_LIGHT)
calibrate() {
	local w=${WIDTH:-25000} p i target=$((CPU_MS * 1000))
	assign ''
	write_statements "$w"
	if [ -z "$WIDTH" ]; then
		for i in 1 2 3; do
			p=$(one_client_p50 "$PORT" bench "cpu$i" -f "$WORK/cpu.sql")
			log "calibration: width $w -> p50 ${p} us (one client)"
			[ "$p" -ge $((target * 85 / 100)) ] && [ "$p" -le $((target * 115 / 100)) ] && break
			[ "$i" = 3 ] && break
			w=$(python3 -c "import sys; w=int(int(sys.argv[1])*int(sys.argv[3])/max(1,int(sys.argv[2]))); print(max(100, min(w, int(sys.argv[4])//2)))" \
				"$w" "$p" "$target" "$ROWS")
			write_statements "$w"
		done
	fi
	WIDTH=$w
	LAT_CPU=$(one_client_p50 "$PORT" bench cpu -f "$WORK/cpu.sql")
	LAT_SLEEP=$(one_client_p50 "$PORT" bench sleep -f "$WORK/sleep.sql")
	LAT_LIGHT=$(one_client_p50 "$PORT" bench light -f "$WORK/light.sql")
	log "statements: cpu ${LAT_CPU} us, sleep ${LAT_SLEEP} us, light ${LAT_LIGHT} us (one client, p50; width $WIDTH)"
}

# L sampler: every 250 ms epoch|adaptive_limit|active|queued|admitted of
# budget adaptive into FILE (SAMPLER_PID, stopped by lib.sh's sampler_stop).
lsampler_start() { # file
	sampler_stop
	printf '%s\n' "SELECT extract(epoch FROM clock_timestamp()), adaptive_limit, active, queued, admitted
		FROM dbgate.status WHERE budget = 'adaptive'" '\watch 0.25' >"$WORK/lsampler.sql"
	"$PGBIN/psql" -X -q -At -h "$WORK" -p "$PORT" -U postgres -d "$DB" -f "$WORK/lsampler.sql" \
		>"$1" 2>"$1.err" </dev/null &
	SAMPLER_PID=$!
	local i
	for i in $(seq 50); do
		[ -s "$1" ] && return 0
		sleep 0.05
	done
	die "the L sampler wrote nothing (see $1.err)"
}

# reset_budget BUDGET: counters reset; the adaptive one also starts again
# from L = max_active (a budget that starts to adapt starts there)
reset_budget() {
	if [ "$1" = adaptive ]; then
		sql "SELECT dbgate.alter_budget('adaptive', adapt => 'off')" >/dev/null
		sql "SELECT dbgate.alter_budget('adaptive', adapt => 'on')" >/dev/null
	fi
	sql "SELECT dbgate.reset_stats('$1')" >/dev/null
}

# check_budget BUDGET MAX: after a run (sessions gone) the slots are all
# back, nothing was refused or canceled, peak_active <= MAX and admitted >=
# the transactions pgbench counted.  Sets S_PEAK S_ADMITTED S_WAITED; adds
# to R_NOTE what is wrong.
check_budget() {
	local b=$1 max=$2 act q rej can bad=()
	IFS='|' read -r act q S_PEAK S_ADMITTED S_WAITED rej can < <(sql "SELECT active, queued, peak_active,
		admitted, admitted_after_wait, rejected_full + rejected_timeout, canceled_waiting
		FROM dbgate.status WHERE budget = '$b'")
	[ "$act" = 0 ] && [ "$q" = 0 ] || bad+=("active $act queued $q after the run")
	[ "$rej" = 0 ] || bad+=("$rej rejected")
	[ "$can" = 0 ] || bad+=("$can canceled while waiting")
	[ "$S_PEAK" -le "$max" ] || bad+=("peak_active $S_PEAK > $max")
	[ -z "$R_PROC" ] || [ "$S_ADMITTED" -ge "$R_PROC" ] || bad+=("admitted $S_ADMITTED < $R_PROC transactions")
	if [ ${#bad[@]} -gt 0 ]; then
		local s
		s=$(IFS=';'; echo "${bad[*]}")
		R_NOTE="${R_NOTE:+$R_NOTE; }budget $b: $s"
	fi
}

CSV_HEAD="case,contender,rep,tps,p50_ms,p99_ms,peak_active,admitted,waited_frac,l_final,l_settle_s,l_mean,l_sd,l_min,l_max,l_first,other_cpu_pct,status,note"
ms() { awk -v v="${1:-}" 'BEGIN { if (v == "" || v == "nan") print "nan"; else printf "%.2f", v / 1000 }'; }

# csv_row CASE CONTENDER REP LSTATS: one row of runs.csv from R_* and S_*
csv_row() {
	local wf note=${R_NOTE//,/;}
	wf=$(awk -v a="${S_ADMITTED:-}" -v w="${S_WAITED:-}" 'BEGIN { if (a == "" || a == 0) print "nan"; else printf "%.3f", w / a }')
	local ls=${4:-nan nan nan nan nan nan nan}
	echo "$1,$2,$3,${R_TPS:-nan},$(ms "$R_P50"),$(ms "$R_P99"),${S_PEAK:-},${S_ADMITTED:-},$wf,${ls// /,},$R_OTHER,$R_STATUS,$note" >>"$OUT/runs.csv"
}

# pgbench arguments of a case
case_args() {
	case $1 in
	cpu) echo "-f $WORK/cpu.sql" ;;
	sleep) echo "-f $WORK/sleep.sql" ;;
	mixed) echo "-f $WORK/cpu.sql@1 -f $WORK/light.sql@1" ;;
	tpcb) echo "-b tpcb-like" ;;
	esac
}

# run_point CONTENDER REP (CASE global): one pgbench run, appended to runs.csv
run_point() {
	local c=$1 rep=$2 budget='' max=0 tag="$CASE-$1-r$2" t0 t1 ls=
	case $c in
	adaptive) budget=adaptive max=$MAXA ;;
	fixed-*) budget=fixed_${c#fixed-} max=${c#fixed-} ;;
	esac
	assign "$budget"
	[ -z "$budget" ] || reset_budget "$budget"
	[ "$c" = adaptive ] && lsampler_start "$RAW/l-$tag.txt"
	cpu_begin
	t0=$(server_epoch "$PORT")
	# shellcheck disable=SC2046 # the case's arguments are words
	run_pgbench "$tag" "$PORT" bench "$NCLI" "$DUR" 1 $(case_args "$CASE")
	t1=$(server_epoch "$PORT")
	[ "$R_STATUS" = ok ] || log "run $tag: $R_STATUS $R_NOTE (see $RAW/$tag.txt)"
	if [ "$c" = adaptive ]; then
		sampler_stop
		ls=$(python3 "$HERE/adapt.py" lstats "$RAW/l-$tag.txt" "$t0" "$t1")
	fi
	wait_idle "$PORT" || R_NOTE="${R_NOTE:+$R_NOTE; }sessions still connected 15 s after the run; terminated"
	cpu_end
	S_PEAK='' S_ADMITTED='' S_WAITED=''
	[ -z "$budget" ] || check_budget "$budget" "$max"
	csv_row "$CASE" "$c" "$rep" "$ls"
	log "$tag: tps ${R_TPS:-?} p99 $(ms "$R_P99") ms${budget:+ peak_active $S_PEAK}${ls:+ L (final settle_s mean sd min max first) $ls}, other processes ${R_OTHER}% CPU${R_NOTE:+ -- $R_NOTE}"
}

# run_shift REP: sleep, cpu, sleep for PHASE s each through the adaptive
# budget, one pgbench per phase; L sampled throughout.  Rows shift,pN
# (per phase: its TPS, L's final median and settle time from the phase's
# start) and shift-rREP.dat.
run_shift() {
	local rep=$1 tag="shift-r$1" p st ph=() ls
	local phases=(sleep cpu sleep)
	assign adaptive
	reset_budget adaptive
	lsampler_start "$RAW/l-$tag.txt"
	cpu_begin
	for p in 0 1 2; do
		ph+=("$(server_epoch "$PORT")")
		# shellcheck disable=SC2046
		run_pgbench "$tag-p$((p + 1))" "$PORT" bench "$NCLI" "$PHASE" 1 $(case_args "${phases[p]}")
		st[p]=$R_STATUS
		[ "$R_STATUS" = ok ] || log "run $tag-p$((p + 1)): $R_STATUS $R_NOTE"
		PH_TPS[p]=${R_TPS:-nan} PH_P50[p]=${R_P50:-} PH_P99[p]=${R_P99:-} PH_NOTE[p]=$R_NOTE PH_PROC[p]=${R_PROC:-0}
	done
	ph+=("$(server_epoch "$PORT")")
	sampler_stop
	wait_idle "$PORT" || PH_NOTE[2]="${PH_NOTE[2]:+${PH_NOTE[2]}; }sessions still connected 15 s after the run; terminated"
	cpu_end
	R_PROC=$((PH_PROC[0] + PH_PROC[1] + PH_PROC[2]))
	R_NOTE=
	S_PEAK='' S_ADMITTED='' S_WAITED=''
	check_budget adaptive "$MAXA"
	local budget_note=$R_NOTE
	python3 "$HERE/adapt.py" dat "$RAW/l-$tag.txt" "${ph[@]}" >"$OUT/shift-r$rep.dat"
	echo "$rep ${ph[0]} ${ph[1]} ${ph[2]} ${ph[3]}" >>"$OUT/shift-phases.dat"
	for p in 0 1 2; do
		ls=$(python3 "$HERE/adapt.py" lstats "$RAW/l-$tag.txt" "${ph[p]}" "${ph[p + 1]}")
		R_TPS=${PH_TPS[p]} R_P50=${PH_P50[p]} R_P99=${PH_P99[p]} R_STATUS=${st[p]}
		R_NOTE=${PH_NOTE[p]}
		[ "$p" != 2 ] || [ -z "$budget_note" ] || R_NOTE="${R_NOTE:+$R_NOTE; }$budget_note"
		csv_row shift "p$((p + 1))-${phases[p]}" "$rep" "$ls"
		log "$tag phase $((p + 1)) (${phases[p]}): tps ${R_TPS} L (final settle_s mean sd min max first) $ls${R_NOTE:+ -- $R_NOTE}"
	done
}

CONTENDERS=(adaptive ungated)
for B in ${FIXED//,/ }; do CONTENDERS+=("fixed-$B"); done
point() { run_point "$@"; }

START=$(date +%s)
echo "$CSV_HEAD" >"$OUT/runs.csv"
calibrate
{
	meta_common
	echo "mode=$DUR s per point, shift phases of $PHASE s, $REPS repetition(s), $NCLI clients, cases $CASES"
	echo "budgets=adaptive: max_active $MAXA, adapt 'on', adapt_min 1; fixed B: $FIXED; max_queued $NCLI, 'fifo', scope 'statement'"
	echo "server=PostgreSQL's defaults (fsync on, synchronous_commit on) but max_connections 200; role bench with jit and parallel query off; unix sockets; pgbench -s $SCALE, burn $ROWS rows"
	echo "statements=cpu: sum over $WIDTH rows, ${LAT_CPU} us; sleep: pg_sleep(0.01) + sum over $((WIDTH / 20)) rows, ${LAT_SLEEP} us; light: max over $((WIDTH / 100)) rows, ${LAT_LIGHT} us (one client, p50)"
	echo "instructions=in hooks per statement, measured by instructions.sh (mode adapt): budget 698, adapt 798"
} >"$OUT/meta.txt"
for CASE in cpu sleep shift mixed tpcb; do
	want "$CASE" || continue
	log "case $CASE"
	if [ "$CASE" = shift ]; then
		for rep in $(seq "$REPS"); do run_shift "$rep"; done
	else
		repeat_points point "${CONTENDERS[@]}"
	fi
done
echo "load average at end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/meta.txt"
log "done in $(( ($(date +%s) - START) / 60 )) min; results in $OUT"

if want shift && [ -n "$GNUPLOT" ]; then
	"$GNUPLOT" -e "dir='$OUT'; reps=$REPS; phase=$PHASE; clients=$NCLI; maxa=$MAXA" "$HERE/adapt.gp" 2>>"$RAW/gnuplot.log" ||
		echo "adapt.sh: plot failed (see raw/gnuplot.log)" >&2
fi
python3 "$HERE/adapt.py" summary "$OUT"
