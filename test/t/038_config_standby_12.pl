# The 1.2 fields on a streaming standby: a hierarchy of budgets, queue
# order, weights, rates (and every other 1.2 field) are replayed, so that
# dbgate.budgets is the same on both servers after every change (also a
# child moved to another parent, made top-level, and a parent dropped with
# force); the standby enforces them for its own sessions, with its own
# counters: of two statements queued on the standby when a replayed change
# of the rate fills the bucket, the second waits for its token (the order
# forced: they wait behind a slot held by a statement that waits for an
# advisory lock, and the change gives them slots), a parent's max_active
# holds back a
# statement of another child on the standby (it waits in its own budget's
# queue, and is refused with the parent's DETAIL when that is full), a
# child's memory grant counts at both levels, a statement below min_cost
# passes ungated; the primary's counters see none of it.  A promoted
# standby keeps the configuration and goes on enforcing it.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use DbgateTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $primary = PostgreSQL::Test::Cluster->new('c12_primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', "shared_preload_libraries = 'dbgate'\n");
$primary->start;
$primary->safe_psql(
	'postgres', q{
	CREATE EXTENSION dbgate;
	CREATE ROLE c12_rate LOGIN;
	CREATE ROLE c12_cheap LOGIN;
	CREATE ROLE c12_one LOGIN;
	CREATE ROLE c12_two LOGIN;
	SELECT dbgate.create_budget('c12_before', 2, parent => NULL);
});
$primary->backup('b1');
my $standby = PostgreSQL::Test::Cluster->new('c12_standby');
$standby->init_from_backup($primary, 'b1', has_streaming => 1);
$standby->start;

# every column of every budget
my $conf_sql = q{SELECT coalesce(string_agg(b::text, E'\n' ORDER BY budget), '')
	FROM dbgate.budgets b};

# dbgate.budgets of the standby becomes that of the primary
sub replayed_ok
{
	my ($name) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $want = $primary->safe_psql('postgres', $conf_sql);
	ok($standby->poll_query_until('postgres', $conf_sql, $want),
		"$name: dbgate.budgets is the same on the standby")
	  or diag "primary:\n$want\nstandby:\n"
	  . $standby->safe_psql('postgres', $conf_sql);
	return $want;
}

# "budget:active:queued:admitted:admitted_after_wait:rate_limited:rejected_full"
sub counts
{
	my ($node, $budget) = @_;
	return $node->safe_psql('postgres',
		"SELECT active || ':' || queued || ':' || admitted || ':' || admitted_after_wait
		        || ':' || rate_limited || ':' || rejected_full
		   FROM dbgate.status WHERE budget = '$budget'");
}

# ---------------------------------------------------------------------------
# 1. a hierarchy and every 1.2 field, created in one transaction

$primary->safe_psql(
	'postgres', q{
	BEGIN;
	SELECT dbgate.create_budget('c12_parent', 1, weight => 7, max_rate => 1000,
	                            rate_burst => 20);
	SELECT dbgate.create_budget('c12_one', 2, 2, parent => 'c12_parent', weight => 3,
	                            queue_order => 'lifo', overtake_limit => '250ms',
	                            queue_timeout => '1min', max_memory_mb => 64,
	                            min_cost => 0);
	SELECT dbgate.create_budget('c12_two', 2, 1, parent => 'c12_parent', weight => 1,
	                            queue_timeout => '1min');
	SELECT dbgate.create_budget('c12_rate', 4, 4, max_rate => 2, rate_burst => 1);
	SELECT dbgate.create_budget('c12_cheap', 1, 0, min_cost => 1000.5);
	SELECT dbgate.assign_role('c12_cheap', 'c12_cheap');
	SELECT dbgate.assign_role('c12_one', 'c12_one');
	SELECT dbgate.assign_role('c12_two', 'c12_two');
	SELECT dbgate.assign_role('c12_rate', 'c12_rate');
	COMMIT;
});
my $conf = replayed_ok('a hierarchy and the 1.2 fields');
like($conf,
	qr/^\(c12_one,2,2,00:01:00,.*,lifo,00:00:00\.25,c12_parent,3,0,1,64,0,0,,0,0,0,1,00:00:00,log,,00:00:00,off,1\)$/m,
	'the child has its queue order, overtake_limit, parent, weight and memory');
like($conf, qr/^\(c12_parent,1,0,.*,fifo,00:00:00\.1,,7,1000,20,0,0,0,,0,0,0,1,00:00:00,log,,00:00:00,off,1\)$/m,
	'the parent has its weight and rate');
like($conf, qr/^\(c12_rate,4,4,.*,,1,2,1,0,0,0,,0,0,0,1,00:00:00,log,,00:00:00,off,1\)$/m,
	'the rate-limited budget has its rate and burst');
like($conf, qr/^\(c12_cheap,1,0,.*,,1,0,1,0,1000\.5,0,,0,0,0,1,00:00:00,log,,00:00:00,off,1\)$/m,
	'the budget of cheap reads has its min_cost');

# ---------------------------------------------------------------------------
# 2. the standby enforces the rate for its own sessions: two statements
# wait for c12_rate's only slot; a change makes it 4 slots at 2 per second
# (burst 1), which fills the bucket: the first runs at once, the second
# once its token is due, half a second later

my $clock = 'SELECT extract(epoch FROM clock_timestamp())';

# rate_due_ok(CHANGER, WHAT): the changes are made on CHANGER (the primary,
# or the promoted standby), the statements run on the standby.  Times are
# the server's: the second statement's clock_timestamp() (after its
# admission) against the statement_timestamp() of the change (before it);
# the change's grant step takes the first token as of up to 2 ms before
# it ran (DBGATE_DIM_CATCHUP_NS), and the bucket's monotonic clock may
# drift from the wall clock by a fraction of a millisecond: 3 ms of
# tolerance.
sub rate_due_ok
{
	my ($changer, $what) = @_;
	$changer->safe_psql('postgres',
		q{SELECT dbgate.alter_budget('c12_rate', max_active => 1, max_rate => 1)});
	ok( $standby->poll_query_until(
			'postgres',
			q{SELECT max_active || ':' || max_rate FROM dbgate.budgets WHERE budget = 'c12_rate'},
			'1:1'),
		"$what: the standby has one slot");
	my $locker = DbgateTest::Session->new($standby);
	$locker->query('SELECT pg_advisory_lock(1)');
	my $h = DbgateTest::Session->new($standby, user => 'c12_rate');
	$h->send('SELECT pg_advisory_xact_lock_shared(1)');
	poll_ok($standby, 'SELECT state FROM dbgate.backends WHERE pid = ' . $h->pid,
		'active', "$what: a statement holds the slot");
	my @w;
	for my $i (1, 2)
	{
		my $s = DbgateTest::Session->new($standby, user => 'c12_rate');
		$s->send($clock);
		poll_ok($standby,
			'SELECT queue_position FROM dbgate.backends WHERE pid = ' . $s->pid,
			$i, "$what: statement $i is queued");
		push @w, $s;
	}
	my ($at) = split /\n/,
	  $changer->safe_psql('postgres',
		q{SELECT extract(epoch FROM statement_timestamp());
		  SELECT dbgate.alter_budget('c12_rate', max_active => 4, max_rate => 2)});
	my @t;
	for my $s (@w)
	{
		my ($out, $err) = $s->result;
		is($err, '', "$what: a queued statement runs");
		push @t, $out;
		$s->quit;
	}
	cmp_ok($t[1] - $at, '>=', 0.497,
		"$what: the second ran once its token was due (" . ($t[1] - $at) . ' s)');
	is(counts($standby, 'c12_rate'), '1:0:3:2:1:0',
		"$what: its own counters show one admission that waited for a token");
	$locker->query('SELECT pg_advisory_unlock(1)');
	$h->result;
	$_->quit for ($h, $locker);
	return;
}

rate_due_ok($primary, 'rate on the standby');
is(counts($primary, 'c12_rate'), '0:0:0:0:0:0',
	'rate on the standby: the primary counted nothing');

# ---------------------------------------------------------------------------
# 3. the standby enforces the hierarchy for its own sessions: the parent's
# single slot, taken by a statement of c12_one, holds back a statement of
# c12_two, which waits in c12_two's queue; with that place taken too, the
# next one is refused with the parent's DETAIL (c12_two is fair: its own
# waiter would hold the newcomer back too, but the full parent is named as
# the reason)

sub hierarchy_ok
{
	my ($node, $what) = @_;
	my $holder = DbgateTest::Session->new($node, user => 'c12_one');
	# a Sort and a Function Scan: twice work_mem (4 MB), within the
	# slot's 32 MB of c12_one's 64
	$holder->send('SELECT pg_sleep(600) FROM (SELECT g FROM generate_series(1, 10) g '
		  . 'ORDER BY g) s LIMIT 1');
	poll_ok($node, q{SELECT active FROM dbgate.status WHERE budget = 'c12_parent'},
		'1', "$what: a statement of one child holds the parent's slot");
	is($node->safe_psql('postgres',
			q{SELECT string_agg(budget || ':' || memory_mb_active, ' ' ORDER BY budget)
			    FROM dbgate.status WHERE budget LIKE 'c12_%'}),
		'c12_before:0 c12_cheap:0 c12_one:8 c12_parent:8 c12_rate:0 c12_two:0',
		"$what: its grant of 8 MB counts at the child and at the parent");
	is($node->safe_psql('postgres',
			'SELECT memory_mb FROM dbgate.backends WHERE pid = ' . $holder->pid),
		'8', "$what: and in dbgate.backends");
	my $waiter = DbgateTest::Session->new($node, user => 'c12_two');
	$waiter->send('SELECT 42');
	poll_ok($node, 'SELECT state FROM dbgate.backends WHERE pid = ' . $waiter->pid,
		'queued', "$what: a statement of the other child waits");
	is(counts($node, 'c12_parent') . ' ' . counts($node, 'c12_one') . ' '
		  . counts($node, 'c12_two'),
		'1:1:0:0:0:0 1:0:1:0:0:0 0:1:0:0:0:0',
		"$what: the parent counts its subtree's slot and waiter");
	my ($st, undef, $e) = run_sql($node, 'SELECT 1', user => 'c12_two');
	is($st, '53300', "$what: with the child's queue full, the next one is refused");
	like($e,
		qr/DETAIL:\s+Its parent budget "c12_parent" has 1 of 1 statements active, and 1 of 1 queue places are taken\./,
		"$what: by the parent's limit");
	$node->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $holder->pid . ')');
	my ($out, $werr) = $waiter->result;
	is($out, '42', "$what: the waiter runs once the parent's slot is free");
	is(counts($node, 'c12_two'), '0:0:1:1:0:1',
		"$what: the child counts one admission after a wait and one rejection");
	$holder->quit;
	$waiter->quit;
	return;
}

hierarchy_ok($standby, 'hierarchy on the standby');

# a statement below min_cost passes the standby's gate; a costly one not
sub cheap_ok
{
	my ($node, $what) = @_;
	my ($st, $out) = run_sql($node, 'SELECT 42', user => 'c12_cheap');
	is($out, '42', "$what: a cheap read runs");
	($st, $out) = run_sql($node, 'SELECT count(*) FROM generate_series(1, 1000000)',
		user => 'c12_cheap');
	is($out, '1000000', "$what: a costly one runs");
	is($node->safe_psql('postgres',
			q{SELECT admitted || ':' || bypassed FROM dbgate.status WHERE budget = 'c12_cheap'}),
		'1:1', "$what: the cheap one passed ungated (bypassed), the costly one was admitted");
	return;
}
cheap_ok($standby, 'min_cost on the standby');
is(counts($primary, 'c12_two') . ' ' . counts($primary, 'c12_parent'),
	'0:0:0:0:0:0 0:0:0:0:0:0', 'hierarchy on the standby: the primary counted nothing');
is($primary->safe_psql('postgres',
		q{SELECT admitted || ':' || bypassed FROM dbgate.status WHERE budget = 'c12_cheap'}),
	'0:0', 'min_cost on the standby: the primary counted nothing');

# the standby's counters are its own to reset
$standby->safe_psql('postgres', 'SELECT dbgate.reset_stats()');
is(counts($standby, 'c12_two'), '0:0:0:0:0:0', 'reset_stats() works on the standby');

# ---------------------------------------------------------------------------
# 4. changes of the shape and of the 1.2 fields are replayed

$primary->safe_psql('postgres',
	q{SELECT dbgate.alter_budget('c12_two', parent => '', weight => 4, queue_order => 'lifo',
	                             overtake_limit => '10ms', max_rate => 50, rate_burst => 3)});
$conf = replayed_ok('a child made top-level, its order, weight and rate changed');
like($conf, qr/^\(c12_two,2,1,.*,lifo,00:00:00\.01,,4,50,3,0,0,0,,0,0,0,1,00:00:00,log,,00:00:00,off,1\)$/m,
	'the standby has the changed child');
$primary->safe_psql('postgres',
	q{SELECT dbgate.alter_budget('c12_two', parent => 'c12_parent', queue_order => 'fifo',
	                             max_rate => 0)});
replayed_ok('a child moved back under its parent');
$primary->safe_psql(
	'postgres', q{
	BEGIN;
	SELECT dbgate.create_budget('c12_gone', 5);
	SELECT dbgate.alter_budget('c12_before', parent => 'c12_gone');
	COMMIT;
	SELECT dbgate.drop_budget('c12_gone', force => true);
});
$conf = replayed_ok('a parent dropped with force');
like($conf, qr/^\(c12_before,2,0,.*,fifo,00:00:00\.1,,1,0,1,0,0,0,,0,0,0,1,00:00:00,log,,00:00:00,off,1\)$/m,
	'its child is top-level on the standby');
unlike($conf, qr/c12_gone/, 'the dropped parent is gone on the standby');

# ---------------------------------------------------------------------------
# 5. promotion keeps the configuration, and it is enforced

my $before = $primary->safe_psql('postgres', $conf_sql);
$standby->promote;
ok($standby->poll_query_until('postgres', 'SELECT pg_is_in_recovery()', 'f'),
	'the standby is promoted');
is($standby->safe_psql('postgres', $conf_sql), $before,
	'the promoted standby has the configuration it had replayed');

$standby->safe_psql('postgres', 'SELECT dbgate.reset_stats()');
rate_due_ok($standby, 'rate after promotion');
hierarchy_ok($standby, 'hierarchy after promotion');
cheap_ok($standby, 'min_cost after promotion');

# a change on the promoted server is enforced like one replayed
my ($pst) = run_sql($standby,
	"SELECT dbgate.alter_budget('c12_parent', max_active => 2)");
is($pst, '', 'the promoted standby accepts changes');
$standby->restart;
like($standby->safe_psql('postgres', $conf_sql), qr/^\(c12_parent,2,/m,
	'a change made after promotion survives a restart');

$standby->stop;
$primary->stop;
done_testing();
