#!/usr/bin/env bash
# test/bench/keys.sh — keys (1.3, issue 29): what key_by does for a tenant
# beside another tenant's flood, what it costs in throughput, the table of
# keys under churn, and the per-key rate.
#
# Usage (as root; as another user only with --no-install):
#   test/bench/keys.sh                  # the issue's sizes, 3 repetitions (~13 min)
#   KEYS_SECONDS=3 KEYS_REPS=1 KEYS_CHURN_KEYS=2000 KEYS_CHURN_SECONDS=4 \
#     KEYS_WINDOW=2 test/bench/keys.sh --no-install     # a tooling check
#
# Options:
#   --out DIR         results directory (default: a new temporary directory)
#   --no-install      do not apt-get anything, do not build (assume installed)
#   --no-build        do not run make && make install in the repository
#
# Environment (defaults: the sizes of issue 29):
#   KEYS_MEASURES       which measures, of flood, churn, rate (default all)
#   KEYS_REPS           repetitions of every point (3)
#   KEYS_SECONDS        flood: seconds of tenant B's run (20)
#   KEYS_CPU_MS         flood: the statement's CPU time, calibrated (5)
#   KEYS_FLOOD_CLIENTS  flood: tenant A's clients (48); B has 2
#   KEYS_WARM           flood: seconds between A filling the budget and
#                       B's start (2)
#   KEYS_CHURN_KEYS     churn: distinct keys (100000)
#   KEYS_CHURN_SECONDS  churn: over how many seconds (60)
#   KEYS_CHURN_CLIENTS  churn: clients (32)
#   KEYS_MAX_KEYS       dbgate.max_keys of the cluster (1000)
#   KEYS_RATE           rate: key_max_rate (50)
#   KEYS_RATE_KEYS      rate: keys (10), 3 clients each
#   KEYS_WINDOW         rate: seconds of the measured window (10)
#   KEYS_SCALE          pgbench scale of the table the statement reads (10)
#   KEYS_RANGE_WIDTH    flood: rows the statement sums (default: calibrated
#                       to KEYS_CPU_MS of the server's CPU)
#   KEYS_CAL_SECONDS    flood: CPU seconds of each calibration run (4)
#   KEYS_HUGE_PAGES     on: the server's shared memory in huge pages
#                       (huge_pages = on; this many 2 MB pages more are
#                       reserved in vm.nr_hugepages for the run and given
#                       back at its end: KEYS_HUGE_PAGES_N, 200); default:
#                       PostgreSQL's huge_pages = try, whatever the machine
#                       has reserved
#
# One cluster with PostgreSQL's default settings, dbgate preloaded and
# dbgate.max_keys = KEYS_MAX_KEYS; every client sets its key with
# PGOPTIONS="-c app.tenant=..." (flood, rate) or SET (churn).  Measures:
#
#   flood   1 and 2 of the issue.  One budget of B = 4, Q = 64; the
#           statement is SELECT sum(abalance) over a range of
#           pgbench_accounts, calibrated to ~KEYS_CPU_MS of the server's CPU.
#           Contenders, alternated: alone (tenant B's 2 clients, A idle),
#           floor (A with 2 clients: the 4 slots full, nothing waits — on
#           a machine of fewer than 4 CPUs B's statements share them, and
#           no gate of B = 4 can give B better than this),
#           keyed (A's 48 clients fill the budget's slots and queue, 2 s
#           later B runs, then A is stopped; a budget with key_by
#           'setting:app.tenant'), plain (the same in a
#           budget without key_by), keyq (keyed with key_max_queued 32: A's
#           clients beyond 4 + 32 get 53300 and end, B's must never).
#           Printed: B's p50 / p99 and its ratio to alone; the budget's
#           admissions per second while B ran, keyed against plain; what
#           was refused, at which key.
#   churn   3.  KEYS_CHURN_CLIENTS psql sessions send SET app.tenant and
#           SELECT 1 for KEYS_CHURN_KEYS distinct keys, paced evenly over
#           KEYS_CHURN_SECONDS, into a budget with key_by and key_max_rate 1
#           (a key keeps its entry until its bucket is full again: 1 s) and
#           key_max_queued 1; every error is read with its SQLSTATE and
#           DETAIL.  Sampled every 200 ms: the live keys of all budgets
#           (status.keys) and of dbgate.keys, and every 1 s the memory of
#           the postmaster's children (RSS and private).  After the run: how
#           long until no key is left.
#   rate    4.  KEYS_RATE_KEYS keys of 3 clients of SELECT 1 each in a
#           budget with key_max_rate KEYS_RATE; each key's admissions and
#           the budget's over a window of KEYS_WINDOW s (from dbgate.keys
#           and dbgate.status, read by the server's clock).
#
# Measure 5 of the issue (instructions per statement with key_by) is
# test/bench/instructions.sh's mode keys:
#   test/bench/instructions.sh 1000 budget keys
#
# Output in OUT: summary.md (printed), flood.csv, churn.csv, rate.csv,
# meta.txt, raw/ (pgbench and psql output, samples, server log).  Exit 3
# when a run failed (an error other than the expected 53300, leftover
# slots or keys), never for a figure.
set -euo pipefail

BENCH_NAME=keys
BENCH_ROLES="kf pf qf ch rt"
# shellcheck source=test/bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

OUT=
while [ $# -gt 0 ]; do
	case "$1" in
	--out) OUT=$2; shift ;;
	--no-install) INSTALL=0; BUILD=0 ;;
	--no-build) BUILD=0 ;;
	-h | --help) usage; exit 0 ;;
	*) die "unknown option $1 (see --help)" ;;
	esac
	shift
done
MEASURES=${KEYS_MEASURES:-flood,churn,rate}
REPS=${KEYS_REPS:-3}
SECS=${KEYS_SECONDS:-20}
CPU_MS=${KEYS_CPU_MS:-5}
FLOOD=${KEYS_FLOOD_CLIENTS:-48}
CHURN_KEYS=${KEYS_CHURN_KEYS:-100000}
CHURN_SECS=${KEYS_CHURN_SECONDS:-60}
CHURN_CLIENTS=${KEYS_CHURN_CLIENTS:-32}
MAX_KEYS=${KEYS_MAX_KEYS:-1000}
RATE=${KEYS_RATE:-50}
RATE_KEYS=${KEYS_RATE_KEYS:-10}
WINDOW=${KEYS_WINDOW:-10}
WARM=${KEYS_WARM:-2}
SCALE=${KEYS_SCALE:-10}
for m in ${MEASURES//,/ }; do
	case "$m" in flood | churn | rate) ;; *) die "unknown measure '$m' in KEYS_MEASURES" ;; esac
done
want() { case ",$MEASURES," in *",$1,"*) return 0 ;; esac; return 1; }
need_ints "$REPS" "$SECS" "$CPU_MS" "$FLOOD" "$CHURN_KEYS" "$CHURN_SECS" "$CHURN_CLIENTS" \
	"$MAX_KEYS" "$RATE" "$RATE_KEYS" "$WINDOW" "$SCALE" "$WARM"
HUGE=${KEYS_HUGE_PAGES:-}
HUGE_N=${KEYS_HUGE_PAGES_N:-200}
case "$HUGE" in '' | on) ;; *) die "KEYS_HUGE_PAGES is on or unset, not '$HUGE'" ;; esac
need_ints "$HUGE_N"
need_root

bench_install
bench_build
bench_dirs
rm -f "$OUT"/{flood,churn,rate,other,anomalies}.csv "$OUT/summary.md" "$OUT/meta.txt"
[ "$HUGE" = on ] && bench_huge_pages "$HUGE_N"
PORT=5473

sql() { psql_at "$PORT" postgres -c "$1"; }

log "creating the cluster in $WORK"
cluster_create data "$PORT" <<-EOF
	shared_preload_libraries = 'dbgate'
	dbgate.max_keys = $MAX_KEYS
	${HUGE:+huge_pages = on}
EOF
cluster_start data
as_pg "$PGBIN/createdb" -h "$WORK" -p "$PORT" "$DB"
sql "CREATE EXTENSION dbgate" >/dev/null
bench_loaded
log "pgbench -i -s $SCALE"
as_pg "$PGBIN/pgbench" -i -q -s "$SCALE" -h "$WORK" -p "$PORT" -U postgres "$DB" >"$RAW/init.txt" 2>&1 ||
	die "pgbench -i failed (see $RAW/init.txt)"
sql "VACUUM ANALYZE" >/dev/null
# kf, pf, qf: the flood's budgets keyed, plain, keyq; ch: churn; rt: rate.
# jit and parallel query off: a statement is one backend on at most one CPU.
for r in kf pf qf ch rt; do
	sql "CREATE ROLE $r LOGIN; GRANT SELECT ON pgbench_accounts TO $r;
		ALTER ROLE $r SET jit = off; ALTER ROLE $r SET max_parallel_workers_per_gather = 0" >/dev/null
done
sql "SELECT dbgate.create_budget('keyed', 4, 64, key_by => 'setting:app.tenant');
	SELECT dbgate.create_budget('plain', 4, 64);
	SELECT dbgate.create_budget('keyq', 4, 64, key_by => 'setting:app.tenant', key_max_queued => 32);
	SELECT dbgate.create_budget('churn', 8, 64, key_by => 'setting:app.tenant',
		key_max_rate => 1, key_max_queued => 1);
	SELECT dbgate.create_budget('rate', 32, 64, key_by => 'setting:app.tenant', key_max_rate => $RATE);
	SELECT dbgate.assign_role('kf', 'keyed'); SELECT dbgate.assign_role('pf', 'plain');
	SELECT dbgate.assign_role('qf', 'keyq'); SELECT dbgate.assign_role('ch', 'churn');
	SELECT dbgate.assign_role('rt', 'rate')" >/dev/null
echo 'SELECT 1;' >"$WORK/select1.sql"

{
	meta_common
	echo "server=PostgreSQL's defaults but max_connections 200, dbgate.max_keys $MAX_KEYS${HUGE:+, huge_pages = on}; unix sockets; vm.nr_hugepages $(cat /proc/sys/vm/nr_hugepages)"
	echo "sizes=reps $REPS; flood: B's run $SECS s, A $FLOOD clients, B 2 clients, ~$CPU_MS ms statements; churn: $CHURN_KEYS keys over $CHURN_SECS s at $CHURN_CLIENTS clients; rate: $RATE_KEYS keys at key_max_rate $RATE, $WINDOW s windows"
} >"$OUT/meta.txt"

NOTE=
note() { NOTE="${NOTE:+$NOTE; }$*"; }

# budget_idle BUDGET: slots and queue back to 0, else a note.
budget_idle() {
	local row
	row=$(sql "SELECT active || '|' || queued FROM dbgate.status WHERE budget = '$1'")
	[ "$row" = "0|0" ] || note "$1 active|queued = $row after the run"
}

# aborts FILE: "N M": clients pgbench aborted, and of them with 53300
# "is full" (pgbench prints the server's message on the same line).
aborts() {
	local n f
	n=$(grep -c 'aborted in command' "$1" || true)
	f=$(grep 'aborted in command' "$1" | grep -c 'is full' || true)
	echo "$n $f"
}

# ---------------------------------------------------------------------------
# flood (measures 1 and 2)

flood_point() { # contender rep
	local con=$1 rep=$2 role budget tag="flood-$1-r$2" pid=
	case "$con" in
	alone | floor | keyed) role=kf budget=keyed ;;
	plain) role=pf budget=plain ;;
	keyq) role=qf budget=keyq ;;
	esac
	NOTE=
	sql "SELECT dbgate.reset_stats('$budget')" >/dev/null
	cpu_begin
	if [ "$con" != alone ]; then
		# floor: A with B - 2 = 2 clients, so the 4 slots are full while B
		# runs and nothing ever waits — what any gate of B = 4 leaves
		# tenant B on this machine's CPUs at best.  Otherwise A floods.
		# A runs until B is done (then it is stopped: SIGTERM, as SIGINT
		# is ignored by a command that a script put in the background):
		# its clients take seconds to connect on a busy machine, so B
		# starts once A's statements fill the budget's slots (and queue,
		# or A's key's queue: a refusal), and WARM s later
		local a_clients=$FLOOD cond what want=$FLOOD
		if [ "$con" = floor ]; then
			a_clients=2 cond="active >= 2" what="2 statements active"
		else
			[ "$con" = keyq ] && [ "$want" -gt 36 ] && want=36
			[ "$want" -gt 68 ] && want=68
			cond="active + queued >= $want OR rejected_full > 0 OR (SELECT count(*) >= $FLOOD
				FROM pg_stat_activity WHERE usename = '$role')"
			what="$want statements active or queued, nor $FLOOD sessions"
		fi
		PGOPTIONS="-c app.tenant=A" pgbench_bg "$tag-A" "$PORT" "$role" "$a_clients" \
			-T $((SECS + 600)) -f "$WORK/range.sql"
		pid=$BG_PID
		local t0=$SECONDS
		until [ "$(sql "SELECT $cond FROM dbgate.status WHERE budget = '$budget'")" = t ]; do
			if [ $((SECONDS - t0)) -ge 60 ]; then
				note "tenant A had not $what after 60 s"
				break
			fi
			sleep 0.1
		done
		sleep "$WARM"
	fi
	local c0 c1
	c0=$(sql "SELECT extract(epoch FROM clock_timestamp()) || ' ' || admitted FROM dbgate.status WHERE budget = '$budget'")
	PGOPTIONS="-c app.tenant=B" run_pgbench "$tag-B" "$PORT" "$role" 2 "$SECS" 1 -f "$WORK/range.sql"
	c1=$(sql "SELECT extract(epoch FROM clock_timestamp()) || ' ' || admitted FROM dbgate.status WHERE budget = '$budget'")
	local bst=$R_STATUS bn=$R_N bp50=$R_P50 bp99=$R_P99 btps=$R_TPS bab
	bab=$(aborts "$RAW/$tag-B.txt")
	[ "$bst" = ok ] || note "tenant B: $R_NOTE"
	# the keys while A still runs (B's entry may already be gone)
	local ka
	sql "SELECT * FROM dbgate.keys WHERE budget = '$budget'" >"$RAW/$tag-keys.txt"
	ka=$(sql "SELECT coalesce(max(rejected) FILTER (WHERE key = 'A'), 0) || ' ' ||
		coalesce(max(rejected) FILTER (WHERE key = 'B'), 0) FROM dbgate.keys WHERE budget = '$budget'")
	local aab="0 0"
	if [ -n "$pid" ]; then
		aab=$(aborts "$RAW/$tag-A.txt")
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	wait_idle "$PORT" || note "sessions still connected 15 s after the run; terminated"
	cpu_end
	budget_idle "$budget"
	local st
	st=$(sql "SELECT rejected_full || ' ' || rejected_timeout FROM dbgate.status WHERE budget = '$budget'")
	# keyq: A's aborted clients are the expected 53300 of its key; any other
	# abort, of A elsewhere or of B anywhere, is an anomaly
	read -r aab_n aab_full <<<"$aab"
	read -r bab_n _ <<<"$bab"
	[ "$bab_n" = 0 ] || note "tenant B: $bab_n clients aborted"
	if [ "$con" = keyq ]; then
		[ "$aab_n" = "$aab_full" ] || note "tenant A: $((aab_n - aab_full)) clients aborted by another error than 53300"
	elif [ "$aab_n" != 0 ]; then
		note "tenant A: $aab_n clients aborted"
	fi
	[ -n "$NOTE" ] && STATUS=anomaly || STATUS=ok
	echo "$con,$rep,${c0// /,},${c1// /,},$btps,$bn,$bp50,$bp99,${st// /,},${ka// /,},$aab_n,$bab_n,$R_OTHER,$STATUS,${NOTE//,/;}" >>"$OUT/flood.csv"
	log "flood $con rep $rep: B p50 $(( ${bp50:-0} / 1000 )) ms p99 $(( ${bp99:-0} / 1000 )) ms ($bn statements), budget: rejected_full|timeout $st, key A|B rejected $ka, A aborted $aab_n, other CPU ${R_OTHER}%${NOTE:+ — $NOTE}"
}

# ---------------------------------------------------------------------------
# churn (measure 3)

churn_point() { # contender rep
	local rep=$2 tag="churn-r$2" rc=0
	NOTE=
	sql "SELECT dbgate.reset_stats('churn')" >/dev/null
	cpu_begin
	python3 "$HERE/keys.py" churn --psql "$PGBIN/psql" --host "$WORK" --port "$PORT" --db "$DB" \
		--user ch --budget churn --clients "$CHURN_CLIENTS" --keys "$CHURN_KEYS" --seconds "$CHURN_SECS" \
		--prefix "r$rep-" --pidfile "$WORK/data/postmaster.pid" --max-keys "$MAX_KEYS" \
		--raw "$RAW/$tag" --csv "$OUT/churn.csv" --rep "$rep" || rc=$?
	cpu_end
	[ $rc = 0 ] || note "keys.py churn exited with status $rc"
	wait_idle "$PORT" || note "sessions still connected 15 s after the run; terminated"
	budget_idle churn
	if [ -n "$NOTE" ]; then
		echo "churn,$rep,anomaly,${NOTE//,/;}" >>"$OUT/anomalies.csv"
		log "churn rep $rep: $NOTE"
	fi
	echo "churn,$rep,other_cpu_pct,$R_OTHER" >>"$OUT/other.csv"
}

# ---------------------------------------------------------------------------
# rate (measure 4)

# rate_read: "epoch budget_admitted key=admitted..." at one instant
rate_read() {
	sql "SELECT extract(epoch FROM clock_timestamp()) || ' ' || s.admitted || ' ' ||
		coalesce((SELECT string_agg(k.key || '=' || k.admitted, ' ' ORDER BY k.key)
		          FROM dbgate.keys k WHERE k.budget = 'rate' AND k.key IS NOT NULL), '')
		FROM dbgate.status s WHERE s.budget = 'rate'"
}

rate_point() { # contender rep
	local rep=$2 tag="rate-r$2" i pids=() r0 r1
	NOTE=
	sql "SELECT dbgate.reset_stats('rate')" >/dev/null
	cpu_begin
	local dur
	dur=$(awk -v w="$WINDOW" 'BEGIN { printf "%d", w + 1.5 + 2.5 }')
	for i in $(seq "$RATE_KEYS"); do
		PGOPTIONS="-c app.tenant=k$i" pgbench_bg "$tag-k$i" "$PORT" rt 3 -T "$dur" -f "$WORK/select1.sql"
		pids+=("$BG_PID")
	done
	sleep 1.5
	r0=$(rate_read)
	sleep "$WINDOW"
	r1=$(rate_read)
	for i in $(seq "$RATE_KEYS"); do
		pgbench_wait "$tag-k$i" "${pids[i - 1]}"
		[ "$R_STATUS" = ok ] || note "key k$i: $R_NOTE"
	done
	wait_idle "$PORT" || note "sessions still connected 15 s after the run; terminated"
	cpu_end
	budget_idle rate
	python3 "$HERE/keys.py" rate --rep "$rep" --rate "$RATE" --keys "$RATE_KEYS" --other "$R_OTHER" \
		--note "$NOTE" --csv "$OUT/rate.csv" -- "$r0" "$r1"
}

# calibrate_cpu: the width of range.sql whose statement takes CPU_MS of the
# server's CPU (unless KEYS_RANGE_WIDTH is given): the CPU time of the
# cluster's processes over N statements of one client, not their latency,
# which on a busy machine says more about the other work than about the
# statement; three tries.  Sets RANGE_WIDTH, CPU_US, LAT_RANGE.
calibrate_cpu() {
	local w=${KEYS_RANGE_WIDTH:-$((4 * CPU_MS * 1000))} n i k0 k1
	n=$(( ${KEYS_CAL_SECONDS:-4} * 1000 / CPU_MS ))
	for i in 1 2 3; do
		write_range "$w"
		k0=$(server_ticks data)
		run_pgbench "cal$i" "$PORT" kf 1 - 1 -t "$n" -f "$WORK/range.sql"
		k1=$(server_ticks data)
		[ "$R_STATUS" = ok ] || die "calibration run failed: $R_NOTE"
		CPU_US=$(( (k1 - k0) * 1000000 / CLK_TCK / n ))
		LAT_RANGE=$R_P50
		log "calibration: range width $w -> $CPU_US us of CPU per statement (p50 $R_P50 us)"
		[ -n "${KEYS_RANGE_WIDTH:-}" ] && break
		[ "$CPU_US" -ge $((CPU_MS * 850)) ] && [ "$CPU_US" -le $((CPU_MS * 1150)) ] && break
		[ "$i" = 3 ] && break
		w=$(python3 -c "import sys; w=int(int(sys.argv[1])*int(sys.argv[2])*1000/max(1,int(sys.argv[3]))); print(max(100, min(w, 100000*int(sys.argv[4])//2)))" "$w" "$CPU_MS" "$CPU_US" "$SCALE")
	done
	RANGE_WIDTH=$w
}

# keyed_only BUDGET...: key_by 'setting:app.tenant' on these budgets only.
# Each budget with key_by has a share of the table of keys (max_keys / their
# number) that the others' new keys never take while it is unused: the
# churn has the whole table only as the one budget with key_by.
keyed_only() {
	local b k
	for b in keyed keyq churn rate; do
		k="''"
		case " $* " in *" $b "*) k="'setting:app.tenant'" ;; esac
		sql "SELECT dbgate.alter_budget('$b', key_by => $k)" >/dev/null
	done
}

# ---------------------------------------------------------------------------

START=$(date +%s)
if want flood; then
	keyed_only keyed keyq
	log "calibrating the statement to ~$CPU_MS ms (one client of tenant B, budget keyed)"
	calibrate_cpu
	log "statement: sum over $RANGE_WIDTH rows, $CPU_US us of the server's CPU (one client's p50 $LAT_RANGE us)"
	echo "statement=SELECT sum(abalance) FROM pgbench_accounts WHERE aid BETWEEN :a AND :a + $RANGE_WIDTH ($CPU_US us of the server's CPU per statement; one client's p50 $LAT_RANGE us)" >>"$OUT/meta.txt"
	echo "contender,rep,t0,admitted0,t1,admitted1,b_tps,b_n,b_p50_us,b_p99_us,rejected_full,rejected_timeout,key_a_rejected,key_b_rejected,a_aborted,b_aborted,other_cpu_pct,status,note" >"$OUT/flood.csv"
	log "measure flood: B = 4, Q = 64; tenant A $FLOOD clients, tenant B 2 clients, B's run $SECS s"
	repeat_points flood_point alone floor keyed plain keyq
fi
if want churn; then
	log "measure churn: $CHURN_KEYS keys over $CHURN_SECS s, $CHURN_CLIENTS clients, max_keys $MAX_KEYS"
	keyed_only churn
	repeat_points churn_point churn
fi
if want rate; then
	log "measure rate: $RATE_KEYS keys at key_max_rate $RATE, 3 clients each, $WINDOW s windows"
	keyed_only rate
	repeat_points rate_point rate
fi
echo "load average at end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/meta.txt"
log "done in $(( ($(date +%s) - START) / 60 )) min; results in $OUT"
rc=0
python3 "$HERE/keys.py" summary "$OUT" || rc=$?
[ $rc -eq 0 ] || exit 3
