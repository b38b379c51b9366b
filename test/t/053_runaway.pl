# Runaway statements (1.3): a statement of a budget with runaway_after
# that has executed that long is counted, logged and acted on by the
# runaway worker within 100 ms.
#
#   1. the worker runs (in ps: it connects to no database, so
#      pg_stat_activity does not show it);
#   2. latency: 24 runaways of four sessions at once, each counted and
#      logged within 100 ms of runaway_after (from the LOG line's elapsed,
#      and from its timestamp against the statement's admission as
#      dbgate.backends shows it); the statements wait on a lock that the
#      test holds until all four of a round are logged;
#   3. 'cancel' of a statement with parallel workers: 57014 with the
#      budget's message, and its workers end with it (that it had workers
#      is read from the postmaster's log afterwards);
#   4. a kept slot (scope 'transaction'): each statement counts from its
#      own start, idle time never (a statement after a runaway of the same
#      transaction and after idle time runs its full runaway_after);
#   4b. statements of a DO block and of procedures (PL/pgSQL and SQL),
#      and statements sent in one Query message, under a kept slot: each
#      counts from its own start (not from the block's admission or the
#      message's start), and one that ran away leaves the next ones
#      watched; a function called by a statement is part of that statement
#      (one clock from the statement's own start, one runaway);
#   5. kill -9 of the worker: a crash restart, the worker is back, and the
#      counts start from zero and are exact;
#   6. a streaming standby counts its own runaways, with the runaway_after
#      that it replayed.
#
# Timing: no verdict waits a guessed time.  The upper bounds that remain
# are the feature's: "within 100 ms" of the SPEC, measured by the server
# (the worker's elapsed, log times against the admission time), to the
# millisecond of the log.  In section 3 the workers start inside the run
# whose runaway_after (2 s) cancels it, an order that SQL cannot force:
# they are not watched for while the statement runs; the log tells
# afterwards whether any started, and an attempt where none had is made
# again (at most 5 times, each retry reported).
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
	SELECT dbgate.create_budget('ra_b', 10, runaway_after => '100ms');
	SELECT dbgate.assign_role('ra_u', 'ra_b');
	CREATE TABLE ra_t (i int) WITH (parallel_workers = 2);
	INSERT INTO ra_t SELECT generate_series(1, 2000);
	ANALYZE ra_t;
	GRANT SELECT ON ra_t TO ra_u;
});

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

# wait_lines(n, offset, count): wait (the default timeout at most) until
# the log from offset on has count runaway lines; returns whether it has.
# The worker counts a runaway before it logs it, so a count seen in
# dbgate.status does not mean that its line is written yet.
sub wait_lines
{
	my ($n, $offset, $count) = @_;
	for (1 .. 10 * $PostgreSQL::Test::Utils::timeout_default)
	{
		return 1 if scalar(runaway_lines($n, $offset)) >= $count;
		select(undef, undef, undef, 0.1);
	}
	return 0;
}

# wait_count(n, budget, count): wait until the budget's runaways are at
# least count (returns whether they are): a runaway counted before the
# same backend's next one fires gets a LOG line of its own (the worker
# folds the runaways of one backend that it finds together into one).
sub wait_count
{
	my ($n, $budget, $count) = @_;
	return poll_until($n,
		"SELECT runaways >= $count FROM dbgate.status WHERE budget = '$budget'");
}

# 1. The worker.
worker_runs($node, 'the runaway worker runs');

# 2. Latency over 24 runaways of four sessions at once.  In each round the
# four statements wait on an advisory lock that the test holds until all
# four are counted and logged: none ends before its runaway, a backend's
# next runaway never comes before the worker took the last (so each has a
# LOG line of its own), and the clock start of each (its admission:
# dbgate.backends.state_since of a slot taken at once) is read while it
# still runs.
{
	my $offset = -s $node->logfile;
	my $holder = DbgateTest::Session->new($node);
	my @s = map { DbgateTest::Session->new($node, user => 'ra_u') } 1 .. 4;
	my $errors = '';
	my %starts;    # pid -> the clock starts of its statements (seconds)
	for my $round (1 .. 6)
	{
		$holder->query('SELECT pg_advisory_lock(53)');
		$_->send('SELECT pg_advisory_xact_lock_shared(53)') for @s;
		wait_count($node, 'ra_b', 4 * $round);
		wait_lines($node, $offset, 4 * $round);
		my $rows = $node->safe_psql('postgres',
			q{SELECT pid, extract(epoch FROM state_since) FROM dbgate.backends
			   WHERE budget = 'ra_b' AND state = 'active'});
		for (split /\n/, $rows)
		{
			my ($pid, $t) = split /\|/;
			push @{ $starts{$pid} }, $t;
		}
		$holder->query('SELECT pg_advisory_unlock(53)');
		for (@s)
		{
			my (undef, $err) = $_->result;
			$errors .= $err;
		}
	}
	$holder->quit;
	is($errors, '', "latency: 'log' lets every statement end");
	poll_ok($node, q{SELECT runaways FROM dbgate.status WHERE budget = 'ra_b'},
		'24', 'latency: 24 runaways counted');
	my @l = runaway_lines($node, $offset);
	is(scalar(@l), 24, 'latency: 24 LOG lines');
	my %seen;
	my ($min_el, $max_el, $min_ts, $max_ts) = (1e9, -1e9, 1e9, -1e9);
	for my $x (@l)
	{
		my ($t, $pid, $budget, $elapsed, $action) = @$x;
		my $k = $seen{$pid}++;
		my $start = $starts{$pid}[$k];
		my $late_el = $elapsed - 100;
		$min_el = $late_el if $late_el < $min_el;
		$max_el = $late_el if $late_el > $max_el;
		# the log's time is cut to the millisecond: a line at the deadline
		# may show up to 1 ms before it
		my $late_ts = defined $start ? ($t - $start) * 1000 - 100 : 1e9;
		$min_ts = $late_ts if $late_ts < $min_ts;
		$max_ts = $late_ts if $late_ts > $max_ts;
	}
	# The bound of 100 ms is the feature (SPEC: counted, logged and acted on
	# within 100 ms after runaway_after), measured by the server: the
	# worker's elapsed (its clock against the statement's clock start), and
	# the LOG line's time against the admission time that dbgate.backends
	# showed.  Neither may come before runaway_after.
	ok($min_el >= 0 && $max_el < 100,
		"latency: counted at most 100 ms after runaway_after (by elapsed; $min_el to $max_el ms)");
	ok($min_ts > -1 && $max_ts < 100,
		'latency: logged at most 100 ms after runaway_after (by log times against the admission; '
		  . sprintf('%.1f to %.1f', $min_ts, $max_ts) . ' ms)');
	is(join(',', sort keys %seen), join(',', sort map { $_->pid } @s),
		'latency: the lines name the sessions\' pids');
	ok((grep { $_->[5] != 0 } @l) == 24, 'latency: with the query id computed');
	$_->quit for @s;
}

# 3. 'cancel' of a statement with parallel workers.  That the statement
# had workers is read afterwards, not watched for while it runs: the
# postmaster (log_min_messages = debug1 for this section) logs 'starting
# background worker process "parallel worker for PID <the leader>"' before
# it starts each worker, and a leader that ends its statement by an error
# waits, before its next statement, until each worker that it launched has
# ended or was dropped unstarted.  So once the session's next statement
# has run, the log names every worker that ever ran for the canceled one
# (the same reading as 041_parallel_maintenance).  The start of the
# workers is still a race with the runaway's 2 s (its clock starts at
# ExecutorRun, and the workers are launched inside that run): an attempt
# whose log names no worker (the postmaster had started none before the
# cancel, or none was free) says nothing of the workers and is made again,
# at most 5 times; a statement not canceled, or workers left behind,
# fails at once.
{
	my $offset = -s $node->logfile;
	$node->safe_psql('postgres', 'ALTER SYSTEM SET log_min_messages = debug1');
	$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
	# the postmaster's own line: it has the new level from there on
	$node->wait_for_log(qr/LOG:  parameter "log_min_messages" changed to "debug1"/, $offset);
	$node->safe_psql('postgres',
		"SELECT dbgate.alter_budget('ra_b', runaway_after => '2s', runaway_action => 'cancel')");
	my $s = DbgateTest::Session->new($node, user => 'ra_u');
	my $spid = $s->pid;
	my $gucs = "SET max_parallel_workers_per_gather = 2; SET parallel_setup_cost = 0; "
	  . "SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0;";
	my ($plan) = $s->query("$gucs EXPLAIN (COSTS OFF) SELECT count(*) FROM ra_t WHERE pg_sleep(0.01) IS NOT NULL");
	like($plan, qr/Gather/, 'parallel: the plan is parallel');
	# 2000 rows of 10 ms in at most three processes: at least 6.6 s, so the
	# runaway (2 s) ends it.
	my ($err, $state, $out, $workers);
	for my $attempt (1 .. 5)
	{
		$node->safe_psql('postgres', "SELECT dbgate.reset_stats('ra_b')");
		my $o = -s $node->logfile;
		(undef, $err, $state) =
		  $s->query('SELECT count(*) FROM ra_t WHERE pg_sleep(0.01) IS NOT NULL');
		# the leader is through with its workers once this has run
		($out) = $s->query('SELECT 1');
		$workers = () = slurp_file($node->logfile, $o) =~
		  /starting background worker process "parallel worker for PID $spid"/g;
		last if $workers > 0 || $state ne '57014';
		diag "parallel: attempt $attempt: the runaway canceled the statement before "
		  . 'the postmaster started any of its workers; again';
	}
	ok($workers > 0,
		"parallel: the statement ran with parallel workers ($workers started; "
		  . 'a failure after 5 attempts means none started within 2 s each time)');
	is($state, '57014', 'parallel: the statement is canceled (57014)');
	like($err,
		qr/canceling statement because it ran longer than runaway_after \(2s\) of budget "ra_b"/,
		'parallel: with the budget\'s message');
	poll_ok($node,
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'parallel worker' AND leader_pid = "
		  . $spid,
		'0', 'parallel: its workers have ended');
	poll_ok($node, q{SELECT runaways FROM dbgate.status WHERE budget = 'ra_b'},
		'1', 'parallel: counted once');
	is($out, '1', 'parallel: the session goes on');
	$s->quit;
	$offset = -s $node->logfile;
	$node->safe_psql('postgres', 'ALTER SYSTEM RESET log_min_messages');
	$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
	$node->wait_for_log(
		qr/LOG:  parameter "log_min_messages" removed from configuration file, reset to default/,
		$offset);
}

# 4. A kept slot: each statement counts from its own start.  The first
# statement of the transaction runs away (canceled, in a savepoint); then
# the slot is idle for longer than runaway_after, and the next statement
# must still run its full runaway_after: counted from the transaction's
# admission or from the first statement's start, its deadline would have
# passed before it began.  No statement has to be shorter than
# runaway_after.
{
	$node->safe_psql('postgres',
		"SELECT dbgate.alter_budget('ra_b', runaway_after => '500ms', scope => 'transaction');
		 SELECT dbgate.reset_stats('ra_b')");
	my $offset = -s $node->logfile;
	my $s = DbgateTest::Session->new($node, user => 'ra_u');
	my (undef, $err, $state) = $s->query('BEGIN; SAVEPOINT a; SELECT pg_sleep(5)');
	is($state, '57014', 'kept slot: the first statement runs away and is canceled');
	(undef, $err) = $s->query('ROLLBACK TO SAVEPOINT a');
	is($err, '', 'kept slot: the transaction goes on');
	# counted before the next runaway of this backend: a LOG line each
	wait_count($node, 'ra_b', 1);
	poll_ok($node, 'SELECT state FROM dbgate.backends WHERE pid = ' . $s->pid,
		'idle in transaction', 'kept slot: the slot is kept');
	# idle in the transaction for longer than runaway_after (only time has
	# to pass: the assertions below are lower bounds that follow from it)
	select(undef, undef, undef, 0.6);
	(undef, $err, $state) = $s->query('SELECT pg_sleep(5)');
	my $took = $s->done_at - $s->sent_at;
	is($state, '57014', 'kept slot: the next statement longer than runaway_after is canceled');
	# a lower bound, which cannot race: the statement started after
	# sent_at, and its deadline is runaway_after after its own start
	ok($took >= 0.5,
		"kept slot: not before its own runaway_after (idle time and the earlier statement do not count; took $took s)");
	$s->query('ROLLBACK');
	poll_ok($node, q{SELECT runaways FROM dbgate.status WHERE budget = 'ra_b'},
		'2', 'kept slot: two runaways');
	wait_lines($node, $offset, 2);
	my @l = runaway_lines($node, $offset);
	# 500 to 600 ms: runaway_after and the SPEC's 100 ms (elapsed is the
	# worker's, from the statement's clock start); counted from the
	# admission, the second would show 1100 ms or more (the first ran
	# 500 ms, then 600 ms idle)
	ok(@l == 2 && !grep({ $_->[3] < 500 || $_->[3] >= 600 } @l),
		'kept slot: each elapsed is counted from its statement\'s start ('
		  . join(', ', map { $_->[3] } @l) . ' ms)');
	$s->quit;
	$node->safe_psql('postgres',
		"SELECT dbgate.alter_budget('ra_b', runaway_after => '100ms', runaway_action => 'log', scope => 'statement')");
}

# 4b. Blocks under a kept slot (scope 'transaction', runaway_after 1 s,
# 'log'), and statements sent in one Query message.  A statement of a DO
# block or procedure is a statement of its own (it is gated on its own,
# and under a slot already held its clock starts at its own start), and
# so is each statement of a Query message; a function's statements are
# part of the statement that called the function.  Each block (each
# message, after its transaction took the slot) takes the slot with a
# first statement, then waits in LOCK TABLE (a utility command: no
# executor run, no runaway clock) for longer than runaway_after, then runs
# two statements that wait on the test's advisory locks, one after the
# other.  Counted from the block's admission (or the block's or message's
# start), the first of them would be a runaway as soon as it started,
# and, once it had run away, the second would share its clock and never
# be watched.  Verdicts are lower bounds on the server's clock: a
# runaway's LOG line comes at least runaway_after after the statement's
# own start, which is after the test released what it waited for (t,
# read before the release).
{
	$node->safe_psql(
		'postgres', q{
		CREATE ROLE ra_k_u LOGIN;
		SELECT dbgate.create_budget('ra_k', 10, scope => 'transaction', runaway_after => '1s');
		SELECT dbgate.assign_role('ra_k_u', 'ra_k');
		CREATE TABLE ra_lk (i int);
		GRANT SELECT ON ra_lk TO ra_k_u;
		CREATE PROCEDURE ra_proc() LANGUAGE plpgsql AS $$
		BEGIN
			PERFORM 1;
			LOCK TABLE ra_lk IN ACCESS SHARE MODE;
			PERFORM pg_advisory_xact_lock_shared(5302);
			PERFORM pg_advisory_xact_lock_shared(5303);
		END $$;
		CREATE PROCEDURE ra_proc_sql() LANGUAGE sql AS $$
			SELECT 1;
			LOCK TABLE ra_lk IN ACCESS SHARE MODE;
			SELECT pg_advisory_xact_lock_shared(5302);
			SELECT pg_advisory_xact_lock_shared(5303);
		$$;
		CREATE FUNCTION ra_fn() RETURNS void LANGUAGE plpgsql AS $$
		BEGIN
			PERFORM pg_advisory_xact_lock_shared(5302);
			PERFORM pg_advisory_xact_lock_shared(5303);
		END $$;
		CREATE FUNCTION ra_fn_sql() RETURNS void LANGUAGE sql AS $$
			SELECT pg_advisory_xact_lock_shared(5302);
			SELECT pg_advisory_xact_lock_shared(5303);
		$$;
	});
	my $h = DbgateTest::Session->new($node);
	my $now = q{SELECT extract(epoch FROM clock_timestamp())};

	# what session s waits for: 'relation', an advisory lock's key, or ''
	my $waits_for = sub {
		my ($s) = @_;
		return 'SELECT coalesce((SELECT CASE locktype WHEN \'advisory\' THEN objid::text ELSE locktype END'
		  . ' FROM pg_locks WHERE NOT granted AND pid = ' . $s->pid . " LIMIT 1), '')";
	};
	# the runaway lines of budget ra_k from offset on, once there are n
	my $lines = sub {
		my ($offset, $n) = @_;
		wait_lines($node, $offset, $n);
		return grep { $_->[2] eq 'ra_k' } runaway_lines($node, $offset);
	};

	for my $block (
		[ 'DO block',
			q{DO $$ BEGIN PERFORM 1; LOCK TABLE ra_lk IN ACCESS SHARE MODE; }
			  . q{PERFORM pg_advisory_xact_lock_shared(5302); }
			  . q{PERFORM pg_advisory_xact_lock_shared(5303); END $$} ],
		[ 'CALL of a PL/pgSQL procedure', 'CALL ra_proc()' ],
		[ 'CALL of an SQL procedure', 'CALL ra_proc_sql()' ],
		# statements sent in one Query message (psql's \;) under the
		# transaction's kept slot: statements of their own, sharing
		# statement_timestamp()
		[ 'one Query message',
			q{LOCK TABLE ra_lk IN ACCESS SHARE MODE \; }
			  . q{SELECT pg_advisory_xact_lock_shared(5302) \; }
			  . q{SELECT pg_advisory_xact_lock_shared(5303)},
			'BEGIN; SELECT 1', 'COMMIT' ])
	{
		my ($what, $sql, $pre, $post) = @$block;
		$node->safe_psql('postgres', "SELECT dbgate.reset_stats('ra_k')");
		my $offset = -s $node->logfile;
		$h->query('SELECT pg_advisory_lock(5302), pg_advisory_lock(5303)');
		$h->query('BEGIN; LOCK TABLE ra_lk IN ACCESS EXCLUSIVE MODE');
		my $s = DbgateTest::Session->new($node, user => 'ra_k_u');
		if (defined $pre)
		{
			my (undef, $e) = $s->query($pre);
			is($e, '', "$what: the transaction takes the slot");
		}
		$s->send($sql);
		poll_ok($node, $waits_for->($s), 'relation', "$what: waits in LOCK TABLE holding the slot");
		# longer than runaway_after since the block's admission (only time
		# has to pass: what follows are lower bounds)
		select(undef, undef, undef, 1.2);
		my $t1 = $node->safe_psql('postgres', $now);
		$h->query('COMMIT');
		poll_ok($node, $waits_for->($s), '5302', "$what: its next statement runs");
		ok(wait_count($node, 'ra_k', 1), "$what: that statement runs away");
		my @l = $lines->($offset, 1);
		ok(@l >= 1 && $l[0][0] >= $t1 + 1 - 0.001,
			"$what: not before runaway_after from its own start (logged "
			  . (@l ? sprintf('%.3f', $l[0][0] - $t1) : '-')
			  . ' s after the LOCK TABLE ended; counted from the block\'s admission or start it ran away at once)');
		my $t2 = $node->safe_psql('postgres', $now);
		$h->query('SELECT pg_advisory_unlock(5302)');
		poll_ok($node, $waits_for->($s), '5303', "$what: the statement after the runaway runs");
		ok(wait_count($node, 'ra_k', 2),
			"$what: the statement after the runaway is watched and runs away too");
		@l = $lines->($offset, 2);
		ok(@l >= 2 && $l[1][0] >= $t2 + 1 - 0.001,
			"$what: also from its own start (logged "
			  . (@l >= 2 ? sprintf('%.3f', $l[1][0] - $t2) : '-')
			  . ' s after the one before ended)');
		$h->query('SELECT pg_advisory_unlock(5303)');
		my (undef, $err) = $s->result;
		is($err, '', "$what: ends normally ('log')");
		$s->query($post) if defined $post;
		$s->quit;
	}

	# A function called by a statement: its statements are part of that
	# statement.  The transaction's slot is admitted, then idle for longer
	# than runaway_after; the statement that calls the function runs away
	# once, runaway_after after its own start, however long the function's
	# second statement then runs.
	for my $fn ('ra_fn', 'ra_fn_sql')
	{
		my $what = "a function ($fn) called by a statement";
		$node->safe_psql('postgres', "SELECT dbgate.reset_stats('ra_k')");
		my $offset = -s $node->logfile;
		$h->query('SELECT pg_advisory_lock(5302), pg_advisory_lock(5303)');
		my $s = DbgateTest::Session->new($node, user => 'ra_k_u');
		my (undef, $err) = $s->query('BEGIN; SELECT 1');
		is($err, '', "$what: the transaction takes the slot");
		select(undef, undef, undef, 1.2);
		my $t1 = $node->safe_psql('postgres', $now);
		$s->send("SELECT $fn()");
		poll_ok($node, $waits_for->($s), '5302', "$what: the statement runs");
		ok(wait_count($node, 'ra_k', 1), "$what: the statement runs away");
		my @l = $lines->($offset, 1);
		ok(@l == 1 && $l[0][0] >= $t1 + 1 - 0.001,
			"$what: not before runaway_after from the statement's own start (logged "
			  . (@l ? sprintf('%.3f', $l[0][0] - $t1) : '-') . ' s after it was sent)');
		$h->query('SELECT pg_advisory_unlock(5302)');
		poll_ok($node, $waits_for->($s), '5303', "$what: the function's next statement runs");
		# longer than runaway_after: a clock of its own would run out
		select(undef, undef, undef, 1.2);
		$h->query('SELECT pg_advisory_unlock(5303)');
		(undef, $err) = $s->result;
		is($err, '', "$what: ends normally ('log')");
		$s->query('COMMIT');
		is(runaways($node, 'ra_k'), '1', "$what: one runaway, the statement's");
		$s->quit;
	}
	$h->quit;
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
	# one session, so that the runaways share one record of the worker
	my $s = DbgateTest::Session->new($node, user => 'ra_u');
	for my $i (1 .. 3)
	{
		my (undef, $err) = $s->query('SELECT pg_sleep(0.2)');
		is($err, '', "crash: runaway $i runs to its end ('log')");
		# counted before the next one fires: a LOG line each
		wait_count($node, 'ra_b', $i);
	}
	poll_ok($node, q{SELECT runaways FROM dbgate.status WHERE budget = 'ra_b'},
		'3', 'crash: three runaways counted');
	wait_lines($node, $offset, 3);
	is(scalar(runaway_lines($node, $offset)), 3, 'crash: three LOG lines');
	# exactly: a fourth runaway of the same backend is counted from the
	# same record, after the worker's first pass (which found any record of
	# before the crash); a runaway counted twice, or one of before the
	# crash, would show in the count once the fourth is logged
	$s->query('SELECT pg_sleep(0.2)');
	wait_lines($node, $offset, 4);
	is(runaways($node, 'ra_b'), '4', 'crash: exactly four after a fourth (none counted twice)');
	$s->quit;
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
	my $soffset = -s $standby->logfile;
	for my $i (1 .. 2)
	{
		my ($state) = run_sql($standby, 'SELECT pg_sleep(0.25)', user => 'ra_u');
		is($state, '', "standby: runaway $i runs to its end");
		# counted before the next one fires: a LOG line each
		wait_count($standby, 'ra_b', $i);
	}
	poll_ok($standby, q{SELECT runaways FROM dbgate.status WHERE budget = 'ra_b'},
		'2', 'standby: two runaways counted on the standby');
	# the standby's log has its own prefix: only the message is read
	my $re = qr/LOG:  runaway statement in budget "ra_b": pid \d+, query id -?\d+, elapsed \d+ ms \(runaway_after (\d+) ms, action log\)/;
	my @after;
	for (1 .. 10 * $PostgreSQL::Test::Utils::timeout_default)
	{
		@after = slurp_file($standby->logfile, $soffset) =~ /$re/g;
		last if @after >= 2;
		select(undef, undef, undef, 0.1);
	}
	is(join(',', @after), '150,150',
		'standby: its LOG lines name the runaway_after that it replayed (150 ms)');
	is(runaways($primary, 'ra_b'), '0', 'standby: none on the primary');
	$standby->stop;
	$primary->stop;
}

$node->stop;
done_testing();
