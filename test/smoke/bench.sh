#!/usr/bin/env bash
# Smoke of the benchmark tooling (test/bench/run.sh): every scenario once,
# tiny (scale 1, 1 s per point, one max_active / pool size), against the dbgate
# that test/check.sh has just installed.  Passes when the tooling works: all
# runs complete without errors, the gate's counters are consistent, and the
# tables and plots are written.  Performance targets are never asserted here.
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

rc=0
TMPDIR=$work BENCH_RETRY_EMPTY=1 bash "$SRC/test/bench/run.sh" --quick --no-install --scale 1 --duration 1 \
	--max-active 2 --range-width 500 --out "$out" || rc=$?
# the first runs that fall short (scenario, contender, tps, p99, status,
# note), before the verdict, which test/check.sh repeats with its 5 lines
# before at the end of its output
short_runs() {
	tail -n +2 "$out/runs.csv" 2>/dev/null |
		awk -F, '$22 != "ok" || $7 + 0 <= 0 || ($1 != "overhead" && $10 + 0 <= 0) {
			print "  " $1 " " $2 " " $3 " rep " $5 ": tps " $7 ", p99_us " $10 ", " $22 (NF > 22 ? ": " $23 : "") }' |
		head -n 4
}
# the anomalies that summary.md names (a run whose counters disagree
# carries a note, and stats.py then exits 1, which run.sh turns into 3)
anomalies() {
	sed -n '/^## Anomalies/,$p' "$out/summary.md" 2>/dev/null | grep '^| ' | tail -n +3 |
		head -n 4 | sed 's/^/  anomaly: /'
}
fail() {
	short_runs
	anomalies
	echo "bench smoke FAILED: $*"
	exit 1
}
[ $rc -eq 0 ] || fail "run.sh exited with status $rc"

# One row per point: overhead 6, bulkhead 3 + 4 (parallel variant),
# saturation 2 x (1 + 3 + 1) (ungated; fair, non-fair, lifo; PgBouncer),
# handoff 6.
rows=$(tail -n +2 "$out/runs.csv" | wc -l)
okrows=$(tail -n +2 "$out/runs.csv" | awk -F, '$22 == "ok" && $7 + 0 > 0' | wc -l)
[ "$rows" = 29 ] || fail "runs.csv has $rows rows, expected 29"
[ "$okrows" = 29 ] || fail "only $okrows of 29 runs completed with a throughput"
latrows=$(tail -n +2 "$out/runs.csv" | awk -F, '$1 != "overhead" && $10 + 0 > 0' | wc -l)
[ "$latrows" = 23 ] || fail "only $latrows of 23 runs have latency percentiles"
for section in "1. Idle overhead" "2. Bulkhead" "2b. Bulkhead with parallel" "3. Saturation" "4. Hand-off" "Targets"; do
	grep -qE "^##+ $section" "$out/summary.md" || fail "summary.md lacks section '$section'"
done
[ -s "$out/summary.csv" ] || fail "summary.csv is empty"
if command -v gnuplot >/dev/null; then
	for png in bulkhead saturation; do
		[ -s "$out/$png.png" ] || fail "$png.png was not written"
	done
fi
echo "bench smoke passed: $rows runs, tables and plots in place"
