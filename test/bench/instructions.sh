#!/bin/bash
#
# Instructions per statement that dbgate adds, counted by callgrind.
#
# Wall-clock overhead of a gate that costs well under 1 % cannot be told
# from the noise of a shared 2-core machine; instruction counts can: they
# are the same for the same binary and input whatever else runs.  This
# script starts a throwaway cluster under `valgrind --tool=callgrind
# --trace-children=yes`, runs N statements from one pgbench client as a
# plain role, and takes the backend's instruction total.  Two runs (N and
# 3N) per mode cancel out connection set-up, so
#
#     per statement = (total(3N) - total(N)) / 2N
#
# Modes: notloaded (no shared_preload_libraries), unassigned (dbgate loaded,
# role in no budget), budget (role in a budget that never fills), limits
# (the budget also has a statement_timeout and a lock_timeout), member (the
# role has no assignment of its own; a group it is a member of, two
# membership steps away, is in the budget; in every mode the role is a
# member of the same roles) and database (the role has no
# assignment; the database is in the budget).  1.2: parent (the budget has
# a parent that never fills: a two-level chain), rate (the budget has a
# max_rate and rate_burst that never limit), lifo (queue_order 'lifo'),
# 1.3: lifochild ('lifo' with a parent), reserved (a child with reserved
# slots of its parent that never fills),
# memory (max_memory_mb: every statement gets a grant, of nothing for this
# query), mincost (min_cost below the statement's cost, so it is still
# gated) and bypass (min_cost above it: the statement passes without a
# slot).  1.3: adapt (adapt 'on': every statement is counted for the
# controller, and one in a period runs its step), stimeout (a budget
# with a statement_timeout that never fires) and runaway (the same budget
# with runaway_after instead: its timer is armed and disarmed where the
# statement timer is, and the two are compared in a line of their own; its
# statements get query ids, jumbled by dbgate's post_parse_analyze hook),
# demote (runaway_after with runaway_action 'demote': the slot's release
# also closes its move word, demote.c);
# queryid (the budget of mode budget on a server with
# dbgate.max_quarantine = 100: compared with budget by the whole statement,
# which until query ids were computed per budget (queryid.c) paid
# PostgreSQL's jumbling of every statement) and qentry (the same with a
# quarantine entry in the budget for another query: every statement is
# jumbled and looked up); 1.3: keys (key_by 'setting:app.tenant', the
# session's app.tenant set by PGOPTIONS: every statement reads its key,
# holds its entry in the table of keys and counts in its key);
# memory and mincost are skipped, with a line that
# says so, when the installed dbgate shows no effect of them (a probe: a
# statement's memory grant in dbgate.backends, a cheap statement counted in
# bypassed).  Every mode after budget is also compared with budget:
# classification is cached per backend, so the statement path should cost
# the same whichever rule found the budget, and the 1.2 fields show what
# they add to it.
#
# Usage (as root, or as a user that can run PostgreSQL):
#     test/bench/instructions.sh [N] [mode ...]      (default 1000, all modes)
#     PROTOCOL=prepared test/bench/instructions.sh  (pgbench -M; default simple)
#     test/bench/instructions.sh 1000 budget parent rate lifo memory mincost
#
set -euo pipefail

N=${1:-1000}
shift || true
MODES=("$@")
[ ${#MODES[@]} -gt 0 ] || MODES=(notloaded unassigned budget limits member database parent rate lifo lifochild reserved memory mincost bypass adapt stimeout runaway demote queryid qentry keys)
for m in "${MODES[@]}"; do
	case $m in notloaded|unassigned|budget|limits|member|database|parent|rate|lifo|lifochild|reserved|memory|mincost|bypass|adapt|stimeout|runaway|demote|queryid|qentry|keys) ;;
	*) echo "unknown mode: $m" >&2; exit 2 ;; esac
done

PG_CONFIG=${PG_CONFIG:-pg_config}
PROTOCOL=${PROTOCOL:-simple}
case $PROTOCOL in simple|extended|prepared) ;; *) echo "PROTOCOL must be simple, extended or prepared" >&2; exit 2 ;; esac
BINDIR=$("$PG_CONFIG" --bindir)
PG_MAJOR=$("$PG_CONFIG" --version | sed -n 's/^PostgreSQL \([0-9][0-9]*\).*/\1/p')

if [ "$(id -u)" = 0 ]; then
	for p in valgrind "postgresql-$PG_MAJOR"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
			{ apt-get update -q && apt-get install -y -q "$p"; }
	done
	RUNAS=(runuser -u postgres --)
else
	RUNAS=()
fi
command -v valgrind >/dev/null || { echo "valgrind is needed" >&2; exit 77; }

WORK=$(mktemp -d /tmp/dbgate-instr.XXXXXX)
chmod 755 "$WORK"
[ "$(id -u)" = 0 ] && chown postgres "$WORK"
PORT=$((20000 + RANDOM % 20000))
cleanup() {
	"${RUNAS[@]}" "$BINDIR/pg_ctl" -D "$WORK/data" stop -m immediate >/dev/null 2>&1 || true
	[ -n "${KEEP_CG:-}" ] && cp -r "$WORK/cg" "$KEEP_CG" || true
	rm -rf "$WORK"
}
trap cleanup EXIT

as_pg() { "${RUNAS[@]}" "$@"; }
psql_su() { as_pg env PGOPTIONS="-c client_min_messages=warning" "$BINDIR/psql" -h "$WORK" -p "$PORT" -d postgres -qX -v ON_ERROR_STOP=1 "$@"; }

as_pg "$BINDIR/initdb" -D "$WORK/data" -A trust >/dev/null
cat >> "$WORK/data/postgresql.conf" <<EOF
port = $PORT
listen_addresses = ''
unix_socket_directories = '$WORK'
autovacuum = off
fsync = off
synchronous_commit = off
EOF
echo "select v from t where id = 1;" > "$WORK/q.sql"
chmod 644 "$WORK/q.sql"

# total instructions of the backend that served the pgbench client
run_mode() {
	local mode=$1 n=$2
	sed -i '/^shared_preload_libraries/d' "$WORK/data/postgresql.conf"
	[ "$mode" = notloaded ] ||
		echo "shared_preload_libraries = 'dbgate'" >> "$WORK/data/postgresql.conf"
	sed -i '/^dbgate.max_quarantine/d' "$WORK/data/postgresql.conf"
	case $mode in queryid|qentry)
		echo "dbgate.max_quarantine = 100" >> "$WORK/data/postgresql.conf" ;;
	esac
	# Set-up on a server started without valgrind: CREATE EXTENSION and
	# its update script would otherwise be a busier process than the
	# measured backend when statements are cheap (the prepared protocol).
	as_pg "$BINDIR/pg_ctl" -D "$WORK/data" -l "$WORK/setup.log" -w start >/dev/null
	psql_su <<'EOS'
CREATE TABLE IF NOT EXISTS t (id int PRIMARY KEY, v int);
INSERT INTO t VALUES (1, 1) ON CONFLICT DO NOTHING;
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'bench_instr') THEN
    CREATE ROLE bench_instr LOGIN;
  END IF;
END $$;
GRANT SELECT ON t TO bench_instr;
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'bench_group') THEN
    CREATE ROLE bench_group;
    CREATE ROLE bench_group_inner IN ROLE bench_group;
    CREATE ROLE bench_other;
  END IF;
END $$;
-- the same memberships in every mode (PostgreSQL's own privilege checks
-- look at them); only mode member assigns a group
GRANT bench_group_inner, bench_other TO bench_instr;
EOS
	if [ "$mode" != notloaded ]; then
		psql_su -c "CREATE EXTENSION IF NOT EXISTS dbgate"
		psql_su -c "SELECT dbgate.drop_budget(budget, true) FROM dbgate.budgets" >/dev/null
		case $mode in
		budget) psql_su -c "SELECT dbgate.create_budget('instr', 100, 0)" \
				-c "SELECT dbgate.assign_role('bench_instr', 'instr')" >/dev/null ;;
		limits) psql_su -c "SELECT dbgate.create_budget('instr', 100, 0, statement_timeout => '10min', lock_timeout => '1min')" \
				-c "SELECT dbgate.assign_role('bench_instr', 'instr')" >/dev/null ;;
		member) psql_su -c "SELECT dbgate.create_budget('instr', 100, 0)" \
				-c "SELECT dbgate.assign_role('bench_group', 'instr')" >/dev/null ;;
		database) psql_su -c "SELECT dbgate.create_budget('instr', 100, 0)" \
				-c "SELECT dbgate.assign_database('postgres', 'instr')" >/dev/null ;;
		parent) psql_su -c "SELECT dbgate.create_budget('instr_top', 100, 0)" \
				-c "SELECT dbgate.create_budget('instr', 100, 0, parent => 'instr_top')" \
				-c "SELECT dbgate.assign_role('bench_instr', 'instr')" >/dev/null ;;
		rate) psql_su -c "SELECT dbgate.create_budget('instr', 100, 0, max_rate => 1000000, rate_burst => 1000000)" \
				-c "SELECT dbgate.assign_role('bench_instr', 'instr')" >/dev/null ;;
		lifo) psql_su -c "SELECT dbgate.create_budget('instr', 100, 0, queue_order => 'lifo')" \
				-c "SELECT dbgate.assign_role('bench_instr', 'instr')" >/dev/null ;;
		lifochild) psql_su -c "SELECT dbgate.create_budget('instr_top', 100, 0)" \
				-c "SELECT dbgate.create_budget('instr', 100, 0, parent => 'instr_top', queue_order => 'lifo')" \
				-c "SELECT dbgate.assign_role('bench_instr', 'instr')" >/dev/null ;;
		reserved) psql_su -c "SELECT dbgate.create_budget('instr_top', 100, 0)" \
				-c "SELECT dbgate.create_budget('instr', 100, 0, parent => 'instr_top', reserved => 1)" \
				-c "SELECT dbgate.assign_role('bench_instr', 'instr')" >/dev/null ;;
		memory) psql_su -c "SELECT dbgate.create_budget('instr', 100, 0, max_memory_mb => 1024)" \
				-c "SELECT dbgate.assign_role('bench_instr', 'instr')" >/dev/null ;;
		mincost) psql_su -c "SELECT dbgate.create_budget('instr', 100, 0, min_cost => 1)" \
				-c "SELECT dbgate.assign_role('bench_instr', 'instr')" >/dev/null ;;
		bypass) psql_su -c "SELECT dbgate.create_budget('instr', 100, 0, min_cost => 100)" \
				-c "SELECT dbgate.assign_role('bench_instr', 'instr')" >/dev/null ;;
		adapt) psql_su -c "SELECT dbgate.create_budget('instr', 100, 0, adapt => 'on')" \
				-c "SELECT dbgate.assign_role('bench_instr', 'instr')" >/dev/null ;;
		stimeout) psql_su -c "SELECT dbgate.create_budget('instr', 100, 0, statement_timeout => '10min')" \
				-c "SELECT dbgate.assign_role('bench_instr', 'instr')" >/dev/null ;;
		runaway) psql_su -c "SELECT dbgate.create_budget('instr', 100, 0, runaway_after => '10min')" \
				-c "SELECT dbgate.assign_role('bench_instr', 'instr')" >/dev/null ;;
		demote) psql_su -c "SELECT dbgate.create_budget('instr_slow', 1, 0)" \
				-c "SELECT dbgate.create_budget('instr', 100, 0, runaway_after => '10min', runaway_action => 'demote', runaway_budget => 'instr_slow')" \
				-c "SELECT dbgate.assign_role('bench_instr', 'instr')" >/dev/null ;;
		queryid) psql_su -c "SELECT dbgate.create_budget('instr', 100, 0)" \
				-c "SELECT dbgate.assign_role('bench_instr', 'instr')" >/dev/null ;;
		# the session's app.tenant is its key (set by PGOPTIONS below)
		keys) psql_su -c "SELECT dbgate.create_budget('instr', 100, 0, key_by => 'setting:app.tenant')" \
				-c "SELECT dbgate.assign_role('bench_instr', 'instr')" >/dev/null ;;
		# (kept across the clean restart into valgrind)
		qentry) psql_su -c "SELECT dbgate.create_budget('instr', 100, 0)" \
				-c "SELECT dbgate.assign_role('bench_instr', 'instr')" \
				-c "SELECT dbgate.quarantine_add('instr', 1, '1 day')" >/dev/null ;;
		esac
	fi
	as_pg "$BINDIR/pg_ctl" -D "$WORK/data" stop -m fast -w >/dev/null
	rm -rf "$WORK/cg"
	as_pg mkdir -p "$WORK/cg"
	as_pg valgrind --tool=callgrind --trace-children=yes \
		--callgrind-out-file="$WORK/cg/cg.%p" \
		"$BINDIR/postgres" -D "$WORK/data" > "$WORK/pm.log" 2>&1 &
	for _ in $(seq 1 180); do
		as_pg "$BINDIR/pg_isready" -h "$WORK" -p "$PORT" -q && break
		sleep 1
	done
	local opts=
	[ "$mode" = keys ] && opts="-c app.tenant=tenant1"
	as_pg env PGOPTIONS="$opts" "$BINDIR/pgbench" -h "$WORK" -p "$PORT" -U bench_instr -n -c 1 \
		-M "$PROTOCOL" -t "$n" -f "$WORK/q.sql" postgres >/dev/null
	as_pg "$BINDIR/pg_ctl" -D "$WORK/data" stop -m fast -w >/dev/null 2>&1 || true
	wait || true
	# the busiest process is the pgbench client's backend
	for f in "$WORK"/cg/cg.*; do
		grep -m1 '^summary:' "$f" | awk '{print $2}'
	done | sort -n | tail -1
}

# The callgrind file of the busiest process of the last run.
busiest_cg() {
	for c in "$WORK"/cg/cg.*; do
		echo "$(grep -m1 '^summary:' "$c" | awk '{print $2}') $c"
	done | sort -n | tail -1 | awk '{print $2}'
}

# Instructions per statement spent in dbgate's hooks, from the callgrind
# file of the busiest process of the last run (N statements): the inclusive
# cost of each hook minus that of the PostgreSQL function it wraps, plus the
# transaction callback, the post_parse_analyze hook (query ids: the
# jumbling it calls for the statements of budgets that need them counts
# here) and the object access hook (called for every
# function that an executor run or the planner prepares, inside the
# wrapped functions).  Exact, unlike the difference of two runs, which
# also carries PostgreSQL's own time-dependent work (statistics flushes).
# callgrind_annotate lists the code of a hook that was inlined from a
# header under that header's name: this count (in-hooks, as recorded since
# 1.0) leaves it out, and so moves when an inline function moves from one
# header to another, or the compiler's line table gives an instruction to
# another file, with no change of the code.
# callgrind_annotate runs in $WORK, where no dbgate was built: it strips
# the current directory from the file names of functions but not from
# those of call targets, so in the tree the installed dbgate.so was built
# in (its debug information names the sources with that tree's path) each
# hook is listed twice, and the entry matched below lacks the code inlined
# from headers (a budget at 1.2: 691 counted there, 728 anywhere else).
hook_cost() { # statements
	local f
	f=$(busiest_cg)
	(cd "$WORK" && callgrind_annotate --inclusive=yes --auto=no --threshold=100 "$f") 2>/dev/null |
		grep -v '=>' | awk -v n="$1" '
		function num(s) { gsub(",", "", s); return s + 0 }
		/:dbgate_planner /        { t += num($1) } /:standard_planner /        { t -= num($1) }
		/:dbgate_ExecutorStart /  { t += num($1) } /:standard_ExecutorStart /  { t -= num($1) }
		/:dbgate_ExecutorRun /    { t += num($1) } /:standard_ExecutorRun /    { t -= num($1) }
		/:dbgate_ExecutorFinish / { t += num($1) } /:standard_ExecutorFinish / { t -= num($1) }
		/:dbgate_ExecutorEnd /    { t += num($1) } /:standard_ExecutorEnd /    { t -= num($1) }
		/:dbgate_xact_callback /  { t += num($1) }
		/:dbgate_post_parse_analyze / { t += num($1) }
		/:dbgate_object_access /  { t += num($1) }
		END { printf "%d", t / n }'
}

# The same for the whole hooks: every instruction callgrind counted in their
# functions, whichever file it was inlined from (read from the callgrind file
# itself: names are compressed as "fn=(id) name" the first time, "fn=(id)"
# after; a cost line is "position cost", the one after "calls=" the
# inclusive cost of that call).  Compare this column when code moves
# between files.
hook_cost_whole() { # statements
	awk -v n="$1" '
		function fname(s,    id, rest) {
			if (match(s, /^\([0-9]+\)/)) {
				id = substr(s, 2, RLENGTH - 2)
				rest = substr(s, RLENGTH + 1)
				sub(/^ /, "", rest)
				if (rest != "")
					names[id] = rest
				return names[id]
			}
			return s
		}
		/^fn=/ { cur = fname(substr($0, 4)); next }
		/^cfn=/ { fname(substr($0, 5)); next }
		/^calls=/ { next }
		/^[0-9+*-]/ { if (cur != "") inc[cur] += $2; next }
		END {
			t = inc["dbgate_planner"] + inc["dbgate_ExecutorStart"] + inc["dbgate_ExecutorRun"]
			t += inc["dbgate_ExecutorFinish"] + inc["dbgate_ExecutorEnd"] + inc["dbgate_xact_callback"]
			t += inc["dbgate_post_parse_analyze"] + inc["dbgate_object_access"]
			t -= inc["standard_planner"] + inc["standard_ExecutorStart"] + inc["standard_ExecutorRun"]
			t -= inc["standard_ExecutorFinish"] + inc["standard_ExecutorEnd"]
			printf "%d", t / n
		}' "$(busiest_cg)"
}

# Does the installed dbgate act on max_memory_mb / min_cost?  On a server
# started without valgrind, as a role of its own in a budget of its own:
# memory: the statement's own grant shows in dbgate.backends (its plan has
# a Sort, the view's ORDER BY); mincost: a statement below min_cost is
# counted in bypassed.  Prints yes or no.
probe() { # memory | mincost
	local r
	sed -i '/^shared_preload_libraries/d' "$WORK/data/postgresql.conf"
	echo "shared_preload_libraries = 'dbgate'" >> "$WORK/data/postgresql.conf"
	as_pg "$BINDIR/pg_ctl" -D "$WORK/data" -l "$WORK/setup.log" -w start >/dev/null
	psql_su -c "CREATE EXTENSION IF NOT EXISTS dbgate" \
		-c "DROP ROLE IF EXISTS bench_probe" -c "CREATE ROLE bench_probe LOGIN IN ROLE pg_monitor" \
		-c "SELECT dbgate.drop_budget(budget, true) FROM dbgate.budgets" >/dev/null
	case $1 in
	memory)
		psql_su -c "SELECT dbgate.create_budget('probe', 100, 0, max_memory_mb => 1024)" \
			-c "SELECT dbgate.assign_role('bench_probe', 'probe')" >/dev/null
		r=$(psql_su -U bench_probe -At -c "SELECT coalesce(max(memory_mb), 0) > 0 FROM dbgate.backends WHERE pid = pg_backend_pid()") ;;
	mincost)
		psql_su -c "SELECT dbgate.create_budget('probe', 100, 0, min_cost => 1000000000)" \
			-c "SELECT dbgate.assign_role('bench_probe', 'probe')" >/dev/null
		psql_su -U bench_probe -At -c "SELECT 1" >/dev/null
		r=$(psql_su -At -c "SELECT bypassed > 0 FROM dbgate.status WHERE budget = 'probe'") ;;
	esac
	psql_su -c "SELECT dbgate.drop_budget('probe', true)" -c "DROP ROLE bench_probe" >/dev/null
	as_pg "$BINDIR/pg_ctl" -D "$WORK/data" stop -m fast -w >/dev/null
	[ "$r" = t ] && echo yes || echo no
}

echo "protocol: $PROTOCOL, $N and $((3 * N)) statements per mode"
printf '%-11s %14s %10s %9s %9s %9s\n' mode instr/stmt added added% in-hooks whole
base=
declare -A HOOKS PER
pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (a - b) * 100 / b }'; }
for mode in "${MODES[@]}"; do
	if [ "$mode" = memory ] || [ "$mode" = mincost ] || [ "$mode" = bypass ]; then
		if [ "$(probe "${mode/bypass/mincost}")" != yes ]; then
			printf '%-11s skipped: the installed dbgate shows no effect of %s\n' "$mode" \
				"$([ "$mode" = memory ] && echo max_memory_mb || echo min_cost)"
			continue
		fi
	fi
	a=$(run_mode "$mode" "$N")
	b=$(run_mode "$mode" $((3 * N)))
	per=$(( (b - a) / (2 * N) ))
	PER[$mode]=$per
	hooks=- whole=-
	if [ "$mode" != notloaded ]; then
		hooks=$(hook_cost $((3 * N))); HOOKS[$mode]=$hooks
		whole=$(hook_cost_whole $((3 * N)))
	fi
	if [ -z "$base" ] && [ "$mode" = notloaded ]; then base=$per; fi
	if [ -n "$base" ]; then
		printf '%-11s %14d %10d %8.2f%% %9s %9s\n' "$mode" "$per" $((per - base)) \
			"$(pct "$per" "$base")" "$hooks" "$whole"
	else
		printf '%-11s %14d %10s %9s %9s %9s\n' "$mode" "$per" - - "$hooks" "$whole"
	fi
done
# every mode that has a budget against the plain budget: classification by
# another rule (the one-time walk of the first statement included, spread
# over the run) and the 1.2 fields
for mode in limits member database parent rate lifo lifochild reserved memory mincost stimeout runaway demote; do
	[ -n "${HOOKS[budget]:-}" ] && [ -n "${HOOKS[$mode]:-}" ] || continue
	printf '%-11s in hooks %d against budget %d: %+d instructions per statement (%+.1f%%)\n' "$mode" \
		"${HOOKS[$mode]}" "${HOOKS[budget]}" $((HOOKS[$mode] - HOOKS[budget])) \
		"$(pct "${HOOKS[$mode]}" "${HOOKS[budget]}")"
done
# query ids: the whole statement against the same budget without them; a
# quarantine entry: the lookup in the hooks
if [ -n "${PER[budget]:-}" ] && [ -n "${PER[queryid]:-}" ]; then
	printf '%-11s whole statement %d against budget %d: %+d instructions per statement (%+.1f%%)\n' queryid \
		"${PER[queryid]}" "${PER[budget]}" $((PER[queryid] - PER[budget])) \
		"$(pct "${PER[queryid]}" "${PER[budget]}")"
fi
if [ -n "${HOOKS[queryid]:-}" ] && [ -n "${HOOKS[qentry]:-}" ]; then
	printf '%-11s in hooks %d against queryid %d: %+d instructions per statement (%+.1f%%)\n' qentry \
		"${HOOKS[qentry]}" "${HOOKS[queryid]}" $((HOOKS[qentry] - HOOKS[queryid])) \
		"$(pct "${HOOKS[qentry]}" "${HOOKS[queryid]}")"
fi
# runaway_after against statement_timeout: the same timer work
if [ -n "${HOOKS[stimeout]:-}" ] && [ -n "${HOOKS[runaway]:-}" ]; then
	printf '%-11s in hooks %d against stimeout %d: %+d instructions per statement (%+.1f%%)\n' runaway \
		"${HOOKS[runaway]}" "${HOOKS[stimeout]}" $((HOOKS[runaway] - HOOKS[stimeout])) \
		"$(pct "${HOOKS[runaway]}" "${HOOKS[stimeout]}")"
fi
if [ -n "${HOOKS[stimeout]:-}" ] && [ -n "${HOOKS[demote]:-}" ]; then
	printf '%-11s in hooks %d against stimeout %d: %+d instructions per statement (%+.1f%%)\n' demote \
		"${HOOKS[demote]}" "${HOOKS[stimeout]}" $((HOOKS[demote] - HOOKS[stimeout])) \
		"$(pct "${HOOKS[demote]}" "${HOOKS[stimeout]}")"
fi
