# Rates and shadow levels in a tree.
#
# 1. A shadow level's token is taken once per admission: an enforcing
#    child under a shadow parent with a rate, under an enforcing
#    grandparent whose token is missing, queues (its fast and its slow
#    admission fail for the grandparent's token) and is admitted later; the
#    shadow parent counts one token for it, so its rate_burst of 2 covers
#    the two statements and its would_queue stays 0.
# 2. A shadow level counts a statement once in would_queue (or
#    would_reject), also when it is both full and out of tokens.
# 3. A shadow child's flood does not hold its enforcing sibling back
#    beyond the tokens it used: at an enforcing parent a shadow statement
#    takes a token if one is there and otherwise takes none (counted in the
#    parent's would_queue).  So the sibling (no queue places) is refused
#    while the token the flood took is not back, and finds one as soon as
#    one token interval has passed after the flood; had the flood taken a
#    token for each of its statements, the next would be seven intervals
#    away.
#
# Assertions are on counters and on what succeeded.  Every rate is low
# enough (one token per 100 s) that no token comes due while the test
# runs, except in the second part of 3, which lets one interval (5 s) pass
# on purpose and asserts only what that guarantees: a token is due.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use DbgateTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

my $node = dbgate_node('rateshadow');

sub counts
{
	my ($budgets, $cols) = @_;
	return $node->safe_psql('postgres',
		"SELECT string_agg(budget || ':' || concat_ws(':', $cols), ' ' ORDER BY budget)
		   FROM dbgate.status WHERE budget = ANY ('{$budgets}')");
}

# ---------------------------------------------------------------------------
# 1. one token of the shadow level per admission
$node->safe_psql(
	'postgres', q{
	CREATE ROLE ra_user LOGIN;
	SELECT dbgate.create_budget('ra_g', 10, max_rate => 0.01, rate_burst => 1);
	SELECT dbgate.create_budget('ra_s', 10, parent => 'ra_g', enforce => false,
	                            max_rate => 0.01, rate_burst => 2);
	SELECT dbgate.create_budget('ra_c', 5, 5, parent => 'ra_s');
	SELECT dbgate.assign_role('ra_user', 'ra_c');
});
my ($st) = run_sql($node, 'SELECT 1', user => 'ra_user');
is($st, '', 'token: the first statement takes the tokens of ra_s and ra_g');
my $w = DbgateTest::Session->new($node, user => 'ra_user');
$w->send('SELECT 2');
poll_ok($node, 'SELECT state FROM dbgate.backends WHERE pid = ' . $w->pid,
	'queued', 'token: the second waits for a token of ra_g (one per 100 s)');
$node->safe_psql('postgres', "SELECT dbgate.alter_budget('ra_g', max_rate => 100)");
my ($out) = $w->result;
is($out, '2', 'token: a raised rate of ra_g admits it');
is(counts('ra_c,ra_s,ra_g', 'admitted, admitted_after_wait, would_queue, rate_limited'),
	'ra_c:2:1:0:0 ra_g:0:0:0:1 ra_s:0:0:0:0',
	'token: ra_s took one token per admission (its burst of 2 covers them: would_queue 0)');
# its bucket is empty now: the next statement would have waited there
($st) = run_sql($node, 'SELECT 3', user => 'ra_user');
is(counts('ra_s', 'would_queue'), 'ra_s:1',
	'token: the third finds no token of ra_s (counted once)');
$w->quit;

# ---------------------------------------------------------------------------
# 2. counted once where a shadow level is full and has no token: ra_s (B 1,
# its bucket full again after the change, ra_g without a rate now) as a
# parent, dq_s as a shadow budget of its own (B 1, Q 0: would_reject)
$node->safe_psql(
	'postgres', q{
	CREATE ROLE dq_user LOGIN;
	SELECT dbgate.create_budget('dq_s', 1, 0, enforce => false,
	                            max_rate => 0.01, rate_burst => 1);
	SELECT dbgate.assign_role('dq_user', 'dq_s');
	SELECT dbgate.alter_budget('ra_s', max_active => 1, rate_burst => 1);
	SELECT dbgate.alter_budget('ra_g', max_rate => 0);
	SELECT dbgate.reset_stats();
});
my $lock = DbgateTest::Session->new($node);
$lock->query('SELECT pg_advisory_lock(1)');
my @holders;
for my $user (qw(ra_user dq_user))
{
	my $h = DbgateTest::Session->new($node, user => $user);
	$h->send('SELECT pg_advisory_xact_lock_shared(1)');
	push @holders, $h;
}
poll_ok($node, q{SELECT string_agg(budget || ':' || active, ' ' ORDER BY budget)
	FROM dbgate.status WHERE budget IN ('ra_s', 'dq_s')},
	'dq_s:1 ra_s:1', 'once: ra_s and dq_s each have a statement active');
($st) = run_sql($node, 'SELECT 4', user => 'ra_user');
is($st, '', 'once: ra_s, full and out of tokens, holds nobody back');
($st) = run_sql($node, 'SELECT 5', user => 'dq_user');
is($st, '', 'once: dq_s, full and out of tokens, holds nobody back');
$lock->query('SELECT pg_advisory_unlock(1)');
$_->result for @holders;
$_->quit for @holders;
is(counts('ra_s,dq_s', 'would_queue, would_reject'), 'dq_s:0:1 ra_s:1:0',
	'once: one would_queue at ra_s, one would_reject (and no would_queue) at dq_s');

# ---------------------------------------------------------------------------
# 3. a shadow child's flood and its enforcing sibling
$node->safe_psql(
	'postgres', q{
	CREATE ROLE sf_shadow LOGIN;
	CREATE ROLE sf_enforce LOGIN;
	SELECT dbgate.create_budget('sf_p', 20, max_rate => 0.01, rate_burst => 1);
	SELECT dbgate.create_budget('sf_s', 20, parent => 'sf_p', enforce => false);
	SELECT dbgate.create_budget('sf_e', 5, 0, parent => 'sf_p');
	SELECT dbgate.assign_role('sf_shadow', 'sf_s');
	SELECT dbgate.assign_role('sf_enforce', 'sf_e');
});
my $flood = join(' ', ('SELECT 1;') x 8);
($st) = run_sql($node, $flood, user => 'sf_shadow');
is($st, '', 'flood: eight statements of the shadow child, none held back');
is(counts('sf_s,sf_p', 'admitted, would_queue'), 'sf_p:0:7 sf_s:8:0',
	'flood: the first took the token of sf_p, the parent would have held back seven');
my ($err, $state);
($st, $out, $err) = run_sql($node, 'SELECT 6', user => 'sf_enforce');
is($st, '53300', 'flood: the enforcing sibling finds no token of sf_p (one per 100 s)')
  or diag($err);

# The same flood at one token per 5 s (the change fills the bucket); one
# interval after its last statement, a token is due whatever the flood
# took of the bucket meanwhile -- unless the flood took one for every
# statement.  (The 0.1 s beyond the interval covers the difference between
# the clock the test sleeps on and the server's monotonic one.)
$node->safe_psql('postgres',
	"SELECT dbgate.alter_budget('sf_p', max_rate => 0.2); SELECT dbgate.reset_stats()");
($st) = run_sql($node, $flood, user => 'sf_shadow');
is($st, '', 'flood again: none held back');
Time::HiRes::sleep(5 + 0.1);
($st, $out, $err) = run_sql($node, 'SELECT 6', user => 'sf_enforce');
is($st, '', 'flood: the enforcing sibling finds the next token of sf_p')
  or diag($err);
is(counts('sf_e', 'admitted, rejected_full'), 'sf_e:1:0',
	'flood: admitted, not refused');

$node->stop;
done_testing();
