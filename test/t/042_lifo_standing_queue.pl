# queue_order 'lifo' under a standing queue: 64 clients of a short
# statement through a budget of 2 slots.  No admitted statement waits much
# longer than overtake_limit: at most overtake_limit plus the time the slots
# need to serve the waiters that became overdue before it (README: Queue
# order).  admitted_overdue counts the admissions that waited at least
# overtake_limit, and nothing that waited less than the waits the newest
# waiters see.  The same load through a 'fifo' budget is the comparison.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DbgateTest;

my $clients = 64;
my $seconds = 8;
my $stmt_ms = 2;
my $overtake_ms = 100;

my $node = dbgate_node('lifo_queue', conf => "max_connections = 100\n");
$node->safe_psql(
	'postgres', qq{
	CREATE ROLE lq_user LOGIN;
	SELECT dbgate.create_budget('lq', max_active => 2, max_queued => 100,
	                            queue_timeout => '30s', queue_order => 'lifo',
	                            overtake_limit => '${overtake_ms}ms');
	SELECT dbgate.assign_role('lq_user', 'lq');
});

my $script = $node->basedir . '/lq.sql';
PostgreSQL::Test::Utils::append_to_file($script,
	"SELECT pg_sleep(" . ($stmt_ms / 1000) . ");\n");

sub load
{
	my ($what) = @_;
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run(
		[
			'pgbench', '-n', '-c', $clients, '-j', 2, '-T', $seconds,
			'-f', $script, '-h', $node->host, '-p', $node->port,
			'-U', 'lq_user', 'postgres'
		],
		'>', \$out, '2>', \$err);
	ok($ok, "$what: pgbench ran") or diag($err);
	my ($tps) = $out =~ /tps = ([0-9.]+)/;
	return $tps // 0;
}

sub figures
{
	return $node->safe_psql('postgres',
		"SELECT admitted, admitted_after_wait, admitted_overdue, wait_time_max,
		        rejected_full + rejected_timeout + canceled_waiting, active, queued
		   FROM dbgate.status WHERE budget = 'lq'");
}

# waits longer than ms, from the histogram (its bounds are fixed)
sub waited_over
{
	my ($ms) = @_;
	return $node->safe_psql('postgres',
		"SELECT (SELECT count FROM dbgate.wait_histogram
		          WHERE budget = 'lq' AND le_ms = 'Infinity')
		      - (SELECT count FROM dbgate.wait_histogram
		          WHERE budget = 'lq' AND le_ms = $ms)");
}

my $lifo_tps = load('lifo');
my ($adm, $after, $overdue, $wmax, $lost, $active, $queued) =
  split /\|/, figures();
note("lifo: $lifo_tps tps, admitted $adm, after a wait $after, "
	  . "overdue $overdue, longest wait $wmax ms");
is("$lost:$active:$queued", '0:0:0',
	'lifo: nothing rejected or canceled, every slot back');
cmp_ok($after, '>', $adm / 2, 'lifo: a standing queue (most statements waited)');

# The slack: with 2 slots the overdue waiters (at most every client at
# once) are served one slot hold apart each, half of it with 2 slots; the
# mean hold time as measured (a loaded machine stretches it), with a margin
# of 3 and 100 ms for waking up.  On top of that come the stalls of a
# busy machine, which every waiter sees whatever the order: the same load
# in arrival order below measures them (its longest wait 365 to 870 ms on
# 2 CPUs, where 64 waiters of ~2 ms statements on 2 slots would wait under
# 100 ms; 'lifo' 400 to 550 ms in the same runs).  The bound is checked
# after it: a rule that passed over a waiter without bound would keep it
# waiting for seconds.
my $hold_ms = $node->safe_psql('postgres',
	"SELECT round((active_time_total / greatest(admitted, 1))::numeric, 3) FROM dbgate.status WHERE budget = 'lq'");
my $slack_ms = int($clients * $hold_ms / 2 * 3 + 100);
cmp_ok($overdue, '>', 0, 'lifo: some waiters became overdue and were served as such');
cmp_ok($overdue, '>=', waited_over(500),
	'lifo: every admission that waited 500 ms or more was an overdue one');
cmp_ok($overdue, '<=', waited_over(50),
	'lifo: no admission that waited under 50 ms was counted overdue');

# The same load in arrival order: every waiter waits its turn.
$node->safe_psql('postgres', q{
	SELECT dbgate.alter_budget('lq', queue_order => 'fifo');
	SELECT dbgate.reset_stats('lq');
});
my $fifo_tps = load('fifo');
my ($fadm, $fafter, $foverdue, $fwmax) = split /\|/, figures();
note("fifo: $fifo_tps tps, admitted $fadm, after a wait $fafter, longest wait $fwmax ms");
is($foverdue, '0', 'fifo: admitted_overdue stays 0');
my $bound_ms = $overtake_ms + $slack_ms + $fwmax;
cmp_ok($wmax, '<=', $bound_ms,
	"lifo: the longest wait ($wmax ms) is bounded by overtake_limit + $slack_ms ms "
	  . "+ fifo's longest wait ($fwmax ms)");
note(sprintf('lifo / fifo throughput: %.2f', $fifo_tps ? $lifo_tps / $fifo_tps : 0));

$node->stop;
done_testing();
