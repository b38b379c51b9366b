# Heavy utility commands in a budget with utility = true take a slot like a
# query: COPY ... FROM, CREATE INDEX, REINDEX, CLUSTER, VACUUM (also FULL),
# ANALYZE, REFRESH MATERIALIZED VIEW.  Each is rejected with 53300 when the
# budget is full and has no queue place, and queues (then runs) when it has
# one; with utility = false they are not gated.  The CONCURRENTLY forms and
# other utility commands are never gated.  A gated command that fails
# returns its slot; one run inside an admitted statement never waits for
# itself.
#
# The slot is held by a statement of the same role in another database
# (waiting there for an advisory lock that a superuser holds), so that
# CREATE INDEX CONCURRENTLY and friends, which wait for transactions of
# their own database, do not wait for it.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DbgateTest;

my $node = dbgate_node('utility');
$node->safe_psql(
	'postgres', q{
	CREATE DATABASE hold_db;
	CREATE ROLE u_user LOGIN IN ROLE pg_execute_server_program;
	GRANT CREATE ON SCHEMA public TO u_user;
	SELECT dbgate.create_budget('u_b', 1, 0, utility => true);
	SELECT dbgate.assign_role('u_user', 'u_b');
});
$node->safe_psql(
	'postgres', q{
	SET ROLE u_user;
	CREATE TABLE ut (i int);
	INSERT INTO ut SELECT generate_series(1, 1000);
	CREATE UNIQUE INDEX ut_i ON ut (i);
	CREATE MATERIALIZED VIEW um AS SELECT i FROM ut;
	CREATE UNIQUE INDEX um_i ON um (i);
});

my $locker = DbgateTest::Session->new($node, db => 'hold_db');
my $holder;

# fill the budget's only slot
sub hold
{
	$locker->query('SELECT pg_advisory_lock(1)');
	$holder = DbgateTest::Session->new($node, user => 'u_user', db => 'hold_db');
	$holder->send('SELECT pg_advisory_xact_lock_shared(1)');
	poll_ok($node,
		"SELECT state FROM dbgate.backends WHERE pid = " . $holder->pid,
		'active', 'the holder has the slot');
	return;
}

sub unhold
{
	$locker->query('SELECT pg_advisory_unlock(1)');
	$holder->result;
	$holder->quit;
	return;
}

sub set_budget
{
	my ($fields) = @_;
	$node->safe_psql('postgres', "SELECT dbgate.alter_budget('u_b', $fields)");
	return;
}

sub status
{
	return $node->safe_psql('postgres',
		q{SELECT active || ':' || queued FROM dbgate.status WHERE budget = 'u_b'});
}

# name, command, clean-up after it ran
my @heavy = (
	[ 'COPY FROM', q{COPY ut FROM PROGRAM 'echo 2001'}, 'DELETE FROM ut WHERE i > 2000' ],
	[ 'CREATE INDEX', 'CREATE INDEX ut_x ON ut (i)', 'DROP INDEX IF EXISTS ut_x' ],
	[ 'REINDEX', 'REINDEX TABLE ut', '' ],
	[ 'CLUSTER', 'CLUSTER ut USING ut_i', '' ],
	[ 'VACUUM', 'VACUUM ut', '' ],
	[ 'VACUUM FULL', 'VACUUM FULL ut', '' ],
	[ 'ANALYZE', 'ANALYZE ut', '' ],
	[ 'REFRESH MATERIALIZED VIEW', 'REFRESH MATERIALIZED VIEW um', '' ],
	[ 'CREATE INDEX in a DO block', q{DO $$ BEGIN CREATE INDEX ut_x ON ut (i); END $$},
		'DROP INDEX IF EXISTS ut_x' ],);

sub cleanup
{
	my ($sql) = @_;
	$node->safe_psql('postgres', "SET ROLE u_user; $sql") if $sql ne '';
	return;
}

# ---------------------------------------------------------------------------
# utility = true, no queue place: rejected at once

hold();
for my $c (@heavy)
{
	my ($name, $sql, $undo) = @$c;
	my ($state, $out, $err) = run_sql($node, $sql, user => 'u_user');
	is($state, '53300', "$name is rejected when the budget is full");
	like($err, qr/budget "u_b" is full/, "$name: the message names the budget");
	cleanup($undo);
}
is(status(), '1:0', 'rejected commands left no slot or queue place behind');
my $rejected = $node->safe_psql('postgres',
	q{SELECT rejected_full FROM dbgate.status WHERE budget = 'u_b'});
is($rejected, scalar(@heavy), 'each rejection is counted');

# never gated: CONCURRENTLY forms and other utility commands
my @light = (
	'CREATE INDEX CONCURRENTLY ut_c ON ut (i)',
	'REINDEX TABLE CONCURRENTLY ut',
	'REINDEX (CONCURRENTLY) INDEX ut_c',
	'DROP INDEX CONCURRENTLY ut_c',
	'COPY ut TO STDOUT',
	'CREATE TABLE ut2 (i int PRIMARY KEY)',
	'TRUNCATE ut2',
	'DROP TABLE ut2',);
for my $sql (@light)
{
	my ($state, $out, $err) = run_sql($node, $sql, user => 'u_user');
	is($state, '', "not gated while the budget is full: $sql");
}
unhold();

# ---------------------------------------------------------------------------
# utility = true, one queue place: queued, then run when the slot comes free

set_budget('max_queued => 1');
for my $c (@heavy)
{
	my ($name, $sql, $undo) = @$c;
	hold();
	my $s = DbgateTest::Session->new($node, user => 'u_user');
	$s->send($sql);
	poll_ok($node, "SELECT state FROM dbgate.backends WHERE pid = " . $s->pid,
		'queued', "$name queues when the budget is full");
	unhold();
	my ($out, $err, $state) = $s->result;
	is($state, '', "$name runs once the slot is free");
	$s->quit;
	is(status(), '0:0', "$name returned its slot");
	cleanup($undo);
}

# ---------------------------------------------------------------------------
# utility = false: not gated (REFRESH MATERIALIZED VIEW runs its query
# through the executor, which is gated anyway)

set_budget('max_queued => 0, utility => false');
hold();
for my $c (@heavy)
{
	my ($name, $sql, $undo) = @$c;
	next if $name eq 'REFRESH MATERIALIZED VIEW';
	my ($state, $out, $err) = run_sql($node, $sql, user => 'u_user');
	is($state, '', "utility = false: $name is not gated");
	cleanup($undo);
}
unhold();

# ---------------------------------------------------------------------------
# The whole command is one gated statement: REFRESH MATERIALIZED VIEW waits
# for its slot before it locks the view.  REFRESH ... CONCURRENTLY is not
# gated as a whole: the queries it runs are, like any other, so it waits
# in the queue with the view already locked.

set_budget('max_queued => 1, utility => true');
for my $c ([ 'REFRESH MATERIALIZED VIEW um', 0 ],
	[ 'REFRESH MATERIALIZED VIEW CONCURRENTLY um', 1 ])
{
	my ($sql, $locked) = @$c;
	hold();
	my $s = DbgateTest::Session->new($node, user => 'u_user');
	$s->send($sql);
	poll_ok($node, "SELECT state FROM dbgate.backends WHERE pid = " . $s->pid,
		'queued', "$sql queues");
	is( $node->safe_psql(
			'postgres',
			"SELECT count(*) > 0 FROM pg_locks WHERE pid = "
			  . $s->pid
			  . " AND relation = 'um'::regclass"),
		$locked ? 't' : 'f',
		"$sql: " . ($locked ? 'its query waits with the view locked'
			: 'waits before it locks the view'));
	unhold();
	my ($out, $err, $state) = $s->result;
	is($state, '', "$sql runs once the slot is free");
	$s->quit;
}
set_budget('max_queued => 0');
sub admitted
{
	return $node->safe_psql('postgres',
		q{SELECT admitted FROM dbgate.status WHERE budget = 'u_b'});
}
my ($before, $state, $out, $err);

# a gated COPY FROM that fails returns its slot
$before = admitted();
($state, $out, $err) =
  run_sql($node, q{COPY ut FROM PROGRAM 'echo not a number'}, user => 'u_user');
is($state, '22P02', 'a COPY FROM with bad data fails');
is(admitted() - $before, 1, 'the failed COPY FROM was admitted');
is(status(), '0:0', 'the failed COPY FROM returned its slot');

# inside an admitted statement a heavy command runs under the slot held
($state, $out, $err) = run_sql(
	$node, q{
	BEGIN;
	DECLARE c CURSOR FOR SELECT generate_series(1, 10);
	FETCH 1 FROM c;
	CREATE INDEX ut_n ON ut (i);
	COMMIT;
	DROP INDEX ut_n;
}, user => 'u_user');
is($state, '', 'CREATE INDEX while the own cursor holds the only slot');
is(status(), '0:0', 'and the slot is back afterwards');

$locker->quit;
$node->stop;
done_testing();
