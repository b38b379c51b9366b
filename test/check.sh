#!/usr/bin/env bash
# shellcheck disable=SC2317 # functions called by traps and as suite_$name
#
# test/check.sh - build, install and run every dbgate test suite.
#
# Usage: sudo test/check.sh [--pg VERSION]... [--host] [--quick] [--no-install] [--keep] [SUITE...]
#
#   SUITE         regress, alone, isolation, tap, smoke or package; default
#                 all of them (or the list in $CHECK_SUITES)
#   --pg VERSION  PostgreSQL major version to test: 15 (this system's, see
#                 PG_MAJOR), 17 or 18 (each in a Debian root file system of
#                 its own, see test/roots.sh); may be given more than once;
#                 default all three (or the list in $CHECK_PG)
#   --host        this system's PostgreSQL only (like --pg 15)
#   --quick       the inner loop of development: this system's PostgreSQL,
#                 the build, regress and isolation in full, and the TAP
#                 files that $CHECK_ONLY names or, without it, those of
#                 $TAP_QUICK (each area of the TAP suite once)
#   --no-install  skip apt-get and `make install` and test the dbgate that is
#                 already installed (the build is still checked); allows
#                 running as a non-root user.  A root file system that
#                 exists is then used as it is, without updating it
#   --keep        keep the scratch directory (test results and logs)
#
# As root, the root file systems that later versions and the package suite
# need are made (or brought up to date) first, before any suite runs: the
# suites time things, and a machine busy with debootstrap and apt-get is
# not the one they were written for.  Each version's suites run as below,
# one version after the other; a line
# "PG N: N passed, N failed, N skipped (T s)" follows each, and the last
# line of output is the sum over all versions.  A version whose root file
# system cannot be made (no network, say) counts as one failure.
#
# As root, the script installs the packages it needs, builds and installs the
# extension, copies the source tree into a scratch directory owned by the
# server user (tests write their results next to their inputs; the caller's
# checkout is never written to) and runs the suites there as that user:
#
#   regress    sql/*.sql against expected/*.out        (pg_regress)
#   alone      each of them again, alone on a fresh instance
#   isolation  test/isolation/specs/*.spec             (pg_isolation_regress)
#   tap        test/t/*.pl                             (prove)
#   smoke      test/smoke/*.sh: exit 0 passes, 77 skips, anything else fails
#   package    test/package.sh: the Debian package built from the tree in a
#              clean root of the version's Debian suite, installed there with
#              dpkg -i and tested (CREATE EXTENSION, pg_buildext
#              installcheck), and lintian; as root, outside the version's
#              test root, so that nothing installed from source meets it
#
# pg_regress and pg_isolation_regress start a throwaway instance configured
# with test/dbgate.conf.  TAP tests create their own clusters.  One result is
# counted per regression test, per isolation spec, per top-level TAP
# assertion, per smoke script and per step of the package suite; the last
# line of output is
# "N passed, N failed, N skipped", and the exit status is 0 only if nothing
# failed.
#
# Environment: CHECK_ONLY (an extended regular expression: only the
# regression tests, isolation specs, TAP files and smoke scripts whose
# names match it run, as when working on one test), CHECK_SUITES,
# CHECK_TAP_JOBS (TAP files run side by side in this many lanes, default
# 4; the load tests 09x run alone afterwards), CHECK_SMOKE_JOBS (smoke
# scripts likewise, default 2), CHECK_VERSION_ONLY=1 (skip
# what does not depend on the server's version: the "alone" suite and the
# smoke scripts of $HOST_ONLY_SMOKE; set by the matrix for the versions in
# roots when this system's version is in the same run),
# CHECK_SERIAL=1 (every suite one after the other; by default the
# package suite, and regress, alone and isolation, run beside the TAP
# lanes and the smoke scripts after them), CHECK_BESIDE=1 (the smoke
# scripts beside the TAP lanes too, and a version's package suite beside
# its suites in the root),
# CHECK_PG, CHECK_TIMEOUT (seconds per command, default
# 600), CHECK_KEEP=1 (like --keep), PG_TEST_TIMEOUT_DEFAULT (TAP waits,
# default here 60), PGISOLATIONTIMEOUT (isolation step waits, default here
# 120), PG_MAJOR, PG_CONFIG, DBGATE_OS_USER (see test/lib.sh), DBGATE_ROOTS,
# DBGATE_DEBIAN_MIRROR (see test/roots.sh).  Anything
# else, such as SOAK_LONG, is passed through to the tests unchanged.

set -uo pipefail

# shellcheck source=test/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=test/roots.sh
. "$(dirname "${BASH_SOURCE[0]}")/roots.sh"

ALL_SUITES=(regress alone isolation tap smoke package)
# Build and test tools (make, gcc and libc6-dev for PGXS, libkrb5-dev for
# the GSSAPI headers that the server headers include, libipc-run-perl for PostgreSQL::Test::Cluster,
# libdbd-pg-perl for the soak and fuzz tests' client processes, sqlsmith
# for the fuzz test); pgbouncer, gnuplot-nox and python3 for the benchmarks
# and their smoke test; prometheus-postgres-exporter and curl for the
# monitoring smoke test, git for the release-archive one; patroni,
# etcd-server and python3-etcd (Patroni's etcd3 client) for the Patroni
# test, 059_patroni.
PACKAGES=(postgresql-"$PG_MAJOR" postgresql-server-dev-"$PG_MAJOR"
	make gcc libc6-dev libkrb5-dev perl libipc-run-perl libdbd-pg-perl
	sqlsmith pgbouncer gnuplot-nox python3 prometheus-postgres-exporter curl git
	patroni etcd-server python3-etcd)
CHECK_TIMEOUT=${CHECK_TIMEOUT:-600}
# Smoke scripts that test nothing of the server's version (the benchmark
# tooling runs on this system's PostgreSQL; META.json and the release
# archive): with CHECK_VERSION_ONLY they run on the host only.
HOST_ONLY_SMOKE="bench bench-keys pgxn"
# A test that waits for something that never happens fails after this
# many seconds instead of PostgreSQL's default of 180 (TAP's poll_query_until
# and friends) or 300 (an isolation step): the whole suite stays short.
export PG_TEST_TIMEOUT_DEFAULT=${PG_TEST_TIMEOUT_DEFAULT:-60}
export PGISOLATIONTIMEOUT=${PGISOLATIONTIMEOUT:-120}

usage() {
	sed -n '/^# Usage:/,/^#   --keep/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
	exit 2
}

# check.sh --prepare-roots LOGDIR KIND:VERSION...: make or update the named
# roots (pg: a version's test root, pkg: its package root), each under its
# lock, and leave a file LOGDIR/ready/KINDVERSION for each that is ready.
# The roots of one version are made one after the other, in the order
# given (its test root starts as a copy of its package root); the
# versions side by side: their roots share nothing (each has its lock,
# its temporary name and its log), and most of a root's time is waiting
# for the archive and for dpkg.  The matrix runs this before its suites
# (see prepare_roots).
if [[ ${1:-} == --prepare-roots ]]; then
	logdir=$2
	shift 2
	mkdir -p "$logdir/ready"
	# prepare_item KIND:VERSION: make or update one root; its status
	prepare_item() {
		local kind=${1%%:*} v=${1#*:} t0=$SECONDS ok
		if [[ $kind == pkg ]]; then
			if bash "$(dirname "${BASH_SOURCE[0]}")/package.sh" --prepare "$v"; then ok=0; else ok=1; fi
		else
			ROOT_KIND=pg
			if root_lock "$v" && root_prepare "$v" "$logdir" >/dev/null; then ok=0; else ok=1; fi
			root_unlock
		fi
		if ((ok == 0)); then
			: >"$logdir/ready/$kind$v"
			echo "$kind$v: ready ($((SECONDS - t0)) s)"
		else
			echo "$kind$v: not made here ($((SECONDS - t0)) s); the suite that needs it tries again"
		fi
		return "$ok"
	}
	versions_seen=() pids=() rc=0
	for item in "$@"; do
		v=${item#*:}
		[[ " ${versions_seen[*]} " == *" $v "* ]] || versions_seen+=("$v")
	done
	for v in "${versions_seen[@]}"; do
		(
			vrc=0
			for item in "$@"; do
				[[ ${item#*:} == "$v" ]] || continue
				prepare_item "$item" || vrc=1
			done
			exit "$vrc"
		) &
		pids+=($!)
	done
	for p in "${pids[@]}"; do
		wait "$p" || rc=1
	done
	exit "$rc"
fi

do_install=1
quick=''
keep=${CHECK_KEEP:-}
suites=()
versions=()
pass_args=() # options a run of one version gets (see matrix_suites)
while (($# > 0)); do
	arg=$1
	shift
	case $arg in
	--no-install) do_install='' pass_args+=("$arg") ;;
	--keep) keep=1 pass_args+=("$arg") ;;
	--host) versions+=("$PG_MAJOR") ;;
	--quick) quick=1 pass_args+=("$arg") ;;
	--pg=*) versions+=("${arg#--pg=}") ;;
	--pg)
		(($# > 0)) || usage
		versions+=("$1")
		shift
		;;
	-h | --help) usage ;;
	regress | alone | isolation | tap | smoke | package) suites+=("$arg") ;;
	*)
		echo "unknown argument: $arg" >&2
		usage
		;;
	esac
done
if ((${#versions[@]} == 0)); then
	if [[ -n $quick ]]; then
		versions=("$PG_MAJOR")
	else
		read -r -a versions <<<"${CHECK_PG:-$PG_MAJOR 17 18}"
	fi
fi
for v in "${versions[@]}"; do
	if [[ $v != "$PG_MAJOR" ]] && ! root_suite "$v" >/dev/null; then
		echo "unsupported PostgreSQL version: $v (this system's is $PG_MAJOR;" \
			"17 and 18 run in root file systems)" >&2
		exit 2
	fi
done
if ((${#suites[@]} == 0)); then
	if [[ -n $quick ]]; then
		suites=(regress isolation tap)
	else
		read -r -a suites <<<"${CHECK_SUITES:-${ALL_SUITES[*]}}"
	fi
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

# ---------------------------------------------------------------------------
# The version matrix: each version is one run of this script with --host,
# on this system or inside the version's root file system.

m_passed=0 m_failed=0 m_skipped=0 m_lines=() m_failures=()
M_CHILD='' M_TAIL='' M_ROOT='' M_SRC='' M_LOGS='' M_VER='' M_PREP='' M_PKG='' M_PKG_SKIP=''

# failure_lines LOG: the lines of LOG that say what failed, each with
# what explains it: a failed TAP test with its diagnostics (up to 8 lines
# of "#" after its "Failed test" line, wherever prove's stderr put them:
# before or after the "not ok" line), a failed script with the 5 lines
# before its verdict.
failure_lines() {
	awk '
	function keep(l) { if (l != "") { ring[n % 5] = l; n++ } }
	# first pass: the diagnostics of each failed test, by its name
	FNR == NR {
		if (cur != "" && /^#/ && got[cur] < 8) {
			if ($0 !~ /^#   at .* line [0-9]+\.$/) { d[cur] = d[cur] "    " $0 "\n"; got[cur]++ }
			next
		}
		cur = ""
		if (match($0, /^#   Failed test \047.*\047$/)) {
			name = substr($0, 18, length($0) - 18)
			if (!(name in got)) { cur = name; got[cur] = 0 }
		}
		next
	}
	/^not ok [0-9]+ +[-+] / {
		print
		name = $0
		sub(/^not ok [0-9]+ +[-+] /, "", name)
		if (name in d) printf "%s", d[name]
		next
	}
	/^-- .*: FAILED/ {
		for (i = (n > 5 ? n - 5 : 0); i < n; i++) print "    " ring[i % 5]
		print; n = 0; next
	}
	/^-- .*: [0-9]+ passed, [1-9][0-9]* failed/ || /^ *(test +)?[^ ]+ +\.\.\. +FAILED/ || /^\*\*\* / { print; n = 0; next }
	{ keep($0) }
	' "$1" "$1"
}

# matrix_child LOG CMD...: run CMD (one version's run), its output to LOG
# and to ours; add the counts of its last line to the totals.
matrix_child() {
	local log=$1 rc line p f s
	shift
	: >"$log"
	"$@" </dev/null >"$log" 2>&1 &
	M_CHILD=$!
	tail -n +1 -f --pid="$M_CHILD" "$log" &
	M_TAIL=$!
	wait "$M_CHILD"
	rc=$?
	wait "$M_TAIL" 2>/dev/null
	M_CHILD='' M_TAIL=''
	line=$(tail -n 1 "$log")
	# What failed, for the end of the output (a long log's tail is what
	# a CI page shows).
	local l
	while IFS= read -r l; do
		m_failures+=("PG ${M_VER:-?}: $l")
	done < <(failure_lines "$log" | head -n 60)
	if [[ $line =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed,\ ([0-9]+)\ skipped$ ]]; then
		p=${BASH_REMATCH[1]} f=${BASH_REMATCH[2]} s=${BASH_REMATCH[3]}
		if ((rc != 0 && f == 0)); then
			echo "*** exit status $rc without a failed test: counted as one failure"
			f=1
		fi
	else
		echo "*** the run ended (status $rc) without its summary line: counted as one failure"
		p=0 f=1 s=0
	fi
	v_passed=$p v_failed=$f v_skipped=$s
}

# matrix_suites [package]: the suites a version's run gets, named
# explicitly (CHECK_SUITES would otherwise apply inside); without
# "package", the package suite is left out: it runs outside the root.
matrix_suites() {
	local s
	for s in "${suites[@]}"; do
		[[ $s == package && ${1:-} != package ]] && continue
		echo "$s"
	done
}

# matrix_root VERSION: run VERSION's suites inside its root file system.
matrix_root() {
	local v=$1 t0=$SECONDS root inner inner_suites
	v_passed=0 v_failed=0 v_skipped=0
	mapfile -t inner_suites < <(matrix_suites)
	((${#inner_suites[@]} > 0)) || return 0
	v_failed=1
	if [[ $EUID -ne 0 ]]; then
		echo "*** PG $v: a root file system needs root (sudo $0)"
		return
	fi
	root_lock "$v" || {
		echo "*** PG $v: could not lock $DBGATE_ROOTS/pg$v.lock"
		return
	}
	local noupdate=''
	[[ -z $do_install ]] && noupdate=no-update
	if ! root=$(root_prepare "$v" "$M_LOGS" $noupdate); then
		echo "*** PG $v: no root file system with PostgreSQL $v" \
			"(debootstrap or apt-get failed: is the Debian archive reachable?)"
		root_unlock
		return
	fi
	echo "root for PostgreSQL $v ready ($((SECONDS - t0)) s): $root"
	M_ROOT=$root
	if ! { M_SRC=$(mktemp -d "$root/tmp/dbgate-src.XXXXXX") &&
		tar_tree "$M_SRC" && root_enter "$root"; }; then
		echo "*** PG $v: could not prepare $root"
		matrix_leave_root
		return
	fi
	inner=${M_SRC#"$root"}
	# The run inside sees the root's PostgreSQL, paths and temporary
	# directory, not this system's, and a locale that every root has.
	matrix_child "$M_LOGS/pg$v.log" env -u PG_CONFIG -u TMPDIR -u PERL5LIB \
		-u DBGATE_ROOTS -u LD_LIBRARY_PATH \
		-u LC_ALL -u LANGUAGE LANG=C.UTF-8 \
		PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root PG_MAJOR="$v" \
		${host_too:+CHECK_VERSION_ONLY=1} \
		chroot "$root" bash "$inner/test/check.sh" --host \
		${pass_args[@]+"${pass_args[@]}"} "${inner_suites[@]}"
	[[ -n $keep ]] && echo "(PG $v: paths above are inside $root)"
	matrix_leave_root
}

# matrix_package VERSION: start the package suite of a version whose other
# suites run in a root (test/package.sh, outside that root), in the
# background; matrix_package_finish waits for it and puts its counts in v_*.
matrix_package() {
	local v=$1
	M_PKG_SKIP=''
	[[ " $(matrix_suites package | tr '\n' ' ') " == *" package "* ]] || return 0
	[[ -z ${CHECK_ONLY:-} || package =~ $CHECK_ONLY ]] || return 0
	if [[ $EUID -ne 0 ]]; then
		M_PKG_SKIP=1
		return 0
	fi
	local opts=()
	[[ -z $do_install ]] && opts+=(--no-update)
	[[ -n $keep ]] && opts+=(--keep)
	# In the background (beside the version's other suites with
	# CHECK_BESIDE): its output is shown by matrix_package_finish.
	bash "$DBGATE_TOP/test/package.sh" ${opts[@]+"${opts[@]}"} "$v" \
		</dev/null >"$M_LOGS/package$v.log" 2>&1 &
	M_PKG=$!
}

# matrix_package_finish VERSION: wait for matrix_package, show its output
# and put its counts in v_*.
matrix_package_finish() {
	local v=$1 rc line l
	v_passed=0 v_failed=0 v_skipped=0
	if [[ -n $M_PKG_SKIP ]]; then
		echo "-- package: skipped (needs root)"
		v_skipped=1
		return 0
	fi
	[[ -n $M_PKG ]] || return 0
	wait "$M_PKG"
	rc=$?
	M_PKG=''
	heading "package $v (ran beside the suites above)"
	cat "$M_LOGS/package$v.log"
	while IFS= read -r l; do
		m_failures+=("PG $v: $l")
	done < <(failure_lines "$M_LOGS/package$v.log" | head -n 60)
	line=$(tail -n 1 "$M_LOGS/package$v.log")
	if [[ $line =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed,\ ([0-9]+)\ skipped$ ]]; then
		v_passed=${BASH_REMATCH[1]} v_failed=${BASH_REMATCH[2]} v_skipped=${BASH_REMATCH[3]}
		((rc != 0 && v_failed == 0)) && v_failed=1
	else
		echo "*** test/package.sh $v ended (status $rc) without its summary line: counted as one failure"
		v_failed=1
	fi
}

matrix_leave_root() {
	if [[ -n $M_ROOT ]]; then
		root_leave "$M_ROOT"
		[[ -n $M_SRC && -z $keep ]] && rm -rf --one-file-system "$M_SRC"
	fi
	M_ROOT='' M_SRC=''
	root_unlock
}

matrix_finish() {
	local rc=$? l
	trap - EXIT INT TERM HUP
	trap "" PIPE
	if [[ -n $M_CHILD ]]; then
		kill -TERM "$M_CHILD" 2>/dev/null
		wait "$M_CHILD" 2>/dev/null
		[[ -n $M_TAIL ]] && kill "$M_TAIL" 2>/dev/null
		M_CHILD='' M_TAIL=''
	fi
	if [[ -n $M_PKG ]]; then
		kill -TERM "$M_PKG" 2>/dev/null
		wait "$M_PKG" 2>/dev/null
		M_PKG=''
	fi
	if [[ -n $M_PREP ]]; then
		kill -TERM -- "-$M_PREP" 2>/dev/null
		wait "$M_PREP" 2>/dev/null
		M_PREP=''
	fi
	matrix_leave_root
	if [[ -n $M_VER ]]; then
		m_lines+=("PG $M_VER: interrupted")
		M_VER=''
	fi
	if [[ -n $M_LOGS ]]; then
		if [[ -n $keep ]]; then echo "logs kept: $M_LOGS"; else rm -rf "$M_LOGS"; fi
	fi
	echo
	echo "==== all versions ($((SECONDS - start)) s)"
	if ((${#m_failures[@]} > 0)); then
		echo "what failed (details above, in each version's output):"
		for l in "${m_failures[@]}"; do
			echo "  $l"
		done
	fi
	for l in ${m_lines[@]+"${m_lines[@]}"}; do
		echo "$l"
	done
	if ((m_failed > 0)); then rc=1; else rc=0; fi
	echo "$m_passed passed, $m_failed failed, $m_skipped skipped"
	exit "$rc"
}

# prepare_roots: as root, start making (or updating) every root file
# system this run needs, the versions side by side (--prepare-roots), in a
# process group of its own (so that an interrupt ends all of it); the
# matrix waits for it (prepare_wait) before any suite runs.  The packages
# of this system (debootstrap among them) are installed first, so that no
# two apt-gets meet.  A root that is not made there is tried again by the
# suite that needs it.
prepare_roots() {
	local v items=() pkg=''
	[[ $EUID -eq 0 && -n $do_install ]] || return 0
	if [[ " $(matrix_suites package | tr '\n' ' ') " == *" package "* ]] &&
		[[ -z ${CHECK_ONLY:-} || package =~ $CHECK_ONLY ]]; then
		pkg=1
	fi
	for v in "${versions[@]}"; do
		[[ -n $pkg ]] && items+=("pkg:$v")
		if [[ $v != "$PG_MAJOR" && -n $(matrix_suites) ]]; then
			items+=("pg:$v")
		fi
	done
	((${#items[@]} > 1)) || return 0
	heading "packages of this system, then the roots: ${items[*]}"
	install_packages debootstrap "${PACKAGES[@]}" || return 0
	export DBGATE_ROOTS_READY=$M_LOGS/ready
	setsid bash "${BASH_SOURCE[0]}" --prepare-roots "$M_LOGS" "${items[@]}" \
		</dev/null >"$M_LOGS/prepare.log" 2>&1 &
	M_PREP=$!
}

# prepare_wait: wait for the roots of prepare_roots, showing their log as
# it grows.
prepare_wait() {
	local t0=$SECONDS
	[[ -n $M_PREP ]] || return 0
	tail -n +1 -f --pid="$M_PREP" "$M_LOGS/prepare.log" | sed 's/^/  (roots) /'
	wait "$M_PREP"
	M_PREP=''
	echo "roots done ($((SECONDS - t0)) s)"
}

run_matrix() {
	local v t0 p0 f0 s0
	start=$SECONDS
	trap matrix_finish EXIT
	trap 'echo; echo "*** interrupted"; m_failed=$((m_failed + 1)); exit 130' INT TERM HUP
	trap 'trap "" PIPE; exit 141' PIPE
	M_LOGS=$(mktemp -d "${TMPDIR:-/tmp}/dbgate-matrix.XXXXXX") || exit 1
	# What does not depend on the server's version runs once, on this
	# system's, when this run includes it (CHECK_VERSION_ONLY in the others).
	host_too=''
	[[ " ${versions[*]} " == *" $PG_MAJOR "* ]] && host_too=1
	# The roots first: the suites must not share the machine with
	# debootstrap, apt-get and dpkg while they run.
	prepare_roots
	prepare_wait
	for v in "${versions[@]}"; do
		heading "PostgreSQL $v"
		t0=$SECONDS M_VER=$v
		if [[ $v == "$PG_MAJOR" ]]; then
			# shellcheck disable=SC2046 # one word per suite
			matrix_child "$M_LOGS/pg$v.log" bash "${BASH_SOURCE[0]}" --host \
				${pass_args[@]+"${pass_args[@]}"} $(matrix_suites package)
		else
			# the package suite beside the root's suites with
			# CHECK_BESIDE=1, after them otherwise
			[[ -n ${CHECK_BESIDE:-} ]] && matrix_package "$v"
			matrix_root "$v"
			p0=$v_passed f0=$v_failed s0=$v_skipped
			[[ -z ${CHECK_BESIDE:-} ]] && matrix_package "$v"
			matrix_package_finish "$v"
			v_passed=$((v_passed + p0)) v_failed=$((v_failed + f0))
			v_skipped=$((v_skipped + s0))
		fi
		m_passed=$((m_passed + v_passed)) m_failed=$((m_failed + v_failed))
		m_skipped=$((m_skipped + v_skipped))
		M_VER=''
		m_lines+=("PG $v: $v_passed passed, $v_failed failed, $v_skipped skipped ($((SECONDS - t0)) s)")
		echo "${m_lines[-1]}"
	done
	exit 0
}

if [[ ${versions[*]} != "$PG_MAJOR" ]]; then
	run_matrix
fi

# ---------------------------------------------------------------------------
# One version: this system's PostgreSQL ($PG_MAJOR, $PG_CONFIG).

passed=0 failed=0 skipped=0
WORK='' CHILD='' TAILPID='' LANE_PIDS=() SIDE_PIDS=() SIDE_HEADINGS=() TAP_TEMPLATE='' ALONE_TEMPLATE=''

# ---------------------------------------------------------------------------
# Running commands

# wanted NAME [tap]: is test NAME selected by $CHECK_ONLY (all are
# without it)?  With --quick, every regression test and isolation spec is,
# and of the TAP files those that CHECK_ONLY names or, without it, those
# of TAP_QUICK.
wanted() {
	if [[ -n $quick ]]; then
		[[ ${2:-} == tap ]] || return 0
		if [[ -n ${CHECK_ONLY:-} ]]; then
			[[ $1 =~ $CHECK_ONLY ]]
		else
			[[ " $TAP_QUICK " == *" $1 "* ]]
		fi
		return
	fi
	[[ -z ${CHECK_ONLY:-} || $1 =~ $CHECK_ONLY ]]
}

# CPUTIME: the command that counts the CPU seconds of a command's whole
# process tree, the servers it starts included (test/tools/cputime.py;
# empty without python3).
CPUTIME=()
command -v python3 >/dev/null && CPUTIME=(python3 "$DBGATE_TOP/test/tools/cputime.py")

# cpu_of FILE: the CPU seconds (user + sys) that cputime.py wrote to FILE,
# "?" without it.
cpu_of() {
	local u s
	if read -r u s <"$1" 2>/dev/null && [[ -n $s ]]; then
		awk -v u="$u" -v s="$s" 'BEGIN { printf "%.0f\n", u + s }'
	else
		echo "?"
	fi
}

# cpu_sum [SUITE]: the CPU seconds of the commands that run_logged ran
# (in SUITE: $WORK/logs/cpu.SUITE; all of them: $WORK/logs/cpu.all).
cpu_sum() {
	local f=$WORK/logs/cpu.${1:-all}
	[[ -e $f ]] || f=/dev/null
	awk '{ t += $1 + $2 } END { printf "%.0f\n", t }' "$f"
}

# run_logged LOG CMD...
# Run CMD with a time limit of $CHECK_TIMEOUT seconds; its output goes to LOG
# and, as it comes, to our output.  The CPU seconds of CMD's process tree
# go to LOG.cpu and are added to $WORK/logs/cpu.all and to the suite's
# $WORK/logs/cpu.$CPU_SUITE (see CPUTIME and run_suite).  Returns CMD's exit status (124 or 137
# after the time limit).  CMD runs in its own process group (timeout(1)
# makes one), which cleanup() ends on Ctrl-C.
run_logged() {
	local log=$1 rc cpu=()
	shift
	: >"$log"
	rm -f "$log.cpu"
	((${#CPUTIME[@]} > 0)) && cpu=("${CPUTIME[@]}" "$log.cpu")
	timeout -k 15 "$CHECK_TIMEOUT" ${cpu[@]+"${cpu[@]}"} "$@" </dev/null >"$log" 2>&1 &
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
	if [[ -s $log.cpu ]]; then
		cat "$log.cpu" >>"$WORK/logs/cpu.all"
		[[ -n ${CPU_SUITE:-} ]] && cat "$log.cpu" >>"$WORK/logs/cpu.$CPU_SUITE"
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

# add_counts FILE WHAT: add the counts "passed failed skipped" that a lane
# or chain (WHAT) left in FILE; none there counts as one failure.
add_counts() {
	local p f_ s
	if read -r p f_ s <"$1" 2>/dev/null; then
		count "$p" "$f_" "$s"
	else
		echo "*** $2 ended without its counts: counted as one failure"
		count 0 1 0
	fi
}

# run_suite NAME: run suite_NAME and report its own results, time and CPU
# seconds (its commands', counted apart from those of a suite that runs
# beside it).
run_suite() {
	local t0=$SECONDS p0=$passed f0=$failed s0=$skipped CPU_SUITE=$1
	rm -f "$WORK/logs/cpu.$CPU_SUITE"
	"suite_$1"
	echo "== $1: $((passed - p0)) passed, $((failed - f0)) failed," \
		"$((skipped - s0)) skipped ($((SECONDS - t0)) s, CPU $(cpu_sum "$CPU_SUITE") s)"
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
	local outdir=$inputdir dbname=contrib_regression port=()
	[[ $suite == isolation ]] && outdir=$inputdir/output_iso dbname=''
	# A test of the alone suite has its own output directory and port:
	# two of them run at once (suite_alone).
	if [[ $suite == alone-* ]]; then
		outdir=$WORK/alone/$suite
		"${AS_PG[@]}" mkdir -p "$outdir"
		port=(--port="$ALONE_PORT")
	fi
	local log=$WORK/logs/$suite.log
	heading "$suite: $# test(s)${*:+: $*}"
	(($# > 0)) || return 0
	rm -rf "$WORK/tree/tmp_check/$suite"
	"${AS_PG[@]}" mkdir -p "$WORK/tree/tmp_check"
	# pg_regress's own instance, or (the alone suite, when its template
	# was made) a copy of the template started here
	local instance=(--temp-instance="$WORK/tree/tmp_check/$suite"
		--temp-config="$WORK/tree/test/dbgate.conf")
	local server=()
	if [[ $suite == alone-* && -n $ALONE_TEMPLATE ]]; then
		instance=(--host="$WORK/alone/sock-$ALONE_PORT")
		alone_instance "$WORK/tree/tmp_check/$suite" || {
			echo "*** $suite: no copy of the template"
			count 0 1 0
			return 0
		}
	fi
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
	run_logged "$log" "${AS_PG[@]}" ${server[@]+"${server[@]}"} "$prog" "${instance[@]}" \
		--inputdir="$inputdir" --outputdir="$outdir" \
		--bindir="$BINDIR" --no-locale --encoding=UTF8 ${port[@]+"${port[@]}"} \
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
	elif [[ $suite == alone-* && -n $ALONE_TEMPLATE ]]; then
		rm -rf "$WORK/tree/tmp_check/$suite/data"
	fi
	count "$p" "$f" "$s"
}

# alone_template: the initdb of pg_regress's --temp-instance, once for the
# alone suite, in ALONE_TEMPLATE (empty if it failed: each test then gets
# pg_regress's own instance).  The same command line (initdb --no-clean
# --no-sync --no-locale) and environment (pg_regress with --no-locale
# clears the locale variables and sets LC_MESSAGES=C) as pg_regress's.
alone_template() {
	ALONE_TEMPLATE=$WORK/alone/template
	"${AS_PG[@]}" mkdir -p "$WORK/alone"
	if ! "${AS_PG[@]}" env -u LC_COLLATE -u LC_CTYPE -u LC_MONETARY -u LC_NUMERIC \
		-u LC_TIME -u LANG -u LANGUAGE -u LC_ALL -u PGDATA LC_MESSAGES=C \
		"$BINDIR/initdb" -D "$ALONE_TEMPLATE" --no-clean --no-sync --no-locale \
		>"$WORK/logs/alone-template.log" 2>&1; then
		echo "*** initdb of the alone suite's template failed (each test gets pg_regress's own instance):"
		tail -n 20 "$WORK/logs/alone-template.log"
		ALONE_TEMPLATE=''
	fi
}

# alone_instance DIR: what pg_regress --temp-instance=DIR does before the
# tests, with a copy of ALONE_TEMPLATE instead of an initdb: DIR/data
# with pg_regress's settings and test/dbgate.conf appended to its
# postgresql.conf; and in the array server (of the caller) the command
# that starts it on ALONE_PORT, with its socket in
# $WORK/alone/sock-ALONE_PORT only and its log in DIR/log/postmaster.log,
# runs the rest of its arguments (pg_regress) and stops it (immediate):
# one command, whose CPU seconds include the server's.
alone_instance() {
	local dir=$1 sock=$WORK/alone/sock-$ALONE_PORT
	"${AS_PG[@]}" mkdir -p "$dir/log" "$sock" &&
		"${AS_PG[@]}" cp -a "$ALONE_TEMPLATE" "$dir/data" || return 1
	{
		printf '\n# Configuration added by pg_regress\n\n'
		printf '%s\n' "log_autovacuum_min_duration = 0" "log_checkpoints = on" \
			"log_line_prefix = '%m %b[%p] %q%a '" "log_lock_waits = on" \
			"log_temp_files = 128kB" "max_prepared_transactions = 2"
		cat "$WORK/tree/test/dbgate.conf"
	} | "${AS_PG[@]}" tee -a "$dir/data/postgresql.conf" >/dev/null || return 1
	# shellcheck disable=SC2016 # expanded by the inner bash
	server=(env -u LC_COLLATE -u LC_CTYPE -u LC_MONETARY -u LC_NUMERIC
		-u LC_TIME -u LANG -u LANGUAGE -u LC_ALL -u PGDATA LC_MESSAGES=C
		bash -c '
		sock=$0 pg_ctl=$1/pg_ctl data=$2 port=$3
		shift 3
		if ! "$pg_ctl" -D "$data" -w -l "$data/../log/postmaster.log" \
			-o "-F -c listen_addresses= -k $sock -p $port" start >/dev/null; then
			echo "*** the copy of the template did not start"
			tail -n 40 "$data/../log/postmaster.log"
			exit 2
		fi
		"$@"
		rc=$?
		"$pg_ctl" -D "$data" -m immediate -w stop >/dev/null
		exit "$rc"' "$sock" "$BINDIR" "$dir/data" "$ALONE_PORT")
}

suite_regress() {
	local tests=() f n
	for f in "$WORK"/tree/sql/*.sql; do
		[[ -e $f ]] || continue
		n=${f##*/}
		n=${n%.sql}
		[[ $n == dbgate--* ]] && continue
		wanted "$n" || continue
		tests+=("$n")
	done
	run_pg_regress regress "$PGXS_DIR/src/test/regress/pg_regress" \
		"$WORK/tree" ${tests[@]+"${tests[@]}"}
}

# Each regression test once more, by itself on a fresh instance: a test
# sets up what it needs and depends on no other test having run before it.
# The alone suite: each regression test by itself on a fresh instance, two
# at a time (lane 0 here, lane 1 in the background, each on a port of its
# own; lane 1's output is printed when it ends).
alone_lane() {
	local lane=$1 n
	shift
	passed=0 failed=0 skipped=0
	ALONE_PORT=$((ALONE_PORT_BASE + 100 * lane))
	trap 'cleanup_child; exit 130' TERM INT HUP
	for n in "$@"; do
		run_pg_regress "alone-$n" "$PGXS_DIR/src/test/regress/pg_regress" \
			"$WORK/tree" "$n"
	done
	echo "$passed $failed $skipped" >"$WORK/logs/alone-lane-$lane.counts"
}

suite_alone() {
	local f n tests=() lane0=() lane1=() i
	if [[ -n ${CHECK_VERSION_ONLY:-} ]]; then
		heading "alone: on the host only (CHECK_VERSION_ONLY: whether a test needs the ones before it does not depend on the server's version)"
		return 0
	fi
	for f in "$WORK"/tree/sql/*.sql; do
		[[ -e $f ]] || continue
		n=${f##*/}
		n=${n%.sql}
		[[ $n == dbgate--* ]] && continue
		wanted "$n" || continue
		tests+=("$n")
	done
	((${#tests[@]} > 0)) || return 0
	for ((i = 0; i < ${#tests[@]}; i++)); do
		if ((i % 2 == 0)); then lane0+=("${tests[i]}"); else lane1+=("${tests[i]}"); fi
	done
	# ports away from pg_regress's own default (0xC000 | version bits)
	ALONE_PORT_BASE=$((40000 + RANDOM % 20000))
	# each test's fresh instance a copy of one initdb
	alone_template
	if ((${#lane1[@]} > 0)); then
		alone_lane 1 "${lane1[@]}" >"$WORK/logs/alone-lane-1.out" 2>&1 &
		LANE_PIDS=($!)
	fi
	(
		alone_lane 0 "${lane0[@]}"
	)
	if ((${#lane1[@]} > 0)); then
		wait "${LANE_PIDS[0]}"
		LANE_PIDS=()
		echo "==== alone, second lane (ran beside the above)"
		cat "$WORK/logs/alone-lane-1.out"
	fi
	local lane
	for lane in 0 1; do
		((lane == 1 && ${#lane1[@]} == 0)) && continue
		add_counts "$WORK/logs/alone-lane-$lane.counts" "alone lane $lane"
	done
}

suite_isolation() {
	local tests=() f n
	for f in "$WORK"/tree/test/isolation/specs/*.spec; do
		[[ -e $f ]] || continue
		n=${f##*/}
		wanted "${n%.spec}" || continue
		tests+=("${n%.spec}")
	done
	run_pg_regress isolation "$PGXS_DIR/src/test/isolation/pg_isolation_regress" \
		"$WORK/tree/test/isolation" ${tests[@]+"${tests[@]}"}
}

# ---------------------------------------------------------------------------
# TAP

# count_tap LOG: print "PASS FAIL SKIP" for the top-level assertions of one
# test file in prove -v output.  A TODO test counts as skipped, and a file
# skipped as a whole (1..0 # SKIP, which prove shows as "NAME .. skipped:")
# as one skipped.
count_tap() {
	awk '
		/^ok [0-9]+/                { if (tolower($0) ~ /# (skip|todo)/) s++; else p++; next }
		/^not ok [0-9]+/            { if (tolower($0) ~ /# todo/) s++; else f++; next }
		/^1\.\.0( |$)/ || / \.\. skipped: / { if (!whole) s++; whole = 1; next }
		END { printf "%d %d %d\n", p, f, s }
	' "$1"
}

# tap_file PATH LANE: run one TAP file with prove, in the lane's own
# directory (its clusters, logs and data directories; stop_servers after it
# touches nothing of another lane), and count its assertions.
tap_file() {
	local f=$1 lane=$2 name log rc p f_ s t0=$SECONDS
	name=${f##*/}
	name=${name%.pl}
	log=$WORK/logs/tap-$name.log
	local testdir=$WORK/tap/$lane
	mkdir -p "$testdir"
	[[ $EUID -eq 0 ]] && chown "$DBGATE_OS_USER:" "$WORK/tap" "$testdir"
	# The environment of PGXS's prove_installcheck: TESTDIR (15, 16)
	# or TESTDATADIR and TESTLOGDIR (17+) decide where tmp_check/ and
	# its logs and data directories go.  Each test sets up its own
	# clusters (shared_preload_libraries included); the lanes share one
	# directory of port reservations.
	run_logged "$log" "${AS_PG[@]}" env -u TEMP_CONFIG \
		PATH="$BINDIR:$PATH" \
		PERL5LIB="$PGXS_DIR/src/test/perl:$WORK/tree/test/perl:$WORK/tree/test/soak${PERL5LIB:+:$PERL5LIB}" \
		PG_REGRESS="$PGXS_DIR/src/test/regress/pg_regress" \
		PG_TEST_PORT_DIR="$WORK/tap/portlock" \
		TESTDIR="$testdir" TESTDATADIR="$testdir/tmp_check" \
		TESTLOGDIR="$testdir/tmp_check/log" \
		${TAP_TEMPLATE:+INITDB_TEMPLATE="$TAP_TEMPLATE"} \
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
	local cpu
	cpu=$(cpu_of "$log.cpu")
	echo "-- $name.pl: $p passed, $f_ failed, $s skipped ($((SECONDS - t0)) s, CPU $cpu s)"
	echo "$name $((SECONDS - t0)) $cpu" >>"$WORK/logs/tap-times"
	count "$p" "$f_" "$s"
}

# The files that take longest (tens of seconds each), started first so
# that no lane gets one of them last; the rest follow in reverse order
# (later files test later features and tend to be longer).  Only the time
# depends on this list.
TAP_LONG="059_patroni 060_adapt 055_demote 007_timeouts 012_kept_slots 042_lifo_standing_queue 041_parallel_maintenance 025_config_state_formats 053_runaway 033_config_script"

# The TAP files of --quick (without CHECK_ONLY): each area of the suite
# once, chosen so that --quick takes at most 4 minutes on 2 CPUs
# (docs/testing.md, Where the time goes): restarts and the state file
# (001, 002), a server without the library (004), the queue (005),
# reload (006), timeouts (007), lock safety (008), classification (011),
# utility commands (014), nothing outside the gate (017), a slot's life
# (018), rates (019), upgrades (020), configuration on a standby and
# through a crash (030, 031), trees (039), min_cost (047), 'lifo' (049),
# reservations (051), runaways and demotion (053, 055), the adaptive
# limit (061), keys (062, 063), a slot kept idle (091).  The others are
# variants and combinations of these areas, the long ones (Patroni, the
# adaptive limit under load, every kept slot's end, every state format)
# and the load tests.
TAP_QUICK="001_persistence 002_corrupt_state 004_not_preloaded 005_queue 006_reload 007_timeouts 008_lock_safety 011_classify 014_utility 017_gate_everywhere 018_slot_life 019_rate 020_config_upgrade 030_config_standby 031_config_crash 039_crash_tree 047_min_cost_volatile 049_lifo_newcomer 051_reserved 053_runaway 055_demote 061_adapt_held 062_key_limits 063_keys 091_idle_held_slot"

# queue_next NAME: print the index of the next entry of the lanes' shared
# queue NAME (its position in $WORK/logs/NAME-next) and advance it.
queue_next() {
	local i
	{
		flock 9
		i=$(<"$WORK/logs/$1-next")
		echo $((i + 1)) >"$WORK/logs/$1-next"
	} 9>"$WORK/logs/$1-next.lock"
	echo "$i"
}

# long_first QUEUE LONG EXT ORDER FILE...: the array QUEUE gets the FILEs
# whose names (without EXT) LONG lists first, in LONG's order, then the
# others as given (ORDER 'given') or the last first ('reversed').
long_first() {
	local -n q=$1
	local long=$2 ext=$3 order=$4 l f n rest=()
	shift 4
	q=()
	for l in $long; do
		for f in "$@"; do
			[[ ${f##*/} == "$l$ext" ]] && q+=("$f")
		done
	done
	for f in "$@"; do
		n=${f##*/}
		[[ " $long " == *" ${n%"$ext"} "* ]] && continue
		if [[ $order == reversed ]]; then rest=("$f" ${rest[@]+"${rest[@]}"}); else rest+=("$f"); fi
	done
	q+=(${rest[@]+"${rest[@]}"})
}

# lanes_run NAME JOBS FUNCTION QUEUE: JOBS lanes, lane 0 in the
# foreground and the others in the background, each calling FUNCTION
# ENTRY LANE for the next entry of the array QUEUE (queue_next NAME) until
# it is empty.  A background lane's output goes to
# $WORK/logs/NAME-lane-LANE.out, printed when it ends, and its counts to
# $WORK/logs/NAME-lane-LANE.counts, added then.  Lanes that stopped
# before the queue was empty count as one failure.
lanes_run() {
	local name=$1 jobs=$2 fn=$3 queue=$4 lane pids=()
	local -n all=$4
	echo 0 >"$WORK/logs/$name-next"
	for ((lane = 1; lane < jobs; lane++)); do
		queue_lane "$name" "$fn" "$queue" "$lane" >"$WORK/logs/$name-lane-$lane.out" 2>&1 &
		pids+=($!)
	done
	LANE_PIDS=(${pids[@]+"${pids[@]}"})
	queue_lane "$name" "$fn" "$queue" 0
	for ((lane = 1; lane < jobs; lane++)); do
		wait "${pids[lane - 1]}"
		echo "==== $name lane $lane (ran beside the above)"
		cat "$WORK/logs/$name-lane-$lane.out"
		add_counts "$WORK/logs/$name-lane-$lane.counts" "$name lane $lane"
	done
	LANE_PIDS=()
	if (($(<"$WORK/logs/$name-next") < ${#all[@]})); then
		echo "*** $name: the lanes stopped before the queue was empty: counted as one failure"
		count 0 1 0
	fi
}

# queue_lane NAME FUNCTION QUEUE LANE: one lane of lanes_run.
queue_lane() {
	local name=$1 fn=$2 lane=$4 i
	local -n entries=$3
	if ((lane > 0)); then
		passed=0 failed=0 skipped=0
		trap 'cleanup_child; exit 130' TERM INT HUP
	fi
	while i=$(queue_next "$name") && ((i < ${#entries[@]})); do
		"$fn" "${entries[i]}" "$lane"
	done
	((lane == 0)) || echo "$passed $failed $skipped" >"$WORK/logs/$name-lane-$lane.counts"
}

# tap_template: one initdb for the whole run, with the options and the
# environment of Cluster.pm's init (initdb -A trust -N; LC_MESSAGES=C,
# no LC_ALL or LANGUAGE, as PostgreSQL::Test::Utils sets them), in
# TAP_TEMPLATE; each node without initdb options of its own is made as a
# copy of it (INITDB_TEMPLATE: Cluster.pm on 17 and later, DbgateTest.pm
# on 15 and 16).  Without it (initdb failed), every node runs initdb.
tap_template() {
	TAP_TEMPLATE=$WORK/tap/initdb-template
	if ! "${AS_PG[@]}" env -u LANGUAGE -u LC_ALL -u PGDATA LC_MESSAGES=C \
		PATH="$BINDIR:$PATH" initdb -A trust -N -D "$TAP_TEMPLATE" \
		>"$WORK/logs/initdb-template.log" 2>&1; then
		echo "*** initdb of the TAP nodes' template failed (each node runs initdb):"
		tail -n 20 "$WORK/logs/initdb-template.log"
		TAP_TEMPLATE=''
	fi
}

# The TAP files.  CHECK_TAP_JOBS (default 4) lanes run the files side by
# side, each lane taking the next file of one queue when its last one
# ends (the long ones first); the load tests (09x: soak, fuzz) run
# afterwards, alone, as they would fill any lane's machine.
suite_tap() {
	local files=() serial=() f n jobs=${CHECK_TAP_JOBS:-4}
	for f in "$WORK"/tree/test/t/*.pl; do
		n=${f##*/}
		[[ -e $f ]] && wanted "${n%.pl}" tap || continue
		if [[ $n == 09* ]]; then serial+=("$f"); else files+=("$f"); fi
	done
	[[ $jobs =~ ^[1-9][0-9]*$ ]] || jobs=1
	heading "tap: $((${#files[@]} + ${#serial[@]})) file(s)${files[*]:+, $jobs lane(s)}"
	mkdir -p "$WORK/tap/portlock"
	[[ $EUID -eq 0 ]] && chown "$DBGATE_OS_USER:" "$WORK/tap" "$WORK/tap/portlock"
	tap_template
	# the queue: the long files first, then the others from the last
	long_first TAP_QUEUE "$TAP_LONG" .pl reversed ${files[@]+"${files[@]}"}
	((${#files[@]} > 1)) || jobs=1
	lanes_run tap "$jobs" tap_file TAP_QUEUE
	for f in ${serial[@]+"${serial[@]}"}; do
		tap_file "$f" 0
	done
	tap_times
}

# tap_times: the time of each TAP file, slowest first (wall seconds, and
# CPU seconds of the file's process tree, its servers included).
tap_times() {
	[[ -s $WORK/logs/tap-times ]] || return 0
	echo "-- tap: time per file, slowest first (wall s, CPU s):"
	sort -k2,2nr "$WORK/logs/tap-times" | awk '{ printf "     %-32s %5d %5s\n", $1, $2, $3 }'
}

# ---------------------------------------------------------------------------
# Smoke scripts

# Each test/smoke/*.sh runs as the server user with DBGATE_SRC (the source
# tree, already built and installed), DBGATE_WORK (an empty scratch
# directory of its own, removed afterwards), PG_CONFIG and BINDIR set and
# BINDIR first in PATH.  Servers it leaves behind in DBGATE_WORK are stopped.
# The scripts share nothing (each server listens on a Unix socket in its
# own directory, PgBouncer and the exporter on a free loopback port) and
# check tooling, never a figure: CHECK_SMOKE_JOBS (default 2) lanes run
# them side by side, the long ones first, as the TAP lanes do.
SMOKE_LONG="bench bench-keys build pgxn"

# smoke_script PATH [LANE]: run one smoke script and count its result.
smoke_script() {
	local f=$1 name log rc dir t0=$SECONDS
	name=${f##*/}
	name=${name%.sh}
	log=$WORK/logs/smoke-$name.log
	dir=$WORK/smoke/$name
	mkdir -p "$dir"
	[[ $EUID -eq 0 ]] && chown "$DBGATE_OS_USER:" "$dir" "$WORK/smoke"
	echo "-- $name.sh"
	run_logged "$log" "${AS_PG[@]}" env \
		PATH="$BINDIR:$PATH" PG_CONFIG="$PG_CONFIG" BINDIR="$BINDIR" \
		DBGATE_SRC="$WORK/tree" DBGATE_WORK="$dir" TMPDIR="$dir" \
		bash "$f"
	rc=$?
	stop_servers "$dir"
	case $rc in
	0)
		echo "-- $name.sh: passed ($((SECONDS - t0)) s, CPU $(cpu_of "$log.cpu") s)"
		count 1 0 0
		;;
	77)
		echo "-- $name.sh: skipped"
		count 0 0 1
		;;
	*)
		echo "-- $name.sh: FAILED (exit status $rc, $((SECONDS - t0)) s, CPU $(cpu_of "$log.cpu") s)"
		count 0 1 0
		;;
	esac
	rm -rf "$dir"
}

suite_smoke() {
	local scripts=() f n jobs=${CHECK_SMOKE_JOBS:-2}
	for f in "$WORK"/tree/test/smoke/*.sh; do
		n=${f##*/}
		[[ -e $f ]] && wanted "${n%.sh}" || continue
		if [[ -n ${CHECK_VERSION_ONLY:-} && " $HOST_ONLY_SMOKE " == *" ${n%.sh} "* ]]; then
			echo "-- $n: on the host only (CHECK_VERSION_ONLY: it does not depend on the server's version)"
			continue
		fi
		scripts+=("$f")
	done
	[[ $jobs =~ ^[1-9][0-9]*$ ]] || jobs=1
	((jobs > ${#scripts[@]})) && jobs=${#scripts[@]}
	((jobs < 1)) && jobs=1
	heading "smoke: ${#scripts[@]} script(s)$( ((jobs > 1)) && echo ", $jobs lanes")"
	mkdir -p "$WORK/smoke"
	long_first SMOKE_QUEUE "$SMOKE_LONG" .sh given ${scripts[@]+"${scripts[@]}"}
	lanes_run smoke "$jobs" smoke_script SMOKE_QUEUE
}

# ---------------------------------------------------------------------------
# The Debian package

# test/package.sh for this version: it builds the package from the caller's
# checkout in a clean root of the version's Debian suite (never on this
# system), installs and tests it there.  One result per step.
suite_package() {
	local log=$WORK/logs/package.log rc p f s line opts=()
	wanted package || return 0
	heading "package: test/package.sh $PG_MAJOR"
	if [[ $EUID -ne 0 ]]; then
		echo "-- package: skipped (test/package.sh needs root)"
		count 0 0 1
		return 0
	fi
	[[ -z $do_install ]] && opts+=(--no-update)
	[[ -n $keep ]] && opts+=(--keep)
	# Three times the usual limit: making the root the first time counts too.
	CHECK_TIMEOUT=$((CHECK_TIMEOUT * 3)) run_logged "$log" \
		bash "$DBGATE_TOP/test/package.sh" ${opts[@]+"${opts[@]}"} "$PG_MAJOR"
	rc=$?
	line=$(tail -n 1 "$log")
	if [[ $line =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed,\ ([0-9]+)\ skipped$ ]]; then
		p=${BASH_REMATCH[1]} f=${BASH_REMATCH[2]} s=${BASH_REMATCH[3]}
		((rc != 0 && f == 0)) && f=1
	else
		echo "*** test/package.sh ended (status $rc) without its summary line: counted as one failure"
		p=0 f=1 s=0
	fi
	count "$p" "$f" "$s"
}

# ---------------------------------------------------------------------------
# Suites side by side

# side_start LABEL SUITE...: run_suite for each SUITE, one after the
# other, in the background: a chain of suites beside LABEL; there may be
# several.  A chain's output goes to $WORK/logs/side-N.out (printed by
# side_finish under "SUITE... (ran beside LABEL)"), its counts to
# $WORK/logs/side-N.counts.
side_start() {
	local label=$1 n=${#SIDE_PIDS[@]}
	shift
	# shellcheck disable=SC2030,SC2031 # the chain's own counts, in a subshell
	(
		passed=0 failed=0 skipped=0 LANE_PIDS=() SIDE_PIDS=()
		# (the alone suite's second lane, if it runs)
		trap 'for p in ${LANE_PIDS[@]+"${LANE_PIDS[@]}"}; do kill -TERM "$p"; done
			cleanup_child; exit 130' TERM INT HUP
		for s in "$@"; do
			run_suite "$s"
		done
		echo "$passed $failed $skipped" >"$WORK/logs/side-$n.counts"
	) >"$WORK/logs/side-$n.out" 2>&1 &
	SIDE_PIDS+=($!)
	SIDE_HEADINGS+=("$* (ran beside $label)")
}

# side_finish: wait for the chains of side_start, print their output and
# add their counts.
side_finish() {
	local n
	for n in "${!SIDE_PIDS[@]}"; do
		wait "${SIDE_PIDS[n]}"
		heading "${SIDE_HEADINGS[n]}"
		cat "$WORK/logs/side-$n.out"
		add_counts "$WORK/logs/side-$n.counts" "${SIDE_HEADINGS[n]% (ran beside*}"
		rm -f "$WORK/logs/side-$n.out" "$WORK/logs/side-$n.counts"
	done
	SIDE_PIDS=() SIDE_HEADINGS=()
}

# ---------------------------------------------------------------------------
# Clean-up and summary

cleanup_child() {
	if [[ -n $CHILD ]]; then
		# Ctrl-C or a signal while a suite runs: end its process group.
		kill -TERM -- "-$CHILD" "$CHILD" 2>/dev/null
		wait "$CHILD" 2>/dev/null
		[[ -n $TAILPID ]] && kill "$TAILPID" 2>/dev/null
		CHILD='' TAILPID=''
	fi
}

cleanup() {
	local pid
	for pid in ${LANE_PIDS[@]+"${LANE_PIDS[@]}"}; do
		kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	done
	LANE_PIDS=()
	for pid in ${SIDE_PIDS[@]+"${SIDE_PIDS[@]}"}; do
		kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	done
	SIDE_PIDS=()
	cleanup_child
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
	local cpu=?
	[[ -n $WORK ]] && cpu=$(cpu_sum)
	cleanup
	echo
	echo "total time $((SECONDS - start)) s (CPU of the suites' commands $cpu s)"
	if ((failed > 0)); then rc=1; else rc=0; fi
	echo "PG $PG_MAJOR: $passed passed, $failed failed, $skipped skipped ($((SECONDS - start)) s)"
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
# Which suites run side by side (with CHECK_SERIAL=1 none: one after the
# other, in the order asked for).  Each suite's verdicts are states, never
# times (docs/testing.md), so a busy machine makes them slower, not wrong:
# - beside the TAP lanes run two chains: the package suite, and regress,
#   alone and isolation one after the other.  Their servers mostly wait
#   for their statements (the package's time goes mostly to its
#   regression and isolation tests, at build time and at installcheck),
#   and the TAP lanes leave part of a CPU free while they wait for theirs;
# - the smoke scripts run after the TAP suite, in two lanes
#   (CHECK_SMOKE_JOBS), beside what is left of those chains (they are
#   waited for at the end): beside the smoke lanes alone the package
#   suite was the last to end, its compile slowed by their load;
# - with CHECK_BESIDE=1, the smoke scripts run beside the TAP lanes as
#   well (a third chain; slower on 2 CPUs: test/README.md).
# Without the TAP suite, the package suite runs beside the smoke scripts.
has_suite() { [[ " ${suites[*]} " == *" $1 "* ]]; }
chains=() beside_tap=() beside_smoke=''
if [[ -z ${CHECK_SERIAL:-} ]] && has_suite tap; then
	has_suite package && chains+=(package) beside_tap+=(package)
	chain=()
	for s in regress alone isolation; do
		has_suite "$s" && chain+=("$s") beside_tap+=("$s")
	done
	((${#chain[@]} > 0)) && chains+=("${chain[*]}")
	if [[ -n ${CHECK_BESIDE:-} ]] && has_suite smoke; then
		chains+=(smoke) beside_tap+=(smoke)
	fi
elif [[ -z ${CHECK_SERIAL:-} ]] && has_suite smoke && has_suite package; then
	beside_smoke=package
fi
for s in "${suites[@]}"; do
	[[ " ${beside_tap[*]} " == *" $s "* || $s == "$beside_smoke" ]] && continue
	if [[ $s == tap && ${#chains[@]} -gt 0 ]]; then
		for c in "${chains[@]}"; do
			# shellcheck disable=SC2086 # a chain is a list of suites
			side_start "the TAP lanes and the suites after them" $c
		done
		run_suite tap
	elif [[ $s == smoke && -n $beside_smoke ]]; then
		side_start "the smoke scripts" "$beside_smoke"
		run_suite smoke
		side_finish
	else
		run_suite "$s"
	fi
done
side_finish
exit 0
