# A gated utility command (budget field utility) that waits in a queue
# holds no snapshot in READ COMMITTED either: PortalRunUtility took one for
# it before ProcessUtility, and the gate gives it up for the wait and takes
# a new one on admission.  pg_stat_activity shows no backend_xmin for a
# queued VACUUM or COPY ... FROM, and once admitted they do their work (the
# VACUUM is counted, the COPY inserts its rows).  Where the snapshot must stay (REPEATABLE READ, a COPY
# run by a DO block on the block's snapshot) the backend keeps its xmin.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DbgateTest;
use DbgateSnapshot;

my $node = dbgate_node('queued_utility_snapshot');
my $datafile = $node->basedir . '/qu_rows.data';
open(my $fh, '>', $datafile) or die "could not write $datafile: $!";
print $fh "900\t9\n";
close($fh);

$node->safe_psql(
	'postgres', q{
	CREATE ROLE qu_user LOGIN IN ROLE pg_read_server_files;
	CREATE TABLE qu_rows (id int PRIMARY KEY, v int NOT NULL);
	INSERT INTO qu_rows VALUES (0, 0);
	ALTER TABLE qu_rows OWNER TO qu_user;
	SELECT dbgate.create_budget('qu', 1, 4, queue_timeout => '60s',
								utility => true);
	SELECT dbgate.assign_role('qu_user', 'qu');
});

my $next_id = 1;

# queued_case(NAME, SQL, %p): SQL is sent by a session of the budget while
# another one holds the only slot, and queues.  A row is committed while it
# waits.  keeps_xmin => 1: its snapshot must stay.  setup => SQL: run in
# the waiting session first (not gated).  Returns the waiting session's
# (STDOUT, STDERR).  See DbgateSnapshot.
sub queued_case
{
	my ($name, $sql, %p) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	return queued_snapshot_case($node, $name, $sql,
		user => 'qu_user',
		table => 'qu_rows',
		budget => 'qu',
		id => $next_id++,
		noun => 'command',
		%p);
}

sub vacuum_count
{
	return $node->safe_psql('postgres',
		"SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = 'qu_rows'");
}

# VACUUM
my $before = vacuum_count();
queued_case('VACUUM', 'VACUUM qu_rows');
is(vacuum_count(), $before + 1, 'VACUUM: it ran once admitted');

# COPY ... FROM the client; its data follows the command (ended by a
# comment, which keeps send() from adding a semicolon: a lone ';' after
# the data makes psql skip what follows)
my $copy_id = $next_id + 100;
queued_case('COPY FROM STDIN',
	"COPY qu_rows (id, v) FROM STDIN;\n$copy_id\t7\n\\.\n-- end of data;");
is( $node->safe_psql('postgres', "SELECT v FROM qu_rows WHERE id = $copy_id"),
	'7', 'COPY FROM STDIN: the row was inserted');

# COPY ... FROM a file
my $file_id = 900;
queued_case('COPY FROM a file', "COPY qu_rows (id, v) FROM '$datafile'");
is($node->safe_psql('postgres', "SELECT v FROM qu_rows WHERE id = $file_id"),
	'9', 'COPY FROM a file: the row was inserted');
$node->safe_psql('postgres', "DELETE FROM qu_rows WHERE id = $file_id");

# REPEATABLE READ: the transaction snapshot stays
$before = vacuum_count();
queued_case('VACUUM in REPEATABLE READ', 'VACUUM qu_rows',
	setup => "SET default_transaction_isolation = 'repeatable read'",
	keeps_xmin => 1);
is(vacuum_count(), $before + 1, 'VACUUM in REPEATABLE READ: it ran once admitted');

# a COPY run by a DO block runs on the block's snapshot, which stays
queued_case('COPY FROM in a DO block',
	"DO \$\$ BEGIN COPY qu_rows (id, v) FROM '$datafile'; END \$\$",
	keeps_xmin => 1);
is($node->safe_psql('postgres', "SELECT v FROM qu_rows WHERE id = $file_id"),
	'9', 'COPY FROM in a DO block: the row was inserted');

$node->stop;
done_testing();
