#!/usr/bin/env bash
# test/bench/tpcb.sh — pgbench's built-in TPC-B-like script (every
# transaction updates one row each of pgbench_branches, pgbench_tellers and
# pgbench_accounts: hot rows at small scales) through dbgate budgets in both
# queue orders and through PgBouncer, side by side with the ungated server,
# in one run.
#
# Usage (as root; as another user only with --no-install):
#   test/bench/tpcb.sh                       # ~35 min: scales 1 and 10, 32 and 64 clients
#   test/bench/tpcb.sh --quick               # 2 s per point, 1 repetition (smoke)
#   test/bench/tpcb.sh --scales 1 --clients 32 --reps 5 --duration 10 --out DIR
#   test/bench/tpcb.sh --orders fifo         # the 1.1 contenders only (~22 min)
#
# Options:
#   --scales LIST     pgbench scale factors (default 1,10)
#   --clients LIST    client counts (default 32,64)
#   --pools LIST      budget max_active and PgBouncer pool sizes (default 2,4,8)
#   --orders LIST     queue orders of the budgets: fifo, lifo or both (default
#                     fifo,lifo)
#   --scopes LIST     scopes of the budgets: statement, transaction or both
#                     (default statement,transaction)
#   --overtake-limit MS  overtake_limit of the 'lifo' budgets (default 100)
#   --duration S      seconds per measured point (default 8)
#   --reps N          repetitions of every point (default 3)
#   --out DIR         keep the results in DIR (default: a new mktemp directory)
#   --no-install      do not apt-get anything, do not build (assume installed)
#   --no-build        do not run make && make install in the repository
#   --quick           2 s per point, 1 repetition
#
# The server runs with PostgreSQL's default settings (fsync on, parallel query
# on, synchronous_commit on) except max_connections = 200 and the socket
# directory.  One cluster with dbgate preloaded serves every contender:
#   ungated          role "bench" in no budget
#   stmt-B           role in a fair 'fifo' budget of max_active B,
#                    max_queued 64, scope 'statement'
#   tx-B             the same with scope 'transaction'
#   lifo-stmt-B      like stmt-B with queue_order 'lifo'
#   lifo-tx-B        like tx-B with queue_order 'lifo'
#   bouncer-B        PgBouncer (transaction pooling, pool size B) in front of
#                    the same cluster, role ungated, reached over its unix
#                    socket like the server
# Each repetition runs all contenders of a point back to back, forwards in
# odd and backwards in even repetitions; a ratio is the median over the
# repetitions of the ratio within one repetition (to the ungated server, or
# of the best dbgate point to the best PgBouncer pool).  p99 is taken from
# pgbench's per-transaction log.  For gated runs the budget's counters are
# read after the run (lock-holder admissions, longest queue wait, overdue
# admissions).
#
# Output: OUT/summary.md (also printed), OUT/runs.csv, OUT/raw/.
set -euo pipefail

BENCH_NAME=tpcb.sh
BENCH_ROLES=bench
BOUNCER_USERS="bench postgres"
# shellcheck source=test/bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SCALES=1,10
CLIENTS=32,64
POOLS=2,4,8
ORDERS=fifo,lifo
SCOPES=statement,transaction
OVERTAKE=100
DUR=8
REPS=3
OUT=

while [ $# -gt 0 ]; do
	case "$1" in
	--scales) SCALES=$2; shift ;;
	--clients) CLIENTS=$2; shift ;;
	--pools) POOLS=$2; shift ;;
	--orders) ORDERS=$2; shift ;;
	--scopes) SCOPES=$2; shift ;;
	--overtake-limit) OVERTAKE=$2; shift ;;
	--duration) DUR=$2; shift ;;
	--reps) REPS=$2; shift ;;
	--out) OUT=$2; shift ;;
	--no-install) INSTALL=0; BUILD=0 ;;
	--no-build) BUILD=0 ;;
	--quick) DUR=2; REPS=1 ;;
	-h | --help) usage; exit 0 ;;
	*) die "unknown option $1 (see --help)" ;;
	esac
	shift
done
need_ints "$DUR" "$REPS" "$OVERTAKE" ${SCALES//,/ } ${CLIENTS//,/ } ${POOLS//,/ }
for o in ${ORDERS//,/ }; do
	case "$o" in fifo | lifo) ;; *) die "unknown queue order '$o' (fifo or lifo)" ;; esac
done
has_order() { case ",$ORDERS," in *",$1,"*) return 0 ;; esac; return 1; }
for o in ${SCOPES//,/ }; do
	case "$o" in statement | transaction) ;; *) die "unknown scope '$o' (statement or transaction)" ;; esac
done
has_scope() { case ",$SCOPES," in *",$1,"*) return 0 ;; esac; return 1; }
need_root

bench_install pgbouncer
bench_build
bench_tools
[ -x "$BOUNCER" ] || die "pgbouncer not found"
bench_dirs
rm -f "$OUT/runs.csv" "$OUT/summary.md"
PORT=5451

sql() { psql_at "$PORT" postgres -c "$1"; }

log "creating the cluster in $WORK"
cluster_create data "$PORT" <<-EOF
	shared_preload_libraries = 'dbgate'
EOF
cluster_start data
as_pg "$PGBIN/createdb" -h "$WORK" -p "$PORT" "$DB"
sql "CREATE EXTENSION dbgate; CREATE ROLE bench LOGIN"
bench_loaded
for B in ${POOLS//,/ }; do
	if has_order fifo; then
		sql "SELECT dbgate.create_budget('stmt_$B', max_active => $B, max_queued => 64)" >/dev/null
		sql "SELECT dbgate.create_budget('tx_$B', max_active => $B, max_queued => 64, scope => 'transaction')" >/dev/null
	fi
	if has_order lifo; then
		sql "SELECT dbgate.create_budget('lifo_stmt_$B', max_active => $B, max_queued => 64,
			queue_order => 'lifo', overtake_limit => '$OVERTAKE ms')" >/dev/null
		sql "SELECT dbgate.create_budget('lifo_tx_$B', max_active => $B, max_queued => 64,
			scope => 'transaction', queue_order => 'lifo', overtake_limit => '$OVERTAKE ms')" >/dev/null
	fi
done

assign() { # budget or ''
	if [ -z "$1" ]; then
		sql "SELECT dbgate.unassign_role('bench') FROM dbgate.budgets WHERE 'bench' = ANY(roles)" >/dev/null
	else
		sql "SELECT dbgate.assign_role('bench', '$1')" >/dev/null
	fi
}

# run_point CONTENDER SCALE CLIENTS REP: one pgbench run; appends to runs.csv
run_point() {
	local c=$1 scale=$2 clients=$3 rep=$4 port=$PORT budget=''
	case $c in
	ungated) ;;
	stmt-* | tx-* | lifo-stmt-* | lifo-tx-*) budget=${c//-/_} ;;
	bouncer-*) bouncer_start "${c#bouncer-}" "$PORT"; port=$PORT_BOUNCER ;;
	esac
	assign "$budget"
	[ -n "$budget" ] && sql "SELECT dbgate.reset_stats('$budget')" >/dev/null
	local tag=s${scale}-c${clients}-${c}-r${rep}
	cpu_begin
	run_pgbench "$tag" "$port" bench "$clients" "$DUR" 1
	[ "$R_STATUS" = ok ] || log "run $tag: $R_STATUS $R_NOTE (see $RAW/$tag.txt)"
	[ "${c%%-*}" = bouncer ] && bouncer_stop
	wait_idle "$PORT" || R_NOTE="${R_NOTE:+$R_NOTE; }sessions still connected 15 s after the run; terminated"
	cpu_end
	local lh='' wmax='' over='' p50 p99
	if [ -n "$budget" ]; then
		IFS='|' read -r lh wmax over < <(sql "SELECT admitted_lock_holder, round(wait_time_max::numeric, 1),
			admitted_overdue FROM dbgate.status WHERE budget = '$budget'")
	fi
	p50=$(awk -v v="${R_P50:-}" 'BEGIN { if (v == "" || v == "nan") print "nan"; else printf "%.2f", v / 1000 }')
	p99=$(awk -v v="${R_P99:-}" 'BEGIN { if (v == "" || v == "nan") print "nan"; else printf "%.2f", v / 1000 }')
	local note=${R_NOTE//,/;}
	echo "$scale,$clients,$c,$rep,${R_TPS:-nan},$p99,$lh,$wmax,$p50,$over,$R_OTHER,$R_STATUS,$note" >>"$OUT/runs.csv"
	log "$tag: tps ${R_TPS:-?} p99 ${p99} ms${budget:+ lock_holder $lh wait_max ${wmax} ms overdue $over}, other processes ${R_OTHER}% CPU"
}

CONTENDERS=(ungated)
for B in ${POOLS//,/ }; do
	has_order fifo && has_scope statement && CONTENDERS+=("stmt-$B")
	has_order fifo && has_scope transaction && CONTENDERS+=("tx-$B")
	has_order lifo && has_scope statement && CONTENDERS+=("lifo-stmt-$B")
	has_order lifo && has_scope transaction && CONTENDERS+=("lifo-tx-$B")
	CONTENDERS+=("bouncer-$B")
done

point() { # contender rep (SCALE, NCLIENTS global)
	run_point "$1" "$SCALE" "$NCLIENTS" "$2"
}

START=$(date +%s)
{
	meta_common
	echo "PgBouncer=$("$BOUNCER" --version 2>&1 | head -n 1 | sed 's/^PgBouncer //')"
	echo "mode=$DUR s per point, $REPS repetition(s), scales $SCALES, clients $CLIENTS, B $POOLS, queue orders $ORDERS, scopes $SCOPES, overtake_limit $OVERTAKE ms"
	echo "server=PostgreSQL's defaults (fsync on, synchronous_commit on, parallel query on) but max_connections 200; unix sockets; PgBouncer in transaction pooling mode over its unix socket"
} >"$OUT/meta.txt"
echo "scale,clients,contender,rep,tps,p99_ms,admitted_lock_holder,wait_max_ms,p50_ms,admitted_overdue,other_cpu_pct,status,note" >"$OUT/runs.csv"
for SCALE in ${SCALES//,/ }; do
	log "pgbench -i -s $SCALE"
	"$PGBIN/pgbench" -i -q -s "$SCALE" -h "$WORK" -p "$PORT" -U postgres "$DB" >"$RAW/init-s$SCALE.log" 2>&1
	sql "GRANT SELECT, INSERT, UPDATE ON pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history TO bench"
	sql "VACUUM ANALYZE" && sql "CHECKPOINT"
	for NCLIENTS in ${CLIENTS//,/ }; do
		repeat_points point "${CONTENDERS[@]}"
	done
done
echo "load average at end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/meta.txt"
log "done in $(( ($(date +%s) - START) / 60 )) min; results in $OUT"

python3 "$HERE/report.py" tpcb "$OUT" "$OVERTAKE"
