#!/usr/bin/env bash
# The build: an incremental build makes what a clean one makes, and where
# the tree lies does not matter.
#
# The source tree (without build products) is copied to a directory and
# built there: the library must be the same byte for byte as the one that
# test/check.sh built in DBGATE_SRC, a tree at a path of another length
# (debug information names the sources relative to the tree; without that
# library, a second copy at a longer path is built for the comparison).
# Then, in the first copy: a second `make` compiles nothing; after
# touching any header of src/, or with another COPT, and after going back
# from it, `make -n` would remake every object and, when PostgreSQL was
# built with LLVM, every bitcode file (installed for JIT inlining); with
# the first build's products put back, nothing.  The first build is the
# only compile of the first copy (a second copy, when there is one, is made
# with with_llvm=no, which changes neither the library nor src/build-flags).
# Last, the library exports
# what the server looks up by name -- every function the install scripts
# name and its info function, _PG_init, Pg_magic_func, the background
# worker's entry point -- and nothing else (hidden visibility, also on 15);
# and the layers of src/README hold (test/tools/layers.sh, with the edges
# test/tools/layers.allow lets pass for now).
# Exit 0 = pass, 77 = skipped (make or nm missing), anything else = fail.
set -euo pipefail

SRC=${DBGATE_SRC:?run from test/check.sh}
WORK=${DBGATE_WORK:?run from test/check.sh}
PG_CONFIG=${PG_CONFIG:-pg_config}

skip() {
	echo "build smoke skipped: $*"
	exit 77
}
fail() {
	echo "build smoke FAILED: $*"
	exit 1
}
command -v make >/dev/null || skip "make is not installed"
command -v nm >/dev/null || skip "nm is not installed"

A=$WORK/a
B=$WORK/tree-at-a-longer-path/of/several/levels
# the other library: the build stage's (DBGATE_SRC), else a second copy's
other=$SRC copies=("$A")
[[ -s $SRC/dbgate.so ]] || other=$B copies+=("$B")
for d in "${copies[@]}"; do
	mkdir -p "$d"
	tar -C "$SRC" --exclude=./.git --exclude=./tmp_check --exclude=./results \
		--exclude=./log --exclude=./test/isolation/results \
		--exclude=./test/isolation/output_iso --exclude='*.o' --exclude='*.so' \
		--exclude='*.bc' --exclude=./src/build-flags -cf - . | tar -C "$d" -xf -
done

build() { # dir [make arguments]
	local d=$1
	shift
	make -C "$d" -j"$(nproc)" PG_CONFIG="$PG_CONFIG" "$@" >"$WORK/make.log" 2>&1 ||
		{ cat "$WORK/make.log"; fail "make in $d failed"; }
}
# the objects of dir not newer than file
not_newer() { # dir file
	find "$1/src" -name '*.o' ! -newer "$2" | sort
}

build "$A"
[[ $other == "$B" ]] && build "$B" with_llvm=no
cmp -s "$A/dbgate.so" "$other/dbgate.so" ||
	fail "the library built in $other differs from the one built in $A"
cp "$A/dbgate.so" "$WORK/first.so"
# the first build's products, put back after the build with another COPT
(cd "$A" && { printf '%s\0' dbgate.so src/build-flags; find src \( -name '*.o' -o -name '*.bc' \) -print0; } |
	tar --null -T - -cf "$WORK/first.tar")
echo "ok: the same library from two trees at different paths ($A and $other)"

touch "$WORK/mark"
sleep 1
build "$A"
made=$(find "$A/src" "$A/dbgate.so" -newer "$WORK/mark")
[[ -z $made ]] || fail "a second make remade: $made"
echo "ok: a second make remakes nothing"

# what `make -n` would compile, as "src/NAME.o" and "src/NAME.bc"
would_make() { # dir [make arguments]
	local d=$1
	shift
	make -n -C "$d" PG_CONFIG="$PG_CONFIG" "$@" 2>&1 |
		{ grep -o -- ' -o src/[A-Za-z_0-9]*\.\(o\|bc\) ' || true; } | awk '{print $2}' | sort -u
}
all=$(cd "$A" && find src \( -name '*.o' -o -name '*.bc' \) | sort)
# Each header in turn is made newer than every object (2 s ahead of the
# clock, so without waiting) and then given back its own time; the tree is
# up to date before and after, so that what make would do follows from
# that header alone.
pending=$(would_make "$A")
[[ -z $pending ]] || fail "make would remake before any header is touched: $pending"
ahead=$(($(date +%s) + 2))
for h in "$A"/src/*.h; do
	own=$(stat -c %Y "$h")
	touch -d "@$ahead" "$h"
	left=$(comm -23 <(echo "$all") <(would_make "$A"))
	touch -d "@$own" "$h"
	[[ -z $left ]] || fail "touching ${h#"$A"/} would not remake: $left"
done
pending=$(would_make "$A")
[[ -z $pending ]] || fail "make would remake after the headers are given back their times: $pending"
echo "ok: every header of src/ would remake all $(echo "$all" | wc -l) objects and bitcode files"

# Another COPT would remake every object and bitcode file, and so would
# going back (asked of `make -n`, as for the headers: the Makefile
# rewrites src/build-flags as it reads itself, also with -n, when the
# flags differ from the last ones; a compile of the tree would take as
# long as the first build).  With the first build's products put back,
# make would remake nothing.
cp "$A/src/build-flags" "$WORK/first-flags"
pending=$(would_make "$A" COPT=-O1)
[[ $pending == "$all" ]] ||
	fail "make -n with COPT=-O1 would remake $(echo $pending | cut -c1-300), not every object and bitcode file"
cmp -s "$A/src/build-flags" "$WORK/first-flags" && fail "COPT=-O1 left src/build-flags as it was"
pending=$(would_make "$A")
[[ $pending == "$all" ]] ||
	fail "make without COPT after one with it would remake $(echo $pending | cut -c1-300), not every object and bitcode file"
tar -C "$A" -xf "$WORK/first.tar"
pending=$(would_make "$A")
[[ -z $pending ]] || fail "with the first build's products back, make would remake: $pending"
cmp -s "$A/dbgate.so" "$WORK/first.so" || fail "the first library was not put back"
echo "ok: another COPT would remake everything, and so would going back (make -n)"

# the symbols the server looks up by name
want=$(
	{
		grep -oh "'MODULE_PATHNAME', *'[A-Za-z_0-9]*'" "$A"/sql/*.sql |
			sed "s/.*, *'//; s/'\$//" | sort -u | sed 'p; s/^/pg_finfo_/'
		grep -oh 'bgw_function_name, BGW_MAXLEN, "[A-Za-z_0-9]*"' "$A"/src/*.c |
			sed 's/.*"\([A-Za-z_0-9]*\)"/\1/'
		echo _PG_init
		echo Pg_magic_func
	} | sort -u)
have=$(nm -D --defined-only "$A/dbgate.so" | awk '{print $3}' | sort -u)
missing=$(comm -23 <(echo "$want") <(echo "$have"))
[[ -z $missing ]] || fail "not exported: $missing"
extra=$(comm -13 <(echo "$want") <(echo "$have"))
[[ -z $extra ]] || fail "exported but looked up by nobody: $(echo $extra | cut -c1-300)"
echo "ok: $(echo "$want" | wc -l) symbols exported, the ones the server looks up"

# the layers of src/README, from the objects just built: no file-to-file
# cycle, nothing calls into dbgate.c, the statement path reaches nothing of
# the configuration's writing side, which reaches the queues through
# queue.c only; and of the modules with their headers, no cycle or upward
# dependency that test/tools/layers.allow does not list (test/tools/layers.sh
# exits 1 on a violation)
if ! out=$(cd "$A" && bash test/tools/layers.sh 2>&1); then
	echo "$out"
	fail "test/tools/layers.sh found a violation of the layers (a new edge upward or in a cycle goes away, or, if it must stay for now, into test/tools/layers.allow)"
fi
grep -q '^file-to-file cycles: 0$' <<<"$out" || {
	echo "$out"
	fail "a file-to-file cycle"
}
grep '^gone ' <<<"$out" || true
echo "ok: layers as src/README says ($(grep -c . <<<"$out") lines of report, no file-to-file cycle; modules: $(tail -1 <<<"$out"), all in test/tools/layers.allow)"
