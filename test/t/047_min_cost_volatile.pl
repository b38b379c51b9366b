# min_cost never lets a write through a full budget (1.3): with the only
# slot held by another session of the role (max_active 1, max_queued 0), a
# cheap SELECT that calls a function that may write is rejected at once
# with 53300, is not counted in bypassed and writes nothing: no large
# object from lo_from_bytea, no step of a sequence, no transaction ID from
# txid_current() or pg_current_xact_id(), no row from a volatile user
# function; nor when the call is in an initplan, a subplan, a CTE or a
# prepared statement's generic plan.  Cheap reads that call only stable or
# immutable functions still pass (bypassed), also run in turn with the
# writers from one session.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use DbgateTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# nothing but the test assigns transaction IDs
my $node = dbgate_node('min_cost_volatile', conf => "autovacuum = off\n");
$node->safe_psql(
	'postgres', q{
	CREATE ROLE mv_user LOGIN;
	CREATE TABLE mv_t (a int);
	INSERT INTO mv_t SELECT g FROM generate_series(1, 10) g;
	ANALYZE mv_t;
	CREATE SEQUENCE mv_s;
	GRANT SELECT, INSERT ON mv_t TO mv_user;
	GRANT USAGE, SELECT ON SEQUENCE mv_s TO mv_user;
	CREATE FUNCTION mv_write() RETURNS int LANGUAGE sql
	  AS $$ INSERT INTO mv_t VALUES (100) RETURNING a $$;
	CREATE FUNCTION mv_stable() RETURNS int STABLE LANGUAGE plpgsql
	  AS $$ BEGIN RETURN 7; END $$;
	SELECT dbgate.create_budget('mv', 1, 0, min_cost => 1000);
	SELECT dbgate.assign_role('mv_user', 'mv');
});

# what has been written: large objects, the sequence, the next
# transaction ID, the table's rows
sub written
{
	return $node->safe_psql(
		'postgres', q{
		SELECT (SELECT count(*) FROM pg_largeobject_metadata) || ':' ||
		       (SELECT last_value || '/' || is_called FROM mv_s) || ':' ||
		       pg_snapshot_xmax(pg_current_snapshot()) || ':' ||
		       (SELECT count(*) FROM mv_t)});
}

sub bypassed
{
	return $node->safe_psql('postgres',
		q{SELECT bypassed FROM dbgate.status WHERE budget = 'mv'});
}

# the slot holder: a transaction that wrote keeps its slot
my $holder = DbgateTest::Session->new($node, user => 'mv_user');
my (undef, $err) = $holder->query('BEGIN; INSERT INTO mv_t VALUES (0);');
is($err, '', 'the holder wrote');
poll_ok($node, q{SELECT active FROM dbgate.status WHERE budget = 'mv'},
	'1', 'the holder has the only slot');

my ($st) = run_sql($node, 'INSERT INTO mv_t VALUES (1)', user => 'mv_user');
is($st, '53300', 'a write is rejected: the budget is full');

my $before = written();
my $bypassed = bypassed();
for my $case (
	[ 'lo_from_bytea',
		q{SELECT lo_from_bytea(0, decode(repeat('ab', 1000000), 'hex'))} ],
	[ 'nextval',            q{SELECT nextval('mv_s')} ],
	[ 'txid_current',       q{SELECT txid_current()} ],
	[ 'pg_current_xact_id', q{SELECT pg_current_xact_id()} ],
	[ 'a volatile user function', q{SELECT mv_write()} ],
	[ 'a volatile user function in FROM', q{SELECT * FROM mv_write()} ],
	[ 'an initplan',        q{SELECT (SELECT nextval('mv_s'))} ],
	[ 'a correlated subplan',
		q{SELECT a, (SELECT nextval('mv_s') FROM mv_t y WHERE y.a = x.a)
		    FROM mv_t x WHERE a = 1} ],
	[ 'a CTE',
		q{WITH c AS MATERIALIZED (SELECT lo_from_bytea(0, '\x00') AS o)
		  SELECT count(*) FROM c} ],
	[ 'a subquery in FROM',
		q{SELECT * FROM (SELECT txid_current() AS x OFFSET 0) s} ])
{
	my ($name, $sql) = @$case;
	my ($state) = run_sql($node, $sql, user => 'mv_user');
	is($state, '53300', "$name: rejected (53300) although cheap");
}
is(written(), $before,
	'no large object, sequence step, transaction ID or row was written');
is(bypassed(), $bypassed, 'none of them was counted in bypassed');

# cheap reads of stable and immutable functions still pass
for my $sql (
	'SELECT count(*) FROM mv_t',
	'SELECT now() IS NOT NULL, abs(-1), txid_current_if_assigned()',
	'SELECT mv_stable()',
	'SELECT last_value FROM mv_s')
{
	my ($state, undef, $e) = run_sql($node, $sql, user => 'mv_user');
	is($state, '', "passes: $sql") or diag($e);
}
is(bypassed(), $bypassed + 4, 'the cheap reads were counted in bypassed');

# one session, writers and readers in turn: plans of the simple protocol
# made at the same address, and prepared generic plans run again
my $s = DbgateTest::Session->new($node, user => 'mv_user');
$bypassed = bypassed();
my $sql = '';
$sql .= "SELECT abs(-$_); SELECT nextval('mv_s');\n" for 1 .. 5;
$sql .= q{SET plan_cache_mode = force_generic_plan;
	PREPARE w AS SELECT nextval('mv_s');
	PREPARE r AS SELECT count(*) FROM mv_t;};
$sql .= "EXECUTE r; EXECUTE w;\n" for 1 .. 5;
my (undef, $e) = $s->query($sql);
my $rejected = () = $e =~ /ERROR:\s+53300:/g;
is($rejected, 10, 'one session: each writer rejected (53300)');
is(bypassed(), $bypassed + 10, 'one session: each reader bypassed');
is(written(), $before, 'one session: the sequence did not move');
$s->quit;

# with the slot free, a cheap writer is admitted, not bypassed
$holder->query('ROLLBACK');
poll_ok($node, q{SELECT active FROM dbgate.status WHERE budget = 'mv'},
	'0', 'the holder gave its slot back');
my $admitted = $node->safe_psql('postgres',
	q{SELECT admitted FROM dbgate.status WHERE budget = 'mv'});
$bypassed = bypassed();
($st) = run_sql($node, q{SELECT nextval('mv_s')}, user => 'mv_user');
is($st, '', 'a free slot: nextval runs');
is( $node->safe_psql(
		'postgres',
		q{SELECT admitted || ':' || bypassed FROM dbgate.status WHERE budget = 'mv'}),
	($admitted + 1) . ":$bypassed",
	'a free slot: nextval is admitted, not bypassed');

$holder->quit;
$node->stop;
done_testing();
