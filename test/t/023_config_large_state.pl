# A state file with 100,000 role and 100,000 database assignments loads at
# start-up, completely, and a commit writes it back: loading sorts and
# searches instead of comparing every record with every other one (a
# quadratic loader took about 11 s for 100,000 role assignments).  The
# load is timed by the CPU time of the postmaster, which reads the file
# as it starts: unlike the time the start takes, that does not grow when
# the machine is busy.  The file is built here byte by byte in format
# version 2.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use DbgateState;
use DbgateTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $N = 100_000;

my $node = dbgate_node('largestate',
	conf => "dbgate.max_roles = 200000\n");
my $pgdata = $node->data_dir;
$node->safe_psql('postgres', 'CREATE ROLE big_user LOGIN');
my $user_oid = $node->safe_psql('postgres',
	"SELECT oid FROM pg_roles WHERE rolname = 'big_user'");
my $db_oid = $node->safe_psql('postgres',
	"SELECT oid FROM pg_database WHERE datname = 'postgres'");
$node->stop;

# format 2 (DbgateState): header (magic, version, nbudgets, nroles, ndbs,
# flags, lsn), budgets (name[64], six int32 of 1.0, then scope,
# idle_timeout_ms, parallel_workers, utility, enforce, padding), roles
# (oid, budget[64]), databases (oid, budget[64]), CRC-32C.
# OIDs far above those in use, in an order the loader must sort, and the
# real role and database among them
my @roles = map { 3_000_000_000 - 7 * $_ } 1 .. $N - 1;
my @dbs = map { 3_500_000_000 - 11 * $_ } 1 .. $N - 1;
my $bytes = state_image(
	version => 2,
	budgets => [
		{ name => 'big_a', max_active => 3 },
		{
			name => 'big_b',
			max_active => 5,
			scope => 1,
			parallel_workers => 2,
			utility => 1
		}
	],
	roles => [ (map { [ $_, ($_ % 2) ? 'big_a' : 'big_b' ] } @roles), [ $user_oid, 'big_a' ] ],
	dbs => [ (map { [ $_, ($_ % 2) ? 'big_a' : 'big_b' ] } @dbs), [ $db_oid, 'big_b' ] ]);
open my $fh, '>:raw', "$pgdata/dbgate.state" or die "cannot write: $!";
print $fh $bytes;
close $fh;

# CPU seconds (user and system) that process pid has used
sub cpu_seconds
{
	my ($pid) = @_;
	my $stat = slurp_file("/proc/$pid/stat");
	# the fields after the command name, which is in parentheses
	my @f = split ' ', substr($stat, rindex($stat, ')') + 2);
	chomp(my $hz = `getconf CLK_TCK`);
	return ($f[11] + $f[12]) / $hz;    # utime and stime (fields 14, 15)
}

my $offset = -s $node->logfile;
$node->start;
my $took = cpu_seconds($node->{_pid});
ok( $node->log_contains(
		qr/dbgate loaded 2 budgets, $N role assignments and $N database assignments/,
		$offset),
	"all $N role and $N database assignments are loaded");
ok(!$node->log_contains(qr/WARNING/, $offset), 'without a warning');
# The bound separates the two loaders: the postmaster's whole start,
# with this loader, takes about a third of a second of CPU here, the
# quadratic loader took about 11 s; 2 s lies a factor of five or more
# from each.
cmp_ok($took, '<', 2, sprintf('the postmaster used %.2f s of CPU to start', $took));

my ($state) = run_sql($node, 'SELECT 1', user => 'big_user');
is($state, '', 'the assigned role runs');
is( $node->safe_psql('postgres',
		"SELECT admitted FROM dbgate.status WHERE budget = 'big_a'"),
	'1',
	'its statement was gated by the budget of its loaded assignment');
is( $node->safe_psql(
		'postgres',
		q{SELECT string_agg(format('%s:%s:%s', budget, roles, databases), ' ' ORDER BY budget) FROM dbgate.budgets}
	),
	'big_a:{big_user}:{} big_b:{}:{postgres}',
	'the existing role and database show in dbgate.budgets');

# a commit writes all of it back
$node->safe_psql('postgres',
	"SELECT dbgate.alter_budget('big_b', max_active => 6)");
is(-s "$pgdata/dbgate.state", length($bytes), 'the written file has the same size');
$offset = -s $node->logfile;
$node->restart;
ok( $node->log_contains(
		qr/dbgate loaded 2 budgets, $N role assignments and $N database assignments/,
		$offset),
	'the file written by the commit loads completely after a restart');
is( $node->safe_psql('postgres',
		"SELECT max_active FROM dbgate.budgets WHERE budget = 'big_b'"),
	'6',
	'with the committed change');

$node->stop;
done_testing();
