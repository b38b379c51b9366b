# Runaway statements (1.3): a statement of a budget with runaway_after
# that has executed that long is counted, logged and acted on by the
# runaway worker within 100 ms.
#
#   1. the worker runs (in ps: it connects to no database, so
#      pg_stat_activity does not show it);
#   2. latency: 24 runaways of four sessions at once, each counted and
#      logged within 100 ms of runaway_after (from the LOG line's elapsed,
#      and from its timestamp against that of the statement's own log line);
#   3. 'cancel' of a statement with parallel workers: 57014 with the
#      budget's message, and its workers end with it;
#   4. a kept slot (scope 'transaction'): each statement counts from its
#      own start, idle time never;
#   5. kill -9 of the worker: a crash restart, the worker is back, and the
#      counts start from zero and are exact;
#   6. a streaming standby counts its own runaways.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::Local qw(timegm);
use DbgateTest;

my $node = dbgate_node('runaway',
	conf => "restart_after_crash = on\n"
	  . "log_line_prefix = '%m [%p] '\n"
	  . "log_timezone = 'UTC'\n"
	  . "compute_query_id = on\n"
	  . "max_worker_processes = 12\n"
	  . "max_parallel_workers = 8\n");
$node->safe_psql(
	'postgres', q{
	CREATE ROLE ra_u LOGIN;
	ALTER ROLE ra_u SET log_statement = 'all';
	SELECT dbgate.create_budget('ra_b', 10, runaway_after => '100ms');
	SELECT dbgate.assign_role('ra_u', 'ra_b');
	CREATE TABLE ra_t (i int) WITH (parallel_workers = 2);
	INSERT INTO ra_t SELECT generate_series(1, 2000);
	ANALYZE ra_t;
	GRANT SELECT ON ra_t TO ra_u;
});

# the pid of node n's runaway worker ('' when it is not there), from ps:
# "postgres: NODE: dbgate runaway worker"
sub worker_pid
{
	my ($n) = @_;
	my $name = $n->name;
	for (`ps -eo pid=,args=`)
	{
		return $1 if /^\s*(\d+) postgres: \Q$name\E: dbgate runaway worker\s*$/;
	}
	return '';
}

# worker_runs(n, name, not => pid): one assertion that a worker (other
# than pid) runs within 60 s
sub worker_runs
{
	my ($n, $name, %p) = @_;
	my $pid = '';
	for (1 .. 600)
	{
		$pid = worker_pid($n);
		last if $pid ne '' && (!defined $p{not} || $pid ne $p{not});
		$pid = '';
		select(undef, undef, undef, 0.1);
	}
	ok($pid ne '', $name);
	return $pid;
}

sub runaways
{
	my ($n, $budget) = @_;
	return $n->safe_psql('postgres',
		"SELECT runaways FROM dbgate.status WHERE budget = '$budget'");
}

# "2026-12-02 18:01:02.345 UTC" -> seconds
sub log_time
{
	my ($ts) = @_;
	my ($y, $mo, $d, $h, $mi, $s, $ms) =
	  $ts =~ /^(\d+)-(\d+)-(\d+) (\d+):(\d+):(\d+)\.(\d+)/
	  or die "bad log time $ts";
	return timegm($s, $mi, $h, $d, $mo - 1, $y) + $ms / 1000;
}

my $re_line = qr/^(\S+ \S+) UTC \[(\d+)\] LOG:  runaway statement in budget "([^"]+)": pid (\d+), query id (-?\d+), elapsed (\d+) ms \(runaway_after (\d+) ms, action (\w+)\)$/m;

# the runaway lines of the log from offset on: [time, pid, budget, elapsed, action, queryid]
sub runaway_lines
{
	my ($n, $offset) = @_;
	my $log = slurp_file($n->logfile, $offset);
	my @l;
	while ($log =~ /$re_line/g)
	{
		push @l, [ log_time($1), $4, $3, $6, $8, $5 ];
	}
	return @l;
}

# 1. The worker.
worker_runs($node, 'the runaway worker runs');

# 2. Latency over 24 runaways of four sessions at once.
{
	my $offset = -s $node->logfile;
	my @s = map { DbgateTest::Session->new($node, user => 'ra_u') } 1 .. 4;
	my $errors = '';
	for my $round (1 .. 6)
	{
		$_->send('SELECT pg_sleep(0.25)') for @s;
		for (@s)
		{
			my (undef, $err) = $_->result;
			$errors .= $err;
		}
	}
	is($errors, '', "latency: 'log' lets every statement end");
	poll_ok($node, q{SELECT runaways FROM dbgate.status WHERE budget = 'ra_b'},
		'24', 'latency: 24 runaways counted');
	my @l = runaway_lines($node, $offset);
	is(scalar(@l), 24, 'latency: 24 LOG lines');
	my $log = slurp_file($node->logfile, $offset);
	my %starts;
	while ($log =~ /^(\S+ \S+) UTC \[(\d+)\] LOG:  statement: SELECT pg_sleep\(0\.25\)/mg)
	{
		push @{ $starts{$2} }, log_time($1);
	}
	my %seen;
	my ($max_el, $max_ts) = (0, 0);
	for my $x (@l)
	{
		my ($t, $pid, $budget, $elapsed, $action) = @$x;
		my $k = $seen{$pid}++;
		my $start = $starts{$pid}[$k];
		my $late_el = $elapsed - 100;
		$max_el = $late_el if $late_el > $max_el;
		if (defined $start)
		{
			my $late_ts = ($t - $start) * 1000 - 100;
			$max_ts = $late_ts if $late_ts > $max_ts;
		}
		else
		{
			$max_ts = 1e9;
		}
	}
	ok($max_el >= 0 && $max_el < 100,
		"latency: counted at most 100 ms after runaway_after (by elapsed; worst $max_el ms)");
	ok($max_ts < 100,
		"latency: logged at most 100 ms after runaway_after (by log times; worst "
		  . sprintf('%.0f', $max_ts) . ' ms)');
	is(join(',', sort keys %seen), join(',', sort map { $_->pid } @s),
		'latency: the lines name the sessions\' pids');
	ok((grep { $_->[5] != 0 } @l) == 24, 'latency: with the query id computed');
	$_->quit for @s;
}

# 3. 'cancel' of a statement with parallel workers.
{
	$node->safe_psql('postgres',
		"SELECT dbgate.alter_budget('ra_b', runaway_after => '2s', runaway_action => 'cancel');
		 SELECT dbgate.reset_stats('ra_b')");
	my $s = DbgateTest::Session->new($node, user => 'ra_u');
	my $gucs = "SET max_parallel_workers_per_gather = 2; SET parallel_setup_cost = 0; "
	  . "SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0;";
	my ($plan) = $s->query("$gucs EXPLAIN (COSTS OFF) SELECT count(*) FROM ra_t WHERE pg_sleep(0.01) IS NOT NULL");
	like($plan, qr/Gather/, 'parallel: the plan is parallel');
	my $t0 = time;
	$s->send('SELECT count(*) FROM ra_t WHERE pg_sleep(0.01) IS NOT NULL');
	poll_ok($node,
		"SELECT count(*) > 0 FROM pg_stat_activity WHERE backend_type = 'parallel worker' AND leader_pid = "
		  . $s->pid,
		't', 'parallel: the statement runs with parallel workers');
	my (undef, $err, $state) = $s->result;
	is($state, '57014', 'parallel: the statement is canceled (57014)');
	like($err,
		qr/canceling statement because it ran longer than runaway_after \(2s\) of budget "ra_b"/,
		'parallel: with the budget\'s message');
	poll_ok($node,
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'parallel worker' AND leader_pid = "
		  . $s->pid,
		'0', 'parallel: its workers have ended');
	poll_ok($node, q{SELECT runaways FROM dbgate.status WHERE budget = 'ra_b'},
		'1', 'parallel: counted once');
	my ($out) = $s->query('SELECT 1');
	is($out, '1', 'parallel: the session goes on');
	$s->quit;
}

# 4. A kept slot: each statement counts from its own start.
{
	$node->safe_psql('postgres',
		"SELECT dbgate.alter_budget('ra_b', runaway_after => '500ms', scope => 'transaction');
		 SELECT dbgate.reset_stats('ra_b')");
	my $offset = -s $node->logfile;
	my $s = DbgateTest::Session->new($node, user => 'ra_u');
	my ($out, $err) = $s->query('BEGIN; SELECT pg_sleep(0.35)');
	is($err, '', 'kept slot: the first statement runs');
	is($node->safe_psql('postgres',
			'SELECT state FROM dbgate.backends WHERE pid = ' . $s->pid),
		'idle in transaction', 'kept slot: the slot is kept');
	select(undef, undef, undef, 0.6);    # idle in the transaction
	($out, $err) = $s->query('SELECT pg_sleep(0.35)');
	is($err, '', 'kept slot: the second statement runs (idle time does not count)');
	($out, $err) = $s->query('SELECT pg_sleep(0.35)');
	is($err, '', 'kept slot: so does the third (nor do earlier statements)');
	my $t0 = time;
	(undef, $err, my $state) = $s->query('SELECT pg_sleep(5)');
	my $took = time - $t0;
	is($state, '57014', 'kept slot: a statement longer than runaway_after is canceled');
	ok($took < 1.5, "kept slot: counted from its own start (took $took s)");
	$s->query('ROLLBACK');
	poll_ok($node, q{SELECT runaways FROM dbgate.status WHERE budget = 'ra_b'},
		'1', 'kept slot: one runaway');
	my @l = runaway_lines($node, $offset);
	ok(@l == 1 && $l[0][3] >= 500 && $l[0][3] < 600,
		'kept slot: its elapsed is counted from its start ('
		  . (@l ? $l[0][3] : '-') . ' ms)');
	$s->quit;
	$node->safe_psql('postgres',
		"SELECT dbgate.alter_budget('ra_b', runaway_after => '100ms', runaway_action => 'log', scope => 'statement')");
}

# 5. kill -9 of the worker: a crash restart, and the worker is back.
{
	my $wpid = worker_pid($node);
	my $offset = -s $node->logfile;
	ok(kill('KILL', $wpid), 'crash: killed the runaway worker with SIGKILL');
	$node->wait_for_log(qr/all server processes terminated; reinitializing/, $offset);
	$node->wait_for_log(qr/database system is ready to accept connections/, $offset);
	ok($node->poll_query_until('postgres', 'SELECT 1', '1'),
		'crash: the server accepts connections after the crash restart');
	worker_runs($node, 'crash: a new runaway worker runs', not => $wpid);
	is(runaways($node, 'ra_b'), '0', 'crash: the counts start from zero');
	$offset = -s $node->logfile;
	for my $i (1 .. 3)
	{
		my ($state, $out, $err) = run_sql($node, 'SELECT pg_sleep(0.2)', user => 'ra_u');
		is($state, '', "crash: runaway $i runs to its end ('log')");
	}
	poll_ok($node, q{SELECT runaways FROM dbgate.status WHERE budget = 'ra_b'},
		'3', 'crash: three runaways counted');
	select(undef, undef, undef, 0.3);
	is(runaways($node, 'ra_b'), '3', 'crash: exactly three');
	is(scalar(runaway_lines($node, $offset)), 3, 'crash: three LOG lines');
}

# 6. A streaming standby counts its own runaways.
{
	my $primary = PostgreSQL::Test::Cluster->new('runaway_primary');
	$primary->init(allows_streaming => 1);
	$primary->append_conf('postgresql.conf', "shared_preload_libraries = 'dbgate'\n");
	$primary->start;
	$primary->safe_psql(
		'postgres', q{
		CREATE EXTENSION dbgate;
		CREATE ROLE ra_u LOGIN;
		SELECT dbgate.create_budget('ra_b', 10, runaway_after => '100ms');
		SELECT dbgate.assign_role('ra_u', 'ra_b');
	});
	$primary->backup('b1');
	my $standby = PostgreSQL::Test::Cluster->new('runaway_standby');
	$standby->init_from_backup($primary, 'b1', has_streaming => 1);
	$standby->start;
	$primary->safe_psql('postgres',
		"SELECT dbgate.alter_budget('ra_b', runaway_after => '150ms')");
	$primary->wait_for_catchup($standby);
	is($standby->safe_psql('postgres',
			q{SELECT runaway_after FROM dbgate.budgets WHERE budget = 'ra_b'}),
		'00:00:00.15', 'standby: the budget is replicated');
	worker_runs($standby, 'standby: the runaway worker runs there too');
	for my $i (1 .. 2)
	{
		my ($state) = run_sql($standby, 'SELECT pg_sleep(0.25)', user => 'ra_u');
		is($state, '', "standby: runaway $i runs to its end");
	}
	my ($state) = run_sql($standby, 'SELECT pg_sleep(0.05)', user => 'ra_u');
	poll_ok($standby, q{SELECT runaways FROM dbgate.status WHERE budget = 'ra_b'},
		'2', 'standby: two runaways counted on the standby');
	is(runaways($primary, 'ra_b'), '0', 'standby: none on the primary');
	$standby->stop;
	$primary->stop;
}

$node->stop;
done_testing();
