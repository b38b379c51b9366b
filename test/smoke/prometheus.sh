#!/usr/bin/env bash
# Prometheus: contrib/prometheus/queries.yaml with Debian's
# prometheus-postgres-exporter.
#
# Starts a throwaway cluster with dbgate, a monitoring role that is only a
# member of pg_monitor, and the exporter of the Debian package connected as
# that role with --extend.query-path=contrib/prometheus/queries.yaml.  A
# workload then queues, rejects at once (queue full), times out in the
# queue, cancels a queued statement, runs a shadow-mode budget over its
# limit and ends a session idle in a transaction.  /metrics is scraped with
# curl twice: during a standing queue (queued, active and oldest_wait
# against the view read before and after) and when everything has ended,
# where every metric must equal its column of dbgate.status (durations in
# seconds) for every budget, carry the TYPE of its column (counter or
# gauge), and every column of dbgate.status must have a metric.  With
# dbgate 1.2's views, the histogram dbgate_queue_wait_seconds must equal
# dbgate.wait_histogram bucket by bucket, with _count = admitted and _sum =
# wait_time_total.
#
# While the extension has no 1.2 columns yet, the 1.0/1.1 metrics are
# checked as above and the 1.2 ones must be NaN (the queries file reads them
# through to_jsonb so that it works on older catalogs); the script then
# exits 77 (skipped) and says what it could not check.
# Exit 0 = pass, 77 = skipped, anything else = fail.
set -euo pipefail

SRC=${DBGATE_SRC:?run from test/check.sh}
WORK=${DBGATE_WORK:?run from test/check.sh}
BINDIR=${BINDIR:?run from test/check.sh}
QUERIES=$SRC/contrib/prometheus/queries.yaml
EXPORTER=${DBGATE_EXPORTER:-/usr/bin/prometheus-postgres-exporter}

skip() {
	echo "prometheus smoke skipped: $*"
	exit 77
}
fail() {
	echo "prometheus smoke FAILED: $*"
	if [[ -s $WORK/exporter.log ]]; then
		echo "--- exporter log (last 20 lines):"
		tail -n 20 "$WORK/exporter.log"
	fi
	if [[ -s $WORK/server.log ]]; then
		echo "--- server log (last 20 lines):"
		tail -n 20 "$WORK/server.log"
	fi
	exit 1
}
[[ -x $EXPORTER ]] || skip "$EXPORTER not found (package prometheus-postgres-exporter)"
command -v curl >/dev/null || skip "curl is not installed"
[[ -f $QUERIES ]] || fail "$QUERIES not found"

EXPORTER_PID='' BG=()
cleanup() {
	local p
	set +e
	for p in ${BG[@]+"${BG[@]}"}; do kill "$p" 2>/dev/null; done
	[[ -n $EXPORTER_PID ]] && kill "$EXPORTER_PID" 2>/dev/null && wait "$EXPORTER_PID" 2>/dev/null
	[[ -f $WORK/data/postmaster.pid ]] &&
		"$BINDIR/pg_ctl" -D "$WORK/data" -m immediate -w stop >/dev/null 2>&1
}
trap cleanup EXIT

# --- the cluster --------------------------------------------------------------
cd "$WORK"
PORT=5432 # Unix socket in $WORK only: no TCP port to collide with
"$BINDIR/initdb" -D "$WORK/data" -U postgres -A trust --no-locale -E UTF8 \
	>"$WORK/initdb.log" 2>&1 || fail "initdb: $(tail -n 5 "$WORK/initdb.log")"
cat >>"$WORK/data/postgresql.conf" <<EOF
shared_preload_libraries = 'dbgate'
port = $PORT
listen_addresses = ''
unix_socket_directories = '$WORK'
EOF
"$BINDIR/pg_ctl" -D "$WORK/data" -l "$WORK/server.log" -w start >/dev/null ||
	fail "server start"

psql_as() { # ROLE ARGS...
	local role=$1
	shift
	"$BINDIR/psql" -X -q -h "$WORK" -p "$PORT" -U "$role" -d postgres "$@"
}
admin() { psql_as postgres -v ON_ERROR_STOP=1 "$@"; }
value() { admin -At -c "$1"; }
wait_for() { # SQL [SECONDS]: poll until SQL returns true
	local i
	for ((i = 0; i < ${2:-20} * 20; i++)); do
		[[ $(value "$1") == t ]] && return 0
		sleep 0.05
	done
	fail "timed out waiting for: $1"
}

admin <<'EOF' || fail "setup"
CREATE EXTENSION dbgate;
CREATE ROLE dbgate_monitor LOGIN IN ROLE pg_monitor;
CREATE ROLE app_gate LOGIN;
CREATE ROLE app_short LOGIN;
CREATE ROLE app_shadow LOGIN;
CREATE ROLE app_idle LOGIN;
\o /dev/null
SELECT dbgate.create_budget('gate', max_active => 1, max_queued => 2);
DO $$ BEGIN PERFORM dbgate.alter_budget('gate', adapt => 'shadow'); EXCEPTION WHEN undefined_function THEN NULL; END $$;
SELECT dbgate.create_budget('short', max_active => 1, max_queued => 1,
                            queue_timeout => '200ms');
SELECT dbgate.create_budget('shadow', max_active => 1, enforce => false);
SELECT dbgate.create_budget('idle', max_active => 2, scope => 'transaction',
                            idle_in_transaction_timeout => '300ms');
SELECT dbgate.create_budget('unused', max_active => 5, max_queued => 7,
                            queue_timeout => '10s');
SELECT dbgate.assign_role('app_gate', 'gate');
SELECT dbgate.assign_role('app_short', 'short');
SELECT dbgate.assign_role('app_shadow', 'shadow');
SELECT dbgate.assign_role('app_idle', 'idle');
-- 1.3 keys: "keyed" for a key that holds the slot and one that waits;
-- "many" for more keys than dbgate_key shows (key_max_rate 0.01: a key's
-- entry lives 100 s after its statement, until its bucket is full again)
CREATE ROLE app_keyed LOGIN;
CREATE ROLE app_many LOGIN;
DO $$ BEGIN
  PERFORM dbgate.create_budget('keyed', max_active => 1, max_queued => 4,
                               key_by => 'setting:app.tenant');
  PERFORM dbgate.create_budget('many', max_active => 5, key_by => 'setting:app.tenant',
                               key_max_rate => 0.01);
  PERFORM dbgate.assign_role('app_keyed', 'keyed');
  PERFORM dbgate.assign_role('app_many', 'many');
EXCEPTION WHEN undefined_function THEN NULL; END $$;
EOF
# The monitoring role is no superuser and a member of pg_monitor only.
[[ $(value "SELECT rolsuper || ' ' || (SELECT string_agg(roleid::regrole::text, ',')
	FROM pg_auth_members WHERE member = r.oid) FROM pg_roles r
	WHERE rolname = 'dbgate_monitor'") == "false pg_monitor" ]] ||
	fail "dbgate_monitor is not exactly a member of pg_monitor"

# Which parts of the 1.2 surface exist
has_col() {
	value "SELECT EXISTS (SELECT FROM information_schema.columns
		WHERE table_schema = 'dbgate' AND table_name = '$1' AND column_name = '$2')"
}
missing=()
for c in oldest_wait admitted_overdue rate_limited bypassed memory_mb_active; do
	[[ $(has_col status "$c") == t ]] || missing+=("dbgate.status.$c")
done
[[ $(has_col budgets max_memory_mb) == t ]] || missing+=("dbgate.budgets.max_memory_mb")
has_histogram=$(value "SELECT to_regclass('dbgate.wait_histogram') IS NOT NULL")
[[ $has_histogram == t ]] || missing+=("dbgate.wait_histogram")
has_keys=$(value "SELECT to_regclass('dbgate.keys') IS NOT NULL
	AND EXISTS (SELECT FROM dbgate.budgets WHERE budget = 'many')")
[[ $has_keys == t ]] || missing+=("dbgate.keys")

# --- the exporter -------------------------------------------------------------
free_port() {
	local p
	for ((p = 59187; p < 59287; p++)); do
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	return 1
}
EPORT=$(free_port) || fail "no free port in 59187-59286"
echo "exporter: $("$EXPORTER" --version 2>&1 | head -n 1)"
DATA_SOURCE_NAME="host=$WORK port=$PORT user=dbgate_monitor dbname=postgres sslmode=disable" \
	"$EXPORTER" --web.listen-address="127.0.0.1:$EPORT" \
	--extend.query-path="$QUERIES" \
	--disable-default-metrics --disable-settings-metrics \
	>"$WORK/exporter.log" 2>&1 &
EXPORTER_PID=$!
scrape() { # FILE
	curl -sf --max-time 10 "http://127.0.0.1:$EPORT/metrics" -o "$1"
}
for ((i = 0; i < 100; i++)); do
	scrape "$WORK/first.prom" && break
	kill -0 "$EXPORTER_PID" 2>/dev/null || fail "the exporter exited"
	sleep 0.1
done
[[ -s $WORK/first.prom ]] || fail "no answer on 127.0.0.1:$EPORT/metrics"
grep -q '^pg_up\b.* 1$' "$WORK/first.prom" ||
	fail "pg_up is not 1: the exporter cannot connect as dbgate_monitor"

# prom_tsv FILE: the dbgate samples of a scrape as "name budget le value"
# (tab-separated, \N for no label) and the TYPE lines as "name type".
prom_tsv() {
	awk -v types="$1.types" '
		/^# TYPE dbgate_/ { print $3 "\t" $4 > types; next }
		/^dbgate_/ {
			name = $0; sub(/[{ ].*/, "", name)
			budget = "\\N"; le = "\\N"
			if (match($0, /budget="[^"]*"/)) budget = substr($0, RSTART + 8, RLENGTH - 9)
			if (match($0, /le="[^"]*"/)) le = substr($0, RSTART + 4, RLENGTH - 5)
			v = $NF
			if (v == "+Inf") v = "Infinity"; else if (v == "-Inf") v = "-Infinity"
			if (le == "+Inf") le = "Infinity"
			print name "\t" budget "\t" le "\t" v
		}
	' "$1" >"$1.tsv"
	touch "$1.types"
	# dbgate_key_*: "name budget key overflow value"
	awk '
		/^dbgate_key_/ {
			name = $0; sub(/[{ ].*/, "", name)
			budget = key = ov = "\\N"
			if (match($0, /budget="[^"]*"/)) budget = substr($0, RSTART + 8, RLENGTH - 9)
			if (match($0, /[{,]key="[^"]*"/)) key = substr($0, RSTART + 6, RLENGTH - 7)
			if (match($0, /overflow="[^"]*"/)) ov = substr($0, RSTART + 10, RLENGTH - 11)
			print name "\t" budget "\t" key "\t" ov "\t" $NF
		}
	' "$1" >"$1.keys.tsv"
}

# --- a standing queue ---------------------------------------------------------
bg() { # ROLE SQL: a session in the background
	psql_as "$1" -c "$2" >/dev/null 2>&1 &
	BG+=($!)
}
bg app_gate "SELECT pg_sleep(60)"
wait_for "SELECT active = 1 FROM dbgate.status WHERE budget = 'gate'"
bg app_gate "SELECT 'second'"
wait_for "SELECT queued = 1 FROM dbgate.status WHERE budget = 'gate'"
bg app_gate "SELECT 'third'"
wait_for "SELECT queued = 2 FROM dbgate.status WHERE budget = 'gate'"
out=$(psql_as app_gate -c "SELECT 'fourth'" 2>&1) && fail "a statement over max_queued ran: $out"
grep -q 'is full' <<<"$out" || fail "expected 'budget \"gate\" is full', got: $out"

# Keys (1.3): t1 holds keyed's slot, t2 waits; 25 keys of "many" stay live
if [[ $has_keys == t ]]; then
	PGOPTIONS="-c app.tenant=t1" bg app_keyed "SELECT pg_sleep(60)"
	wait_for "SELECT active = 1 FROM dbgate.status WHERE budget = 'keyed'"
	PGOPTIONS="-c app.tenant=t2" bg app_keyed "SELECT 'waits'"
	wait_for "SELECT queued = 1 FROM dbgate.status WHERE budget = 'keyed'"
	for ((i = 1; i <= 25; i++)); do
		printf "SET app.tenant = 'm%02d';\nSELECT 1;\n" "$i"
	done | psql_as app_many -v ON_ERROR_STOP=1 >/dev/null || fail "the statements of 25 keys"
	[[ $(value "SELECT keys FROM dbgate.status WHERE budget = 'many'") == 25 ]] ||
		fail "budget many does not have 25 live keys: $(value "SELECT keys FROM dbgate.status WHERE budget = 'many'")"
fi

ow="coalesce((to_jsonb(s) ->> 'oldest_wait')::float8 / 1000, 'NaN')"
before=$(value "SELECT $ow FROM dbgate.status s WHERE budget = 'gate'")
scrape "$WORK/standing.prom" || fail "scrape during the standing queue"
after=$(value "SELECT $ow FROM dbgate.status s WHERE budget = 'gate'")
prom_tsv "$WORK/standing.prom"
admin -At -v before="$before" -v after="$after" -v f="$WORK/standing.prom.tsv" >"$WORK/standing.check" <<'EOF' ||
CREATE TEMP TABLE scraped (name text, budget text, le text, value float8);
COPY scraped FROM :'f';
SELECT format('%s{budget="gate"}: %s, expected %s', w.name,
              coalesce(s.value::text, 'missing'), w.want)
FROM (VALUES ('dbgate_active', 1::float8), ('dbgate_queued', 2),
             ('dbgate_max_queued', 2)) AS w(name, want)
     LEFT JOIN scraped s ON s.name = w.name AND s.budget = 'gate'
WHERE s.value IS DISTINCT FROM w.want;
SELECT format('dbgate_oldest_wait_seconds{budget="gate"}: %s, not between the view''s %s and %s',
              value, :'before', :'after')
FROM scraped
WHERE name = 'dbgate_oldest_wait_seconds' AND budget = 'gate'
  AND NOT (:'before'::float8 = 'NaN' AND value = 'NaN')
  AND NOT (value >= :'before'::float8 AND value <= :'after'::float8 AND value > 0);
EOF
	fail "checking the standing-queue scrape"
[[ -s $WORK/standing.check ]] && fail "during a standing queue: $(cat "$WORK/standing.check")"
echo "standing queue: active 1, queued 2, oldest_wait between the view's $before and $after s"

# dbgate_key: the 20 busiest keys, each sample equal to its row of dbgate.keys
if [[ $has_keys == t ]]; then
	admin -At -v f="$WORK/standing.prom.keys.tsv" >"$WORK/keys.check" <<'EOF' ||
CREATE TEMP TABLE scraped (name text, budget text, key text, overflow text, value float8);
COPY scraped FROM :'f';
SELECT format('dbgate_key_active: %s samples, expected 20 (the busiest keys of %s)',
              count(*), (SELECT count(*) FROM dbgate.keys))
FROM scraped WHERE name = 'dbgate_key_active' HAVING count(*) <> 20;
SELECT format('dbgate_key_%s{budget="keyed",key="%s"}: %s, expected 1', w.m, w.k,
              coalesce(s.value::text, 'missing'))
FROM (VALUES ('active', 't1'), ('queued', 't2')) AS w(m, k)
     LEFT JOIN scraped s ON s.name = 'dbgate_key_' || w.m AND s.budget = 'keyed' AND s.key = w.k
WHERE s.value IS DISTINCT FROM 1;
SELECT format('%s{budget="%s",key="%s"}: %s, the view says %s', s.name, s.budget, s.key, s.value,
              coalesce(v.value::text, 'no row'))
FROM scraped s
     LEFT JOIN (SELECT k.budget, coalesce(k.key, '(overflow)') AS key, c.name, c.value
                FROM dbgate.keys k,
                     LATERAL (VALUES ('dbgate_key_active', k.active::float8),
                                     ('dbgate_key_queued', k.queued),
                                     ('dbgate_key_max_active', k.max_active),
                                     ('dbgate_key_max_queued', k.max_queued),
                                     ('dbgate_key_max_rate', k.max_rate),
                                     ('dbgate_key_admitted_total', k.admitted),
                                     ('dbgate_key_rejected_total', k.rejected),
                                     ('dbgate_key_rate_limited_total', k.rate_limited),
                                     ('dbgate_key_since_timestamp_seconds',
                                      extract(epoch FROM k.since)::float8)) AS c(name, value)) v
       ON v.budget = s.budget AND v.key = s.key AND v.name = s.name
WHERE v.value IS NULL OR abs(s.value - v.value) > 1e-6 * greatest(1, abs(v.value));
EOF
		fail "checking the keys of the standing-queue scrape"
	[[ -s $WORK/keys.check ]] && fail "dbgate_key: $(cat "$WORK/keys.check")"
	echo "dbgate_key: the 20 busiest of $(value "SELECT count(*) FROM dbgate.keys") keys, equal to dbgate.keys"
	value "SELECT pg_cancel_backend(pid) FROM dbgate.backends WHERE budget = 'keyed'" >/dev/null
fi

# Cancel the last queued statement (canceled_waiting)
value "SELECT pg_cancel_backend(pid) FROM dbgate.backends
	WHERE budget = 'gate' AND queue_position = 2" >/dev/null
wait_for "SELECT queued = 1 AND canceled_waiting = 1 FROM dbgate.status WHERE budget = 'gate'"

# A queue timeout (rejected_timeout) in budget "short"
bg app_short "SELECT pg_sleep(60)"
wait_for "SELECT active = 1 FROM dbgate.status WHERE budget = 'short'"
out=$(psql_as app_short -c "SELECT 'late'" 2>&1) && fail "a statement ran past queue_timeout: $out"
[[ $(value "SELECT rejected_timeout FROM dbgate.status WHERE budget = 'short'") == 1 ]] ||
	fail "no queue timeout counted: $out"
value "SELECT pg_cancel_backend(pid) FROM dbgate.backends WHERE budget = 'short'" >/dev/null

# Shadow mode over its limit (would_* counters)
bg app_shadow "SELECT pg_sleep(60)"
wait_for "SELECT active = 1 FROM dbgate.status WHERE budget = 'shadow'"
psql_as app_shadow -c "SELECT 'shadowed'" >/dev/null 2>&1 ||
	fail "a shadow-mode budget refused a statement"
value "SELECT pg_cancel_backend(pid) FROM dbgate.backends WHERE budget = 'shadow'" >/dev/null

# A session idle in a transaction that holds a slot (terminated_idle)
psql_as app_idle -f - >/dev/null 2>&1 <<'EOF' || true
BEGIN;
SELECT 1;
\! sleep 1.5
SELECT 2;
EOF
wait_for "SELECT terminated_idle = 1 FROM dbgate.status WHERE budget = 'idle'"

# Let the queued statement in: admitted after waiting
value "SELECT pg_cancel_backend(pid) FROM dbgate.backends
	WHERE budget = 'gate' AND state = 'active'" >/dev/null
for p in "${BG[@]}"; do wait "$p" 2>/dev/null || true; done
BG=()
wait_for "SELECT bool_and(active = 0 AND queued = 0) FROM dbgate.status"
wait_for "SELECT admitted_after_wait = 1 FROM dbgate.status WHERE budget = 'gate'"

# --- every metric against the view --------------------------------------------
scrape "$WORK/final.prom" || fail "scrape after the workload"
prom_tsv "$WORK/final.prom"
admin -v f="$WORK/final.prom.tsv" -v t="$WORK/final.prom.types" \
	-v hist="$has_histogram" -At >"$WORK/final.check" 2>&1 <<'EOF' ||
\set ON_ERROR_STOP on
CREATE TEMP TABLE scraped (name text, budget text, le text, value float8);
CREATE TEMP TABLE types (name text, type text);
COPY scraped FROM :'f';
COPY types FROM :'t';
-- metric, the view and column it shows, its TYPE, the factor from the
-- column's unit
CREATE TEMP TABLE mapping (metric text, view text, col text, type text, factor float8);
INSERT INTO mapping VALUES
  ('dbgate_max_active', 'status', 'max_active', 'gauge', 1),
  ('dbgate_active', 'status', 'active', 'gauge', 1),
  ('dbgate_max_queued', 'status', 'max_queued', 'gauge', 1),
  ('dbgate_queued', 'status', 'queued', 'gauge', 1),
  ('dbgate_peak_active', 'status', 'peak_active', 'gauge', 1),
  ('dbgate_peak_queued', 'status', 'peak_queued', 'gauge', 1),
  ('dbgate_admitted_total', 'status', 'admitted', 'counter', 1),
  ('dbgate_admitted_after_wait_total', 'status', 'admitted_after_wait', 'counter', 1),
  ('dbgate_rejected_full_total', 'status', 'rejected_full', 'counter', 1),
  ('dbgate_rejected_timeout_total', 'status', 'rejected_timeout', 'counter', 1),
  ('dbgate_canceled_waiting_total', 'status', 'canceled_waiting', 'counter', 1),
  ('dbgate_admitted_lock_holder_total', 'status', 'admitted_lock_holder', 'counter', 1),
  ('dbgate_wait_time_seconds_total', 'status', 'wait_time_total', 'counter', 0.001),
  ('dbgate_wait_time_max_seconds', 'status', 'wait_time_max', 'gauge', 0.001),
  ('dbgate_active_time_seconds_total', 'status', 'active_time_total', 'counter', 0.001),
  ('dbgate_stats_reset_timestamp_seconds', 'status', 'stats_reset', 'gauge', 1),
  ('dbgate_idle_in_transaction', 'status', 'idle_in_transaction', 'gauge', 1),
  ('dbgate_terminated_idle_total', 'status', 'terminated_idle', 'counter', 1),
  ('dbgate_would_queue_total', 'status', 'would_queue', 'counter', 1),
  ('dbgate_would_reject_total', 'status', 'would_reject', 'counter', 1),
  ('dbgate_oldest_wait_seconds', 'status', 'oldest_wait', 'gauge', 0.001),
  ('dbgate_admitted_overdue_total', 'status', 'admitted_overdue', 'counter', 1),
  ('dbgate_rate_limited_total', 'status', 'rate_limited', 'counter', 1),
  ('dbgate_bypassed_total', 'status', 'bypassed', 'counter', 1),
  ('dbgate_memory_mb_active', 'status', 'memory_mb_active', 'gauge', 1),
  ('dbgate_runaways_total', 'status', 'runaways', 'counter', 1),
  ('dbgate_demoted_out_total', 'status', 'demoted_out', 'counter', 1),
  ('dbgate_demoted_in_total', 'status', 'demoted_in', 'counter', 1),
  ('dbgate_quarantined_total', 'status', 'quarantined', 'counter', 1),
  ('dbgate_adaptive_limit', 'status', 'adaptive_limit', 'gauge', 1),
  ('dbgate_keys', 'status', 'keys', 'gauge', 1),
  ('dbgate_keys_overflowed_total', 'status', 'keys_overflowed', 'counter', 1),
  ('dbgate_queue_timeout_seconds', 'budgets', 'queue_timeout', 'gauge', 1),
  ('dbgate_max_memory_mb', 'budgets', 'max_memory_mb', 'gauge', 1);
-- the views as numbers: (budget, view, column, value or NULL)
CREATE TEMP TABLE viewed AS
SELECT s.budget, 'status' AS view, kv.key AS col,
       CASE WHEN kv.key = 'stats_reset' THEN extract(epoch FROM s.stats_reset)::float8
            WHEN jsonb_typeof(kv.value) = 'number' THEN (kv.value #>> '{}')::float8 END AS value
FROM dbgate.status s, jsonb_each(to_jsonb(s)) kv
UNION ALL
SELECT b.budget, 'budgets', kv.key,
       CASE WHEN kv.key = 'queue_timeout' THEN extract(epoch FROM b.queue_timeout)::float8
            WHEN jsonb_typeof(kv.value) = 'number' THEN (kv.value #>> '{}')::float8 END
FROM dbgate.budgets b, jsonb_each(to_jsonb(b)) kv;
-- 1. every column of dbgate.status has a metric
SELECT format('dbgate.status.%s has no metric in the queries file', column_name)
FROM information_schema.columns
WHERE table_schema = 'dbgate' AND table_name = 'status' AND column_name <> 'budget'
  AND column_name NOT IN (SELECT col FROM mapping WHERE view = 'status');
-- 2. each metric's TYPE
SELECT format('%s: TYPE %s, expected %s', m.metric, coalesce(t.type, 'missing'), m.type)
FROM mapping m LEFT JOIN types t ON t.name = m.metric
WHERE t.type IS DISTINCT FROM m.type;
-- 3. one sample per budget, equal to the view (NaN where the column does
--    not exist yet)
SELECT format('%s{budget="%s"}: %s, expected %s', m.metric, b.budget,
              coalesce(s.value::text, 'missing'),
              coalesce((v.value * m.factor)::text, 'NaN (no column ' || m.col || ')'))
FROM mapping m CROSS JOIN dbgate.status b
     LEFT JOIN scraped s ON s.name = m.metric AND s.budget = b.budget
     LEFT JOIN viewed v ON v.budget = b.budget AND v.view = m.view AND v.col = m.col
WHERE CASE WHEN v.col IS NULL OR v.value IS NULL THEN s.value IS DISTINCT FROM 'NaN'
           ELSE s.value IS NULL OR s.value = 'NaN'
                OR abs(s.value - v.value * m.factor) > 1e-9 * greatest(1, abs(v.value * m.factor))
      END;
SELECT format('%s: %s samples for %s budgets', m.metric, count(s.*),
              (SELECT count(*) FROM dbgate.status))
FROM mapping m LEFT JOIN scraped s ON s.name = m.metric
GROUP BY m.metric
HAVING count(s.*) <> (SELECT count(*) FROM dbgate.status);
-- 4. the histogram, bucket by bucket
\if :hist
SELECT 'dbgate_queue_wait_seconds: TYPE ' || coalesce(max(type), 'missing') || ', expected histogram'
FROM types WHERE name = 'dbgate_queue_wait_seconds' HAVING max(type) IS DISTINCT FROM 'histogram';
SELECT format('dbgate_queue_wait_seconds_bucket{budget="%s",le="%s"}: %s, the view says %s',
              h.budget, h.le_ms / 1000, coalesce(s.value::text, 'missing'), h.count)
FROM dbgate.wait_histogram h
     LEFT JOIN scraped s ON s.name = 'dbgate_queue_wait_seconds_bucket' AND s.budget = h.budget
          AND (s.le::float8 = h.le_ms / 1000
               OR (h.le_ms < 'Infinity'
                   AND abs(s.le::float8 - h.le_ms / 1000) <= 1e-12 * greatest(1, h.le_ms / 1000)))
WHERE s.value IS DISTINCT FROM h.count::float8;
SELECT format('dbgate_queue_wait_seconds_bucket{budget="%s"}: %s buckets, the view has %s',
              h.budget, (SELECT count(*) FROM scraped s
                         WHERE s.name = 'dbgate_queue_wait_seconds_bucket' AND s.budget = h.budget),
              count(*))
FROM dbgate.wait_histogram h GROUP BY h.budget
HAVING count(*) <> (SELECT count(*) FROM scraped s
                    WHERE s.name = 'dbgate_queue_wait_seconds_bucket' AND s.budget = h.budget);
SELECT format('dbgate_queue_wait_seconds_%s{budget="%s"}: %s, expected %s', w.what, st.budget,
              coalesce(s.value::text, 'missing'), w.want)
FROM dbgate.status st
     CROSS JOIN LATERAL (VALUES ('count', st.admitted::float8),
                                ('sum', st.wait_time_total / 1000)) AS w(what, want)
     LEFT JOIN scraped s ON s.name = 'dbgate_queue_wait_seconds_' || w.what AND s.budget = st.budget
WHERE s.value IS NULL
   OR abs(s.value - w.want) > 1e-9 * greatest(1, abs(w.want));
\endif
EOF
	fail "checking the final scrape: $(cat "$WORK/final.check")"
if [[ -s $WORK/final.check ]]; then
	echo "metrics that differ from the views:"
	sed 's/^/  /' "$WORK/final.check"
	fail "$(wc -l <"$WORK/final.check") difference(s)"
fi
budgets=$(value "SELECT count(*) FROM dbgate.status")
nonzero=$(awk -F'\t' '$4 != 0 && $4 != "NaN"' "$WORK/final.prom.tsv" | wc -l)
echo "every dbgate metric equals dbgate.status for $budgets budgets ($nonzero samples non-zero)"
value "SELECT budget, admitted, admitted_after_wait, rejected_full, rejected_timeout,
	canceled_waiting, terminated_idle, would_reject FROM dbgate.status ORDER BY budget" |
	sed 's/^/  budget|admitted|after_wait|full|timeout|canceled|terminated_idle|would_reject: /'

if ((${#missing[@]} > 0)); then
	skip "the views lack the 1.2 surface (${missing[*]}): checked the 1.0/1.1" \
		"metrics against dbgate.status and that the 1.2 ones are NaN; the histogram" \
		"dbgate_queue_wait_seconds was not checked"
fi
grep -q '^pg_exporter_last_scrape_error\b.* 0$' "$WORK/final.prom" ||
	fail "the exporter reports a scrape error: $(grep '^pg_exporter_last_scrape_error' "$WORK/final.prom")"
echo "prometheus smoke passed: metrics and the wait histogram equal the views"
