# max_rate and rate_burst: a token bucket beside the slots.  A statement
# that finds a free slot but no token waits in the queue like one that
# finds no slot: it is admitted when its token is due and not before, it
# can time out or be canceled there, a raised rate admits it at once, and
# after an idle period rate_burst statements pass at once.  rate_limited
# counts the admissions that waited for a token.
#
# Where a statement must find no token, the order is forced, not hoped
# for: the statements queue behind a slot held by a statement that waits
# for an advisory lock, and are seen queued; then one change of the budget
# gives them slots and a new rate, which fills the bucket (SPEC: full after
# any change of max_rate or rate_burst), and they take its tokens in queue
# order in the change's grant step.  Or the token is 100 s away (the
# lowest rate, 0.01 per second), far beyond anything the test waits for.
# Times are the server's: a statement's clock_timestamp() (after its
# admission) against the statement_timestamp() of the change (before it).
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DbgateTest;

my $node = dbgate_node('rate');
$node->safe_psql(
	'postgres', q{
	CREATE ROLE rt_user LOGIN;
	SELECT dbgate.create_budget('rt', max_active => 1, max_queued => 8,
	                            max_rate => 100, rate_burst => 1);
	SELECT dbgate.assign_role('rt_user', 'rt');
});
my $locker = DbgateTest::Session->new($node);

sub rate_status
{
	return $node->safe_psql('postgres',
		"SELECT admitted || ':' || admitted_after_wait || ':' || rate_limited || ':'
		        || rejected_timeout || ':' || canceled_waiting || ':' || active || ':' || queued
		   FROM dbgate.status WHERE budget = 'rt'");
}

# the time each statement runs, taken after its admission
my $clock = 'SELECT extract(epoch FROM clock_timestamp())';

# queued_then_filled(N, CHANGE): a statement of the budget (max_active 1)
# holds its slot, waiting for advisory lock 1; N sessions send $clock and
# are seen queued, in order; then the budget is changed with CHANGE (which
# must raise max_active and change the rate).  Returns the
# statement_timestamp() of the change, the N clocks in queue order, and
# the holder (still holding its slot: release_holder() ends it).
sub queued_then_filled
{
	my ($n, $change) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	$locker->query('SELECT pg_advisory_lock(1)');
	my $h = DbgateTest::Session->new($node, user => 'rt_user');
	$h->send('SELECT pg_advisory_xact_lock_shared(1)');
	poll_ok($node, 'SELECT state FROM dbgate.backends WHERE pid = ' . $h->pid,
		'active', "the holder has the only slot");
	my @w;
	for my $i (1 .. $n)
	{
		my $s = DbgateTest::Session->new($node, user => 'rt_user');
		$s->send($clock);
		poll_ok($node, 'SELECT queue_position FROM dbgate.backends WHERE pid = ' . $s->pid,
			$i, "statement $i is queued at position $i");
		push @w, $s;
	}
	my ($at) = split /\n/,
	  $node->safe_psql('postgres',
		"SELECT extract(epoch FROM statement_timestamp());
		 SELECT dbgate.alter_budget('rt', $change)");
	my @t;
	for my $s (@w)
	{
		my ($out, $err) = $s->result;
		is($err, '', 'a queued statement runs');
		push @t, $out;
		$s->quit;
	}
	return ($at, \@t, $h);
}

sub release_holder
{
	my ($h) = @_;
	$locker->query('SELECT pg_advisory_unlock(1)');
	$h->result;
	$h->quit;
	return;
}

# ---------------------------------------------------------------------------
# Due, not before: two statements wait for the slot when the rate becomes
# 2 per second (burst 1); the first takes the bucket's token, the second
# waits for the next one, half a second later.  (The grant step takes the
# first token as of up to 2 ms before it ran, DBGATE_DIM_CATCHUP_NS, and
# the bucket's monotonic clock may drift from the wall clock by a fraction
# of a millisecond: 3 ms of tolerance.)
my ($at, $t, $h) = queued_then_filled(2, 'max_active => 4, max_rate => 2');
cmp_ok($t->[1] - $at, '>=', 0.497,
	'due: the second runs once its token is due, not before ('
	  . ($t->[1] - $at) . ' s)');
is(rate_status(), '3:2:1:0:0:1:0', 'due: one admission waited for a token');
release_holder($h);

my $s = DbgateTest::Session->new($node, user => 'rt_user');
my ($out, $err, $state);

# ---------------------------------------------------------------------------
# Queue timeout while waiting for a token (one every 100 s, 200 ms queue
# timeout): the token that SELECT 1 took leaves none for SELECT 2.
$node->safe_psql('postgres', q{
	SELECT dbgate.reset_stats('rt');
	SELECT dbgate.alter_budget('rt', max_rate => 0.01, queue_timeout => '200ms');
});
my ($took_at) = $s->query('SELECT extract(epoch FROM statement_timestamp())');
($out, $err, $state) = $s->query('SELECT 2');
is($state, '53300', 'timeout: 53300 while waiting for a token');
like($err, qr/timed out waiting for a slot in budget "rt"/, 'timeout: the message says so');
is(rate_status(), '1:0:0:1:0:0:0', 'timeout: counted in rejected_timeout, nothing held');

# ---------------------------------------------------------------------------
# Cancel while waiting for a token (the next one is still 100 s away: the
# change of queue_timeout leaves the bucket as it is).
$node->safe_psql('postgres', q{
	SELECT dbgate.reset_stats('rt');
	SELECT dbgate.alter_budget('rt', queue_timeout => '0');
});
$s->send('SELECT 2');
poll_ok($node, "SELECT state FROM dbgate.backends WHERE pid = " . $s->pid,
	'queued', 'cancel: the statement waits for its token');
$node->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $s->pid . ')');
($out, $err, $state) = $s->result;
is($state, '57014', 'cancel: the wait ends with 57014');
is(rate_status(), '0:0:0:0:1:0:0', 'cancel: counted in canceled_waiting, nothing held');

# ---------------------------------------------------------------------------
# A raised rate admits the waiter at once: its token was due 100 s after
# the timeout's SELECT 1 took the last one, and it runs before that (the
# bound is the feature: before the old due time; 100 s is far beyond what
# the test itself may wait).
$node->safe_psql('postgres', "SELECT dbgate.reset_stats('rt')");
$s->send($clock);
poll_ok($node, "SELECT state FROM dbgate.backends WHERE pid = " . $s->pid,
	'queued', 'raise: the statement waits for its token');
$node->safe_psql('postgres', "SELECT dbgate.alter_budget('rt', max_rate => 100)");
($out, $err, $state) = $s->result;
is($err, '', 'raise: the waiter runs');
cmp_ok($out - $took_at, '<', 100,
	'raise: before its old token was due (' . ($out - $took_at) . ' s after the last token)');
is(rate_status(), '1:1:1:0:0:0:0', 'raise: counted as admitted after a wait for a token');

# ---------------------------------------------------------------------------
# Burst: six statements wait for the slot when the rate becomes 1 per
# second with a burst of 5 (the bucket full): five pass at once, none of
# them held back by the rate, and the sixth waits for the next token, one
# second after the first (tolerance as above).  (The change of the rate
# before fills the bucket for the holder.)
$node->safe_psql('postgres', q{
	SELECT dbgate.reset_stats('rt');
	SELECT dbgate.alter_budget('rt', max_active => 1, max_rate => 50);
});
($at, $t, $h) =
  queued_then_filled(6, 'max_active => 8, max_rate => 1, rate_burst => 5');
cmp_ok($t->[5] - $at, '>=', 0.997,
	'burst: the sixth runs a second after the first ('
	  . ($t->[5] - $at) . ' s)');
is(rate_status(), '7:6:1:0:0:1:0',
	'burst: five admitted without waiting for a token, the sixth waited');
release_holder($h);

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
$locker->quit;
$node->stop;
done_testing();
