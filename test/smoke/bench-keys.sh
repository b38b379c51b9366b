#!/usr/bin/env bash
# Smoke of test/bench/keys.sh (keys, issue 29): every measure once and tiny
# (one repetition, 1 s points 1 s after the flood filled the budget, 12
# flood clients, 1,500 keys over 1 s through dbgate.max_keys = 100 so that
# the overflow key takes part, 3 keys of the rate), against the dbgate that test/check.sh has just installed.
# It checks the tooling, not the machine: keys.sh exits 0 (no run failed: no
# error but a key's 53300, no slot or key left over), writes every row of
# flood.csv, churn.csv and rate.csv with numbers where its summary reads
# them, and summary.md has every section and target line.  No figure,
# ratio or time is judged: short points on a shared machine measure
# nothing.
# Exit 0 = pass, 77 = skipped (pgbench, python3 or dbgate missing).
# shellcheck disable=SC2016 # the awk programs of check_rows
set -euo pipefail

SRC=${DBGATE_SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
skip() { echo "bench-keys smoke skipped: $*"; exit 77; }

[ -x "$PG_CONFIG" ] || skip "$PG_CONFIG not found"
BINDIR=$("$PG_CONFIG" --bindir)
[ -x "$BINDIR/pgbench" ] || skip "pgbench not found"
command -v python3 >/dev/null || skip "python3 not found"
[ -f "$("$PG_CONFIG" --pkglibdir)/dbgate.so" ] || skip "dbgate is not installed"

work=${DBGATE_WORK:-}
own_work=
if [ -z "$work" ]; then
	work=$(mktemp -d -t dbgate-bench-keys-smoke.XXXXXX)
	own_work=1
	[ "$(id -u)" = 0 ] && chown postgres: "$work"
fi
trap '[ -z "$own_work" ] || rm -rf "$work"' EXIT
out=$work/out

fail() {
	sed -n '/^## Anomalies/,$p' "$out/summary.md" 2>/dev/null | grep '^| ' | tail -n +3 | head -n 4 |
		sed 's/^/  anomaly: /' || true
	echo "bench-keys smoke FAILED: $* ($SECONDS s)"
	exit 1
}

RATE_KEYS=3
rc=0
TMPDIR=$work KEYS_REPS=1 KEYS_SECONDS=1 KEYS_WARM=1 KEYS_SCALE=1 KEYS_CAL_SECONDS=1 \
	KEYS_FLOOD_CLIENTS=12 KEYS_CHURN_KEYS=1500 KEYS_CHURN_SECONDS=1 KEYS_CHURN_CLIENTS=8 \
	KEYS_MAX_KEYS=100 KEYS_RATE_KEYS=$RATE_KEYS KEYS_WINDOW=1 \
	bash "$SRC/test/bench/keys.sh" --no-install --out "$out" || rc=$?
[ $rc -eq 0 ] || fail "keys.sh exited with status $rc"

NUM='^-?[0-9]+([.][0-9]+)?$'
# rows: NAME FILE EXPECTED AWK-CONDITION-OF-A-BAD-ROW
check_rows() {
	local n bad
	[ -s "$out/$2" ] || fail "$2 was not written"
	n=$(tail -n +2 "$out/$2" | wc -l)
	[ "$n" = "$3" ] || fail "$2 has $n rows, expected $3"
	bad=$(tail -n +2 "$out/$2" | awk -F, -v num="$NUM" "$4" | head -n 2)
	[ -z "$bad" ] || fail "$2: rows without their figures: $bad"
}
# flood.csv: 1 contender, 8 b_n, 10 b_p99_us, 15 a_aborted, 18 status
check_rows flood flood.csv 5 '$18 != "ok" || $8 !~ num || $8 == 0 || $10 !~ num || $15 !~ num'
for con in alone floor keyed plain keyq; do
	grep -q "^$con,1," "$out/flood.csv" || fail "flood.csv has no row of $con"
done
# churn.csv: 2 keys_sent, 7 keys_overflowed, 11 err_other, 12 max_live_keys,
# 14 samples, 18 priv_first_mb, 24 status
check_rows churn churn.csv 1 '$24 != "ok" || $2 != 1500 || $7 !~ num || $12 !~ num || $14 !~ num || $14 == 0 || $18 !~ num'
# rate.csv: 2 key, 5 per_s, 7 dev_pct, 9 status
check_rows rate rate.csv $((RATE_KEYS + 1)) '$9 != "ok" || $5 !~ num || $7 !~ num'
for section in "1-2. Flood and trickle" "3. Key churn" "4. Per-key rate" "Targets" "Anomalies"; do
	grep -qE "^## $section" "$out/summary.md" || fail "summary.md lacks section '$section'"
done
targets=$(sed -n '/^## Targets/,/^## Anomalies/p' "$out/summary.md" | grep -c '^| [1-5]\. ' || true)
[ "$targets" = 13 ] || fail "summary.md has $targets target lines, expected 13"
[ -s "$out/meta.txt" ] || fail "meta.txt was not written"
echo "bench-keys smoke passed: flood, churn and rate rows with their figures, summary with its 13 target lines ($SECONDS s)"
