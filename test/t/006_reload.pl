# dbgate.enabled = off with a configuration reload admits every queued
# statement at once (counted in admitted_after_wait) and gates nothing new,
# in new and in existing sessions; back on, gating resumes.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DbgateTest;

my $node = dbgate_node('reload');
$node->safe_psql(
	'postgres', q{
	CREATE ROLE r_user LOGIN;
	SELECT dbgate.create_budget('r_budget', 1, 5);
	SELECT dbgate.assign_role('r_user', 'r_budget');
});

my $locker = DbgateTest::Session->new($node);
# A session that exists before the reload and is idle during it.
my $idle = DbgateTest::Session->new($node, user => 'r_user');

sub waiting_on_lock
{
	my @s = @_;
	return 'SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = \'Lock\' AND pid IN ('
	  . join(', ', map { $_->pid } @s) . ')';
}

sub set_enabled
{
	my ($value) = @_;
	$node->safe_psql('postgres', "ALTER SYSTEM SET dbgate.enabled = $value");
	$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
	poll_ok($node, 'SHOW dbgate.enabled', $value,
		"dbgate.enabled is $value after the reload");
	return;
}

# One statement holds the slot, three wait (each for the advisory lock the
# locker holds, so after admission they keep running).
$locker->query('SELECT pg_advisory_lock(1)');
my @s;
for my $i (0 .. 3)
{
	my $s = DbgateTest::Session->new($node, user => 'r_user');
	$s->send('SELECT pg_advisory_xact_lock_shared(1)');
	my $want = $i == 0 ? 'active:-' : "queued:$i";
	poll_ok(
		$node,
		"SELECT state || ':' || coalesce(queue_position::text, '-') FROM dbgate.backends WHERE pid = "
		  . $s->pid,
		$want,
		"statement $i is $want");
	push @s, $s;
}
my ($holder, @waiters) = @s;
counters_are(
	$node, 'r_budget',
	{ active => 1, queued => 3, admitted => 1 },
	'one statement active, three queued');

set_enabled('off');
poll_ok($node, q{SELECT queued FROM dbgate.status WHERE budget = 'r_budget'},
	'0', 'disabling empties the queue');
poll_ok($node, waiting_on_lock(@waiters), '3',
	'all three queued statements were admitted and run (waiting for the advisory lock)');
is(backends_of($node, 'r_budget'), $holder->pid . ':active:-',
	'only the statement admitted before still holds a slot');
counters_are(
	$node, 'r_budget',
	{ active => 1, admitted => 4, admitted_after_wait => 3 },
	'queued statements counted as admitted after waiting');

# Nothing new is gated: more statements run while the slot is taken.
my $extra = DbgateTest::Session->new($node, user => 'r_user');
$extra->send('SELECT pg_advisory_xact_lock_shared(1)');
poll_ok($node, waiting_on_lock($extra), '1',
	'a new session runs a statement although the slot is taken');
my ($out, $err) = $idle->query('SHOW dbgate.enabled');
is($out, 'off', 'the existing idle session sees dbgate.enabled = off');
($out, $err) = $idle->query('SELECT 40 + 2');
is("$out|$err", '42|', 'the existing idle session runs a statement ungated');
counters_are(
	$node, 'r_budget',
	{ active => 1, admitted => 4, admitted_after_wait => 3 },
	'statements run while disabled are not counted');
is(backends_of($node, 'r_budget'), $holder->pid . ':active:-',
	'statements run while disabled hold no slot');

$locker->query('SELECT pg_advisory_unlock(1)');
for my $s (@s, $extra)
{
	(undef, $err) = $s->result;
	is($err, '', 'statement of ' . $s->name . ' finished');
}
counters_are(
	$node, 'r_budget',
	{ admitted => 4, admitted_after_wait => 3 },
	'slot returned by the statement admitted before disabling');

# Back on: gating resumes, also in the sessions that existed before.
set_enabled('on');
$locker->query('SELECT pg_advisory_lock(2)');
$holder->send('SELECT pg_advisory_xact_lock_shared(2)');
poll_ok($node, q{SELECT active FROM dbgate.status WHERE budget = 'r_budget'},
	'1', 'enabled again: a statement takes the slot');
$idle->send(q{SELECT 'queued again'});
poll_ok(
	$node,
	'SELECT state FROM dbgate.backends WHERE pid = ' . $idle->pid,
	'queued', 'enabled again: the next statement is queued');
$locker->query('SELECT pg_advisory_unlock(2)');
$holder->result;
($out, $err) = $idle->result;
is("$out|$err", 'queued again|', 'enabled again: queued statement ran');
counters_are(
	$node, 'r_budget',
	{ admitted => 6, admitted_after_wait => 4, peak_active => 1, peak_queued => 3 },
	'enabled again: counters');
is(backends_of($node, 'r_budget'), '', 'dbgate.backends is empty at the end');

# ---------------------------------------------------------------------------
# Budget changes need no reload: raising max_active admits a waiter at
# once, lowering it interrupts nothing, dropping the budget admits the rest.

$node->safe_psql(
	'postgres', q{
	SELECT dbgate.create_budget('r_change', 1, 5);
	SELECT dbgate.assign_role('r_user', 'r_change');
});
$locker->query('SELECT pg_advisory_lock(3)');
for my $i (0 .. 2)
{
	$s[$i]->send('SELECT pg_advisory_xact_lock_shared(3)');
	poll_ok(
		$node,
		'SELECT state FROM dbgate.backends WHERE pid = ' . $s[$i]->pid,
		$i == 0 ? 'active' : 'queued',
		"change: statement $i is " . ($i == 0 ? 'active' : 'queued'));
}
$node->safe_psql('postgres', q{SELECT dbgate.alter_budget('r_change', max_active => 2)});
poll_ok($node, waiting_on_lock($s[0], $s[1]), '2',
	'change: raising max_active admits the head of the queue at once');
counters_are(
	$node, 'r_change',
	{ active => 2, queued => 1, admitted => 2, admitted_after_wait => 1 },
	'change: counters after raising max_active');
$node->safe_psql('postgres', q{SELECT dbgate.alter_budget('r_change', max_active => 1)});
is(backends_of($node, 'r_change'),
	join(',', $s[0]->pid . ':active:-', $s[1]->pid . ':active:-', $s[2]->pid . ':queued:1'),
	'change: lowering max_active interrupts no running statement');
$node->safe_psql('postgres', q{SELECT dbgate.drop_budget('r_change', force => true)});
poll_ok($node, waiting_on_lock(@s[0 .. 2]), '3',
	'change: dropping the budget admits its queued statement');
is($node->safe_psql('postgres', 'SELECT count(*) FROM dbgate.backends'),
	'0', 'change: nothing of the dropped budget is left in dbgate.backends');
$locker->query('SELECT pg_advisory_unlock(3)');
for my $i (0 .. 2)
{
	(undef, $err) = $s[$i]->result;
	is($err, '', "change: statement $i finished");
}
is($node->safe_psql('postgres', 'SELECT budget FROM dbgate.status'),
	'r_budget', 'change: only r_budget is left');
counters_are(
	$node, 'r_budget',
	{ admitted => 6, admitted_after_wait => 4, peak_active => 1, peak_queued => 3 },
	'change: other budgets are untouched');

# ---------------------------------------------------------------------------
# A reload while a statement is queued: the queued statement learns only
# that gating was switched off (published in shared memory); every other
# setting changes for it between statements, as for any backend, never in
# the middle of its statement.
$node->safe_psql('postgres', q{SELECT dbgate.assign_role('r_user', 'r_budget')});
$locker->query('SELECT pg_advisory_lock(4)');
my $h4 = DbgateTest::Session->new($node, user => 'r_user');
my $w4 = DbgateTest::Session->new($node, user => 'r_user');
$h4->send('SELECT pg_advisory_xact_lock_shared(4)');
poll_ok($node, 'SELECT state FROM dbgate.backends WHERE pid = ' . $h4->pid,
	'active', 'reload mid-statement: the slot is held');
$w4->send(q{SELECT current_setting('work_mem')});
poll_ok($node, 'SELECT state FROM dbgate.backends WHERE pid = ' . $w4->pid,
	'queued', 'reload mid-statement: a statement is queued');
$node->safe_psql('postgres', "ALTER SYSTEM SET work_mem = '7MB'");
$node->safe_psql('postgres', 'ALTER SYSTEM SET dbgate.enabled = off');
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
($out, $err) = $w4->result;
is("$out|$err", '4MB|',
	'reload mid-statement: the queued statement is let through and still sees the old work_mem');
($out, $err) = $w4->query(q{SELECT current_setting('work_mem')});
is("$out|$err", '7MB|', 'reload mid-statement: its next statement sees the new one');
$locker->query('SELECT pg_advisory_unlock(4)');
(undef, $err) = $h4->result;
is($err, '', 'reload mid-statement: the slot holder finished');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET work_mem');
$_->quit for ($h4, $w4);

# ---------------------------------------------------------------------------
# A statement that starts after the reload in a backend that has not read
# the configuration file yet (a backend reads it between client commands
# only: here the second statement of one query message, sent with psql's
# \; while the first one waits in the queue) is not gated: the gate reads
# dbgate.enabled as the postmaster published it, as the waiters do.  The
# first statement is let through as a waiter (admitted_after_wait + 1); the
# second neither queues nor counts.
$node->safe_psql('postgres', 'ALTER SYSTEM RESET dbgate.enabled');
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
poll_ok($node, 'SHOW dbgate.enabled', 'on', 'same message: dbgate.enabled is on again');
my $h5 = DbgateTest::Session->new($node, user => 'r_user');
my $b5 = DbgateTest::Session->new($node, user => 'r_user');
$locker->query('SELECT pg_advisory_lock(5)');
$h5->send('SELECT pg_advisory_xact_lock_shared(5)');
poll_ok($node, 'SELECT state FROM dbgate.backends WHERE pid = ' . $h5->pid,
	'active', 'same message: the slot is held');
my %before = map { $_ => $node->safe_psql('postgres',
		"SELECT $_ FROM dbgate.status WHERE budget = 'r_budget'") }
  qw(admitted admitted_after_wait);
$b5->send(q{SELECT 'first' \; SELECT 'second'});
poll_ok($node, 'SELECT state FROM dbgate.backends WHERE pid = ' . $b5->pid,
	'queued', 'same message: the first statement is queued');
$node->safe_psql('postgres', 'ALTER SYSTEM SET dbgate.enabled = off');
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
poll_ok($node,
	"SELECT state FROM pg_stat_activity WHERE pid = " . $b5->pid, 'idle',
	'same message: both statements ran while the slot is still held');
($out, $err) = $b5->result;
like("$out|$err", qr/second\|$/, 'same message: the second statement ran');
is(backends_of($node, 'r_budget'), $h5->pid . ':active:-',
	'same message: the holder still holds the slot, nothing else does');
is( $node->safe_psql(
		'postgres', q{SELECT concat_ws(':', active, queued, admitted, admitted_after_wait)
		  FROM dbgate.status WHERE budget = 'r_budget'}),
	join(':', 1, 0, $before{admitted} + 1, $before{admitted_after_wait} + 1),
	'same message: the first statement counted as let through, the second not at all');
$locker->query('SELECT pg_advisory_unlock(5)');
(undef, $err) = $h5->result;
is($err, '', 'same message: the slot holder finished');
$_->quit for ($h5, $b5);

$_->quit for (@s, $extra, $idle, $locker);
$node->safe_psql('postgres', 'ALTER SYSTEM RESET dbgate.enabled');
$node->stop;
done_testing();
