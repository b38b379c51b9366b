# queue_order 'lifo' under a standing queue (README: Queue order).
#
# 1. The rule, one release at a time.  A standing queue made by hand: one
#    slot, and every statement that gets it keeps it until the test lets go
#    of an advisory lock, so each release is the test's and what it did is
#    seen before the next.  While nobody is overdue a released slot goes to
#    the newest waiter (fresh work first).  Once waiters have waited
#    overtake_limit (lowered while they wait, and their waits seen past it
#    on the server's clock), every release serves the longest-waiting
#    overdue one, also ahead of a newer waiter: nobody is passed over once
#    overdue, which is what bounds a waiter's wait by overtake_limit plus
#    the time the slots need to serve those overdue before it.  Each is
#    counted in admitted_overdue; the one admitted before (not overdue) is
#    not.  The same queue in 'fifo' counts none.
# 2. A load: 64 clients of a short statement through a budget of 2 slots,
#    in 'lifo' and then in 'fifo' order.  Checked is what holds however
#    fast the machine is: nothing rejected or canceled (there is no queue
#    timeout), every slot back, every admission counted overdue waited
#    more than 50 ms (the histogram; overtake_limit is 100 ms), and 'fifo'
#    counts none.  The waits themselves (the longest, how many were
#    overdue) measure the machine and are only printed.
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
	                            queue_order => 'lifo',
	                            overtake_limit => '${overtake_ms}ms');
	SELECT dbgate.assign_role('lq_user', 'lq');
	CREATE ROLE ls_user LOGIN;
	SELECT dbgate.create_budget('ls', max_active => 1, max_queued => 8,
	                            queue_order => 'lifo', overtake_limit => '1h');
	SELECT dbgate.assign_role('ls_user', 'ls');
});

# ---------------------------------------------------------------------------
# 1. The rule, one release at a time (budget ls).

my $ctl = DbgateTest::Session->new($node);
my %name_of;    # pid -> name of the statements below

# arrive(NAME, KEY): a statement of ls that, once admitted, holds the slot
# until the test lets go of advisory lock KEY (taken here)
sub arrive
{
	my ($name, $key) = @_;
	$ctl->query("SELECT pg_advisory_lock($key)");
	my $s = DbgateTest::Session->new($node, user => 'ls_user');
	$name_of{ $s->pid } = $name;
	$s->{key} = $key;
	$s->send("SELECT pg_advisory_lock_shared($key), pg_advisory_unlock_shared($key), '$name ran'");
	return $s;
}

sub state_of
{
	my ($s) = @_;
	return $node->safe_psql('postgres',
		'SELECT state FROM dbgate.backends WHERE pid = ' . $s->pid);
}

# the queue of ls as "name:position ..." in the order of queue_position
sub queue_of
{
	my $rows = $node->safe_psql('postgres',
		"SELECT pid || ':' || queue_position FROM dbgate.backends
		  WHERE budget = 'ls' AND state = 'queued' ORDER BY queue_position");
	return join(' ',
		map { my ($pid, $pos) = split /:/; ($name_of{$pid} // $pid) . ":$pos" }
		  split /\n/, $rows);
}

# release(S, NAME): the test lets go of S's lock; S ends and gives its slot back
sub release
{
	my ($s, $name) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	$ctl->query("SELECT pg_advisory_unlock($s->{key})");
	my ($out, $err) = $s->result;
	like($out, qr/ ran$/, "$name: $name_of{$s->pid} ran") or diag $err;
	return;
}

sub admitted_when_seen
{
	my ($s, $name, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	poll_ok($node, 'SELECT state FROM dbgate.backends WHERE pid = ' . $s->pid,
		'active', "$name: $what");
	return;
}

# every waiter of ls has waited at least overtake_limit, as the server's
# clock (the one the grant step reads) has it
my $all_overdue = q{SELECT bool_and(clock_timestamp() - b.state_since >= c.overtake_limit)
	FROM dbgate.backends b JOIN dbgate.budgets c USING (budget)
	WHERE b.budget = 'ls' AND b.state = 'queued'};

sub ls_counts
{
	return $node->safe_psql('postgres',
		"SELECT admitted || ':' || admitted_after_wait || ':' || admitted_overdue
		   FROM dbgate.status WHERE budget = 'ls'");
}

# waits longer than ms, from the histogram of BUDGET (its bounds are fixed)
sub waited_over
{
	my ($budget, $ms) = @_;
	return $node->safe_psql('postgres',
		"SELECT (SELECT count FROM dbgate.wait_histogram
		          WHERE budget = '$budget' AND le_ms = 'Infinity')
		      - (SELECT count FROM dbgate.wait_histogram
		          WHERE budget = '$budget' AND le_ms = $ms)");
}

{
	my $name = 'lifo';
	my $h = arrive('h', 1);
	admitted_when_seen($h, $name, 'h holds the slot');
	my @w;
	for my $i (1 .. 3)
	{
		push @w, arrive("w$i", 1 + $i);
		poll_ok($node, 'SELECT state FROM dbgate.backends WHERE pid = ' . $w[-1]->pid,
			'queued', "$name: w$i queues");
	}
	my ($w1, $w2, $w3) = @w;
	is(queue_of(), 'w3:1 w2:2 w1:3', "$name: nobody overdue: the newest first");

	release($h, $name);
	admitted_when_seen($w3, $name, 'the released slot goes to the newest waiter, w3');
	is(queue_of(), 'w2:1 w1:2', "$name: w1 and w2 wait on");

	# overdue from the next release on, once their waits are past the limit
	$node->safe_psql('postgres',
		"SELECT dbgate.alter_budget('ls', overtake_limit => '${overtake_ms}ms')");
	poll_ok($node, $all_overdue, 't',
		"$name: w1 and w2 have waited overtake_limit");
	is(queue_of(), 'w1:1 w2:2', "$name: the overdue first, the longest-waiting first");
	my $w4 = arrive('w4', 5);
	poll_ok($node, 'SELECT state FROM dbgate.backends WHERE pid = ' . $w4->pid,
		'queued', "$name: a newer waiter, w4, queues");
	is(queue_of(), 'w1:1 w2:2 w4:3', "$name: w4 after the overdue");

	release($w3, $name);
	admitted_when_seen($w1, $name, 'the release serves the longest-waiting overdue one, w1');
	is(queue_of(), 'w2:1 w4:2', "$name: the newer w4 is passed over");
	release($w1, $name);
	admitted_when_seen($w2, $name, 'then w2, still ahead of w4');
	poll_ok($node, $all_overdue, 't', "$name: w4 has waited overtake_limit too");
	release($w2, $name);
	admitted_when_seen($w4, $name, 'then w4');
	release($w4, $name);
	is(ls_counts(), '5:4:3',
		"$name: five admissions, four after a wait, the three overdue ones counted so");
	cmp_ok(waited_over('ls', 50), '>=', 3,
		"$name: the histogram has the overdue ones' waits of more than 50 ms");
	$_->quit for ($h, @w, $w4);
}

{
	my $name = 'fifo';
	$node->safe_psql('postgres',
		"SELECT dbgate.alter_budget('ls', queue_order => 'fifo'); SELECT dbgate.reset_stats('ls')");
	my $h = arrive('h', 1);
	admitted_when_seen($h, $name, 'h holds the slot');
	my $w1 = arrive('w1', 2);
	poll_ok($node, 'SELECT state FROM dbgate.backends WHERE pid = ' . $w1->pid,
		'queued', "$name: w1 queues");
	my $w2 = arrive('w2', 3);
	poll_ok($node, 'SELECT state FROM dbgate.backends WHERE pid = ' . $w2->pid,
		'queued', "$name: w2 queues");
	poll_ok($node, $all_overdue, 't', "$name: both have waited overtake_limit");
	is(queue_of(), 'w1:1 w2:2', "$name: in arrival order");
	release($h, $name);
	admitted_when_seen($w1, $name, 'the head, w1, gets the slot');
	release($w1, $name);
	admitted_when_seen($w2, $name, 'then w2');
	release($w2, $name);
	is(ls_counts(), '3:2:0', "$name: admitted_overdue stays 0");
	$_->quit for ($h, $w1, $w2);
}
$ctl->quit;

# ---------------------------------------------------------------------------
# 2. The load (budget lq).

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

my $lifo_tps = load('lifo');
my ($adm, $after, $overdue, $wmax, $lost, $active, $queued) =
  split /\|/, figures();
note("lifo: $lifo_tps tps, admitted $adm, after a wait $after, "
	  . "overdue $overdue, longest wait $wmax ms, "
	  . waited_over('lq', 500) . ' waited over 500 ms');
is("$lost:$active:$queued", '0:0:0',
	'lifo: nothing rejected or canceled, every slot back');
# an overdue admission waited overtake_limit (100 ms) when it was chosen
cmp_ok($overdue, '<=', waited_over('lq', 50),
	'lifo: no admission that waited under 50 ms was counted overdue');

# The same load in arrival order.
$node->safe_psql('postgres', q{
	SELECT dbgate.alter_budget('lq', queue_order => 'fifo');
	SELECT dbgate.reset_stats('lq');
});
my $fifo_tps = load('fifo');
my ($fadm, $fafter, $foverdue, $fwmax, $flost, $factive, $fqueued) =
  split /\|/, figures();
note("fifo: $fifo_tps tps, admitted $fadm, after a wait $fafter, longest wait $fwmax ms");
is("$flost:$factive:$fqueued", '0:0:0',
	'fifo: nothing rejected or canceled, every slot back');
is($foverdue, '0', 'fifo: admitted_overdue stays 0');
note(sprintf('lifo / fifo throughput: %.2f', $fifo_tps ? $lifo_tps / $fifo_tps : 0));

$node->stop;
done_testing();
