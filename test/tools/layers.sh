#!/bin/bash
#
# test/tools/layers.sh - the file-to-file structure of dbgate's C sources.
#
# Usage (from the repository, after `make`):
#     test/tools/layers.sh [--edges] [--functions [LINES]] [--includes]
#                          [--write-allow]
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
#     reaches the files of admission through install.c and queue.c only
#     (install.h, queue.h's tree lock).  A violation
#     is printed, and the exit status is 1.
# Then the same of modules, headers included: a module is a .c file with
# its header (x.c with x.h); a header without a .c file
# (admission_internals.h, compat.h, plantree.h) is a module of its own.
# Module A depends on module B when the text of A's files (without
# comments, strings and #include lines; a member after . or -> is no use)
# names what B defines: a global function or variable of B's .c file (nm;
# and the text, for another PostgreSQL version's branch), or a static
# inline function, macro, typedef, struct/union/enum tag, enum constant or
# static variable of B's header.  A prototype or an extern declaration
# defines nothing and uses nothing: it is the defining file's.  Printed:
#   - the layers, from the block "Layers (lowest first):" of src/README;
#     a file of src/ in no layer, or in two, is a violation; a word
#     "a.c+b.c+a_internals.h" there makes one module (named a) of the
#     parts of a split file and the header they share;
#   - the cycles: each strongly connected set of modules, with the names
#     that make each edge;
#   - every upward dependency (a module of a lower layer -> one of a
#     higher layer), with its names;
#   - the edges of cycles and the upward ones that test/tools/layers.allow
#     does not list: "not allowed", a violation; and those it lists that
#     are gone: "gone", printed only, to be deleted from it;
#   - "largest cycle: N modules" and "N cycles, N upward dependencies";
#   - a C file over 1,000 lines or a function over 100: a violation.
# test/tools/layers.allow lists the edges of cycles and the upward edges
# that pass while the refactoring that removes them goes on, one "a -> b"
# a line, and only shrinks: --write-allow writes it from what is found
# now, and is for when a change of src/README's layers moves edges, not
# for letting a new dependency through.  With the list empty the check is
# "0 cycles, 0 upward dependencies".
# Options:
#   - --edges: every edge (file -> file: symbols, and module -> module:
#     names);
#   - --functions: the functions longer than LINES lines (default 100),
#     counted from the line of the name to the closing brace;
#   - --includes: for each file the headers of src/ it includes;
#   - --write-allow: test/tools/layers.allow written (see above).
# Exit status: 1 on a violation, 2 on a wrong option or without object
# files, 0 else.
#
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
edges='' functions='' includes='' maxlen=100 write_allow=0
while (($# > 0)); do
	case $1 in
	--edges) edges=1 ;;
	--functions)
		functions=1
		if [[ ${2:-} =~ ^[0-9]+$ ]]; then maxlen=$2; shift; fi ;;
	--includes) includes=1 ;;
	--write-allow) write_allow=1 ;;
	*) sed -n '/^# Usage/,/^#$/s/^# \{0,1\}//p' "$0"; exit 2 ;;
	esac
	shift
done

# The files the hooks of dbgate.c call on the statement path; the
# statement path is them and everything they reach.
STATEMENT_ROOTS="slot slotrun slotxact gate classify planner parallel memgrant mincost utility queryid"
# What only a configuration change (or its replay) runs, and may not be
# reached from the statement path.
WRITING_SIDE="config wal persist"
# The configuration side, which reaches the queues through install.c and
# queue.c only.
CONFIG_SIDE="sqlfuncs config confcheck wal persist budgets confimage fields"
ADMISSION_FILES="admission waiting queue trees lockgraph rate install demote move"

for f in src/*.c; do
	[[ -e ${f%.c}.o ]] || { echo "src/${f##*/}: no object file; run make first" >&2; exit 2; }
done

largest=$(wc -l src/*.c | grep -v ' total$' | sort -n | tail -1 | awk '{print $2 " (" $1 " lines)"}')
ninc=$(grep -l '^#include "dbgate.h"' src/*.c | wc -l)
echo "largest C file: $largest"
echo "C files that include dbgate.h: $ninc of $(ls src/*.c | wc -l)"

# file symbol D|U, one line each
syms=$(
	nm -A -P -g --defined-only src/*.o |
		awk '$3 ~ /^[TDBRCV]$/ {f = $1; sub(/^src\//, "", f); sub(/\.o:$/, "", f); print f, $2, "D"}'
	nm -A -P -u src/*.o |
		awk '{f = $1; sub(/^src\//, "", f); sub(/\.o:$/, "", f); print f, $2, "U"}'
)

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
			if (ad[j] != "queue" && ad[j] != "install") {
				printf "layering: %s (configuration side) calls %s: %s\n", cs[i], ad[j], sortwords(syms[cs[i], ad[j]])
				bad = 1
			} else
				via = via " " syms[cs[i], ad[j]]
		}
	k = split(sortwords(via), vw, " ")
	printf "configuration side -> queues: install.c and queue.c only, %d functions: %s\n", k, sortwords(via)
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

# The modules, with their headers (see the top of this file).  Arguments:
# src/README, the allow file, write it (0|1), show the edges (0|1);
# standard input: the global symbols from nm, "module symbol D".
read -r -d '' modules_pl <<'PERL' || true
use strict;
use warnings;

# Arguments: src/README, the allow file, write_allow (0|1), show_edges (0|1).
# Standard input: "module symbol D", the global symbols nm finds defined.
my ($readme, $allowfile, $write_allow, $show_edges) = @ARGV;

# A module is a .c file with its header; a word "a.c+b.c+c_internals.h"
# of the block makes one module, named after its first file, of files that
# share one header of their own (a split file's parts).
my %group;    # basename -> module

# the layers, from the block "Layers (lowest first)" of src/README
my (@layer_name, %layer_of, $bad);
open(my $rf, '<', $readme) or die "$readme: $!\n";
my $in = 0;
while (<$rf>) {
	if (/^Layers \(lowest first\)/) { $in = 1; next; }
	next unless $in;
	last if /^\S/ || (/^\s*$/ && @layer_name);
	next if /^\s*$/;
	my $list;
	if (/^\s+(\S[^:]*):\s*(.*)$/) {
		push @layer_name, $1;
		$list = $2;
	} else {
		$list = $_;
	}
	for my $g (split ' ', $list) {
		my @part = split /\+/, $g;
		$part[0] =~ /^([A-Za-z0-9_]+)\.[ch]$/ or die "src/README, Layers: not a file name: $part[0]\n";
		my $m = $1;
		my $w = $part[0];
		for my $pw (@part) {
			$pw =~ /^([A-Za-z0-9_]+)\.[ch]$/ or die "src/README, Layers: not a file name: $pw\n";
			$group{$1} = $m;
			if (!-e "src/$pw") {
				print "layers: src/README lists $pw, which is not in src/\n";
				$bad = 1;
			}
		}
		if (exists $layer_of{$m} && $layer_of{$m} != $#layer_name) {
			print "layers: $w is in two layers of src/README\n";
			$bad = 1;
		}
		$layer_of{$m} = $#layer_name;
	}
}
close $rf;
die "src/README has no block \"Layers (lowest first)\"\n" unless @layer_name;
my %files;
for my $f (glob('src/*.c'), glob('src/*.h')) {
	(my $b = $f) =~ s{^src/(.*)\.[ch]$}{$1};
	push @{ $files{ $group{$b} // $b } }, $f;
}
for my $m (sort keys %files) {
	next if exists $layer_of{$m};
	print "layers: src/$_ is in no layer of src/README\n" for map { s{^src/}{}r } @{ $files{$m} };
	$bad = 1;
}

# Text of a file without comments, strings and character constants, its
# continued lines joined.
sub text_of {
	my ($f) = @_;
	open(my $fh, '<', $f) or die "$f: $!\n";
	local $/;
	my $t = <$fh>;
	close $fh;
	$t =~ s{(/\*.*?\*/)|//[^\n]*|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'}{
		defined $1 ? ("\n" x ($1 =~ tr/\n//) || " ") : " "}gse;
	$t =~ s/\\\n/ /g;
	return $t;
}

my (%defs, %own);    # name -> {module -> kind}; module -> {name -> 1}
my %uses;            # module -> {name -> occurrences}
my %declared;        # module -> {name -> occurrences in declarations}

sub define {
	my ($m, $f, $name, $kind) = @_;
	$own{$m}{$name} = 1;
	# all a header defines; of a .c file, the global symbols (nm has
	# them too, but not those of another PostgreSQL version's branch)
	$defs{$name}{$m} = $kind if $f =~ /\.h$/ || $kind eq 'function' || $kind eq 'variable';
}

# the code of each file: [pp, the rest of a directive] or [c, a line]
my (%code, %macro);
for my $m (sort keys %files) {
	for my $f (@{ $files{$m} }) {
		for my $line (split /\n/, text_of($f)) {
			if ($line =~ /^\s*#\s*(\w+)\s*(.*)$/) {
				my ($dir, $rest) = ($1, $2);
				next if $dir eq 'include' || $dir eq 'undef';
				if ($dir eq 'define' && $rest =~ s/^([A-Za-z_]\w*)//) {
					define($m, $f, $1, 'macro');
					$macro{$1} = 1;
				}
				push @{ $code{$f} }, [ 'pp', $rest ];
				next;
			}
			push @{ $code{$f} }, [ 'c', $line ];
		}
	}
}
for my $m (sort keys %files) {
	for my $f (@{ $files{$m} }) {
		# uses: every identifier not after . or -> (a member)
		my @tok;
		for my $c (@{ $code{$f} }) {
			my $prev = '';
			while ($c->[1] =~ /(->|[A-Za-z_]\w*|\d[\w.]*|\S)/g) {
				my $tok = $1;
				$uses{$m}{$tok}++ if $tok =~ /^[A-Za-z_]/ && $prev ne '.' && $prev ne '->';
				$prev = $tok;
				push @tok, $tok if $c->[0] eq 'c';
			}
		}
		parse($m, $f, \@tok);
	}
}

# The definitions of a file at file scope: functions with a body, tags of
# struct/union/enum with a body, enum constants, typedef names, variables
# that are not extern.  A prototype and an extern declaration define
# nothing.
sub parse {
	my ($m, $f, $tok) = @_;
	my @stmt;
	my $i = 0;
	my $n = @$tok;
	while ($i < $n) {
		my $t = $tok->[$i];
		if ($t eq ';') {
			declaration($m, $f, \@stmt);
			@stmt = ();
			$i++;
			next;
		}
		if ($t eq '{') {
			my $depth = 0;
			my $func = @stmt && $stmt[-1] eq ')' && !grep({ $_ eq '=' || $_ eq 'typedef' } @stmt);
			if ($func) {
				my $name = function_name(\@stmt);
				define($m, $f, $name, (grep { $_ eq 'static' } @stmt) ? 'static function' : 'function')
					if defined $name;
			}
			# the body: tags and enum constants inside it (not in a function)
			my $j = $i;
			my @open;    # per open brace: is an enum body
			my $paren = 0;
			while ($j < $n) {
				my $u = $tok->[$j];
				$paren++ if $u eq '(';
				$paren-- if $u eq ')';
				if ($u eq '{') {
					my ($k1, $k2) = ($j >= 1 ? $tok->[$j - 1] : '', $j >= 2 ? $tok->[$j - 2] : '');
					my $enum = 0;
					if (!$func) {
						if ($k1 =~ /^[A-Za-z_]\w*$/ && $k2 =~ /^(struct|union|enum)$/) {
							define($m, $f, $k1, "$k2 tag");
							$enum = $k2 eq 'enum';
						}
						$enum = 1 if $k1 eq 'enum';
					}
					push @open, $enum;
					$depth++;
				} elsif ($u eq '}') {
					pop @open;
					$depth--;
					last if $depth == 0;
				} elsif ($open[-1] && $paren == 0 && $u =~ /^[A-Za-z_]\w*$/ && $tok->[$j - 1] =~ /^[{,]$/) {
					define($m, $f, $u, 'enum constant');
				}
				$j++;
			}
			$i = $j + 1;
			if ($func) {
				@stmt = ();
			} else {
				push @stmt, '{}';
			}
			next;
		}
		push @stmt, $t;
		$i++;
	}
}

sub function_name {
	my ($s) = @_;
	for my $k (1 .. $#$s) {
		next unless $s->[$k] eq '(' && $s->[$k - 1] =~ /^[A-Za-z_]\w*$/;
		next if $s->[$k - 1] =~ /^(__attribute__|pg_attribute_\w+)$/;
		return $s->[$k - 1];
	}
	return undef;
}

sub declaration {
	my ($m, $f, $s) = @_;
	return unless @$s;
	# a macro's call, as PG_FUNCTION_INFO_V1(f);
	return if $macro{ $s->[0] } && (@$s == 1 || $s->[1] eq '(');
	my $extern = grep { $_ eq 'extern' } @$s;
	my $typedef = $s->[0] eq 'typedef';
	# the declarators: split at commas outside parentheses and brackets
	my (@decl, $depth);
	@decl = ([]);
	$depth = 0;
	for my $t (@$s) {
		$depth++ if $t eq '(' || $t eq '[';
		$depth-- if $t eq ')' || $t eq ']';
		if ($t eq ',' && $depth == 0) { push @decl, []; next; }
		push @{ $decl[-1] }, $t;
	}
	for my $d (@decl) {
		my @d = @$d;
		my ($name, $proto);
		my $str = join ' ', @d;
		if ($str =~ /\( \* (?:const )?([A-Za-z_]\w*) \)/) {
			$name = $1;    # a pointer to a function
		} else {
			my @pre;
			for my $t (@d) {
				last if $t eq '=';
				last if $t eq '[';
				if ($t eq '(') {
					# a prototype, or a typedef of a function type
					$proto = !$typedef;
					last;
				}
				push @pre, $t;
			}
			# after a body "{...}" the declarator; "struct x;" declares none
			for my $k (0 .. $#pre) {
				splice(@pre, 0, $k + 1), last if $pre[$k] eq '{}';
			}
			@pre = () if @pre == 2 && $pre[0] =~ /^(struct|union|enum)$/;
			($name) = grep { /^[A-Za-z_]\w*$/ } reverse @pre;
			$name = undef if defined $name && $name =~ /^(struct|union|enum|const|volatile|static|inline|typedef|unsigned|signed|int|char|long|short|void|bool|float|double)$/;
		}
		next unless defined $name;
		# a prototype or an extern declaration is the defining file's:
		# neither a definition nor a use
		if ($extern || $proto) {
			$declared{$m}{$name}++;
			next;
		}
		define($m, $f, $name, $typedef ? 'typedef' : ((grep { $_ eq 'static' } @$s) ? 'static variable' : 'variable'));
	}
}

# the global symbols from nm: defined by the module of the object file
while (<STDIN>) {
	my ($m, $sym, $k) = split;
	next unless $k eq 'D';
	$m = $group{$m} // $m;
	$defs{$sym}{$m} = 'global';
	$own{$m}{$sym} = 1;
}

# the edges
my %edge;    # "a b" -> {name -> 1}
my %multi;
for my $a (keys %uses) {
	for my $name (grep { $uses{$a}{$_} > ($declared{$a}{$_} // 0) } keys %{ $uses{$a} }) {
		next if $own{$a}{$name} || !$defs{$name};
		my @b = keys %{ $defs{$name} };
		$multi{$name} = join(' ', sort @b) if @b > 1;
		$edge{"$a $_"}{$name} = 1 for @b;
	}
}
print "defined in more than one module: $_ ($multi{$_})\n" for sort keys %multi;

# the strongly connected sets of modules (Tarjan)
my %succ;
for my $e (keys %edge) {
	my ($a, $b) = split ' ', $e;
	push @{ $succ{$a} }, $b;
}
my (%index, %low, %onstack, @stack, @scc);
my $idx = 0;
sub strong {
	my ($v) = @_;
	$index{$v} = $low{$v} = $idx++;
	push @stack, $v;
	$onstack{$v} = 1;
	for my $w (sort @{ $succ{$v} // [] }) {
		if (!exists $index{$w}) {
			strong($w);
			$low{$v} = $low{$w} if $low{$w} < $low{$v};
		} elsif ($onstack{$w}) {
			$low{$v} = $index{$w} if $index{$w} < $low{$v};
		}
	}
	if ($low{$v} == $index{$v}) {
		my @c;
		my $w;
		do {
			$w = pop @stack;
			$onstack{$w} = 0;
			push @c, $w;
		} while ($w ne $v);
		push @scc, [ sort @c ] if @c > 1;
	}
}
strong($_) for grep { !exists $index{$_} } sort keys %files;
@scc = sort { @$b <=> @$a || $a->[0] cmp $b->[0] } @scc;

sub names { join ' ', sort keys %{ $edge{"$_[0] $_[1]"} } }
sub lname { my $m = shift; ($layer_of{$m} // -1) + 1 . ' ' . ($layer_name[$layer_of{$m} // -1] // '?') }

print "layers (lowest first):\n";
for my $l (0 .. $#layer_name) {
	printf "  %d %s: %s\n", $l + 1, $layer_name[$l],
		join(' ', sort grep { $layer_of{$_} == $l } keys %layer_of);
}

my %found;    # "a -> b" -> 1: the edges of cycles and the upward ones
print "\ncycles (modules that use each other, with the names of each edge):\n";
my $k = 0;
for my $c (@scc) {
	my %in = map { $_ => 1 } @$c;
	printf "  cycle %d (%d modules): %s\n", ++$k, scalar @$c, join(' ', @$c);
	for my $a (@$c) {
		for my $b (sort grep { $in{$_} } @{ $succ{$a} // [] }) {
			printf "    %s -> %s: %s\n", $a, $b, names($a, $b);
			$found{"$a -> $b"} = 1;
		}
	}
}
print "  none\n" unless @scc;

print "\nupward dependencies (a module of a lower layer -> one of a higher):\n";
my $up = 0;
for my $a (sort keys %succ) {
	for my $b (sort @{ $succ{$a} }) {
		next unless defined $layer_of{$a} && defined $layer_of{$b} && $layer_of{$a} < $layer_of{$b};
		printf "  %s (%s) -> %s (%s): %s\n", $a, lname($a), $b, lname($b), names($a, $b);
		$found{"$a -> $b"} = 1;
		$up++;
	}
}
print "  none\n" unless $up;

if ($show_edges) {
	print "\nedges (module -> module: names):\n";
	for my $a (sort keys %succ) {
		printf "  %s -> %s: %s\n", $a, $_, names($a, $_) for sort @{ $succ{$a} };
	}
}

if ($write_allow) {
	open(my $af, '>', $allowfile) or die "$allowfile: $!\n";
	print $af <<'HEAD';
# The dependencies between modules of src/ that test/tools/layers.sh allows
# although they run up a layer of src/README or are part of a cycle: one
# "a -> b" a line.  Written by `test/tools/layers.sh --write-allow`; the
# build smoke test fails on any such dependency not listed here, and
# layers.sh reports the listed ones that are gone, to be deleted.
HEAD
	print $af "$_\n" for sort keys %found;
	close $af;
	printf "\n%s: %d dependencies written\n", $allowfile, scalar keys %found;
} else {
	my %allow;
	if (open(my $af, '<', $allowfile)) {
		while (<$af>) {
			s/#.*//;
			next unless /\S/;
			/^\s*(\S+)\s*->\s*(\S+)\s*$/ or die "$allowfile:$.: not \"a -> b\": $_";
			$allow{"$1 -> $2"} = 1;
		}
		close $af;
	}
	my @new = grep { !$allow{$_} } sort keys %found;
	my @gone = grep { !$found{$_} } sort keys %allow;
	print "\n";
	print "not allowed (not in $allowfile): $_\n" for @new;
	print "gone (delete it from $allowfile): $_\n" for @gone;
	printf "%s: %d allowed, %d not allowed, %d gone\n", $allowfile, scalar keys %allow, scalar @new, scalar @gone;
	$bad = 1 if @new;
}
printf "largest cycle: %d modules\n", @scc ? scalar @{ $scc[0] } : 0;
printf "%d cycles, %d upward dependencies\n", scalar @scc, $up;
exit($bad ? 1 : 0);
PERL
echo ""
echo "modules (a .c file with its header), from the source text and nm:"
perl -e "$modules_pl" src/README test/tools/layers.allow "$write_allow" "${edges:-0}" \
	< <(grep ' D$' <<<"$syms") || rc2=$?
rc2=${rc2:-0}
((rc2 <= 1)) || rc2=2
((rc2 <= rc)) || rc=$rc2

# The sizes that src/README sets: no C file over 1,000 lines and no
# function over 100 (counted as --functions counts them); a violation.
over_files=$(wc -l src/*.c | awk '$2 != "total" && $1 > 1000 { printf "  %s (%d lines)\n", $2, $1 }')
over_funcs=$(awk '
	FNR == 1 { fname = ""; start = 0 }
	/^[A-Za-z_][A-Za-z0-9_]*\(/ { fname = $0; sub(/\(.*/, "", fname); start = FNR; next }
	/^\{/ && fname != "" { inbody = 1; next }
	/^\}/ && inbody {
		if (FNR - start + 1 > 100)
			printf "  %s:%d %s (%d lines)\n", FILENAME, start, fname, FNR - start + 1
		inbody = 0; fname = ""
	}
' src/*.c)
if [[ -n $over_files || -n $over_funcs ]]; then
	echo "sizes: over src/README's limits (1,000 lines a C file, 100 a function):"
	[[ -z $over_files ]] || echo "$over_files"
	[[ -z $over_funcs ]] || echo "$over_funcs"
	rc=1
else
	echo "sizes: no C file over 1,000 lines, no function over 100"
fi

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
