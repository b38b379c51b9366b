#!/usr/bin/env bash
# test/bench/run.sh — what admission control buys and costs, measured side by
# side with an ungated server and PgBouncer, in one run.
#
# Usage (as root, from anywhere; as another user only with --no-install):
#   test/bench/run.sh                      # all scenarios, ~12 s per point, 3 reps (~42 min)
#   test/bench/run.sh --quick              # 3 s per point, 1 rep (smoke)
#   test/bench/run.sh --scenario bulkhead,handoff --reps 5 --out /tmp/res
#
# Options:
#   --scenario LIST   comma-separated subset of overhead,bulkhead,saturation,handoff
#                     (default: all four)
#   --quick           3 s per point, 1 repetition, short calibration
#   --duration S      seconds per measured point (default 12)
#   --transactions N  every client of a point runs N transactions (pgbench -t)
#                     instead of --duration seconds: the count starts once all
#                     clients have connected, so a point never comes out empty
#                     on a busy machine (the smoke; such points check the
#                     tooling, their figures measure nothing)
#   --reps N          repetitions of every point (default 3)
#   --scale N         pgbench scale factor (default 10)
#   --max-active LIST saturation: budget max_active / PgBouncer pool sizes
#                     (default 1,2,4,8,16)
#   --clients N       saturation: clients (default 64)
#   --loads LIST      saturation: S (pgbench -S), 1ms (the ~1 ms range query)
#                     or both (default S,1ms)
#   --range-width N   width of the ~1 ms range query; default: calibrated so that
#                     one ungated client sees ~1 ms
#   --heavy-rows N    flood query: SELECT count(*) FROM generate_series(1, N)
#                     (default 300000)
#   --flood-lead S    bulkhead: the flood starts S s before the interactive
#                     clients and ends S s after them (default 2)
#   --out DIR         keep the results in DIR (default: a new mktemp directory)
#   --no-install      do not apt-get anything and do not build (assume installed)
#   --no-build        do not run make && make install in the repository
#   --no-dbgate       measure only the ungated server and PgBouncer (tooling
#                     check while the extension is not available)
#   -h, --help
#
# What it does: installs missing Debian packages (postgresql-15,
# postgresql-server-dev-15 or those of the major version of $PG_CONFIG,
# pgbouncer, gnuplot-nox, build tools, python3),
# builds and installs the extension, then creates in a mktemp directory two
# identical throwaway PostgreSQL clusters owned by postgres (unix sockets only):
# "plain" without shared_preload_libraries and "gate" with
# shared_preload_libraries = 'dbgate' (the second is a file copy of the first,
# so both hold the same pgbench data).  PgBouncer (transaction pooling, loopback
# and a unix socket) is started in front of "plain" for the points that need
# it.  Each repetition runs all contenders of a scenario back to back,
# forwards in odd and backwards in even repetitions.  Everything is stopped
# and removed on exit, also on failure or Ctrl-C.
#
# Environment: SAT_CONTENDERS (saturation's gated and pooled contenders,
# default "fair nonfair lifo pgbouncer"; also "lifonf": a non-fair 'lifo'
# budget), HANDOFF_CONTENDERS (hand-off's gated ones, default "fair nonfair
# lifo").
#
# Output: OUT/summary.md (also printed), OUT/summary.csv (medians and
# ratios), OUT/runs.csv (one row per run and repetition), OUT/bulkhead.png,
# OUT/saturation.png, OUT/raw/ (pgbench and server output).  Exit status 0
# when every run completed cleanly, 3 when some run failed or a gated run's
# counters were inconsistent (listed under "Anomalies"), other = setup error.
# Targets are reported as met/missed but never change the exit status.
# See test/bench/README.md for what each scenario measures and the caveats.
set -euo pipefail

BENCH_NAME=run.sh
BENCH_ROLES="interactive reporting"
BOUNCER_USERS="reporting interactive postgres"
# shellcheck source=test/bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SCENARIOS=overhead,bulkhead,saturation,handoff
DUR=12
TXNS=
REPS=3
CAL_DUR=4
SCALE=10
MAX_ACTIVE=1,2,4,8,16
LOADS=S,1ms
SAT_CLIENTS=64
RANGE_WIDTH=
HEAVY_ROWS=300000
FLOOD_LEAD=2
OUT=
INSTALL=1
BUILD=1
DBGATE=1
MODE=default

while [ $# -gt 0 ]; do
	case "$1" in
	--scenario) SCENARIOS=$2; shift ;;
	--quick) MODE=quick; DUR=3; REPS=1; CAL_DUR=2 ;;
	--duration) DUR=$2; shift ;;
	--transactions) TXNS=$2; shift ;;
	--reps) REPS=$2; shift ;;
	--scale) SCALE=$2; shift ;;
	--max-active) MAX_ACTIVE=$2; shift ;;
	--clients) SAT_CLIENTS=$2; shift ;;
	--loads) LOADS=$2; shift ;;
	--range-width) RANGE_WIDTH=$2; shift ;;
	--heavy-rows) HEAVY_ROWS=$2; shift ;;
	--flood-lead) FLOOD_LEAD=$2; shift ;;
	--out) OUT=$2; shift ;;
	--no-install) INSTALL=0; BUILD=0 ;;
	--no-build) BUILD=0 ;;
	--no-dbgate) DBGATE=0 ;;
	-h|--help) usage; exit 0 ;;
	*) die "unknown option $1 (see --help)" ;;
	esac
	shift
done

for s in ${SCENARIOS//,/ }; do
	case "$s" in overhead|bulkhead|saturation|handoff) ;;
	*) die "unknown scenario '$s'" ;; esac
done
want() { case ",$SCENARIOS," in *",$1,"*) return 0 ;; esac; return 1; }
for s in ${LOADS//,/ }; do
	case "$s" in S|1ms) ;; *) die "unknown saturation load '$s' (S or 1ms)" ;; esac
done
need_ints "$DUR" ${TXNS:+"$TXNS"} "$REPS" "$SCALE" "$SAT_CLIENTS" "$HEAVY_ROWS" "$FLOOD_LEAD" ${RANGE_WIDTH:+"$RANGE_WIDTH"} ${MAX_ACTIVE//,/ }
need_root
BENCH_TXNS=$TXNS

# ---------------------------------------------------------------------------
# packages, build, directories

bench_install pgbouncer gnuplot-nox
BENCH_DBGATE=$DBGATE
bench_build
bench_tools
[ -x "$BOUNCER" ] || die "pgbouncer not found (apt-get install pgbouncer)"
bench_dirs
rm -f "$OUT/runs.csv" "$OUT/summary.md" "$OUT/summary.csv" "$OUT"/*.dat "$OUT"/*.png

PORT_PLAIN=5441
PORT_GATE=5442

# ---------------------------------------------------------------------------
# clusters

sql_plain() { psql_at "$PORT_PLAIN" postgres -c "$1"; }
sql_gate() { psql_at "$PORT_GATE" postgres -c "$1"; }

setup_clusters() {
	log "creating clusters in $WORK (scale $SCALE)"
	as_pg "$PGBIN/initdb" -D "$WORK/plain" -U postgres -A trust -E UTF8 --no-sync >"$RAW/initdb.log" 2>&1
	# Throwaway clusters for read-only workloads: durability settings off; one
	# backend = one CPU (no parallel query, no JIT); no autovacuum noise.
	cat >>"$WORK/plain/postgresql.conf" <<-EOF
		listen_addresses = ''
		unix_socket_directories = '$WORK'
		port = $PORT_PLAIN
		max_connections = 200
		shared_buffers = 256MB
		fsync = off
		synchronous_commit = off
		full_page_writes = off
		autovacuum = off
		jit = off
		max_parallel_workers_per_gather = 0
	EOF
	cluster_start plain
	as_pg "$PGBIN/createdb" -h "$WORK" -p "$PORT_PLAIN" bench
	"$PGBIN/pgbench" -i -q -s "$SCALE" -h "$WORK" -p "$PORT_PLAIN" -U postgres bench >"$RAW/pgbench-init.log" 2>&1
	sql_plain "CREATE ROLE interactive LOGIN; CREATE ROLE reporting LOGIN;
		GRANT SELECT ON pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history
		TO interactive, reporting;
		CREATE EXTENSION pg_prewarm;"
	sql_plain "VACUUM ANALYZE"
	sql_plain "CHECKPOINT"
	as_pg "$PGBIN/pg_ctl" -D "$WORK/plain" -w stop >/dev/null
	CLUSTERS=()
	if [ "$DBGATE" = 1 ]; then
		as_pg cp -a "$WORK/plain" "$WORK/gate"
		cat >>"$WORK/gate/postgresql.conf" <<-EOF
			port = $PORT_GATE
			shared_preload_libraries = 'dbgate'
		EOF
	fi
	cluster_start plain
	prewarm "$PORT_PLAIN"
	if [ "$DBGATE" = 1 ]; then
		cluster_start gate
		prewarm "$PORT_GATE"
		sql_gate "CREATE EXTENSION dbgate"
		bench_loaded
		sql_gate "SELECT dbgate.create_budget('reporting', 1, 64, '0', '0', '0', true)" >/dev/null
		sql_gate "SELECT dbgate.assign_role('reporting', 'reporting')" >/dev/null
		sql_gate "SELECT dbgate.create_budget('interactive', 64, 64, '0', '0', '0', true)" >/dev/null
	fi
}

prewarm() { # port
	psql_at "$1" postgres -c "SELECT pg_prewarm(c) FROM unnest(ARRAY['pgbench_accounts',
		'pgbench_accounts_pkey', 'pgbench_branches', 'pgbench_tellers']::regclass[]) c" >/dev/null
}

# Budget of a role in the gate cluster ('' = unassigned).
gate_assign() { # role budget
	if [ -z "$2" ]; then
		sql_gate "SELECT dbgate.unassign_role('$1') FROM dbgate.budgets WHERE '$1' = ANY(roles)" >/dev/null
	else
		sql_gate "SELECT dbgate.assign_role('$1', '$2')" >/dev/null
	fi
}

# Counters of one budget after a run: G_* variables; appends to R_NOTE when
# something is inconsistent.  Slots must be back (active = queued = 0).
G_COLS="admitted, admitted_after_wait, wait_time_total, wait_time_max, peak_active, peak_queued,
	rejected_full, rejected_timeout, canceled_waiting, active, queued, max_active"
gate_stats() { # budget
	local i row
	for i in $(seq 50); do
		row=$(sql_gate "SELECT $G_COLS
			FROM dbgate.status WHERE budget = '$1'" | tr '|' ' ')
		read -r G_ADM G_AWAIT G_WTOT G_WMAX G_PEAK G_PEAKQ G_RFULL G_RTMO G_CANC G_ACT G_QUE G_MAX <<<"$row"
		[ "${G_ACT:-x}" = 0 ] && [ "${G_QUE:-x}" = 0 ] && break
		sleep 0.1
	done
	local bad=()
	[ -n "$row" ] || bad+=("budget $1 missing from dbgate.status")
	[ "${G_ACT:-0}" = 0 ] && [ "${G_QUE:-0}" = 0 ] || bad+=("after the run active=$G_ACT queued=$G_QUE (slots not returned)")
	[ "${G_RFULL:-0}" = 0 ] || bad+=("rejected_full=$G_RFULL")
	[ "${G_RTMO:-0}" = 0 ] || bad+=("rejected_timeout=$G_RTMO")
	[ "${G_CANC:-0}" = 0 ] || bad+=("canceled_waiting=$G_CANC")
	[ -z "$G_PEAK" ] || [ "$G_PEAK" -le "$G_MAX" ] || bad+=("peak_active=$G_PEAK > max_active=$G_MAX")
	if [ -n "$R_PROC" ] && [ -n "$G_ADM" ] && [ "$G_ADM" -lt "$R_PROC" ]; then
		bad+=("admitted=$G_ADM < transactions=$R_PROC")
	fi
	if [ ${#bad[@]} -gt 0 ]; then
		R_NOTE="${R_NOTE:+$R_NOTE; }$(IFS=';'; echo "${bad[*]}")"
	fi
}


CSV_HEADER="scenario,group,contender,n,rep,clients,tps,processed,p50_us,p99_us,mean_us,aux_tps,admitted,admitted_after_wait,wait_time_total_ms,wait_time_max_ms,peak_active,peak_queued,rejected_full,rejected_timeout,other_cpu_pct,status,note"
record() { # scenario group contender n rep clients
	local note=${R_NOTE//,/;}
	note=${note//\"/\'}
	echo "$1,$2,$3,$4,$5,$6,${R_TPS},${R_PROC},${R_P50},${R_P99},${R_MEAN},${R_AUX:-},${G_ADM:-},${G_AWAIT:-},${G_WTOT:-},${G_WMAX:-},${G_PEAK:-},${G_PEAKQ:-},${G_RFULL:-},${G_RTMO:-},${R_OTHER:-},$R_STATUS,$note" >>"$OUT/runs.csv"
	local lat=
	[ -n "$R_P99" ] && lat=$(awk -v a="$R_P50" -v b="$R_P99" 'BEGIN { printf " p50 %.2f ms p99 %.2f ms", a / 1000, b / 1000 }')
	log "  $1 ${2:+$2 }$3${4:+ ($4)} rep $5: $(printf '%.0f' "${R_TPS:-0}") tps$lat${R_AUX:+ (reporting $(printf '%.1f' "$R_AUX") tps)}${R_OTHER:+, other processes ${R_OTHER}% CPU} $R_STATUS${R_NOTE:+ — $R_NOTE}"
	R_AUX= R_OTHER= G_ADM= G_AWAIT= G_WTOT= G_WMAX= G_PEAK= G_PEAKQ= G_RFULL= G_RTMO= G_CANC= G_ACT= G_QUE= G_MAX=
}

# measure SCENARIO GROUP CONTENDER N REP TARGET USER CLIENTS LOG BUDGET -- PGBENCH-ARGS
#   TARGET: plain | gate | bouncer (PgBouncer must already run); BUDGET: the
#   gate budget whose counters are reset before and checked after the run.
measure() {
	local scn=$1 grp=$2 con=$3 n=$4 rep=$5 target=$6 user=$7 clients=$8 logit=$9 budget=${10}
	shift 11
	local port=$PORT_PLAIN server_port=$PORT_PLAIN
	case "$target" in
	gate) port=$PORT_GATE server_port=$PORT_GATE ;;
	bouncer) port=$PORT_BOUNCER ;;
	esac
	if [ -n "$budget" ]; then sql_gate "SELECT dbgate.reset_stats('$budget')" >/dev/null; fi
	local tag="$scn${grp:+-$grp}-$con${n:+-$n}-r$rep"
	cpu_begin
	run_pgbench "$tag" "$port" "$user" "$clients" "$DUR" "$logit" "$@"
	if [ "$target" = bouncer ]; then bouncer_stop; fi
	wait_idle "$server_port" || R_NOTE="${R_NOTE:+$R_NOTE; }backends still connected 15 s after the run; terminated"
	cpu_end
	if [ -n "$budget" ]; then gate_stats "$budget"; fi
	record "$scn" "$grp" "$con" "$n" "$rep" "$clients"
}

# ---------------------------------------------------------------------------
# statements

write_scripts() {
	echo 'SELECT 1;' >"$WORK/select1.sql"
	echo "SELECT count(*) FROM generate_series(1, $HEAVY_ROWS);" >"$WORK/heavy.sql"
	# a scan that the planner runs in parallel with the default settings
	echo "SELECT sum(abalance) FROM pgbench_accounts;" >"$WORK/heavy-par.sql"
}
# one ungated client on "plain": median latency in microseconds
single_p50() { # tag pgbench-args...
	one_client_p50 "$PORT_PLAIN" reporting "$@"
}

calibrate() {
	write_scripts
	write_range "${RANGE_WIDTH:-2000}"
	if want saturation && case ",$LOADS," in *,1ms,*) true ;; *) false ;; esac; then
		calibrate_range "$PORT_PLAIN" reporting
	fi
	LAT_S=$(single_p50 select-only -S)
	LAT_ONE=$(single_p50 select1 -f "$WORK/select1.sql")
	if want bulkhead; then LAT_HEAVY=$(single_p50 heavy -f "$WORK/heavy.sql"); fi
	log "single ungated client p50: pgbench -S ${LAT_S} us, SELECT 1 ${LAT_ONE} us${LAT_RANGE:+, range($RANGE_WIDTH) ${LAT_RANGE} us}${LAT_HEAVY:+, heavy ${LAT_HEAVY} us}"
}

# ---------------------------------------------------------------------------
#
# Each scenario is a list of points ("contenders"), run REPS times by
# repeat_points (lib.sh): forwards in odd and backwards in even repetitions.

# fair and lifo budgets are fair (a newcomer queues while anyone waits);
# lifo hands a released slot to the newest waiter unless someone has waited
# overtake_limit (default 100 ms).
# lifonf is a non-fair 'lifo' budget: a newcomer (the newest by definition)
# takes a free slot, a released slot wakes the waiter the order chooses.
fair_bool() { case "$1" in nonfair | lifonf) echo false ;; *) echo true ;; esac; }
queue_order() { case "$1" in lifo | lifonf) echo lifo ;; *) echo fifo ;; esac; }

# overhead point: PROTOCOL:CONTENDER
overhead_point() {
	local proto=${1%%:*} con=${1#*:} rep=$2 m
	m=(-S -M "$proto")
	case "$con" in
	notloaded) measure overhead "$proto" notloaded "" "$rep" plain interactive 8 0 "" -- "${m[@]}" ;;
	unassigned)
		gate_assign interactive ""
		measure overhead "$proto" unassigned "" "$rep" gate interactive 8 0 "" -- "${m[@]}" ;;
	budget)
		gate_assign interactive interactive
		measure overhead "$proto" budget "" "$rep" gate interactive 8 0 interactive -- "${m[@]}"
		gate_assign interactive "" ;;
	esac
}

scenario_overhead() {
	log "scenario 1: idle overhead (pgbench -S, 8 clients)"
	local pts=() proto
	for proto in simple prepared; do
		pts+=("$proto:notloaded")
		if [ "$DBGATE" = 1 ]; then pts+=("$proto:unassigned" "$proto:budget"); fi
	done
	repeat_points overhead_point "${pts[@]}"
}

# bulkhead point: [GROUP:]CONTENDER, CONTENDER = alone | flood-ungated |
# flood-gated | flood-gated-pw0.  (a) alone, (b) flood ungated, (c) flood
# gated: the flood (32 reporting clients) starts FLOOD_LEAD s before the
# interactive clients and ends FLOOD_LEAD s after them (with --transactions
# it runs DUR + 2 x FLOOD_LEAD s, however long the interactive clients
# take).  GROUP "" runs the flood query of
# heavy.sql with no parallel query; GROUP parallel runs a parallel table
# scan (heavy-par.sql) with PostgreSQL's default parallel settings, and
# adds (d) flood-gated-pw0: the same budget with parallel_workers => 0.
bulkhead_point() {
	local grp= con=$1 rep=$2 port=$PORT_PLAIN budget= fpid= flood=$WORK/heavy.sql
	case "$con" in *:*) grp=${con%%:*} con=${con#*:} ;; esac
	[ "$grp" = parallel ] && flood=$WORK/heavy-par.sql
	local tag="bulkhead${grp:+-$grp}-$con-r$rep"
	case "$con" in
	flood-gated) port=$PORT_GATE budget=reporting
		[ "$grp" = parallel ] && sql_gate "SELECT dbgate.alter_budget('reporting', parallel_workers => -1)" >/dev/null ;;
	flood-gated-pw0) port=$PORT_GATE budget=reporting
		sql_gate "SELECT dbgate.alter_budget('reporting', parallel_workers => 0)" >/dev/null ;;
	esac
	cpu_begin
	if [ "$con" != alone ]; then
		if [ -n "$budget" ]; then sql_gate "SELECT dbgate.reset_stats('$budget')" >/dev/null; fi
		timeout -k 5 $((DUR + 70)) "$PGBIN/pgbench" -n -h "$WORK" -p "$port" -U reporting \
			-c 32 -j "$NPROC" -T $((DUR + 2 * FLOOD_LEAD)) -f "$flood" bench \
			>"$RAW/${tag%-r*}-flood-r$rep.txt" 2>&1 &
		fpid=$!
		BG_PIDS+=("$fpid")
		sleep "$FLOOD_LEAD"
	fi
	run_pgbench "$tag" "$port" interactive 4 "$DUR" 1 -S
	R_AUX=
	if [ -n "$fpid" ]; then
		local frc=0
		wait "$fpid" || frc=$?
		BG_PIDS=()
		R_AUX=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$RAW/${tag%-r*}-flood-r$rep.txt" | head -n 1)
		if [ $frc -ne 0 ]; then
			R_STATUS=error R_NOTE="${R_NOTE:+$R_NOTE; }reporting flood pgbench exit $frc"
		fi
	fi
	wait_idle "$port" || R_NOTE="${R_NOTE:+$R_NOTE; }backends still connected 15 s after the run; terminated"
	cpu_end
	if [ -n "$budget" ]; then
		local proc=$R_PROC
		R_PROC=  # pgbench counted the interactive transactions, the budget admitted the flood's
		gate_stats "$budget"
		R_PROC=$proc
	fi
	record bulkhead "$grp" "$con" "" "$rep" 4
}

# PostgreSQL's default parallel settings for the bench database of both
# servers (postgresql.conf turns parallel query off for the other points).
bulkhead_parallel() { # on | off
	local sql="ALTER DATABASE bench RESET max_parallel_workers_per_gather"
	[ "$1" = on ] && sql="ALTER DATABASE bench SET max_parallel_workers_per_gather = 2"
	sql_plain "$sql"
	if [ "$DBGATE" = 1 ]; then sql_gate "$sql"; fi
}

scenario_bulkhead() {
	log "scenario 2: bulkhead (interactive -S x4 vs reporting heavy x32)"
	local pts=(alone flood-ungated)
	if [ "$DBGATE" = 1 ]; then
		gate_assign interactive ""
		gate_assign reporting reporting
		sql_gate "SELECT dbgate.alter_budget('reporting', max_active => 1, max_queued => 64, fair => true, queue_order => 'fifo')" >/dev/null
		pts+=(flood-gated)
	fi
	repeat_points bulkhead_point "${pts[@]}"

	log "scenario 2, parallel variant (flood: a parallel scan, default parallel settings)"
	pts=(parallel:alone parallel:flood-ungated)
	if [ "$DBGATE" = 1 ]; then pts+=(parallel:flood-gated parallel:flood-gated-pw0); fi
	bulkhead_parallel on
	log "  parallel flood plan: $(psql_at "$PORT_PLAIN" reporting -c "EXPLAIN (COSTS OFF) $(cat "$WORK/heavy-par.sql")" | grep -E 'Gather|Workers' | tr -s ' \n' ' ')"
	repeat_points bulkhead_point "${pts[@]}"
	bulkhead_parallel off
	if [ "$DBGATE" = 1 ]; then
		sql_gate "SELECT dbgate.alter_budget('reporting', parallel_workers => -1)" >/dev/null
	fi
}

# saturation point: GROUP:CONTENDER[:N], GROUP = S | 1ms
saturation_point() {
	local grp con n rep=$2 args
	IFS=: read -r grp con n <<<"$1"
	if [ "$grp" = S ]; then args=(-S); else args=(-f "$WORK/range.sql"); fi
	case "$con" in
	ungated) measure saturation "$grp" ungated "" "$rep" plain reporting "$SAT_CLIENTS" 1 "" -- "${args[@]}" ;;
	fair | nonfair | lifo | lifonf)
		sql_gate "SELECT dbgate.alter_budget('reporting', max_active => $n,
			max_queued => $SAT_CLIENTS, fair => $(fair_bool "$con"),
			queue_order => '$(queue_order "$con")')" >/dev/null
		measure saturation "$grp" "$con" "$n" "$rep" gate reporting "$SAT_CLIENTS" 1 reporting -- "${args[@]}" ;;
	pgbouncer)
		bouncer_start "$n" "$PORT_PLAIN"
		measure saturation "$grp" pgbouncer "$n" "$rep" bouncer reporting "$SAT_CLIENTS" 1 "" -- "${args[@]}" ;;
	esac
}

scenario_saturation() {
	log "scenario 3: saturation ($SAT_CLIENTS clients; max_active / pool sizes $MAX_ACTIVE)"
	local pts=() grp con n
	if [ "$DBGATE" = 1 ]; then gate_assign reporting reporting; fi
	for grp in ${LOADS//,/ }; do
		pts+=("$grp:ungated")
		for con in ${SAT_CONTENDERS:-fair nonfair lifo pgbouncer}; do
			[ "$DBGATE" = 1 ] || [ "$con" = pgbouncer ] || continue
			for n in ${MAX_ACTIVE//,/ }; do pts+=("$grp:$con:$n"); done
		done
	done
	repeat_points saturation_point "${pts[@]}"
}

# hand-off point: ungated-1client | ungated | fair | nonfair | lifo | pgbouncer
handoff_point() {
	local con=$1 rep=$2 s=(-f "$WORK/select1.sql")
	case "$con" in
	ungated-1client) measure handoff "" "$con" "" "$rep" plain reporting 1 1 "" -- "${s[@]}" ;;
	ungated) measure handoff "" "$con" "" "$rep" plain reporting 16 1 "" -- "${s[@]}" ;;
	fair | nonfair | lifo | lifonf)
		sql_gate "SELECT dbgate.alter_budget('reporting', max_active => 1, max_queued => 64,
			fair => $(fair_bool "$con"), queue_order => '$(queue_order "$con")')" >/dev/null
		measure handoff "" "$con" 1 "$rep" gate reporting 16 1 reporting -- "${s[@]}" ;;
	pgbouncer)
		bouncer_start 1 "$PORT_PLAIN"
		measure handoff "" "$con" 1 "$rep" bouncer reporting 16 1 "" -- "${s[@]}" ;;
	esac
}

scenario_handoff() {
	log "scenario 4: hand-off (SELECT 1, 16 clients, max_active = 1)"
	local pts=(ungated-1client ungated)
	if [ "$DBGATE" = 1 ]; then
		gate_assign reporting reporting
		pts+=(${HANDOFF_CONTENDERS:-fair nonfair lifo})
	fi
	pts+=(pgbouncer)
	repeat_points handoff_point "${pts[@]}"
}

# ---------------------------------------------------------------------------
# main

START=$(date +%s)
setup_clusters
calibrate
echo "$CSV_HEADER" >"$OUT/runs.csv"

PGVER=$(psql_at "$PORT_PLAIN" postgres -c 'SHOW server_version')
{
	echo "date=$(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "machine=$NPROC cores (nproc), $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1), $(uname -sr)"
	echo "PostgreSQL=$PGVER"
	echo "PgBouncer=$("$BOUNCER" --version | head -n 1 | sed 's/^PgBouncer //')"
	echo "dbgate=$([ "$DBGATE" = 1 ] && (git -c safe.directory='*' -C "$REPO" describe --always --dirty 2>/dev/null || echo 'built from a tree without git metadata') || echo 'not measured (--no-dbgate)')"
	echo "load average at start=$(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine shows here)"
	echo "mode=$MODE: $([ -n "$TXNS" ] && echo "$TXNS transactions per client and point (pgbench -t; bulkhead flood $((DUR + 2 * FLOOD_LEAD)) s)" || echo "$DUR s per point"), $REPS repetition(s), pgbench scale $SCALE, threads per pgbench = min(clients, $NPROC)"
	echo "statements=pgbench -S (p50 ${LAT_S} us with one ungated client); SELECT 1 (${LAT_ONE} us)${LAT_RANGE:+; ~1 ms query: SELECT sum(abalance) FROM pgbench_accounts WHERE aid BETWEEN :a AND :a + $RANGE_WIDTH (${LAT_RANGE} us)}${LAT_HEAVY:+; flood: SELECT count(*) FROM generate_series(1, $HEAVY_ROWS) (${LAT_HEAVY} us); parallel flood: SELECT sum(abalance) FROM pgbench_accounts}"
	echo "servers=two clusters cloned from one data directory, unix sockets, shared_buffers 256MB, fsync/synchronous_commit/full_page_writes/autovacuum/jit off, no parallel query (except the bulkhead's parallel variant: max_parallel_workers_per_gather = 2 for database bench, PostgreSQL's default); 'gate' differs only by shared_preload_libraries = 'dbgate'; PgBouncer in transaction pooling mode in front of 'plain'"
} >"$OUT/meta.txt"

for s in overhead bulkhead saturation handoff; do
	if want "$s"; then "scenario_$s"; fi
done

log "done in $(( ($(date +%s) - START) / 60 )) min; results in $OUT"
echo "load average at end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/meta.txt"
rc=0
python3 "$HERE/stats.py" summary "$OUT" || rc=$?
if [ -n "$GNUPLOT" ]; then
	if [ -f "$OUT/bulkhead.dat" ]; then
		"$GNUPLOT" -e "dir='$OUT'" "$HERE/bulkhead.gp" 2>>"$RAW/gnuplot.log" || echo "run.sh: bulkhead plot failed (see raw/gnuplot.log)" >&2
	fi
	if ls "$OUT"/saturation_*.dat >/dev/null 2>&1; then
		"$GNUPLOT" -e "dir='$OUT'; clients=$SAT_CLIENTS; loads='${LOADS//,/ }'" "$HERE/saturation.gp" 2>>"$RAW/gnuplot.log" || echo "run.sh: saturation plot failed (see raw/gnuplot.log)" >&2
	fi
fi
ls "$OUT"
[ $rc -eq 0 ] || exit 3
