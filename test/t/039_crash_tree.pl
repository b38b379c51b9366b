# Crash restart with slots held at three levels of a tree of budgets.
#
# A chain of three budgets (ct_root <- ct_mid <- ct_leaf) with statements
# holding slots at every level and statements waiting in the leaf's queue
# (counted in 'queued' at every level), plus a sibling leaf under the mid
# level and one under the root.  Twice the server goes down with slots
# held: first a backend that holds a slot is killed with SIGKILL (the
# postmaster reinitialises shared memory), then the postmaster itself is
# killed with SIGKILL and started again.  After each:
#  - every level's active and queued are 0, and so is every counter
#    (also those of 1.2: oldest_wait, admitted_overdue, rate_limited,
#    would_queue, memory_mb_active: the holders' sorts had memory grants
#    counted at all three levels) and every bucket of
#    dbgate.wait_histogram; dbgate.backends is empty;
#  - the configuration, with every 1.2 field, is as committed;
#  - new statements are gated at every level, each level seen holding a
#    statement back by the DETAIL of its 53300: the leaf's own limit, the
#    mid level's ("Its parent budget "ct_mid" ...") and the root's.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use DbgateTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);

# Cluster.pm turns restart_after_crash off; a crash restart needs it.
my $node = dbgate_node('crashtree',
	conf => "restart_after_crash = on\ndeadlock_timeout = '100ms'\n");

# root: 3 slots for its whole subtree
#   mid (2 slots, weight 2) <- leaf (2 slots, 1 queue place, 'lifo', a rate)
#                           <- leaf2 (2 slots, no queue)
#   side (2 slots, no queue)
$node->safe_psql(
	'postgres', q{
	CREATE ROLE ct_user LOGIN;
	CREATE ROLE ct_user2 LOGIN;
	CREATE ROLE ct_other LOGIN;
	SELECT dbgate.create_budget('ct_root', 3, max_rate => 1000, rate_burst => 100);
	SELECT dbgate.create_budget('ct_mid', 2, parent => 'ct_root', weight => 2);
	SELECT dbgate.create_budget('ct_leaf', 2, 1, queue_timeout => '10min',
	                            parent => 'ct_mid', weight => 3,
	                            queue_order => 'lifo', overtake_limit => '50ms',
	                            max_rate => 500, rate_burst => 50,
	                            max_memory_mb => 64);
	SELECT dbgate.create_budget('ct_leaf2', 2, 0, parent => 'ct_mid');
	SELECT dbgate.create_budget('ct_side', 2, 0, parent => 'ct_root', weight => 5);
	SELECT dbgate.assign_role('ct_user', 'ct_leaf');
	SELECT dbgate.assign_role('ct_user2', 'ct_leaf2');
	SELECT dbgate.assign_role('ct_other', 'ct_side');
});

my $config_sql = q{SELECT string_agg(b::text, E'\n' ORDER BY budget) FROM dbgate.budgets b};
my $config = $node->safe_psql('postgres', $config_sql);
like($config, qr/^\(ct_leaf,2,1,00:10:00,.*,lifo,00:00:00\.05,ct_mid,3,500,50,64,0,0,,0,0,0,1,00:00:00,log,,00:00:00,off,1\)$/m,
	'the leaf has its 1.2 fields');

my @LEVELS = qw(ct_root ct_mid ct_leaf ct_leaf2 ct_side);

# "budget:active:queued" of every budget
my $levels_sql = q{SELECT string_agg(budget || ':' || active || ':' || queued, ' '
	ORDER BY budget) FROM dbgate.status};

# Every counter of dbgate.status, whatever its type, as "col=value"
# where it is not 0, per budget ('' when all are 0).
my $nonzero_sql = q{
	SELECT coalesce(string_agg(budget || '.' || key || '=' || value, ' '
	                           ORDER BY budget, key), '')
	  FROM dbgate.status s, jsonb_each_text(to_jsonb(s) - 'budget' - 'max_active'
	                                        - 'max_queued' - 'stats_reset')
	 WHERE value NOT IN ('0', 'false')};

# Statements holding slots at every level, one waiting in the leaf's queue.
sub load
{
	my ($what) = @_;
	my @s;
	# two holders in the leaf: ct_leaf 2, ct_mid 2, ct_root 2; each with a
	# Sort and a Function Scan, a grant of twice work_mem (4 MB)
	for (1 .. 2)
	{
		my $h = DbgateTest::Session->new($node, user => 'ct_user');
		$h->send('SELECT pg_sleep(600) FROM (SELECT g FROM generate_series(1, 10) g '
			  . 'ORDER BY g) s LIMIT 1');
		push @s, $h;
	}
	poll_ok($node, q{SELECT active FROM dbgate.status WHERE budget = 'ct_leaf'},
		'2', "$what: two statements hold slots of the leaf");
	poll_ok($node,
		q{SELECT string_agg(budget || ':' || memory_mb_active, ' ' ORDER BY budget)
		    FROM dbgate.status},
		'ct_leaf:16 ct_leaf2:0 ct_mid:16 ct_root:16 ct_side:0',
		"$what: their memory grants count at all three levels");
	# one in the side budget: ct_root 3
	my $side = DbgateTest::Session->new($node, user => 'ct_other');
	$side->send('SELECT pg_sleep(600)');
	push @s, $side;
	poll_ok($node, q{SELECT active FROM dbgate.status WHERE budget = 'ct_side'},
		'1', "$what: one statement holds a slot of the side budget");
	# a waiter in the leaf's queue, counted at every level of its chain
	my $w = DbgateTest::Session->new($node, user => 'ct_user');
	$w->send('SELECT 1');
	push @s, $w;
	poll_ok($node,
		"SELECT state FROM dbgate.backends WHERE pid = " . $w->pid,
		'queued', "$what: a statement waits in the leaf's queue");
	is($node->safe_psql('postgres', $levels_sql),
		'ct_leaf:2:1 ct_leaf2:0:0 ct_mid:2:1 ct_root:3:1 ct_side:1:0',
		"$what: slots held and a waiter counted at all three levels");
	return @s;
}

# What must hold after the server came back.
sub after_restart
{
	my ($what) = @_;
	is($node->safe_psql('postgres', $levels_sql),
		'ct_leaf:0:0 ct_leaf2:0:0 ct_mid:0:0 ct_root:0:0 ct_side:0:0',
		"$what: active and queued are 0 at every level");
	is($node->safe_psql('postgres', $nonzero_sql), '',
		"$what: every counter of every level is 0");
	is($node->safe_psql('postgres',
			'SELECT count(*) FROM dbgate.wait_histogram WHERE count <> 0'),
		'0', "$what: every bucket of dbgate.wait_histogram is 0");
	is($node->safe_psql('postgres', 'SELECT count(*) FROM dbgate.backends'),
		'0', "$what: dbgate.backends is empty");
	is($node->safe_psql('postgres', $config_sql), $config,
		"$what: the configuration is as committed");

	# new statements are gated at every level
	my @s = load("$what, then");
	my ($st, undef, $err) = run_sql($node, 'SELECT 1', user => 'ct_user');
	is($st, '53300', "$what: the leaf holds a statement back");
	like($err, qr/DETAIL:\s+2 of 2 statements are active and 1 of 1 queue places are taken\./,
		"$what: by its own limit");
	($st, undef, $err) = run_sql($node, 'SELECT 1', user => 'ct_user2');
	is($st, '53300', "$what: the mid level holds a statement of its other child back");
	like($err,
		qr/DETAIL:\s+Its parent budget "ct_mid" has 2 of 2 statements active, and 0 of 0 queue places are taken\./,
		"$what: by the mid level's limit");
	($st, undef, $err) = run_sql($node, 'SELECT 1', user => 'ct_other');
	is($st, '53300', "$what: the root holds a statement of the side budget back");
	like($err,
		qr/DETAIL:\s+Its parent budget "ct_root" has 3 of 3 statements active, and 0 of 0 queue places are taken\./,
		"$what: by the root's limit");
	is($node->safe_psql('postgres',
			q{SELECT string_agg(budget || ':' || admitted || ':' || rejected_full, ' '
			  ORDER BY budget) FROM dbgate.status}),
		'ct_leaf:2:1 ct_leaf2:0:1 ct_mid:0:0 ct_root:0:0 ct_side:1:1',
		"$what: counted from zero, at the leaves");
	return @s;
}

# ---------------------------------------------------------------------------
# 1. kill -9 of a backend that holds a slot at three levels

my @s = load('before the first crash');
my $offset = -s $node->logfile;
ok(kill('KILL', $s[0]->pid), 'killed a slot holder of the leaf with SIGKILL');
$node->wait_for_log(qr/all server processes terminated; reinitializing/, $offset);
# then ready: a psql that finds the server still refusing connections
# may exit before poll_query_until() wrote its query, and IPC::Run
# dies of the broken pipe
$node->wait_for_log(qr/database system is ready to accept connections/,
	$offset);
ok($node->poll_query_until('postgres', 'SELECT 1', '1'),
	'the server accepts connections after the crash restart');
$_->wait_exit for @s;

@s = after_restart('after the crash restart');

# ---------------------------------------------------------------------------
# 2. kill -9 of the postmaster while slots are held at three levels (those
# of the check above, and the waiter)

my ($postmaster) =
  slurp_file($node->data_dir . '/postmaster.pid') =~ /^(\d+)/;
$node->kill9;
# the backends notice the postmaster's death and exit; a new postmaster
# starts once the old one is gone (not merely killed: its pid file names
# it) and none of its children is attached to the old shared memory
$_->wait_exit for @s;
for (1 .. 600)
{
	last unless kill 0, $postmaster;
	sleep 0.1;
}
my $started = 0;
for (1 .. 60)
{
	if ($node->start(fail_ok => 1))
	{
		$started = 1;
		last;
	}
	sleep 1;
}
ok($started, 'the server starts again after kill -9 of the postmaster');

@s = after_restart('after kill -9 of the postmaster');

$node->safe_psql('postgres',
	'SELECT pg_terminate_backend(pid) FROM dbgate.backends');
$_->wait_exit for @s;
poll_ok($node, $levels_sql . ' WHERE active + queued > 0', '',
	'every level drains when the sessions end');
$node->stop;
done_testing();
