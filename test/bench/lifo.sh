#!/usr/bin/env bash
# test/bench/lifo.sh — queue order (1.2) in one command: the figures of
# 'lifo' budgets against 'fifo' ones, the ungated server and PgBouncer.
#
# Usage (as root; as another user only with --no-install):
#   test/bench/lifo.sh                   # ~55 min
#   test/bench/lifo.sh --quick           # tooling check, a few minutes
#   test/bench/lifo.sh --targets         # the cells of issue 28 only, ~22 min
#
# Options:
#   --reps N          repetitions of every point (default: each script's, 3)
#   --quick           both scripts with --quick
#   --targets         only what the targets of issue 28 are checked on, at B
#                     and pool sizes 2, 4, 8 (near the best known): tpcb.sh
#                     at scale 1, scope 'transaction' only; run.sh's
#                     saturation with 'lifo' budgets and PgBouncer, 10 s per
#                     point, and its hand-off with 'fifo' and 'lifo'; then
#                     shares.sh --scenario reserve (item 4; skipped with a
#                     line saying so where the installed dbgate has no
#                     'reserved')
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
# and writes OUT/summary.md: the checked targets of issue 28 (one line each:
# target, measured, ratio, PASS or MISS, collected from the summaries),
# then both summaries one after the other.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=$HERE/results/lifo
COMMON=()
QUICK=0
TARGETS=0
REPS=

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
	case "$1" in
	--reps) REPS=$2; shift ;;
	--quick) QUICK=1 ;;
	--targets) TARGETS=1 ;;
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

tpcb_args=(--orders fifo,lifo)
run_args=(--scenario saturation,handoff --loads S)
if [ "$TARGETS" = 1 ]; then
	tpcb_args+=(--scales 1 --clients 32,64 --pools 2,4,8 --scopes transaction)
	run_args+=(--max-active 2,4,8 --clients 64 --duration 10)
	export SAT_CONTENDERS="lifo pgbouncer" HANDOFF_CONTENDERS="fair lifo"
fi
rc=0
bash "$HERE/tpcb.sh" "${tpcb_args[@]}" --out "$OUT/tpcb" ${COMMON[@]+"${COMMON[@]}"} ${extra[@]+"${extra[@]}"} || rc=$?
[ $rc -eq 0 ] || [ $rc -eq 3 ] || exit $rc
# the build (if any) was done by tpcb.sh; but with BENCH_UNLOCK_FD (lib.sh:
# the lock around installs was let go once tpcb.sh's server ran) others may
# have installed theirs since: take the lock again and install this build
# again before each of the next scripts starts its servers
nobuild=(--no-build)
for a in ${COMMON[@]+"${COMMON[@]}"}; do [ "$a" = --no-install ] && nobuild=(); done
relock() {
	[ -n "${BENCH_UNLOCK_FD:-}" ] || return 0
	flock "$BENCH_UNLOCK_FD"
	[ ${#nobuild[@]} -eq 0 ] || nobuild=()
}
relock
rc2=0
bash "$HERE/run.sh" "${run_args[@]}" --out "$OUT/run" \
	${COMMON[@]+"${COMMON[@]}"} ${nobuild[@]+"${nobuild[@]}"} ${extra[@]+"${extra[@]}"} || rc2=$?
[ $rc2 -eq 0 ] || [ $rc2 -eq 3 ] || exit $rc2
parts=(tpcb run)
if [ "$TARGETS" = 1 ]; then
	relock
	bash "$HERE/shares.sh" --scenario reserve --out "$OUT/shares" \
		${COMMON[@]+"${COMMON[@]}"} ${nobuild[@]+"${nobuild[@]}"} ${extra[@]+"${extra[@]}"} || rc2=$?
	[ $rc2 -eq 0 ] || [ $rc2 -eq 3 ] || exit $rc2
	parts+=(shares)
fi
{
	echo "# Queue order: 'lifo' and 'fifo' budgets (test/bench/lifo.sh)"
	echo
	echo "Runs: ${parts[*]/%//}; each section below is that run's summary."
	echo
	echo "## Targets of issue 28"
	echo
	echo "| item | target | measured | ratio | verdict |"
	echo "| --- | --- | --- | --- | --- |"
	for p in "${parts[@]}"; do grep -h '^| #[0-9]' "$OUT/$p/summary.md" || true; done
	echo
	for p in "${parts[@]}"; do
		sed 's/^#/##/' "$OUT/$p/summary.md"
		echo
	done
} >"$OUT/summary.md"
if [ "$(id -u)" = 0 ]; then chown -R --reference="$HERE" "$OUT" 2>/dev/null || true; fi
echo "lifo.sh: results in $OUT (summary.md, ${parts[*]/%//})"
[ $rc -eq 0 ] && [ $rc2 -eq 0 ] || exit 3
