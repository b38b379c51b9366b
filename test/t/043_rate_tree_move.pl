# rate_limited is counted at the level whose token a waiter lacked, also
# when the tree changes shape while it waits: a statement of a child that
# waits for a token of its parent q, and whose budget is then moved under
# a parent p without a rate, runs at once and counts in no rate_limited
# (p never held it back for a token; q no longer holds it back at all).
# One that keeps q through a change of the shape elsewhere counts at q.
#
# q's rate is low enough that no token comes due while the test runs (one
# per 100 s, one per 50 s); each wait is ended on purpose: by the move,
# and by a raised rate of q (which fills its bucket) once the change
# elsewhere is seen to have left the waiter waiting.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use DbgateTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = dbgate_node('ratemove');
$node->safe_psql(
	'postgres', q{
	CREATE ROLE rm_user LOGIN;
	SELECT dbgate.create_budget('rm_q', 5, max_rate => 0.01, rate_burst => 1);
	SELECT dbgate.create_budget('rm_p', 5);
	SELECT dbgate.create_budget('rm_c', 5, 5, parent => 'rm_q');
	SELECT dbgate.create_budget('rm_other', 5, parent => 'rm_q');
	SELECT dbgate.assign_role('rm_user', 'rm_c');
});

my $rl_sql = q{SELECT string_agg(budget || ':' || rate_limited, ' ' ORDER BY budget)
	FROM dbgate.status};

# 1. moved away from the parent whose token it waited for
my ($st) = run_sql($node, 'SELECT 1', user => 'rm_user');
is($st, '', 'moved: the first statement takes the token of rm_q');
my $w = DbgateTest::Session->new($node, user => 'rm_user');
$w->send('SELECT 2');
poll_ok($node, 'SELECT state FROM dbgate.backends WHERE pid = ' . $w->pid,
	'queued', 'moved: the second waits for a token of rm_q (one per 100 s)');
$node->safe_psql('postgres', "SELECT dbgate.alter_budget('rm_c', parent => 'rm_p')");
my ($out) = $w->result;
is($out, '2', 'moved under rm_p, it runs at once');
is($node->safe_psql('postgres', $rl_sql), 'rm_c:0 rm_other:0 rm_p:0 rm_q:0',
	'moved: rate_limited is 0 everywhere (rm_p has no rate, rm_q no longer holds it)');

# 2. the tree changes elsewhere while it waits: rm_q still holds it back
$node->safe_psql(
	'postgres', q{
	SELECT dbgate.alter_budget('rm_c', parent => 'rm_q');
	SELECT dbgate.alter_budget('rm_q', max_rate => 0.02);
	SELECT dbgate.reset_stats();
});
($st) = run_sql($node, 'SELECT 1', user => 'rm_user');
is($st, '', 'kept: the first statement takes the token of rm_q');
$w->send('SELECT 3');
poll_ok($node, 'SELECT state FROM dbgate.backends WHERE pid = ' . $w->pid,
	'queued', 'kept: the second waits for a token of rm_q (one per 50 s)');
$node->safe_psql('postgres', "SELECT dbgate.alter_budget('rm_other', parent => 'rm_p')");
is($node->safe_psql('postgres', 'SELECT state FROM dbgate.backends WHERE pid = ' . $w->pid),
	'queued', 'kept: the change elsewhere leaves it waiting for rm_q');
$node->safe_psql('postgres', "SELECT dbgate.alter_budget('rm_q', max_rate => 2)");
($out) = $w->result;
is($out, '3', 'kept: it runs once rm_q has a token for it');
is($node->safe_psql('postgres', $rl_sql), 'rm_c:0 rm_other:0 rm_p:0 rm_q:1',
	'kept: counted in rate_limited of rm_q, whose token it waited for');

$w->quit;
$node->stop;
done_testing();
