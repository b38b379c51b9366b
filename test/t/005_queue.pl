# The queue with real sessions: admit / queue / reject, what
# pg_stat_activity shows for a queued backend, FIFO order, queue timeout,
# cancel and terminate of queued and active backends, and a client that
# goes away while its statement is queued.  After each part every slot is
# back (active and queued 0, dbgate.backends empty) and the counters are
# exact.
#
# A statement "holds" a slot for as long as the test wants by waiting for
# an advisory lock that a superuser session (never gated) holds.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DbgateTest;

my $node = dbgate_node('queue');
$node->safe_psql(
	'postgres', q{
	CREATE ROLE q_user LOGIN;
	CREATE TABLE fifo_log (id serial PRIMARY KEY, who text);
	GRANT INSERT ON fifo_log TO q_user;
	GRANT USAGE ON SEQUENCE fifo_log_id_seq TO q_user;
});
my $locker = DbgateTest::Session->new($node);

# A gated session whose statement waits for advisory lock KEY, holding a
# slot (or queued for one) until the locker lets go.
sub start_holder
{
	my ($key) = @_;
	my $s = DbgateTest::Session->new($node, user => 'q_user');
	$s->send("SELECT pg_advisory_xact_lock_shared($key)");
	return $s;
}

sub use_budget
{
	my ($budget) = @_;
	$node->safe_psql('postgres', "SELECT dbgate.assign_role('q_user', '$budget')");
	return;
}

sub state_of
{
	my ($s) = @_;
	return "SELECT state || ':' || coalesce(queue_position::text, '-')
	        FROM dbgate.backends WHERE pid = " . $s->pid;
}

sub no_leak
{
	my ($budget, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	is($node->safe_psql('postgres',
			"SELECT active || ':' || queued FROM dbgate.status WHERE budget = '$budget'"),
		'0:0', "$what: active and queued are 0");
	is(backends_of($node, $budget), '', "$what: dbgate.backends is empty");
	return;
}

# ---------------------------------------------------------------------------
# B = 1, Q = 1: the first statement runs, the second waits, the third is
# rejected at once.

$node->safe_psql('postgres', q{SELECT dbgate.create_budget('q_basic', 1, 1)});
use_budget('q_basic');
$locker->query('SELECT pg_advisory_lock(1)');

my $s1 = start_holder(1);
poll_ok($node, state_of($s1), 'active:-', 'first statement is admitted');
my $s2 = DbgateTest::Session->new($node, user => 'q_user');
$s2->send(q{SELECT 'second'});
poll_ok($node, state_of($s2), 'queued:1',
	'second statement is queued at position 1');
# From PostgreSQL 17 on the wait has a name of its own, which
# pg_wait_events lists too; before 17 it is the generic Extension event.
my $queue_event = $node->pg_version >= 17 ? 'DbgateQueue' : 'Extension';
poll_ok(
	$node,
	'SELECT wait_event_type, wait_event, state FROM pg_stat_activity WHERE pid = '
	  . $s2->pid,
	"Extension|$queue_event|active",
	"pg_stat_activity shows the queued backend waiting on Extension/$queue_event");
if ($node->pg_version >= 17)
{
	is( $node->safe_psql(
			'postgres',
			q{SELECT type || '/' || name FROM pg_wait_events WHERE name LIKE 'Dbgate%'}),
		'Extension/DbgateQueue',
		'pg_wait_events lists the wait event DbgateQueue');
}

my $s3 = DbgateTest::Session->new($node, user => 'q_user');
my ($out, $err, $state) = $s3->query(q{SELECT 'third'});
is($state, '53300', 'third statement is rejected with 53300');
like($err, qr/ERROR:  53300: budget "q_basic" is full/, 'message says the budget is full');
like(
	$err,
	qr/DETAIL:  1 of 1 statements are active and 1 of 1 queue places are taken\./,
	'detail gives the active and queued counts and limits');
counters_are(
	$node, 'q_basic',
	{ active => 1, queued => 1, admitted => 1, rejected_full => 1 },
	'counters while one statement runs and one waits');

$locker->query('SELECT pg_advisory_unlock(1)');
($out, $err) = $s1->result;
is($err, '', 'first statement finished');
($out, $err) = $s2->result;
is("$out|$err", 'second|', 'queued statement ran after the first one');
counters_are(
	$node, 'q_basic',
	{
		admitted => 2,
		admitted_after_wait => 1,
		rejected_full => 1,
		peak_active => 1,
		peak_queued => 1
	},
	'counters after both statements');
is( $node->safe_psql(
		'postgres',
		q{SELECT wait_time_total > 0, wait_time_max > 0, wait_time_max <= wait_time_total,
		  active_time_total > 0 FROM dbgate.status WHERE budget = 'q_basic'}),
	't|t|t|t',
	'wait and active times are recorded');
no_leak('q_basic', 'basic');
$_->quit for ($s1, $s2, $s3);

# ---------------------------------------------------------------------------
# FIFO: three statements queue in order and run in that order.

$node->safe_psql('postgres', q{SELECT dbgate.create_budget('q_fifo', 1, 3)});
use_budget('q_fifo');
$locker->query('SELECT pg_advisory_lock(2)');
my $h = start_holder(2);
poll_ok($node, state_of($h), 'active:-', 'FIFO: holder is admitted');
my @w;
for my $i (1 .. 3)
{
	my $who = ('a', 'b', 'c')[ $i - 1 ];
	my $s = DbgateTest::Session->new($node, user => 'q_user');
	$s->send("INSERT INTO fifo_log (who) VALUES ('$who')");
	poll_ok($node, state_of($s), "queued:$i", "FIFO: '$who' is queued at position $i");
	push @w, $s;
}
is( backends_of($node, 'q_fifo'),
	join(',',
		$h->pid . ':active:-',
		$w[0]->pid . ':queued:1',
		$w[1]->pid . ':queued:2',
		$w[2]->pid . ':queued:3'),
	'FIFO: dbgate.backends lists the queue in order');
$locker->query('SELECT pg_advisory_unlock(2)');
$_->result for ($h, @w);
is($node->safe_psql('postgres', 'SELECT string_agg(who, \'\' ORDER BY id) FROM fifo_log'),
	'abc', 'FIFO: queued statements ran in queue order');
counters_are(
	$node, 'q_fifo',
	{ admitted => 4, admitted_after_wait => 3, peak_active => 1, peak_queued => 3 },
	'FIFO: counters');
no_leak('q_fifo', 'FIFO');
$_->quit for ($h, @w);

# ---------------------------------------------------------------------------
# Queue timeout.

$node->safe_psql('postgres',
	q{SELECT dbgate.create_budget('q_timeout', 1, 1, queue_timeout => '400ms')});
use_budget('q_timeout');
$locker->query('SELECT pg_advisory_lock(3)');
$h = start_holder(3);
poll_ok($node, state_of($h), 'active:-', 'timeout: holder is admitted');
my $t = DbgateTest::Session->new($node, user => 'q_user');
($out, $err, $state) = $t->query('SELECT 1');
# (a lower bound only: the client cannot wait less than the server did)
my $elapsed = $t->done_at - $t->sent_at;
is($state, '53300', 'timeout: queued statement gets 53300');
like(
	$err,
	qr/ERROR:  53300: timed out waiting for a slot in budget "q_timeout"/,
	'timeout: message says it timed out');
like(
	$err,
	qr/DETAIL:  Waited (\d+) ms in the queue; the queue timeout is 400 ms\./,
	'timeout: detail gives the time waited and the timeout');
my ($waited) = $err =~ /Waited (\d+) ms/;
ok(defined $waited && $waited >= 400, 'timeout: waited at least 400 ms');
ok($elapsed >= 0.4, "timeout: the client waited at least 400 ms ($elapsed s)");
# The timeout, not a free slot, ended the wait: the holder's statement is
# still waiting for the advisory lock that the locker holds.
is( $node->safe_psql(
		'postgres',
		'SELECT count(*) FROM pg_locks WHERE locktype = \'advisory\' AND NOT granted AND pid = '
		  . $h->pid),
	'1',
	'timeout: the wait ended while the holder still waits for its lock');
counters_are(
	$node, 'q_timeout',
	{ active => 1, admitted => 1, rejected_timeout => 1 },
	'timeout: counters while the holder still runs');
is(backends_of($node, 'q_timeout'), $h->pid . ':active:-',
	'timeout: the timed-out backend left the queue');
($out, $err) = $t->query('SHOW application_name');
is("$out|$err", $t->name . '|', 'timeout: the session goes on');
$locker->query('SELECT pg_advisory_unlock(3)');
$h->result;
counters_are($node, 'q_timeout', { admitted => 1, rejected_timeout => 1 },
	'timeout: counters at the end');
no_leak('q_timeout', 'timeout');
$_->quit for ($h, $t);

# ---------------------------------------------------------------------------
# Cancel and terminate, of queued and of active backends.

$node->safe_psql('postgres', q{SELECT dbgate.create_budget('q_cancel', 1, 3)});
use_budget('q_cancel');
$locker->query('SELECT pg_advisory_lock(4)');
$h = start_holder(4);
poll_ok($node, state_of($h), 'active:-', 'cancel: holder is admitted');
my $w1 = start_holder(4);
poll_ok($node, state_of($w1), 'queued:1', 'cancel: w1 queued');
my $w2 = DbgateTest::Session->new($node, user => 'q_user');
$w2->send('SELECT 2');
poll_ok($node, state_of($w2), 'queued:2', 'cancel: w2 queued');
my $w3 = DbgateTest::Session->new($node, user => 'q_user');
$w3->send('SELECT 3');
poll_ok($node, state_of($w3), 'queued:3', 'cancel: w3 queued');

# cancel a queued backend (in the middle of the queue)
$node->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $w2->pid . ')');
($out, $err, $state) = $w2->result;
is($state, '57014', 'cancel: canceled queued statement gets 57014');
like($err, qr/canceling statement due to user request/,
	'cancel: PostgreSQL\'s own message');
is( backends_of($node, 'q_cancel'),
	join(',', $h->pid . ':active:-', $w1->pid . ':queued:1', $w3->pid . ':queued:2'),
	'cancel: the canceled backend left the queue, the others moved up');
counters_are(
	$node, 'q_cancel',
	{ active => 1, queued => 2, admitted => 1, canceled_waiting => 1 },
	'cancel: counters after canceling a queued backend');

# terminate a queued backend (at the tail)
$node->safe_psql('postgres', 'SELECT pg_terminate_backend(' . $w3->pid . ')');
$err = $w3->wait_exit;
like($err, qr/FATAL:  57P01: terminating connection due to administrator command/,
	'cancel: terminated queued backend ends with 57P01');
poll_ok($node, 'SELECT count(*) FROM pg_stat_activity WHERE pid = ' . $w3->pid,
	'0', 'cancel: terminated backend is gone');
counters_are(
	$node, 'q_cancel',
	{ active => 1, queued => 1, admitted => 1, canceled_waiting => 2 },
	'cancel: counters after terminating a queued backend');

# cancel the active backend: its slot goes to w1
$node->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $h->pid . ')');
($out, $err, $state) = $h->result;
is($state, '57014', 'cancel: canceled active statement gets 57014');
poll_ok($node, state_of($w1), 'active:-',
	'cancel: the slot of the canceled statement went to the head of the queue');
counters_are(
	$node, 'q_cancel',
	{ active => 1, admitted => 2, admitted_after_wait => 1, canceled_waiting => 2 },
	'cancel: counters after canceling the active backend');

# terminate the active backend: its slot is returned at exit
$node->safe_psql('postgres', 'SELECT pg_terminate_backend(' . $w1->pid . ')');
$err = $w1->wait_exit;
like($err, qr/57P01/, 'cancel: terminated active backend ends with 57P01');
poll_ok($node, 'SELECT count(*) FROM pg_stat_activity WHERE pid = ' . $w1->pid,
	'0', 'cancel: terminated active backend is gone');
counters_are(
	$node, 'q_cancel',
	{ admitted => 2, admitted_after_wait => 1, canceled_waiting => 2 },
	'cancel: counters after terminating the active backend');
no_leak('q_cancel', 'cancel');

# the budget still works: a holder and a queued statement, then both run
$h = start_holder(4);
poll_ok($node, state_of($h), 'active:-', 'cancel: a new statement is admitted');
$w2->send('SELECT 22');
poll_ok($node, state_of($w2), 'queued:1', 'cancel: and the next one queues');
$locker->query('SELECT pg_advisory_unlock(4)');
$h->result;
($out, $err) = $w2->result;
is("$out|$err", '22|', 'cancel: queued statement runs');
counters_are(
	$node, 'q_cancel',
	{ admitted => 4, admitted_after_wait => 2, canceled_waiting => 2 },
	'cancel: counters at the end');
no_leak('q_cancel', 'cancel, at the end');
$_->quit for ($h, $w2, $w3, $w1);

# ---------------------------------------------------------------------------
# A client that goes away while its statement is queued.  The waiting
# backend watches its client socket: it notices at once, ends the way
# PostgreSQL ends a session whose client is gone (FATAL "connection to
# client lost") and frees its queue place, counted as canceled_waiting.
# The statement never runs.

$node->safe_psql('postgres', q{SELECT dbgate.create_budget('q_gone', 1, 1)});
use_budget('q_gone');
$locker->query('SELECT pg_advisory_lock(5)');
$h = start_holder(5);
poll_ok($node, state_of($h), 'active:-', 'disconnect: holder is admitted');
my $g = DbgateTest::Session->new($node, user => 'q_user');
my $log_offset = -s $node->logfile;
$g->send(q{SELECT 'nobody reads this'});
poll_ok($node, state_of($g), 'queued:1', 'disconnect: statement is queued');
$g->kill_client;
poll_ok($node, 'SELECT count(*) FROM pg_stat_activity WHERE pid = ' . $g->pid,
	'0', 'disconnect: the queued backend exits while the holder still runs');
ok($node->log_contains(qr/\[${\$g->pid}\][^\n]*FATAL:  connection to client lost/,
		$log_offset),
	'disconnect: the backend ends with "connection to client lost"');
counters_are(
	$node, 'q_gone',
	{ active => 1, admitted => 1, canceled_waiting => 1 },
	'disconnect: queue place freed, counted as canceled_waiting');
is(backends_of($node, 'q_gone'), $h->pid . ':active:-',
	'disconnect: only the holder is left in dbgate.backends');
$locker->query('SELECT pg_advisory_unlock(5)');
$h->result;
counters_are(
	$node, 'q_gone',
	{ admitted => 1, canceled_waiting => 1 },
	'disconnect: counters at the end');
no_leak('q_gone', 'disconnect');
$h->quit;

# A client that goes away while its statement runs: the statement runs to
# its end, the backend finds the client gone and exits, and the slot is
# returned.  The same for a session idle in a transaction that keeps the
# slot with an open cursor.

$node->safe_psql('postgres', q{SELECT dbgate.create_budget('q_gone_active', 1, 1)});
use_budget('q_gone_active');
$locker->query('SELECT pg_advisory_lock(6)');
$h = start_holder(6);
poll_ok($node, state_of($h), 'active:-', 'disconnect while running: statement admitted');
$h->kill_client;
$locker->query('SELECT pg_advisory_unlock(6)');
poll_ok($node, 'SELECT count(*) FROM pg_stat_activity WHERE pid = ' . $h->pid,
	'0', 'disconnect while running: the backend exits');
counters_are($node, 'q_gone_active', { admitted => 1 },
	'disconnect while running: slot returned');
no_leak('q_gone_active', 'disconnect while running');

my $c = DbgateTest::Session->new($node, user => 'q_user');
($out, $err) = $c->query(
	'BEGIN; DECLARE c CURSOR FOR SELECT g FROM generate_series(1, 10) g; FETCH 2 FROM c;');
is("$out|$err", "1\n2|", 'cursor: first rows fetched');
is(backends_of($node, 'q_gone_active'), $c->pid . ':idle in transaction:-',
	'cursor: the open cursor keeps the slot while the session is idle (shown idle in transaction)');
($out, $err) = $c->query('FETCH 1 FROM c');
is("$out|$err", '3|', 'cursor: FETCH in the same session needs no new slot');
counters_are($node, 'q_gone_active', { active => 1, admitted => 2 },
	'cursor: one admission for the whole cursor');
$c->kill_client;
poll_ok($node, 'SELECT count(*) FROM pg_stat_activity WHERE pid = ' . $c->pid,
	'0', 'cursor: the backend exits when its client is gone');
counters_are($node, 'q_gone_active', { admitted => 2 },
	'cursor: slot returned at exit');
no_leak('q_gone_active', 'cursor');

# Clean up: no budget is left behind.
$node->safe_psql(
	'postgres', q{
	SELECT dbgate.drop_budget(budget, force => true) FROM dbgate.budgets;
});
is($node->safe_psql('postgres', 'SELECT count(*) FROM dbgate.status'),
	'0', 'all budgets dropped');
$locker->quit;

$node->stop;
done_testing();
