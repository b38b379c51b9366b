# Reads inside a transaction that has changed the configuration never fail
# because another session committed meanwhile: the transaction sees the
# configuration as of its first change with its own changes on top.  A
# conflict with what was committed meanwhile shows at COMMIT, with the
# usual SQLSTATE, and changes nothing.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use DbgateTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = dbgate_node('txnreads');

sub budgets
{
	return $node->safe_psql('postgres',
		"SELECT coalesce(string_agg(budget || ':' || max_active, ' ' ORDER BY budget), '') FROM dbgate.budgets"
	);
}

$node->safe_psql('postgres',
	"SELECT dbgate.create_budget('x', 1); SELECT dbgate.create_budget('y', 1)");

my $a = DbgateTest::Session->new($node);
my $b = DbgateTest::Session->new($node);

# 1. A changes x; B drops x and commits; A keeps reading its own view
my ($out, $err, $state) =
  $a->query("BEGIN; SELECT dbgate.alter_budget('x', max_active => 2)");
is($state, '', 'A alters x in an open transaction');
(undef, $err) = $b->query("SELECT dbgate.drop_budget('x')");
is($err, '', 'B drops x and commits');
($out, $err, $state) =
  $a->query("SELECT budget || ':' || max_active FROM dbgate.budgets ORDER BY 1");
is($state, '', 'A reads dbgate.budgets after B dropped x: no error');
is($out, "x:2\ny:1", 'A sees the configuration of its first change with its own change');
($out, $err, $state) =
  $a->query("SELECT dbgate.alter_budget('y', max_active => 3)");
is($state, '', 'A changes another budget');
($out, $err, $state) = $a->query("SELECT dbgate.reset_stats('x')");
is($state, '', 'reset_stats of a budget A sees works in A');
($out, $err, $state) = $a->query('COMMIT');
is($state, '42704', 'A\'s COMMIT fails: x was dropped meanwhile (42704)');
is(budgets(), 'y:1', 'nothing of A\'s transaction is in place');

# 2. savepoints: a rolled-back subtransaction goes, the rest stays, and the
# view still does not depend on what others committed
$node->safe_psql('postgres', "SELECT dbgate.create_budget('x', 1)");
$a->query("BEGIN; SELECT dbgate.alter_budget('x', max_active => 4)");
$a->query("SAVEPOINT s1; SELECT dbgate.alter_budget('y', max_active => 5)");
$b->query("SELECT dbgate.create_budget('z', 6)");
($out, $err, $state) = $a->query(
	"ROLLBACK TO SAVEPOINT s1; SELECT string_agg(budget || ':' || max_active, ' ' ORDER BY budget) FROM dbgate.budgets"
);
is($state, '', 'A reads after ROLLBACK TO SAVEPOINT');
is($out, 'x:4 y:1', 'the subtransaction\'s change is gone, the earlier one stays');
($out, $err, $state) = $a->query('COMMIT');
is($state, '', 'A commits');
is(budgets(), 'x:4 y:1 z:6', 'A\'s change and B\'s budget are both in place');

# 3. a transaction without changes always reads the committed state
($out) = $a->query("BEGIN; SELECT count(*) FROM dbgate.budgets");
$b->query("SELECT dbgate.drop_budget('z')");
($out) = $a->query("SELECT count(*) FROM dbgate.budgets");
is($out, '2', 'a transaction without changes sees a commit of another session');
$a->query('COMMIT');

$a->quit;
$b->quit;
$node->stop;
done_testing();
