# A budget's statement_timeout and lock_timeout, with the simple and the
# extended query protocol: PostgreSQL's own errors (57014, 55P03), the
# smaller non-zero of session and budget value wins, and afterwards SHOW
# reports the session's own values.  The session's statement_timeout counts
# from the start of the statement, queue wait included, and cancels a
# queued statement; the budget's counts from admission.
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

# ---------------------------------------------------------------------------
# statement_timeout, simple protocol

my $s = DbgateTest::Session->new($node, user => 't_user');
my ($out, $err, $state, $secs) = timed($s, 'SELECT pg_sleep(30)');
is($state, '57014', 'budget statement_timeout: 57014');
like($err, $STMT_ERR, 'budget statement_timeout: PostgreSQL\'s own message');
ok($secs >= 0.5 && $secs < 10, "budget statement_timeout: after about 500 ms ($secs s)");
is(show($s, 'statement_timeout'), '0', 'SHOW statement_timeout after it: session value 0');

# Each statement gets its own deadline, and none is left armed between
# statements: three statements of 300 ms in a row, then one after the
# session was idle for longer than the budget's timeout.
($out, $err) = $s->query(
	'SELECT pg_sleep(0.3); SELECT pg_sleep(0.3); SELECT pg_sleep(0.3);');
is($err, '', 'statements shorter than the budget timeout each run to the end');
usleep(700_000);
($out, $err) = $s->query('SELECT 1');
is("$out|$err", '1|', 'no timeout fires after the session was idle');

$s->query(q{SET statement_timeout = '20s'});
($out, $err, $state, $secs) = timed($s, 'SELECT pg_sleep(30)');
is($state, '57014', 'budget timeout smaller than the session\'s: 57014');
ok($secs < 10, "budget timeout smaller than the session's wins ($secs s)");
is(show($s, 'statement_timeout'), '20s',
	'SHOW statement_timeout after it: the session\'s 20s');

$node->safe_psql('postgres',
	q{SELECT dbgate.alter_budget('t_budget', statement_timeout => '20s')});
$s->query(q{SET statement_timeout = '300ms'});
($out, $err, $state, $secs) = timed($s, 'SELECT pg_sleep(30)');
is($state, '57014', 'session timeout smaller than the budget\'s: 57014');
ok($secs >= 0.3 && $secs < 10, "session timeout smaller than the budget's wins ($secs s)");
is(show($s, 'statement_timeout'), '300ms',
	'SHOW statement_timeout after it: the session\'s 300ms');
$s->query('RESET statement_timeout');
$node->safe_psql('postgres',
	q{SELECT dbgate.alter_budget('t_budget', statement_timeout => '500ms')});

# ---------------------------------------------------------------------------
# lock_timeout, simple protocol

my $locker = DbgateTest::Session->new($node);
$locker->query('BEGIN; SELECT id FROM t_rows WHERE id = 1 FOR UPDATE; LOCK TABLE t_other;');

($out, $err, $state, $secs) = timed($s, 'UPDATE t_rows SET v = v + 1 WHERE id = 1');
is($state, '55P03', 'budget lock_timeout on a row lock: 55P03');
like($err, $LOCK_ERR, 'budget lock_timeout: PostgreSQL\'s own message');
ok($secs >= 0.3 && $secs < 10, "budget lock_timeout: after about 300 ms ($secs s)");
is(show($s, 'lock_timeout'), '0', 'SHOW lock_timeout after it: session value 0');

($out, $err, $state) = $s->query('SELECT t_count_other()');
is($state, '55P03',
	'budget lock_timeout on a relation lock taken while executing: 55P03');
is(show($s, 'lock_timeout'), '0', 'SHOW lock_timeout after it: session value 0');

($out, $err) = $s->query(q{SELECT current_setting('lock_timeout')});
is("$out|$err", '300ms|', 'inside the statement the effective lock_timeout is the budget\'s');
is(show($s, 'lock_timeout'), '0', 'and after it the session\'s again');

$s->query(q{SET lock_timeout = '20s'});
($out, $err, $state, $secs) = timed($s, 'UPDATE t_rows SET v = v + 1 WHERE id = 1');
is($state, '55P03', 'budget lock_timeout smaller than the session\'s: 55P03');
ok($secs < 10, "budget lock_timeout smaller than the session's wins ($secs s)");
is(show($s, 'lock_timeout'), '20s', 'SHOW lock_timeout after it: the session\'s 20s');

$node->safe_psql('postgres',
	q{SELECT dbgate.alter_budget('t_budget', lock_timeout => '20s')});
$s->query(q{SET lock_timeout = '200ms'});
($out, $err, $state, $secs) = timed($s, 'UPDATE t_rows SET v = v + 1 WHERE id = 1');
is($state, '55P03', 'session lock_timeout smaller than the budget\'s: 55P03');
ok($secs >= 0.2 && $secs < 10, "session lock_timeout smaller than the budget's wins ($secs s)");
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
# LOCK TABLE is not gated: it waits under the session's own settings.
($out, $err, $state, $secs) = timed($s,
	q{SET LOCAL statement_timeout = '3s'; LOCK TABLE t_other IN ACCESS SHARE MODE;});
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
		'>', \$stdout, '2>', \$stderr);
	my $status = $? >> 8;
	note "pgbench -M $mode: exit $status\nstdout:\n$stdout\nstderr:\n$stderr";
	return ($status, $stdout, $stderr, time - $t0);
}

my $session_20s = '-c statement_timeout=20s -c lock_timeout=20s';
for my $case ([ 'extended', '' ], [ 'prepared', '' ], [ 'extended', $session_20s ])
{
	my ($mode, $options) = @$case;
	my $what = "-M $mode" . ($options ? ', session timeouts 20s' : '');
	my ($rc, $o, $e, $t) = pgbench_run($mode, "SELECT pg_sleep(30);\n", $options);
	isnt($rc, 0, "$what: statement_timeout aborts the client");
	like($e, qr/canceling statement due to statement timeout/,
		"$what: budget statement_timeout gives PostgreSQL's message");
	ok($t < 10, "$what: after about 500 ms ($t s)");

	($rc, $o, $e, $t) =
	  pgbench_run($mode, "UPDATE t_rows SET v = v + 1 WHERE id = 1;\n", $options);
	isnt($rc, 0, "$what: lock_timeout aborts the client");
	like($e, qr/canceling statement due to lock timeout/,
		"$what: budget lock_timeout gives PostgreSQL's message");
	ok($t < 10, "$what: after about 300 ms ($t s)");
}

# Statements within the limits; SHOW afterwards in the same session, also
# after the session was idle for longer than the budget's timeout.
my $ok_script = q{SELECT pg_sleep(0.3);
SELECT current_setting('lock_timeout') AS inside \gset
SHOW lock_timeout \gset
SHOW statement_timeout \gset
\shell echo inside :inside lock_timeout :lock_timeout statement_timeout :statement_timeout
\sleep 700 ms
SELECT pg_sleep(0.3);
SELECT pg_sleep(0.3);
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
  pgbench_run('extended', "SELECT pg_sleep(30);\n", '-c statement_timeout=300ms');
like($e, qr/canceling statement due to statement timeout/,
	'-M extended: session statement_timeout smaller than the budget\'s: canceled');
ok($t < 10, "-M extended: session statement_timeout smaller than the budget's wins ($t s)");
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
	$sth->execute(30);
	my $t = time - $t0;
	is($dbh->state, '57014', "extended protocol: budget statement_timeout: 57014 ($t s)");
	is($show->('statement_timeout'), '20s',
		'extended protocol: SHOW statement_timeout after the error: 20s');

	$sth = $dbh->prepare('UPDATE t_rows SET v = v + $1 WHERE id = 1');
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
});
$locker->query('SELECT pg_advisory_lock(1)');

# Starts a statement that holds the slot (without the budget's
# statement_timeout), then sets the budget's statement_timeout to AFTER.
sub start_holder
{
	my ($after) = @_;
	my $h = DbgateTest::Session->new($node, user => 't_user');
	$h->query(q{SET statement_timeout = 0});
	$node->safe_psql('postgres',
		q{SELECT dbgate.alter_budget('t_queue', statement_timeout => '0')});
	$h->send('SELECT pg_advisory_xact_lock_shared(1)');
	ok( $node->poll_query_until(
			'postgres',
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
		$node->poll_query_until(
			'postgres', 'SELECT state FROM dbgate.backends WHERE pid = ' . $w->pid,
			'queued'),
		'statement is queued');
}

# The session's statement_timeout cancels a queued statement.
my $h = start_holder('1s');
$s->query(q{SET statement_timeout = '300ms'});
$s->send('SELECT 1');
($out, $err, $state) = $s->result;
$secs = $s->done_at - $s->sent_at;
is($state, '57014', 'session statement_timeout cancels a queued statement: 57014');
like($err, $STMT_ERR, 'queued statement: PostgreSQL\'s own message');
ok($secs >= 0.3 && $secs < 10, "queued statement canceled after about 300 ms ($secs s)");
is(show($s, 'statement_timeout'), '300ms', 'SHOW statement_timeout after it: 300ms');
counters_are(
	$node, 't_queue',
	{ active => 1, admitted => 1, canceled_waiting => 1 },
	'canceled by the session\'s statement_timeout: counted in canceled_waiting');

# The session's statement_timeout includes the queue wait: 3 s in all,
# about 1.2 s queued plus 2.5 s running is too long (the budget has no
# statement_timeout here).
$node->safe_psql('postgres',
	q{SELECT dbgate.alter_budget('t_queue', statement_timeout => '0')});
$s->query(q{SET statement_timeout = '3s'});
$s->send('SELECT pg_sleep(2.5)');
queued($s);
usleep(1_200_000);
$locker->query('SELECT pg_advisory_unlock(1)');
($out, $err, $state) = $s->result;
$secs = $s->done_at - $s->sent_at;
is($state, '57014', 'session statement_timeout counts the queue wait: 57014');
ok($secs >= 3 && $secs < 10, "canceled 3 s after the statement started ($secs s)");
$h->result;
counters_are(
	$node, 't_queue',
	{ admitted => 2, admitted_after_wait => 1, canceled_waiting => 1 },
	'counters after the statement that waited and then timed out');

# The budget's statement_timeout (1 s) counts from admission: about 1.2 s
# queued plus 0.5 s running is fine.
$locker->query('SELECT pg_advisory_lock(1)');
$h = start_holder('1s');
$s->query('RESET statement_timeout');
$s->send('SELECT pg_sleep(0.5)');
queued($s);
usleep(1_200_000);
$locker->query('SELECT pg_advisory_unlock(1)');
($out, $err, $state) = $s->result;
$secs = $s->done_at - $s->sent_at;
is($err, '', "budget statement_timeout does not count the queue wait ($secs s)");
ok($secs >= 1.7, 'the statement waited and then ran');
$h->result;
counters_are(
	$node, 't_queue',
	{ admitted => 4, admitted_after_wait => 2, canceled_waiting => 1 },
	'counters at the end');

$_->quit for ($s, $h, $locker);
$node->stop;
done_testing();
