# Classification seen by a session that stays connected: a GRANT or REVOKE
# of membership, a change of a group's assignment and of superuser status,
# made by another session, take effect at the next statement; so does a
# change of the database's assignment, which ranks below the role's own and
# its groups' and above dbgate.default_budget.  A dropped database loses
# its assignment.
#
# The session reads its own row of dbgate.backends (its statement holds a
# slot while it runs); budgets have room, nothing queues.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DbgateTest;

my $node = dbgate_node('classify');
$node->safe_psql(
	'postgres', q{
	CREATE ROLE c_user LOGIN IN ROLE pg_monitor;
	CREATE ROLE c_group;
	CREATE ROLE c_outer;
	GRANT c_outer TO c_group;
	SELECT dbgate.create_budget('c_group_b', 10);
	SELECT dbgate.create_budget('c_outer_b', 10);
	SELECT dbgate.assign_role('c_group', 'c_group_b');
});

my $s = DbgateTest::Session->new($node, user => 'c_user');

# the budget a session is in now, '' when not gated
sub my_budget_of
{
	my ($sess) = @_;
	my ($out, $err) = $sess->query(
		'SELECT budget FROM dbgate.backends WHERE pid = pg_backend_pid()');
	die "query failed: $err" if $err ne '';
	return $out;
}
sub my_budget { return my_budget_of($s); }

is(my_budget(), '', 'not a member of any assigned role: not gated');

$node->safe_psql('postgres', 'GRANT c_group TO c_user');
is(my_budget(), 'c_group_b', 'GRANT of membership counts from the next statement');

$node->safe_psql('postgres', q{SELECT dbgate.unassign_role('c_group')});
is(my_budget(), '', 'the group loses its assignment: not gated');

$node->safe_psql('postgres', q{SELECT dbgate.assign_role('c_outer', 'c_outer_b')});
is(my_budget(), 'c_outer_b', 'a group of the group, assigned meanwhile');

$node->safe_psql('postgres', q{SELECT dbgate.assign_role('c_group', 'c_group_b')});
is(my_budget(), 'c_group_b', 'the nearer group, assigned again');

$node->safe_psql('postgres', 'REVOKE c_outer FROM c_group');
is(my_budget(), 'c_group_b', 'a REVOKE further up changes nothing here');

$node->safe_psql('postgres', 'REVOKE c_group FROM c_user');
is(my_budget(), '', 'REVOKE of membership counts from the next statement');

$node->safe_psql('postgres', 'GRANT c_group TO c_user');
is(my_budget(), 'c_group_b', 'GRANT again');

# superuser status is watched too
$node->safe_psql('postgres', 'ALTER ROLE c_user SUPERUSER');
is(my_budget(), '', 'a role made superuser is no longer gated');
$node->safe_psql('postgres', 'ALTER ROLE c_user NOSUPERUSER');
is(my_budget(), 'c_group_b', 'and gated again without superuser');

$s->quit;

# ---------------------------------------------------------------------------
# The database's assignment, below the role's own and its groups'.

$node->safe_psql(
	'postgres', q{
	CREATE DATABASE c_db;
	SELECT dbgate.create_budget('c_db_b', 10);
	SELECT dbgate.assign_database('c_db', 'c_db_b');
	ALTER ROLE c_user SET dbgate.default_budget = 'c_outer_b';
});
$node->safe_psql('c_db', 'CREATE EXTENSION dbgate');
$s = DbgateTest::Session->new($node, user => 'c_user', db => 'c_db');
is(my_budget(), 'c_group_b', 'in database c_db: the group beats the database');
$node->safe_psql('postgres', 'REVOKE c_group FROM c_user');
is(my_budget(), 'c_db_b', 'without the group: the database\'s budget');
$node->safe_psql('postgres', q{SELECT dbgate.assign_database('c_db', 'c_group_b')});
is(my_budget(), 'c_group_b', 'a new assignment of the database counts at once');
$node->safe_psql('postgres', q{SELECT dbgate.unassign_database('c_db')});
is(my_budget(), 'c_outer_b', 'unassigned database: the default budget');
$node->safe_psql('postgres', q{SELECT dbgate.assign_database('c_db', 'c_db_b')});
is(my_budget(), 'c_db_b', 'the database beats the default budget');
$node->safe_psql('postgres', q{SELECT dbgate.assign_role('c_user', 'c_outer_b')});
is(my_budget(), 'c_outer_b', 'the own assignment beats the database');
$node->safe_psql('postgres', q{SELECT dbgate.unassign_role('c_user')});
$s->quit;

my $other = DbgateTest::Session->new($node, user => 'c_user');
is(my_budget_of($other), 'c_outer_b', 'another database is not in c_db\'s budget');
$other->quit;

# a dropped database loses its assignment
$node->safe_psql('postgres', 'DROP DATABASE c_db');
is( $node->safe_psql(
		'postgres', q{SELECT databases FROM dbgate.budgets WHERE budget = 'c_db_b'}),
	'{}', 'the dropped database is no longer assigned');
my ($state, $out, $err) =
  run_sql($node, q{SELECT dbgate.drop_budget('c_db_b')});
is($state, '', 'its budget can be dropped without force');

$node->stop;
done_testing();
