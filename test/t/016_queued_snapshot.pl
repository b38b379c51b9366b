# A statement that waits in a queue holds no snapshot in READ COMMITTED:
# pg_stat_activity shows no backend_xmin for it while it waits (so it holds
# back neither VACUUM nor HOT pruning), and once admitted it sees what was
# committed during its wait, as if its client had sent it then.  Where its
# snapshot must stay (REPEATABLE READ, a statement inside a DO block, a
# statement with RETURNING, a cursor) nothing changes: the backend keeps
# its xmin and the statement sees the state of when it started.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DbgateTest;

my $node = dbgate_node('queued_snapshot');
$node->safe_psql(
	'postgres', q{
	CREATE ROLE qs_user LOGIN;
	CREATE TABLE qs_rows (id int PRIMARY KEY, v int NOT NULL);
	INSERT INTO qs_rows VALUES (0, 0);
	GRANT SELECT, INSERT, UPDATE ON qs_rows TO qs_user;
	SELECT dbgate.create_budget('qs', 1, 4, queue_timeout => '60s');
	SELECT dbgate.assign_role('qs_user', 'qs');
});

my $next_id = 1;

# queued_case(NAME, SQL, EXPECT, %p): SQL is sent by a session of the
# budget while another one holds the only slot, and queues.  A row is
# committed while it waits.  keeps_xmin => 1: its snapshot must stay, so
# backend_xmin is set and the row is not seen.  EXPECT: the output the
# statement must give (notice => 1: the count a DO block reports in a
# NOTICE).
sub queued_case
{
	my ($name, $sql, $expect, %p) = @_;
	$node->safe_psql('postgres', 'SELECT dbgate.reset_stats()');
	my $h = DbgateTest::Session->new($node, user => 'qs_user');
	my $w = DbgateTest::Session->new($node, user => 'qs_user');
	my $wpid = $w->pid;

	# H keeps the slot: its transaction holds a transaction ID
	$h->query('BEGIN; UPDATE qs_rows SET v = v WHERE id = 0;');
	$w->send($sql);
	# queued, and asleep: a backend is marked queued before it lets go of
	# its snapshot, and sleeps (wait event type Extension) only after
	poll_ok($node,
		"SELECT b.state || '/' || a.wait_event_type
		   FROM dbgate.backends b JOIN pg_stat_activity a USING (pid)
		  WHERE pid = $wpid",
		'queued/Extension', "$name: the statement queues");
	my $xmin = $node->safe_psql('postgres',
		"SELECT backend_xmin IS NOT NULL FROM pg_stat_activity WHERE pid = $wpid");
	is($xmin, $p{keeps_xmin} ? 't' : 'f',
		$p{keeps_xmin}
		? "$name: the queued statement keeps its snapshot"
		: "$name: the queued statement holds no snapshot (no backend_xmin)");

	# committed while it waits
	my $id = $next_id++;
	$node->safe_psql('postgres', "INSERT INTO qs_rows VALUES ($id, 1)");

	$h->query('COMMIT');
	my ($out, $err) = $w->result;
	# a DO block reports what it saw in a NOTICE
	($out) = $err =~ /qs_count (\d+)/ if $p{notice};
	is($out, $expect, "$name: the statement sees "
		  . ($p{keeps_xmin} ? 'the rows of when it started' : 'the rows committed while it waited'));
	is($err =~ /ERROR/ ? $err : '', '', "$name: no error");
	$w->query('ROLLBACK') if $p{txn};
	$h->quit;
	$w->quit;
	counters_are($node, 'qs', { admitted => 2, admitted_after_wait => 1 },
		"$name: counted as one admission after a wait");
	return;
}

# rows before each case: ids 0 .. next_id - 1, so count(*) = next_id
sub rows_now { return $next_id; }

queued_case('single SELECT', 'SELECT count(*) FROM qs_rows', rows_now() + 1);
queued_case('SELECT in a transaction block',
	'BEGIN; SELECT count(*) FROM qs_rows;', rows_now() + 1, txn => 1);
# (psql runs quietly: an UPDATE prints nothing)
my $upd_id = $next_id;
queued_case('UPDATE', "UPDATE qs_rows SET v = v + 1 WHERE id = $upd_id", '');
is($node->safe_psql('postgres', "SELECT v FROM qs_rows WHERE id = $upd_id"),
	'2', 'UPDATE: the row committed during the wait was updated');
queued_case('REPEATABLE READ',
	'BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM qs_rows;',
	rows_now(), txn => 1, keeps_xmin => 1);
queued_case('statement of a DO block',
	q{DO $$ DECLARE n int; BEGIN
		SELECT count(*) INTO n FROM qs_rows;
		RAISE NOTICE 'qs_count %', n; END $$},
	rows_now(), keeps_xmin => 1, notice => 1);
queued_case('UPDATE with RETURNING',
	'UPDATE qs_rows SET v = v WHERE id = 0 RETURNING (SELECT count(*) FROM qs_rows)',
	rows_now(), keeps_xmin => 1);

$node->stop;
done_testing();
