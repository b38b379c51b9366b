# Lock safety (B = 1): a queued statement whose transaction holds a lock
# that the slot holder waits for (directly or through a chain of lock
# waits) is admitted beyond the limit, not before deadlock_timeout, while
# the slot holder still waits for it, and counted in admitted_lock_holder.
# A queued statement that blocks nobody keeps waiting: a lock check that
# admits another waiter of its budget (which does block the holder) leaves
# it queued.  No queue timeout is set: nothing but the lock check can end a
# wait here, and a regression fails at the poll's timeout.
#
# A transaction that holds a transaction ID keeps its slot (scope
# 'statement'), so its next statement never queues; the queued
# transactions here hold locks taken without one: advisory locks (T1, U),
# while the slot holders wait for them.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DbgateTest;

my $node = dbgate_node('lock_safety', conf => "deadlock_timeout = '200ms'\n");
$node->safe_psql(
	'postgres', q{
	CREATE ROLE ls_user LOGIN;
	CREATE TABLE ls_rows (id int PRIMARY KEY, v int NOT NULL);
	INSERT INTO ls_rows SELECT g, 0 FROM generate_series(1, 6) g;
	GRANT SELECT, UPDATE ON ls_rows TO ls_user;
	SELECT dbgate.create_budget('ls_budget', 1, 5);
	SELECT dbgate.assign_role('ls_user', 'ls_budget');
});

my $t1 = DbgateTest::Session->new($node, user => 'ls_user', name => 't1');
my $t2 = DbgateTest::Session->new($node, user => 'ls_user', name => 't2');
my $su = DbgateTest::Session->new($node, name => 'superuser');

sub waits_for_lock
{
	my ($s, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	return poll_ok(
		$node,
		q{SELECT a.wait_event_type || ':' || b.state FROM pg_stat_activity a
		  JOIN dbgate.backends b USING (pid) WHERE pid = } . $s->pid,
		'Lock:active', $what);
}

# Runs SQL in T1 and checks it is admitted as a lock holder while T2 (the
# slot holder, which waits for T1) still waits, and not before
# deadlock_timeout: T1 is the only waiter, and a waiter first looks for
# lock holders deadlock_timeout after it joined the queue.  The wait is
# measured by the server (wait_time_max, since reset_stats).
sub lock_holder_admitted
{
	my ($sql, $expected, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my ($out, $err) = $t1->query($sql);
	is("$out|$err", "$expected|", "$what: T1's next statement runs");
	is( $node->safe_psql(
			'postgres',
			q{SELECT a.wait_event_type || ':' || b.state FROM pg_stat_activity a
			  JOIN dbgate.backends b USING (pid) WHERE pid = } . $t2->pid),
		'Lock:active',
		"$what: T1 ran while T2 still holds the slot and waits for T1's lock");
	my $waited = $node->safe_psql('postgres',
		q{SELECT wait_time_max FROM dbgate.status WHERE budget = 'ls_budget'});
	cmp_ok($waited, '>=', 200,
		"$what: admitted not before deadlock_timeout ($waited ms in the queue)");
	counters_are(
		$node, 'ls_budget',
		{
			active => 1,
			admitted => 3,
			admitted_after_wait => 1,
			admitted_lock_holder => 1,
			peak_active => 2
		},
		"$what: admitted beyond max_active as a lock holder");
	return;
}

sub end_counters
{
	my ($what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	counters_are(
		$node, 'ls_budget',
		{ admitted => 3, admitted_after_wait => 1, admitted_lock_holder => 1 },
		"$what: counters at the end");
	is(backends_of($node, 'ls_budget'), '', "$what: dbgate.backends is empty");
	$node->safe_psql('postgres', q{SELECT dbgate.reset_stats('ls_budget')});
	return;
}

# ---------------------------------------------------------------------------
# T1 takes an advisory lock and stays open (read-only: its slot is returned
# after each statement); T2 asks for the same lock: admitted, it waits for
# T1.  T1's next statement would wait for T2's slot.

$t1->query('BEGIN; SELECT pg_advisory_xact_lock(1);');
$t2->send('SELECT pg_advisory_xact_lock(1)');
waits_for_lock($t2, 'direct: T2 holds the slot and waits for T1\'s lock');
lock_holder_admitted('SELECT v FROM ls_rows WHERE id = 1', '0', 'direct');
$t1->query('COMMIT');
my ($out, $err) = $t2->result;
is($err, '', 'direct: T2 finishes after T1 commits');
is($node->safe_psql('postgres', 'SELECT count(*) FROM pg_locks WHERE locktype = \'advisory\''),
	'0', 'direct: no advisory lock is left');
end_counters('direct');

# ---------------------------------------------------------------------------
# The same with the lock taken inside a savepoint (T2 waits for T1's
# subtransaction).

$t1->query('BEGIN; SAVEPOINT s1; SELECT pg_advisory_xact_lock(2);');
$t2->send('SELECT pg_advisory_xact_lock(2)');
waits_for_lock($t2, 'savepoint: T2 waits for T1\'s subtransaction');
lock_holder_admitted('SELECT v FROM ls_rows WHERE id = 2', '0', 'savepoint');
$t1->query('ROLLBACK TO SAVEPOINT s1');
($out, $err) = $t2->result;
is($err, '', 'savepoint: T2 finishes after T1 rolls back to the savepoint');
$t1->query('COMMIT');
is($node->safe_psql('postgres', 'SELECT count(*) FROM pg_locks WHERE locktype = \'advisory\''),
	'0', 'savepoint: no advisory lock is left');
end_counters('savepoint');

# ---------------------------------------------------------------------------
# T1 is not at the head of the queue: another statement (W, blocking
# nobody) queued first.  T1 is admitted all the same, W keeps its place and
# gets the slot when T2 finishes.

my $w = DbgateTest::Session->new($node, user => 'ls_user', name => 'w');
$t1->query('BEGIN; SELECT pg_advisory_xact_lock(1);');
$t2->send('SELECT pg_advisory_xact_lock(1)');
waits_for_lock($t2, 'behind W: T2 holds the slot and waits for T1\'s lock');
$w->send(q{SELECT 'w'});
poll_ok($node, 'SELECT queue_position FROM dbgate.backends WHERE pid = ' . $w->pid,
	'1', 'behind W: W is queued first');
($out, $err) = $t1->query('SELECT v FROM ls_rows WHERE id = 1');
is("$out|$err", '0|', 'behind W: T1\'s statement runs although W is ahead of it');
is(backends_of($node, 'ls_budget'),
	$t2->pid . ':active:-,' . $w->pid . ':queued:1',
	'behind W: W is still queued at the head');
counters_are(
	$node, 'ls_budget',
	{
		active => 1,
		queued => 1,
		admitted => 3,
		admitted_after_wait => 1,
		admitted_lock_holder => 1,
		peak_active => 2,
		peak_queued => 2
	},
	'behind W: T1 admitted beyond max_active as a lock holder');
$t1->query('COMMIT');
($out, $err) = $t2->result;
is($err, '', 'behind W: T2 finishes after T1 commits');
($out, $err) = $w->result;
is("$out|$err", 'w|', 'behind W: W runs after T2');
counters_are(
	$node, 'ls_budget',
	{ admitted => 4, admitted_after_wait => 2, admitted_lock_holder => 1 },
	'behind W: counters at the end');
is(backends_of($node, 'ls_budget'), '', 'behind W: dbgate.backends is empty');
$node->safe_psql('postgres', q{SELECT dbgate.reset_stats('ls_budget')});
$w->quit;

# ---------------------------------------------------------------------------
# A chain: T2 (slot holder) waits for T3 (a superuser, not gated), which
# waits for T1's lock.

$t1->query('BEGIN; SELECT pg_advisory_xact_lock(3);');
$su->query('BEGIN; UPDATE ls_rows SET v = v + 100 WHERE id = 4;');
$su->send('SELECT pg_advisory_xact_lock(3); UPDATE ls_rows SET v = v + 100 WHERE id = 3');
poll_ok($node,
	'SELECT wait_event_type FROM pg_stat_activity WHERE pid = ' . $su->pid,
	'Lock', 'chain: T3 waits for T1');
$t2->send('UPDATE ls_rows SET v = v + 10 WHERE id = 4');
waits_for_lock($t2, 'chain: T2 holds the slot and waits for T3');
lock_holder_admitted('SELECT v FROM ls_rows WHERE id = 3', '0', 'chain');
$t1->query('COMMIT');
($out, $err) = $su->result;
is($err, '', 'chain: T3 finishes after T1 commits');
$su->query('COMMIT');
($out, $err) = $t2->result;
is($err, '', 'chain: T2 finishes after T3 commits');
is( $node->safe_psql('postgres', 'SELECT v FROM ls_rows WHERE id IN (3, 4) ORDER BY id'),
	"100\n110", 'chain: all updates done');
end_counters('chain');

# ---------------------------------------------------------------------------
# Control: T1 holds a lock nobody waits for; the slot holder T2 waits
# for a lock of the superuser.  T1's statement stays queued and is
# admitted normally when T2 finishes.  That lock checks have looked at T1
# is seen from a witness X queued behind T1: the superuser waits for X's
# lock, so X is admitted as a lock holder by a check of the budget, and
# such a check looks at every waiter of the budget, T1 included.  T1 is
# still queued after it, and after it has waited five deadlock_timeout
# periods by the server's clock.

my $x = DbgateTest::Session->new($node, user => 'ls_user', name => 'x');
$t1->query('BEGIN; SELECT pg_advisory_xact_lock(5);');
$x->query('BEGIN; SELECT pg_advisory_xact_lock(7);');
$su->query('BEGIN; UPDATE ls_rows SET v = v + 100 WHERE id = 6;');
$t2->send('UPDATE ls_rows SET v = v + 10 WHERE id = 6');
waits_for_lock($t2, 'control: T2 holds the slot and waits for the superuser');
$t1->send('SELECT v FROM ls_rows WHERE id = 5');
poll_ok($node, 'SELECT state FROM dbgate.backends WHERE pid = ' . $t1->pid,
	'queued', 'control: T1 is queued');
$su->send('SELECT pg_advisory_xact_lock(7)');
poll_ok($node,
	'SELECT wait_event_type FROM pg_stat_activity WHERE pid = ' . $su->pid,
	'Lock', 'control: the superuser waits for X\'s lock');
$x->send(q{SELECT 'x'});
poll_ok($node,
	q{SELECT admitted_lock_holder FROM dbgate.status WHERE budget = 'ls_budget'},
	'1', 'control: X, queued behind T1, is admitted as a lock holder');
($out, $err) = $x->result;
is("$out|$err", 'x|', 'control: X\'s statement ran');
poll_ok($node,
	q{SELECT now() - state_since >= interval '1 s' FROM dbgate.backends WHERE pid = }
	  . $t1->pid,
	't', 'control: T1 has waited five deadlock_timeout periods');
is($node->safe_psql('postgres', 'SELECT state FROM dbgate.backends WHERE pid = ' . $t1->pid),
	'queued', 'control: T1 is still queued after lock checks that admitted X');
counters_are(
	$node, 'ls_budget',
	{
		active => 1,
		queued => 1,
		admitted => 4,
		admitted_after_wait => 1,
		admitted_lock_holder => 1,
		peak_active => 2,
		peak_queued => 2
	},
	'control: only X admitted beyond the limit');
$x->query('COMMIT');
($out, $err) = $su->result;
is($err, '', 'control: the superuser gets X\'s lock once X commits');
$su->query('COMMIT');
($out, $err) = $t2->result;
is($err, '', 'control: T2 finishes after the superuser commits');
($out, $err) = $t1->result;
is("$out|$err", '0|', 'control: T1\'s statement runs once the slot is free');
$t1->query('COMMIT');
counters_are(
	$node, 'ls_budget',
	{
		admitted => 5,
		admitted_after_wait => 2,
		admitted_lock_holder => 1,
		peak_active => 2,
		peak_queued => 2
	},
	'control: counters at the end');
is(backends_of($node, 'ls_budget'), '', 'control: dbgate.backends is empty');
$x->quit;

# ---------------------------------------------------------------------------
# Across budgets: T1 (budget A) waits for A's slot, held by S, which waits
# for U's lock; U (budget B) waits for B's slot, held by V, which waits
# for T1's lock.  Each queued statement waits for a slot that only its
# own transaction can free; one of them must be admitted as a lock holder.
# (No queue timeout: the one not admitted first waits until the test ends
# the other's transaction.  If neither is admitted, both are canceled once
# the poll gives up, and the checks below fail.)

$node->safe_psql(
	'postgres', q{
	SELECT dbgate.reset_stats('ls_budget');
	SELECT dbgate.create_budget('ls_other', 1, 5);
	CREATE ROLE ls_other_user LOGIN;
	GRANT SELECT, UPDATE ON ls_rows TO ls_other_user;
	SELECT dbgate.assign_role('ls_other_user', 'ls_other');
});
my $u = DbgateTest::Session->new($node, user => 'ls_other_user', name => 'u');
my $v = DbgateTest::Session->new($node, user => 'ls_other_user', name => 'v');
$t1->query('BEGIN; SELECT pg_advisory_xact_lock(1);');
$u->query('BEGIN; SELECT pg_advisory_xact_lock(2);');
$v->send('SELECT pg_advisory_xact_lock(1)');
waits_for_lock($v, 'across budgets: V holds B\'s slot and waits for T1');
$t2->send('SELECT pg_advisory_xact_lock(2)');
waits_for_lock($t2, 'across budgets: S holds A\'s slot and waits for U');
$t1->send(q{SELECT 'across'});
$u->send(q{SELECT 'across'});
my $both = q{FROM dbgate.status WHERE budget IN ('ls_budget', 'ls_other')};
# the statement admitted as a lock holder runs and its session goes idle in
# its transaction; the other one stays queued (both may be admitted, if
# they look at the same moment)
my $done = q{SELECT string_agg(pid::text, ',' ORDER BY pid) FROM pg_stat_activity
	WHERE state = 'idle in transaction' AND query LIKE 'SELECT ''across''%'
	  AND pid IN (} . $t1->pid . ', ' . $u->pid . ')';
if (!poll_until($node, "SELECT ($done) IS NOT NULL"))
{
	$node->safe_psql('postgres',
		'SELECT pg_cancel_backend(' . $t1->pid . '), pg_cancel_backend(' . $u->pid . ')');
}
is( $node->safe_psql(
		'postgres',
		"SELECT sum(admitted_lock_holder) BETWEEN 1 AND 2, sum(rejected_timeout) $both"),
	't|0',
	'across budgets: a queued statement admitted as a lock holder, no queue timeout');

# The one admitted first ends its transaction; then the other one runs.
my ($first, $second) =
  ((split /,/, $node->safe_psql('postgres', $done))[0] // 0) == $t1->pid
  ? ($t1, $u)
  : ($u, $t1);
my ($out1, $err1, $state1) = $first->result;
is($err1, '', 'across budgets: the statement admitted as a lock holder ran');
$first->query('ROLLBACK');
my ($out2, $err2, $state2) = $second->result;
is($err2, '', 'across budgets: the other statement ran after that');
$second->query('ROLLBACK');
for my $x ($t2, $v)
{
	my (undef, $e) = $x->result;
	is($e, '', 'across budgets: ' . $x->name . ' finished');
}
is($node->safe_psql('postgres', 'SELECT count(*) FROM dbgate.backends'),
	'0', 'across budgets: dbgate.backends is empty at the end');
$_->quit for ($u, $v);

$_->quit for ($t1, $t2, $su);
$node->stop;
done_testing();
