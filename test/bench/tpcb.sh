#!/usr/bin/env bash
# test/bench/tpcb.sh — pgbench's built-in TPC-B-like script (every
# transaction updates one row each of pgbench_branches, pgbench_tellers and
# pgbench_accounts: hot rows at small scales) through dbgate budgets and
# through PgBouncer, side by side with the ungated server, in one run.
#
# Usage (as root; as another user only with --no-install):
#   test/bench/tpcb.sh                       # ~35 min: scales 1 and 10, 32 and 64 clients
#   test/bench/tpcb.sh --quick               # 2 s per point, 1 repetition (smoke)
#   test/bench/tpcb.sh --scales 1 --clients 32 --reps 5 --duration 10 --out DIR
#
# Options:
#   --scales LIST     pgbench scale factors (default 1,10)
#   --clients LIST    client counts (default 32,64)
#   --pools LIST      budget max_active and PgBouncer pool sizes (default 2,4,8)
#   --duration S      seconds per measured point (default 8)
#   --reps N          repetitions of every point (default 3)
#   --out DIR         keep the results in DIR (default: a new mktemp directory)
#   --no-install      do not apt-get anything, do not build (assume installed)
#   --quick           2 s per point, 1 repetition
#
# The server runs with PostgreSQL's default settings (fsync on, parallel query
# on, synchronous_commit on) except max_connections = 200 and the socket
# directory.  One cluster with dbgate preloaded serves every contender:
#   ungated          role "bench" in no budget
#   stmt-B           role in a fair budget of max_active B, max_queued 64,
#                    scope 'statement'
#   tx-B             the same with scope 'transaction'
#   bouncer-B        PgBouncer (transaction pooling, pool size B) in front of
#                    the same cluster, role ungated
# Each repetition runs all contenders of a point back to back, forwards in
# odd and backwards in even repetitions; a ratio is the median over the
# repetitions of the ratio within one repetition (to the ungated server, or
# of the best dbgate point to the best PgBouncer pool).  p99 is taken from pgbench's
# per-transaction log.  For gated runs the budget's counters are read after
# the run (lock-holder admissions, longest queue wait).
#
# Output: OUT/summary.md (also printed), OUT/runs.csv.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}

SCALES=1,10
CLIENTS=32,64
POOLS=2,4,8
DUR=8
REPS=3
OUT=
INSTALL=1

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "tpcb.sh: $*" >&2; exit 2; }

while [ $# -gt 0 ]; do
	case "$1" in
	--scales) SCALES=$2; shift ;;
	--clients) CLIENTS=$2; shift ;;
	--pools) POOLS=$2; shift ;;
	--duration) DUR=$2; shift ;;
	--reps) REPS=$2; shift ;;
	--out) OUT=$2; shift ;;
	--no-install) INSTALL=0 ;;
	--quick) DUR=2; REPS=1 ;;
	-h | --help) usage; exit 0 ;;
	*) die "unknown option $1 (see --help)" ;;
	esac
	shift
done
for v in "$DUR" "$REPS" ${SCALES//,/ } ${CLIENTS//,/ } ${POOLS//,/ }; do
	[[ "$v" =~ ^[1-9][0-9]*$ ]] || die "not a positive integer: '$v'"
done
if [ "$(id -u)" != 0 ] && [ "$INSTALL" = 1 ]; then
	die "must be run as root, or with --no-install"
fi

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*"; }

if [ "$INSTALL" = 1 ]; then
	missing=()
	for p in postgresql-15 postgresql-server-dev-15 pgbouncer make gcc libc6-dev libkrb5-dev python3; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		log "installing ${missing[*]}"
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	fi
	log "building and installing dbgate"
	{ make -C "$REPO" PG_CONFIG="$PG_CONFIG" && make -C "$REPO" PG_CONFIG="$PG_CONFIG" install; } >/dev/null 2>&1 ||
		die "build failed"
fi
PGBIN=$("$PG_CONFIG" --bindir)
BOUNCER=$(command -v pgbouncer || echo /usr/sbin/pgbouncer)
[ -x "$BOUNCER" ] || die "pgbouncer not found"

if [ "$(id -u)" = 0 ]; then
	as_pg() { runuser -u postgres -- "$@"; }
	give_pg() { chown -R postgres: "$@"; }
else
	as_pg() { "$@"; }
	give_pg() { :; }
fi

WORK=$(mktemp -d -t dbgate-tpcb.XXXXXX)
chmod 755 "$WORK"
give_pg "$WORK"
if [ -n "$OUT" ]; then mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd); else OUT=$(mktemp -d -t dbgate-tpcb-results.XXXXXX); fi
RAW=$OUT/raw
mkdir -p "$RAW"
give_pg "$RAW"
rm -f "$OUT/runs.csv" "$OUT/summary.md"
PORT=5451
PORT_BOUNCER=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
BOUNCER_PID=
STARTED=

cleanup() {
	local rc=$?
	set +e
	trap - EXIT INT TERM
	bouncer_stop
	[ -n "$STARTED" ] && as_pg "$PGBIN/pg_ctl" -D "$WORK/data" -m immediate -w stop >/dev/null 2>&1
	cp "$WORK/server.log" "$RAW/server.log" 2>/dev/null
	rm -rf "$WORK"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

sql() { "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$WORK" -p "$PORT" -U postgres -d bench -c "$1"; }

log "creating the cluster in $WORK"
as_pg "$PGBIN/initdb" -D "$WORK/data" -U postgres -A trust -E UTF8 >"$RAW/initdb.log" 2>&1
cat >>"$WORK/data/postgresql.conf" <<EOF
listen_addresses = ''
unix_socket_directories = '$WORK'
port = $PORT
max_connections = 200
shared_preload_libraries = 'dbgate'
EOF
as_pg "$PGBIN/pg_ctl" -D "$WORK/data" -l "$WORK/server.log" -w -t 60 start >/dev/null
STARTED=1
as_pg "$PGBIN/createdb" -h "$WORK" -p "$PORT" bench
sql "CREATE EXTENSION dbgate; CREATE ROLE bench LOGIN"
for B in ${POOLS//,/ }; do
	sql "SELECT dbgate.create_budget('stmt_$B', max_active => $B, max_queued => 64)" >/dev/null
	sql "SELECT dbgate.create_budget('tx_$B', max_active => $B, max_queued => 64, scope => 'transaction')" >/dev/null
done

bouncer_start() { # pool size
	mkdir -p "$WORK/bouncer"
	printf '"bench" ""\n"postgres" ""\n' >"$WORK/bouncer/users.txt"
	cat >"$WORK/bouncer/pgbouncer.ini" <<-EOF
		[databases]
		bench = host=$WORK port=$PORT dbname=bench
		[pgbouncer]
		listen_addr = 127.0.0.1
		listen_port = $PORT_BOUNCER
		unix_socket_dir = $WORK
		auth_type = trust
		auth_file = $WORK/bouncer/users.txt
		pool_mode = transaction
		default_pool_size = $1
		min_pool_size = 0
		reserve_pool_size = 0
		max_client_conn = 1000
		logfile = $WORK/bouncer/pgbouncer.log
		pidfile = $WORK/bouncer/pgbouncer.pid
	EOF
	give_pg "$WORK/bouncer"
	as_pg "$BOUNCER" -d -q "$WORK/bouncer/pgbouncer.ini"
	local i
	for i in $(seq 50); do
		if "$PGBIN/psql" -X -At -h "$WORK" -p "$PORT_BOUNCER" -U bench -d bench -c 'SELECT 1' >/dev/null 2>&1; then
			BOUNCER_PID=$(cat "$WORK/bouncer/pgbouncer.pid")
			return 0
		fi
		sleep 0.1
	done
	die "pgbouncer did not start"
}

bouncer_stop() {
	[ -n "$BOUNCER_PID" ] || return 0
	kill -INT "$BOUNCER_PID" 2>/dev/null || true
	local i
	for i in $(seq 100); do kill -0 "$BOUNCER_PID" 2>/dev/null || break; sleep 0.1; done
	BOUNCER_PID=
}

assign() { # budget or ''
	if [ -z "$1" ]; then
		sql "SELECT dbgate.unassign_role('bench') FROM dbgate.budgets WHERE 'bench' = ANY(roles)" >/dev/null
	else
		sql "SELECT dbgate.assign_role('bench', '$1')" >/dev/null
	fi
}

# run_point CONTENDER SCALE CLIENTS REP: one pgbench run; appends to runs.csv
run_point() {
	local c=$1 scale=$2 clients=$3 rep=$4 port=$PORT host=$WORK budget='' B
	case $c in
	ungated) ;;
	stmt-*) budget=stmt_${c#stmt-} ;;
	tx-*) budget=tx_${c#tx-} ;;
	bouncer-*) B=${c#bouncer-}; bouncer_start "$B"; port=$PORT_BOUNCER ;;
	esac
	assign "$budget"
	[ -n "$budget" ] && sql "SELECT dbgate.reset_stats('$budget')" >/dev/null
	local tag=s${scale}-c${clients}-${c}-r${rep}
	rm -rf "$WORK/txlog"; mkdir -p "$WORK/txlog"; give_pg "$WORK/txlog"
	# pgbench runs as postgres so that it can write its log
	if ! (cd "$WORK/txlog" && as_pg "$PGBIN/pgbench" -n -h "$host" -p "$port" -U bench -c "$clients" -j 2 \
		-T "$DUR" -l --log-prefix=tx bench) >"$RAW/$tag.log" 2>&1; then
		log "run $tag failed (see $RAW/$tag.log)"
	fi
	local tps p99 lh wmax
	tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$RAW/$tag.log" | tail -1)
	p99=$(cat "$WORK"/txlog/tx.* 2>/dev/null | awk '{print $3}' | sort -n |
		awk '{a[NR]=$1} END {if (NR == 0) print "nan"; else {i=int(NR*0.99); if (i < 1) i=1; printf "%.2f", a[i]/1000}}')
	lh='' wmax=''
	if [ -n "$budget" ]; then
		IFS='|' read -r lh wmax < <(sql "SELECT admitted_lock_holder, round(wait_time_max::numeric, 1) FROM dbgate.status WHERE budget = '$budget'")
	fi
	[ "${c%%-*}" = bouncer ] && bouncer_stop
	echo "$scale,$clients,$c,$rep,${tps:-nan},$p99,$lh,$wmax" >>"$OUT/runs.csv"
	log "$tag: tps ${tps:-?} p99 ${p99} ms${budget:+ lock_holder $lh wait_max ${wmax} ms}"
}

CONTENDERS=(ungated)
for B in ${POOLS//,/ }; do CONTENDERS+=("stmt-$B" "tx-$B" "bouncer-$B"); done

echo "scale,clients,contender,rep,tps,p99_ms,admitted_lock_holder,wait_max_ms" >"$OUT/runs.csv"
for scale in ${SCALES//,/ }; do
	log "pgbench -i -s $scale"
	"$PGBIN/pgbench" -i -q -s "$scale" -h "$WORK" -p "$PORT" -U postgres bench >"$RAW/init-s$scale.log" 2>&1
	sql "GRANT SELECT, INSERT, UPDATE ON pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history TO bench"
	sql "VACUUM ANALYZE" && sql "CHECKPOINT"
	for clients in ${CLIENTS//,/ }; do
		for rep in $(seq "$REPS"); do
			order=("${CONTENDERS[@]}")
			if [ $((rep % 2)) = 0 ]; then
				order=()
				for ((i = ${#CONTENDERS[@]} - 1; i >= 0; i--)); do order+=("${CONTENDERS[i]}"); done
			fi
			for c in "${order[@]}"; do run_point "$c" "$scale" "$clients" "$rep"; done
		done
	done
done

python3 - "$OUT/runs.csv" "$OUT/summary.md" "$(nproc)" "$("$PGBIN/postgres" --version)" "$("$BOUNCER" --version 2>&1 | head -1)" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
out = open(sys.argv[2], "w")
def p(s=""):
    print(s); out.write(s + "\n")
def f(x):
    try: return float(x)
    except ValueError: return float("nan")
p("# TPC-B-like through dbgate and PgBouncer")
p()
p(f"{sys.argv[3]} CPUs; {sys.argv[4]}; {sys.argv[5]}; server defaults (fsync on, parallel query on)")
points = sorted({(int(r["scale"]), int(r["clients"])) for r in rows})
for scale, clients in points:
    rs = [r for r in rows if int(r["scale"]) == scale and int(r["clients"]) == clients]
    order = []
    for r in rs:
        if r["contender"] not in order: order.append(r["contender"])
    med = {}
    reps = sorted({r["rep"] for r in rs}, key=int)
    by = {(r["contender"], r["rep"]): r for r in rs}
    def ratio(c, base, col):
        # median over the repetitions of the ratio within one repetition
        v = [f(by[(c, k)][col]) / f(by[(base, k)][col]) for k in reps
             if (c, k) in by and (base, k) in by and f(by[(base, k)][col]) > 0]
        return statistics.median(v) if v else float("nan")
    for c in order:
        t = [f(r["tps"]) for r in rs if r["contender"] == c]
        l = [f(r["p99_ms"]) for r in rs if r["contender"] == c]
        lh = [r["admitted_lock_holder"] for r in rs if r["contender"] == c]
        wm = [r["wait_max_ms"] for r in rs if r["contender"] == c]
        med[c] = (statistics.median(t), min(t), max(t), statistics.median(l), lh, wm,
                  ratio(c, "ungated", "tps"), ratio(c, "ungated", "p99_ms"))
    p()
    n = len(reps)
    p(f"## scale {scale}, {clients} clients (medians of {n} runs)")
    p()
    p("| contender | TPS | range | × ungated | p99 ms | × ungated | lock-holder admissions | longest wait ms |")
    p("|---|---|---|---|---|---|---|---|")
    for c in order:
        t, lo, hi, l, lh, wm, rt, rl = med[c]
        p(f"| {c} | {t:.0f} | {lo:.0f}–{hi:.0f} | {rt:.2f} | {l:.1f} | {rl:.2f} | {'/'.join(x for x in lh if x) or '-'} | {'/'.join(x for x in wm if x) or '-'} |")
    best_b = max((c for c in order if c.startswith(("stmt-", "tx-"))), key=lambda c: med[c][6])
    best_pb = max((c for c in order if c.startswith("bouncer-")), key=lambda c: med[c][6])
    floor = all(med[c][6] >= 0.8 for c in order
                if c.startswith(("stmt-", "tx-")) and int(c.split("-")[1]) >= 4)
    vs_pb = ratio(best_b, best_pb, "tps")
    p()
    p("Ratios are medians of the ratios within each repetition (every contender of a repetition runs back to back).")
    p()
    p(f"- every dbgate point with B >= 4 at >= 0.8 x ungated TPS: {'met' if floor else 'missed'}")
    p(f"- best dbgate point {best_b}: {med[best_b][6]:.2f} x ungated TPS "
      f"({'met' if med[best_b][6] >= 1.0 else 'missed'} >= 1.0), "
      f"{vs_pb:.2f} x best PgBouncer ({best_pb}) "
      f"({'met' if vs_pb >= 1.0 else 'missed'} >= 1.0), "
      f"p99 {med[best_b][7]:.2f} x ungated ({'met' if med[best_b][7] <= 0.5 else 'missed'} <= 0.5)")
EOF
