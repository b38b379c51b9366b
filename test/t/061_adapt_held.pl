# The adaptive limit (1.3, src/adapt.c) and the periods it leaves alone:
# only a period in which a budget waited for tokens or for an ancestor's
# slots leaves L as it is (SPEC 1.3 Interactions).  A parent whose child
# has waiters at the child's own limit, a non-fair budget and a fair
# 'lifo' one (whose freed slots wait for the waiter the grant step woke
# when a step looks) are held back by nothing: their L follows the law.
# And an install that raises a child's reservation raises an adapting
# parent's L to its children's reservations at once (SPEC: L is never
# below them), not only at the parent's next step.
#
# How the test stays clear of timing: the contention is the test's own.
# Statements that wait for the advisory lock that $locker holds are
# active and wait for a heavyweight lock (K of the law), and they never
# end; a client of the budget (or of a sibling) runs short statements
# whose ends take the steps.  The law's lock rule (K >= max(1.5, L/2))
# then lowers L in the first measured period that is not held, and the
# poll waits for L below max_active for as long as the machine takes.
# Where L must stand still (the install's part), the clients whose ends
# take steps are gone (their backends have exited: a backend takes its
# last step before it exits) and the statements that remain never end,
# so that L moves only by the install; its tree is one where L fell
# before the rule for held periods was mended (the parent is full, and its
# waiter waits for its own slots), so that it tests the install alone.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use DbgateTest;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = dbgate_node('adapt_held', conf => "max_connections = 80\n");
$node->safe_psql(
	'postgres', q{
	CREATE ROLE ah_lock LOGIN;
	CREATE ROLE ah_tick LOGIN;
	CREATE ROLE ah_rs_lock LOGIN;
	CREATE ROLE ah_rs_wait LOGIN;
	CREATE ROLE ah_rs_tick LOGIN;
	CREATE ROLE ah_nf LOGIN;
	CREATE ROLE ah_lifo LOGIN;
	SELECT dbgate.create_budget('ah_top', 10, adapt => 'on');
	SELECT dbgate.create_budget('ah_lock', 8, 10, parent => 'ah_top');
	SELECT dbgate.create_budget('ah_tick', 10, 10, parent => 'ah_top', reserved => 1);
	SELECT dbgate.create_budget('ah_rs', 10, adapt => 'on');
	SELECT dbgate.create_budget('ah_rs_lock', 8, parent => 'ah_rs');
	SELECT dbgate.create_budget('ah_rs_wait', 2, 10, parent => 'ah_rs');
	SELECT dbgate.create_budget('ah_rs_tick', 10, 10, parent => 'ah_rs', reserved => 1);
	SELECT dbgate.create_budget('ah_rs_idle', 9, parent => 'ah_rs');
	SELECT dbgate.create_budget('ah_nf', 10, 10, fair => false, adapt => 'on');
	SELECT dbgate.create_budget('ah_lifo', 10, 10, queue_order => 'lifo', adapt => 'on');
	SELECT dbgate.assign_role(r::regrole, r)
	  FROM unnest(ARRAY['ah_lock', 'ah_tick', 'ah_rs_lock', 'ah_rs_wait', 'ah_rs_tick',
	                    'ah_nf', 'ah_lifo']) r;
});

sub limit_of
{
	my ($budget) = @_;
	return $node->safe_psql('postgres',
		"SELECT adaptive_limit FROM dbgate.status WHERE budget = '$budget'");
}

sub active_queued
{
	my ($budget) = @_;
	return $node->safe_psql('postgres',
		"SELECT active || ':' || queued FROM dbgate.status WHERE budget = '$budget'");
}

my $dir = PostgreSQL::Test::Utils::tempdir;
my $tick_sql = "$dir/tick.sql";
my $sleep_sql = "$dir/sleep.sql";
PostgreSQL::Test::Utils::append_to_file($tick_sql, "SELECT 1;\n");
PostgreSQL::Test::Utils::append_to_file($sleep_sql, "SELECT pg_sleep(0.01);\n");

# tick(ROLE, CLIENTS, FILE): pgbench with CLIENTS clients of FILE (default
# SELECT 1) as ROLE, in the background, until untick() ends it (its own
# -T only bounds a test that died); its sessions' application_name is
# 'tick'.
sub tick
{
	my ($role, $clients, $file) = @_;
	$file //= $tick_sql;
	my ($out, $err) = ('', '');
	local $ENV{PGAPPNAME} = 'tick';
	my $h = IPC::Run::start(
		[
			'pgbench', '-n', '-c', $clients, '-j', 1,
			'-T', 3 * $PostgreSQL::Test::Utils::timeout_default,
			'-f', $file, '-h', $node->host, '-p', $node->port,
			'-U', $role, 'postgres'
		],
		'>', \$out, '2>', \$err);
	return { role => $role, h => $h };
}

# untick(TICK): its backends are terminated and have exited (each took its
# last step, if any, before that), and pgbench has ended.
sub untick
{
	my ($t) = @_;
	my $role = $t->{role};
	poll_until($node,
		"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		  WHERE usename = '$role' AND application_name = 'tick'", '0')
	  or die "the clients of $role did not end";
	$t->{h}->finish;
	return;
}

# Statements that hold a slot until the test ends: each waits for the
# advisory lock 1, which $locker (a superuser, not gated) holds.
my $locker = DbgateTest::Session->new($node);
$locker->query('SELECT pg_advisory_lock(1)');

# hold(ROLE, N) -> N sessions of ROLE, each sending such a statement, once
# all N are in dbgate.backends (active or queued)
sub hold
{
	my ($role, $count) = @_;
	my @s;
	for (1 .. $count)
	{
		my $s = DbgateTest::Session->new($node, user => $role);
		$s->send('SELECT pg_advisory_xact_lock_shared(1)');
		push @s, $s;
	}
	poll_until($node,
		"SELECT count(*) FROM dbgate.backends WHERE budget = '$role'", $count)
	  or die "the $count statements of $role did not reach the gate";
	return @s;
}

# ---------------------------------------------------------------------------
# 1. A parent of 10 over a child of 8 whose 8 active statements wait for a
# lock, with 4 more statements queued at the child's own limit; a sibling
# with one client of short statements (through its reservation of 1, so
# that its statements go on however low the parent's L falls) takes the
# steps.  The parent's 'queued' counts the child's 4 waiters while it has
# fewer than 10 active: the step took that for a parent held back, and L
# stayed at 10.  Nothing above the parent holds it back, so the lock rule
# lowers its L.
my @lockers = hold('ah_lock', 12);
is(active_queued('ah_lock'), '8:4', 'the child holds 8 statements that wait for a lock, 4 wait at its limit');
is(active_queued('ah_top'), '9:4', 'the parent counts them, and the sibling\'s reservation');
my $tick = tick('ah_tick', 1);
poll_ok($node, q{SELECT adaptive_limit < 10 FROM dbgate.status WHERE budget = 'ah_top'},
	't', 'a parent whose child waits at its own limit: the lock rule lowers the parent\'s L');

untick($tick);

# ---------------------------------------------------------------------------
# 2. The install, in a tree where L falls as it did before: a parent of 10,
# full, over a child whose 8 statements wait for a lock, a child of 2 whose
# statements wait for it too, one active and one queued for the parent's
# own slots, and a sibling with a reservation of 1 and a client of short
# statements.  Once L is below 10 and nothing of the parent's subtree ends
# any more (the sibling's client has exited), L stands at l; a child's
# reservation raised to l makes the children reserve l + 1, and the
# parent's L is that at once.
@lockers = (@lockers, hold('ah_rs_lock', 8), hold('ah_rs_wait', 2));
is(active_queued('ah_rs'), '10:1',
	'the parent is full (and its reservation of 1), one statement waits for its slots');
$tick = tick('ah_rs_tick', 1);
poll_ok($node, q{SELECT adaptive_limit < 10 FROM dbgate.status WHERE budget = 'ah_rs'},
	't', 'the parent\'s L falls');
untick($tick);
is(active_queued('ah_rs_tick'), '0:0', 'the sibling\'s client has gone');
my $l = limit_of('ah_rs');
cmp_ok($l, '<', 10, "the parent's L stands at $l");
$node->safe_psql('postgres', "SELECT dbgate.alter_budget('ah_rs_idle', reserved => $l)");
is(limit_of('ah_rs'), $l + 1,
	"a child's reservation raised to $l: the parent's L is its children's reservations at once");
$node->safe_psql('postgres', "SELECT dbgate.alter_budget('ah_rs_idle', reserved => 0)");
is(limit_of('ah_rs'), $l + 1, 'a reservation lowered leaves L as it is');

# ---------------------------------------------------------------------------
# 3. Top-level budgets whose statements wait for a lock, 8 of 10, and 6
# clients of 10 ms statements through the other 2 slots, so that some
# always wait (else most periods are idle: their slot time is that of the
# statements that end): a non-fair one and a fair 'lifo' one.  A step runs
# just after a release, whose slot these budgets leave free for the
# waiter the grant step woke (a newcomer may take it first): the step saw
# waiters and fewer than L active at nearly every step, and L moved only
# when a newcomer or the woken waiter had taken the slot before the step
# looked.  Nothing above them holds them back, so the lock rule lowers L.
for my $budget (qw(ah_nf ah_lifo))
{
	my @held = hold($budget, 8);
	is(active_queued($budget), '8:0', "$budget: 8 statements wait for a lock");
	my $t = tick($budget, 6, $sleep_sql);
	poll_ok($node, "SELECT adaptive_limit < 10 FROM dbgate.status WHERE budget = '$budget'",
		't', "$budget: the lock rule lowers L");
	untick($t);
	push @lockers, @held;
}

$locker->query('SELECT pg_advisory_unlock(1)');
for (@lockers)
{
	$_->result;
	$_->quit;
}
poll_ok($node, q{SELECT count(*) FROM dbgate.backends}, '0', 'every statement has ended');
$locker->quit;
$node->stop;
done_testing();
