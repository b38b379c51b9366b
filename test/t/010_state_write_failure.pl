# A configuration commit whose state file cannot be written fails with a
# clear error and changes nothing, in shared memory or on disk.  The write
# is made to fail by a directory squatting on the temporary file's name.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use DbgateTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = dbgate_node('writefail');
my $pgdata = $node->data_dir;

sub budgets
{
	return $node->safe_psql('postgres',
		"SELECT coalesce(string_agg(budget || ':' || max_active, ' ' ORDER BY budget), '') FROM dbgate.budgets"
	);
}

$node->safe_psql('postgres', "SELECT dbgate.create_budget('w1', 1)");
$node->safe_psql('postgres', 'CREATE ROLE w_role LOGIN');
is(budgets(), 'w1:1', 'w1 committed');

mkdir "$pgdata/dbgate.state.tmp" or die "mkdir: $!";

my ($state, undef, $err) = run_sql($node,
	"BEGIN; SELECT dbgate.create_budget('w2', 2); SELECT dbgate.alter_budget('w1', max_active => 5); SELECT dbgate.assign_role('w_role', 'w1'); COMMIT;"
);
isnt($state, '', "the commit fails (SQLSTATE $state)");
like($err, qr/could not create file "dbgate\.state\.tmp"/,
	'the error names the state file');
is(budgets(), 'w1:1', 'nothing changed in shared memory');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM dbgate.status WHERE budget = 'w2'"),
	'0',
	'no status row for the failed budget');
is( $node->safe_psql('postgres',
		"SELECT coalesce(array_to_string(roles, ','), '') FROM dbgate.budgets WHERE budget = 'w1'"),
	'',
	'no assignment either');

# a gated statement of w_role is not gated (the assignment did not commit)
my ($st2) = run_sql($node, 'SELECT 1', user => 'w_role');
is($st2, '', 'w_role runs');
is( $node->safe_psql('postgres',
		"SELECT admitted FROM dbgate.status WHERE budget = 'w1'"),
	'0',
	'and was not admitted by w1');

rmdir "$pgdata/dbgate.state.tmp" or die "rmdir: $!";
$node->restart;
is(budgets(), 'w1:1', 'after a restart: only the committed configuration');

($state) = run_sql($node, "SELECT dbgate.create_budget('w2', 2)");
is($state, '', 'with the file writable again, the commit succeeds');
$node->restart;
is(budgets(), 'w1:1 w2:2', 'and survives a restart');

$node->stop;
done_testing();
