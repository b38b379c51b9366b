#!/usr/bin/env bash
# shellcheck disable=SC2317 # functions called by traps and through step
#
# test/package.sh - build the Debian package postgresql-N-dbgate from this
# source tree in a clean Debian root, install it and test it there.
#
# Usage: sudo test/package.sh [--no-update] [--keep] [--prepare] VERSION...
#
#   VERSION      PostgreSQL major version: 15 (Debian bookworm), 17 (trixie)
#                or 18 (forky)
#   --no-update  use a kept root as it is (no apt-get), as check.sh's
#                --no-install does
#   --keep       keep the throwaway copy of the root (build tree, packages,
#                logs) and print its path
#   --prepare    only make or update the versions' roots (step 1 below)
#
# Run by test/check.sh as its "package" suite, once per version, outside
# any other root.  For each version, as root:
#
#   1. a root of the version's Debian suite with the server, build-essential,
#      dpkg-dev, lintian and the build dependencies of debian/control is made
#      with debootstrap, or reused (test/roots.sh, ROOT_KIND=pkg); it never
#      holds dbgate.  The build dependencies it was made with are recorded in
#      it: when debian/control names others, the root is made anew, so that
#      a build dependency missing from debian/control cannot be masked;
#   2. a throwaway copy of it is made (an overlay mount, or cp -a where
#      overlays are not available), and the source tree without .git, build
#      products and test results is copied into it;
#   3. build   dpkg-buildpackage -us -uc as an unprivileged user, as a
#              Debian build daemon builds (with the build-time regression
#              tests of debian/rules); the package's version must be the
#              SemVer form of dbgate.control's default_version;
#   4. lintian on the .changes (source and binary packages): an error fails,
#              warnings are printed;
#   5. install dpkg -i postgresql-VERSION-dbgate_*.deb;
#   6. create  CREATE EXTENSION dbgate in a throwaway cluster of the
#              installed server that preloads the installed library
#              (pg_buildext psql), its version and a budget;
#   7. installcheck  debian/tests/installcheck (pg_buildext installcheck:
#              the regression tests and isolation specs against the
#              installed package), as Debian's autopkgtest runs it.
#
# Each of steps 3 to 7 counts as one test; steps after a failed build or
# installation count as skipped.  The last line is
# "N passed, N failed, N skipped"; the exit status is 0 only if nothing
# failed.  The copy is removed at the end (also on failure or Ctrl-C); the
# host is never changed.
#
# Environment: DBGATE_ROOTS, DBGATE_DEBIAN_MIRROR (test/roots.sh),
# CHECK_TIMEOUT (seconds per step, default 600).

set -uo pipefail

# shellcheck source=test/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ROOT_KIND=pkg
# shellcheck source=test/roots.sh
. "$(dirname "${BASH_SOURCE[0]}")/roots.sh"

CHECK_TIMEOUT=${CHECK_TIMEOUT:-600}

usage() {
	sed -n '/^# Usage:/,/^#   --keep/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
	exit 2
}

noupdate='' keep='' prepare='' versions=()
for arg in "$@"; do
	case $arg in
	--no-update) noupdate=no-update ;;
	--prepare) prepare=1 ;;
	--keep) keep=1 ;;
	-h | --help) usage ;;
	[0-9]*)
		root_suite "$arg" >/dev/null || {
			echo "no Debian suite known for PostgreSQL $arg" >&2
			exit 2
		}
		versions+=("$arg")
		;;
	*) usage ;;
	esac
done
((${#versions[@]} > 0)) || usage
if [[ $EUID -ne 0 ]]; then
	echo "error: run as root (sudo $0): the package is built in a root file system" >&2
	exit 2
fi

passed=0 failed=0 skipped=0
RUN='' MERGED='' LOGS=''
start=$SECONDS

# ---------------------------------------------------------------------------
# Versions: dbgate.control's default_version and its SemVer form

# control_version: default_version of dbgate.control ('1.2').
control_version() {
	sed -n "s/^[[:space:]]*default_version[[:space:]]*=[[:space:]]*'\([^']*\)'.*/\1/p" \
		"$DBGATE_TOP/dbgate.control"
}

# semver VERSION: 1.2 -> 1.2.0, 1.2.3 -> 1.2.3.
semver() {
	case $1 in
	*.*.*) echo "$1" ;;
	*.*) echo "$1.0" ;;
	*) echo "$1.0.0" ;;
	esac
}

# build_depends: the Build-Depends field of debian/control, one package
# relation a line, sorted (the record kept in a root).
build_depends() {
	awk '
		/^Build-Depends:/ { on = 1; sub(/^Build-Depends:/, ""); }
		on && /^[^ \t]/ && !/^Build-Depends:/ { on = 0 }
		on { print }
	' "$DBGATE_TOP/debian/control" | tr ',' '\n' |
		sed 's/^[[:space:]]*//; s/[[:space:]]*$//' | grep . | sort
}

# ---------------------------------------------------------------------------
# Results

result() { # NAME STATUS(ok|fail|skip) [WHY...]
	local name=$1 status=$2 why
	shift 2
	why=$*
	case $status in
	ok)
		passed=$((passed + 1))
		echo "-- $name: passed${why:+ ($why)}"
		;;
	skip)
		skipped=$((skipped + 1))
		echo "-- $name: skipped${why:+ ($why)}"
		;;
	*)
		failed=$((failed + 1))
		echo "-- $name: FAILED${why:+ ($why)}"
		;;
	esac
}

# step LOG CMD...: run CMD (a program or one of the functions below) with
# the time limit, its output to LOG.
step() {
	local log=$1 rc
	shift
	timeout -k 15 "$CHECK_TIMEOUT" bash -c '"$@"' step "$@" </dev/null >"$log" 2>&1
	rc=$?
	((rc == 124 || rc == 137)) &&
		echo "*** time limit of ${CHECK_TIMEOUT}s (CHECK_TIMEOUT) exceeded" >>"$log"
	return "$rc"
}

show_tail() { # FILE [LINES]
	echo "----- ${1##*/} (last ${2:-60} lines)"
	tail -n "${2:-60}" "$1"
	echo "----- end of ${1##*/}"
}

# in_copy CMD...: run CMD as root inside the throwaway copy.
in_copy() {
	in_root "$MERGED" "$@"
}

# as_builder SHELL-COMMAND: run it inside the copy as the build user, in
# the source tree.
as_builder() {
	in_root "$MERGED" runuser -u dbgate-build -- \
		env HOME=/build sh -c "cd /build/dbgate && $1"
}
export -f in_root in_copy as_builder

# ---------------------------------------------------------------------------
# The root and its throwaway copy

# base_root VERSION: print the path of the version's package root, made or
# refreshed, with the build dependencies of debian/control installed.
base_root() {
	local v=$1 dir want have
	dir=$(root_prepare "$v" "$LOGS" $noupdate) || return 1
	want=$(build_depends)
	have=$(cat "$dir/var/lib/dbgate-build-depends" 2>/dev/null)
	if [[ -n $have && $have != "$want" && -z $noupdate ]]; then
		echo "debian/control's Build-Depends changed: making $dir anew" >&2
		root_remove "$dir" || return 1
		dir=$(root_prepare "$v" "$LOGS") || return 1
		have=''
	fi
	if [[ $have != "$want" && -n $noupdate && -n $have ]]; then
		echo "warning: $dir was made for other build dependencies (--no-update)" >&2
	elif [[ $have != "$want" ]]; then
		echo "installing the build dependencies in $dir" >&2
		mkdir -p "$dir/tmp/build-deps" &&
			cp -r "$DBGATE_TOP/debian" "$dir/tmp/build-deps/" || return 1
		root_enter "$dir" || return 1
		if ! in_root "$dir" apt-get build-dep -y -q --no-install-recommends \
			/tmp/build-deps >"$LOGS/build-deps-$v.log" 2>&1 &&
			! { in_root "$dir" apt-get update -q &&
				in_root "$dir" apt-get build-dep -y -q --no-install-recommends \
					/tmp/build-deps; } >>"$LOGS/build-deps-$v.log" 2>&1; then
			root_leave "$dir"
			show_tail "$LOGS/build-deps-$v.log" 20 >&2
			return 1
		fi
		in_root "$dir" apt-get clean
		root_leave "$dir"
		rm -rf "$dir/tmp/build-deps"
		printf '%s\n' "$want" >"$dir/var/lib/dbgate-build-depends"
	fi
	echo "$dir"
}

# copy_root BASE: make the throwaway copy of BASE at $MERGED (an overlay
# whose upper layer is under $RUN, or a full copy) and mount /proc and /dev
# in it.
copy_root() {
	local base=$1
	mkdir -p "$RUN/upper" "$RUN/work" "$MERGED" || return 1
	if ! mount -t overlay overlay \
		-o "lowerdir=$base,upperdir=$RUN/upper,workdir=$RUN/work" "$MERGED" 2>/dev/null; then
		echo "(no overlay file system: copying $base)"
		cp -a "$base/." "$MERGED/" || return 1
	fi
	root_enter "$MERGED"
}

# drop_copy: stop what runs in the copy, undo its mounts, remove it.
drop_copy() {
	if [[ -n $MERGED ]]; then
		root_leave "$MERGED"
		if awk -v m="$MERGED" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; then
			umount "$MERGED" 2>/dev/null || umount -l "$MERGED"
		fi
	fi
	if [[ -n $RUN ]]; then
		if [[ -n $keep ]]; then
			echo "kept: $RUN (the copy's files are in upper/ or merged/)"
		else
			rm -rf --one-file-system "$RUN"
		fi
	fi
	MERGED='' RUN=''
}

# ---------------------------------------------------------------------------
# One version

package_version() {
	local v=$1 t0=$SECONDS t base cver sver debver deb pkg=postgresql-$1-dbgate
	heading "package: PostgreSQL $v ($(root_suite "$v"))"
	cver=$(control_version)
	sver=$(semver "$cver")
	root_lock "$v" || {
		result "package $v: root" fail "could not lock $(root_dir "$v").lock"
		return
	}
	if ! base=$(base_root "$v"); then
		result "package $v: root" fail "no package root for PostgreSQL $v" \
			"(debootstrap or apt-get failed: is the Debian archive reachable?)"
		root_unlock
		return
	fi
	echo "root $base ready ($((SECONDS - t0)) s)"
	# The copy, its build user, and the source tree as a release has it.
	if ! { RUN=$(mktemp -d "$base.run.XXXXXX") && export MERGED=$RUN/merged &&
		copy_root "$base" &&
		in_copy useradd --create-home --home-dir /build dbgate-build >/dev/null &&
		tar_tree "$MERGED/build/dbgate" &&
		in_copy chown -R dbgate-build: /build; }; then
		result "package $v: root" fail "could not prepare a copy of $base"
		drop_copy
		root_unlock
		return
	fi

	# 3. build.  debian/control is generated for Debian 12 (PostgreSQL 15);
	# elsewhere pg_buildext makes it anew from control.in for the suite's
	# versions (PG_UPDATECONTROL), as when building for another
	# distribution.
	local update=''
	grep -q "^Package: $pkg\$" "$DBGATE_TOP/debian/control" || update=PG_UPDATECONTROL=yes
	t=$SECONDS
	echo "build: dpkg-buildpackage -us -uc${update:+ ($update)}"
	if ! step "$RUN/build.log" as_builder "env $update dpkg-buildpackage -us -uc"; then
		show_tail "$RUN/build.log" 80
		result "package $v: build" fail "dpkg-buildpackage failed, $((SECONDS - t)) s"
		for s in lintian install create installcheck; do
			result "package $v: $s" skip "no package"
		done
		drop_copy
		root_unlock
		return
	fi
	grep -E 'tests passed|tests failed|of [0-9]+ tests' "$RUN/build.log" |
		sed 's/^[# ]*/   build-time tests: /'
	local f built=()
	deb=''
	for f in "$MERGED"/build/*.deb "$MERGED"/build/*.changes "$MERGED"/build/*.dsc; do
		[[ -e $f ]] || continue
		built+=("${f##*/}")
		[[ ${f##*/} == "${pkg}"_*.deb ]] && deb=${f##*/}
	done
	debver=${deb#"${pkg}_"}
	debver=${debver%%_*}
	echo "built: ${built[*]}"
	if [[ -z $deb ]]; then
		result "package $v: build" fail "no $pkg package was built"
	elif [[ $debver != "$sver" ]]; then
		result "package $v: build" fail "package version $debver, but dbgate.control's" \
			"default_version '$cver' is $sver: add a debian/changelog entry"
	else
		result "package $v: build" ok "$deb, $((SECONDS - t)) s"
	fi

	# 4. lintian
	t=$SECONDS
	step "$RUN/lintian.log" as_builder "lintian --fail-on error --display-info ../*.changes"
	local rc=$? n_e n_w n_i
	n_e=$(grep -c '^E: ' "$RUN/lintian.log")
	n_w=$(grep -c '^W: ' "$RUN/lintian.log")
	n_i=$(grep -c '^I: ' "$RUN/lintian.log")
	echo "lintian $(in_copy lintian --version 2>/dev/null | awk '{print $NF}'):" \
		"$n_e error(s), $n_w warning(s), $n_i info tag(s)"
	grep -E '^[EWI]: ' "$RUN/lintian.log" | sed 's/^/   /'
	if ((rc == 0)); then
		result "package $v: lintian" ok "$((SECONDS - t)) s"
	else
		((n_e == 0)) && show_tail "$RUN/lintian.log" 30
		result "package $v: lintian" fail "status $rc, $n_e error(s)"
	fi

	# 5. install
	t=$SECONDS
	# shellcheck disable=SC2016 # a dpkg-query format, not a shell expansion
	if [[ -n $deb ]] && step "$RUN/install.log" in_copy dpkg -i "/build/$deb" &&
		in_copy dpkg-query -W -f='${Status}\n' "$pkg" | grep -q 'install ok installed'; then
		sed 's/^/   /' "$RUN/install.log"
		result "package $v: install" ok "dpkg -i $deb, $((SECONDS - t)) s"
	else
		[[ -f $RUN/install.log ]] && show_tail "$RUN/install.log" 30
		result "package $v: install" fail "dpkg -i $deb"
		for s in create installcheck; do
			result "package $v: $s" skip "package not installed"
		done
		drop_copy
		root_unlock
		return
	fi

	# 6. CREATE EXTENSION in a cluster of the installed server that
	# preloads the installed library.
	t=$SECONDS
	local got
	step "$RUN/create.log" as_builder "pg_buildext -o shared_preload_libraries=dbgate psql <<'EOF'
CREATE EXTENSION dbgate;
SELECT dbgate.create_budget('package_test', max_active => 2);
SELECT 'result: ' || e.extversion || ' ' || s.budget || ' ' || s.max_active
  FROM pg_extension e, dbgate.status s WHERE e.extname = 'dbgate';
EOF"
	got=$(sed -n 's/^ *result: //p' "$RUN/create.log")
	if [[ $got == "$cver package_test 2" ]]; then
		result "package $v: create" ok "extension $cver, a budget in dbgate.status, $((SECONDS - t)) s"
	else
		show_tail "$RUN/create.log" 40
		result "package $v: create" fail "expected '$cver package_test 2', got '$got'"
	fi

	# 7. installcheck, as autopkgtest runs debian/tests/installcheck
	t=$SECONDS
	if step "$RUN/installcheck.log" as_builder debian/tests/installcheck; then
		grep -E 'tests passed|tests failed|of [0-9]+ tests' "$RUN/installcheck.log" |
			sed 's/^[# ]*/   /'
		result "package $v: installcheck" ok "$((SECONDS - t)) s"
	else
		show_tail "$RUN/installcheck.log" 150
		result "package $v: installcheck" fail "$((SECONDS - t)) s"
	fi

	drop_copy
	root_unlock
	echo "package: PostgreSQL $v done ($((SECONDS - t0)) s)"
}

finish() {
	local rc=$?
	trap - EXIT INT TERM HUP
	trap "" PIPE
	drop_copy
	root_unlock
	[[ -n $LOGS ]] && rm -rf "$LOGS"
	echo
	echo "package: $passed passed, $failed failed, $skipped skipped ($((SECONDS - start)) s)"
	echo "$passed passed, $failed failed, $skipped skipped"
	((failed == 0)) && exit 0
	exit 1
}
trap finish EXIT
trap 'echo "*** interrupted"; failed=$((failed + 1)); exit 130' INT TERM HUP
trap 'trap "" PIPE; exit 141' PIPE

LOGS=$(mktemp -d "${TMPDIR:-/tmp}/dbgate-package.XXXXXX") || exit 1
if [[ -n $prepare ]]; then
	# Only step 1: make or update the roots (check.sh does this in the
	# background while other suites run); no tests, no counts.
	trap - EXIT
	rc=0
	for v in "${versions[@]}"; do
		t0=$SECONDS
		if root_lock "$v" && base=$(base_root "$v"); then
			echo "package root $base ready ($((SECONDS - t0)) s)"
		else
			echo "*** package root for PostgreSQL $v: not made"
			rc=1
		fi
		root_unlock
	done
	rm -rf "$LOGS"
	exit "$rc"
fi
for v in "${versions[@]}"; do
	package_version "$v"
done
exit 0
