# What PostgreSQL 17 and 18 add that a user of dbgate sees (skipped on
# older servers):
#   17  transaction_timeout ends a session whose statement is queued, with
#       PostgreSQL's own FATAL error; the statement leaves the queue once,
#       counted in canceled_waiting, and its queue place and the budget's
#       slots are all back;
#   18  pg_get_loaded_modules() names dbgate with its version.
# The named wait event of a queued backend (17+) is tested in 005_queue.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DbgateTest;

my $node = dbgate_node('newer');
if ($node->pg_version < 17)
{
	$node->stop;
	plan skip_all => 'transaction_timeout and the other features tested '
	  . 'here are new in PostgreSQL 17';
}

$node->safe_psql(
	'postgres', q{
	CREATE ROLE tt_user LOGIN;
	SELECT dbgate.create_budget('tt_b', 1, 2, queue_timeout => '60s',
	                            queue_order => 'lifo', overtake_limit => '1h');
	SELECT dbgate.assign_role('tt_user', 'tt_b');
});
my $locker = DbgateTest::Session->new($node);

sub state_of
{
	my ($s) = @_;
	return "SELECT state || ':' || coalesce(queue_position::text, '-')
	        FROM dbgate.backends WHERE pid = " . $s->pid;
}

# ---------------------------------------------------------------------------
# transaction_timeout while queued: a holder keeps the only slot (waiting
# for an advisory lock the superuser holds) and w2 queues; then w1 queues
# with a transaction_timeout far shorter than the budget's queue_timeout.
# The budget is 'lifo' (nobody becomes overdue), so w1, the newer, is
# first in line and w2 second.
#
# PostgreSQL starts w1's transaction timer with its transaction, before
# the statement reaches the gate, and no SQL can hold it back until w1 is
# queued; nor is w1 watched in the queue (a state that the timer ends).
# Whether w1 was queued when the timer fired is read afterwards from the
# budget's counters, which only w1 can move here: peak_queued goes from 1
# (w2) to 2 when w1 joins the queue, and canceled_waiting counts w1 leaving
# it.  An attempt where w1 ended with 25P04 but never joined the queue
# (both unchanged: the machine took the 5 s before the gate) says nothing
# of the feature and is made again with a new w1, at most 5 times, each
# reported; any other outcome is asserted as it is (a queued w1 that the
# timer did not end leaves wait_exit waiting until the default timeout,
# and fails).

$locker->query('SELECT pg_advisory_lock(1)');
my $h = DbgateTest::Session->new($node, user => 'tt_user');
$h->send('SELECT pg_advisory_xact_lock_shared(1)');
poll_ok($node, state_of($h), 'active:-', 'holder is admitted');

my $w2 = DbgateTest::Session->new($node, user => 'tt_user');
$w2->send(q{SELECT 'w2 ran'});
poll_ok($node, state_of($w2), 'queued:1', 'w2 is queued');

my ($w1, $err, $set_err, $gone, $stat);
for my $attempt (1 .. 5)
{
	$w1 = DbgateTest::Session->new($node, user => 'tt_user');
	(undef, $set_err) = $w1->query(q{SET transaction_timeout = '5s'});
	$w1->send(q{SELECT 'w1 ran'});
	$err = $w1->wait_exit;
	# gone: its exit has taken it out of the queue and counted that
	$gone = poll_until($node,
		'SELECT count(*) FROM pg_stat_activity WHERE pid = ' . $w1->pid, '0');
	$stat = status_of($node, 'tt_b');
	last
	  unless $set_err eq ''
	  && $gone
	  && $err =~ /FATAL:  25P04:/
	  && $stat->{canceled_waiting} == 0
	  && $stat->{peak_queued} == 1;
	diag "transaction_timeout: attempt $attempt: w1's 5 s were over before it "
	  . 'reached the queue (peak_queued 1, canceled_waiting 0); again';
}
is($set_err, '', 'transaction_timeout is set');
like(
	$err,
	qr/FATAL:  25P04: terminating connection due to transaction timeout/,
	'a queued statement past transaction_timeout ends its session with 25P04');
unlike($err, qr/53300/, 'the queue timeout did not fire');
ok($gone, 'the timed-out session is gone');
is($stat->{peak_queued}, '2',
	'both waiters were queued at the same time (w1 reached the queue; '
	  . 'a failure after 5 attempts means it never did within its 5 s)');
is( backends_of($node, 'tt_b'),
	$h->pid . ':active:-,' . $w2->pid . ':queued:1',
	'w1 left the queue and w2 is first in line again');
counters_are(
	$node, 'tt_b',
	{ active => 1, queued => 1, admitted => 1, canceled_waiting => 1 },
	'w1 left the queue once, counted in canceled_waiting');

# the holder finishes, w2 gets the slot and runs; nothing is left over
$locker->query('SELECT pg_advisory_unlock(1)');
my ($out, $st);
(undef, $err) = $h->result;
is($err, '', 'holder finished');
($out, $err) = $w2->result;
is($out, 'w2 ran', 'w2 ran after the holder');
counters_are(
	$node, 'tt_b',
	{ admitted => 2, admitted_after_wait => 1, canceled_waiting => 1 },
	'counters after both ran: one cancel, nothing else');
is(backends_of($node, 'tt_b'), '', 'dbgate.backends is empty');

# a new session of the role is admitted as usual
($st, $out, $err) = run_sql($node, q{SELECT 'again'}, user => 'tt_user');
is($out, 'again', 'the budget admits statements afterwards');

# ---------------------------------------------------------------------------
# The module's name and version in pg_get_loaded_modules() (18+).

SKIP:
{
	skip 'pg_get_loaded_modules() is new in PostgreSQL 18', 1
	  if $node->pg_version < 18;
	is( $node->safe_psql(
			'postgres',
			q{SELECT module_name || '|' || version || '|' || file_name
			    FROM pg_get_loaded_modules() WHERE file_name LIKE 'dbgate%'}),
		'dbgate|1.2|dbgate.so',
		'pg_get_loaded_modules() shows dbgate and its version');
}

$_->quit for ($h, $w2, $locker);
$node->stop;
done_testing();
