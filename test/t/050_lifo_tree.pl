# 'lifo' in trees (1.3): a slot that the Shares rule gives a fair 'lifo'
# child while none of its waiters is overdue is freed only in the child;
# its ancestors hold it for the child, so that only the child's woken
# waiter or a newcomer of the child takes it, never a sibling.  If the
# woken waiter leaves (canceled), the held slot goes back to the tree and
# a sibling's waiter gets it.  An overdue waiter is handed the slot as in
# 1.2.
#
# As in 049, the woken waiter is held stopped (SIGSTOP while it sleeps in
# the queue, holding no lock), so that what the release did is seen before
# the waiter acts: handed off, the slot counts as the waiter's in the
# child (1 active, 0 queued); held, the child shows it free (0 active,
# 1 queued) while the parent still counts it (2 active).
#
# The tree: lt_p (B = 2) with lt_l ('lifo', weight 2) and lt_s ('fifo',
# weight 1).  One statement of each holds a slot, a waiter of each queues;
# lt_l's holder is released, and by the weight rule (0 / 2 < 1 / 1) the
# slot goes to lt_l.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DbgateTest;

my $node = dbgate_node('lifo_tree');
$node->safe_psql(
	'postgres', q{
	CREATE ROLE lt_l_user LOGIN;
	CREATE ROLE lt_s_user LOGIN;
	SELECT dbgate.create_budget('lt_p', max_active => 2);
	SELECT dbgate.create_budget('lt_l', max_active => 2, max_queued => 4,
	                            queue_timeout => '60s', queue_order => 'lifo',
	                            overtake_limit => '1h', parent => 'lt_p',
	                            weight => 2);
	SELECT dbgate.create_budget('lt_s', max_active => 2, max_queued => 4,
	                            queue_timeout => '60s', parent => 'lt_p',
	                            weight => 1);
	SELECT dbgate.assign_role('lt_l_user', 'lt_l');
	SELECT dbgate.assign_role('lt_s_user', 'lt_s');
});

my @stopped;    # resumed whatever happens

END { kill 'CONT', @stopped if @stopped; }

sub figures
{
	return $node->safe_psql('postgres',
		"SELECT string_agg(budget || ' ' || active || '/' || queued, ', '
		                   ORDER BY budget)
		   FROM dbgate.status WHERE budget LIKE 'lt\\_%'");
}

sub state_of { return backend_state($node, $_[0]); }

# setup: lt_l and lt_s each hold a slot (the parent is full), a waiter of
# lt_s and then one of lt_l queue; lt_l's waiter is stopped.
sub setup_tree
{
	my ($name) = @_;
	my $ctl = DbgateTest::Session->new($node);
	$ctl->query('SELECT pg_advisory_lock(1), pg_advisory_lock(2)');
	my $hl = slot_holder($node, 'lt_l_user', 1, "$name: lt_l_user holds a slot");
	my $hs = slot_holder($node, 'lt_s_user', 2, "$name: lt_s_user holds a slot");
	my $ws = queued_waiter($node, 'lt_s_user', 'sibling',
		"$name: sibling sleeps in the queue", asleep => 1);
	my $wl = queued_waiter($node, 'lt_l_user', 'lifo waiter',
		"$name: lifo waiter sleeps in the queue", asleep => 1);
	kill 'STOP', $wl->pid;
	push @stopped, $wl->pid;
	return ($ctl, $hl, $hs, $ws, $wl);
}

sub resume
{
	my ($w) = @_;
	kill 'CONT', $w->pid;
	@stopped = grep { $_ != $w->pid } @stopped;
}

# newcomer(CTL, USER, NAME) -> figures() while it runs: a statement of
# USER arrives and is seen active -- admitted at once, not queued -- while
# it waits for advisory lock 9, which CTL holds; then CTL lets go and the
# statement ends.  Nothing else can free a slot meanwhile, so the state it
# is seen in is the one its arrival gave it (DbgateTest).
sub newcomer
{
	my ($ctl, $user, $name) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	return admitted_at_once($node, $ctl, $user, 9, 'newcomer ran',
		[ "$name: a newcomer of $user takes the held slot at once", "$name: the newcomer ran" ],
		during => \&figures);
}

sub release
{
	my ($ctl, $h, $key, $name) = @_;
	$ctl->query("SELECT pg_advisory_unlock($key)");
	my ($out, $err) = $h->result;
	is($err, '', "$name: the holder finished");
}

# 1. The slot is held for lt_l: its newcomer takes it, the sibling's waiter
#    keeps waiting; then the woken waiter takes the next one.
{
	my $name = 'held';
	my ($ctl, $hl, $hs, $ws, $wl) = setup_tree($name);
	is(figures(), 'lt_l 1/1, lt_p 2/2, lt_s 1/1', "$name: before the release");
	release($ctl, $hl, 1, $name);
	is(figures(), 'lt_l 0/1, lt_p 2/2, lt_s 1/1',
		"$name: freed in lt_l only, the parent holds it (not handed off)");
	is(state_of($ws), 'queued', "$name: the sibling's waiter still waits");
	is(newcomer($ctl, 'lt_l_user', $name), 'lt_l 1/1, lt_p 2/2, lt_s 1/1',
		"$name: the newcomer holds it in lt_l, the parent counts it once");
	is(figures(), 'lt_l 0/1, lt_p 2/2, lt_s 1/1',
		"$name: the newcomer's release is held for lt_l again");
	is(state_of($ws), 'queued', "$name: the sibling's waiter still waits");
	resume($wl);
	my ($out) = $wl->result;
	is($out, 'lifo waiter ran', "$name: the woken waiter takes it once resumed");
	($out) = $ws->result;
	is($out, 'sibling ran', "$name: then the sibling's waiter, as lt_l has none");
	release($ctl, $hs, 2, $name);
	is(figures(), 'lt_l 0/0, lt_p 0/0, lt_s 0/0', "$name: nothing left held");
	$_->quit for ($ctl, $hl, $hs, $ws, $wl);
}

# 2. The woken waiter is canceled: the slot held for it goes back to the
#    tree, and the sibling's waiter gets it.
{
	my $name = 'woken waiter canceled';
	my ($ctl, $hl, $hs, $ws, $wl) = setup_tree($name);
	release($ctl, $hl, 1, $name);
	is(figures(), 'lt_l 0/1, lt_p 2/2, lt_s 1/1', "$name: held for lt_l");
	$node->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $wl->pid . ')');
	resume($wl);
	my ($out, $err) = $wl->result;
	like($err, qr/canceling statement/, "$name: the waiter is canceled");
	($out) = $ws->result;
	is($out, 'sibling ran', "$name: the sibling's waiter proceeds");
	release($ctl, $hs, 2, $name);
	is(figures(), 'lt_l 0/0, lt_p 0/0, lt_s 0/0', "$name: nothing left held");
	is($node->safe_psql('postgres',
			"SELECT canceled_waiting FROM dbgate.status WHERE budget = 'lt_l'"),
		'1', "$name: counted in canceled_waiting");
	$_->quit for ($ctl, $hl, $hs, $ws, $wl);
}

# 3. The waiter of lt_l is overdue: the slot is handed off to it (1.2).
{
	my $name = 'overdue';
	$node->safe_psql('postgres',
		"SELECT dbgate.alter_budget('lt_l', overtake_limit => '100ms')");
	my ($ctl, $hl, $hs, $ws, $wl) = setup_tree($name);
	$node->safe_psql('postgres', 'SELECT pg_sleep(0.2)');
	release($ctl, $hl, 1, $name);
	is(figures(), 'lt_l 1/0, lt_p 2/1, lt_s 1/1',
		"$name: handed to the overdue waiter");
	resume($wl);
	my ($out) = $wl->result;
	is($out, 'lifo waiter ran', "$name: the overdue waiter runs");
	($out) = $ws->result;
	is($out, 'sibling ran', "$name: then the sibling's waiter");
	release($ctl, $hs, 2, $name);
	is(figures(), 'lt_l 0/0, lt_p 0/0, lt_s 0/0', "$name: nothing left held");
	$_->quit for ($ctl, $hl, $hs, $ws, $wl);
}

# 4. A configuration change while a slot is held gives it back (the
#    install's grant step decides again: lt_l is 'fifo' now, so its waiter
#    is handed the slot).
{
	my $name = 'changed while held';
	$node->safe_psql('postgres',
		"SELECT dbgate.alter_budget('lt_l', overtake_limit => '1h')");
	my ($ctl, $hl, $hs, $ws, $wl) = setup_tree($name);
	release($ctl, $hl, 1, $name);
	is(figures(), 'lt_l 0/1, lt_p 2/2, lt_s 1/1', "$name: held for lt_l");
	$node->safe_psql('postgres',
		"SELECT dbgate.alter_budget('lt_l', queue_order => 'fifo')");
	is(figures(), 'lt_l 1/0, lt_p 2/1, lt_s 1/1',
		"$name: given back and handed to the waiter under 'fifo'");
	resume($wl);
	my ($out) = $wl->result;
	is($out, 'lifo waiter ran', "$name: the waiter runs");
	($out) = $ws->result;
	is($out, 'sibling ran', "$name: then the sibling's waiter");
	release($ctl, $hs, 2, $name);
	is(figures(), 'lt_l 0/0, lt_p 0/0, lt_s 0/0', "$name: nothing left held");
	$_->quit for ($ctl, $hl, $hs, $ws, $wl);
}

done_testing();
