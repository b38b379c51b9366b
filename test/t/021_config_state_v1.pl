# A state file written by dbgate 1.0 (format version 1: no database
# assignments, no 1.1 or 1.2 budget fields) is read by 1.1 and 1.2: the
# budgets and role assignments are loaded with the new fields at their
# defaults.  The next committed change writes format version 2 (it uses no
# 1.2 field), which is read back after a restart.  The version-1 file is
# built here byte by byte, as 1.0 wrote it.  Formats 2 and 3 are tested in
# 025_config_state_formats.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use DbgateState;
use DbgateTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = dbgate_node('statev1');
my $pgdata = $node->data_dir;
$node->safe_psql('postgres', 'CREATE ROLE v1_alice LOGIN; CREATE ROLE v1_bob LOGIN');
my ($alice, $bob) = split /\|/,
  $node->safe_psql('postgres',
	"SELECT (SELECT oid FROM pg_roles WHERE rolname = 'v1_alice'), (SELECT oid FROM pg_roles WHERE rolname = 'v1_bob')"
  );

$node->stop;
# dbgate 1.0's layout (DbgateState): header (magic, version, nbudgets,
# nroles), budgets (name[64], max_active, max_queued, queue_timeout_ms,
# statement_timeout_ms, lock_timeout_ms, fair), roles (roleid,
# budget[64]), CRC-32C; native byte order
my $file = state_image(
	version => 1,
	budgets => [
		{
			name => 'v1_one',
			max_active => 2,
			max_queued => 5,
			queue_timeout => 1000,
			statement_timeout => 60000,
			lock_timeout => 2000,
			fair => 1
		},
		{ name => 'v1_two', max_active => 7, fair => 0 }
	],
	roles => [ [ $alice, 'v1_one' ], [ $bob, 'v1_two' ] ]);
open my $fh, '>:raw', "$pgdata/dbgate.state" or die "cannot write: $!";
print $fh $file;
close $fh;

my $offset = -s $node->logfile;
$node->start;
ok( $node->log_contains(
		qr/dbgate loaded 2 budgets, 2 role assignments and 0 database assignments/,
		$offset),
	'the version-1 file is loaded');
ok(!$node->log_contains(qr/WARNING/, $offset), 'without a warning');

my $sql = q{SELECT string_agg(format('%s:%s:%s:%s:%s:%s:%s:%s:%s:%s:%s:%s:%s:%s',
	budget, max_active, max_queued, queue_timeout, statement_timeout, lock_timeout,
	fair, roles, scope, idle_in_transaction_timeout, parallel_workers, utility,
	enforce, databases), ' ' ORDER BY budget) FROM dbgate.budgets};
my $expected =
    'v1_one:2:5:00:00:01:00:01:00:00:00:02:t:{v1_alice}:statement:00:00:00:-1:f:t:{} '
  . 'v1_two:7:0:00:00:00:00:00:00:00:00:00:f:{v1_bob}:statement:00:00:00:-1:f:t:{}';
is($node->safe_psql('postgres', $sql),
	$expected, 'budgets and assignments of 1.0, the 1.1 fields at their defaults');
is( $node->safe_psql(
		'postgres',
		q{SELECT string_agg(format('%s:%s:%s:%s:%s:%s:%s:%s:%s', budget, queue_order,
		    overtake_limit, parent IS NULL, weight, max_rate, rate_burst, max_memory_mb,
		    min_cost), ' ' ORDER BY budget) FROM dbgate.budgets}
	),
	'v1_one:fifo:00:00:00.1:t:1:0:1:0:0 v1_two:fifo:00:00:00.1:t:1:0:1:0:0',
	'the 1.2 fields at their defaults');
my ($state) = run_sql($node, 'SELECT 1', user => 'v1_alice');
is($state, '', 'an assigned role runs');
is($node->safe_psql('postgres',
		"SELECT admitted FROM dbgate.status WHERE budget = 'v1_one'"),
	'1', 'gated by the loaded budget');

# the next change writes format version 2
$node->safe_psql(
	'postgres', q{
	SELECT dbgate.alter_budget('v1_two', scope => 'transaction', utility => true);
	SELECT dbgate.assign_database('postgres', 'v1_two');
});
my $v2 = slurp_file("$pgdata/dbgate.state");
is(state_version($v2), 2, 'a committed change writes format version 2');
$node->restart;
$expected =~ s/v1_two:(.*):statement:00:00:00:-1:f:t:\{\}/v1_two:$1:transaction:00:00:00:-1:t:t:{postgres}/;
is($node->safe_psql('postgres', $sql),
	$expected, 'the version-2 file is read back after a restart');

# a version-1 file with a bad checksum is still refused
$node->stop;
my $bad = $file;
substr($bad, -1, 1) = chr(ord(substr($bad, -1, 1)) ^ 0xFF);
open $fh, '>:raw', "$pgdata/dbgate.state" or die "cannot write: $!";
print $fh $bad;
close $fh;
$offset = -s $node->logfile;
$node->start;
ok($node->log_contains(qr/WARNING:.*"dbgate\.state" is invalid/, $offset),
	'a damaged version-1 file is refused with a warning');
is($node->safe_psql('postgres', 'SELECT count(*) FROM dbgate.budgets'),
	'0', 'and nothing is loaded from it');

$node->stop;
done_testing();
