#!/usr/bin/env bash
# shellcheck disable=SC2317 # functions called by traps and as suite_$name
#
# test/check.sh - build, install and run every dbgate test suite.
#
# Usage: sudo test/check.sh [--no-install] [--keep] [SUITE...]
#
#   SUITE         regress, isolation, tap or smoke; default all of them
#                 (or the list in $CHECK_SUITES)
#   --no-install  skip apt-get and `make install` and test the dbgate that is
#                 already installed (the build is still checked); allows
#                 running as a non-root user
#   --keep        keep the scratch directory (test results and logs)
#
# As root, the script installs the packages it needs, builds and installs the
# extension, copies the source tree into a scratch directory owned by the
# server user (tests write their results next to their inputs; the caller's
# checkout is never written to) and runs the suites there as that user:
#
#   regress    sql/*.sql against expected/*.out        (pg_regress)
#   isolation  test/isolation/specs/*.spec             (pg_isolation_regress)
#   tap        test/t/*.pl                             (prove)
#   smoke      test/smoke/*.sh: exit 0 passes, 77 skips, anything else fails
#
# pg_regress and pg_isolation_regress start a throwaway instance configured
# with test/dbgate.conf.  TAP tests create their own clusters.  One result is
# counted per regression test, per isolation spec, per top-level TAP
# assertion and per smoke script; the last line of output is
# "N passed, N failed, N skipped", and the exit status is 0 only if nothing
# failed.
#
# Environment: CHECK_SUITES, CHECK_TIMEOUT (seconds per command, default
# 600), CHECK_KEEP=1 (like --keep), PG_TEST_TIMEOUT_DEFAULT (TAP waits,
# default here 60), PGISOLATIONTIMEOUT (isolation step waits, default here
# 120), PG_MAJOR, PG_CONFIG, DBGATE_OS_USER (see test/lib.sh).  Anything
# else, such as SOAK_LONG, is passed through to the tests unchanged.

set -uo pipefail

# shellcheck source=test/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ALL_SUITES=(regress isolation tap smoke)
# Build and test tools (libkrb5-dev for the GSSAPI headers that the server
# headers include, libipc-run-perl for PostgreSQL::Test::Cluster,
# libdbd-pg-perl for the soak test's client processes); pgbouncer,
# gnuplot-nox and python3 for the benchmarks and their smoke test.
PACKAGES=(postgresql-"$PG_MAJOR" postgresql-server-dev-"$PG_MAJOR"
	build-essential libkrb5-dev perl libipc-run-perl libdbd-pg-perl
	pgbouncer gnuplot-nox python3)
CHECK_TIMEOUT=${CHECK_TIMEOUT:-600}
# A test that waits for something that never happens fails after this
# many seconds instead of PostgreSQL's default of 180 (TAP's poll_query_until
# and friends) or 300 (an isolation step): the whole suite stays short.
export PG_TEST_TIMEOUT_DEFAULT=${PG_TEST_TIMEOUT_DEFAULT:-60}
export PGISOLATIONTIMEOUT=${PGISOLATIONTIMEOUT:-120}

usage() {
	sed -n '/^# Usage:/,/^#   --keep/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
	exit 2
}

do_install=1
keep=${CHECK_KEEP:-}
suites=()
for arg in "$@"; do
	case $arg in
	--no-install) do_install= ;;
	--keep) keep=1 ;;
	-h | --help) usage ;;
	regress | isolation | tap | smoke) suites+=("$arg") ;;
	*)
		echo "unknown argument: $arg" >&2
		usage
		;;
	esac
done
if ((${#suites[@]} == 0)); then
	read -r -a suites <<<"${CHECK_SUITES:-${ALL_SUITES[*]}}"
fi
for s in "${suites[@]}"; do
	case " ${ALL_SUITES[*]} " in
	*" $s "*) ;;
	*)
		echo "unknown suite in CHECK_SUITES: $s" >&2
		exit 2
		;;
	esac
done
if [[ $EUID -ne 0 && -n $do_install ]]; then
	echo "error: run as root (sudo $0), or with --no-install" >&2
	exit 2
fi

passed=0 failed=0 skipped=0
WORK='' CHILD='' TAILPID=''

# ---------------------------------------------------------------------------
# Running commands

# run_logged LOG CMD...
# Run CMD with a time limit of $CHECK_TIMEOUT seconds; its output goes to LOG
# and, as it comes, to our output.  Returns CMD's exit status (124 or 137
# after the time limit).  CMD runs in its own process group (timeout(1)
# makes one), which cleanup() ends on Ctrl-C.
run_logged() {
	local log=$1 rc
	shift
	: >"$log"
	timeout -k 15 "$CHECK_TIMEOUT" "$@" </dev/null >"$log" 2>&1 &
	CHILD=$!
	tail -n +1 -f --pid="$CHILD" "$log" &
	TAILPID=$!
	wait "$CHILD"
	rc=$?
	wait "$TAILPID" 2>/dev/null
	CHILD='' TAILPID=''
	if ((rc == 124 || rc == 137)); then
		echo "*** time limit of ${CHECK_TIMEOUT}s (CHECK_TIMEOUT) exceeded"
	fi
	return "$rc"
}

# show_file FILE [head|tail] [LINES]
# Print FILE under a banner, cut to its first or last LINES lines.
show_file() {
	local f=$1 end=${2:-tail} n=${3:-120} total
	[[ -s $f ]] || return 0
	total=$(wc -l <"$f")
	echo "----- ${f#"$WORK"/} ($total lines$( ((total > n)) && echo ", $end $n"))"
	if [[ $end == head ]]; then head -n "$n" "$f"; else tail -n "$n" "$f"; fi
	echo "----- end of ${f##*/}"
}

# count PASS FAIL SKIP: add results to the totals as soon as they are known
# (an interrupted run still reports what it saw).
count() {
	passed=$((passed + $1)) failed=$((failed + $2)) skipped=$((skipped + $3))
}

# run_suite NAME: run suite_NAME and report its own results and time.
run_suite() {
	local t0=$SECONDS p0=$passed f0=$failed s0=$skipped
	"suite_$1"
	echo "== $1: $((passed - p0)) passed, $((failed - f0)) failed," \
		"$((skipped - s0)) skipped ($((SECONDS - t0)) s)"
}

# ---------------------------------------------------------------------------
# pg_regress and pg_isolation_regress

# count_regress LOG: print "PASS FAIL SKIP" from pg_regress output.  Knows the
# format of PostgreSQL 15 ("test name ... ok") and of 16+ (TAP: "ok 1 - name").
count_regress() {
	awk '
		/^ok [0-9]+ +[-+] /                   { if (/# \(ignored\)/) s++; else p++; next }
		/^not ok [0-9]+ +[-+] /               { if (/# \(ignored\)/) s++; else f++; next }
		/^ *(test +)?[^ ]+ +\.\.\. +ok/       { p++; next }
		/^ *(test +)?[^ ]+ +\.\.\. +failed \(ignored\)/ { s++; next }
		/^ *(test +)?[^ ]+ +\.\.\. +FAILED/   { f++; next }
		END { printf "%d %d %d\n", p, f, s }
	' "$1"
}

# run_pg_regress SUITE PROGRAM INPUTDIR TEST...
run_pg_regress() {
	local suite=$1 prog=$2 inputdir=$3 rc p f s
	shift 3
	# Output directory and database name as in PGXS's installcheck.
	local outdir=$inputdir dbname=contrib_regression
	[[ $suite == isolation ]] && outdir=$inputdir/output_iso dbname=''
	local log=$WORK/logs/$suite.log
	heading "$suite: $# test(s)${*:+: $*}"
	(($# > 0)) || return 0
	rm -rf "$WORK/tree/tmp_check/$suite"
	"${AS_PG[@]}" mkdir -p "$WORK/tree/tmp_check"
	# pg_regress stops at the first test without expected output.  Give such
	# a test an empty one in the scratch copy: it fails like any other, and
	# its diff shows everything it printed.
	local t
	for t in "$@"; do
		if [[ ! -e $inputdir/expected/$t.out ]]; then
			echo "*** $t: no expected/$t.out (a new test?): it will fail"
			"${AS_PG[@]}" mkdir -p "$inputdir/expected"
			"${AS_PG[@]}" touch "$inputdir/expected/$t.out"
		fi
	done
	run_logged "$log" "${AS_PG[@]}" "$prog" \
		--temp-instance="$WORK/tree/tmp_check/$suite" \
		--temp-config="$WORK/tree/test/dbgate.conf" \
		--inputdir="$inputdir" --outputdir="$outdir" \
		--bindir="$BINDIR" --no-locale --encoding=UTF8 \
		${dbname:+--dbname="$dbname"} "$@"
	rc=$?
	stop_servers "$WORK/tree/tmp_check/$suite"
	read -r p f s < <(count_regress "$log")
	if ((rc != 0 && f == 0)); then
		echo "*** ${prog##*/} exited with status $rc: counted as one failure"
		f=1
	fi
	if ((f > 0)); then
		show_file "$outdir/regression.diffs" head 400
		show_file "$WORK/tree/tmp_check/$suite/log/postmaster.log" tail 80
	fi
	count "$p" "$f" "$s"
}

suite_regress() {
	local tests=() f n
	for f in "$WORK"/tree/sql/*.sql; do
		[[ -e $f ]] || continue
		n=${f##*/}
		n=${n%.sql}
		[[ $n == dbgate--* ]] && continue
		tests+=("$n")
	done
	run_pg_regress regress "$PGXS_DIR/src/test/regress/pg_regress" \
		"$WORK/tree" ${tests[@]+"${tests[@]}"}
}

suite_isolation() {
	local tests=() f n
	for f in "$WORK"/tree/test/isolation/specs/*.spec; do
		[[ -e $f ]] || continue
		n=${f##*/}
		tests+=("${n%.spec}")
	done
	run_pg_regress isolation "$PGXS_DIR/src/test/isolation/pg_isolation_regress" \
		"$WORK/tree/test/isolation" ${tests[@]+"${tests[@]}"}
}

# ---------------------------------------------------------------------------
# TAP

# count_tap LOG: print "PASS FAIL SKIP" for the top-level assertions of one
# test file in prove -v output.  A TODO test counts as skipped, and a file
# skipped as a whole (1..0 # SKIP) as one skipped.
count_tap() {
	awk '
		/^ok [0-9]+/                { if (tolower($0) ~ /# (skip|todo)/) s++; else p++; next }
		/^not ok [0-9]+/            { if (tolower($0) ~ /# todo/) s++; else f++; next }
		/^1\.\.0( |$)/              { s++; next }
		END { printf "%d %d %d\n", p, f, s }
	' "$1"
}

suite_tap() {
	local files=() f name log rc p f_ s
	for f in "$WORK"/tree/test/t/*.pl; do
		[[ -e $f ]] && files+=("$f")
	done
	heading "tap: ${#files[@]} file(s)"
	local testdir=$WORK/tap
	mkdir -p "$testdir"
	[[ $EUID -eq 0 ]] && chown "$DBGATE_OS_USER:" "$testdir"
	for f in ${files[@]+"${files[@]}"}; do
		name=${f##*/}
		name=${name%.pl}
		log=$WORK/logs/tap-$name.log
		# The environment of PGXS's prove_installcheck: TESTDIR decides
		# where tmp_check/ (logs, data directories) goes.  Each test sets up
		# its own clusters (shared_preload_libraries included).
		run_logged "$log" "${AS_PG[@]}" env -u TEMP_CONFIG \
			PATH="$BINDIR:$PATH" \
			PERL5LIB="$PGXS_DIR/src/test/perl:$WORK/tree/test/perl:$WORK/tree/test/soak${PERL5LIB:+:$PERL5LIB}" \
			PG_REGRESS="$PGXS_DIR/src/test/regress/pg_regress" \
			TESTDIR="$testdir" \
			prove -v "test/t/$name.pl"
		rc=$?
		stop_servers "$testdir"
		read -r p f_ s < <(count_tap "$log")
		if ((rc != 0 && f_ == 0)); then
			echo "*** $name.pl: prove exited with status $rc: counted as one failure"
			f_=1
		fi
		if ((f_ > 0)); then
			local l
			show_file "$testdir/tmp_check/log/regress_log_$name" tail 150
			for l in "$testdir/tmp_check/log/${name}"_*.log; do
				[[ -e $l ]] && show_file "$l" tail 60
			done
		fi
		echo "-- $name.pl: $p passed, $f_ failed, $s skipped"
		count "$p" "$f_" "$s"
	done
}

# ---------------------------------------------------------------------------
# Smoke scripts

# Each test/smoke/*.sh runs as the server user with DBGATE_SRC (the source
# tree, already built and installed), DBGATE_WORK (an empty scratch
# directory of its own, removed afterwards), PG_CONFIG and BINDIR set and
# BINDIR first in PATH.  Servers it leaves behind in DBGATE_WORK are stopped.
suite_smoke() {
	local scripts=() f name log rc
	for f in "$WORK"/tree/test/smoke/*.sh; do
		[[ -e $f ]] && scripts+=("$f")
	done
	heading "smoke: ${#scripts[@]} script(s)"
	for f in ${scripts[@]+"${scripts[@]}"}; do
		name=${f##*/}
		name=${name%.sh}
		log=$WORK/logs/smoke-$name.log
		local dir=$WORK/smoke/$name
		mkdir -p "$dir"
		[[ $EUID -eq 0 ]] && chown "$DBGATE_OS_USER:" "$dir" "$WORK/smoke"
		echo "-- $name.sh"
		run_logged "$log" "${AS_PG[@]}" env \
			PATH="$BINDIR:$PATH" PG_CONFIG="$PG_CONFIG" BINDIR="$BINDIR" \
			DBGATE_SRC="$WORK/tree" DBGATE_WORK="$dir" \
			bash "$f"
		rc=$?
		stop_servers "$dir"
		case $rc in
		0)
			echo "-- $name.sh: passed"
			count 1 0 0
			;;
		77)
			echo "-- $name.sh: skipped"
			count 0 0 1
			;;
		*)
			echo "-- $name.sh: FAILED (exit status $rc)"
			count 0 1 0
			;;
		esac
		rm -rf "$dir"
	done
}

# ---------------------------------------------------------------------------
# Clean-up and summary

cleanup() {
	if [[ -n $CHILD ]]; then
		# Ctrl-C or a signal while a suite runs: end its process group.
		kill -TERM -- "-$CHILD" "$CHILD" 2>/dev/null
		wait "$CHILD" 2>/dev/null
		[[ -n $TAILPID ]] && kill "$TAILPID" 2>/dev/null
		CHILD='' TAILPID=''
	fi
	[[ -n $WORK ]] || return 0
	stop_servers "$WORK"
	if [[ -n $keep ]]; then
		echo "scratch directory kept: $WORK"
	else
		rm -rf "$WORK"
	fi
	WORK=''
}

finish() {
	local rc=$?
	trap - EXIT INT TERM HUP
	trap "" PIPE # output may be cut off: go on cleaning up
	cleanup
	echo
	echo "total time $((SECONDS - start)) s"
	if ((failed > 0)); then rc=1; else rc=0; fi
	echo "$passed passed, $failed failed, $skipped skipped"
	exit "$rc"
}

interrupted() {
	echo
	echo "*** interrupted"
	failed=$((failed + 1))
	exit 130
}

# ---------------------------------------------------------------------------
# Main

start=$SECONDS
trap finish EXIT
trap interrupted INT TERM HUP
# Output cut off (a closed pipe): still stop the servers and clean up.
trap 'trap "" PIPE; exit 141' PIPE

if [[ -n $do_install ]]; then
	heading "packages"
	if ! install_packages "${PACKAGES[@]}"; then
		echo "*** package installation failed"
		failed=$((failed + 1))
		exit 1
	fi
fi
pg_paths || {
	failed=$((failed + 1))
	exit 1
}

WORK=$(make_scratch dbgate-check) || {
	failed=$((failed + 1))
	exit 1
}
mkdir -p "$WORK/logs"
copy_tree "$WORK/tree" || {
	failed=$((failed + 1))
	exit 1
}

heading "build$([[ -n $do_install ]] && echo " and install") ($("$PG_CONFIG" --version))"
t0=$SECONDS
if ! build_install "$WORK/tree" ${do_install:+install}; then
	echo "*** build failed"
	failed=$((failed + 1))
	exit 1
fi
echo "== build: ok ($((SECONDS - t0)) s)"

cd "$WORK/tree" || exit 1
for s in "${suites[@]}"; do
	run_suite "$s"
done
exit 0
