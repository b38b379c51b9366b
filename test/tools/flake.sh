#!/usr/bin/env bash
#
# test/tools/flake.sh - run the isolation and TAP suites several times on a
# machine whose CPUs are all busy, and count per test how many runs failed.
#
# Usage: sudo test/tools/flake.sh [--pg VERSION] [--no-install] [N]
#
#   N             runs (default 5)
#   --pg VERSION  the PostgreSQL version to run them on (default this
#                 system's; 17 and 18 run in their root file systems, as
#                 test/check.sh --pg does)
#   --no-install  passed to test/check.sh (every run after the first gets
#                 it anyway: the first one installs what is needed)
#
# For the whole time, one busy process per CPU (nproc) runs beside the
# suites: a test whose verdict depends on how fast the machine is fails
# here.  Each run is one `test/check.sh --pg VERSION isolation tap`;
# CHECK_ONLY, CHECK_TAP_JOBS and the other variables of test/check.sh
# apply.  Its output goes to a log of its own (named at the end when a
# run failed).  Then, per test: "NAME: F of N runs failed", the tests that
# failed first.  A run that ends without its summary line counts as a
# failed run of a test named "(run)".  The last line is
# "N passed, N failed": tests that passed every run, tests that failed
# in at least one.

set -uo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
runs=5 pg=() noinstall=''
while (($# > 0)); do
	case $1 in
	--pg)
		(($# > 1)) || { echo "usage: $0 [--pg VERSION] [--no-install] [N]" >&2; exit 2; }
		pg=(--pg "$2")
		shift 2
		;;
	--no-install) noinstall=--no-install; shift ;;
	[1-9]*) runs=$1; shift ;;
	*)
		echo "usage: $0 [--pg VERSION] [--no-install] [N]" >&2
		exit 2
		;;
	esac
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "N must be a positive number" >&2; exit 2; }
if ((${#pg[@]} == 0)); then pg=(--host); fi

logs=$(mktemp -d "${TMPDIR:-/tmp}/dbgate-flake.XXXXXX") || exit 1
hogs=()

stop_hogs() {
	local p
	for p in ${hogs[@]+"${hogs[@]}"}; do
		kill "$p" 2>/dev/null
	done
	for p in ${hogs[@]+"${hogs[@]}"}; do
		wait "$p" 2>/dev/null
	done
	hogs=()
}
trap 'stop_hogs' EXIT
trap 'echo "*** interrupted"; exit 130' INT TERM HUP

# The hog: one busy loop per CPU, each bounded by a time limit in case
# this script is killed without its traps (4 hours).
ncpu=$(nproc)
for ((i = 0; i < ncpu; i++)); do
	timeout 14400 bash -c 'while :; do :; done' &
	hogs+=($!)
done
echo "flake: $runs run(s) of isolation and tap (${pg[*]}), $ncpu busy process(es) beside them; logs in $logs"

# per_test LOG: "NAME ok|FAILED" for each isolation spec and TAP file of
# one run's output (PostgreSQL 15's "test NAME ... ok" and the TAP format
# of 16+ for the specs; check.sh's "-- NAME.pl: P passed, F failed" for TAP
# files).
per_test() {
	awk '
		# the specs: only between the isolation heading and its summary
		# (prove -v prints "ok N - name" lines of its own)
		/^==== isolation: /        { iso = 1; next }
		/^== isolation: /          { iso = 0; next }
		iso && /^ok [0-9]+ +[-+] /     { n = $0; sub(/^ok [0-9]+ +[-+] +/, "", n); sub(/ .*/, "", n); print "iso:" n, "ok"; next }
		iso && /^not ok [0-9]+ +[-+] / { n = $0; sub(/^not ok [0-9]+ +[-+] +/, "", n); sub(/ .*/, "", n); print "iso:" n, "FAILED"; next }
		iso && /^ *(test +)?[^ ]+ +\.\.\. +(ok|FAILED|failed)/ {
			n = $0; sub(/^ *(test +)?/, "", n); sub(/ .*/, "", n)
			print "iso:" n, ($0 ~ /\.\.\. +ok/ ? "ok" : "FAILED"); next
		}
		/^-- [^ ]+\.pl: [0-9]+ passed, [0-9]+ failed/ {
			n = $2; sub(/\.pl:$/, "", n)
			print "tap:" n, ($5 == "0" ? "ok" : "FAILED"); next
		}
	' "$1"
}

declare -A fails=() seen=()
bad_logs=()
t_all=$SECONDS
for ((r = 1; r <= runs; r++)); do
	log=$logs/run-$r.log
	t0=$SECONDS
	opt=$noinstall
	((r > 1)) && opt=--no-install
	bash "$top/test/check.sh" "${pg[@]}" ${opt:+"$opt"} isolation tap >"$log" 2>&1 </dev/null
	rc=$?
	last=$(tail -n 1 "$log")
	nfail=0
	while read -r name verdict; do
		[[ -n $name ]] || continue
		seen[$name]=1
		: "${fails[$name]:=0}"
		if [[ $verdict != ok ]]; then
			fails[$name]=$((fails[$name] + 1))
			nfail=$((nfail + 1))
		fi
	done < <(per_test "$log")
	if ! [[ $last =~ ^[0-9]+\ passed,\ [0-9]+\ failed ]]; then
		seen['(run)']=1
		fails['(run)']=$((${fails['(run)']:-0} + 1))
		nfail=$((nfail + 1))
	elif ((rc != 0 && nfail == 0)); then
		# check.sh failed without a failed test of ours (a build error,
		# a lane that stopped early): that counts too
		seen['(run)']=1
		fails['(run)']=$((${fails['(run)']:-0} + 1))
		nfail=1
	fi
	((nfail > 0)) && bad_logs+=("$log")
	echo "run $r: ${last:-no output} ($((SECONDS - t0)) s, $nfail test(s) failed)"
done
stop_hogs

echo
echo "==== per test ($runs run(s), $((SECONDS - t_all)) s)"
passed=0 failed=0
while read -r name; do
	[[ -n $name ]] || continue
	f=${fails[$name]:-0}
	echo "$name: $f of $runs runs failed"
	if ((f > 0)); then failed=$((failed + 1)); else passed=$((passed + 1)); fi
done < <(for n in "${!seen[@]}"; do echo "${fails[$n]:-0} $n"; done | sort -k1,1nr -k2 | cut -d' ' -f2-)
if ((${#bad_logs[@]} > 0)); then
	echo "logs of the runs with failures: ${bad_logs[*]}"
elif ((passed + failed > 0)); then
	rm -rf "$logs"
fi
echo "$passed passed, $failed failed"
((failed == 0 && passed > 0))
