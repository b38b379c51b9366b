# Reservations (1.3): 'reserved' r of a child keeps r of its parent's slots
# for it.  A statement of another child takes a parent slot only if the
# parent keeps, after it, as many free slots as its other children's
# unused reservations; a child that uses fewer than r finds a slot at once
# however busy its siblings are; beyond reservations sharing is
# work-conserving.  A parent's 'active' counts the slots kept for its
# children's unused reservations (what its other children cannot take).
#
#   1. fast path: a newcomer of the child with a reservation is admitted
#      at once while its sibling floods the parent;
#   2. grant step: a released slot within the reservation goes to the
#      child's waiter, not to the sibling that the weights would choose;
#   3. three levels: a reservation at the middle level covers the
#      grandparent as far as it goes, and no further;
#   4. a shadow parent holds nobody back, and counts in would_queue what
#      its reservations would have held back;
#   5. changes of reserved and parent while slots are kept and used;
#   6. lock-holder admission is unaffected: a waiter held back only by a
#      reservation is admitted when a slot holder of the parent's subtree
#      waits for its lock.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DbgateTest;

my $node = dbgate_node('reserved');
$node->safe_psql(
	'postgres', q{
	CREATE ROLE rs_c LOGIN;
	CREATE ROLE rs_f LOGIN;
	CREATE ROLE rs_s LOGIN;
	CREATE ROLE rs_c1 LOGIN;
	CREATE ROLE rs_f1 LOGIN;
	ALTER ROLE rs_f SET deadlock_timeout = '100ms';
	SELECT dbgate.create_budget('rs_p', max_active => 2);
	SELECT dbgate.create_budget('rs_c', max_active => 3, max_queued => 4,
	                            queue_timeout => '60s', parent => 'rs_p',
	                            reserved => 1);
	SELECT dbgate.create_budget('rs_f', max_active => 3, max_queued => 4,
	                            queue_timeout => '60s', parent => 'rs_p');
	SELECT dbgate.assign_role('rs_c', 'rs_c');
	SELECT dbgate.assign_role('rs_f', 'rs_f');
	-- three levels: rs_g (4) of rs_m (reserved 2) and rs_s; rs_m of
	-- rs_mc (reserved 1) and rs_mf
	SELECT dbgate.create_budget('rs_g', max_active => 4);
	SELECT dbgate.create_budget('rs_m', max_active => 4, parent => 'rs_g',
	                            reserved => 2);
	SELECT dbgate.create_budget('rs_s', max_active => 4, max_queued => 4,
	                            queue_timeout => '60s', parent => 'rs_g');
	SELECT dbgate.create_budget('rs_mc', max_active => 2, max_queued => 4,
	                            queue_timeout => '60s', parent => 'rs_m',
	                            reserved => 1);
	SELECT dbgate.create_budget('rs_mf', max_active => 4, max_queued => 4,
	                            queue_timeout => '60s', parent => 'rs_m');
	SELECT dbgate.assign_role('rs_s', 'rs_s');
	SELECT dbgate.assign_role('rs_c1', 'rs_mc');
	SELECT dbgate.assign_role('rs_f1', 'rs_mf');
});

sub figures
{
	my ($like) = @_;
	return $node->safe_psql('postgres',
		"SELECT string_agg(budget || ' ' || active || '/' || queued, ', '
		                   ORDER BY budget)
		   FROM dbgate.status WHERE budget IN ($like)");
}
my $two = "'rs_p', 'rs_c', 'rs_f'";
my $three = "'rs_g', 'rs_m', 'rs_s', 'rs_mc', 'rs_mf'";

sub state_of { return backend_state($node, $_[0]); }

# a statement of 'user' that holds its slot until the superuser session
# ctl lets go of advisory lock 'key'
sub holder
{
	my ($user, $key, $name) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	return slot_holder($node, $user, $key, "$name: a statement of $user holds a slot");
}

sub waiter
{
	my ($user, $what, $name) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	return queued_waiter($node, $user, $what, "$name: $what queues");
}

my $ctl = DbgateTest::Session->new($node);

# at_once(USER, NAME): a statement of USER arrives and is seen active --
# admitted at once, not queued -- while it waits for advisory lock 99,
# which ctl holds; then ctl lets go and the statement ends.  Nothing frees
# a slot meanwhile, so the state it is seen in is the one its arrival gave
# it (DbgateTest).
sub at_once
{
	my ($user, $name) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	admitted_at_once($node, $ctl, $user, 99, 'ran',
		[ "$name: a newcomer of $user is admitted at once", "$name: the newcomer of $user ran" ]);
	return;
}

sub finish
{
	my ($s, $expect, $name) = @_;
	my ($out, $err) = $s->result;
	is($err, '', "$name: no error") if !defined $expect;
	is($out, $expect, "$name: $expect") if defined $expect;
}

# 1. The fast path.
{
	my $name = 'fast path';
	is(figures($two), 'rs_c 0/0, rs_f 0/0, rs_p 1/0',
		"$name: the parent counts the unused reservation");
	$ctl->query('SELECT pg_advisory_lock(1)');
	my $f1 = holder('rs_f', 1, $name);
	my $f2 = waiter('rs_f', 'f2', $name);
	is(figures($two), 'rs_c 0/0, rs_f 1/1, rs_p 2/1',
		"$name: the sibling takes no slot of the reservation");
	at_once('rs_c', $name);
	is(figures($two), 'rs_c 0/0, rs_f 1/1, rs_p 2/1',
		"$name: the slot is kept for the child again");
	$ctl->query('SELECT pg_advisory_unlock(1)');
	finish($f1, undef, "$name: f1");
	finish($f2, 'f2 ran', $name);
	is(figures($two), 'rs_c 0/0, rs_f 0/0, rs_p 1/0', "$name: nothing leaked");
	$_->quit for ($f1, $f2);
}

# 2. The grant step: rs_c (reserved 2) uses both, rs_f one; both queue.
#    A release of rs_c keeps its slot for rs_c's waiter, although by the
#    weights (rs_f 10, rs_c 1) the parent's slot would go to rs_f.
{
	my $name = 'grant step';
	$node->safe_psql('postgres',
		"SELECT dbgate.alter_budget('rs_p', max_active => 3);
		 SELECT dbgate.alter_budget('rs_c', reserved => 2);
		 SELECT dbgate.alter_budget('rs_f', weight => 10)");
	is(figures($two), 'rs_c 0/0, rs_f 0/0, rs_p 2/0', "$name: two kept");
	$ctl->query('SELECT pg_advisory_lock(1), pg_advisory_lock(2), pg_advisory_lock(3)');
	my $c0 = holder('rs_c', 1, $name);
	my $c1 = holder('rs_c', 2, $name);
	my $f1 = holder('rs_f', 3, $name);
	my $f2 = waiter('rs_f', 'f2', $name);
	my $c2 = waiter('rs_c', 'c2', $name);
	is(figures($two), 'rs_c 2/1, rs_f 1/1, rs_p 3/2', "$name: all queue");
	$ctl->query('SELECT pg_advisory_unlock(2)');
	finish($c1, undef, "$name: c1");
	finish($c2, 'c2 ran', "$name: the child's waiter gets the kept slot");
	is(state_of($f2), 'queued', "$name: the sibling's waiter still waits");
	$ctl->query('SELECT pg_advisory_unlock(3)');
	finish($f1, undef, "$name: f1");
	finish($f2, 'f2 ran', "$name: then the sibling's waiter");
	$ctl->query('SELECT pg_advisory_unlock(1)');
	finish($c0, undef, "$name: c0");
	is(figures($two), 'rs_c 0/0, rs_f 0/0, rs_p 2/0', "$name: nothing leaked");
	$_->quit for ($c0, $c1, $f1, $f2, $c2);
}

# 3. Three levels: rs_s floods rs_g; rs_mc finds a slot at once (its own
#    reservation at rs_m, rs_m's at rs_g); rs_mf uses what is left of
#    rs_m's reservation, and then waits for rs_g.
{
	my $name = 'three levels';
	is(figures($three),
		'rs_g 2/0, rs_m 1/0, rs_mc 0/0, rs_mf 0/0, rs_s 0/0',
		"$name: both levels count what is kept");
	$ctl->query('SELECT pg_advisory_lock(1), pg_advisory_lock(2)');
	my $s1 = holder('rs_s', 1, $name);
	my $s2 = holder('rs_s', 1, $name);
	my $s3 = waiter('rs_s', 's3', $name);
	at_once('rs_c1', $name);
	my $f1 = holder('rs_f1', 2, $name);
	my $f2 = holder('rs_f1', 2, $name);
	is(figures($three),
		'rs_g 4/1, rs_m 3/0, rs_mc 0/0, rs_mf 2/0, rs_s 2/1',
		"$name: the middle level's reservation covered its children's statements");
	my $f3 = waiter('rs_f1', 'f3', $name);
	my $c2 = DbgateTest::Session->new($node, user => 'rs_c1');
	$c2->send("SELECT 'c2 ran'");
	poll_ok($node, 'SELECT state FROM dbgate.backends WHERE pid = ' . $c2->pid,
		'queued', "$name: rs_mc waits too once rs_m's reservation is used (no further)");
	$node->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $c2->pid . ')');
	my (undef, undef, $state) = $c2->result;
	is($state, '57014', "$name: rs_mc's waiter is canceled");
	$c2->quit;
	$ctl->query('SELECT pg_advisory_unlock(2)');
	finish($_, undef, "$name: rs_mf") for ($f1, $f2);
	finish($f3, 'f3 ran', "$name: rs_mf's waiter gets rs_m's kept slot");
	is(state_of($s3), 'queued', "$name: rs_s's waiter still waits");
	$ctl->query('SELECT pg_advisory_unlock(1)');
	finish($_, undef, "$name: rs_s") for ($s1, $s2);
	finish($s3, 's3 ran', "$name: rs_s's waiter");
	is(figures($three),
		'rs_g 2/0, rs_m 1/0, rs_mc 0/0, rs_mf 0/0, rs_s 0/0',
		"$name: nothing leaked");
	$_->quit for ($s1, $s2, $s3, $f1, $f2, $f3);
}

# 4. A shadow parent holds nobody back; what is kept counts as in use
#    for its would_queue.
{
	my $name = 'shadow parent';
	$node->safe_psql('postgres',
		"SELECT dbgate.alter_budget('rs_p', max_active => 2, enforce => false);
		 SELECT dbgate.alter_budget('rs_c', reserved => 1);
		 SELECT dbgate.reset_stats()");
	$ctl->query('SELECT pg_advisory_lock(1)');
	my @f = map { holder('rs_f', 1, $name) } 1 .. 3;
	is(figures($two), 'rs_c 0/0, rs_f 3/0, rs_p 4/0',
		"$name: the sibling is not held back");
	is($node->safe_psql('postgres',
			"SELECT would_queue FROM dbgate.status WHERE budget = 'rs_p'"),
		'2', "$name: the parent counts the two it would have held back");
	at_once('rs_c', $name);
	$ctl->query('SELECT pg_advisory_unlock(1)');
	finish($_, undef, "$name: f") for @f;
	is(figures($two), 'rs_c 0/0, rs_f 0/0, rs_p 1/0', "$name: nothing leaked");
	$node->safe_psql('postgres',
		"SELECT dbgate.alter_budget('rs_p', enforce => true)");
	$_->quit for @f;
}

# 5. Changes while slots are kept or used.
{
	my $name = 'changes';
	$node->safe_psql('postgres',
		"SELECT dbgate.alter_budget('rs_c', reserved => 0)");
	is(figures($two), 'rs_c 0/0, rs_f 0/0, rs_p 0/0',
		"$name: reserved 0 gives the kept slot back");
	$ctl->query('SELECT pg_advisory_lock(1), pg_advisory_lock(2), pg_advisory_lock(3)');
	my $f1 = holder('rs_f', 1, $name);
	my $f2 = holder('rs_f', 2, $name);
	my $f3 = waiter('rs_f', 'f3', $name);
	$node->safe_psql('postgres',
		"SELECT dbgate.alter_budget('rs_c', reserved => 1)");
	is(figures($two), 'rs_c 0/0, rs_f 2/1, rs_p 3/1',
		"$name: a new reservation is kept at once (beyond max_active)");
	at_once('rs_c', $name);
	$ctl->query('SELECT pg_advisory_unlock(1)');
	finish($f1, undef, "$name: f1");
	is(state_of($f3), 'queued',
		"$name: the sibling waits while the parent keeps the reservation");
	$ctl->query('SELECT pg_advisory_unlock(2)');
	finish($f2, undef, "$name: f2");
	finish($f3, 'f3 ran', "$name: then the sibling's waiter");
	# a statement of rs_c runs while its reservation grows and goes
	my $c1 = holder('rs_c', 3, $name);
	$node->safe_psql('postgres',
		"SELECT dbgate.alter_budget('rs_c', reserved => 2)");
	is(figures($two), 'rs_c 1/0, rs_f 0/0, rs_p 2/0',
		"$name: one used and one more kept");
	$node->safe_psql('postgres',
		"SELECT dbgate.alter_budget('rs_c', parent => '')");
	is(figures($two), 'rs_c 1/0, rs_f 0/0, rs_p 1/0',
		"$name: moved out: the kept slot goes back, the used one stays");
	$ctl->query('SELECT pg_advisory_unlock(3)');
	finish($c1, undef, "$name: c1");
	is(figures($two), 'rs_c 0/0, rs_f 0/0, rs_p 0/0',
		"$name: returned to the parent it was taken from");
	$node->safe_psql('postgres',
		"SELECT dbgate.alter_budget('rs_c', parent => 'rs_p', reserved => 1)");
	is(figures($two), 'rs_c 0/0, rs_f 0/0, rs_p 1/0', "$name: kept again");
	$_->quit for ($f1, $f2, $f3, $c1);
}

# 6. Lock-holder admission: f2 holds lock 10 and waits, held back only by
#    rs_c's reservation; f1, which holds the parent's other slot, waits for
#    lock 10: f2 is admitted as a lock holder.
{
	my $name = 'lock holder';
	$node->safe_psql('postgres', 'SELECT dbgate.reset_stats()');
	my $f2 = DbgateTest::Session->new($node, user => 'rs_f');
	$f2->query('BEGIN');
	$f2->query('SELECT pg_advisory_xact_lock(10)');
	my $f1 = DbgateTest::Session->new($node, user => 'rs_f');
	$f1->send('SELECT pg_advisory_xact_lock(10)');
	poll_ok($node,
		"SELECT b.state || '/' || a.wait_event_type
		   FROM dbgate.backends b JOIN pg_stat_activity a USING (pid)
		  WHERE pid = " . $f1->pid,
		'active/Lock', "$name: f1 holds a slot and waits for the lock");
	my ($out) = $f2->query("SELECT 'f2 ran'");
	is($out, 'f2 ran', "$name: f2 is admitted");
	is($node->safe_psql('postgres',
			"SELECT admitted_lock_holder FROM dbgate.status WHERE budget = 'rs_f'"),
		'1', "$name: as a lock holder");
	$f2->query('COMMIT');
	finish($f1, undef, "$name: f1");
	is(figures($two), 'rs_c 0/0, rs_f 0/0, rs_p 1/0', "$name: nothing leaked");
	$_->quit for ($f1, $f2);
}

# Dropping a child gives back what it kept.
$node->safe_psql('postgres', "SELECT dbgate.drop_budget('rs_c', force => true)");
is(figures($two), 'rs_f 0/0, rs_p 0/0', 'drop: the kept slot goes back');

done_testing();
