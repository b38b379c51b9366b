# Fast-path function calls (the protocol's FunctionCall message: libpq's
# PQfn, which its large-object functions use) run no query, and a call of
# a gated session is an admission of its own, like a statement:
#   - with the budget full (B = 1, Q = 0, the slot held by another session
#     of the role) a fast-path lo_open, lowrite, or DBD::Pg's
#     pg_lo_write (3 MB) and pg_lo_import get 53300 and write nothing;
#   - with a free slot a call is admitted and counted, and its slot is
#     returned when the call's message has been processed (inside a
#     transaction block too), unless the scope rule keeps it: after a
#     write (a transaction ID) or in a budget of scope 'transaction' it is
#     kept until COMMIT;
#   - a call queues (admitted after the wait), times out with queue_timeout,
#     can be canceled while queued, and runs under the budget's
#     statement_timeout; an error, a cancel or a terminate returns the
#     slot exactly once, with the counters exact;
#   - the queries that a function called so runs take no slot of their
#     own; superusers' calls are not gated.
# The calls are sent by test/tools/pgwire.py (exact messages and
# SQLSTATEs) and by DBD::Pg (a real client of libpq's large objects).
use strict;
use warnings FATAL => 'all';

use DBI;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use DbgateTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $INV_WRITE = 0x20000;
my $INV_READ = 0x40000;

my $node = dbgate_node('fastpath');
$node->safe_psql(
	'postgres', q{
	CREATE ROLE fp_user LOGIN;
	SELECT dbgate.create_budget('fp', max_active => 1, max_queued => 0);
	SELECT dbgate.assign_role('fp_user', 'fp');
	CREATE FUNCTION fp_count() RETURNS bigint LANGUAGE plpgsql AS $$
	DECLARE n bigint;
	BEGIN
	  SELECT count(*) INTO n FROM generate_series(1, 10);
	  RETURN n;
	END $$;
});
my %oid = map { $_ => $node->safe_psql('postgres', "SELECT '$_'::regprocedure::oid") }
  ('lo_creat(integer)', 'lo_open(oid,integer)', 'lowrite(integer,bytea)',
	'pg_sleep(double precision)', 'fp_count()');
my $lo_creat = $oid{'lo_creat(integer)'};
my $lo_open = $oid{'lo_open(oid,integer)'};
my $lowrite = $oid{'lowrite(integer,bytea)'};
my $pg_sleep = $oid{'pg_sleep(double precision)'};
my $superuser = $node->safe_psql('postgres', 'SELECT current_user');
my $dir = PostgreSQL::Test::Utils::tempdir();

# a large object of the role's
sub new_lo
{
	my $lo = $node->safe_psql('postgres', "SELECT lo_from_bytea(0, '')");
	$node->safe_psql('postgres', "ALTER LARGE OBJECT $lo OWNER TO fp_user");
	return $lo;
}

sub lo_bytes
{
	my ($lo) = @_;
	return $node->safe_psql('postgres',
		"SELECT coalesce(sum(length(data)), 0) FROM pg_largeobject WHERE loid = $lo");
}

sub wire_pid
{
	return $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE application_name = 'pgwire'");
}

sub reset_stats
{
	$node->safe_psql('postgres', "SELECT dbgate.reset_stats('fp')");
}

# Another session of the role holds the only slot, waiting for a lock.
my $locker = DbgateTest::Session->new($node);
my $holder = DbgateTest::Session->new($node, user => 'fp_user');

sub hold_slot
{
	my ($name) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	$locker->query('SELECT pg_advisory_lock(1)');
	$holder->send('SELECT pg_advisory_xact_lock_shared(1)');
	poll_ok($node, 'SELECT state FROM dbgate.backends WHERE pid = ' . $holder->pid,
		'active', "$name: another session holds the slot");
}

sub free_slot
{
	$locker->query('SELECT pg_advisory_unlock(1)');
	$holder->result;
}

sub has_line
{
	my ($lines, $re) = @_;
	return scalar grep { /$re/ } @$lines;
}

# ---------------------------------------------------------------------------
# 1. The budget is full: lo_open and lowrite through the fast path.
my $lo = new_lo();
reset_stats();
hold_slot('full');
my $lines = wire_run(
	$node, 'fp_user', join("\n",
		'query BEGIN', "fastpath $lo_open $lo $INV_WRITE",
		"fastpath $lowrite 0 \\x" . ('41' x 1000), 'query COMMIT', 'quit'));
ok(has_line($lines, qr/^ERROR 53300 budget "fp" is full/),
	'full: a fast-path lo_open gets 53300')
  or diag(join("\n", @$lines));
ok(!has_line($lines, qr/^RESULT/), 'full: no function ran');
is(lo_bytes($lo), 0, 'full: nothing was written');
counters_are($node, 'fp', { active => 1, admitted => 1, rejected_full => 1 },
	'full: the call counted in rejected_full, the holder keeps the slot');

# Superusers are not gated, on the fast path either.
$lines = wire_run($node, $superuser, "fastpath $lo_creat -1\nquit");
ok(has_line($lines, qr/^RESULT \d+$/), 'full: a superuser\'s call runs')
  or diag(join("\n", @$lines));

# ---------------------------------------------------------------------------
# 2. DBD::Pg: the functions are looked up (a query) while a slot is free;
# then 3 MB are written while the budget is full.
free_slot();
my $dbh = DBI->connect(
	'dbi:Pg:dbname=postgres;host=' . $node->host . ';port=' . $node->port,
	'fp_user', '', { AutoCommit => 0, RaiseError => 0, PrintError => 0 })
  or die "could not connect: $DBI::errstr";
my $lo2 = $dbh->pg_lo_creat($INV_WRITE);
ok(defined $lo2, 'dbd: pg_lo_creat with a free slot') or diag($dbh->errstr);
$dbh->commit;
reset_stats();
my $fd = $dbh->pg_lo_open($lo2, $INV_WRITE);
ok(defined $fd, 'dbd: pg_lo_open is admitted') or diag($dbh->errstr);
is($node->safe_psql('postgres',
		"SELECT s.admitted || ':' || s.active || ':' || count(b.pid)
		   FROM dbgate.status s LEFT JOIN dbgate.backends b USING (budget)
		  WHERE s.budget = 'fp' GROUP BY s.admitted, s.active"),
	'1:0:0', 'dbd: counted, and its slot is back once the call returned');
hold_slot('dbd');
# (DBD::Pg does not pass on the server's message of a large-object call:
# the log has it)
my $full = qr/ERROR:  budget "fp" is full/;
my $mb3 = 'x' x (3 * 1024 * 1024);
my $log_at = -s $node->logfile;
my $n = $dbh->pg_lo_write($fd, $mb3, length($mb3));
ok(!defined $n, 'dbd: a pg_lo_write of 3 MB is refused while the budget is full')
  or diag("wrote $n bytes");
ok($node->log_contains($full, $log_at), 'dbd: refused because the budget is full');
$dbh->commit;
is(lo_bytes($lo2), 0, 'dbd: nothing was written');

my $file = "$dir/import.bin";
PostgreSQL::Test::Utils::append_to_file($file, $mb3);
my $objects = 'SELECT count(*) FROM pg_largeobject_metadata';
my $nobjects = $node->safe_psql('postgres', $objects);
$log_at = -s $node->logfile;
my $imported = $dbh->pg_lo_import($file);
ok(!defined $imported, 'dbd: pg_lo_import is refused while the budget is full');
ok($node->log_contains($full, $log_at), 'dbd: refused because the budget is full');
$dbh->commit;
is($node->safe_psql('postgres', $objects), $nobjects, 'dbd: no object was imported');
is(status_of($node, 'fp')->{rejected_full}, 2, 'dbd: both refusals counted');
free_slot();
$dbh->disconnect;

# ---------------------------------------------------------------------------
# 3. A free slot, in a transaction block: the slot of a call that wrote
# nothing goes back after it; one that wrote is kept until COMMIT, and a
# later call runs under the kept slot.
reset_stats();
my $w = wire_start(
	$node, 'fp_user', join("\n",
		'query BEGIN', "fastpath $lo_open $lo $INV_WRITE", "waitfor $dir/opened",
		"fastpath $lowrite 0 \\x414243", "waitfor $dir/written",
		"fastpath $lowrite 0 \\x44", 'query COMMIT', 'quit'));
my $shown = q{SELECT s.admitted || ':' || s.active || ':' || coalesce(max(b.state), '-')
   FROM dbgate.status s LEFT JOIN dbgate.backends b USING (budget)
  WHERE s.budget = 'fp' GROUP BY s.admitted, s.active};
poll_ok($node, $shown, '1:0:-', 'block: lo_open admitted, and its slot returned after it');
PostgreSQL::Test::Utils::append_to_file("$dir/opened", '');
poll_ok($node, $shown, '2:1:idle in transaction',
	'block: lowrite admitted, its slot kept (the transaction wrote)');
PostgreSQL::Test::Utils::append_to_file("$dir/written", '');
$lines = wire_finish($w);
is(join(',', grep { /^(RESULT|ERROR|COMPLETE)/ } @$lines),
	'COMPLETE BEGIN,RESULT 0,RESULT 3,RESULT 1,COMPLETE COMMIT', 'block: the calls ran')
  or diag(join("\n", @$lines));
is(lo_bytes($lo), 4, 'block: the bytes were written');
counters_are($node, 'fp', { admitted => 2 },
	'block: two admissions (the last call ran under the kept slot), the slot back at COMMIT');

# An implicit transaction: the call's commit returns the slot.
$lines = wire_run($node, 'fp_user', "fastpath $lo_creat -1\nquit");
ok(has_line($lines, qr/^RESULT \d+$/), 'implicit: the call ran') or diag(join("\n", @$lines));
counters_are($node, 'fp', { admitted => 3 }, 'implicit: admitted, and the slot is back');

# A function that runs a query: one admission for the call.
$lines = wire_run($node, 'fp_user', "fastpath $oid{'fp_count()'}\nquit");
ok(has_line($lines, qr/^RESULT 10$/), 'query: the function ran') or diag(join("\n", @$lines));
counters_are($node, 'fp', { admitted => 4 }, 'query: its query ran under the call\'s slot');

# ---------------------------------------------------------------------------
# 4. Queueing, queue_timeout, a cancel while queued.
$node->safe_psql('postgres', "SELECT dbgate.alter_budget('fp', max_queued => 1)");
reset_stats();
hold_slot('queue');
$w = wire_start($node, 'fp_user', "fastpath $lo_creat -1\nquit");
poll_ok($node, "SELECT count(*) FROM dbgate.backends WHERE budget = 'fp' AND state = 'queued'",
	'1', 'queue: the call waits in the queue');
poll_ok($node,
	"SELECT backend_xmin IS NULL FROM pg_stat_activity WHERE application_name = 'pgwire'",
	't', 'queue: the queued call holds no snapshot');
free_slot();
$lines = wire_finish($w);
ok(has_line($lines, qr/^RESULT \d+$/), 'queue: admitted after the wait')
  or diag(join("\n", @$lines));
counters_are($node, 'fp', { admitted => 2, admitted_after_wait => 1 },
	'queue: counted as admitted after a wait');

$node->safe_psql('postgres', "SELECT dbgate.alter_budget('fp', queue_timeout => '300ms')");
reset_stats();
hold_slot('timeout');
my $t0 = time;
$lines = wire_run($node, 'fp_user', "fastpath $lo_creat -1\nquit");
ok(has_line($lines, qr/^ERROR 53300 timed out waiting for a slot in budget "fp"/),
	'timeout: queue_timeout ends the wait with 53300')
  or diag(join("\n", @$lines));
cmp_ok(time - $t0, '>=', 0.3, 'timeout: after queue_timeout');
counters_are($node, 'fp', { active => 1, admitted => 1, rejected_timeout => 1 },
	'timeout: counted in rejected_timeout');

$node->safe_psql('postgres', "SELECT dbgate.alter_budget('fp', queue_timeout => '0')");
reset_stats();
$w = wire_start($node, 'fp_user', "fastpath $lo_creat -1\nquit");
poll_ok($node, "SELECT count(*) FROM dbgate.backends WHERE budget = 'fp' AND state = 'queued'",
	'1', 'cancel: the call waits in the queue');
$node->safe_psql('postgres', 'SELECT pg_cancel_backend(' . wire_pid() . ')');
$lines = wire_finish($w);
ok(has_line($lines, qr/^ERROR 57014 /), 'cancel: the call is canceled')
  or diag(join("\n", @$lines));
counters_are($node, 'fp', { active => 1, canceled_waiting => 1 },
	'cancel: counted in canceled_waiting, nothing left queued');
free_slot();

# ---------------------------------------------------------------------------
# 5. The budget's statement_timeout; an error of the function; a terminate.
$node->safe_psql('postgres',
	"SELECT dbgate.alter_budget('fp', max_queued => 0, statement_timeout => '300ms')");
reset_stats();
$lines = wire_run($node, 'fp_user', "fastpath $pg_sleep 30\nquit");
ok(has_line($lines, qr/^ERROR 57014 canceling statement due to statement timeout/),
	'statement_timeout: the call is canceled by the budget\'s statement_timeout')
  or diag(join("\n", @$lines));
# a sleep that ran to its end would have returned a result instead
ok(!has_line($lines, qr/^RESULT/), 'statement_timeout: the sleep did not run to its end');
counters_are($node, 'fp', { admitted => 1 }, 'statement_timeout: the slot is back');

$lines = wire_run($node, 'fp_user',
	join("\n", 'query BEGIN', "fastpath $lo_open 4242424 $INV_READ", 'query ROLLBACK', 'quit'));
ok(has_line($lines, qr/^ERROR 42704 /), 'error: the function fails')
  or diag(join("\n", @$lines));
counters_are($node, 'fp', { admitted => 2 }, 'error: the slot is back');

$node->safe_psql('postgres', "SELECT dbgate.alter_budget('fp', statement_timeout => '0')");
$w = wire_start($node, 'fp_user', "fastpath $pg_sleep 60\nquit");
poll_ok($node, "SELECT count(*) FROM dbgate.backends WHERE budget = 'fp' AND state = 'active'",
	'1', 'terminate: the call runs under a slot');
$node->safe_psql('postgres', 'SELECT pg_terminate_backend(' . wire_pid() . ')');
$lines = wire_finish($w);
ok(has_line($lines, qr/^FATAL 57P01 /), 'terminate: the session is ended')
  or diag(join("\n", @$lines));
poll_ok($node, "SELECT active FROM dbgate.status WHERE budget = 'fp'", '0',
	'terminate: the slot is back');
counters_are($node, 'fp', { admitted => 3 }, 'terminate: the counters are exact');

# ---------------------------------------------------------------------------
# 6. Scope 'transaction': a call's slot is kept until the transaction ends.
$node->safe_psql('postgres', "SELECT dbgate.alter_budget('fp', scope => 'transaction')");
reset_stats();
$w = wire_start(
	$node, 'fp_user', join("\n",
		'query BEGIN', "fastpath $lo_open $lo $INV_READ", "waitfor $dir/read",
		'query COMMIT', 'quit'));
poll_ok($node, $shown, '1:1:idle in transaction',
	'transaction: the slot of a call that wrote nothing is kept');
PostgreSQL::Test::Utils::append_to_file("$dir/read", '');
$lines = wire_finish($w);
ok(has_line($lines, qr/^RESULT 0$/), 'transaction: the call ran') or diag(join("\n", @$lines));
counters_are($node, 'fp', { admitted => 1 }, 'transaction: the slot is back at COMMIT');

$holder->quit;
$locker->quit;
$node->stop;
done_testing();
