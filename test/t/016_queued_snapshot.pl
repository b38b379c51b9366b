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
use DbgateSnapshot;

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
# statement must give (notice => REGEXP: the count a DO block reports in
# a NOTICE).  See DbgateSnapshot.
sub queued_case
{
	my ($name, $sql, $expect, %p) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	queued_snapshot_case($node, $name, $sql,
		user => 'qs_user',
		table => 'qs_rows',
		budget => 'qs',
		id => $next_id++,
		expect => $expect,
		%p);
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
	rows_now(), keeps_xmin => 1, notice => qr/qs_count (\d+)/);
queued_case('UPDATE with RETURNING',
	'UPDATE qs_rows SET v = v WHERE id = 0 RETURNING (SELECT count(*) FROM qs_rows)',
	rows_now(), keeps_xmin => 1);

$node->stop;
done_testing();
