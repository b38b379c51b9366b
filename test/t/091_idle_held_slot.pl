# A session that holds a slot while it is idle inside a transaction shows
# in dbgate.backends as 'idle in transaction' and is ended by the budget's
# idle_in_transaction_timeout (FATAL 25P03, counted in terminated_idle),
# whatever holds the slot: the scope rule (a kept slot) or an open cursor,
# and whatever the transaction ran last.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DbgateTest;

my $node = dbgate_node('idle_held');
$node->safe_psql(
	'postgres', q{
	CREATE ROLE ih_user LOGIN;
	CREATE TABLE ih_rows (id int PRIMARY KEY, v int NOT NULL);
	INSERT INTO ih_rows VALUES (1, 0);
	GRANT SELECT, UPDATE ON ih_rows TO ih_user;
	SELECT dbgate.create_budget('ih', 1, 0,
	                            idle_in_transaction_timeout => '300ms');
	SELECT dbgate.assign_role('ih_user', 'ih');
});

# idle_case(NAME, SQL): SQL leaves the
# session idle in a transaction that holds the budget's slot; the session
# must show as idle in transaction and be ended by the idle timeout.
sub idle_case
{
	my ($name, $sql, %p) = @_;
	$node->safe_psql('postgres', 'SELECT dbgate.reset_stats()');
	my $s = DbgateTest::Session->new($node, user => 'ih_user');
	my $pid = $s->pid;
	$s->query($sql);

	# seen at once (the timeout is 300 ms), or after it ended: then there
	# is no row at all
	my $state = $node->safe_psql('postgres',
		"SELECT coalesce((SELECT state FROM dbgate.backends WHERE pid = $pid), 'none')");
	my $active = $node->safe_psql('postgres',
		"SELECT active FROM dbgate.status WHERE budget = 'ih'");

	# gone, or idle for well over the timeout
	$node->poll_query_until(
		'postgres', qq{
		SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $pid
		                   AND clock_timestamp() - state_change < interval '2 s')});
	my $alive = $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE pid = $pid");
	my $terminated = $node->safe_psql('postgres',
		"SELECT terminated_idle FROM dbgate.status WHERE budget = 'ih'");
	ok(($state eq 'idle in transaction' || $state eq 'none') && $active <= 1,
		"$name: the slot holder shows as idle in transaction (state $state)");
	is($alive, '0', "$name: the session is ended by the idle timeout");
	is($terminated, '1', "$name: terminated_idle counts it");
	$s->query('ROLLBACK') if $alive;
	$s->quit;
	poll_ok($node, "SELECT active FROM dbgate.status WHERE budget = 'ih'",
		'0', "$name: the slot is returned");
	return;
}

idle_case('write transaction', q{
	BEGIN;
	UPDATE ih_rows SET v = v + 1 WHERE id = 1;
});

idle_case('failed query in a savepoint', q{
	BEGIN;
	UPDATE ih_rows SET v = v + 1 WHERE id = 1;
	SAVEPOINT s1;
	SELECT no_such_column FROM ih_rows;
});

idle_case(
	'failed utility command in a savepoint', q{
	BEGIN;
	UPDATE ih_rows SET v = v + 1 WHERE id = 1;
	SAVEPOINT s1;
	SET statement_timeout = 'bogus';
});

idle_case(
	'open cursor', q{
	BEGIN;
	DECLARE c1 CURSOR FOR SELECT g FROM generate_series(1, 10) g;
	FETCH 1 FROM c1;
});

$node->stop;
done_testing();
