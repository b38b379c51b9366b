#!/bin/bash
#
# test/tools/layers.sh - the file-to-file structure of dbgate's C sources.
#
# Usage (from the repository, after `make`):
#     test/tools/layers.sh [--edges] [--functions [LINES]] [--includes]
#
# Prints, from the object files in src/ (nm: which file defines and which
# uses each global symbol, so a static inline function of a header counts
# for the file that inlines it):
#   - the largest C file and the number of C files that include dbgate.h;
#   - the cycles of the file-level call graph: each strongly connected
#     set of files, with the symbols every file of it uses of the others;
#   - the layers of src/README, checked: nothing calls into dbgate.c (the
#     module entry); the statement path (the files the hooks call below
#     dbgate.c, and all they reach) reaches nothing of the configuration's
#     writing side (config.c, wal.c, persist.c); the configuration side
#     reaches the files of admission through queue.c only.  A violation
#     is printed, and the exit status is 1;
#   - with --edges, every edge (file -> file: symbols);
#   - with --functions, the functions longer than LINES lines (default
#     100), counted from the line of the name to the closing brace;
#   - with --includes, for each file the headers of src/ it includes.
#
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
edges='' functions='' includes='' maxlen=100
while (($# > 0)); do
	case $1 in
	--edges) edges=1 ;;
	--functions)
		functions=1
		if [[ ${2:-} =~ ^[0-9]+$ ]]; then maxlen=$2; shift; fi ;;
	--includes) includes=1 ;;
	*) sed -n '/^# Usage/,/^#$/s/^# \{0,1\}//p' "$0"; exit 2 ;;
	esac
	shift
done

# The files the hooks of dbgate.c call on the statement path; the
# statement path is them and everything they reach.
STATEMENT_ROOTS="slot classify planner parallel memgrant mincost utility queryid"
# What only a configuration change (or its replay) runs, and may not be
# reached from the statement path.
WRITING_SIDE="config wal persist"
# The configuration side, which reaches the queues through queue.c only.
CONFIG_SIDE="sqlfuncs config wal persist budgets confimage fields"
ADMISSION_FILES="admission waiting queue trees lockgraph rate"

for f in src/*.c; do
	[[ -e ${f%.c}.o ]] || { echo "src/${f##*/}: no object file; run make first" >&2; exit 2; }
done

largest=$(wc -l src/*.c | grep -v ' total$' | sort -n | tail -1 | awk '{print $2 " (" $1 " lines)"}')
ninc=$(grep -l '^#include "dbgate.h"' src/*.c | wc -l)
echo "largest C file: $largest"
echo "C files that include dbgate.h: $ninc of $(ls src/*.c | wc -l)"

# file symbol D|U, one line each
syms=$(for o in src/*.o; do
	n=${o##*/}
	n=${n%.o}
	nm -P -g --defined-only "$o" | awk -v f="$n" '$2 ~ /^[TDBRCV]$/ {print f, $1, "D"}'
	nm -P -u "$o" | awk -v f="$n" '{print f, $1, "U"}'
done)

echo "$syms" | awk -v show_edges="$edges" -v roots="$STATEMENT_ROOTS" \
	-v writing="$WRITING_SIDE" -v confside="$CONFIG_SIDE" -v adm="$ADMISSION_FILES" '
$3 == "D" { def[$2] = $1; files[$1] = 1; next }
{ use[NR] = $1 " " $2; files[$1] = 1 }
END {
	for (k in use) {
		split(use[k], a, " ")
		f = a[1]; s = a[2]
		if (!(s in def) || def[s] == f)
			continue
		t = def[s]
		e[f, t] = 1
		syms[f, t] = syms[f, t] (syms[f, t] == "" ? "" : " ") s
	}
	n = 0
	for (f in files) name[++n] = f
	# sort the names
	for (i = 1; i <= n; i++)
		for (j = i + 1; j <= n; j++)
			if (name[j] < name[i]) { x = name[i]; name[i] = name[j]; name[j] = x }
	for (i = 1; i <= n; i++)
		for (j = 1; j <= n; j++)
			r[name[i], name[j]] = ((name[i], name[j]) in e) ? 1 : 0
	# transitive closure (Warshall)
	for (k = 1; k <= n; k++)
		for (i = 1; i <= n; i++)
			if (r[name[i], name[k]])
				for (j = 1; j <= n; j++)
					if (r[name[k], name[j]])
						r[name[i], name[j]] = 1
	if (show_edges) {
		print ""
		print "edges (file -> file: symbols):"
		for (i = 1; i <= n; i++)
			for (j = 1; j <= n; j++)
				if ((name[i], name[j]) in e)
					printf "  %s -> %s: %s\n", name[i], name[j], sortwords(syms[name[i], name[j]])
	}
	print ""
	ncyc = 0
	for (i = 1; i <= n; i++) {
		if (done[name[i]] || !r[name[i], name[i]])
			continue
		members = ""
		m = 0
		for (j = 1; j <= n; j++)
			if (name[j] == name[i] || (r[name[i], name[j]] && r[name[j], name[i]])) {
				members = members (m++ ? " " : "") name[j]
				done[name[j]] = 1
				mem[m] = name[j]
			}
		ncyc++
		printf "cycle %d (%d files): %s\n", ncyc, m, members
		for (x = 1; x <= m; x++)
			for (y = 1; y <= m; y++)
				if ((mem[x], mem[y]) in e)
					printf "  %s -> %s: %s\n", mem[x], mem[y], sortwords(syms[mem[x], mem[y]])
	}
	printf "file-to-file cycles: %d\n", ncyc
	# the layers
	bad = 0
	into = ""
	for (i = 1; i <= n; i++)
		if ((name[i], "dbgate") in e)
			into = into " " name[i]
	if (into != "") {
		print "layering: calls into dbgate.c from" into
		bad = 1
	} else
		print "layering: nothing calls into dbgate.c"
	nr = split(roots, ro, " ")
	nw = split(writing, w, " ")
	path = ""
	for (i = 1; i <= n; i++) {
		on = 0
		for (k = 1; k <= nr; k++)
			if (name[i] == ro[k] || r[ro[k], name[i]])
				on = 1
		if (!on)
			continue
		path = path " " name[i]
		for (j = 1; j <= nw; j++)
			if (name[i] == w[j]) {
				printf "layering: the statement path reaches %s (configuration writing side)\n", w[j]
				bad = 1
			}
	}
	print "statement path:" path
	nc = split(confside, cs, " ")
	na = split(adm, ad, " ")
	via = ""
	for (i = 1; i <= nc; i++)
		for (j = 1; j <= na; j++) {
			if (!((cs[i], ad[j]) in e))
				continue
			if (ad[j] != "queue") {
				printf "layering: %s (configuration side) calls %s: %s\n", cs[i], ad[j], sortwords(syms[cs[i], ad[j]])
				bad = 1
			} else
				via = via " " syms[cs[i], ad[j]]
		}
	k = split(sortwords(via), vw, " ")
	printf "configuration side -> queues: queue.c only, %d functions: %s\n", k, sortwords(via)
	exit bad
}
function sortwords(s,    a, k, i, j, x, out) {
	k = split(s, a, " ")
	for (i = 1; i <= k; i++)
		for (j = i + 1; j <= k; j++)
			if (a[j] < a[i]) { x = a[i]; a[i] = a[j]; a[j] = x }
	out = ""
	for (i = 1; i <= k; i++)
		if (i == 1 || a[i] != a[i - 1])
			out = out (out == "" ? "" : " ") a[i]
	return out
}
' || rc=$?
rc=${rc:-0}

if [[ -n $includes ]]; then
	echo ""
	echo "headers of src/ included:"
	for f in src/*.c; do
		printf '  %s: %s\n' "${f##*/}" \
			"$(sed -n 's/^#include "\([^"]*\.h\)".*/\1/p' "$f" | tr '\n' ' ')"
	done
fi

if [[ -n $functions ]]; then
	echo ""
	echo "functions over $maxlen lines:"
	# A function definition in PostgreSQL style: its name at the start of
	# a line, its body between a "{" and a "}" alone at the start of lines.
	awk -v max="$maxlen" '
		FNR == 1 { fname = ""; start = 0 }
		/^[A-Za-z_][A-Za-z0-9_]*\(/ { fname = $0; sub(/\(.*/, "", fname); start = FNR; next }
		/^\{/ && fname != "" { inbody = 1; next }
		/^\}/ && inbody {
			len = FNR - start + 1
			if (len > max)
				printf "  %4d %s:%d %s\n", len, FILENAME, start, fname
			inbody = 0; fname = ""
		}
	' src/*.c | sort -rn
	echo "longest function: $(awk '
		FNR == 1 { fname = ""; start = 0 }
		/^[A-Za-z_][A-Za-z0-9_]*\(/ { fname = $0; sub(/\(.*/, "", fname); start = FNR; next }
		/^\{/ && fname != "" { inbody = 1; next }
		/^\}/ && inbody { print FNR - start + 1, FILENAME ":" start, fname; inbody = 0; fname = "" }
	' src/*.c | sort -rn | head -1)"
fi
exit "$rc"
