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
# (STDOUT, STDERR).
sub queued_case
{
	my ($name, $sql, %p) = @_;
	$node->safe_psql('postgres', 'SELECT dbgate.reset_stats()');
	my $h = DbgateTest::Session->new($node, user => 'qu_user');
	my $w = DbgateTest::Session->new($node, user => 'qu_user');
	my $wpid = $w->pid;

	$w->query($p{setup}) if defined $p{setup};
	# H keeps the slot: its transaction holds a transaction ID
	$h->query('BEGIN; UPDATE qu_rows SET v = v WHERE id = 0;');
	$w->send($sql);
	# queued, and asleep: a backend is marked queued before it lets go of
	# its snapshot, and sleeps (wait event type Extension) only after
	poll_ok($node,
		"SELECT b.state || '/' || a.wait_event_type
		   FROM dbgate.backends b JOIN pg_stat_activity a USING (pid)
		  WHERE pid = $wpid",
		'queued/Extension', "$name: the command queues");
	my $xmin = $node->safe_psql('postgres',
		"SELECT backend_xmin IS NOT NULL FROM pg_stat_activity WHERE pid = $wpid");
	is($xmin, $p{keeps_xmin} ? 't' : 'f',
		$p{keeps_xmin}
		? "$name: the queued command keeps its snapshot"
		: "$name: the queued command holds no snapshot (no backend_xmin)");

	# committed while it waits
	my $id = $next_id++;
	$node->safe_psql('postgres', "INSERT INTO qu_rows VALUES ($id, 1)");

	$h->query('COMMIT');
	my ($out, $err) = $w->result;
	is($err =~ /ERROR/ ? $err : '', '', "$name: no error");
	$h->quit;
	$w->quit;
	counters_are($node, 'qu', { admitted => 2, admitted_after_wait => 1 },
		"$name: counted as one admission after a wait");
	return ($out, $err);
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
