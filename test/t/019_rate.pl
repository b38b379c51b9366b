# max_rate and rate_burst: a token bucket beside the slots.  A statement
# that finds a free slot but no token waits in the queue like one that
# finds no slot: it is admitted when its token is due and not before, it
# can time out or be canceled there, a raised rate admits it at once, and
# after an idle period rate_burst statements pass at once.  rate_limited
# counts the admissions that waited for a token.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use DbgateTest;

my $node = dbgate_node('rate');
$node->safe_psql(
	'postgres', q{
	CREATE ROLE rt_user LOGIN;
	SELECT dbgate.create_budget('rt', max_active => 4, max_queued => 4,
	                            max_rate => 2, rate_burst => 1);
	SELECT dbgate.assign_role('rt_user', 'rt');
});

sub rate_status
{
	return $node->safe_psql('postgres',
		"SELECT admitted || ':' || admitted_after_wait || ':' || rate_limited || ':'
		        || rejected_timeout || ':' || canceled_waiting || ':' || active || ':' || queued
		   FROM dbgate.status WHERE budget = 'rt'");
}

# ---------------------------------------------------------------------------
# Due, not before: at 2 per second the second of two statements sent back
# to back waits for about half a second.
my $s = DbgateTest::Session->new($node, user => 'rt_user');
# the time each statement runs, taken after its admission
my $clock = 'SELECT extract(epoch FROM clock_timestamp())';
my ($first) = $s->query($clock);
my ($second, $err, $state) = $s->query($clock);
cmp_ok($second - $first, '>=', 0.499,
	'due: the second runs once its token is due, not before (' . ($second - $first) . ' s)');
my ($out, $waited);
is(rate_status(), '2:1:1:0:0:0:0', 'due: one admission waited for a token');

# ---------------------------------------------------------------------------
# Queue timeout while waiting for a token (one every 2 s, 200 ms queue
# timeout).
$node->safe_psql('postgres', q{
	SELECT dbgate.reset_stats('rt');
	SELECT dbgate.alter_budget('rt', max_rate => 0.5, queue_timeout => '200ms');
});
$s->query('SELECT 1');
($out, $err, $state) = $s->query('SELECT 2');
is($state, '53300', 'timeout: 53300 while waiting for a token');
like($err, qr/timed out waiting for a slot in budget "rt"/, 'timeout: the message says so');
is(rate_status(), '1:0:0:1:0:0:0', 'timeout: counted in rejected_timeout, nothing held');

# ---------------------------------------------------------------------------
# Cancel while waiting for a token (one every 10 s).
$node->safe_psql('postgres', q{
	SELECT dbgate.reset_stats('rt');
	SELECT dbgate.alter_budget('rt', max_rate => 0.1, queue_timeout => '0');
});
$s->query('SELECT 1');
$s->send('SELECT 2');
poll_ok($node, "SELECT state FROM dbgate.backends WHERE pid = " . $s->pid,
	'queued', 'cancel: the statement waits for its token');
$node->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $s->pid . ')');
($out, $err, $state) = $s->result;
is($state, '57014', 'cancel: the wait ends with 57014');
is(rate_status(), '1:0:0:0:1:0:0', 'cancel: counted in canceled_waiting, nothing held');

# ---------------------------------------------------------------------------
# A raised rate admits the waiter at once (its token was 10 s away).
# (the token was taken a moment ago by the canceled statement's
# predecessor)
$node->safe_psql('postgres', "SELECT dbgate.reset_stats('rt')");
$s->send('SELECT 2');
poll_ok($node, "SELECT state FROM dbgate.backends WHERE pid = " . $s->pid,
	'queued', 'raise: the statement waits for its token');
my $t0 = time;
$node->safe_psql('postgres', "SELECT dbgate.alter_budget('rt', max_rate => 100)");
($out, $err, $state) = $s->result;
my $after = time - $t0;
is($out, '2', 'raise: the waiter runs');
cmp_ok($after, '<', 5, "raise: long before its old token was due ($after s)");
is(rate_status(), '1:1:1:0:0:0:0', 'raise: counted as admitted after a wait for a token');

# ---------------------------------------------------------------------------
# Burst: after the change the bucket is full; five pass at once, the sixth
# waits about one second (1 per second, burst 5).
$node->safe_psql('postgres', q{
	SELECT dbgate.reset_stats('rt');
	SELECT dbgate.alter_budget('rt', max_rate => 1, rate_burst => 5);
});
my ($burst) = $s->query(join('; ', ($clock) x 5));
my @t = split /\n/, $burst;
cmp_ok($t[4] - $t[0], '<', 0.5, 'burst: five run back to back');
is(rate_status(), '5:0:0:0:0:0:0', 'burst: five admitted without waiting');
my ($sixth) = $s->query($clock);
cmp_ok($sixth - $t[0], '>=', 0.999,
	'burst: the sixth runs a second after the first (' . ($sixth - $t[0]) . ' s)');
is(rate_status(), '6:1:1:0:0:0:0', 'burst: one admission waited');

# ---------------------------------------------------------------------------
# The rate counts admissions: statements under a slot kept by the scope
# rule take no token (scope 'transaction': one token per transaction).
$node->safe_psql('postgres', q{
	SELECT dbgate.reset_stats('rt');
	SELECT dbgate.alter_budget('rt', max_rate => 0.2, rate_burst => 1,
	                           scope => 'transaction');
});
($out, $err, $state) = $s->query(
	q{BEGIN; SELECT 1; SELECT 2; SELECT 3; COMMIT});
is($state, '', 'transaction: three statements of one transaction');
is(rate_status(), '1:0:0:0:0:0:0', 'transaction: one admission, one token');

$s->quit;
$node->stop;
done_testing();
