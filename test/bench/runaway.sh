#!/usr/bin/env bash
# test/bench/runaway.sh — runaway statements (1.3): what runaway_after does
# for an interactive budget into which long reports are misclassified, how
# the quarantine holds their repeats back, and how late the action comes.
#
# Usage (as root; as another user only with --no-install):
#   test/bench/runaway.sh                  # 60 s per run, 3 reps (~20 min)
#   test/bench/runaway.sh --quick          # 15 s per run, 1 rep (tooling check)
#   test/bench/runaway.sh --duration 30 --reps 5 --out DIR
#
# Options:
#   --duration S   seconds of every run (default 60)
#   --reps N       repetitions (default 3)
#   --clients N    interactive clients (default 16)
#   --cpu-ms MS    the interactive statement's median latency for one
#                  client that the calibration aims at (default 5)
#   --width N      rows summed by it (default: calibrated)
#   --out DIR      results directory (default test/bench/results/runaway)
#   --no-install   do not apt-get anything, do not build (assume installed)
#   --no-build     do not run make && make install in the repository
#   --quick        15 s per run, 1 repetition, short calibration
# Environment: PG_CONFIG, BENCH_UNLOCK_FD (lib.sh).
#
# One server with PostgreSQL's default settings (and dbgate.max_quarantine
# = 1000).  Budget interactive: max_active 4, max_queued 64; its role
# bench runs a ~5 ms CPU statement at 16 clients (pgbench); its role rep,
# assigned to the same budget (a misclassified report), starts
# `SELECT pg_sleep(20.0)` (a 20 s report that holds its slot) every 5 s.
# Budget slow: max_active 1 (where 'demote' would move the reports).
# The contenders, alternated (A B C D, D C B A, ...):
#   base        the interactive clients alone (no reports)
#   norule      with the reports, interactive has no runaway_after
#   cancel      with the reports, runaway_after 1s, runaway_action 'cancel'
#   quarantine  as cancel, with quarantine 60s (the table emptied before
#               the run: the first report runs away, its repeats are
#               refused at the gate with 53000)
#   latency     as cancel, with a report every 0.5 s (for the action
#               latency over many runaways)
# 'demote' (the issue's contender of target 1) is refused with 0A000 in
# this build: the line says so, and cancel is measured in its place.
#
# Printed targets (issue 30, "Measured"):
#   1. cancel: interactive p99 <= 2 x base p99, TPS >= 0.9 x base (norule
#      beside it for comparison)
#   2. quarantine: 1 runaway per run, quarantined = the reports after the
#      first
#   3. action latency over >= 50 runaways (cancel, quarantine and latency
#      runs): p99 of (count time - admission - runaway_after) from the
#      worker's LOG lines ("elapsed"), and p99 of (the statement's ERROR -
#      its start - runaway_after) from the server log (log_statement of
#      role rep; the start is before the gate, so a report's wait in the
#      queue counts against it: an upper bound)
# The instructions of the statement path are instructions.sh's (modes
# runaway against stimeout, queryid, qentry).
#
# Output in OUT: summary.md (printed), runs.csv, meta.txt, raw/.
set -euo pipefail

BENCH_NAME=runaway
BENCH_OUT_DEFAULT=repo
BENCH_ROLES="bench rep"
# shellcheck source=test/bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DUR=60
REPS=3
CAL_DUR=4
NCLI=16
CPU_MS=5
WIDTH=
ROWS=1000000
OUT=
REPORT_EVERY=5

while [ $# -gt 0 ]; do
	case "$1" in
	--duration) DUR=$2; shift ;;
	--reps) REPS=$2; shift ;;
	--clients) NCLI=$2; shift ;;
	--cpu-ms) CPU_MS=$2; shift ;;
	--width) WIDTH=$2; shift ;;
	--out) OUT=$2; shift ;;
	--no-install) INSTALL=0; BUILD=0 ;;
	--no-build) BUILD=0 ;;
	--quick) DUR=15; REPS=1; CAL_DUR=2 ;;
	-h | --help) usage; exit 0 ;;
	*) die "unknown option $1 (see --help)" ;;
	esac
	shift
done
need_ints "$DUR" "$REPS" "$NCLI" "$CPU_MS" ${WIDTH:+"$WIDTH"}
need_root

bench_install
bench_build
bench_tools
bench_dirs
rm -f "$OUT/runs.csv" "$OUT/summary.md" "$OUT/meta.txt"
PORT=5472

sql() { psql_at "$PORT" postgres -c "$1"; }

log "creating the cluster in $WORK"
cluster_create data "$PORT" <<-EOF
	shared_preload_libraries = 'dbgate'
	dbgate.max_quarantine = 1000
	log_line_prefix = '%m [%p] '
	log_timezone = 'UTC'
EOF
cluster_start data
as_pg "$PGBIN/createdb" -h "$WORK" -p "$PORT" "$DB"
sql "CREATE EXTENSION dbgate"
bench_loaded
sql "CREATE ROLE bench LOGIN; ALTER ROLE bench SET jit = off; ALTER ROLE bench SET max_parallel_workers_per_gather = 0"
sql "CREATE ROLE rep LOGIN; ALTER ROLE rep SET log_statement = 'all'"
sql "CREATE TABLE burn (id int PRIMARY KEY, v int NOT NULL);
	INSERT INTO burn SELECT g, g % 1000 FROM generate_series(1, $ROWS) g;
	GRANT SELECT ON burn TO bench" >/dev/null
sql "VACUUM ANALYZE"
sql "CHECKPOINT"
sql "SELECT count(*) FROM burn" >/dev/null
sql "SELECT dbgate.create_budget('slow', 1, 64)" >/dev/null
sql "SELECT dbgate.create_budget('interactive', 4, 64)" >/dev/null

write_statement() {
	printf '\\set a random(1, %d)\nSELECT sum(v) FROM burn WHERE id BETWEEN :a AND :a + %d;\n' \
		$((ROWS - $1)) "$1" >"$WORK/inter.sql"
	cp "$WORK/inter.sql" "$RAW/"
}

# calibration, ungated
w=${WIDTH:-25000}
write_statement "$w"
if [ -z "$WIDTH" ]; then
	target=$((CPU_MS * 1000))
	for i in 1 2 3; do
		p=$(one_client_p50 "$PORT" bench "inter$i" -f "$WORK/inter.sql")
		log "calibration: width $w -> p50 ${p} us (one client)"
		[ "$p" -ge $((target * 85 / 100)) ] && [ "$p" -le $((target * 115 / 100)) ] && break
		[ "$i" = 3 ] && break
		w=$(python3 -c "import sys; w=int(int(sys.argv[1])*int(sys.argv[3])/max(1,int(sys.argv[2]))); print(max(100, min(w, int(sys.argv[4])//2)))" \
			"$w" "$p" "$target" "$ROWS")
		write_statement "$w"
	done
fi
WIDTH=$w
LAT_INTER=$(one_client_p50 "$PORT" bench inter -f "$WORK/inter.sql")
log "interactive statement: ${LAT_INTER} us (one client, p50; width $WIDTH)"
sql "SELECT dbgate.assign_role('bench', 'interactive')" >/dev/null
sql "SELECT dbgate.assign_role('rep', 'interactive')" >/dev/null

# reports EVERY SECONDS: a report every EVERY s until killed (REP_PID)
reports_start() {
	local every=$1
	(
		trap 'exit 0' TERM
		while :; do
			"$PGBIN/psql" -X -q -At -h "$WORK" -p "$PORT" -U rep -d "$DB" \
				-c "SELECT pg_sleep(20.0) AS report" >/dev/null 2>&1 &
			sleep "$every"
		done
	) &
	REP_PID=$!
	BG_PIDS+=("$REP_PID")
}
reports_stop() {
	kill "$REP_PID" 2>/dev/null || true
	wait "$REP_PID" 2>/dev/null || true
	local keep=() p
	for p in "${BG_PIDS[@]}"; do [ "$p" = "$REP_PID" ] || keep+=("$p"); done
	BG_PIDS=(${keep[@]+"${keep[@]}"})
	sql "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = 'rep'" >/dev/null
}

echo "case,rep,tps,p50_ms,p99_ms,runaways,quarantined,reports,rejected,log_from,log_to,status,note" >"$OUT/runs.csv"
ms() { awk -v v="${1:-}" 'BEGIN { if (v == "" || v == "nan") print "nan"; else printf "%.2f", v / 1000 }'; }

run_point() { # contender rep
	local c=$1 rep=$2 tag="$1-r$2" every=$REPORT_EVERY reports=0 ra q rej from to
	case $c in
	base | norule) sql "SELECT dbgate.alter_budget('interactive', runaway_after => '0', runaway_action => 'log', quarantine => '0')" >/dev/null ;;
	cancel | latency) sql "SELECT dbgate.alter_budget('interactive', runaway_after => '1s', runaway_action => 'cancel', quarantine => '0')" >/dev/null ;;
	quarantine) sql "SELECT dbgate.alter_budget('interactive', runaway_after => '1s', runaway_action => 'cancel', quarantine => '60s')" >/dev/null ;;
	esac
	[ "$c" = latency ] && every=0.5
	sql "SELECT dbgate.quarantine_remove()" >/dev/null
	sql "SELECT dbgate.reset_stats('interactive')" >/dev/null
	from=$(stat -c %s "$WORK/data.log")
	[ "$c" = base ] || reports_start "$every"
	run_pgbench "$tag" "$PORT" bench "$NCLI" "$DUR" 1 -f "$WORK/inter.sql"
	if [ "$c" != base ]; then
		reports=$(sql "SELECT count(*) FROM pg_stat_activity WHERE usename = 'rep'")
		reports_stop
	fi
	wait_idle "$PORT" || R_NOTE="${R_NOTE:+$R_NOTE; }sessions still connected 15 s after the run; terminated"
	to=$(stat -c %s "$WORK/data.log")
	IFS='|' read -r ra q rej < <(sql "SELECT runaways, quarantined, rejected_full + rejected_timeout FROM dbgate.status WHERE budget = 'interactive'")
	# the reports that arrived: each is one "statement:" line of role rep's sessions
	reports=$(tail -c +$((from + 1)) "$WORK/data.log" | head -c $((to - from)) | grep -c 'statement: SELECT pg_sleep(20.0) AS report' || true)
	echo "$c,$rep,${R_TPS:-nan},$(ms "$R_P50"),$(ms "$R_P99"),$ra,$q,$reports,$rej,$from,$to,$R_STATUS,${R_NOTE//,/;}" >>"$OUT/runs.csv"
	log "$tag: tps ${R_TPS:-?} p99 $(ms "$R_P99") ms, reports $reports, runaways $ra, quarantined $q${R_NOTE:+ -- $R_NOTE}"
}

REPORT_DEMOTE=$(sql "SELECT dbgate.alter_budget('interactive', runaway_after => '1s', runaway_action => 'demote', runaway_budget => 'slow')" 2>&1 >/dev/null | head -n 1 || true)
sql "SELECT dbgate.alter_budget('interactive', runaway_after => '0', runaway_action => 'log', runaway_budget => '')" >/dev/null
[ -z "$REPORT_DEMOTE" ] && die "runaway_action 'demote' is accepted now: measure it here"

{
	meta_common
	echo "interactive statement: width $WIDTH, ${LAT_INTER} us for one client (p50)"
	echo "runs: $DUR s, $REPS repetitions, $NCLI interactive clients, a report every $REPORT_EVERY s (latency: 0.5 s)"
	echo "demote: $REPORT_DEMOTE"
} >"$OUT/meta.txt"

repeat_points run_point base norule cancel quarantine latency
cp "$WORK/data.log" "$RAW/server-data.log"

python3 - "$OUT" "$RAW/server-data.log" <<'PYEOF' | tee "$OUT/summary.md"
import csv, re, statistics, sys
from datetime import datetime, timezone

out, logf = sys.argv[1], sys.argv[2]
rows = list(csv.DictReader(open(f"{out}/runs.csv")))
meta = open(f"{out}/meta.txt").read()
data = open(logf, "rb").read()

def med(xs):
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else float("nan")

def col(case, name):
    return [float(r[name]) for r in rows if r["case"] == case and r[name] not in ("", "nan")]

def ts(s):
    return datetime.strptime(s, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=timezone.utc).timestamp()

def p99(xs):
    xs = sorted(xs)
    return xs[max(0, -(-99 * len(xs) // 100) - 1)] if xs else float("nan")

line = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) UTC \[(\d+)\] (\w+):  (.*)$")
count_lat, cancel_lat = [], []
for r in rows:
    if r["case"] not in ("cancel", "quarantine", "latency"):
        continue
    text = data[int(r["log_from"]):int(r["log_to"])].decode("utf-8", "replace")
    started = {}
    for l in text.splitlines():
        m = line.match(l)
        if not m:
            continue
        t, pid, level, msg = ts(m.group(1)), m.group(2), m.group(3), m.group(4)
        if level == "LOG" and msg.startswith("statement: SELECT pg_sleep(20.0)"):
            started[pid] = t
        mm = re.match(r"runaway statement in budget \"interactive\": pid \d+, query id -?\d+, elapsed (\d+) ms \(runaway_after (\d+) ms", msg)
        if level == "LOG" and mm:
            count_lat.append(int(mm.group(1)) - int(mm.group(2)))
        if level == "ERROR" and "ran longer than runaway_after" in msg and pid in started:
            cancel_lat.append((t - started.pop(pid)) * 1000 - 1000)

b_p99, b_tps = med(col("base", "p99_ms")), med(col("base", "tps"))
print("# Runaway statements (test/bench/runaway.sh)\n")
print("```\n" + meta.strip() + "\n```\n")
print("| case | TPS (median) | TPS / base | p99 ms (median) | p99 / base | reports | runaways | quarantined |")
print("|---|---|---|---|---|---|---|---|")
for c in ("base", "norule", "cancel", "quarantine", "latency"):
    tps, p = med(col(c, "tps")), med(col(c, "p99_ms"))
    print(f"| {c} | {tps:.1f} | {tps / b_tps:.2f} | {p:.2f} | {p / b_p99:.2f} | "
          f"{med(col(c, 'reports')):.0f} | {med(col(c, 'runaways')):.0f} | {med(col(c, 'quarantined')):.0f} |")
print()
def spread(c, name):
    xs = col(c, name)
    return f"{min(xs):.2f}..{max(xs):.2f}" if xs else "-"
for c in ("base", "norule", "cancel", "quarantine"):
    print(f"- {c}: p99 over repetitions {spread(c, 'p99_ms')} ms, TPS {spread(c, 'tps')}")
print()

def target(ok, text):
    print(f"- [{'met' if ok else 'MISSED'}] {text}")

print("## Targets\n")
print("- [not measured] 1 with 'demote': " + [l for l in meta.splitlines() if l.startswith("demote:")][0][8:])
c_p99, c_tps = med(col("cancel", "p99_ms")), med(col("cancel", "tps"))
n_p99, n_tps = med(col("norule", "p99_ms")), med(col("norule", "tps"))
target(c_p99 <= 2 * b_p99 and c_tps >= 0.9 * b_tps,
       f"1 with 'cancel': p99 {c_p99:.2f} ms = {c_p99 / b_p99:.2f} x base (<= 2), TPS {c_tps / b_tps:.2f} x base (>= 0.9); "
       f"without the rule: p99 {n_p99 / b_p99:.2f} x, TPS {n_tps / b_tps:.2f} x")
qr = [r for r in rows if r["case"] == "quarantine"]
ok2 = all(int(r["runaways"]) == 1 and int(r["quarantined"]) == int(r["reports"]) - 1 for r in qr)
target(ok2, "2 quarantine: per run " + ", ".join(
    f"{r['runaways']} runaway(s), quarantined {r['quarantined']} of {r['reports']} reports" for r in qr))
cl, kl = p99(count_lat), p99(cancel_lat)
target(len(count_lat) >= 50 and cl <= 100,
       f"3 count latency (elapsed - runaway_after at the worker's count): p99 {cl} ms over {len(count_lat)} runaways "
       f"(median {med(count_lat)} ms, max {max(count_lat) if count_lat else 'nan'} ms)")
target(len(cancel_lat) >= 50 and kl <= 100,
       f"3 'cancel' latency (ERROR - statement start - runaway_after, an upper bound): p99 {kl:.1f} ms over {len(cancel_lat)} "
       f"(median {med(cancel_lat):.1f} ms, max {max(cancel_lat) if cancel_lat else float('nan'):.1f} ms)")
PYEOF
bench_chown_out
