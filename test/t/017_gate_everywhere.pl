# Nothing a gated role sends runs a query outside the gate, and one
# statement is one admission:
#   - a function that the planner evaluates (IMMUTABLE, in the statement's
#     text) runs its queries only once admitted;
#   - a domain check of a bound parameter (Bind of the extended protocol)
#     likewise;
#   - a function called by the fast-path protocol message likewise;
#   - deferred triggers fired by COMMIT are never gated, also when the
#     transaction holds no slot (COPY FROM, which is not gated by default):
#     a COMMIT never queues;
#   - the actions of a rule are one admission, under one snapshot, however
#     the slot moves meanwhile.
# Each is run with B = 1, Q = 0 and the slot held by another session of
# the role, so a query that escaped the gate would run (and print its
# NOTICE) where the gate must refuse it with 53300.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DbgateTest;

my $node = dbgate_node('everywhere');
$node->safe_psql(
	'postgres', q{
	CREATE ROLE ge_user LOGIN;
	SELECT dbgate.create_budget('ge', max_active => 1, max_queued => 0);
	SELECT dbgate.assign_role('ge_user', 'ge');
	-- a query that the role may run anywhere; it says that it ran
	CREATE FUNCTION heavy() RETURNS bigint LANGUAGE plpgsql AS $$
	DECLARE n bigint;
	BEGIN
	  SELECT count(*) INTO n FROM generate_series(1, 1000) AS g;
	  RAISE NOTICE 'heavy ran % rows', n;
	  RETURN n;
	END $$;
	CREATE FUNCTION check_ok(v int) RETURNS boolean LANGUAGE plpgsql AS $$
	BEGIN
	  RETURN heavy() > 0 AND v > 0;
	END $$;
	CREATE DOMAIN checked_int AS int CHECK (check_ok(VALUE));
	CREATE TABLE parent (id int PRIMARY KEY);
	INSERT INTO parent VALUES (1);
	CREATE TABLE child (pid int REFERENCES parent DEFERRABLE INITIALLY DEFERRED);
	GRANT SELECT, INSERT ON parent, child TO ge_user;
});
my $locker = DbgateTest::Session->new($node);
$locker->query('SELECT pg_advisory_lock(1)');

# another session of the role holds the only slot
my $holder = DbgateTest::Session->new($node, user => 'ge_user');
$holder->send('SELECT pg_advisory_xact_lock_shared(1)');
poll_ok($node, "SELECT state FROM dbgate.backends WHERE pid = " . $holder->pid,
	'active', 'the holder has the slot');

# ---------------------------------------------------------------------------
# The planner evaluates an IMMUTABLE function of the role's own.
my ($state, $out, $err) = run_sql(
	$node, q{
	CREATE FUNCTION pg_temp.f() RETURNS bigint IMMUTABLE LANGUAGE plpgsql AS $$
	DECLARE n bigint;
	BEGIN
	  SELECT count(*) INTO n FROM generate_series(1, 3000000);
	  RAISE NOTICE 'ran % rows', n;
	  RETURN n;
	END $$;
	SELECT pg_temp.f();
},
	user => 'ge_user');
is($state, '53300', 'planner: the function\'s query is refused with 53300');
unlike($err, qr/ran \d+ rows/, 'planner: the function\'s query did not run');

# ---------------------------------------------------------------------------
# Bind checks a domain whose check runs a query.
my $lines = wire_run(
	$node, 'ge_user', join("\n",
		'parse s SELECT $1::checked_int AS v',
		'bind p s 5', 'execute p 0', 'sync', 'quit'));
ok((grep { /^ERROR 53300 / } @$lines), 'bind: the domain check\'s query is refused with 53300')
  or diag(join("\n", @$lines));
ok(!(grep { /heavy ran/ } @$lines), 'bind: the domain check\'s query did not run');

# ---------------------------------------------------------------------------
# A fast-path function call (the protocol's FunctionCall message).
my $heavy = $node->safe_psql('postgres', "SELECT 'heavy'::regproc::oid");
$lines = wire_run($node, 'ge_user', "fastpath $heavy\nquit");
ok((grep { /^ERROR 53300 / } @$lines), 'fast path: the function\'s query is refused with 53300')
  or diag(join("\n", @$lines));
ok(!(grep { /heavy ran/ || /^RESULT/ } @$lines), 'fast path: the function\'s query did not run');

my $st = status_of($node, 'ge');
is($st->{rejected_full}, 3, 'three admissions refused, one per way in');

# ---------------------------------------------------------------------------
# COMMIT fires a deferred foreign-key check of rows written by COPY FROM
# (not gated): the transaction holds no slot, the budget is full, and the
# COMMIT neither queues nor fails.
($state, $out, $err) = run_sql(
	$node, "BEGIN;\nCOPY child FROM STDIN;\n1\n\\.\nCOMMIT;\n",
	user => 'ge_user');
is($state, '', 'commit: a deferred check fired by COMMIT is not gated')
  or diag($err);
($state, $out, $err) = run_sql($node, "COPY child FROM STDIN;\n1\n\\.\n",
	user => 'ge_user');
is($state, '', 'commit: also at the end of an implicit transaction')
  or diag($err);
is($node->safe_psql('postgres', 'SELECT count(*) FROM child'),
	'2', 'commit: both rows are there');
($state, $out, $err) = run_sql($node, "BEGIN;\nCOPY child FROM STDIN;\n7\n\\.\nCOMMIT;\n",
	user => 'ge_user');
is($state, '23503', 'commit: the deferred check itself still runs');

$locker->query('SELECT pg_advisory_unlock(1)');
$holder->result;
poll_ok($node, "SELECT active FROM dbgate.status WHERE budget = 'ge'", '0',
	'the holder returned its slot');

# ---------------------------------------------------------------------------
# The actions of a rule are one admission under one snapshot.  Action 1
# waits; meanwhile another session of the role asks for the slot (and
# would get it when action 1 ends if the actions were admitted one by
# one), and a superuser adds 99 rows.  Action 2 counts what action 1
# counted.
$node->safe_psql(
	'postgres', q{
	SELECT dbgate.alter_budget('ge', max_queued => 2);
	CREATE TABLE tt (a int);
	INSERT INTO tt VALUES (1);
	CREATE TABLE vbase (a int);
	CREATE VIEW v AS SELECT * FROM vbase;
	CREATE FUNCTION note(action text, n bigint) RETURNS void LANGUAGE plpgsql
	  AS $$ BEGIN RAISE NOTICE 'counted % %', action, n; END $$;
	CREATE FUNCTION wait_for_lock() RETURNS void LANGUAGE sql
	  AS 'SELECT pg_advisory_xact_lock_shared(2)';
	CREATE RULE r AS ON INSERT TO v DO INSTEAD (
	  SELECT note('action1', count(*)) FROM tt, wait_for_lock();
	  SELECT note('action2', count(*)) FROM tt);
	GRANT SELECT ON tt TO ge_user;
	GRANT INSERT ON v TO ge_user;
	SELECT dbgate.reset_stats('ge');
});
$locker->query('SELECT pg_advisory_lock(2)');
my $ruler = DbgateTest::Session->new($node, user => 'ge_user');
$ruler->send('INSERT INTO v VALUES (1)');
poll_ok($node,
	"SELECT wait_event_type FROM pg_stat_activity WHERE pid = " . $ruler->pid,
	'Lock', 'rule: action 1 runs and waits');
my $other = DbgateTest::Session->new($node, user => 'ge_user');
$other->send('SELECT pg_sleep(0.5)');
poll_ok($node, "SELECT state FROM dbgate.backends WHERE pid = " . $other->pid,
	'queued', 'rule: another session of the role queues');
$node->safe_psql('postgres', 'INSERT INTO tt SELECT generate_series(2, 100)');
$locker->query('SELECT pg_advisory_unlock(2)');
($out, $err, $state) = $ruler->result;
is($state, '', 'rule: the statement succeeds') or diag($err);
$other->result;
like($err, qr/counted action1 1\b/, 'rule: action 1 counts the row there was');
like($err, qr/counted action2 1\b/, 'rule: action 2 counts under the same snapshot');
counters_are($node, 'ge', { admitted => 2, admitted_after_wait => 1 },
	'rule: the statement was one admission, the other session waited once');

$ruler->quit;
$other->quit;
$holder->quit;
$locker->quit;
$node->stop;
done_testing();
