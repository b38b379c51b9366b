# Classification seen by a session that stays connected: a GRANT or REVOKE
# of membership and a change of a group's assignment, made by another
# session, take effect at the next statement; so does a change of the
# database's assignment.  A dropped database loses its assignment.
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

# the budget this session is in now, '' when not gated
sub my_budget
{
	my ($out, $err) = $s->query(
		'SELECT budget FROM dbgate.backends WHERE pid = pg_backend_pid()');
	die "query failed: $err" if $err ne '';
	return $out;
}

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
$node->stop;
done_testing();
