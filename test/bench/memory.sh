#!/usr/bin/env bash
# test/bench/memory.sh — a budget's max_memory_mb and min_cost under load.
#
# Usage (as root; as another user only with --no-install):
#   test/bench/memory.sh                     # ~10 min with the defaults
#   test/bench/memory.sh --quick             # tooling check (~3 min)
#   test/bench/memory.sh --duration 60 --max-memory-mb 400 --out DIR
#
# Options:
#   --duration S       seconds per measured run (default 60)
#   --rows N           rows of the fact table the report reads (default 1000000)
#   --work-mem SIZE    the sessions' work_mem (default 512MB: generous)
#   --max-memory-mb M  the bounded budget's max_memory_mb (default 350)
#   --workers N        max_parallel_workers_per_gather of the report (default 2)
#   --only PART        run only 'memory' or only 'cheap'
#   --set NAME=VALUE   one more setting of the report's role (ALTER ROLE
#                      rpt SET), e.g. --set jit=off; may be repeated
#   --out DIR          keep the results in DIR (default: a new mktemp directory)
#   --no-install       do not apt-get anything, do not build (assume installed)
#   --quick            --duration 15 --rows 300000 --max-memory-mb 100
#
# One throwaway cluster with dbgate preloaded; one role, "rpt", in a budget
# of max_active 8 (max_queued 64).  The report (a statement with two hash
# joins, a hash aggregate, a window sort and a final sort over the fact
# table) runs from 16 pgbench clients at a generous work_mem.
#
#   memory       the report for --duration seconds with the budget's
#                max_memory_mb 0 (unbounded), then M (bounded).  Every 50 ms
#                a sampler sums the private memory (Private_Clean +
#                Private_Dirty of /proc/PID/smaps_rollup) of the role's
#                backends and of the parallel workers they lead, found by
#                process title.  Printed: the peak of that sum per run, the
#                peak over M (the unbounded run should reach >= 4 M), the
#                idle baseline of one backend (16 fresh connections that
#                only sleep), and the reports completed (bounded >= 0.8 x
#                unbounded is the target).  Hash tables of Parallel Hash
#                live in shared memory (DSM), not in private memory, so the
#                report runs with enable_parallel_hash = off: every hash
#                table is some process's private memory and is sampled.
#   cheap reads  the same role, in the same budget with max_active 2: 4
#                clients of pgbench -S (primary-key reads, planned cost about
#                8) alone; then with 16 report clients and min_cost 100 (the
#                reads pass the gate); then with min_cost 0 (they queue
#                behind the reports).  Printed: the -S clients' p99
#                latency and transactions per second in each case.
#
# Output: OUT/summary.txt (also printed), OUT/raw/ (pgbench logs, samples).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}

DUR=60
ROWS=1000000
WORK_MEM=512MB
MAXMEM=350
WORKERS=2
OUT=
INSTALL=1
ONLY=
SETTINGS=()

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "memory.sh: $*" >&2; exit 2; }

while [ $# -gt 0 ]; do
	case "$1" in
	--duration) DUR=$2; shift ;;
	--rows) ROWS=$2; shift ;;
	--work-mem) WORK_MEM=$2; shift ;;
	--max-memory-mb) MAXMEM=$2; shift ;;
	--workers) WORKERS=$2; shift ;;
	--out) OUT=$2; shift ;;
	--only) ONLY=$2; shift ;;
	--set) SETTINGS+=("$2"); shift ;;
	--no-install) INSTALL=0 ;;
	--quick) DUR=15; ROWS=300000; MAXMEM=100 ;;
	-h | --help) usage; exit 0 ;;
	*) die "unknown option $1 (see --help)" ;;
	esac
	shift
done
for v in "$DUR" "$ROWS" "$MAXMEM"; do
	[[ "$v" =~ ^[1-9][0-9]*$ ]] || die "not a positive integer: '$v'"
done
[[ "$WORKERS" =~ ^[0-9]+$ ]] || die "not a number: '$WORKERS'"
case "$ONLY" in '' | memory | cheap) ;; *) die "--only takes memory or cheap" ;; esac
if [ "$(id -u)" != 0 ] && [ "$INSTALL" = 1 ]; then
	die "must be run as root, or with --no-install"
fi

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if [ "$INSTALL" = 1 ]; then
	missing=()
	for p in postgresql-15 postgresql-server-dev-15 make gcc libc6-dev libkrb5-dev python3; do
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

if [ "$(id -u)" = 0 ]; then
	as_pg() { runuser -u postgres -- "$@"; }
	give_pg() { chown -R postgres: "$@"; }
else
	as_pg() { "$@"; }
	give_pg() { :; }
fi

WORK=$(mktemp -d -t dbgate-mem.XXXXXX)
chmod 755 "$WORK"
give_pg "$WORK"
if [ -n "$OUT" ]; then mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd); else OUT=$(mktemp -d -t dbgate-mem-results.XXXXXX); fi
RAW=$OUT/raw
mkdir -p "$RAW"
chmod 777 "$RAW"
rm -f "$OUT/summary.txt"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
STARTED=
SAMPLER=

cleanup() {
	local rc=$?
	set +e
	trap - EXIT INT TERM
	[ -n "$SAMPLER" ] && kill "$SAMPLER" 2>/dev/null
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
max_connections = 100
shared_buffers = 512MB
max_worker_processes = 16
max_parallel_workers = 16
shared_preload_libraries = 'dbgate'
cluster_name = ''
update_process_title = on
EOF
as_pg "$PGBIN/pg_ctl" -D "$WORK/data" -l "$WORK/server.log" -w start >/dev/null
STARTED=1
PM_PID=$(head -1 "$WORK/data/postmaster.pid")

log "loading data: $ROWS fact rows, pgbench scale 10"
"$PGBIN/psql" -X -q -h "$WORK" -p "$PORT" -U postgres -d postgres -c "CREATE DATABASE bench"
sql "CREATE EXTENSION dbgate"
sql "CREATE ROLE rpt LOGIN"
# dimensions: a third as many rows as facts, 100-byte payloads; no indexes,
# so joins hash
sql "CREATE TABLE mem_dims AS
       SELECT g AS id, g % 1000 AS grp, repeat(md5(g::text), 3) AS payload
       FROM generate_series(1, $((ROWS / 3))) g"
sql "CREATE TABLE mem_facts AS
       SELECT g AS id, ((g::bigint * 7919) % $((ROWS / 3)) + 1)::int AS dim_id,
              ((g::bigint * 104729) % $((ROWS / 3)) + 1)::int AS dim2_id,
              (g % 997)::numeric AS amount, md5((g::bigint * 31)::text) AS note
       FROM generate_series(1, $ROWS) g"
sql "VACUUM ANALYZE mem_dims" >/dev/null
sql "VACUUM ANALYZE mem_facts" >/dev/null
sql "GRANT SELECT ON mem_dims, mem_facts TO rpt"
as_pg "$PGBIN/pgbench" -i -q -s 10 -h "$WORK" -p "$PORT" -U postgres bench >"$RAW/pgbench-init.log" 2>&1
sql "GRANT SELECT ON pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history TO rpt"
sql "SELECT dbgate.create_budget('rpt_b', 8, 64)" >/dev/null
sql "SELECT dbgate.assign_role('rpt', 'rpt_b')" >/dev/null
sql "ALTER ROLE rpt SET work_mem = '$WORK_MEM'"
sql "ALTER ROLE rpt SET max_parallel_workers_per_gather = $WORKERS"
sql "ALTER ROLE rpt SET enable_parallel_hash = off"
for kv in ${SETTINGS[@]+"${SETTINGS[@]}"}; do
	sql "ALTER ROLE rpt SET ${kv%%=*} = '${kv#*=}'"
done

cat >"$WORK/report.sql" <<'EOF'
SELECT g.grp, g.n, g.amount, r.note
FROM (SELECT d.grp, count(*) AS n, sum(f.amount) AS amount, max(e.payload) AS p
        FROM mem_facts f
        JOIN mem_dims d ON d.id = f.dim_id
        JOIN mem_dims e ON e.id = f.dim2_id
       GROUP BY d.grp) g
JOIN (SELECT grp, min(note) AS note
        FROM (SELECT dim_id % 1000 AS grp, note,
                     row_number() OVER (PARTITION BY dim_id % 1000 ORDER BY note) AS rn
                FROM mem_facts) w
       WHERE rn <= 2
       GROUP BY grp) r USING (grp)
ORDER BY g.amount DESC, g.grp
LIMIT 20;
EOF
echo '\sleep 1000 ms' >"$WORK/idle.sql"
# pgbench -S as a script of its own: the built-in one first reads the scale
# from pgbench_branches, which would queue behind the reports
printf '%s\n' '\set aid random(1, 1000000)' \
	'SELECT abalance FROM pgbench_accounts WHERE aid = :aid;' >"$WORK/read.sql"
chmod 644 "$WORK"/*.sql
sql "EXPLAIN $(cat "$WORK/report.sql")" >"$RAW/report-plan.txt"

# The sampler: every 50 ms, the private memory of the postmaster's children
# whose title says they are a backend of role rpt, or a parallel worker led
# by one.  Writes "peak_kb samples max_processes" at SIGTERM, and the series
# to a file.
cat >"$WORK/sampler.py" <<'EOF'
import os, re, signal, sys, time
pm, role, series = int(sys.argv[1]), sys.argv[2], sys.argv[3]
peak, n, maxprocs, stop = 0, 0, 0, False
def term(*_):
    global stop
    stop = True
signal.signal(signal.SIGTERM, term)
def children():
    for d in os.listdir('/proc'):
        if not d.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % d) as f:
                ppid = int(f.read().rsplit(')', 1)[1].split()[1])
            if ppid != pm:
                continue
            with open('/proc/%s/cmdline' % d, 'rb') as f:
                title = f.read().replace(b'\0', b' ').decode(errors='replace').strip()
            yield int(d), title
        except (OSError, ValueError, IndexError):
            pass
def private_kb(pid):
    kb = 0
    try:
        with open('/proc/%d/smaps_rollup' % pid) as f:
            for line in f:
                if line.startswith(('Private_Clean:', 'Private_Dirty:')):
                    kb += int(line.split()[1])
    except OSError:
        pass
    return kb
backend = re.compile(r'^postgres: %s \S+ ' % re.escape(role))
worker = re.compile(r'^postgres: parallel worker for PID (\d+)')
with open(series, 'w') as out:
    t0 = time.time()
    while not stop:
        procs = list(children())
        leaders = {pid for pid, t in procs if backend.match(t)}
        total, count = 0, 0
        for pid, t in procs:
            m = worker.match(t)
            if pid in leaders or (m and int(m.group(1)) in leaders):
                total += private_kb(pid)
                count += 1
        peak, maxprocs, n = max(peak, total), max(maxprocs, count), n + 1
        out.write('%.2f %d %d\n' % (time.time() - t0, total, count))
        time.sleep(0.05)
print(peak, n, maxprocs)
EOF

sample_start() { # name
	python3 "$WORK/sampler.py" "$PM_PID" rpt "$RAW/samples-$1.txt" >"$WORK/peak-$1.txt" &
	SAMPLER=$!
}
sample_stop() { # the sampler writes "peak_kb samples max_processes" to peak-NAME.txt
	kill -TERM "$SAMPLER"
	wait "$SAMPLER" || true
	SAMPLER=
}
pgb() { # name clients pgbench-options...
	local name=$1 c=$2
	shift 2
	as_pg "$PGBIN/pgbench" -n -h "$WORK" -p "$PORT" -U rpt -c "$c" -j "$c" -T "$DUR" \
		"$@" bench >"$RAW/pgbench-$name.log" 2>&1
}
processed() { awk '/number of transactions actually processed/ { print $NF }' "$RAW/pgbench-$1.log" | cut -d/ -f1; }
tps() { awk '/^tps = / { printf "%.1f", $3 }' "$RAW/pgbench-$1.log"; }
div() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "-"; else printf "%.2f", a / b }'; }
p99_ms() { # pgbench per-transaction log files of a run, prefix
	cat "$1".* | awk '{ print $3 / 1000.0 }' | sort -n |
		awk '{ a[NR] = $1 } END { if (NR == 0) { print "-"; exit } i = int(NR * 0.99); if (i < 1) i = 1; printf "%.2f", a[i] }'
}

run_reports() { # name max_memory_mb
	sql "SELECT dbgate.alter_budget('rpt_b', max_active => 8, max_memory_mb => $2, min_cost => 0)" >/dev/null
	sql "SELECT dbgate.reset_stats('rpt_b')" >/dev/null
	log "report x 16 clients, max_active 8, max_memory_mb $2 ($DUR s)"
	sample_start "$1"
	pgb "$1" 16 -f "$WORK/report.sql"
	sample_stop "$1"
}
cheap() { # name min_cost with_reports
	sql "SELECT dbgate.alter_budget('rpt_b', min_cost => $2)" >/dev/null
	sql "SELECT dbgate.reset_stats('rpt_b')" >/dev/null
	log "pgbench -S x 4 clients, min_cost $2, reports: $3 ($DUR s)"
	local rp=
	if [ "$3" = yes ]; then
		# the reports start first and end after the reads
		DUR=$((DUR + 2)) pgb "$1-reports" 16 -f "$WORK/report.sql" &
		rp=$!
		sleep 1
	fi
	# what holds and waits for the slots half-way
	(sleep $((DUR / 2)); sql "SELECT b.state, regexp_replace(left(a.query, 40), '\\s+', ' ', 'g') AS query, count(*)
	                          FROM dbgate.backends b JOIN pg_stat_activity a USING (pid)
	                         GROUP BY 1, 2 ORDER BY 1, 2" >"$RAW/backends-$1.txt") &
	local snap=$!
	pgb "$1" 4 -f "$WORK/read.sql" --log --log-prefix="$RAW/lat-$1"
	wait "$snap" || true
	[ -z "$rp" ] || wait "$rp" || true
	sql "SELECT bypassed || ' ' || admitted_after_wait || ' ' || admitted_lock_holder || ' ' ||
	            round(wait_time_max)
	       FROM dbgate.status WHERE budget = 'rpt_b'" >"$WORK/status-$1.txt"
}

if [ "$ONLY" != cheap ]; then
	# idle baseline: 16 fresh connections that only sleep
	log "idle baseline"
	sample_start idle
	DUR=4 pgb idle 16 -f "$WORK/idle.sql"
	sample_stop idle
	read -r idle_peak _ idle_procs <"$WORK/peak-idle.txt"
	idle_per=$(( idle_procs > 0 ? idle_peak / idle_procs : 0 ))
	run_reports unbounded 0
	read -r un_peak _ un_procs <"$WORK/peak-unbounded.txt"
	un_done=$(processed unbounded)
	temp0=$(sql "SELECT temp_bytes FROM pg_stat_database WHERE datname = 'bench'")
	run_reports bounded "$MAXMEM"
	read -r b_peak _ b_procs <"$WORK/peak-bounded.txt"
	b_done=$(processed bounded)
	b_temp=$(sql "SELECT pg_size_pretty(temp_bytes - $temp0) FROM pg_stat_database WHERE datname = 'bench'")
fi

if [ "$ONLY" != memory ]; then
	sql "SELECT dbgate.alter_budget('rpt_b', max_active => 2, max_memory_mb => 0, min_cost => 100)" >/dev/null
	read_cost=$(sql "EXPLAIN SELECT abalance FROM pgbench_accounts WHERE aid = 17" | head -1 |
		sed -n 's/.*cost=[0-9.]*\.\.\([0-9.]*\).*/\1/p')
	cheap alone 100 no
	cheap with-min-cost 100 yes
	cheap without-min-cost 0 yes
fi

{
	echo "dbgate memory benchmark: $(date -u +%Y-%m-%dT%H:%MZ), PostgreSQL $("$PGBIN/postgres" --version | awk '{print $3}'), $(nproc) CPUs, $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
	echo "report: $ROWS fact rows, work_mem $WORK_MEM, max_parallel_workers_per_gather $WORKERS, 16 clients, budget max_active 8, $DUR s per run${SETTINGS[*]:+; role settings: ${SETTINGS[*]}}"
	if [ "$ONLY" != cheap ]; then
		echo
		echo "idle baseline: $idle_per kB private per backend ($idle_procs backends)"
		printf '%-10s %14s %10s %12s %10s %8s\n' run max_memory_mb peak_MB peak/M processes reports
		printf '%-10s %14s %10.0f %12.2f %10s %8s\n' unbounded 0 "$(div "$un_peak" 1024)" \
			"$(div "$un_peak" $((1024 * MAXMEM)))" "$un_procs" "$un_done"
		printf '%-10s %14s %10.0f %12.2f %10s %8s\n' bounded "$MAXMEM" "$(div "$b_peak" 1024)" \
			"$(div "$b_peak" $((1024 * MAXMEM)))" "$b_procs" "$b_done"
		echo "peak above the idle baseline (processes x baseline): unbounded $(( (un_peak - un_procs * idle_per) / 1024 )) MB, bounded $(( (b_peak - b_procs * idle_per) / 1024 )) MB"
		echo "reports completed, bounded / unbounded: $(div "$b_done" "$un_done") (target >= 0.8); unbounded peak / M: $(div "$un_peak" $((1024 * MAXMEM))) (sizing target >= 4)"
		echo "temporary files written during the bounded run: $b_temp"
	fi
	if [ "$ONLY" != memory ]; then
		echo
		echo "cheap reads: pgbench -S x 4 clients (planned cost $read_cost), same role, budget max_active 2"
		printf '%-32s %8s %9s %9s %11s %12s %12s\n' case p99_ms tps bypassed after_wait lock_holder max_wait_ms
		for c in alone:"alone (min_cost 100)" with-min-cost:"with 16 reports, min_cost 100" \
			without-min-cost:"with 16 reports, min_cost 0"; do
			read -r byp aw lh mw <"$WORK/status-${c%%:*}.txt"
			printf '%-32s %8s %9s %9s %11s %12s %12s\n' "${c#*:}" "$(p99_ms "$RAW/lat-${c%%:*}")" \
				"$(tps "${c%%:*}")" "$byp" "$aw" "$lh" "$mw"
		done
		echo "reports completed alongside: min_cost 100: $(processed with-min-cost-reports), min_cost 0: $(processed without-min-cost-reports)"
	fi
} | tee "$OUT/summary.txt"
echo "results: $OUT" >&2
