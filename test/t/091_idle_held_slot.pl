# A session that holds a slot while it is idle inside a transaction shows
# in dbgate.backends as 'idle in transaction' and is ended by the budget's
# idle_in_transaction_timeout (FATAL 25P03, counted in terminated_idle),
# whatever holds the slot: the scope rule (a kept slot) or an open cursor,
# and whatever the transaction ran last.
#
# Each case runs twice.  First under an idle timeout of an hour, which
# cannot fire while the test looks: the session must show as idle in
# transaction, holding the budget's one slot; it rolls back.  Then, with
# the budget's idle timeout lowered to 300 ms, a new session runs the same
# statements: it must be ended by the timeout (the test waits until it is
# gone, however long the machine takes) and counted in terminated_idle,
# and its slot returned.  A slot keeps the idle timeout of its admission
# (src/slot.c), so each run's slot gets the value set before it.  The
# statements of a case go to the server as one query string (psql's \;),
# so that the timer cannot end the session between two of them: it acts
# only on a session that waits for its client.
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
	                            idle_in_transaction_timeout => '1h');
	SELECT dbgate.assign_role('ih_user', 'ih');
});

sub idle_timeout
{
	my ($value) = @_;
	$node->safe_psql('postgres',
		"SELECT dbgate.alter_budget('ih', idle_in_transaction_timeout => '$value')");
	return;
}

# idle_case(NAME, STATEMENTS): the statements leave the session idle in a
# transaction that holds the budget's slot; the session must show as idle
# in transaction and be ended by the idle timeout.
sub idle_case
{
	my ($name, @statements) = @_;
	my $sql = join(' \\; ', @statements);

	# the state, under a timeout that cannot fire meanwhile
	idle_timeout('1h');
	my $s = DbgateTest::Session->new($node, user => 'ih_user');
	my $pid = $s->pid;
	$s->query($sql);
	poll_ok(
		$node, qq{
		SELECT (SELECT state FROM dbgate.backends WHERE pid = $pid)
		       || ', active ' || (SELECT active FROM dbgate.status WHERE budget = 'ih')},
		'idle in transaction, active 1',
		"$name: the slot holder shows as idle in transaction, holding the slot");
	$s->query('ROLLBACK');
	$s->quit;
	poll_until($node,
		"SELECT active FROM dbgate.status WHERE budget = 'ih'", '0')
	  or die "$name: the slot was not returned after ROLLBACK";

	# the timeout, armed for the slot that the same statements take now
	idle_timeout('300ms');
	$node->safe_psql('postgres', "SELECT dbgate.reset_stats('ih')");
	$s = DbgateTest::Session->new($node, user => 'ih_user');
	$pid = $s->pid;
	$s->query($sql);
	poll_ok($node, "SELECT count(*) FROM pg_stat_activity WHERE pid = $pid",
		'0', "$name: the session is ended by the idle timeout");
	poll_ok($node, "SELECT terminated_idle FROM dbgate.status WHERE budget = 'ih'",
		'1', "$name: terminated_idle counts it");
	$s->quit;
	poll_ok($node, "SELECT active FROM dbgate.status WHERE budget = 'ih'",
		'0', "$name: the slot is returned");
	return;
}

idle_case('write transaction',
	'BEGIN', 'UPDATE ih_rows SET v = v + 1 WHERE id = 1');

idle_case('failed query in a savepoint',
	'BEGIN', 'UPDATE ih_rows SET v = v + 1 WHERE id = 1',
	'SAVEPOINT s1', 'SELECT no_such_column FROM ih_rows');

idle_case('failed utility command in a savepoint',
	'BEGIN', 'UPDATE ih_rows SET v = v + 1 WHERE id = 1',
	'SAVEPOINT s1', "SET statement_timeout = 'bogus'");

idle_case('open cursor',
	'BEGIN', 'DECLARE c1 CURSOR FOR SELECT g FROM generate_series(1, 10) g',
	'FETCH 1 FROM c1');

$node->stop;
done_testing();
