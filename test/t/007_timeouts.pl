# A budget's statement_timeout and lock_timeout, with the simple and the
# extended query protocol: PostgreSQL's own errors (57014, 55P03), the
# smaller non-zero of session and budget value wins, and afterwards SHOW
# reports the session's own values.  The session's statement_timeout counts
# from the start of the statement, queue wait included, and cancels a
# queued statement; the budget's counts from admission.
#
# No verdict reads a client's clock for an upper bound.  Which timeout
# ended a statement is told by states: a statement that sleeps 10 s ends
# without an error unless a timeout shorter than that cancels it, so
# 57014 says one did; an UPDATE reaches its locked row only where the
# lock_timeout in effect inside it is the one named in its WHERE clause,
# so 55P03 says that one timed the wait out.  Client clocks give lower
# bounds only ("not before 500 ms"), which cannot race.  That a statement
# shorter than its budget's timeout is not canceled is checked with the
# server's times: it runs to its end, or a statement timeout ends it no
# sooner than the budget's timeout after its start (a statement held off
# the CPU that long is canceled rightly; one canceled sooner had a
# deadline that was not its own).  Two queue cases race a session timer
# that PostgreSQL arms when a statement starts, before the statement is
# queued: whether the statement was queued (or admitted) in time is read
# afterwards from the budget's counters, and an attempt in which the
# machine was too slow for it is made again, at most 5 times, each retry
# reported (see there).
use strict;
use warnings FATAL => 'all';

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use DbgateTest;

my $node = dbgate_node('timeouts');
$node->safe_psql(
	'postgres', q{
	CREATE ROLE t_user LOGIN;
	CREATE TABLE t_rows (id int PRIMARY KEY, v int);
	INSERT INTO t_rows VALUES (1, 0), (2, 0);
	CREATE TABLE t_other (id int);
	CREATE FUNCTION t_count_other() RETURNS bigint LANGUAGE plpgsql
	  AS $$ BEGIN RETURN (SELECT count(*) FROM t_other); END $$;
	GRANT SELECT, UPDATE ON t_rows TO t_user;
	GRANT SELECT ON t_other TO t_user;
	SELECT dbgate.create_budget('t_budget', 2, 2, statement_timeout => '500ms',
	                            lock_timeout => '300ms');
	SELECT dbgate.assign_role('t_user', 't_budget');
});

my $STMT_ERR = qr/ERROR:  57014: canceling statement due to statement timeout/;
my $LOCK_ERR = qr/ERROR:  55P03: canceling statement due to lock timeout/;

# Runs SQL in session S; returns (stdout, stderr, sqlstate, seconds).
sub timed
{
	my ($s, $sql) = @_;
	my ($out, $err, $state) = $s->query($sql);
	return ($out, $err, $state, $s->done_at - $s->sent_at);
}

sub show
{
	my ($s, $guc) = @_;
	my ($out, $err) = $s->query("SHOW $guc");
	return $err eq '' ? $out : "error: $err";
}

# The ms from the start of session S's last statement to its end, as the
# server saw them (pg_stat_activity, read while S is idle).  A statement
# starts before it is admitted, so a budget's deadline counted from
# admission is at least as far from its start.
sub last_ms
{
	my ($s) = @_;
	return $node->safe_psql('postgres',
		'SELECT round(extract(epoch FROM state_change - query_start) * 1000)
		   FROM pg_stat_activity WHERE pid = ' . $s->pid);
}

# ran_or_late(S, SQL, MS) -> (OK, OUT, DESCRIPTION): OK when SQL (one
# statement) ran to its end in session S, or when a statement timeout
# ended it no sooner than MS after it started (a machine that held it off
# the CPU for that long: a deadline of its own; an earlier cancel would
# have come from a deadline of another statement).
sub ran_or_late
{
	my ($s, $sql, $ms) = @_;
	my ($out, $err, $state) = $s->query($sql);
	my $took = last_ms($s);
	my $ok = $err eq '' || ($state eq '57014' && $took >= $ms);
	return ($ok, $out, "$sql: $took ms" . ($err eq '' ? '' : ", $err"));
}

# An UPDATE of the row that $locker holds: it reaches the row, and waits
# for its lock, only where the lock_timeout in effect inside it is VALUE
# (the One-Time Filter of its plan reads the setting as the run starts);
# under any other value it matches no row and ends at once without an
# error.  So 55P03 from it says that a lock timeout of VALUE ended the wait.
sub lock_update
{
	my ($value) = @_;
	return "UPDATE t_rows SET v = v + 1 WHERE id = 1 AND current_setting('lock_timeout') = '$value'";
}

# ---------------------------------------------------------------------------
# statement_timeout, simple protocol

# The statements that should time out sleep 10 s: 57014 says that a
# timeout ended them before that, and which one is told by the values
# (the other one is 20 s, longer than the statement).
my $s = DbgateTest::Session->new($node, user => 't_user');
my ($out, $err, $state, $secs) = timed($s, 'SELECT pg_sleep(10)');
is($state, '57014', 'budget statement_timeout: 57014');
like($err, $STMT_ERR, 'budget statement_timeout: PostgreSQL\'s own message');
ok($secs >= 0.5, "budget statement_timeout: not before 500 ms ($secs s)");
is(show($s, 'statement_timeout'), '0', 'SHOW statement_timeout after it: session value 0');

# Each statement gets its own deadline, and none is left armed between
# statements: three statements of 300 ms in a row (900 ms in all), then
# one after the session was idle for longer than the budget's timeout.
# Each runs to its end, or is canceled no sooner than 500 ms after its
# own start (see ran_or_late).
my ($each_ok, @each) = (1);
for (1 .. 3)
{
	my ($ok, undef, $what) = ran_or_late($s, 'SELECT pg_sleep(0.3)', 500);
	$each_ok &&= $ok;
	push @each, $what;
}
ok($each_ok, 'statements shorter than the budget timeout each run to the end')
  or diag join("\n", @each);
usleep(700_000);
my ($idle_ok, $one, $what) = ran_or_late($s, 'SELECT 1', 500);
ok($idle_ok && ($one eq '1' || $what =~ /57014/),
	'no timeout fires after the session was idle')
  or diag $what;

$s->query(q{SET statement_timeout = '20s'});
($out, $err, $state, $secs) = timed($s, 'SELECT pg_sleep(10)');
is($state, '57014', 'budget timeout smaller than the session\'s: 57014');
ok($secs >= 0.5, "budget timeout smaller than the session's wins, not before 500 ms ($secs s)");
is(show($s, 'statement_timeout'), '20s',
	'SHOW statement_timeout after it: the session\'s 20s');

$node->safe_psql('postgres',
	q{SELECT dbgate.alter_budget('t_budget', statement_timeout => '20s')});
$s->query(q{SET statement_timeout = '300ms'});
($out, $err, $state, $secs) = timed($s, 'SELECT pg_sleep(10)');
is($state, '57014', 'session timeout smaller than the budget\'s: 57014');
ok($secs >= 0.3, "session timeout smaller than the budget's wins, not before 300 ms ($secs s)");
is(show($s, 'statement_timeout'), '300ms',
	'SHOW statement_timeout after it: the session\'s 300ms');
$s->query('RESET statement_timeout');

# ---------------------------------------------------------------------------
# lock_timeout, simple protocol.  The budget's statement_timeout stays at
# 20 s meanwhile: a lock_timeout starts with the lock wait, after the
# statement's timer, and 500 ms would race 300 ms (under load the wait may
# start later than 200 ms after admission).

my $locker = DbgateTest::Session->new($node);
$locker->query('BEGIN; SELECT id FROM t_rows WHERE id = 1 FOR UPDATE; LOCK TABLE t_other;');

($out, $err, $state, $secs) = timed($s, lock_update('300ms'));
is($state, '55P03', 'budget lock_timeout on a row lock: 55P03');
like($err, $LOCK_ERR, 'budget lock_timeout: PostgreSQL\'s own message');
ok($secs >= 0.3, "budget lock_timeout: its 300 ms, not before ($secs s)");
is(show($s, 'lock_timeout'), '0', 'SHOW lock_timeout after it: session value 0');

($out, $err, $state) = $s->query('SELECT t_count_other()');
is($state, '55P03',
	'budget lock_timeout on a relation lock taken while executing: 55P03');
is(show($s, 'lock_timeout'), '0', 'SHOW lock_timeout after it: session value 0');

($out, $err) = $s->query(q{SELECT current_setting('lock_timeout')});
is("$out|$err", '300ms|', 'inside the statement the effective lock_timeout is the budget\'s');
is(show($s, 'lock_timeout'), '0', 'and after it the session\'s again');

$s->query(q{SET lock_timeout = '20s'});
($out, $err, $state, $secs) = timed($s, lock_update('300ms'));
is($state, '55P03', 'budget lock_timeout smaller than the session\'s: 55P03');
ok($secs >= 0.3, "budget lock_timeout smaller than the session's wins: its 300 ms ($secs s)");
is(show($s, 'lock_timeout'), '20s', 'SHOW lock_timeout after it: the session\'s 20s');

$node->safe_psql('postgres',
	q{SELECT dbgate.alter_budget('t_budget', lock_timeout => '20s')});
$s->query(q{SET lock_timeout = '200ms'});
($out, $err, $state, $secs) = timed($s, lock_update('200ms'));
is($state, '55P03', 'session lock_timeout smaller than the budget\'s: 55P03');
ok($secs >= 0.2, "session lock_timeout smaller than the budget's wins: its 200 ms ($secs s)");
is(show($s, 'lock_timeout'), '200ms', 'SHOW lock_timeout after it: the session\'s 200ms');
$s->query('RESET lock_timeout');
$node->safe_psql('postgres',
	q{SELECT dbgate.alter_budget('t_budget', lock_timeout => '300ms')});

# The same inside a transaction block: the error aborts the transaction,
# ROLLBACK restores everything.
($out, $err, $state) = $s->query(
	q{BEGIN; SET LOCAL statement_timeout = '20s'; UPDATE t_rows SET v = v + 1 WHERE id = 1;});
is($state, '55P03', 'lock timeout inside a transaction block: 55P03');
$s->query('ROLLBACK');
is(show($s, 'statement_timeout') . '/' . show($s, 'lock_timeout'),
	'0/0', 'after ROLLBACK: session values');

# The session's own changes made inside a gated statement are the
# session's: set_config() for the session lasts, set_config() for the
# transaction lasts until the transaction ends (the budget's lock_timeout,
# 300ms, is not what stays behind either way).
($out, $err) = $s->query(q{SELECT set_config('lock_timeout', '5s', false)});
is("$out|$err", '5s|', 'set_config(lock_timeout, 5s) in a gated statement');
is(show($s, 'lock_timeout'), '5s', 'SHOW lock_timeout after it: 5s');
$s->query('RESET lock_timeout');
($out, $err) = $s->query(
	q{BEGIN; SELECT set_config('lock_timeout', '100ms', true);});
is("$out|$err", '100ms|', 'set_config(lock_timeout, 100ms, is_local) in a gated statement');
is(show($s, 'lock_timeout'), '100ms',
	'SHOW lock_timeout later in the transaction: the transaction\'s 100ms');
# LOCK TABLE is not gated: it waits under the session's own settings (the
# statement_timeout only ends the wait should no lock_timeout do it; it is
# long, so that it cannot come first).
($out, $err, $state, $secs) = timed($s,
	q{SET LOCAL statement_timeout = '20s'; LOCK TABLE t_other IN ACCESS SHARE MODE;});
is($state, '55P03',
	'an ungated LOCK TABLE later in the transaction times out after the transaction\'s 100ms');
$s->query('ROLLBACK');
is(show($s, 'lock_timeout'), '0', 'after ROLLBACK: session value 0');
# ... also when the transaction's value is the budget's own value
($out, $err) = $s->query(
	q{BEGIN; SELECT set_config('lock_timeout', '300ms', true);});
is("$out|$err", '300ms|', 'set_config(lock_timeout, 300ms = the budget\'s, is_local)');
is(show($s, 'lock_timeout'), '300ms',
	'SHOW lock_timeout later in the transaction: the transaction\'s 300ms');
$s->query('ROLLBACK');
$s->send(q{BEGIN; SELECT set_config('search_path', 'pg_catalog', true);});
$s->result;
is(show($s, 'search_path'), 'pg_catalog',
	'other parameters set for the transaction in a gated statement last');
$s->query('ROLLBACK');

# ---------------------------------------------------------------------------
# Extended protocol (pgbench -M extended / prepared).  pgbench ends a client
# at its first error, so SHOW after an error is checked above with psql;
# here SHOW follows successful statements that ran under the budget's limits.

my $script_no = 0;

# pgbench_run(MODE, SCRIPT, PGOPTIONS) -> (exit status, stdout, stderr,
# seconds); PGOPTIONS sets the session's own values.
sub pgbench_run
{
	my ($mode, $script, $options) = @_;
	my $file = $node->basedir . '/script_' . ++$script_no . '.sql';
	append_to_file($file, $script);
	local $ENV{PGHOST} = $node->host;
	local $ENV{PGPORT} = $node->port;
	local $ENV{PGOPTIONS} = $options // '';
	my ($stdout, $stderr) = ('', '');
	my $t0 = time;
	IPC::Run::run(
		[ 'pgbench', '-n', '-t', '1', '-M', $mode, '-f', $file, '-U', 't_user', 'postgres' ],
		'>', \$stdout, '2>', \$stderr,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	my $status = $? >> 8;
	note "pgbench -M $mode: exit $status\nstdout:\n$stdout\nstderr:\n$stderr";
	return ($status, $stdout, $stderr, time - $t0);
}

# As above: a statement of 10 s that a timeout ends, an UPDATE that waits
# only under the expected lock_timeout; the budget's statement_timeout is
# 500 ms for the first and 20 s for the second.
my $session_20s = '-c statement_timeout=20s -c lock_timeout=20s';
my @ext_cases = ([ 'extended', '' ], [ 'prepared', '' ], [ 'extended', $session_20s ]);
$node->safe_psql('postgres',
	q{SELECT dbgate.alter_budget('t_budget', statement_timeout => '500ms')});
for my $case (@ext_cases)
{
	my ($mode, $options) = @$case;
	my $what = "-M $mode" . ($options ? ', session timeouts 20s' : '');
	my ($rc, $o, $e, $t) = pgbench_run($mode, "SELECT pg_sleep(10);\n", $options);
	isnt($rc, 0, "$what: statement_timeout aborts the client");
	like($e, qr/canceling statement due to statement timeout/,
		"$what: budget statement_timeout gives PostgreSQL's message");
	ok($t >= 0.5, "$what: its 500 ms, not before ($t s)");
}
$node->safe_psql('postgres',
	q{SELECT dbgate.alter_budget('t_budget', statement_timeout => '20s')});
for my $case (@ext_cases)
{
	my ($mode, $options) = @$case;
	my $what = "-M $mode" . ($options ? ', session timeouts 20s' : '');
	my ($rc, $o, $e, $t) = pgbench_run($mode, lock_update('300ms') . ";\n", $options);
	isnt($rc, 0, "$what: lock_timeout aborts the client");
	like($e, qr/canceling statement due to lock timeout/,
		"$what: budget lock_timeout gives PostgreSQL's message");
	ok($t >= 0.3, "$what: its 300 ms, not before ($t s)");
}
$node->safe_psql('postgres',
	q{SELECT dbgate.alter_budget('t_budget', statement_timeout => '500ms')});

# Statements within the limits; SHOW afterwards in the same session, also
# after the session was idle for longer than the budget's timeout (a
# deadline left from before the idle would have passed, and would cancel
# the statements after it at once).  The statements are short, not 300 ms
# sleeps: pgbench shows no server times, and a client cannot tell a
# statement that its machine held past 500 ms from one canceled early (two
# statements in a row, each with its own deadline, are checked with psql
# above, where the server's times tell them apart).
my $ok_script = q{SELECT 1;
SELECT current_setting('lock_timeout') AS inside \gset
SHOW lock_timeout \gset
SHOW statement_timeout \gset
\shell echo inside :inside lock_timeout :lock_timeout statement_timeout :statement_timeout
\sleep 700 ms
SELECT 1;
SELECT 1;
SHOW lock_timeout \gset
\shell echo after :lock_timeout
};
for my $case ([ 'extended', '', '0' ], [ 'prepared', '', '0' ],
	[ 'extended', $session_20s, '20s' ], [ 'prepared', $session_20s, '20s' ])
{
	my ($mode, $options, $value) = @$case;
	my $what = "-M $mode" . ($options ? ', session timeouts 20s' : '');
	my ($rc, $o) = pgbench_run($mode, $ok_script, $options);
	is($rc, 0, "$what: statements within the limits succeed");
	like(
		$o,
		qr/^inside 300ms lock_timeout $value statement_timeout $value$/m,
		"$what: budget lock_timeout inside the statement, session values after it");
	like($o, qr/^after $value$/m, "$what: still the session's lock_timeout at the end");
}

# The session's statement_timeout, when smaller, wins with the extended
# protocol too.
$node->safe_psql('postgres',
	q{SELECT dbgate.alter_budget('t_budget', statement_timeout => '20s')});
my ($rc, $o, $e, $t) =
  pgbench_run('extended', "SELECT pg_sleep(10);\n", '-c statement_timeout=300ms');
like($e, qr/canceling statement due to statement timeout/,
	'-M extended: session statement_timeout smaller than the budget\'s: canceled');
ok($t >= 0.3, "-M extended: session statement_timeout smaller than the budget's wins: its 300 ms ($t s)");
$node->safe_psql('postgres',
	q{SELECT dbgate.alter_budget('t_budget', statement_timeout => '500ms')});
# SHOW after an error with the extended protocol, in the same session:
# DBD::Pg sends statements with parameters as Parse/Bind/Execute.
SKIP:
{
	skip 'DBD::Pg is not installed', 9
	  unless eval { require DBI; require DBD::Pg; 1 };
	my $log_offset = -s $node->logfile;
	my $dbh = DBI->connect(
		'dbi:Pg:dbname=postgres;host=' . $node->host . ';port=' . $node->port,
		't_user', '', { RaiseError => 0, PrintError => 0, AutoCommit => 1 });
	$dbh->do(q{SET statement_timeout = '20s'});
	$dbh->do(q{SET lock_timeout = '20s'});
	my $show = sub {
		my ($guc) = @_;
		return ($dbh->selectrow_array("SHOW $guc"))[0] // 'error: ' . $dbh->errstr;
	};

	my $sth = $dbh->prepare('SELECT pg_sleep($1)');
	my $t0 = time;
	$sth->execute(10);
	my $t = time - $t0;
	is($dbh->state, '57014', "extended protocol: budget statement_timeout: 57014 ($t s)");
	is($show->('statement_timeout'), '20s',
		'extended protocol: SHOW statement_timeout after the error: 20s');

	# the lock waits with the budget's statement_timeout at 20 s (as above)
	$node->safe_psql('postgres',
		q{SELECT dbgate.alter_budget('t_budget', statement_timeout => '20s')});
	$sth = $dbh->prepare(
		q{UPDATE t_rows SET v = v + $1 WHERE id = 1 AND current_setting('lock_timeout') = '300ms'});
	$sth->execute(1);
	is($dbh->state, '55P03', 'extended protocol: budget lock_timeout: 55P03');
	is($show->('lock_timeout'), '20s',
		'extended protocol: SHOW lock_timeout after the error: 20s');

	# in a transaction, the error caught by a savepoint
	$dbh->begin_work;
	$dbh->do('SAVEPOINT a');
	$sth->execute(1);
	is($dbh->state, '55P03', 'extended protocol, in a savepoint: 55P03');
	$dbh->do('ROLLBACK TO SAVEPOINT a');
	is($show->('lock_timeout') . '/' . $show->('statement_timeout'),
		'20s/20s', 'extended protocol: session values after ROLLBACK TO SAVEPOINT');
	$sth = $dbh->prepare('SELECT $1::int + 1');
	$sth->execute(41);
	is(($sth->fetchrow_array)[0], '42', 'extended protocol: the transaction goes on');
	$dbh->commit;
	$dbh->disconnect;
	ok($node->log_contains(qr/execute [^:]+: SELECT pg_sleep\(\$1\)/, $log_offset),
		'the statements went through the extended protocol');
	is($node->safe_psql('postgres',
			q{SELECT active || ':' || queued FROM dbgate.status WHERE budget = 't_budget'}),
		'0:0', 'extended protocol: no slot left behind');
}

$locker->query('ROLLBACK');

# ---------------------------------------------------------------------------
# Queue wait and timeouts: B = 1.

$node->safe_psql(
	'postgres', q{
	SELECT dbgate.create_budget('t_queue', 1, 1, statement_timeout => '1s');
	SELECT dbgate.assign_role('t_user', 't_queue');
	-- a holder that lets its slot go itself, once a statement has waited
	-- SECS in the queue of t_queue (it may read dbgate.backends as its owner)
	CREATE FUNCTION t_hold_until_queued(secs float8) RETURNS void
	  LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
	BEGIN
	  WHILE NOT EXISTS (SELECT FROM dbgate.backends
	                     WHERE budget = 't_queue' AND state = 'queued'
	                       AND clock_timestamp() - state_since >= make_interval(secs => secs))
	  LOOP
	    PERFORM pg_sleep(0.01);
	  END LOOP;
	END $$;
});
$locker->query('SELECT pg_advisory_lock(1)');

# Starts a statement that holds the slot (without the budget's
# statement_timeout): by default one that waits for the advisory lock 1 of
# $locker; then sets the budget's statement_timeout to AFTER.
sub start_holder
{
	my ($after, $sql) = @_;
	my $h = DbgateTest::Session->new($node, user => 't_user');
	$h->query(q{SET statement_timeout = 0});
	$node->safe_psql('postgres',
		q{SELECT dbgate.alter_budget('t_queue', statement_timeout => '0')});
	$h->send($sql // 'SELECT pg_advisory_xact_lock_shared(1)');
	ok(poll_until($node,
			'SELECT state FROM dbgate.backends WHERE pid = ' . $h->pid, 'active'),
		'holder has the slot');
	$node->safe_psql('postgres',
		"SELECT dbgate.alter_budget('t_queue', statement_timeout => '$after')");
	return $h;
}

sub queued
{
	my ($w) = @_;
	return ok(
		poll_until($node,
			'SELECT state FROM dbgate.backends WHERE pid = ' . $w->pid, 'queued'),
		'statement is queued');
}

# finished(S, WHAT) -> (STDOUT, STDERR, SQLSTATE) of session S's statement,
# which only a timer can end.  One that has not ended within the default
# timeout (a statement that stays queued: its queue wait did not count)
# fails WHAT, and the test ends there.
sub finished
{
	my ($s, $what) = @_;
	my @r = eval { $s->result };
	return @r if @r;
	fail("$what: the statement did not end");
	diag $@;
	diag 'dbgate.backends: ' . backends_of($node, 't_queue');
	done_testing();
	exit 1;
}

# The session's statement_timeout cancels a queued statement.  PostgreSQL
# arms the session's timer when the statement starts, before the statement
# reaches the gate, and no SQL can hold it back until the statement is
# queued: a statement that a slow machine keeps from the queue (a parse
# and plan of SELECT 1) for its 300 ms is canceled before it got there.
# Whether it got there is read afterwards from the budget's counters,
# reset before each attempt while only the holder is there: peak_queued 1
# says that it joined the queue, canceled_waiting 1 that it left it by the
# cancel.  An attempt with 57014 where it never joined (peak_queued 0)
# says nothing of the feature and is made again, at most 5 times, each
# reported; any other outcome is asserted as it is.  A queued statement
# that the timer did not end would stay queued behind the holder (which
# waits for the test's lock): that fails (finished), it is not made again.
my $h = start_holder('1s');
$s->query(q{SET statement_timeout = '300ms'});
my ($st_q, $attempts);
for my $attempt (1 .. 5)
{
	$attempts = $attempt;
	$node->safe_psql('postgres', q{SELECT dbgate.reset_stats('t_queue')});
	$s->send('SELECT 1');
	($out, $err, $state) = finished($s, 'session statement_timeout while queued');
	$secs = $s->done_at - $s->sent_at;
	$st_q = status_of($node, 't_queue');
	last
	  unless $state eq '57014'
	  && $st_q->{peak_queued} == 0
	  && $st_q->{canceled_waiting} == 0;
	diag "queued statement: attempt $attempt: its 300 ms were over before it "
	  . 'reached the queue (peak_queued 0); again';
}
is($state, '57014', 'session statement_timeout cancels a queued statement: 57014');
like($err, $STMT_ERR, 'queued statement: PostgreSQL\'s own message');
ok($secs >= 0.3, "queued statement canceled after its 300 ms, not before ($secs s)");
is(show($s, 'statement_timeout'), '300ms', 'SHOW statement_timeout after it: 300ms');
is($st_q->{peak_queued}, '1',
	"the statement reached the queue (attempt $attempts; a failure after 5 "
	  . 'attempts means it never did within its 300 ms)');
counters_are(
	$node, 't_queue',
	{ active => 1, canceled_waiting => 1 },
	'canceled by the session\'s statement_timeout: counted in canceled_waiting');

# The session's statement_timeout includes the queue wait: 3 s in all,
# at least 1 s queued plus 2.5 s running is too long (the budget has no
# statement_timeout here).  The holder lets the slot go by itself once
# the statement has waited 1 s in the queue (the server's clock), with no
# round trip of the test's in between.  57014 cannot race: the statement
# cannot end within 3 s of its start (counted from its admission it
# would: 2.5 s).  What that shows needs the statement to have been
# admitted before its 3 s were over (the session's timer started with the
# statement, and no SQL holds it back): the counters tell afterwards
# (reset once the holder has its slot): admitted_after_wait 1 says it
# was.  An attempt in which the timer canceled it still queued
# (canceled_waiting 1) or before the queue (peak_queued 0) -- the holder's
# loop did not see it and end within 2 s -- says nothing of the feature
# and is made again with a new holder, at most 5 times, each reported.  A
# statement admitted that ran to its end (a timer started again at
# admission) fails at once.
$locker->query('SELECT pg_advisory_unlock(1)');
$h->result;
$h->quit;
$s->query(q{SET statement_timeout = '3s'});
for my $attempt (1 .. 5)
{
	$attempts = $attempt;
	$h = start_holder('0', 'SELECT t_hold_until_queued(1)');
	$node->safe_psql('postgres', q{SELECT dbgate.reset_stats('t_queue')});
	$s->send('SELECT pg_sleep(2.5)');
	($out, $err, $state) = finished($s, 'session statement_timeout across the queue wait');
	$secs = $s->done_at - $s->sent_at;
	$st_q = status_of($node, 't_queue');
	last
	  unless $state eq '57014'
	  && $st_q->{admitted_after_wait} == 0;
	diag "queue wait: attempt $attempt: the statement's 3 s were over before it was "
	  . "admitted (peak_queued $st_q->{peak_queued}, canceled_waiting "
	  . "$st_q->{canceled_waiting}); again";
	# a holder that saw no statement queued for 1 s still loops
	$node->safe_psql('postgres',
		'SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE pid = ' . $h->pid);
	$h->result;
	$h->quit;
}
is($state, '57014', 'session statement_timeout counts the queue wait: 57014');
ok($secs >= 3, "canceled 3 s after the statement started, not before ($secs s)");
$h->result;
counters_are(
	$node, 't_queue',
	{ admitted => 1, admitted_after_wait => 1, peak_queued => 1 },
	"counters after the statement that waited and then timed out (attempt $attempts; "
	  . 'a failure after 5 attempts means it was never admitted within its 3 s)');

# The budget's statement_timeout (1 s) counts from admission: at least
# 1.2 s queued plus 0.5 s running is fine.  The statement runs to its
# end, or (a machine that held it off the CPU for its whole 1 s) is
# canceled no sooner than 1 s after the holder was let go, which is
# before it was admitted (the server's clock); counted from its start,
# its deadline would have passed in the queue.
$h->quit;
$locker->query('SELECT pg_advisory_lock(1)');
$h = start_holder('1s');
$node->safe_psql('postgres', q{SELECT dbgate.reset_stats('t_queue')});
$s->query('RESET statement_timeout');
$s->send('SELECT pg_sleep(0.5)');
queued($s);
usleep(1_200_000);
my ($released) = $locker->query('SELECT clock_timestamp()');
$locker->query('SELECT pg_advisory_unlock(1)');
($out, $err, $state) = $s->result;
$secs = $s->done_at - $s->sent_at;
my $after_release = $node->safe_psql('postgres',
	"SELECT round(extract(epoch FROM state_change - '$released'::timestamptz) * 1000)
	   FROM pg_stat_activity WHERE pid = " . $s->pid);
ok($err eq '' || ($state eq '57014' && $after_release >= 1000),
	"budget statement_timeout does not count the queue wait ($secs s)")
  or diag "$err; ended $after_release ms after the holder was let go";
ok($secs >= 1.7, 'the statement waited and then ran');
$h->result;
counters_are(
	$node, 't_queue',
	{ admitted => 1, admitted_after_wait => 1 },
	'counters at the end');

$_->quit for ($s, $h, $locker);
$node->stop;
done_testing();
