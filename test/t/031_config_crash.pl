# A committed configuration change is never lost and an uncommitted one
# never appears, whatever instant the server crashes at:
#  - the backend of a client that commits one change after another is
#    killed with SIGKILL (a crash restart of the whole server): after the restart the configuration is that of
#    a change the client saw committed or of one it sent after it, never
#    an older one;
#  - the state file is older than the WAL (as after a crash between a
#    commit and the rename of the state file): crash recovery replays the
#    change from WAL;
#  - a transaction that failed after its configuration record was logged
#    never appears after a crash restart.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use DbgateTest;
use File::Copy;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# Cluster.pm turns restart_after_crash off; the crash tests need it.
my $node = dbgate_node('cfgcrash', conf => "restart_after_crash = on\n");

# kill -9 of a backend: the postmaster reinitialises everything
sub crash
{
	my ($session) = @_;
	my $offset = -s $node->logfile;
	kill 'KILL', $session->pid or die "kill: $!";
	$node->wait_for_log(qr/all server processes terminated; reinitializing/,
		$offset);
	# then ready: a psql that finds the server still refusing connections
	# may exit before poll_query_until() wrote its query, and IPC::Run
	# dies of the broken pipe
	$node->wait_for_log(qr/database system is ready to accept connections/,
		$offset);
	$node->poll_query_until('postgres', 'SELECT 1', '1')
	  or die "server did not come back";
	return $session->wait_exit;
}
my $pgdata = $node->data_dir;
$node->safe_psql('postgres',
	"CREATE TABLE t (k int); SELECT dbgate.create_budget('k', 1)");

my $max_sql = q{SELECT max_active FROM dbgate.budgets WHERE budget = 'k'};

# 1. kill -9 of the postmaster while commits go on, three times
for my $round (1 .. 3)
{
	my $s = DbgateTest::Session->new($node);
	my $base = $node->safe_psql('postgres', $max_sql);
	my $sql = '';
	for my $i (1 .. 400)
	{
		my $v = $base + $i;
		$sql .= "SELECT dbgate.alter_budget('k', max_active => $v);\n\\echo committed $v\n";
	}
	$s->send($sql);
	# wait until some commits went through, then kill
	my $want = 20 * $round;
	ok( $node->poll_query_until(
			'postgres', "SELECT ($max_sql) >= " . ($base + $want), 't'),
		"round $round: commits under way");
	crash($s);
	my @acked = ($s->{psql}->{stdout} =~ /committed (\d+)/g);
	my $last_acked = @acked ? $acked[-1] : $base;
	my $after = $node->safe_psql('postgres', $max_sql);
	cmp_ok($after, '>=', $last_acked,
		"round $round: no acknowledged change is lost ($after >= $last_acked)");
	cmp_ok($after, '<=', $base + 400,
		"round $round: nothing that was not sent appears");
}

# 2. the state file is older than the WAL: recovery replays the change
$node->safe_psql('postgres', 'CHECKPOINT');
$node->safe_psql('postgres', "SELECT dbgate.create_budget('w_old', 1)");
copy("$pgdata/dbgate.state", "$pgdata/dbgate.state.before") or die "copy: $!";
$node->safe_psql(
	'postgres', q{
	SELECT dbgate.create_budget('w_new', 2);
	SELECT dbgate.alter_budget('w_old', max_queued => 5);
});
$node->stop('immediate');
move("$pgdata/dbgate.state.before", "$pgdata/dbgate.state") or die "move: $!";
$node->start;
is( $node->safe_psql(
		'postgres',
		q{SELECT string_agg(budget || ':' || max_active || ':' || max_queued, ' ' ORDER BY budget) FROM dbgate.budgets WHERE budget LIKE 'w%'}
	),
	'w_new:2:0 w_old:1:5',
	'crash recovery replays the changes the state file does not hold');
$node->restart;
is( $node->safe_psql(
		'postgres',
		q{SELECT string_agg(budget, ' ' ORDER BY budget) FROM dbgate.budgets WHERE budget LIKE 'w%'}
	),
	'w_new w_old',
	'and wrote them to the state file');

# 3. a transaction that fails at COMMIT after logging its configuration
# record (a serialization failure), then a crash: it never appears
my $s1 = DbgateTest::Session->new($node);
my $s2 = DbgateTest::Session->new($node);
$s1->query('BEGIN ISOLATION LEVEL SERIALIZABLE; SELECT count(*) FROM t WHERE k = 1');
$s2->query('BEGIN ISOLATION LEVEL SERIALIZABLE; SELECT count(*) FROM t WHERE k = 2');
$s1->query('INSERT INTO t VALUES (2)');
$s2->query("INSERT INTO t VALUES (1); SELECT dbgate.create_budget('ghost', 1)");
$s1->query('COMMIT');
my (undef, undef, $state) = $s2->query('COMMIT');
is($state, '40001', 'the transaction fails at COMMIT');
$s1->quit;
$s2->quit;
$node->stop('immediate');
$node->start;
is($node->safe_psql('postgres',
		"SELECT count(*) FROM dbgate.budgets WHERE budget = 'ghost'"),
	'0', 'its change does not appear after crash recovery');

# 4. an uncommitted change at the moment of a crash never appears
my $s3 = DbgateTest::Session->new($node);
$s3->query("BEGIN; SELECT dbgate.create_budget('uncommitted', 1)");
crash($s3);
is($node->safe_psql('postgres',
		"SELECT count(*) FROM dbgate.budgets WHERE budget = 'uncommitted'"),
	'0', 'an uncommitted change does not appear after a crash');

$node->stop;
done_testing();
