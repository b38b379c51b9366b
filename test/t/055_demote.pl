# Demotion (1.3): the runaway worker moves the slot of a runaway statement
# of a budget with runaway_action 'demote' to its runaway_budget.
#
#   1. the move: the source's waiter is admitted at once, the target counts
#      beyond its max_active, runaways / demoted_out / demoted_in, the
#      backend shown under the target with demoted_from, the LOG line, the
#      active time split at the move;
#   2. trees: a target under the same parent (the common level is neither
#      given up nor counted twice), and a target in another tree;
#   3. a kept slot (scope 'transaction', and a transaction ID) stays in the
#      target until COMMIT; the next statement there runs away as 'log';
#   4. memory grants move with the slot;
#   5. the target's statement_timeout and lock_timeout cancel the
#      statement that was moved while it ran;
#   6. a shadow source: counted, not moved;
#   7. quarantine: a repeat of the runaway's query is admitted to the target;
#   8. cancel and terminate of a demoted statement;
#   9. a demoted statement with parallel workers;
#  10. drop_budget(target, force): the source's action becomes 'log';
#  11. a shadow target (enforce => false) applies none of its timeouts,
#      to a statement moved there as a runaway or admitted there as
#      quarantined; an enforcing target applies them;
#  12. a restart of the runaway worker: the target's statement_timeout of
#      a statement moved before it still ends the statement;
#  13. the worker's cancel for a target's timeout, caught inside the moved
#      statement, does not make a later user cancel of the transaction a
#      timeout;
#  14. a streaming standby moves its own slots.
#
# No verdict depends on how fast the machine is:
# - a statement that is to be seen running (in the source, moved, with its
#   parallel workers) waits for an advisory lock that the test holds, and
#   ends when the test lets it go;
# - where a waiter must queue before the move (1, 2, 14), the source is
#   created with runaway_after 0: a statement of the source holds its slot
#   (waiting for a lock of the test), the statement that is to run away and
#   the waiter queue behind it in that order, and only once they are seen
#   queued does the source get its runaway_after (a queued statement reads
#   the budget's limits when it is admitted) and the test lets the holder
#   end;
# - a budget's runaway_after that only has to fire during a statement is
#   shorter than a pg_sleep() of that statement (the timer fires before the
#   sleep can end);
# - what is in the source before a move is asserted by facts that last:
#   the counts, the LOG line, demoted_from (or, for a memory grant, by the
#   same statement run with runaway_after 0 first);
# - that a timeout did not end a statement (11, 12) is read from a
#   witness: a statement moved (or admitted) after the first was seen
#   moved, to a target with the same timeout, so that its deadline comes
#   later; once the witness has been canceled by it, the first statement
#   is let go, and its result says whether it was canceled too;
# - the only upper bounds on durations are features, measured by the
#   server: "within 100 ms of runaway_after" (SPEC), and a target's
#   statement_timeout counted from the statement's start, not from the
#   move.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use DbgateTest;

my $node = dbgate_node('demote',
	conf => "compute_query_id = on\n"
	  . "dbgate.max_quarantine = 16\n"
	  . "max_worker_processes = 12\n"
	  . "max_parallel_workers = 8\n");
# (runaway_after 0 for 'inter', 'c1' and 'msrc' at first: sections 1, 2
# and 4 give it to them when the test is ready for a runaway)
$node->safe_psql(
	'postgres', q{
	CREATE ROLE dm_u LOGIN;
	CREATE ROLE dm_s LOGIN;
	CREATE ROLE dm_c LOGIN;
	CREATE ROLE dm_m LOGIN;
	SELECT dbgate.create_budget('slow', 1, max_queued => 10);
	SELECT dbgate.create_budget('inter', 1, max_queued => 10, runaway_after => '0',
	                            runaway_action => 'demote', runaway_budget => 'slow');
	SELECT dbgate.assign_role('dm_u', 'inter');
	SELECT dbgate.assign_role('dm_s', 'slow');
	SELECT dbgate.create_budget('p', 1, max_queued => 10);
	SELECT dbgate.create_budget('c2', 1, max_queued => 10, parent => 'p');
	SELECT dbgate.create_budget('c1', 1, max_queued => 10, parent => 'p', runaway_after => '0',
	                            runaway_action => 'demote', runaway_budget => 'c2');
	SELECT dbgate.assign_role('dm_c', 'c1');
	SELECT dbgate.create_budget('mslow', 1, max_queued => 10, max_memory_mb => 8);
	SELECT dbgate.create_budget('msrc', 2, max_queued => 10, max_memory_mb => 8, runaway_after => '0',
	                            runaway_action => 'demote', runaway_budget => 'mslow');
	SELECT dbgate.assign_role('dm_m', 'msrc');
	CREATE TABLE dm_t (id int PRIMARY KEY, v int);
	INSERT INTO dm_t SELECT i, 0 FROM generate_series(1, 10) i;
	GRANT SELECT, UPDATE ON dm_t TO dm_u;
	CREATE TABLE dm_big (i int) WITH (parallel_workers = 2);
	INSERT INTO dm_big SELECT generate_series(1, 4000);
	ANALYZE dm_big;
	GRANT SELECT ON dm_big TO dm_u;
	-- true once advisory lock k can be had shared, waiting without a lock
	-- wait (a budget's lock_timeout does not see it)
	CREATE FUNCTION dm_gate(k bigint) RETURNS boolean LANGUAGE plpgsql AS $$
	BEGIN
		WHILE NOT pg_try_advisory_xact_lock_shared(k) LOOP
			PERFORM pg_sleep(0.01);
		END LOOP;
		RETURN true;
	END $$;
	-- true once advisory lock k can be had shared; run by parallel workers
	-- too
	CREATE FUNCTION dm_lockwait(k bigint) RETURNS boolean LANGUAGE plpgsql
	  PARALLEL SAFE AS $$
	BEGIN
		PERFORM pg_advisory_xact_lock_shared(k);
		RETURN true;
	END $$;
});

# The counters of dbgate.status that counts_are() compares: those not named
# must be 0.
my @cols = qw(active queued admitted admitted_after_wait rejected_full
  rejected_timeout canceled_waiting admitted_lock_holder runaways
  demoted_out demoted_in quarantined);

# counts_are(NODE, BUDGET, { column => value }, NAME): one assertion, once
# dbgate.status shows those counts (read until then, at most the default
# timeout).  Called only where the counts are bound to come and then stay:
# a move is shown (and counted in demoted_in) as the target counts the
# slot, and the source gives its slot back a moment later, so a reading
# right after may still be on its way.
sub counts_are
{
	my ($n, $budget, $exp, $name) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my %want = map { $_ => 0 } @cols;
	%want = (%want, %$exp);
	my $wanted = join('|', map { $want{$_} } @cols);
	my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
	my $out;
	for (;;)
	{
		$out = poll_psql($n,
			'SELECT ' . join(', ', @cols) . " FROM dbgate.status WHERE budget = '$budget'");
		last if $out eq $wanted || time > $deadline;
		usleep(50_000);
	}
	my %got;
	@got{@cols} = split /\|/, $out;
	return is_deeply(\%got, \%want, $name);
}

# col(NODE, BUDGET, COLUMN): one column of dbgate.status.
sub col
{
	my ($n, $budget, $c) = @_;
	return poll_psql($n, "SELECT $c FROM dbgate.status WHERE budget = '$budget'");
}

# where(NODE, PID): "budget:state:demoted_from" of the backend in
# dbgate.backends ('' when it holds no slot and waits for none).
sub where
{
	my ($n, $pid) = @_;
	return poll_psql($n,
		"SELECT budget || ':' || state || ':' || coalesce(demoted_from, '-')
		   FROM dbgate.backends WHERE pid = $pid");
}

# wait_where(NODE, PID, WANT): where() polled every 10 ms until it is WANT
# (at most the default timeout), or until it shows a move when WANT does
# not; returns what it was last.
sub wait_where
{
	my ($n, $pid, $want) = @_;
	my $got = '';
	my $until = time + $PostgreSQL::Test::Utils::timeout_default;
	while (time < $until)
	{
		$got = where($n, $pid);
		return $got if $got eq $want;
		return $got if $want =~ /:-\z/ && $got =~ /:[^:-][^:]*\z/;
		select(undef, undef, undef, 0.01);
	}
	return $got;
}

# activity(NODE, PID): "state:wait_event_type" of the backend in
# pg_stat_activity ('active:Lock' while its statement waits for a lock).
sub activity
{
	my ($n, $pid) = @_;
	return poll_psql($n,
		"SELECT state || ':' || coalesce(wait_event_type, '-')
		   FROM pg_stat_activity WHERE pid = $pid");
}

# state_of(NODE, PID): the backend's state in pg_stat_activity ('active'
# while a statement runs, whatever it waits for)
sub state_of
{
	my ($n, $pid) = @_;
	return poll_psql($n, "SELECT state FROM pg_stat_activity WHERE pid = $pid");
}

# idle_ok(NODE, NAME, BUDGET...): one assertion that every budget named
# has active and queued 0 and no backend in dbgate.backends (polled: a
# terminated backend leaves a moment later).
sub idle_ok
{
	my ($n, $name, @b) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $list = join(',', map { "'$_'" } @b);
	return poll_ok($n,
		"SELECT string_agg(budget || ':' || active || ':' || queued, ',' ORDER BY budget)
		   || '/' || (SELECT count(*) FROM dbgate.backends WHERE budget IN ($list))
		   FROM dbgate.status WHERE budget IN ($list)",
		join(',', map { "$_:0:0" } sort @b) . '/0', $name);
}

my $re_line = qr/LOG:  runaway statement in budget "([^"]+)": pid (\d+), query id (-?\d+), elapsed (\d+) ms \(runaway_after (\d+) ms, action ([^)]+)\)$/m;

# the runaway lines of the log from offset on: [budget, pid, elapsed, action]
sub runaway_lines
{
	my ($n, $offset) = @_;
	my $log = slurp_file($n->logfile, $offset);
	my @l;
	while ($log =~ /$re_line/g)
	{
		push @l, [ $1, $2, $4, $6 ];
	}
	return @l;
}

# wait_lines(NODE, OFFSET, N): runaway_lines(), read until there are N (at
# most the default timeout).  The worker writes the line after it counted
# the runaway and made the move, so neither says that the line is there.
sub wait_lines
{
	my ($n, $offset, $count) = @_;
	my $until = time + $PostgreSQL::Test::Utils::timeout_default;
	my @l;
	for (;;)
	{
		@l = runaway_lines($n, $offset);
		return @l if @l >= $count || time > $until;
		usleep(20_000);
	}
}

# lines_are(NODE, OFFSET, WANT, NAME): one assertion that the runaway lines
# from OFFSET on are WANT ("budget:action;..."), once there are as many.
sub lines_are
{
	my ($n, $offset, $want, $name) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my @w = split /;/, $want;
	my @l = wait_lines($n, $offset, scalar @w);
	return is(join(';', map { "$_->[0]:$_->[3]" } @l), $want, $name);
}

# a superuser session holding advisory lock k (and the further ones named):
# the statements "SELECT pg_advisory_xact_lock_shared(k)" of other sessions
# run until it is released
sub holder
{
	my (@k) = @_;
	my $l = DbgateTest::Session->new($node);
	lock_more($l, @k);
	return $l;
}

sub lock_more
{
	my ($l, @k) = @_;
	for my $k (@k)
	{
		my (undef, $err) = $l->query("SELECT pg_advisory_lock($k)");
		die $err if $err ne '';
	}
	return;
}

sub release
{
	my ($l, $k) = @_;
	my (undef, $err) = $l->query("SELECT pg_advisory_unlock($k)");
	die $err if $err ne '';
	return;
}

sub reset_all
{
	$node->safe_psql('postgres', 'SELECT dbgate.reset_stats()');
}

# the server's view of a queue: "pid:state:position,..." (backends_of)
sub queue_is
{
	my ($n, $budget, $want, $name) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	return is(backends_of($n, $budget),
		join(',', map { "$_->[0]:$_->[1]:$_->[2]" } @$want), $name);
}

my $wait1 = 'SELECT pg_advisory_xact_lock_shared(1)';

# 1. The move.
# 'h' holds the source's one slot (waiting for lock 11 of the test); the
# long statement 'a' and the waiter 'w' queue behind it; then the source
# gets runaway_after 500ms and 'h' may end: 'a' is admitted, runs away
# while it waits for lock 1 of the test, and is moved; 'w' is admitted
# then, while 'a' still waits.
{
	reset_all();
	my $offset = -s $node->logfile;
	my $l = holder(1, 11);
	my $s = DbgateTest::Session->new($node, user => 'dm_s');
	my $h = DbgateTest::Session->new($node, user => 'dm_u');
	my $a = DbgateTest::Session->new($node, user => 'dm_u');
	my $w = DbgateTest::Session->new($node, user => 'dm_u');
	$s->send($wait1);
	is(wait_where($node, $s->pid, 'slow:active:-'), 'slow:active:-',
		'move: the target is full (max_active 1)');
	$h->send('SELECT pg_advisory_xact_lock_shared(11)');
	is(wait_where($node, $h->pid, 'inter:active:-'), 'inter:active:-',
		'move: a statement holds the source\'s slot');
	$a->send($wait1);
	is(wait_where($node, $a->pid, 'inter:queued:-'), 'inter:queued:-',
		'move: the long statement waits in the source');
	$w->send('SELECT 1');
	is(wait_where($node, $w->pid, 'inter:queued:-'), 'inter:queued:-',
		'move: so does the waiter');
	queue_is($node, 'inter',
		[ [ $h->pid, 'active', '-' ], [ $a->pid, 'queued', 1 ], [ $w->pid, 'queued', 2 ] ],
		'move: the long statement is first in the source\'s queue, the waiter second');
	$node->safe_psql('postgres',
		q{SELECT dbgate.alter_budget('inter', runaway_after => '500ms')});
	release($l, 11);
	my ($out, $err) = $h->result;
	is($err, '', 'move: the statement that held the slot ends');
	is(wait_where($node, $a->pid, 'slow:active:inter'), 'slow:active:inter',
		'move: the statement is moved to the target (demoted_from the source)');
	($out, $err) = $w->result;
	is("$out/$err", '1/', 'move: the waiter runs');
	# (the long statement waits for lock 1 of the test: the waiter was
	# admitted at the move, not at the long statement's end)
	is(where($node, $a->pid), 'slow:active:inter',
		'move: the waiter is admitted at once (it ran while the long statement holds the moved slot)');
	is(activity($node, $a->pid), 'active:Lock', 'move: the long statement still runs');
	counts_are($node, 'inter',
		{ admitted => 3, admitted_after_wait => 2, runaways => 1, demoted_out => 1 },
		'move: the source: the slot is given up, the long statement and the waiter admitted after a wait');
	counts_are($node, 'slow', { active => 2, admitted => 1, demoted_in => 1 },
		'move: the target counts the statement beyond its max_active, not in admitted');
	is(col($node, 'slow', 'peak_active'), '2', 'move: the target\'s peak_active');
	is(where($node, $s->pid), 'slow:active:-', 'move: the target\'s own statement');
	# the source's active time so far: the slots of 'h' and 'w', returned;
	# the long statement's share is counted when its slot is returned
	# (README: active_time_total is the hold time of the slots returned)
	my $before = col($node, 'inter', 'active_time_total');
	my @l = wait_lines($node, $offset, 1);
	ok(@l == 1 && $l[0][0] eq 'inter' && $l[0][1] == $a->pid
		  && $l[0][3] eq 'demote to "slow"',
		'move: one LOG line: the statement ran away in the source (its pid), the action');
	# (SPEC: the runaway is counted, logged and moved within 100 ms of
	# runaway_after; elapsed is the worker's, taken before the move)
	ok(@l == 1 && $l[0][2] >= 500 && $l[0][2] <= 600,
		'move: logged within 100 ms of runaway_after ('
		  . (@l ? $l[0][2] : '-') . ' ms)');
	# (time for the target's active time below, a lower bound)
	select(undef, undef, undef, 1.0);
	release($l, 1);
	($out, $err) = $a->result;
	is($err, '', 'move: the moved statement ends normally');
	($out, $err) = $s->result;
	is($err, '', 'move: the target\'s statement ends normally');
	idle_ok($node, 'move: every active is 0 afterwards', 'inter', 'slow');
	counts_are($node, 'slow', { admitted => 1, demoted_in => 1 },
		'move: the target\'s counts at the end');
	counts_are($node, 'inter',
		{ admitted => 3, admitted_after_wait => 2, runaways => 1, demoted_out => 1 },
		'move: the source\'s counts at the end');
	# the long statement's time in the source: from its admission to the
	# move (SPEC: within 100 ms of runaway_after)
	my $ti = col($node, 'inter', 'active_time_total') - $before;
	my $ts = col($node, 'slow', 'active_time_total');
	ok($ti >= 500 && $ti <= 600,
		sprintf("move: the source's active time ends at the move, within 100 ms of runaway_after (%.1f ms)", $ti));
	ok($ts >= 2000,
		"move: the target's active time counts the rest of the moved statement and its own ($ts ms)");
	$_->quit for ($l, $s, $h, $a, $w);
}

# 2. Trees.
# As in 1: 'h' holds c1's slot, 'a' and 'w' queue behind it, then c1 gets
# its runaway_after.
{
	reset_all();
	my $l = holder(2, 21);
	my $h = DbgateTest::Session->new($node, user => 'dm_c');
	my $a = DbgateTest::Session->new($node, user => 'dm_c');
	my $w = DbgateTest::Session->new($node, user => 'dm_c');
	my $queue_up = sub {
		my ($what) = @_;
		$h->send('SELECT pg_advisory_xact_lock_shared(21)');
		is(wait_where($node, $h->pid, 'c1:active:-'), 'c1:active:-',
			"$what: a statement holds c1's slot");
		$a->send('SELECT pg_advisory_xact_lock_shared(2)');
		is(wait_where($node, $a->pid, 'c1:queued:-'), 'c1:queued:-',
			"$what: the long statement waits in c1");
		$w->send('SELECT 1');
		is(wait_where($node, $w->pid, 'c1:queued:-'), 'c1:queued:-',
			"$what: the waiter waits behind it");
		queue_is($node, 'c1',
			[ [ $h->pid, 'active', '-' ], [ $a->pid, 'queued', 1 ], [ $w->pid, 'queued', 2 ] ],
			"$what: in this order");
		$node->safe_psql('postgres',
			q{SELECT dbgate.alter_budget('c1', runaway_after => '500ms')});
		release($l, 21);
		my (undef, $err) = $h->result;
		is($err, '', "$what: the statement that held the slot ends");
	};

	$queue_up->('tree');
	is(wait_where($node, $a->pid, 'c2:active:c1'), 'c2:active:c1',
		'tree: the long statement is admitted to c1 and moved to c2, under the same parent');
	# (c1 shows the move done: its level given up, the waiter still queued)
	counts_are($node, 'c1',
		{ queued => 1, admitted => 2, admitted_after_wait => 1, runaways => 1, demoted_out => 1 },
		'tree: c1 gave up its level');
	is(where($node, $w->pid), 'c1:queued:-',
		'tree: the waiter of c1 still waits (the parent\'s one slot stays held)');
	counts_are($node, 'p', { active => 1, queued => 1 },
		'tree: the parent counts the statement once');
	is(col($node, 'p', 'peak_active'), '1', 'tree: never twice');
	counts_are($node, 'c2', { active => 1, demoted_in => 1 },
		'tree: c2 counts it');
	release($l, 2);
	my (undef, $err) = $a->result;
	is($err, '', 'tree: the moved statement ends');
	(undef, $err) = $w->result;
	is($err, '', 'tree: then the waiter runs');
	idle_ok($node, 'tree: every active is 0', 'p', 'c1', 'c2');

	# a target in another tree
	$node->safe_psql('postgres',
		q{SELECT dbgate.alter_budget('c1', runaway_after => '0', runaway_budget => 'slow');
		  SELECT dbgate.reset_stats()});
	lock_more($l, 2, 21);
	$queue_up->('other tree');
	is(wait_where($node, $a->pid, 'slow:active:c1'), 'slow:active:c1',
		'other tree: the long statement is admitted to c1 and moved to slow');
	(undef, $err) = $w->result;
	is($err, '', 'other tree: the waiter of c1 runs (the parent\'s slot is free)');
	is(where($node, $a->pid), 'slow:active:c1',
		'other tree: at once (while the moved statement still runs)');
	counts_are($node, 'p', {},
		'other tree: the parent no longer counts the statement');
	counts_are($node, 'c1',
		{ admitted => 3, admitted_after_wait => 2, runaways => 1, demoted_out => 1 },
		'other tree: c1');
	counts_are($node, 'slow', { active => 1, demoted_in => 1 }, 'other tree: slow counts it');
	release($l, 2);
	(undef, $err) = $a->result;
	is($err, '', 'other tree: the moved statement ends');
	idle_ok($node, 'other tree: every active is 0', 'p', 'c1', 'c2', 'slow');
	$node->safe_psql('postgres',
		q{SELECT dbgate.alter_budget('c1', runaway_after => '0', runaway_budget => 'c2')});
	$_->quit for ($l, $h, $a, $w);
}

# 3. Kept slots.
{
	reset_all();
	my $offset = -s $node->logfile;
	$node->safe_psql(
		'postgres', q{
		SELECT dbgate.create_budget('slow2', 1, max_queued => 10);
		SELECT dbgate.alter_budget('inter', scope => 'transaction');
		SELECT dbgate.alter_budget('slow', runaway_after => '300ms',
		                           runaway_action => 'demote', runaway_budget => 'slow2');
	});
	my $l = holder(3, 31);
	my $a = DbgateTest::Session->new($node, user => 'dm_u');
	$a->send('BEGIN; SELECT pg_advisory_xact_lock_shared(3)');
	is(wait_where($node, $a->pid, 'slow:active:inter'), 'slow:active:inter',
		"scope 'transaction': the statement is moved while it runs");
	release($l, 3);
	my (undef, $err) = $a->result;
	is($err, '', "scope 'transaction': the statement runs");
	is(where($node, $a->pid), 'slow:idle in transaction:inter',
		"scope 'transaction': the slot is kept in the target");
	counts_are($node, 'slow', { active => 1, demoted_in => 1 },
		"scope 'transaction': the target counts it");
	counts_are($node, 'inter', { admitted => 1, runaways => 1, demoted_out => 1 },
		"scope 'transaction': the source does not");
	# (0.5 s: the target's runaway_after, 300 ms, runs out before the sleep
	# can end)
	(undef, $err) = $a->query('SELECT pg_sleep(0.5)');
	is($err, '', "scope 'transaction': a statement longer than the target's runaway_after runs");
	poll_ok($node, q{SELECT runaways FROM dbgate.status WHERE budget = 'slow'}, '1',
		"scope 'transaction': it is a runaway of the target");
	lines_are($node, $offset, 'inter:demote to "slow";slow:log',
		"scope 'transaction': the LOG lines");
	is(where($node, $a->pid), 'slow:idle in transaction:inter',
		"scope 'transaction': not moved again ('demote' acts as 'log' in the target)");
	(undef, $err) = $a->query('COMMIT');
	is($err, '', "scope 'transaction': COMMIT");
	idle_ok($node, "scope 'transaction': the slot is returned at COMMIT", 'inter', 'slow', 'slow2');
	counts_are($node, 'slow2', {}, "scope 'transaction': nothing in slow2");
	counts_are($node, 'slow', { runaways => 1, demoted_in => 1 },
		"scope 'transaction': the target's counts");
	$node->safe_psql(
		'postgres', q{
		SELECT dbgate.alter_budget('inter', scope => 'statement');
		SELECT dbgate.alter_budget('slow', runaway_after => '0', runaway_action => 'log',
		                           runaway_budget => '');
		SELECT dbgate.drop_budget('slow2');
		SELECT dbgate.reset_stats();
	});

	# a transaction ID keeps the slot (the row is written after the move:
	# the statement waits for lock 31 of the test in its WHERE)
	$a->send('BEGIN; UPDATE dm_t SET v = v + 1 WHERE id = 2 AND pg_advisory_xact_lock_shared(31) IS NOT NULL');
	is(wait_where($node, $a->pid, 'slow:active:inter'), 'slow:active:inter',
		'xid: the write is moved while it runs');
	release($l, 31);
	(undef, $err) = $a->result;
	is($err, '', 'xid: the write runs');
	is(where($node, $a->pid), 'slow:idle in transaction:inter',
		'xid: the slot is kept in the target');
	counts_are($node, 'slow', { active => 1, demoted_in => 1 }, 'xid: the target counts it');
	counts_are($node, 'inter', { admitted => 1, runaways => 1, demoted_out => 1 },
		'xid: the source does not');
	(undef, $err) = $a->query('SELECT 1');
	is($err, '', 'xid: a statement under the kept slot');
	is(where($node, $a->pid), 'slow:idle in transaction:inter', 'xid: still in the target');
	(undef, $err) = $a->query('COMMIT');
	is($err, '', 'xid: COMMIT');
	idle_ok($node, 'xid: the slot is returned at COMMIT', 'inter', 'slow');
	counts_are($node, 'inter', { admitted => 1, runaways => 1, demoted_out => 1 },
		'xid: the source\'s counts');
	$_->quit for ($l, $a);
}

# 4. Memory grants move with the slot.
# The grant in the source is read while the statement runs there with
# runaway_after 0 (a runaway there would end that state when it likes);
# the same statement, run again with runaway_after 500ms, is moved with
# the same grant.
{
	reset_all();
	my $l = holder(4);
	my $a = DbgateTest::Session->new($node, user => 'dm_m');
	my $q = q{SELECT g FROM (SELECT g FROM generate_series(1, 10) g ORDER BY g) s
	          WHERE pg_advisory_xact_lock_shared(4) IS NOT NULL LIMIT 1};
	$a->send($q);
	is(wait_where($node, $a->pid, 'msrc:active:-'), 'msrc:active:-',
		'memory: admitted to the source');
	poll_ok($node,
		q{SELECT b.memory_mb > 0 AND b.memory_mb = s.memory_mb_active
		    FROM dbgate.backends b, dbgate.status s
		   WHERE s.budget = 'msrc' AND b.pid = } . $a->pid,
		't', 'memory: the statement\'s grant counts in the source');
	my $mem = col($node, 'msrc', 'memory_mb_active');
	my $bmem = $node->safe_psql('postgres',
		'SELECT memory_mb FROM dbgate.backends WHERE pid = ' . $a->pid);
	ok($mem > 0 && $mem == $bmem, "memory: the grant ($mem MB)");
	is(col($node, 'mslow', 'memory_mb_active'), '0', 'memory: not in the target');
	release($l, 4);
	my ($out, $err) = $a->result;
	is("$out/$err", '1/', 'memory: the statement ends (not a runaway)');
	idle_ok($node, 'memory: every active is 0 after the first run', 'msrc', 'mslow');

	$node->safe_psql('postgres',
		q{SELECT dbgate.alter_budget('msrc', runaway_after => '500ms')});
	lock_more($l, 4);
	$a->send($q);
	is(wait_where($node, $a->pid, 'mslow:active:msrc'), 'mslow:active:msrc',
		'memory: run again, it is moved');
	# (the grant moves just after the move is shown)
	poll_ok($node,
		q{SELECT (SELECT memory_mb_active FROM dbgate.status WHERE budget = 'msrc') || '/'
		      || (SELECT memory_mb_active FROM dbgate.status WHERE budget = 'mslow')},
		"0/$mem", 'memory: the grant moved from the source to the target');
	is($node->safe_psql('postgres',
			'SELECT memory_mb FROM dbgate.backends WHERE pid = ' . $a->pid),
		$bmem, 'memory: the backend\'s grant is unchanged');
	release($l, 4);
	($out, $err) = $a->result;
	is("$out/$err", '1/', 'memory: the statement ends');
	idle_ok($node, 'memory: every active is 0', 'msrc', 'mslow');
	is(col($node, 'msrc', 'memory_mb_active') . '/' . col($node, 'mslow', 'memory_mb_active'),
		'0/0', 'memory: no grant left at either');
	counts_are($node, 'msrc', { admitted => 2, runaways => 1, demoted_out => 1 },
		'memory: the source\'s counts');
	counts_are($node, 'mslow', { demoted_in => 1 }, 'memory: the target\'s counts');
	$_->quit for ($l, $a);
}

# 5. The target's statement_timeout and lock_timeout.
# The statements wait for locks of the test, so that only the target's
# timeouts end them.
{
	reset_all();
	$node->safe_psql('postgres',
		q{SELECT dbgate.alter_budget('slow', statement_timeout => '1500ms')});
	my $l = holder(5, 51);
	my $a = DbgateTest::Session->new($node, user => 'dm_u');
	my (undef, $err, $state) = $a->query('SELECT pg_advisory_xact_lock_shared(5)');
	is($state, '57014', 'statement_timeout: the moved statement is canceled (57014)');
	like($err, qr/ERROR:  57014: canceling statement due to statement timeout\nDETAIL:  The statement was demoted to budget "slow", whose statement_timeout is 1500 ms\./,
		'statement_timeout: the message and the DETAIL');
	idle_ok($node, 'statement_timeout: every active is 0', 'inter', 'slow');
	counts_are($node, 'inter', { admitted => 1, runaways => 1, demoted_out => 1 },
		'statement_timeout: the source\'s counts');
	counts_are($node, 'slow', { demoted_in => 1 }, 'statement_timeout: the target\'s counts');
	# The server's times: the source's active time runs from the admission
	# to the move (at least runaway_after), the target's from the move to
	# the cancel.  Counted from the statement's start, the deadline ends
	# the statement 1500 ms after its admission: not before (the sum), and
	# the target held it for less than 1500 ms, which a deadline counted
	# from the move would give at least (the margin between the two is the
	# source's time, >= 500 ms).
	my $ti = col($node, 'inter', 'active_time_total');
	my $ts = col($node, 'slow', 'active_time_total');
	ok($ti >= 500 && $ti + $ts >= 1500,
		sprintf('statement_timeout: not before 1500 ms from the statement\'s start (%.1f + %.1f ms)',
			$ti, $ts));
	ok($ts < 1500,
		sprintf('statement_timeout: counted from the statement\'s start, not from the move (%.1f ms in the target)',
			$ts));
	release($l, 5);

	$node->safe_psql('postgres',
		q{SELECT dbgate.alter_budget('slow', statement_timeout => '0', lock_timeout => '300ms');
		  SELECT dbgate.reset_stats()});
	my $r = DbgateTest::Session->new($node);
	(undef, $err) = $r->query('BEGIN; SELECT v FROM dm_t WHERE id = 1 FOR UPDATE');
	is($err, '', 'lock_timeout: a superuser holds the row lock');
	# (dm_gate() waits for lock 51 of the test without a lock wait: the
	# statement comes to the row only after the move)
	$a->send('UPDATE dm_t SET v = v + 1 WHERE id = 1 AND dm_gate(51)');
	is(wait_where($node, $a->pid, 'slow:active:inter'), 'slow:active:inter',
		'lock_timeout: the statement is moved before it waits for the row');
	my $gate_at = time;
	release($l, 51);
	(undef, $err, $state) = $a->result;
	my $took = $a->done_at - $gate_at;
	is($state, '55P03', 'lock_timeout: the moved statement waiting for the row is canceled (55P03)');
	like($err, qr/ERROR:  55P03: canceling statement due to lock timeout/,
		'lock_timeout: the message');
	ok($took >= 0.3,
		sprintf('lock_timeout: after the wait for the row ran longer than it (%.2f s)', $took));
	idle_ok($node, 'lock_timeout: every active is 0', 'inter', 'slow');
	counts_are($node, 'inter', { admitted => 1, runaways => 1, demoted_out => 1 },
		'lock_timeout: the source\'s counts');
	counts_are($node, 'slow', { demoted_in => 1 }, 'lock_timeout: the target\'s counts');
	$r->query('ROLLBACK');
	is($node->safe_psql('postgres', 'SELECT v FROM dm_t WHERE id = 1'), '0',
		'lock_timeout: the row is unchanged');
	$node->safe_psql('postgres', q{SELECT dbgate.alter_budget('slow', lock_timeout => '0')});
	$_->quit for ($l, $r, $a);
}

# 6. A shadow source: counted, not moved.
{
	reset_all();
	my $offset = -s $node->logfile;
	$node->safe_psql('postgres', q{SELECT dbgate.alter_budget('inter', enforce => false)});
	my $l = holder(6);
	my $a = DbgateTest::Session->new($node, user => 'dm_u');
	$a->send('SELECT pg_advisory_xact_lock_shared(6)');
	poll_ok($node, q{SELECT runaways FROM dbgate.status WHERE budget = 'inter'}, '1',
		'shadow: the runaway is counted');
	# (the worker writes the line after it would have moved the slot)
	lines_are($node, $offset, 'inter:log', "shadow: logged as 'log'");
	is(where($node, $a->pid), 'inter:active:-', 'shadow: the statement stays in the source');
	release($l, 6);
	my (undef, $err) = $a->result;
	is($err, '', 'shadow: it ends normally');
	idle_ok($node, 'shadow: every active is 0', 'inter', 'slow');
	counts_are($node, 'inter', { admitted => 1, runaways => 1 }, 'shadow: the source\'s counts');
	counts_are($node, 'slow', {}, 'shadow: nothing in the target');
	$node->safe_psql('postgres', q{SELECT dbgate.alter_budget('inter', enforce => true)});
	$_->quit for ($l, $a);
}

# 7. Quarantine: a repeat is admitted to the target.
# (quarantine '1h': the entry must outlast the test's steps, however slow;
# the runaway and its repeat have one query id, the lock's number being a
# constant)
{
	reset_all();
	my $offset = -s $node->logfile;
	$node->safe_psql('postgres', q{SELECT dbgate.alter_budget('inter', quarantine => '1h')});
	my $l = holder(71, 72, 73);
	my $a = DbgateTest::Session->new($node, user => 'dm_u');
	$a->send('SELECT pg_advisory_xact_lock_shared(71)');
	is(wait_where($node, $a->pid, 'slow:active:inter'), 'slow:active:inter',
		'quarantine: the runaway is moved');
	release($l, 71);
	my (undef, $err) = $a->result;
	is($err, '', 'quarantine: the runaway runs to its end');
	poll_ok($node, q{SELECT count(*) FROM dbgate.quarantine WHERE budget = 'inter'}, '1',
		'quarantine: its query is quarantined');
	lines_are($node, $offset, 'inter:demote to "slow"', 'quarantine: the LOG line');
	counts_are($node, 'slow', { demoted_in => 1 }, 'quarantine: the runaway was moved');
	my $s = DbgateTest::Session->new($node, user => 'dm_s');
	$s->send('SELECT pg_advisory_xact_lock_shared(72)');
	is(wait_where($node, $s->pid, 'slow:active:-'), 'slow:active:-',
		'quarantine: the target is full');
	$a->send('SELECT pg_advisory_xact_lock_shared(73)');
	poll_ok($node, 'SELECT budget || \':\' || state FROM dbgate.backends WHERE pid = ' . $a->pid,
		'slow:queued', 'quarantine: the repeat queues in the target');
	counts_are($node, 'inter', { admitted => 1, runaways => 1, demoted_out => 1, quarantined => 1 },
		'quarantine: counted in the source\'s quarantined only');
	counts_are($node, 'slow', { active => 1, queued => 1, admitted => 1, demoted_in => 1 },
		'quarantine: it waits in the target');
	release($l, 72);
	is(wait_where($node, $a->pid, 'slow:active:inter'), 'slow:active:inter',
		'quarantine: admitted to the target, shown with demoted_from');
	(undef, $err) = $s->result;
	is($err, '', 'quarantine: the target\'s statement ends normally');
	release($l, 73);
	(undef, $err) = $a->result;
	is($err, '', 'quarantine: so does the repeat');
	idle_ok($node, 'quarantine: every active is 0', 'inter', 'slow');
	counts_are($node, 'inter', { admitted => 1, runaways => 1, demoted_out => 1, quarantined => 1 },
		'quarantine: the source\'s counts (no second runaway, no demoted_out)');
	counts_are($node, 'slow',
		{ admitted => 2, admitted_after_wait => 1, demoted_in => 1 },
		'quarantine: an admission of the target, not a demoted_in');
	is($node->safe_psql('postgres',
			q{SELECT runaways || '/' || hits FROM dbgate.quarantine WHERE budget = 'inter'}),
		'1/1', 'quarantine: the entry\'s hits');
	$node->safe_psql('postgres',
		q{SELECT dbgate.quarantine_remove(); SELECT dbgate.alter_budget('inter', quarantine => '0')});
	$_->quit for ($l, $s, $a);
}

# 8. Cancel and terminate of a demoted statement.
# (the statements wait for lock 8 of the test until they are canceled,
# terminated or let go)
{
	reset_all();
	my $offset = -s $node->logfile;
	my $l = holder(8);
	my $a = DbgateTest::Session->new($node, user => 'dm_u');
	my $s = DbgateTest::Session->new($node, user => 'dm_s');
	my $q = 'SELECT pg_advisory_xact_lock_shared(8)';
	$a->send($q);
	is(wait_where($node, $a->pid, 'slow:active:inter'), 'slow:active:inter',
		'cancel: the statement is moved');
	$s->send('SELECT 1');
	is(wait_where($node, $s->pid, 'slow:queued:-'), 'slow:queued:-',
		'cancel: the target\'s own statement waits (the target is full)');
	$node->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $a->pid . ')');
	my (undef, $err, $state) = $a->result;
	is($state, '57014', 'cancel: the demoted statement is canceled');
	(undef, $err) = $s->result;
	is($err, '', 'cancel: the target\'s waiter runs (the slot was returned to the target)');
	idle_ok($node, 'cancel: every active is 0', 'inter', 'slow');
	counts_are($node, 'inter', { admitted => 1, runaways => 1, demoted_out => 1 },
		'cancel: the source\'s counts');
	counts_are($node, 'slow', { admitted => 1, admitted_after_wait => 1, demoted_in => 1 },
		'cancel: the target\'s counts');
	# the session goes on: its next statement starts in the source again
	# (that it ran away there is what its LOG line and the source's counts
	# say)
	$a->send($q);
	is(wait_where($node, $a->pid, 'slow:active:inter'), 'slow:active:inter',
		'cancel: the next statement is moved again when it runs away');
	my @l = wait_lines($node, $offset, 2);
	ok(@l == 2 && $l[1][0] eq 'inter' && $l[1][1] == $a->pid && $l[1][3] eq 'demote to "slow"',
		'cancel: the next statement is admitted to the source (it ran away there)');
	release($l, 8);
	(undef, $err) = $a->result;
	is($err, '', 'cancel: it ends normally');
	idle_ok($node, 'cancel: every active is 0 again', 'inter', 'slow');
	counts_are($node, 'inter', { admitted => 2, runaways => 2, demoted_out => 2 },
		'cancel: the source\'s counts after the second');
	counts_are($node, 'slow', { admitted => 1, admitted_after_wait => 1, demoted_in => 2 },
		'cancel: the target\'s counts after the second');

	# terminate
	reset_all();
	lock_more($l, 8);
	$a->send($q);
	is(wait_where($node, $a->pid, 'slow:active:inter'), 'slow:active:inter',
		'terminate: the statement is moved');
	$s->send('SELECT 1');
	is(wait_where($node, $s->pid, 'slow:queued:-'), 'slow:queued:-',
		'terminate: the target\'s own statement waits');
	$node->safe_psql('postgres', 'SELECT pg_terminate_backend(' . $a->pid . ')');
	$a->wait_exit;
	(undef, $err) = $s->result;
	is($err, '', 'terminate: the target\'s waiter runs');
	poll_ok($node, 'SELECT count(*) FROM pg_stat_activity WHERE pid = ' . $a->pid, '0',
		'terminate: the backend is gone');
	idle_ok($node, 'terminate: every active is 0', 'inter', 'slow');
	counts_are($node, 'inter', { admitted => 1, runaways => 1, demoted_out => 1 },
		'terminate: the source\'s counts');
	counts_are($node, 'slow', { admitted => 1, admitted_after_wait => 1, demoted_in => 1 },
		'terminate: the target\'s counts');
	$_->quit for ($l, $s);
}

# 9. Parallel query.
# (dm_lockwait() waits for lock 9 of the test in the leader and in each
# worker: the statement runs with its workers until the test lets it go)
{
	reset_all();
	my $l = holder(9);
	my $a = DbgateTest::Session->new($node, user => 'dm_u');
	my $q = 'SELECT count(*) FROM dm_big WHERE dm_lockwait(9)';
	my (undef, $err) = $a->query('SET max_parallel_workers_per_gather = 2; SET parallel_setup_cost = 0; '
		  . 'SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0');
	is($err, '', 'parallel: settings');
	my ($plan) = $a->query("EXPLAIN (COSTS OFF) $q");
	like($plan, qr/Gather/, 'parallel: the plan is parallel');
	reset_all();
	$a->send($q);
	is(wait_where($node, $a->pid, 'slow:active:inter'), 'slow:active:inter',
		'parallel: the statement is moved');
	poll_ok($node,
		"SELECT count(*) > 0 FROM pg_stat_activity WHERE backend_type = 'parallel worker' AND leader_pid = "
		  . $a->pid,
		't', 'parallel: it runs with parallel workers');
	counts_are($node, 'slow', { active => 1, demoted_in => 1 },
		'parallel: the target counts the leader only');
	counts_are($node, 'inter', { admitted => 1, runaways => 1, demoted_out => 1 },
		'parallel: the source counts nothing now');
	release($l, 9);
	my ($out, $e2) = $a->result;
	is("$out/$e2", '4000/', 'parallel: the statement completes with the right result');
	idle_ok($node, 'parallel: every active is 0', 'inter', 'slow');
	counts_are($node, 'inter', { admitted => 1, runaways => 1, demoted_out => 1 },
		'parallel: the source\'s counts');
	counts_are($node, 'slow', { demoted_in => 1 }, 'parallel: the target\'s counts');
	$_->quit for ($l, $a);
}

# 10. drop_budget(target, force).
{
	reset_all();
	my $offset = -s $node->logfile;
	my ($state, $out, $err) =
	  run_sql($node, q{SELECT dbgate.drop_budget('slow', true)});
	is($state, '', 'drop: drop_budget(target, force) succeeds');
	like($err, qr/WARNING:  01000: budget "inter" loses its runaway_budget "slow": its runaway_action is set to 'log'/,
		'drop: with a WARNING about the source');
	is($node->safe_psql('postgres',
			q{SELECT runaway_action || '/' || coalesce(runaway_budget, '-') FROM dbgate.budgets WHERE budget = 'inter'}),
		'log/-', "drop: the source's runaway_action is 'log'");
	# (0.8 s: runaway_after, 500 ms, runs out before the sleep can end)
	($state) = run_sql($node, 'SELECT pg_sleep(0.8)', user => 'dm_u');
	is($state, '', 'drop: a runaway runs to its end');
	poll_ok($node, q{SELECT runaways FROM dbgate.status WHERE budget = 'inter'}, '1',
		'drop: it is counted');
	idle_ok($node, 'drop: every active is 0', 'inter');
	counts_are($node, 'inter', { admitted => 1, runaways => 1 }, 'drop: only logged');
	lines_are($node, $offset, 'inter:log', "drop: the LOG line says 'log'");
}

# 11. A shadow target (enforce => false) applies none of its timeouts
# (SPEC: a shadow budget's statement_timeout / lock_timeout / idle timeout
# are not applied), whether the statement is moved there as a runaway or
# admitted there as quarantined; an enforcing target with the same
# timeouts applies them.
# Each case runs a statement moved into the shadow target 'ss_tgt' (from
# 'ss_src') and then, once it is seen there, the same statement moved into
# the enforcing target 'se_tgt' (from 'se_src'), the witness: its timeout
# is counted from a later start (or a later wait, or a later idle
# time), so once the witness has been ended by it, the shadow target's
# statement would have been ended too if its timeout applied.  The shadow
# target's statement is then let go and must end normally.
{
	$node->safe_psql(
		'postgres', q{
		CREATE ROLE dm_ss LOGIN;
		CREATE ROLE dm_se LOGIN;
		GRANT SELECT, UPDATE ON dm_t TO dm_ss, dm_se;
		SELECT dbgate.create_budget('ss_tgt', 1, max_queued => 10, enforce => false,
		                            statement_timeout => '1s');
		SELECT dbgate.create_budget('se_tgt', 1, max_queued => 10,
		                            statement_timeout => '1s');
		SELECT dbgate.create_budget('ss_src', 1, max_queued => 10, scope => 'transaction',
		                            runaway_after => '300ms', runaway_action => 'demote',
		                            runaway_budget => 'ss_tgt');
		SELECT dbgate.create_budget('se_src', 1, max_queued => 10, scope => 'transaction',
		                            runaway_after => '300ms', runaway_action => 'demote',
		                            runaway_budget => 'se_tgt');
		SELECT dbgate.assign_role('dm_ss', 'ss_src');
		SELECT dbgate.assign_role('dm_se', 'se_src');
		SELECT dbgate.reset_stats();
	});
	my $l = holder(121, 122, 123, 124, 125, 126, 127, 128);
	my $s = DbgateTest::Session->new($node, user => 'dm_ss');
	my $e = DbgateTest::Session->new($node, user => 'dm_se');

	# statement_timeout ('1s'): dm_gate() waits without a lock wait
	$s->send('SELECT dm_gate(121)');
	is(wait_where($node, $s->pid, 'ss_tgt:active:ss_src'), 'ss_tgt:active:ss_src',
		'shadow target: the statement is moved to the shadow target');
	$e->send('SELECT dm_gate(122)');
	my (undef, $err, $state) = $e->result;
	is($state, '57014', 'shadow target: the witness moved to the enforcing target is canceled (57014)');
	like($err, qr/DETAIL:  The statement was demoted to budget "se_tgt", whose statement_timeout is 1000 ms\./,
		'shadow target: by the enforcing target\'s statement_timeout');
	is(state_of($node, $s->pid), 'active',
		'shadow target: the statement moved to the shadow target still runs');
	release($l, 121);
	my $out;
	($out, $err) = $s->result;
	is("$out/$err", 't/', 'shadow target: it ends normally (no statement_timeout)');
	idle_ok($node, 'shadow target: every active is 0', 'ss_src', 'ss_tgt', 'se_src', 'se_tgt');
	counts_are($node, 'ss_tgt', { demoted_in => 1 }, 'shadow target: the shadow target\'s counts');
	counts_are($node, 'ss_src', { admitted => 1, runaways => 1, demoted_out => 1 },
		'shadow target: the source\'s counts');

	# lock_timeout ('300ms'): the statements wait for rows that a superuser
	# holds, after the move
	$node->safe_psql('postgres',
		q{SELECT dbgate.alter_budget('ss_tgt', statement_timeout => '0', lock_timeout => '300ms');
		  SELECT dbgate.alter_budget('se_tgt', statement_timeout => '0', lock_timeout => '300ms')});
	my $r = DbgateTest::Session->new($node);
	(undef, $err) = $r->query('BEGIN; SELECT v FROM dm_t WHERE id IN (3, 4) FOR UPDATE');
	is($err, '', 'shadow target: a superuser holds the row locks');
	$s->send('UPDATE dm_t SET v = v + 1 WHERE id = 3 AND dm_gate(123)');
	is(wait_where($node, $s->pid, 'ss_tgt:active:ss_src'), 'ss_tgt:active:ss_src',
		'shadow target, lock_timeout: the statement is moved before it waits for the row');
	release($l, 123);
	poll_ok($node, 'SELECT state || \':\' || coalesce(wait_event_type, \'-\') FROM pg_stat_activity WHERE pid = '
		  . $s->pid, 'active:Lock', 'shadow target, lock_timeout: it waits for the row');
	$e->send('UPDATE dm_t SET v = v + 1 WHERE id = 4 AND dm_gate(124)');
	is(wait_where($node, $e->pid, 'se_tgt:active:se_src'), 'se_tgt:active:se_src',
		'shadow target, lock_timeout: the witness is moved to the enforcing target');
	release($l, 124);
	(undef, $err, $state) = $e->result;
	is($state, '55P03', 'shadow target, lock_timeout: the witness waiting for its row is canceled (55P03)');
	like($err, qr/DETAIL:  The statement was demoted to budget "se_tgt", whose lock_timeout is 300 ms\./,
		'shadow target, lock_timeout: by the enforcing target\'s lock_timeout');
	is(activity($node, $s->pid), 'active:Lock',
		'shadow target, lock_timeout: the statement moved to the shadow target still waits for its row');
	(undef, $err) = $r->query('ROLLBACK');
	is($err, '', 'shadow target, lock_timeout: the superuser lets the rows go');
	(undef, $err) = $s->result;
	is($err, '', 'shadow target, lock_timeout: the statement ends normally (no lock_timeout)');
	idle_ok($node, 'shadow target, lock_timeout: every active is 0', 'ss_src', 'ss_tgt', 'se_src', 'se_tgt');

	# idle_in_transaction_timeout ('1s'): scope 'transaction' keeps the
	# moved slot in the target after the statement (the backend then takes
	# the target's limits, demote.c's take_target_limits())
	$node->safe_psql('postgres',
		q{SELECT dbgate.alter_budget('ss_tgt', lock_timeout => '0', idle_in_transaction_timeout => '1s');
		  SELECT dbgate.alter_budget('se_tgt', lock_timeout => '0', idle_in_transaction_timeout => '1s');
		  SELECT dbgate.reset_stats()});
	$s->send('BEGIN; SELECT dm_gate(125)');
	is(wait_where($node, $s->pid, 'ss_tgt:active:ss_src'), 'ss_tgt:active:ss_src',
		'shadow target, idle: the statement is moved');
	release($l, 125);
	(undef, $err) = $s->result;
	is($err, '', 'shadow target, idle: it ends');
	is(where($node, $s->pid), 'ss_tgt:idle in transaction:ss_src',
		'shadow target, idle: the slot is kept in the shadow target');
	$e->send('BEGIN; SELECT dm_gate(126)');
	is(wait_where($node, $e->pid, 'se_tgt:active:se_src'), 'se_tgt:active:se_src',
		'shadow target, idle: the witness is moved to the enforcing target');
	release($l, 126);
	(undef, $err) = $e->result;
	is($err, '', 'shadow target, idle: the witness\'s statement ends');
	poll_ok($node, 'SELECT count(*) FROM pg_stat_activity WHERE pid = ' . $e->pid, '0',
		'shadow target, idle: the witness\'s session is ended by the enforcing target\'s idle timeout');
	poll_ok($node, q{SELECT terminated_idle FROM dbgate.status WHERE budget = 'se_tgt'}, '1',
		'shadow target, idle: counted in the enforcing target\'s terminated_idle');
	$e->wait_exit;
	# (psql exits if the server ended the session)
	($out, $err) = eval { $s->query('SELECT 1') };
	is($@ ? "lost: $@" : "$out/$err", '1/',
		'shadow target, idle: the session idle in the shadow target goes on');
	if ($@)
	{
		$s = DbgateTest::Session->new($node, user => 'dm_ss');
	}
	else
	{
		(undef, $err) = $s->query('COMMIT');
		is($err, '', 'shadow target, idle: COMMIT');
	}
	counts_are($node, 'ss_tgt', { demoted_in => 1 }, 'shadow target, idle: the shadow target\'s counts');
	is(col($node, 'ss_tgt', 'terminated_idle'), '0', 'shadow target, idle: nothing terminated there');
	idle_ok($node, 'shadow target, idle: every active is 0', 'ss_src', 'ss_tgt', 'se_src', 'se_tgt');

	# quarantine: a quarantined statement admitted to the target, gated
	# there from the start: the shadow target applies no statement_timeout,
	# the enforcing one does (its own, from the statement's start)
	$node->safe_psql('postgres',
		q{SELECT dbgate.alter_budget('ss_tgt', statement_timeout => '1s', idle_in_transaction_timeout => '0');
		  SELECT dbgate.alter_budget('se_tgt', statement_timeout => '1s', idle_in_transaction_timeout => '0');
		  SELECT dbgate.reset_stats()});
	my $qid = $node->safe_psql('postgres',
		'EXPLAIN (VERBOSE, COSTS OFF) SELECT dm_gate(0) IS NOT NULL');
	($qid) = $qid =~ /Query Identifier: (-?\d+)/;
	ok(defined $qid && $qid != 0, 'shadow target, quarantine: the query id');
	$qid //= 0;
	$node->safe_psql('postgres',
		"SELECT dbgate.quarantine_add('ss_src', $qid, '1h'), dbgate.quarantine_add('se_src', $qid, '1h')");
	$e = DbgateTest::Session->new($node, user => 'dm_se');
	$s->send('SELECT dm_gate(127) IS NOT NULL');
	is(wait_where($node, $s->pid, 'ss_tgt:active:ss_src'), 'ss_tgt:active:ss_src',
		'shadow target, quarantine: the quarantined statement is admitted to the shadow target');
	$e->send('SELECT dm_gate(128) IS NOT NULL');
	(undef, $err, $state) = $e->result;
	is($state, '57014', 'shadow target, quarantine: the witness admitted to the enforcing target is canceled (57014)');
	like($err, qr/canceling statement due to statement timeout/,
		'shadow target, quarantine: by the enforcing target\'s statement_timeout');
	is(state_of($node, $s->pid), 'active',
		'shadow target, quarantine: the statement in the shadow target still runs');
	release($l, 127);
	($out, $err) = $s->result;
	is("$out/$err", 't/', 'shadow target, quarantine: it ends normally (no statement_timeout)');
	idle_ok($node, 'shadow target, quarantine: every active is 0', 'ss_src', 'ss_tgt', 'se_src', 'se_tgt');
	counts_are($node, 'ss_src', { quarantined => 1 }, 'shadow target, quarantine: the source\'s counts');
	counts_are($node, 'ss_tgt', { admitted => 1 }, 'shadow target, quarantine: the shadow target\'s counts');
	counts_are($node, 'se_tgt', { admitted => 1 }, 'shadow target, quarantine: the enforcing target\'s counts');
	$node->safe_psql('postgres',
		q{SELECT dbgate.quarantine_remove();
		  SELECT dbgate.alter_budget('ss_tgt', statement_timeout => '0');
		  SELECT dbgate.alter_budget('se_tgt', statement_timeout => '0')});
	$_->quit for ($l, $r, $s, $e);
}

# 12. A restart of the runaway worker.
# The statement 'a' is moved to se_tgt (statement_timeout 3s), then the
# worker gets SIGTERM (it is started again a second later, by the
# postmaster).  The witness 'e' is moved by the new worker after that: its
# deadline comes after a's, so once the target's statement_timeout has
# canceled it, a's has run out too; a is then let go, and its result says
# whether the new worker applied the target's statement_timeout to it.
{
	$node->safe_psql('postgres',
		q{SELECT dbgate.alter_budget('se_tgt', statement_timeout => '3s');
		  SELECT dbgate.reset_stats()});
	my $l = holder(131, 132);
	my $a = DbgateTest::Session->new($node, user => 'dm_se');
	my $e = DbgateTest::Session->new($node, user => 'dm_se');
	$a->send('SELECT dm_gate(131)');
	is(wait_where($node, $a->pid, 'se_tgt:active:se_src'), 'se_tgt:active:se_src',
		'worker restart: the statement is moved');
	my $wpid = worker_pid($node);
	ok($wpid ne '' && kill('TERM', $wpid), 'worker restart: SIGTERM of the runaway worker');
	worker_runs($node, 'worker restart: a new runaway worker runs', not => $wpid);
	$e->send('SELECT dm_gate(132)');
	my (undef, $err, $state) = $e->result;
	is($state, '57014',
		'worker restart: the witness, moved by the new worker, is canceled by the target\'s statement_timeout');
	release($l, 131);
	(undef, $err, $state) = $a->result;
	is($state, '57014',
		'worker restart: so is the statement moved before the restart (57014)');
	like($err, qr/ERROR:  57014: canceling statement due to statement timeout\nDETAIL:  The statement was demoted to budget "se_tgt", whose statement_timeout is 3000 ms\./,
		'worker restart: the message and the DETAIL');
	idle_ok($node, 'worker restart: every active is 0', 'se_src', 'se_tgt');
	counts_are($node, 'se_src', { admitted => 2, runaways => 2, demoted_out => 2 },
		'worker restart: the source\'s counts');
	counts_are($node, 'se_tgt', { demoted_in => 2 }, 'worker restart: the target\'s counts');
	$node->safe_psql('postgres',
		q{SELECT dbgate.alter_budget('se_tgt', statement_timeout => '0')});
	$_->quit for ($l, $a, $e);
}

# 13. The worker's cancel for a target's timeout is the moved statement's
# only: caught inside that statement (a PL/pgSQL handler of query_canceled
# around its wait for a lock, which se_tgt's lock_timeout of 300ms ends),
# it does not turn a later user cancel in the same transaction (the slot
# is kept in the target by scope 'transaction') into a lock timeout.
# The later statement waits without a lock wait, so that only the user's
# cancel can end it.
{
	$node->safe_psql(
		'postgres', q{
		CREATE FUNCTION dm_catch(k bigint) RETURNS text LANGUAGE plpgsql AS $$
		BEGIN
			PERFORM dm_gate(k);
			BEGIN
				PERFORM pg_advisory_xact_lock(k + 1);
				RETURN 'locked';
			EXCEPTION WHEN query_canceled THEN
				RETURN 'canceled';
			END;
		END $$;
		SELECT dbgate.alter_budget('se_tgt', lock_timeout => '300ms');
		SELECT dbgate.reset_stats();
	});
	my $l = holder(141, 142, 143);
	my $a = DbgateTest::Session->new($node, user => 'dm_se');
	$a->send('BEGIN; SELECT dm_catch(141)');
	is(wait_where($node, $a->pid, 'se_tgt:active:se_src'), 'se_tgt:active:se_src',
		'caught cancel: the statement is moved');
	release($l, 141);
	my ($out, $err) = $a->result;
	like("$out/$err", qr/^(BEGIN\n)?canceled\/\z/,
		'caught cancel: the target\'s lock_timeout canceled its wait for a lock, and the statement caught it');
	is(where($node, $a->pid), 'se_tgt:idle in transaction:se_src',
		'caught cancel: the slot is kept in the target');
	$a->send('SELECT dm_gate(143)');
	poll_ok($node,
		'SELECT state FROM pg_stat_activity WHERE query = \'SELECT dm_gate(143);\' AND pid = ' . $a->pid,
		'active', 'caught cancel: a later statement of the transaction runs');
	$node->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $a->pid . ')');
	my $state;
	(undef, $err, $state) = $a->result;
	is($state, '57014', 'caught cancel: the user\'s cancel of the later statement is a cancel (57014)');
	like($err, qr/ERROR:  57014: canceling statement due to user request/,
		'caught cancel: PostgreSQL\'s message, not the target\'s lock timeout');
	(undef, $err) = $a->query('ROLLBACK');
	is($err, '', 'caught cancel: ROLLBACK');
	idle_ok($node, 'caught cancel: every active is 0', 'se_src', 'se_tgt');
	counts_are($node, 'se_src', { admitted => 1, runaways => 1, demoted_out => 1 },
		'caught cancel: the source\'s counts');
	counts_are($node, 'se_tgt', { demoted_in => 1 }, 'caught cancel: the target\'s counts');
	$node->safe_psql('postgres',
		q{SELECT dbgate.alter_budget('se_tgt', lock_timeout => '0')});
	$_->quit for ($l, $a);
}

$node->stop;

# 14. A streaming standby moves its own slots.
# As in 1, on the standby: 'h' holds the source's slot, 'a' and 'w' queue
# behind it; then the primary gives the source its runaway_after, and once
# the standby has it, 'h' may end.
{
	my $primary = PostgreSQL::Test::Cluster->new('demote_primary');
	$primary->init(allows_streaming => 1);
	$primary->append_conf('postgresql.conf', "shared_preload_libraries = 'dbgate'\n");
	$primary->start;
	$primary->safe_psql(
		'postgres', q{
		CREATE EXTENSION dbgate;
		CREATE ROLE dm_u LOGIN;
		SELECT dbgate.create_budget('slow', 1, max_queued => 10);
		SELECT dbgate.create_budget('inter', 1, max_queued => 10, runaway_after => '0',
		                            runaway_action => 'demote', runaway_budget => 'slow');
		SELECT dbgate.assign_role('dm_u', 'inter');
	});
	$primary->backup('b1');
	my $standby = PostgreSQL::Test::Cluster->new('demote_standby');
	$standby->init_from_backup($primary, 'b1', has_streaming => 1);
	$standby->start;
	my $l = DbgateTest::Session->new($standby);
	for my $k (1, 11)
	{
		my (undef, $e) = $l->query("SELECT pg_advisory_lock($k)");
		die $e if $e ne '';
	}
	my $h = DbgateTest::Session->new($standby, user => 'dm_u');
	my $a = DbgateTest::Session->new($standby, user => 'dm_u');
	my $w = DbgateTest::Session->new($standby, user => 'dm_u');
	$h->send('SELECT pg_advisory_xact_lock_shared(11)');
	is(wait_where($standby, $h->pid, 'inter:active:-'), 'inter:active:-',
		'standby: a statement holds the source\'s slot');
	$a->send($wait1);
	is(wait_where($standby, $a->pid, 'inter:queued:-'), 'inter:queued:-',
		'standby: the long statement waits in the source');
	$w->send('SELECT 1');
	is(wait_where($standby, $w->pid, 'inter:queued:-'), 'inter:queued:-',
		'standby: the waiter queues in the source');
	queue_is($standby, 'inter',
		[ [ $h->pid, 'active', '-' ], [ $a->pid, 'queued', 1 ], [ $w->pid, 'queued', 2 ] ],
		'standby: in this order');
	$primary->safe_psql('postgres',
		q{SELECT dbgate.alter_budget('inter', runaway_after => '500ms')});
	$primary->wait_for_catchup($standby, 'replay', $primary->lsn('flush'));
	poll_ok($standby,
		q{SELECT runaway_after = '500ms' FROM dbgate.budgets WHERE budget = 'inter'},
		't', 'standby: the source\'s runaway_after is replicated');
	my (undef, $err) = $l->query('SELECT pg_advisory_unlock(11)');
	die $err if $err ne '';
	(undef, $err) = $h->result;
	is($err, '', 'standby: the statement that held the slot ends');
	is(wait_where($standby, $a->pid, 'slow:active:inter'), 'slow:active:inter',
		'standby: the long statement is moved to the target there');
	(undef, $err) = $w->result;
	is($err, '', 'standby: the waiter runs');
	is(where($standby, $a->pid), 'slow:active:inter',
		'standby: before the long statement ends');
	counts_are($standby, 'slow', { active => 1, demoted_in => 1 }, 'standby: the target counts it');
	(undef, $err) = $l->query('SELECT pg_advisory_unlock(1)');
	die $err if $err ne '';
	(undef, $err) = $a->result;
	is($err, '', 'standby: the moved statement ends');
	idle_ok($standby, 'standby: every active is 0', 'inter', 'slow');
	counts_are($standby, 'inter',
		{ admitted => 3, admitted_after_wait => 2, runaways => 1, demoted_out => 1 },
		'standby: the source\'s counts');
	counts_are($standby, 'slow', { demoted_in => 1 }, 'standby: the target\'s counts');
	counts_are($primary, 'inter', {}, 'standby: nothing on the primary (source)');
	counts_are($primary, 'slow', {}, 'standby: nothing on the primary (target)');
	$_->quit for ($l, $h, $a, $w);
	$standby->stop;
	$primary->stop;
}

done_testing();
