# Concurrent configuration changes: transactions of two sessions that change
# budgets at the same time.  Each commit replays its changes on the
# configuration committed at that moment, so changes to different budgets
# (or different fields of one budget) both survive, and a change that
# conflicts with one committed meanwhile fails at COMMIT with the usual
# SQLSTATE and changes nothing.  Everything is checked again after a
# restart (the state file).
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use DbgateTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = dbgate_node('concurrent');

sub budgets
{
	return $node->safe_psql('postgres',
		"SELECT string_agg(format('%s:%s:%s', budget, max_active, max_queued), ' ' ORDER BY budget) FROM dbgate.budgets"
	);
}

my $s1 = DbgateTest::Session->new($node);
my $s2 = DbgateTest::Session->new($node);

# 1. two new budgets, committed in the opposite order of their creation
$s1->query("BEGIN; SELECT dbgate.create_budget('cc_a', 1, 1)");
$s2->query("BEGIN; SELECT dbgate.create_budget('cc_b', 2, 2)");
is(budgets(), '', 'uncommitted budgets are not visible to others');
my (undef, $err) = $s2->query('COMMIT');
is($err, '', 'second session commits');
(undef, $err) = $s1->query('COMMIT');
is($err, '', 'first session commits');
is(budgets(), 'cc_a:1:1 cc_b:2:2', 'both budgets exist');

# 2. different fields of one budget: both changes survive
$s1->query("BEGIN; SELECT dbgate.alter_budget('cc_a', max_active => 7)");
$s2->query("BEGIN; SELECT dbgate.alter_budget('cc_a', max_queued => 9)");
(undef, $err) = $s1->query('COMMIT');
is($err, '', 'first alter commits');
(undef, $err) = $s2->query('COMMIT');
is($err, '', 'second alter commits');
is(budgets(), 'cc_a:7:9 cc_b:2:2', 'both fields changed');

# 3. the same name created twice: the second COMMIT fails with 42710
$s1->query("BEGIN; SELECT dbgate.create_budget('cc_x', 3)");
$s2->query("BEGIN; SELECT dbgate.create_budget('cc_x', 4)");
(undef, $err) = $s1->query('COMMIT');
is($err, '', 'first create of cc_x commits');
my (undef, undef, $state) = $s2->query('COMMIT');
is($state, '42710', 'second create of cc_x fails at COMMIT with 42710');
is(budgets(), 'cc_a:7:9 cc_b:2:2 cc_x:3:0', 'cc_x has the first values');
($state) = ($s2->query('SELECT 1'))[2];
is($state, '', 'the failed session is usable again');

# 4. an alter of a budget dropped meanwhile fails with 42704
$s1->query("BEGIN; SELECT dbgate.alter_budget('cc_x', max_active => 5)");
$s2->query("BEGIN; SELECT dbgate.drop_budget('cc_x')");
(undef, $err) = $s2->query('COMMIT');
is($err, '', 'drop commits');
(undef, undef, $state) = $s1->query('COMMIT');
is($state, '42704', 'alter of the dropped budget fails at COMMIT with 42704');
is(budgets(), 'cc_a:7:9 cc_b:2:2', 'cc_x is gone, nothing else changed');

# 5. an assignment to a budget dropped meanwhile fails, and its
#    transaction's other changes go with it
$node->safe_psql('postgres', 'CREATE ROLE cc_role LOGIN');
$s1->query(
	"BEGIN; SELECT dbgate.create_budget('cc_y', 1); SELECT dbgate.assign_role('cc_role', 'cc_b')"
);
$s2->query("BEGIN; SELECT dbgate.drop_budget('cc_b')");
(undef, $err) = $s2->query('COMMIT');
is($err, '', 'drop of cc_b commits');
(undef, undef, $state) = $s1->query('COMMIT');
is($state, '42704', 'assignment to the dropped budget fails at COMMIT');
is(budgets(), 'cc_a:7:9', 'cc_y was not created either');

# 6. one session rolls back, the other commits; a savepoint rolled back
$s1->query(
	"BEGIN; SELECT dbgate.create_budget('cc_r', 1); SAVEPOINT s; SELECT dbgate.create_budget('cc_s', 1); ROLLBACK TO s"
);
$s2->query("BEGIN; SELECT dbgate.create_budget('cc_t', 1)");
$s2->query('ROLLBACK');
(undef, $err) = $s1->query('COMMIT');
is($err, '', 'commit after a rolled-back savepoint');
is(budgets(), 'cc_a:7:9 cc_r:1:0', 'only the committed, unrolled change is there');

# 7. many sessions at once, each creating its own budget
my @s = map { DbgateTest::Session->new($node) } 1 .. 6;
$s[$_]->query("BEGIN; SELECT dbgate.create_budget('cc_m$_', 1)") for 0 .. $#s;
my $fails = 0;
for my $i (reverse 0 .. $#s)
{
	my (undef, $e) = $s[$i]->query('COMMIT');
	$fails++ if $e ne '';
}
is($fails, 0, 'six concurrent commits all succeed');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM dbgate.budgets WHERE budget LIKE 'cc_m%'"),
	'6',
	'six budgets');
$_->quit for @s;

$s1->quit;
$s2->quit;

# all of it survives a restart (state file written at each commit)
my $before = budgets();
$node->restart;
is(budgets(), $before, 'the same budgets after a restart');

$node->stop;
done_testing();
