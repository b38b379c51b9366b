#!/usr/bin/env bash
# Smoke of the benchmark tooling (test/bench/run.sh): every scenario once,
# tiny (scale 1, 10 transactions per client and point, a flood query of a
# tenth of the default that leads the interactive clients by 1 s instead
# of 2, 16 clients of saturation instead of 64, one max_active / pool
# size), against the dbgate that test/check.sh has just installed.  It
# checks the tooling, not the machine:
# every run completes without errors and with exactly its clients x 10
# transactions, the latencies are read from pgbench's logs, the gate's
# counters are consistent, and stats.py writes its tables, data files and
# plots.  Nothing here depends on a throughput, a ratio or a time: a point
# counts its transactions from the moment all its clients have connected
# (pgbench -t; -T counts the connections too, and 64 clients took longer
# than a 1 s point on a busy machine), and the targets are for test/bench,
# never asserted here.
# Exit 0 = pass, 77 = skipped (pgbench, pgbouncer, python3 or dbgate missing).
set -euo pipefail

SRC=${DBGATE_SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
skip() { echo "bench smoke skipped: $*"; exit 77; }

[ -x "$PG_CONFIG" ] || skip "$PG_CONFIG not found"
BINDIR=$("$PG_CONFIG" --bindir)
[ -x "$BINDIR/pgbench" ] || skip "pgbench not found"
command -v pgbouncer >/dev/null || [ -x /usr/sbin/pgbouncer ] || skip "pgbouncer not installed"
command -v python3 >/dev/null || skip "python3 not found"
[ -f "$("$PG_CONFIG" --pkglibdir)/dbgate.so" ] || skip "dbgate is not installed"

work=${DBGATE_WORK:-}
own_work=
if [ -z "$work" ]; then
	work=$(mktemp -d -t dbgate-bench-smoke.XXXXXX)
	own_work=1
	[ "$(id -u)" = 0 ] && chown postgres: "$work"
fi
trap '[ -z "$own_work" ] || rm -rf "$work"' EXIT
out=$work/out

TXNS=10
rc=0
TMPDIR=$work bash "$SRC/test/bench/run.sh" --quick --no-install --scale 1 --duration 1 \
	--transactions $TXNS --max-active 2 --clients 16 --range-width 500 --heavy-rows 30000 \
	--flood-lead 1 --out "$out" || rc=$?
# runs.csv: 1 scenario, 6 clients, 7 tps, 8 processed, 9-11 p50/p99/mean
# (microseconds; none for overhead, which keeps no log), 22 status, 23 note
NUM='^[0-9]+([.][0-9]+)?$'
bad_runs() {
	tail -n +2 "$out/runs.csv" 2>/dev/null |
		awk -F, -v n="$TXNS" -v num="$NUM" '$22 != "ok" || $8 != $6 * n || $7 !~ num ||
			($1 != "overhead" && ($9 !~ num || $10 !~ num || $11 !~ num))'
}
# the first runs that fall short (scenario, contender, transactions, status,
# note), before the verdict, which test/check.sh repeats with its 5 lines
# before at the end of its output
short_runs() {
	bad_runs | awk -F, -v n="$TXNS" '{
		print "  " $1 " " $2 " " $3 " rep " $5 ": " $8 " of " $6 * n " transactions, tps \"" $7 "\", p50/p99/mean \"" $9 "/" $10 "/" $11 "\", " $22 ($23 != "" ? ": " $23 : "") }' |
		head -n 4 || true
}
# the anomalies that summary.md names (a failed run, or a run whose counters
# disagree, carries a note, and stats.py then exits 1, which run.sh turns
# into 3)
anomalies() {
	sed -n '/^## Anomalies/,$p' "$out/summary.md" 2>/dev/null | grep '^| ' | tail -n +3 |
		head -n 4 | sed 's/^/  anomaly: /' || true
}
fail() {
	short_runs
	anomalies
	echo "bench smoke FAILED: $* ($SECONDS s)"
	exit 1
}
[ $rc -eq 0 ] || fail "run.sh exited with status $rc"

# One row per point: overhead 6, bulkhead 3 + 4 (parallel variant),
# saturation 2 x (1 + 3 + 1) (ungated; fair, non-fair, lifo; PgBouncer),
# handoff 6.
rows=$(tail -n +2 "$out/runs.csv" | wc -l)
[ "$rows" = 29 ] || fail "runs.csv has $rows rows, expected 29"
nbad=$(bad_runs | wc -l)
[ "$nbad" = 0 ] || fail "$nbad of 29 runs fall short (not ok, not clients x $TXNS transactions, no tps, or no latencies)"
for section in "1. Idle overhead" "2. Bulkhead" "2b. Bulkhead with parallel" "3. Saturation" "4. Hand-off" "Targets" "Anomalies"; do
	grep -qE "^##+ $section" "$out/summary.md" || fail "summary.md lacks section '$section'"
done
[ "$(head -n 1 "$out/summary.csv" | tr -d '\r')" = scenario,group,contender,n,metric,median ] ||
	fail "summary.csv lacks its header"
for scn in overhead bulkhead saturation handoff; do
	grep -q "^$scn," "$out/summary.csv" || fail "summary.csv has no row of $scn"
done
for f in meta.txt bulkhead.dat saturation_S.dat saturation_1ms.dat; do
	[ -s "$out/$f" ] || fail "$f was not written"
done
if command -v gnuplot >/dev/null; then
	for png in bulkhead saturation; do
		[ -s "$out/$png.png" ] || fail "$png.png was not written"
	done
fi
echo "bench smoke passed: $rows runs of clients x $TXNS transactions, tables and plots in place ($SECONDS s)"
