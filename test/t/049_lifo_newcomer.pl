# queue_order 'lifo' (1.3 rule): a newcomer is newer than every waiter, so
# in a fair 'lifo' budget it takes a free slot while no waiter is overdue;
# a released slot is handed off only to an overdue waiter, and otherwise
# freed and the newest waiter woken.  Once a waiter is overdue, newcomers
# queue and the overdue one is served.  A non-fair 'lifo' budget lets a
# newcomer take a free slot even then.
#
# The woken waiter is held stopped (SIGSTOP while it sleeps in the queue,
# holding no lock), so that what a release does is seen before the waiter
# can act: with a hand-off the slot is already counted as the waiter's
# (active 1, queued 0); freed, it is free (active 0, queued 1) and a
# newcomer may take it.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DbgateTest;

my $node = dbgate_node('lifo_newcomer');
$node->safe_psql(
	'postgres', q{
	CREATE ROLE ln_user LOGIN;
	SELECT dbgate.create_budget('ln', max_active => 1, max_queued => 4,
	                            queue_timeout => '60s', queue_order => 'lifo',
	                            overtake_limit => '1h');
	SELECT dbgate.assign_role('ln_user', 'ln');
});

my @stopped;    # resumed whatever happens

END { kill 'CONT', @stopped if @stopped; }

sub figures
{
	return $node->safe_psql('postgres',
		"SELECT active || ' active, ' || queued || ' queued'
		   FROM dbgate.status WHERE budget = 'ln'");
}

# setup: a holder keeps the slot until the superuser's advisory lock 1 is
# released, and a waiter queues behind it and is stopped there.
sub holder_and_stopped_waiter
{
	my ($name) = @_;
	my $ctl = DbgateTest::Session->new($node);
	$ctl->query('SELECT pg_advisory_lock(1)');
	my $h = DbgateTest::Session->new($node, user => 'ln_user');
	$h->send('SELECT pg_advisory_lock_shared(1), pg_advisory_unlock_shared(1)');
	poll_ok($node,
		"SELECT state FROM dbgate.backends WHERE pid = " . $h->pid,
		'active', "$name: the holder has the slot");
	my $w = DbgateTest::Session->new($node, user => 'ln_user');
	$w->send("SELECT 'waiter ran'");
	poll_ok($node,
		"SELECT b.state || '/' || a.wait_event_type
		   FROM dbgate.backends b JOIN pg_stat_activity a USING (pid)
		  WHERE pid = " . $w->pid,
		'queued/Extension', "$name: the waiter sleeps in the queue");
	kill 'STOP', $w->pid;
	push @stopped, $w->pid;
	return ($ctl, $h, $w);
}

sub resume
{
	my ($w) = @_;
	kill 'CONT', $w->pid;
	@stopped = grep { $_ != $w->pid } @stopped;
}

sub release_holder
{
	my ($ctl, $h, $name) = @_;
	$ctl->query('SELECT pg_advisory_unlock(1)');
	my ($out, $err) = $h->result;
	is($err, '', "$name: the holder finished");
}

# 1. Nobody is overdue: the released slot is freed (not handed to the
#    stopped waiter), and a newcomer takes it at once.
{
	my $name = 'not overdue';
	$node->safe_psql('postgres', 'SELECT dbgate.reset_stats()');
	my ($ctl, $h, $w) = holder_and_stopped_waiter($name);
	release_holder($ctl, $h, $name);
	is(figures(), '0 active, 1 queued',
		"$name: the released slot is free, the waiter still queues (woken, not granted)");
	my ($state, $out) = run_sql($node, "SELECT 'newcomer ran'", user => 'ln_user');
	is("$state/$out", '/newcomer ran', "$name: the newcomer takes the free slot");
	resume($w);
	($out) = $w->result;
	is($out, 'waiter ran', "$name: the waiter runs once resumed");
	counters_are($node, 'ln',
		{ admitted => 3, admitted_after_wait => 1 },
		"$name: counters exact");
	is($node->safe_psql('postgres',
			"SELECT admitted_overdue FROM dbgate.status WHERE budget = 'ln'"),
		'0', "$name: nobody was served as overdue");
	$_->quit for ($ctl, $h, $w);
}

# 2. The waiter is overdue: the released slot is handed to it (already
#    counted as its own while it is stopped), and a newcomer queues behind.
{
	my $name = 'overdue';
	$node->safe_psql('postgres',
		"SELECT dbgate.reset_stats();
		 SELECT dbgate.alter_budget('ln', overtake_limit => '100ms')");
	my ($ctl, $h, $w) = holder_and_stopped_waiter($name);
	# overdue once it has waited 100 ms
	$node->safe_psql('postgres', 'SELECT pg_sleep(0.2)');
	release_holder($ctl, $h, $name);
	is(figures(), '1 active, 0 queued',
		"$name: the slot is handed to the overdue waiter");
	my $n = DbgateTest::Session->new($node, user => 'ln_user');
	$n->send("SELECT 'newcomer ran'");
	poll_ok($node,
		"SELECT state FROM dbgate.backends WHERE pid = " . $n->pid,
		'queued', "$name: the newcomer queues");
	resume($w);
	my ($out) = $w->result;
	is($out, 'waiter ran', "$name: the overdue waiter runs");
	($out) = $n->result;
	is($out, 'newcomer ran', "$name: the newcomer runs after it");
	is($node->safe_psql('postgres',
			"SELECT admitted_overdue >= 1 FROM dbgate.status WHERE budget = 'ln'"),
		't', "$name: counted in admitted_overdue");
	is(figures(), '0 active, 0 queued', "$name: nothing left held");
	$_->quit for ($ctl, $h, $w, $n);
}

# 3. A slot was freed for a waiter that is not overdue, and the waiter
#    becomes overdue before it takes it: the next newcomer does not take
#    the free slot, it queues, and the overdue waiter gets the slot.
{
	my $name = 'overdue while the slot is free';
	$node->safe_psql('postgres',
		"SELECT dbgate.reset_stats();
		 SELECT dbgate.alter_budget('ln', overtake_limit => '1h')");
	my ($ctl, $h, $w) = holder_and_stopped_waiter($name);
	release_holder($ctl, $h, $name);
	is(figures(), '0 active, 1 queued', "$name: the released slot is free");
	$node->safe_psql('postgres',
		"SELECT dbgate.alter_budget('ln', overtake_limit => '1ms');
		 SELECT pg_sleep(0.05)");
	my $n = DbgateTest::Session->new($node, user => 'ln_user');
	$n->send("SELECT 'newcomer ran'");
	poll_ok($node,
		"SELECT state FROM dbgate.backends WHERE pid = " . $n->pid,
		'queued', "$name: the newcomer queues behind the overdue waiter");
	is(figures(), '1 active, 1 queued',
		"$name: the free slot went to the overdue waiter");
	resume($w);
	my ($out) = $w->result;
	is($out, 'waiter ran', "$name: the overdue waiter runs");
	($out) = $n->result;
	is($out, 'newcomer ran', "$name: then the newcomer");
	is(figures(), '0 active, 0 queued', "$name: nothing left held");
	$_->quit for ($ctl, $h, $w, $n);
}

# 4. Not fair: a newcomer takes a free slot even while a waiter is overdue.
{
	my $name = 'not fair';
	$node->safe_psql('postgres',
		"SELECT dbgate.reset_stats();
		 SELECT dbgate.alter_budget('ln', fair => false, overtake_limit => '1ms')");
	my ($ctl, $h, $w) = holder_and_stopped_waiter($name);
	$node->safe_psql('postgres', 'SELECT pg_sleep(0.05)');
	release_holder($ctl, $h, $name);
	is(figures(), '0 active, 1 queued', "$name: the released slot is free");
	my ($state, $out) = run_sql($node, "SELECT 'newcomer ran'", user => 'ln_user');
	is("$state/$out", '/newcomer ran',
		"$name: the newcomer takes it although the waiter is overdue");
	resume($w);
	($out) = $w->result;
	is($out, 'waiter ran', "$name: the waiter runs once resumed");
	counters_are($node, 'ln',
		{ admitted => 3, admitted_after_wait => 1 },
		"$name: counters exact");
	$_->quit for ($ctl, $h, $w);
}

# 5. 'fifo' is unchanged: a release hands the slot to the stopped waiter.
{
	my $name = 'fifo';
	$node->safe_psql('postgres',
		"SELECT dbgate.reset_stats();
		 SELECT dbgate.alter_budget('ln', fair => true, queue_order => 'fifo')");
	my ($ctl, $h, $w) = holder_and_stopped_waiter($name);
	release_holder($ctl, $h, $name);
	is(figures(), '1 active, 0 queued', "$name: the slot is handed off");
	resume($w);
	my ($out) = $w->result;
	is($out, 'waiter ran', "$name: the waiter runs");
	$_->quit for ($ctl, $h, $w);
}

$node->stop;
done_testing();
