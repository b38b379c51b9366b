#!/usr/bin/env bash
# test/bench/lifo.sh — queue order (1.2) in one command: the figures of
# 'lifo' budgets against 'fifo' ones, the ungated server and PgBouncer.
#
# Usage (as root; as another user only with --no-install):
#   test/bench/lifo.sh                   # ~55 min
#   test/bench/lifo.sh --quick           # tooling check, a few minutes
#
# Options:
#   --reps N          repetitions of every point (default: each script's, 3)
#   --quick           both scripts with --quick
#   --out DIR         results directory (default test/bench/results/lifo)
#   --no-install      do not apt-get anything, do not build (assume installed)
#   --no-build        do not run make && make install in the repository
#
# It runs, one after the other, with their own defaults otherwise:
#   tpcb.sh --orders fifo,lifo --out OUT/tpcb
#       TPC-B-like (pgbench's default script), scales 1 and 10, 32 and 64
#       clients: ungated, 'fifo' and 'lifo' budgets of B = 2, 4, 8 in scope
#       statement and transaction, PgBouncer pools of 2, 4, 8 over its unix
#       socket; the best 'lifo' point against the ungated server and the
#       best pool, and every 'lifo' run's longest wait against
#       overtake_limit + 100 ms
#   run.sh --scenario saturation,handoff --loads S --out OUT/run
#       pgbench -S, 64 clients: fair 'fifo', non-fair and 'lifo' budgets and
#       PgBouncer pools of 1, 2, 4, 8, 16 against the ungated server ('lifo'
#       at B = 2 and at its best B); hand-off, B = 1, 16 clients of
#       SELECT 1: 'lifo' against 'fifo'
# and writes OUT/summary.md: both summaries one after the other.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=$HERE/results/lifo
COMMON=()
QUICK=0
REPS=

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
	case "$1" in
	--reps) REPS=$2; shift ;;
	--quick) QUICK=1 ;;
	--out) OUT=$2; shift ;;
	--no-install) COMMON+=(--no-install) ;;
	--no-build) COMMON+=(--no-build) ;;
	-h | --help) usage; exit 0 ;;
	*) echo "lifo.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done
[ -z "$REPS" ] || [[ "$REPS" =~ ^[1-9][0-9]*$ ]] || { echo "lifo.sh: not a positive integer: '$REPS'" >&2; exit 2; }
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
extra=()
[ "$QUICK" = 1 ] && extra+=(--quick)
[ -n "$REPS" ] && extra+=(--reps "$REPS")

rc=0
bash "$HERE/tpcb.sh" --orders fifo,lifo --out "$OUT/tpcb" ${COMMON[@]+"${COMMON[@]}"} ${extra[@]+"${extra[@]}"} || rc=$?
[ $rc -eq 0 ] || [ $rc -eq 3 ] || exit $rc
# the build (if any) was done by tpcb.sh
nobuild=(--no-build)
for a in ${COMMON[@]+"${COMMON[@]}"}; do [ "$a" = --no-install ] && nobuild=(); done
rc2=0
bash "$HERE/run.sh" --scenario saturation,handoff --loads S --out "$OUT/run" \
	${COMMON[@]+"${COMMON[@]}"} ${nobuild[@]+"${nobuild[@]}"} ${extra[@]+"${extra[@]}"} || rc2=$?
[ $rc2 -eq 0 ] || [ $rc2 -eq 3 ] || exit $rc2
{
	echo "# Queue order: 'lifo' and 'fifo' budgets (test/bench/lifo.sh)"
	echo
	echo "Two runs: tpcb.sh (tpcb/) and run.sh (run/); each section below is that run's summary."
	echo
	sed 's/^#/##/' "$OUT/tpcb/summary.md"
	echo
	sed 's/^#/##/' "$OUT/run/summary.md"
} >"$OUT/summary.md"
if [ "$(id -u)" = 0 ]; then chown -R --reference="$HERE" "$OUT" 2>/dev/null || true; fi
echo "lifo.sh: results in $OUT (summary.md, tpcb/, run/)"
[ $rc -eq 0 ] && [ $rc2 -eq 0 ] || exit 3
