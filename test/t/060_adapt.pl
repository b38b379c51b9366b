# The adaptive limit (1.3, src/adapt.c): a budget with adapt = 'on' lowers
# its limit L when its statements crowd the CPUs (M = 16 x the CPUs
# clients of CPU-bound statements on a budget of M: the CPU rule of
# src/adapt.c lowers L while more than 8 x the CPUs run), and admits no
# more than L; one whose statements sleep keeps L at max_active; 'shadow'
# computes L the same way and admits as before; configuration changes move
# L as README.md says (raising max_active raises L by as much, lowering
# clamps it, adapt_min bounds it, 'off' forgets it, 'on' again starts at
# max_active); a full budget's 53300 names both limits; a child adapts
# within its parent's slots; a standby adapts on its own.
#
# How the test stays clear of timing: a load runs until the state that it
# drives (L at or below half of max_active; in the tree, below it) is
# seen, polled for up to the default timeout, and is then ended by the
# test (its backends are terminated), however long the machine takes to
# get there.  What is admitted is checked with L standing still: L moves
# only in a step, and a step is taken only when a statement of the budget
# ends, so once the load is gone and nothing of the budget runs, L stays
# as it was read; then statements that wait for an advisory lock of the
# test (they never end by themselves) show how many of them L admits.
# The signals of the law count this server's backends only (R, C: those
# without a wait event), so other processes that load the machine do not
# make L fall; they can only delay its fall (a throughput that they cut
# makes rule 2 take a step back).  That sleeping statements keep L (section
# 2) is shown with the sleepers asleep throughout, so no scheduler can put
# enough of them on a CPU at a step.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use DbgateTest;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

# the load that crowds the CPUs is sized from their number, as the server
# counts them (sysconf(_SC_NPROCESSORS_ONLN))
my $ncpu = ((`getconf _NPROCESSORS_ONLN` // '') =~ /(\d+)/)[0] || 1;
my $M = 16 * $ncpu;
my $half = $M / 2;
my $Q = 4 * $M;
my $maxconn = 2 * $M + 40;
my $node = dbgate_node('adapt',
	conf => "max_wal_senders = 4\nwal_level = replica\nmax_connections = $maxconn\n");
$node->safe_psql(
	'postgres', qq{
	CREATE ROLE ad_cpu LOGIN;
	CREATE ROLE ad_sleep LOGIN;
	CREATE ROLE ad_sh LOGIN;
	CREATE ROLE ad_plain LOGIN;
	SELECT dbgate.create_budget('ad_cpu', $M, $Q, '1 min', adapt => 'on');
	SELECT dbgate.create_budget('ad_sleep', $M, $Q, '1 min', adapt => 'on');
	SELECT dbgate.create_budget('ad_sh', $M, $Q, '1 min', adapt => 'shadow');
	SELECT dbgate.create_budget('ad_plain', $M, $Q, '1 min');
	SELECT dbgate.assign_role(r::regrole, r) FROM unnest(ARRAY['ad_cpu', 'ad_sleep', 'ad_sh', 'ad_plain']) r;
});

sub limit_of
{
	my ($budget) = @_;
	return $node->safe_psql('postgres',
		"SELECT coalesce(adaptive_limit::text, 'NULL') FROM dbgate.status WHERE budget = '$budget'");
}

is(join(' ', map { limit_of($_) } qw(ad_cpu ad_sleep ad_sh ad_plain)),
	"$M $M $M NULL", 'L starts at max_active; NULL without adapt');

my $dir = PostgreSQL::Test::Utils::tempdir;
my $cpu_sql = "$dir/cpu.sql";
my $sleep_sql = "$dir/sleep.sql";
PostgreSQL::Test::Utils::append_to_file($cpu_sql,
	"SELECT count(*) FROM generate_series(1, 300000);\n");
PostgreSQL::Test::Utils::append_to_file($sleep_sql, "SELECT pg_sleep(0.01);\n");

# load(NODE, ROLE, FILE, SECONDS, CLIENTS): pgbench with CLIENTS (default
# M) clients of FILE as ROLE on NODE, in the background.  Without SECONDS it runs until stop() ends
# it (its own -T only bounds a test that died).
sub load
{
	my ($n, $role, $file, $seconds, $clients) = @_;
	$seconds //= 3 * $PostgreSQL::Test::Utils::timeout_default;
	$clients //= $M;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[
			'pgbench', '-n', '-c', $clients, '-j', ($clients > 1 ? 2 : 1), '-T', $seconds,
			'-f', $file, '-h', $n->host, '-p', $n->port,
			'-U', $role, 'postgres'
		],
		'>', \$out, '2>', \$err);
	return { node => $n, role => $role, h => $h, out => \$out, err => \$err };
}

# finish(LOAD) -> the transactions that its clients completed, once it
# has ended.
sub finish
{
	my ($l) = @_;
	$l->{h}->finish;
	return ${ $l->{out} } =~ /number of transactions actually processed: (\d+)/ ? $1 : 0;
}

# stop(LOAD) -> finish(LOAD) after the load's backends (all of the role's:
# no other session of it is open then) were terminated (a client that
# loses its connection ends; pgbench reports what the clients completed
# until then), and the budget's slots and queue are empty.
sub stop
{
	my ($l) = @_;
	my ($n, $role) = ($l->{node}, $l->{role});
	poll_until($n,
		"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		  WHERE usename = '$role'", '0')
	  or die "the backends of the load of $role did not end";
	my $done = finish($l);
	poll_until($n,
		"SELECT active + queued FROM dbgate.status WHERE budget = '$role'", '0')
	  or die "budget $role still has statements";
	return $done;
}

# falls_ok(BUDGET, NAME, NODE): L of BUDGET reaches half of max_active or
# less, polled while the load that drives it keeps running (a step of the
# law comes in every period in which statements end; how many periods it
# takes depends on the machine, not the verdict).
sub falls_ok
{
	my ($budget, $name, $n) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	return poll_ok($n // $node,
		"SELECT adaptive_limit <= $half FROM dbgate.status WHERE budget = '$budget'",
		't', $name);
}

# Statements that hold a slot until the test lets them go: each waits for
# the advisory lock 1, which $locker (a superuser, not gated) holds.
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

# release(ROLE, SESSIONS): let them go and wait until the budget is empty
sub release
{
	my ($role, @s) = @_;
	$locker->query('SELECT pg_advisory_unlock(1)');
	for (@s)
	{
		$_->result;
		$_->quit;
	}
	$locker->query('SELECT pg_advisory_lock(1)');
	poll_until($node,
		"SELECT active + queued FROM dbgate.status WHERE budget = '$role'", '0')
	  or die "budget $role still has statements";
	return;
}

sub active_queued
{
	my ($budget) = @_;
	return $node->safe_psql('postgres',
		"SELECT active || ':' || queued FROM dbgate.status WHERE budget = '$budget'");
}

# ---------------------------------------------------------------------------
# 1. CPU-bound statements: L falls, and no more than L are active
my $cpu = load($node, 'ad_cpu', $cpu_sql);
falls_ok('ad_cpu', 'CPU-bound: L falls below half of max_active');
ok(stop($cpu) > 0, 'CPU-bound: the clients got their work done');
# L as the load left it (its last statements may have taken a step)
my $l_cpu = limit_of('ad_cpu');
cmp_ok($l_cpu, '>=', 1, "CPU-bound: L settled at $l_cpu");
# L + 1 statements that do not end: L of them are admitted, the next waits
my @held = hold('ad_cpu', $l_cpu + 1);
is(active_queued('ad_cpu'), "$l_cpu:1",
	"CPU-bound: no more statements are active than L ($l_cpu), the next one waits");
release('ad_cpu', @held);

# ---------------------------------------------------------------------------
# 2. sleep-bound statements: L stays at max_active.  M - 1 statements of
# the budget sleep (wait event PgSleep) for as long as the test needs,
# seen admitted and asleep before anything else runs; one client then
# runs short statements of the budget for 2 s, whose ends take the steps
# of the law (one per period of 250 ms).  At each step nearly all of L is
# active (so no rule 1), and the budget's statements on a CPU are at most
# the one that takes the step (a quarter of L would be needed for rule 3,
# and R, the server's runnable backends, stays far below 8 x the CPUs):
# L cannot fall, however busy the machine is.  Were sleeping statements
# counted as on a CPU, R and C would be M and the first step would lower
# L.  The sleepers are then terminated, and the budget's adaptive limit is
# started again ('off', then 'on': L = max_active) for section 7, since
# the ends of M - 1 statements at once are steps of a CPU-bound moment.
my @sleepers;
for (1 .. $M - 1)
{
	my $s = DbgateTest::Session->new($node, user => 'ad_sleep');
	$s->send('SELECT pg_sleep(3600)');
	push @sleepers, $s;
}
poll_ok($node,
	"SELECT (SELECT active FROM dbgate.status WHERE budget = 'ad_sleep')
	     || ':' || (SELECT count(*) FROM pg_stat_activity
	                 WHERE usename = 'ad_sleep' AND wait_event = 'PgSleep')",
	($M - 1) . ':' . ($M - 1), 'sleep-bound: M - 1 statements are admitted and asleep');
my $sleep = load($node, 'ad_sleep', $sleep_sql, 2, 1);
ok(finish($sleep) > 0, 'sleep-bound: the client ran');
is(limit_of('ad_sleep'), $M, 'sleep-bound: L stays at max_active');
$node->safe_psql('postgres',
	"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = 'ad_sleep'");
$_->quit for @sleepers;
poll_ok($node,
	"SELECT active + queued FROM dbgate.status WHERE budget = 'ad_sleep'", '0',
	'sleep-bound: the sleepers are gone');
$node->safe_psql('postgres', q{
	SELECT dbgate.alter_budget('ad_sleep', adapt => 'off');
	SELECT dbgate.alter_budget('ad_sleep', adapt => 'on');
});
is(limit_of('ad_sleep'), $M, 'sleep-bound: L starts again at max_active');

# ---------------------------------------------------------------------------
# 3. shadow: L is computed, admission is as without it.  (In shadow mode
# nobody waits with M clients on a budget of M, so no rule raises L: it
# only falls, also while the load ends.)
my $sh = load($node, 'ad_sh', $cpu_sql);
falls_ok('ad_sh', 'shadow: L falls as with on');
stop($sh);
my $l_sh0 = limit_of('ad_sh');
@held = hold('ad_sh', $l_sh0 + 1);
is(active_queued('ad_sh'), ($l_sh0 + 1) . ':0',
	"shadow: more statements run at once than L ($l_sh0)");
release('ad_sh', @held);

# ---------------------------------------------------------------------------
# 4. configuration changes (nothing of ad_cpu runs: L moves only by them)
my $l = limit_of('ad_cpu');
$node->safe_psql('postgres', qq{SELECT dbgate.alter_budget('ad_cpu', max_active => @{[$M + 4]})});
is(limit_of('ad_cpu'), $l + 4, 'raising max_active by 4 raises L by 4');
$node->safe_psql('postgres', q{SELECT dbgate.alter_budget('ad_cpu', max_active => 3)});
cmp_ok(limit_of('ad_cpu'), '<=', 3, 'lowering max_active clamps L');
$node->safe_psql('postgres', qq{SELECT dbgate.alter_budget('ad_cpu', max_active => $M, adapt_min => 6)});
cmp_ok(limit_of('ad_cpu'), '>=', 6, 'adapt_min bounds L from below');
$node->safe_psql('postgres', q{SELECT dbgate.alter_budget('ad_cpu', adapt => 'shadow')});
my $l_sh = limit_of('ad_cpu');
$node->safe_psql('postgres', q{SELECT dbgate.alter_budget('ad_cpu', adapt => 'on')});
is(limit_of('ad_cpu'), $l_sh, "'shadow' -> 'on' keeps L");
$node->safe_psql('postgres', q{SELECT dbgate.alter_budget('ad_cpu', adapt => 'off')});
is(limit_of('ad_cpu'), 'NULL', "'off': no L");
$node->safe_psql('postgres', q{SELECT dbgate.alter_budget('ad_cpu', adapt => 'on', adapt_min => 1)});
is(limit_of('ad_cpu'), $M, "'on' again: L starts at max_active");

# ---------------------------------------------------------------------------
# 5. a full budget at its adaptive limit says so
$cpu = load($node, 'ad_cpu', $cpu_sql);
falls_ok('ad_cpu', 'CPU-bound again: L falls');
stop($cpu);
$node->safe_psql('postgres', q{SELECT dbgate.alter_budget('ad_cpu', max_queued => 0)});
$l = limit_of('ad_cpu');
@held = hold('ad_cpu', $l);
is(active_queued('ad_cpu'), "$l:0", "L = $l statements hold every slot");
my ($st, undef, $err) = run_sql($node, 'SELECT 1', user => 'ad_cpu');
is($st, '53300', 'the next one is refused');
like($err, qr/DETAIL:\s+$l of $l statements are active \(its adaptive limit; max_active is $M\)/,
	'and the DETAIL names both limits');
release('ad_cpu', @held);
poll_ok($node, q{SELECT sum(active + queued) FROM dbgate.status}, '0', 'every slot is back');

# ---------------------------------------------------------------------------
# 6. in a tree: a child adapts within its parent's slots (a period in
# which its parent held it back leaves L as it is, so the parent gives it
# as many slots as it may use).  The parent's active count is read at
# every look of the poll for the child's L, while the load runs.
$node->safe_psql(
	'postgres', qq{
	CREATE ROLE ad_kid LOGIN;
	SELECT dbgate.create_budget('ad_top', $M);
	SELECT dbgate.create_budget('ad_kid', $M, $Q, '1 min', parent => 'ad_top', adapt => 'on');
	SELECT dbgate.assign_role('ad_kid', 'ad_kid');
});
my $kid = load($node, 'ad_kid', $cpu_sql);
my ($tree_ok, $kid_fell, @tree_seen) = (1, 0);
my $until = time + $PostgreSQL::Test::Utils::timeout_default;
while (!$kid_fell && time < $until)
{
	my ($top, $kl) = split /\|/, $node->safe_psql('postgres',
		q{SELECT (SELECT active FROM dbgate.status WHERE budget = 'ad_top'),
		         (SELECT adaptive_limit FROM dbgate.status WHERE budget = 'ad_kid')});
	push @tree_seen, $top;
	$tree_ok = 0 if $top > $M;
	$kid_fell = $kl < $M;
	usleep(100_000) unless $kid_fell;
}
ok($tree_ok, "in a tree: the parent never has more than its $M active") or diag "@tree_seen";
ok($kid_fell, 'in a tree: the child adapts below its max_active');
stop($kid);

# ---------------------------------------------------------------------------
# 7. a standby adapts on its own
$node->backup('b1');
my $standby = PostgreSQL::Test::Cluster->new('adapt_standby');
$standby->init_from_backup($node, 'b1', has_streaming => 1);
$standby->start;
is($standby->safe_psql('postgres',
		q{SELECT pg_is_in_recovery() || ':' || adaptive_limit FROM dbgate.status WHERE budget = 'ad_sleep'}),
	"true:$M", 'the standby starts with L at max_active');
my $on_standby = load($standby, 'ad_sleep', $cpu_sql);
falls_ok('ad_sleep', 'CPU-bound statements on the standby lower its L', $standby);
stop($on_standby);
is(limit_of('ad_sleep'), $M, 'and the primary\'s L stays');
$standby->stop;

$locker->quit;
$node->stop;
done_testing();
