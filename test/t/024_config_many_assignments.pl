# Many assignments in one transaction: beyond a few dozen, a transaction's
# copy of the configuration finds assignments through a hash index by OID,
# kept up to date as assignments are added, replaced and removed (by
# unassign, drop_budget with force, DROP ROLE, ROLLBACK TO SAVEPOINT).
# What dbgate.budgets shows inside the transaction, after COMMIT and after
# a restart must be exactly what the calls made.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use DbgateTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $N = 300;
my $node = dbgate_node('many');
$node->safe_psql('postgres',
	join('', map { "CREATE DATABASE m_db$_;\n" } 1 .. 40));
$node->safe_psql(
	'postgres', qq{
	DO \$\$ BEGIN
	  FOR i IN 1..$N LOOP EXECUTE format('CREATE ROLE m_%s', i); END LOOP;
	END \$\$;
	SELECT dbgate.create_budget('m_a', 1);
	SELECT dbgate.create_budget('m_b', 1);
	SELECT dbgate.create_budget('m_c', 1);
});

# the expected assignments, kept here as the calls are made
my (%role, %db);
my $sql = "BEGIN;\n";
for my $i (1 .. $N) { $sql .= "SELECT dbgate.assign_role('m_$i', 'm_a');\n"; $role{$i} = 'm_a'; }
for my $i (1 .. 40) { $sql .= "SELECT dbgate.assign_database('m_db$i', 'm_b');\n"; $db{$i} = 'm_b'; }
for (my $i = 3; $i <= $N; $i += 3) { $sql .= "SELECT dbgate.unassign_role('m_$i');\n"; delete $role{$i}; }
for (my $i = 5; $i <= $N; $i += 5) { $sql .= "SELECT dbgate.assign_role('m_$i', 'm_b');\n"; $role{$i} = 'm_b'; }
for (my $i = 2; $i <= 40; $i += 4) { $sql .= "SELECT dbgate.unassign_database('m_db$i');\n"; delete $db{$i}; }
$sql .= "SAVEPOINT s;\n";
for my $i (1 .. 50) { $sql .= "SELECT dbgate.assign_role('m_$i', 'm_c');\n"; }
$sql .= "SELECT dbgate.drop_budget('m_a', force => true);\n";
$sql .= "ROLLBACK TO SAVEPOINT s;\n";
for (my $i = 7; $i <= $N; $i += 7) { $sql .= "SELECT dbgate.assign_role('m_$i', 'm_c');\n"; $role{$i} = 'm_c'; }
$sql .= "SELECT dbgate.drop_budget('m_b', force => true);\n";
for my $k (keys %role) { delete $role{$k} if $role{$k} eq 'm_b'; }
%db = ();
for my $i (1 .. 10) { $sql .= "SELECT dbgate.assign_database('m_db$i', 'm_c');\n"; $db{$i} = 'm_c'; }
$sql .= "DROP ROLE m_14;\n";
delete $role{14};

sub expected
{
	my @lines;
	for my $b (qw(m_a m_c))
	{
		my @r = sort map { "m_$_" } grep { $role{$_} eq $b } keys %role;
		my @d = sort map { "m_db$_" } grep { $db{$_} eq $b } keys %db;
		push @lines, "$b:" . join(',', @r) . ':' . join(',', @d);
	}
	return join("\n", @lines);
}
my $view = q{SELECT budget || ':' || array_to_string(roles, ',') || ':' || array_to_string(databases, ',')
	FROM dbgate.budgets ORDER BY budget};

my ($state, $out, $err) = run_sql($node, $sql . "$view;\nCOMMIT;");
is($state, '', 'the transaction runs') or diag($err);
my @got = grep { /^m_/ } split /\n/, $out;
is(join("\n", @got), expected(), 'inside the transaction the view shows exactly its changes');
is($node->safe_psql('postgres', $view), expected(), 'after COMMIT');
$node->restart;
is($node->safe_psql('postgres', $view), expected(), 'after a restart');

$node->stop;
done_testing();
