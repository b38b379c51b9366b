#!/usr/bin/env bash
# test/bench/runaway.sh — runaway statements (1.3): what runaway_after does
# for an interactive budget into which long reports are misclassified
# ('demote' to a slow budget, or 'cancel'), how the quarantine holds their
# repeats back, and how late the action comes.
#
# Usage (as root; as another user only with --no-install):
#   test/bench/runaway.sh                  # 60 s per run, 3 reps (~22 min)
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
# Budget slow: max_active 1, max_queued 64 (where 'demote' moves the
# reports).  The contenders, alternated (A B C D, D C B A, ...):
#   base        the interactive clients alone (no reports)
#   norule      with the reports, interactive has no runaway_after
#   demote      with the reports, runaway_after 1s, runaway_action
#               'demote', runaway_budget 'slow' (a report holds its
#               interactive slot for 1 s, then runs on in slow beyond its
#               limit)
#   cancel      with the reports, runaway_after 1s, runaway_action 'cancel'
#   dquarantine as demote, with quarantine 60s (the table emptied before
#               the run: the first report runs away and is demoted, its
#               repeats go straight to slow and queue there)
#   quarantine  as cancel, with quarantine 60s (the repeats are refused at
#               the gate with 53000)
#   dlatency, latency   as demote and cancel, with a report every 0.5 s,
#               for a third of the duration (for the action latency over
#               many runaways); in dlatency a superuser session polls
#               dbgate.backends every 5 ms for the reports' rows (their
#               state_since is their admission; it notes when each is
#               first seen demoted)
#
# Printed targets (issue 30, "Measured"):
#   1. demote (and cancel): interactive p99 <= 2 x base p99, TPS >= 0.9 x
#      base (norule beside them for comparison)
#   2. quarantine with demote (and with cancel): 1 runaway per run,
#      quarantined = the reports after the first (with demote: slow's
#      demoted_in 1; its admitted and its canceled_waiting add up to the
#      repeats: those still queued when the reports are terminated at the
#      end leave the queue, or are handed a slot as they go)
#   3. action latency over >= 50 runaways: p99 of (count time - admission
#      - runaway_after) from the worker's LOG lines ("elapsed"), per
#      action; for 'demote' p99 of (the LOG line's time, written once the
#      move is made - admission - runaway_after) with the admission from
#      the poll (dlatency), and p99 of (first seen demoted - admission -
#      runaway_after), which the poll period bounds; as an upper bound over
#      every demote run, (the LOG line's time - the statement's start -
#      runaway_after) from the server log (log_statement of role rep; the
#      start is before the gate, so a report's wait in the queue counts
#      against it); for 'cancel' (the statement's ERROR - its start -
#      runaway_after), the same kind of upper bound
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
# the poll of dlatency: the first time each report (pid, admission) is seen
# demoted out of interactive
sql "CREATE TABLE demote_seen (pid int, since timestamptz, seen timestamptz, PRIMARY KEY (pid, since));
	CREATE FUNCTION demote_watch(secs float8) RETURNS void LANGUAGE plpgsql AS \$\$
	DECLARE t0 timestamptz := clock_timestamp();
	BEGIN
		WHILE clock_timestamp() < t0 + secs * interval '1 s' LOOP
			INSERT INTO demote_seen
				SELECT b.pid, b.state_since, clock_timestamp() FROM dbgate.backends b
				 WHERE b.role = 'rep' AND b.demoted_from = 'interactive'
				ON CONFLICT DO NOTHING;
			PERFORM pg_sleep(0.005);
		END LOOP;
	END\$\$" >/dev/null

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

echo "case,rep,tps,p50_ms,p99_ms,runaways,quarantined,reports,rejected,demoted_out,slow_demoted_in,slow_admitted,slow_canceled_waiting,log_from,log_to,status,note" >"$OUT/runs.csv"
ms() { awk -v v="${1:-}" 'BEGIN { if (v == "" || v == "nan") print "nan"; else printf "%.2f", v / 1000 }'; }
# the latency runs: a third of the duration (at least 5 s)
LAT_DUR=$((DUR / 3 > 5 ? DUR / 3 : 5))

run_point() { # contender rep
	local c=$1 rep=$2 tag="$1-r$2" every=$REPORT_EVERY dur=$DUR reports=0 ra q rej dout din sadm sq from to
	local rule="runaway_after => '1s', runaway_budget => ''"
	case $c in
	base | norule) rule="runaway_after => '0', runaway_action => 'log', runaway_budget => '', quarantine => '0'" ;;
	cancel | latency) rule="$rule, runaway_action => 'cancel', quarantine => '0'" ;;
	quarantine) rule="$rule, runaway_action => 'cancel', quarantine => '60s'" ;;
	demote | dlatency) rule="runaway_after => '1s', runaway_action => 'demote', runaway_budget => 'slow', quarantine => '0'" ;;
	dquarantine) rule="runaway_after => '1s', runaway_action => 'demote', runaway_budget => 'slow', quarantine => '60s'" ;;
	esac
	# (runaway_budget is set together with 'demote' and cleared with the
	# others, so that no other contender's chain names it)
	sql "SELECT dbgate.alter_budget('interactive', $rule)" >/dev/null
	case $c in latency | dlatency) every=0.5 dur=$LAT_DUR ;; esac
	sql "SELECT dbgate.quarantine_remove()" >/dev/null
	sql "SELECT dbgate.reset_stats('interactive'); SELECT dbgate.reset_stats('slow')" >/dev/null
	from=$(stat -c %s "$WORK/data.log")
	local poll=
	if [ "$c" = dlatency ]; then
		sql "TRUNCATE demote_seen" >/dev/null
		psql_at "$PORT" postgres -c "SELECT demote_watch($dur + 2)" >/dev/null &
		poll=$!
		BG_PIDS+=("$poll")
	fi
	[ "$c" = base ] || reports_start "$every"
	run_pgbench "$tag" "$PORT" bench "$NCLI" "$dur" 1 -f "$WORK/inter.sql"
	if [ "$c" != base ]; then
		reports=$(sql "SELECT count(*) FROM pg_stat_activity WHERE usename = 'rep'")
		reports_stop
	fi
	if [ -n "$poll" ]; then
		wait "$poll" || R_NOTE="${R_NOTE:+$R_NOTE; }the poll of dbgate.backends failed"
		local keep=() p
		for p in "${BG_PIDS[@]}"; do [ "$p" = "$poll" ] || keep+=("$p"); done
		BG_PIDS=(${keep[@]+"${keep[@]}"})
		sql "COPY (SELECT pid, extract(epoch FROM since), extract(epoch FROM seen) FROM demote_seen ORDER BY seen) TO STDOUT WITH (FORMAT csv)" >"$RAW/seen-$tag.csv"
	fi
	wait_idle "$PORT" || R_NOTE="${R_NOTE:+$R_NOTE; }sessions still connected 15 s after the run; terminated"
	to=$(stat -c %s "$WORK/data.log")
	IFS='|' read -r ra q rej dout < <(sql "SELECT runaways, quarantined, rejected_full + rejected_timeout, demoted_out FROM dbgate.status WHERE budget = 'interactive'")
	# (the repeats still queued in slow when the reports stop are
	# terminated there: canceled_waiting, or admitted if a slot is handed
	# to them meanwhile)
	IFS='|' read -r din sadm sq < <(sql "SELECT demoted_in, admitted, canceled_waiting FROM dbgate.status WHERE budget = 'slow'")
	# the reports that arrived: each is one "statement:" line of role rep's sessions
	reports=$(tail -c +$((from + 1)) "$WORK/data.log" | head -c $((to - from)) | grep -c 'statement: SELECT pg_sleep(20.0) AS report' || true)
	echo "$c,$rep,${R_TPS:-nan},$(ms "$R_P50"),$(ms "$R_P99"),$ra,$q,$reports,$rej,$dout,$din,$sadm,$sq,$from,$to,$R_STATUS,${R_NOTE//,/;}" >>"$OUT/runs.csv"
	log "$tag: tps ${R_TPS:-?} p99 $(ms "$R_P99") ms, reports $reports, runaways $ra, demoted $dout (slow: in $din, admitted $sadm, canceled waiting $sq), quarantined $q${R_NOTE:+ -- $R_NOTE}"
}

{
	meta_common
	echo "interactive statement: width $WIDTH, ${LAT_INTER} us for one client (p50)"
	echo "runs: $DUR s, $REPS repetitions, $NCLI interactive clients, a report every $REPORT_EVERY s (latency runs: $LAT_DUR s, a report every 0.5 s)"
} >"$OUT/meta.txt"

repeat_points run_point base norule demote cancel dquarantine quarantine dlatency latency
cp "$WORK/data.log" "$RAW/server-data.log"

python3 - "$OUT" "$RAW/server-data.log" "$RAW" <<'PYEOF' | tee "$OUT/summary.md"
import csv, glob, os, re, statistics, sys
from datetime import datetime, timezone

out, logf, raw = sys.argv[1], sys.argv[2], sys.argv[3]
rows = list(csv.DictReader(open(f"{out}/runs.csv")))
meta = open(f"{out}/meta.txt").read()
data = open(logf, "rb").read()
RA_MS = 1000
CASES = ("base", "norule", "demote", "cancel", "dquarantine", "quarantine", "dlatency", "latency")
DEMOTE = ("demote", "dquarantine", "dlatency")
CANCEL = ("cancel", "quarantine", "latency")

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

def fmt(x, d=1):
    return "nan" if x != x else f"{x:.{d}f}"

line = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) UTC \[(\d+)\] (\w+):  (.*)$")
ra_line = re.compile(r"runaway statement in budget \"interactive\": pid (\d+), query id -?\d+, elapsed (\d+) ms \(runaway_after (\d+) ms, action (.*)\)$")
count_lat = {"demote": [], "cancel": []}
cancel_lat = []        # ERROR - statement start - runaway_after
demote_log_start = []  # LOG (moved) - statement start - runaway_after
demote_log = {}        # (rep, pid) -> times of the LOG lines of a dlatency run
not_moved = 0          # 'demote: not moved' of a statement still running
ended_first = {}       # (case, rep) -> runaways whose session ended just before the move
                       # (the reports are terminated at the end of a run)
for r in rows:
    if r["case"] not in DEMOTE + CANCEL:
        continue
    action = "demote" if r["case"] in DEMOTE else "cancel"
    text = data[int(r["log_from"]):int(r["log_to"])].decode("utf-8", "replace")
    started, ended = {}, set()
    for l in text.splitlines():
        m = line.match(l)
        if not m:
            continue
        t, pid, level, msg = ts(m.group(1)), m.group(2), m.group(3), m.group(4)
        if level == "LOG" and msg.startswith("statement: SELECT pg_sleep(20.0)"):
            started[pid] = t
            ended.discard(pid)
        if level == "FATAL":
            ended.add(pid)
        mm = ra_line.match(msg)
        if level == "LOG" and mm:
            count_lat[action].append(int(mm.group(2)) - int(mm.group(3)))
            if action == "demote":
                if not mm.group(4).startswith('demote to "slow"'):
                    if mm.group(1) in ended:
                        k = (r["case"], r["rep"])
                        ended_first[k] = ended_first.get(k, 0) + 1
                    else:
                        not_moved += 1
                    continue
                rp = mm.group(1)
                if rp in started:
                    demote_log_start.append((t - started.pop(rp)) * 1000 - RA_MS)
                if r["case"] == "dlatency":
                    demote_log.setdefault((r["rep"], rp), []).append(t)
        if level == "ERROR" and "ran longer than runaway_after" in msg and pid in started:
            cancel_lat.append((t - started.pop(pid)) * 1000 - RA_MS)

# dlatency: the poll's admission (state_since) and first sighting demoted
seen_lat, log_lat = [], []
for r in rows:
    if r["case"] != "dlatency":
        continue
    f = f"{raw}/seen-dlatency-r{r['rep']}.csv"
    if not os.path.exists(f):
        continue
    for pid, since, seen in csv.reader(open(f)):
        since, seen = float(since), float(seen)
        seen_lat.append((seen - since) * 1000 - RA_MS)
        # the LOG line of this report: the one within its 20 s after admission
        for t in demote_log.get((r["rep"], pid), []):
            if since <= t <= since + 25:
                log_lat.append((t - since) * 1000 - RA_MS)
                break

b_p99, b_tps = med(col("base", "p99_ms")), med(col("base", "tps"))
print("# Runaway statements (test/bench/runaway.sh)\n")
print("```\n" + meta.strip() + "\n```\n")
print("| case | TPS (median) | TPS / base | p99 ms (median) | p99 / base | reports | runaways | demoted | quarantined |")
print("|---|---|---|---|---|---|---|---|---|")
for c in CASES:
    tps, p = med(col(c, "tps")), med(col(c, "p99_ms"))
    print(f"| {c} | {tps:.1f} | {tps / b_tps:.2f} | {p:.2f} | {p / b_p99:.2f} | "
          f"{med(col(c, 'reports')):.0f} | {med(col(c, 'runaways')):.0f} | {med(col(c, 'demoted_out')):.0f} | "
          f"{med(col(c, 'quarantined')):.0f} |")
print()
def spread(c, name):
    xs = col(c, name)
    return f"{min(xs):.2f}..{max(xs):.2f}" if xs else "-"
for c in ("base", "norule", "demote", "cancel", "dquarantine", "quarantine"):
    print(f"- {c}: p99 over repetitions {spread(c, 'p99_ms')} ms, TPS {spread(c, 'tps')}")
print()

def target(ok, text):
    print(f"- [{'met' if ok else 'MISSED'}] {text}")

print("## Targets\n")
n_p99, n_tps = med(col("norule", "p99_ms")), med(col("norule", "tps"))
for c in ("demote", "cancel"):
    c_p99, c_tps = med(col(c, "p99_ms")), med(col(c, "tps"))
    target(c_p99 <= 2 * b_p99 and c_tps >= 0.9 * b_tps,
           f"1 with '{c}': p99 {c_p99:.2f} ms = {c_p99 / b_p99:.2f} x base (<= 2), TPS {c_tps / b_tps:.2f} x base (>= 0.9); "
           f"without the rule: p99 {n_p99 / b_p99:.2f} x, TPS {n_tps / b_tps:.2f} x")
dq = [r for r in rows if r["case"] == "dquarantine"]
ok2 = bool(dq) and all(int(r["runaways"]) == 1 and int(r["demoted_out"]) == 1 and int(r["slow_demoted_in"]) == 1
                       and int(r["quarantined"]) == int(r["reports"]) - 1
                       and int(r["slow_admitted"]) + int(r["slow_canceled_waiting"]) == int(r["reports"]) - 1 for r in dq)
target(ok2, "2 quarantine with 'demote': per run " + ", ".join(
    f"{r['runaways']} runaway(s) ({r['demoted_out']} demoted), quarantined {r['quarantined']} of {r['reports']} reports "
    f"(slow: demoted_in {r['slow_demoted_in']}, admitted {r['slow_admitted']} + canceled_waiting "
    f"{r['slow_canceled_waiting']})" for r in dq))
qr = [r for r in rows if r["case"] == "quarantine"]
ok2 = bool(qr) and all(int(r["runaways"]) == 1 and int(r["quarantined"]) == int(r["reports"]) - 1 for r in qr)
target(ok2, "2 quarantine with 'cancel': per run " + ", ".join(
    f"{r['runaways']} runaway(s), quarantined {r['quarantined']} of {r['reports']} reports" for r in qr))
dm = [r for r in rows if r["case"] in DEMOTE]
ok_moves = not not_moved and all(
    int(r["demoted_out"]) == int(r["slow_demoted_in"])
    and int(r["runaways"]) == int(r["demoted_out"]) + ended_first.get((r["case"], r["rep"]), 0) for r in dm)
target(ok_moves, f"every runaway of the demote runs was moved: runaways = demoted_out = slow's demoted_in in each, "
       f"but for a report whose session ended (terminated at the end of the run) just before its move "
       f"({sum(int(r['demoted_out']) for r in dm)} moves; {sum(ended_first.values())} ended first; "
       f"'not moved' of a statement still running: {not_moved})")
for a in ("demote", "cancel"):
    xs = count_lat[a]
    target(len(xs) >= 50 and p99(xs) <= 100,
           f"3 count latency, '{a}' runs (elapsed - runaway_after at the worker's count): p99 {p99(xs)} ms over {len(xs)} "
           f"runaways (median {med(xs)} ms, max {max(xs) if xs else 'nan'} ms)")
target(len(log_lat) >= 50 and p99(log_lat) <= 100,
       f"3 'demote' latency (the LOG line, written once moved - admission - runaway_after; dlatency): p99 "
       f"{fmt(p99(log_lat))} ms over {len(log_lat)} (median {fmt(med(log_lat))} ms, max {fmt(max(log_lat) if log_lat else float('nan'))} ms)")
target(len(seen_lat) >= 50 and p99(seen_lat) <= 100,
       f"3 'demote' latency (first seen demoted by a 5 ms poll - admission - runaway_after; dlatency): p99 "
       f"{fmt(p99(seen_lat))} ms over {len(seen_lat)} (median {fmt(med(seen_lat))} ms, max {fmt(max(seen_lat) if seen_lat else float('nan'))} ms)")
target(len(demote_log_start) >= 50 and p99(demote_log_start) <= 100,
       f"3 'demote' latency (the LOG line - statement start - runaway_after, an upper bound; every demote run): p99 "
       f"{fmt(p99(demote_log_start))} ms over {len(demote_log_start)} (median {fmt(med(demote_log_start))} ms, "
       f"max {fmt(max(demote_log_start) if demote_log_start else float('nan'))} ms)")
target(len(cancel_lat) >= 50 and p99(cancel_lat) <= 100,
       f"3 'cancel' latency (ERROR - statement start - runaway_after, an upper bound): p99 {fmt(p99(cancel_lat))} ms over {len(cancel_lat)} "
       f"(median {fmt(med(cancel_lat))} ms, max {fmt(max(cancel_lat) if cancel_lat else float('nan'))} ms)")
PYEOF
bench_chown_out
