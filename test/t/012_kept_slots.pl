# Kept slots (B = 1): every way a kept slot can end returns it exactly once.
#
# In each case a session H keeps the only slot of a budget, idle in its
# transaction (scope 'statement': after an UPDATE, since the transaction
# then holds a transaction ID; scope 'transaction': from its first gated
# statement), and a second session W waits in the queue with an UPDATE of
# its own, in a transaction of its own, so that W keeps the slot once it
# has it.  H's slot then ends in one way or another.  A slot that is not
# returned leaves W queued; one returned twice shows in 'active' while W
# holds its slot.  So every case checks that W gets the slot exactly when
# H's ends (not before), that dbgate.status counts exactly one active slot
# and two admissions while W holds it, and that everything is back to zero
# and dbgate.backends is empty after W commits.
#
# The ways, in both scopes: COMMIT, ROLLBACK, an error, a COMMIT that fails,
# ROLLBACK TO SAVEPOINT (keeps the slot), pg_cancel_backend while idle
# (ignored by PostgreSQL: the slot stays kept) and while a statement runs,
# pg_terminate_backend while idle and while a statement runs, PREPARE
# TRANSACTION (then COMMIT PREPARED elsewhere changes nothing), a procedure
# that commits, the client killed or disconnecting, the budget's
# idle_in_transaction_timeout (with what SHOW shows, a tighter session
# setting, and no timeout without a kept slot), dbgate.enabled turned off,
# and a drop of the budget (its holder's COMMIT changes nothing in a new
# budget of the same name).  Scope 'transaction' keeps the slot of a
# read-only transaction.  Last, lock-holder admission when the holder of a
# kept slot waits for a lock in a utility command.
# Also the budget's timeout after a subtransaction abort undoes a SET of
# idle_in_transaction_session_timeout, and the session's setting as
# PL/pgSQL sees it inside a DO block that keeps the slot.
#
# A session with a kept slot and an idle timeout never waits for its
# client before the test has seen what it needs: its statements go in one
# message (one_message()), so that it is not idle between them.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DbgateTest;

my $node = dbgate_node('kept_slots',
	conf => "max_prepared_transactions = 2\ndeadlock_timeout = '200ms'\n");
$node->safe_psql(
	'postgres', q{
	CREATE ROLE k_s LOGIN;
	CREATE ROLE k_t LOGIN;
	CREATE ROLE k_d LOGIN;
	CREATE TABLE k_rows (id int PRIMARY KEY, v int NOT NULL);
	INSERT INTO k_rows SELECT g, 0 FROM generate_series(1, 6) g;
	GRANT SELECT, UPDATE ON k_rows TO k_s, k_t, k_d;
	CREATE TABLE k_def (id int UNIQUE DEFERRABLE INITIALLY DEFERRED);
	GRANT INSERT ON k_def TO k_s, k_t;
	-- updates row 5, waits for advisory lock 9 (while it keeps the slot),
	-- commits, updates row 6
	CREATE PROCEDURE k_proc() LANGUAGE plpgsql AS $$
	BEGIN
		UPDATE k_rows SET v = v + 1 WHERE id = 5;
		PERFORM pg_advisory_xact_lock_shared(9);
		COMMIT;
		UPDATE k_rows SET v = v + 1 WHERE id = 6;
	END
	$$;
	SELECT dbgate.create_budget('k_stmt', 1, 5);
	SELECT dbgate.create_budget('k_tx', 1, 5, scope => 'transaction');
	SELECT dbgate.assign_role('k_s', 'k_stmt');
	SELECT dbgate.assign_role('k_t', 'k_tx');
});

my %budget = (statement => 'k_stmt', transaction => 'k_tx');
my %role = (statement => 'k_s', transaction => 'k_t');
my @scopes = ('statement', 'transaction');

# A superuser session (never gated) that holds advisory lock KEY until
# unlock() (sessions are short-lived: a background psql has a time limit
# for its whole life).
sub lock_key
{
	my ($key) = @_;
	my $s = DbgateTest::Session->new($node);
	$s->query("SELECT pg_advisory_lock($key)");
	$s->{key} = $key;
	return $s;
}

sub unlock
{
	my ($s) = @_;
	$s->query("SELECT pg_advisory_unlock($s->{key})");
	$s->quit;
	return;
}

# SQL with its statements in one Query message (psql's \;): the session
# does not wait for its client between them.
sub one_message
{
	my ($sql) = @_;
	$sql =~ s/;\s*(?=\S)/\\; /g;
	$sql =~ s/\s+/ /g;
	return $sql;
}

sub su_sql
{
	my ($sql) = @_;
	return $node->safe_psql('postgres', $sql);
}

# H's transaction: the slot is kept after it in both scopes
my $hold = 'BEGIN; UPDATE k_rows SET v = v + 1 WHERE id = 1;';
# W's: queued while H keeps the slot, then keeps it itself
my $wait = 'BEGIN; UPDATE k_rows SET v = v + 1 WHERE id = 2;';

sub state_of
{
	my ($s) = @_;
	return "SELECT state || ':' || coalesce(queue_position::text, '-')
	        FROM dbgate.backends WHERE pid = " . $s->pid;
}

sub column_of
{
	my ($b, $col) = @_;
	return $node->safe_psql('postgres',
		"SELECT $col FROM dbgate.status WHERE budget = '$b'");
}

sub gone_ok
{
	my ($s, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	return poll_ok($node,
		'SELECT count(*) FROM pg_stat_activity WHERE pid = ' . $s->pid,
		'0', "$what: H's backend is gone");
}

# Both sessions are there: H keeps the only slot idle in its transaction,
# W is queued.
sub kept_and_queued
{
	my ($b, $h, $w, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	is( backends_of($node, $b),
		$h->pid . ':idle in transaction:-,' . $w->pid . ':queued:1',
		"$what: H keeps the slot idle in its transaction, W is queued");
	counters_are($node, $b, { active => 1, queued => 1, admitted => 1 },
		"$what: one slot taken, one statement queued");
	is(column_of($b, 'idle_in_transaction'), '1',
		"$what: the kept slot counts in idle_in_transaction");
	return;
}

# A new H that keeps the slot with SQL (default $hold) and a new W queued
# behind it.  Returns (H, W).
sub start_case
{
	my ($scope, $what, $sql) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $b = $budget{$scope};
	my $h = DbgateTest::Session->new($node, user => $role{$scope});
	my $w = DbgateTest::Session->new($node, user => $role{$scope});
	my (undef, $err) = $h->query($sql // $hold);
	is($err, '', "$what: H's transaction runs");
	$w->send($wait);
	poll_ok($node, state_of($w), 'queued:1', "$what: W is queued");
	kept_and_queued($b, $h, $w, $what);
	return ($h, $w);
}

# W got the slot that H's transaction had: its UPDATE ran.  (With
# 'w_lock', see finish_case(): W then waits for the advisory lock.)
sub w_admitted
{
	my ($w, $what, $w_lock) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	if ($w_lock)
	{
		return poll_ok(
			$node,
			q{SELECT b.state || ':' || a.wait_event_type FROM dbgate.backends b
			  JOIN pg_stat_activity a USING (pid) WHERE pid = } . $w->pid,
			'active:Lock',
			"$what: W gets the slot, its UPDATE runs");
	}
	poll_ok($node, state_of($w), 'idle in transaction:-',
		"$what: W gets the slot and keeps it");
	my (undef, $err) = $w->result;
	is($err, '', "$what: W's UPDATE ran");
	return;
}

# H is done with (ended or gone); W still holds the slot: exactly one
# active, two admissions.  Then W commits and everything is back.
#
# With an idle_in_transaction_timeout, W must not be idle while it holds
# the slot: it waits for advisory lock 10 (locker 'w_lock') and commits at
# once when it has it.
sub finish_case
{
	my ($scope, $h, $w, $what, %p) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $b = $budget{$scope};
	my $err;
	is( backends_of($node, $b),
		$w->pid . ($p{w_lock} ? ':active:-' : ':idle in transaction:-'),
		"$what: only W holds a slot");
	counters_are($node, $b, { active => 1, admitted => 2, admitted_after_wait => 1 },
		"$what: H's slot was returned once, to W");
	if ($p{w_lock})
	{
		unlock($p{w_lock});
		(undef, $err) = $w->result;
	}
	else
	{
		(undef, $err) = $w->query('COMMIT');
	}
	is($err, '', "$what: W commits");
	counters_are($node, $b, { admitted => 2, admitted_after_wait => 1 },
		"$what: counters at the end");
	is(backends_of($node, $b), '', "$what: dbgate.backends is empty");
	is(column_of($b, 'idle_in_transaction'), '0', "$what: idle_in_transaction is 0");
	is(column_of($b, 'terminated_idle'), $p{terminated_idle} // 0,
		"$what: terminated_idle")
	  if !exists $p{terminated_idle} || defined $p{terminated_idle};
	$h->quit;
	$w->quit;
	gone_ok($h, $what);
	$node->safe_psql('postgres', "SELECT dbgate.reset_stats('$b')");
	return;
}

my ($h, $w, $out, $err, $state, $lk);

for my $scope (@scopes)
{
	my $b = $budget{$scope};
	my $what;

	# -----------------------------------------------------------------------
	# COMMIT and ROLLBACK
	for my $end ('COMMIT', 'ROLLBACK')
	{
		$what = "$scope, $end";
		($h, $w) = start_case($scope, $what);
		($out, $err) = $h->query($end);
		is($err, '', "$what: H ends its transaction");
		w_admitted($w, $what);
		finish_case($scope, $h, $w, $what);
	}

	# -----------------------------------------------------------------------
	# An error at execution: the transaction aborts and the slot is
	# returned at the error.  The aborted transaction takes no slot.
	$what = "$scope, error";
	($h, $w) = start_case($scope, $what);
	($out, $err, $state) = $h->query('SELECT 1 / (v - v) FROM k_rows WHERE id = 1');
	is($state, '22012', "$what: H's statement fails with division by zero");
	w_admitted($w, $what);
	($out, $err, $state) = $h->query('SELECT 1');
	is($state, '25P02', "$what: H is in an aborted transaction");
	($out, $err) = $h->query('ROLLBACK');
	is($err, '', "$what: H rolls back");
	finish_case($scope, $h, $w, $what);

	# -----------------------------------------------------------------------
	# COMMIT fails (a deferred unique constraint): the transaction aborts.
	$what = "$scope, COMMIT fails";
	($h, $w) = start_case($scope, $what,
		'BEGIN; INSERT INTO k_def VALUES (1), (1);');
	($out, $err, $state) = $h->query('COMMIT');
	is($state, '23505', "$what: H's COMMIT fails with a unique violation");
	w_admitted($w, $what);
	finish_case($scope, $h, $w, $what);

	# -----------------------------------------------------------------------
	# ROLLBACK TO SAVEPOINT, also after an error inside the savepoint, keeps
	# the slot; COMMIT returns it.
	$what = "$scope, savepoint";
	($h, $w) = start_case($scope, $what,
		'BEGIN; SAVEPOINT s; UPDATE k_rows SET v = v + 1 WHERE id = 1;');
	($out, $err) = $h->query('ROLLBACK TO SAVEPOINT s');
	is($err, '', "$what: H rolls back to the savepoint");
	kept_and_queued($b, $h, $w, "$what, after ROLLBACK TO SAVEPOINT");
	($out, $err, $state) = $h->query(
		'SAVEPOINT s2; UPDATE k_rows SET v = v + 1 WHERE id = 1; SELECT 1 / (v - v) FROM k_rows WHERE id = 1');
	is($state, '22012', "$what: an error inside a savepoint");
	kept_and_queued($b, $h, $w, "$what, after the error inside the savepoint");
	($out, $err) = $h->query('ROLLBACK TO SAVEPOINT s2; SELECT v FROM k_rows WHERE id = 3');
	is($err, '', "$what: H's next statement runs at once");
	kept_and_queued($b, $h, $w, "$what, after the next statement");
	($out, $err) = $h->query('COMMIT');
	is($err, '', "$what: H commits");
	w_admitted($w, $what);
	finish_case($scope, $h, $w, $what);

	# -----------------------------------------------------------------------
	# pg_cancel_backend while idle in the transaction: PostgreSQL ignores a
	# cancel while it waits for the client; the slot stays kept.
	$what = "$scope, cancel while idle";
	($h, $w) = start_case($scope, $what);
	$out = su_sql('SELECT pg_cancel_backend(' . $h->pid . ')');
	is($out, 't', "$what: H is signalled");
	($out, $err) = $h->query('SELECT v FROM k_rows WHERE id = 3');
	is($err, '', "$what: H's transaction goes on");
	kept_and_queued($b, $h, $w, "$what, after the next statement");
	($out, $err) = $h->query('COMMIT');
	is($err, '', "$what: H commits");
	w_admitted($w, $what);
	finish_case($scope, $h, $w, $what);

	# -----------------------------------------------------------------------
	# pg_cancel_backend while a statement runs under the kept slot: the
	# transaction aborts, the slot is returned.
	$what = "$scope, cancel while active";
	($h, $w) = start_case($scope, $what);
	$h->send('SELECT pg_sleep(600)');
	poll_ok($node,
		'SELECT wait_event FROM pg_stat_activity WHERE pid = ' . $h->pid,
		'PgSleep', "$what: H's statement runs");
	is( backends_of($node, $b),
		$h->pid . ':active:-,' . $w->pid . ':queued:1',
		"$what: H's statement runs under the kept slot");
	su_sql('SELECT pg_cancel_backend(' . $h->pid . ')');
	($out, $err, $state) = $h->result;
	is($state, '57014', "$what: H's statement is canceled");
	w_admitted($w, $what);
	($out, $err, $state) = $h->query('SELECT 1');
	is($state, '25P02', "$what: H is in an aborted transaction");
	$h->query('ROLLBACK');
	finish_case($scope, $h, $w, $what);

	# -----------------------------------------------------------------------
	# pg_terminate_backend while idle and while active.
	$what = "$scope, terminate while idle";
	($h, $w) = start_case($scope, $what);
	su_sql('SELECT pg_terminate_backend(' . $h->pid . ')');
	gone_ok($h, $what);
	w_admitted($w, $what);
	$h->send('SELECT 1');
	like($h->wait_exit,
		qr/FATAL:  57P01: terminating connection due to administrator command/,
		"$what: H's client sees the FATAL");
	finish_case($scope, $h, $w, $what);

	$what = "$scope, terminate while active";
	($h, $w) = start_case($scope, $what);
	$h->send('SELECT pg_sleep(600)');
	poll_ok($node,
		'SELECT wait_event FROM pg_stat_activity WHERE pid = ' . $h->pid,
		'PgSleep', "$what: H's statement runs");
	su_sql('SELECT pg_terminate_backend(' . $h->pid . ')');
	like($h->wait_exit, qr/FATAL:  57P01: terminating connection due to administrator command/,
		"$what: H ends with 57P01");
	gone_ok($h, $what);
	w_admitted($w, $what);
	finish_case($scope, $h, $w, $what);

	# -----------------------------------------------------------------------
	# PREPARE TRANSACTION returns the slot (the prepared transaction belongs
	# to no session); COMMIT PREPARED elsewhere changes no count.
	$what = "$scope, PREPARE TRANSACTION";
	($h, $w) = start_case($scope, $what);
	($out, $err) = $h->query("PREPARE TRANSACTION 'k_$scope'");
	is($err, '', "$what: H prepares its transaction");
	w_admitted($w, $what);
	su_sql("COMMIT PREPARED 'k_$scope'");
	is($node->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'),
		'0', "$what: no prepared transaction is left");
	finish_case($scope, $h, $w, $what);

	# -----------------------------------------------------------------------
	# A procedure that commits: the slot kept after its first UPDATE is
	# returned at its COMMIT and goes to W; the procedure's next UPDATE
	# queues behind W and runs when W commits.
	$what = "$scope, procedure with COMMIT";
	my $before = $node->safe_psql('postgres',
		'SELECT string_agg(v::text, \',\' ORDER BY id) FROM k_rows WHERE id IN (5, 6)');
	my ($v5, $v6) = split /,/, $before;
	$h = DbgateTest::Session->new($node, user => $role{$scope});
	$w = DbgateTest::Session->new($node, user => $role{$scope});
	$lk = lock_key(9);
	$h->send('CALL k_proc()');
	poll_ok($node,
		'SELECT wait_event_type FROM pg_stat_activity WHERE pid = ' . $h->pid,
		'Lock', "$what: H's procedure waits for the advisory lock");
	$w->send($wait);
	poll_ok($node, state_of($w), 'queued:1', "$what: W is queued");
	counters_are($node, $b, { active => 1, queued => 1, admitted => 1 },
		"$what: the procedure keeps the slot after its UPDATE");
	unlock($lk);
	w_admitted($w, $what);
	poll_ok($node, state_of($h), 'queued:1',
		"$what: the procedure's next UPDATE queues behind W");
	counters_are(
		$node, $b,
		{ active => 1, queued => 1, admitted => 2, admitted_after_wait => 1 },
		"$what: the slot was returned at the procedure's COMMIT");
	($out, $err) = $w->query('COMMIT');
	is($err, '', "$what: W commits");
	($out, $err) = $h->result;
	is($err, '', "$what: the procedure finishes");
	is( $node->safe_psql('postgres',
			'SELECT string_agg(v::text, \',\' ORDER BY id) FROM k_rows WHERE id IN (5, 6)'),
		($v5 + 1) . ',' . ($v6 + 1),
		"$what: both UPDATEs of the procedure are committed");
	counters_are($node, $b, { admitted => 3, admitted_after_wait => 2 },
		"$what: counters at the end");
	is(backends_of($node, $b), '', "$what: dbgate.backends is empty");
	$h->quit;
	$w->quit;
	$node->safe_psql('postgres', "SELECT dbgate.reset_stats('$b')");

	# -----------------------------------------------------------------------
	# The client goes away while H is idle in its transaction: killed, or
	# closing its connection.
	for my $how ('killed', 'disconnects')
	{
		$what = "$scope, client $how";
		($h, $w) = start_case($scope, $what);
		if ($how eq 'killed')
		{
			$h->kill_client;
		}
		else
		{
			$h->quit;
		}
		gone_ok($h, $what);
		w_admitted($w, $what);
		finish_case($scope, $h, $w, $what);
	}
}

# ---------------------------------------------------------------------------
# Scope 'transaction', read-only: the first SELECT takes the slot and it is
# kept; the next SELECT runs at once; COMMIT returns it.
{
	my $what = 'transaction, read-only';
	($h, $w) = start_case('transaction', $what, 'BEGIN; SELECT 1;');
	($out, $err) = $h->query('SELECT 2');
	is("$out|$err", '2|', "$what: H's next SELECT runs at once");
	kept_and_queued('k_tx', $h, $w, "$what, after the next SELECT");
	($out, $err) = $h->query('COMMIT');
	is($err, '', "$what: H commits");
	w_admitted($w, $what);
	finish_case('transaction', $h, $w, $what);
}

# ---------------------------------------------------------------------------
# idle_in_transaction_timeout.  H keeps the slot, then waits for advisory
# lock 9 (so that W can queue before H is idle); once H is idle the
# budget's timeout ends it with PostgreSQL's own FATAL.  SHOW shows the
# session's own setting throughout.

# Runs H's transaction with SQL, then has it wait for advisory lock 9 and
# W queue, and lets H go on with the statements in 'after' (if any) and go
# idle.  W, once admitted, waits for advisory lock 10 (see finish_case()).
# Each session's statements are one message: H is idle in its transaction
# (where the timeout runs) only after all of them, W never before its
# COMMIT.  Returns (H, W, H's output, H's errors, the locker of lock 10).
sub start_idle_case
{
	my ($scope, $what, $sql, %p) = @_;
	my $session_sql = $p{session};
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $b = $budget{$scope};
	my $hs = DbgateTest::Session->new($node, user => $role{$scope});
	my $ws = DbgateTest::Session->new($node, user => $role{$scope});
	if (defined $session_sql)
	{
		my (undef, $e) = $hs->query($session_sql);
		is($e, '', "$what: H's session setting");
	}
	my $lk = lock_key(9);
	$hs->send(one_message($sql . q{; SELECT 'locked' FROM pg_advisory_xact_lock_shared(9)}
		  . (defined $p{after} ? "; $p{after}" : '')));
	poll_ok($node,
		'SELECT wait_event_type FROM pg_stat_activity WHERE pid = ' . $hs->pid,
		'Lock', "$what: H waits for the advisory lock");
	my $lk10 = lock_key(10);
	$ws->send(one_message("$wait; SELECT pg_advisory_xact_lock_shared(10); COMMIT"));
	poll_ok($node, state_of($ws), 'queued:1', "$what: W is queued");
	is( backends_of($node, $b),
		$hs->pid . ':active:-,' . $ws->pid . ':queued:1',
		"$what: H holds the slot, W is queued");
	unlock($lk);
	my ($o, $e) = $hs->result;
	is($e, '', "$what: H's statements ran") unless $p{error};
	return ($hs, $ws, $o, $e, $lk10);
}

# H is ended by an idle-in-transaction timeout: its client and the server
# log say so, W gets the slot.
sub idle_timeout_fires
{
	my ($h, $w, $what, $log_offset) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	gone_ok($h, $what);
	w_admitted($w, $what, 1);
	$h->send('SELECT 1');
	like(
		$h->wait_exit,
		qr/FATAL:  25P03: terminating connection due to idle-in-transaction timeout/,
		"$what: H's client sees the FATAL");
	ok( $node->log_contains(
			qr/\[${\$h->pid}\][^\n]*FATAL:  terminating connection due to idle-in-transaction timeout/,
			$log_offset),
		"$what: the server log has PostgreSQL's message");
	return;
}

for my $scope (@scopes)
{
	my $b = $budget{$scope};
	$node->safe_psql('postgres',
		"SELECT dbgate.alter_budget('$b', idle_in_transaction_timeout => '300ms')");

	# the session's own setting is 0 (no timeout)
	my $what = "$scope, idle_in_transaction_timeout";
	my $log_offset = -s $node->logfile;
	my $first = $scope eq 'statement' ? 'UPDATE k_rows SET v = v + 1 WHERE id = 1' : 'SELECT 1';
	my $show = q{SHOW idle_in_transaction_session_timeout;
		SELECT current_setting('idle_in_transaction_session_timeout')};
	($h, $w, $out, undef, $lk) = start_idle_case($scope, $what, "BEGIN; $first; $show");
	is($out, ($scope eq 'statement' ? '' : "1\n") . "0\n0\nlocked",
		"$what: SHOW and current_setting() show the session's own value");
	idle_timeout_fires($h, $w, $what, $log_offset);
	finish_case($scope, $h, $w, $what, terminated_idle => 1, w_lock => $lk);

	# the session's own setting is looser (set before the transaction, or
	# inside it while the slot is kept): the budget's applies, SHOW shows
	# the session's
	$what = "$scope, idle_in_transaction_timeout, session setting 1h";
	$log_offset = -s $node->logfile;
	if ($scope eq 'statement')
	{
		($h, $w, $out, undef, $lk) = start_idle_case($scope, $what,
			"BEGIN; $first; $show",
			session => q{SET idle_in_transaction_session_timeout = '1h'});
	}
	else
	{
		($h, $w, $out, undef, $lk) = start_idle_case($scope, $what,
			"BEGIN; $first; SET idle_in_transaction_session_timeout = '1h'; $show");
	}
	is($out, ($scope eq 'statement' ? '' : "1\n") . "1h\n1h\nlocked",
		"$what: SHOW and current_setting() show the session's own value");
	idle_timeout_fires($h, $w, $what, $log_offset);
	finish_case($scope, $h, $w, $what, terminated_idle => 1, w_lock => $lk);
}

# The session's own setting is tighter: it stays in force (PostgreSQL's own
# timeout ends the session; not counted in terminated_idle).
{
	my $what = 'statement, session idle_in_transaction_session_timeout tighter';
	$node->safe_psql('postgres',
		"SELECT dbgate.alter_budget('k_stmt', idle_in_transaction_timeout => '1h')");
	my $log_offset = -s $node->logfile;
	($h, $w, $out, undef, $lk) = start_idle_case('statement', $what,
		'BEGIN; UPDATE k_rows SET v = v + 1 WHERE id = 1; SHOW idle_in_transaction_session_timeout',
		session => q{SET idle_in_transaction_session_timeout = '500ms'});
	is($out, "500ms\nlocked", "$what: SHOW shows the session's own value");
	idle_timeout_fires($h, $w, $what, $log_offset);
	finish_case('statement', $h, $w, $what, terminated_idle => 0, w_lock => $lk);
}

# No kept slot, no budget timeout: a read-only transaction of scope
# 'statement', and a transaction whose slot was returned at an error, stay
# idle three times the budget's timeout (by the server's clock) and go on.
{
	my $what = 'statement, idle_in_transaction_timeout without a kept slot';
	$node->safe_psql('postgres',
		"SELECT dbgate.alter_budget('k_stmt', idle_in_transaction_timeout => '300ms')");
	my $r = DbgateTest::Session->new($node, user => 'k_s');
	my $e = DbgateTest::Session->new($node, user => 'k_s');
	($out, $err) = $r->query('BEGIN; SELECT 1');
	is("$out|$err", '1|', "$what: read-only transaction runs");
	($out, $err, $state) = $e->query(one_message(
		'BEGIN; UPDATE k_rows SET v = v + 1 WHERE id = 1; SELECT 1 / (v - v) FROM k_rows WHERE id = 1'));
	is($state, '22012', "$what: the other transaction fails");
	is(backends_of($node, 'k_stmt'), '', "$what: no slot is held");
	# a timeout that would fire must be given the time to
	poll_ok($node,
		q{SELECT count(*) FROM pg_stat_activity
		   WHERE state LIKE 'idle in transaction%'
		     AND clock_timestamp() - state_change >= interval '900 ms'
		     AND pid IN (} . $r->pid . ', ' . $e->pid . ')',
		'2', "$what: both have been idle three times the budget's timeout");
	($out, $err) = $r->query('SELECT 2; COMMIT');
	is("$out|$err", '2|', "$what: the read-only transaction is still there");
	($out, $err) = $e->query('ROLLBACK');
	is($err, '', "$what: the aborted transaction is still there");
	counters_are($node, 'k_stmt', { admitted => 3 }, "$what: counters");
	is(column_of('k_stmt', 'terminated_idle'), '0',
		"$what: nobody was terminated");
	$_->quit for ($r, $e);
	$node->safe_psql('postgres',
		q{SELECT dbgate.alter_budget('k_stmt', idle_in_transaction_timeout => '0');
		  SELECT dbgate.alter_budget('k_tx', idle_in_transaction_timeout => '0');
		  SELECT dbgate.reset_stats()});
}

# A subtransaction abort that undoes a SET of
# idle_in_transaction_session_timeout (ROLLBACK TO SAVEPOINT, or an error
# inside the savepoint) as the last thing before H goes idle: the budget's
# timeout must still apply.  The session's own setting is 3s, so that H is
# ended either way; terminated_idle says whose timeout it was.
for my $after ('ROLLBACK TO SAVEPOINT a', 'SELECT 1 / (v - v) FROM k_rows WHERE id = 1')
{
	my $what = "statement, idle_in_transaction_timeout after a savepoint's SET is undone by $after";
	$node->safe_psql('postgres',
		q{SELECT dbgate.alter_budget('k_stmt', idle_in_transaction_timeout => '300ms');
		  SELECT dbgate.reset_stats('k_stmt')});
	my $log_offset = -s $node->logfile;
	($h, $w, $out, $err, $lk) = start_idle_case('statement', $what,
		q{BEGIN; UPDATE k_rows SET v = v + 1 WHERE id = 1;
		  SAVEPOINT a; SET idle_in_transaction_session_timeout = '1h'},
		session => q{SET idle_in_transaction_session_timeout = '3s'},
		after => $after,
		error => 1);
	is(sqlstate($err), ($after =~ /ROLLBACK/ ? '' : '22012'), "$what: H's statements ran");
	idle_timeout_fires($h, $w, $what, $log_offset);
	is(column_of('k_stmt', 'terminated_idle'), '1',
		"$what: ended by the budget's timeout");
	finish_case('statement', $h, $w, $what, terminated_idle => undef, w_lock => $lk);
}
# Inside a DO block the slot is kept after a write while the block goes on:
# what PL/pgSQL evaluates without the executor must still see, and set, the
# session's own setting.
{
	my $what = 'statement, idle_in_transaction_session_timeout inside a DO block';
	my $s = DbgateTest::Session->new($node, user => 'k_s');
	($out, $err) = $s->query(
		q{DO $$ BEGIN UPDATE k_rows SET v = v + 1 WHERE id = 1;
		  RAISE NOTICE 'seen: %', current_setting('idle_in_transaction_session_timeout');
		  END $$});
	like($err, qr/NOTICE:  00000: seen: 0\n/,
		"$what: current_setting() shows the session's own value");
	($out, $err) = $s->query(
		q{DO $$ DECLARE x text; BEGIN UPDATE k_rows SET v = v + 1 WHERE id = 1;
		  x := set_config('idle_in_transaction_session_timeout', '1h', true);
		  END $$;
		  SHOW idle_in_transaction_session_timeout});
	is("$out|$err", '0|',
		"$what: a local set_config() there leaves the session's own value");
	is(backends_of($node, 'k_stmt'), '', "$what: no slot is held afterwards");
	$s->quit;
}
$node->safe_psql('postgres',
	q{SELECT dbgate.alter_budget('k_stmt', idle_in_transaction_timeout => '0');
	  SELECT dbgate.reset_stats()});

# ---------------------------------------------------------------------------
# dbgate.enabled = off while H keeps the slot and W is queued: W is let
# through (without a slot), H's slot is returned at its COMMIT, once.

sub set_enabled
{
	my ($value) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	$node->safe_psql('postgres',
		"ALTER SYSTEM SET dbgate.enabled = $value; SELECT pg_reload_conf()");
	poll_ok($node, 'SHOW dbgate.enabled', $value, "dbgate.enabled is $value");
	return;
}

for my $scope (@scopes)
{
	my $b = $budget{$scope};
	my $what = "$scope, dbgate.enabled = off";
	($h, $w) = start_case($scope, $what);
	set_enabled('off');
	($out, $err) = $w->result;
	is($err, '', "$what: W is let through");
	is(backends_of($node, $b), $h->pid . ':idle in transaction:-',
		"$what: H still keeps its slot, W holds none");
	counters_are($node, $b, { active => 1, admitted => 2, admitted_after_wait => 1 },
		"$what: W counted as admitted after waiting");
	($out, $err) = $h->query('SELECT v FROM k_rows WHERE id = 3');
	is($err, '', "$what: H's next statement runs");
	($out, $err) = $h->query('COMMIT');
	is($err, '', "$what: H commits");
	counters_are($node, $b, { admitted => 2, admitted_after_wait => 1 },
		"$what: H's slot returned once");
	($out, $err) = $w->query('COMMIT');
	is($err, '', "$what: W commits");
	counters_are($node, $b, { admitted => 2, admitted_after_wait => 1 },
		"$what: counters at the end");
	is(backends_of($node, $b), '', "$what: dbgate.backends is empty");
	$_->quit for ($h, $w);
	set_enabled('on');
	$node->safe_psql('postgres', "SELECT dbgate.reset_stats('$b')");
}

# ---------------------------------------------------------------------------
# The budget is dropped while H keeps its slot: W goes on ungated, H goes
# on, and its COMMIT changes nothing in a budget created later under the
# same name (where X keeps the slot and Y is queued).

for my $scope (@scopes)
{
	my $what = "$scope, budget dropped";
	my $create = "SELECT dbgate.create_budget('k_drop', 1, 5, scope => '$scope');
		SELECT dbgate.assign_role('k_d', 'k_drop')";
	$node->safe_psql('postgres', $create);
	$h = DbgateTest::Session->new($node, user => 'k_d');
	$w = DbgateTest::Session->new($node, user => 'k_d');
	($out, $err) = $h->query($hold);
	is($err, '', "$what: H's transaction runs");
	$w->send($wait);
	poll_ok($node, state_of($w), 'queued:1', "$what: W is queued");
	kept_and_queued('k_drop', $h, $w, $what);
	$node->safe_psql('postgres', q{SELECT dbgate.drop_budget('k_drop', force => true)});
	($out, $err) = $w->result;
	is($err, '', "$what: W goes on");
	$node->safe_psql('postgres', $create);
	my $x = DbgateTest::Session->new($node, user => 'k_d');
	my $y = DbgateTest::Session->new($node, user => 'k_d');
	($out, $err) = $x->query('BEGIN; UPDATE k_rows SET v = v + 1 WHERE id = 3');
	is($err, '', "$what: X keeps the slot of the new budget");
	$y->send('BEGIN; UPDATE k_rows SET v = v + 1 WHERE id = 4');
	poll_ok($node, state_of($y), 'queued:1', "$what: Y is queued in the new budget");
	($out, $err) = $h->query('SELECT v FROM k_rows WHERE id = 1');
	is($err, '', "$what: H goes on");
	($out, $err) = $h->query('COMMIT');
	is($err, '', "$what: H commits");
	($out, $err) = $w->query('COMMIT');
	is($err, '', "$what: W commits");
	$_->quit for ($h, $w);
	gone_ok($h, $what);
	poll_ok($node, 'SELECT count(*) FROM pg_stat_activity WHERE pid = ' . $w->pid,
		'0', "$what: W's backend is gone");
	is(backends_of($node, 'k_drop'), $x->pid . ':idle in transaction:-,' . $y->pid . ':queued:1',
		"$what: X still keeps the new budget's slot, Y is still queued");
	counters_are($node, 'k_drop', { active => 1, queued => 1, admitted => 1 },
		"$what: H's COMMIT and exit changed nothing in the new budget");
	$x->query('COMMIT');
	poll_ok($node, state_of($y), 'idle in transaction:-', "$what: Y gets X's slot");
	$y->result;
	$y->query('COMMIT');
	counters_are($node, 'k_drop', { admitted => 2, admitted_after_wait => 1 },
		"$what: counters of the new budget at the end");
	is(backends_of($node, 'k_drop'), '', "$what: dbgate.backends is empty");
	$_->quit for ($x, $y);
	$node->safe_psql('postgres', q{SELECT dbgate.drop_budget('k_drop', force => true)});
}

# ---------------------------------------------------------------------------
# Lock safety with a kept slot: T2 keeps the slot and runs a utility command
# (LOCK TABLE) that waits for a lock of T1, whose transaction took no
# transaction ID and whose next statement queues behind T2's slot.  T1 must
# be admitted as a lock holder (no queue timeout: if it is not, it is
# canceled when the poll gives up, and the checks fail).
{
	my $what = 'lock safety, kept slot';
	$node->safe_psql('postgres',
		q{SELECT dbgate.create_budget('k_lock', 1, 5);
		  SELECT dbgate.assign_role('k_d', 'k_lock')});
	my $t1 = DbgateTest::Session->new($node, user => 'k_d');
	my $t2 = DbgateTest::Session->new($node, user => 'k_d');
	($out, $err) = $t1->query('BEGIN; SELECT count(*) FROM k_rows');
	is("$out|$err", '6|', "$what: T1 reads the table (its slot is returned)");
	($out, $err) = $t2->query('BEGIN; UPDATE k_rows SET v = v + 1 WHERE id = 4');
	is($err, '', "$what: T2 keeps the slot");
	$t2->send('LOCK TABLE k_rows IN ACCESS EXCLUSIVE MODE');
	poll_ok($node,
		'SELECT wait_event_type FROM pg_stat_activity WHERE pid = ' . $t2->pid,
		'Lock', "$what: T2's LOCK TABLE waits for T1");
	is(backends_of($node, 'k_lock'), $t2->pid . ':active:-',
		"$what: T2 shows as active while its LOCK TABLE runs");
	$t1->send('SELECT 1');
	poll_until($node,
		q{SELECT admitted_lock_holder FROM dbgate.status WHERE budget = 'k_lock'}, '1')
	  or su_sql('SELECT pg_cancel_backend(' . $t1->pid . ')');
	($out, $err, $state) = $t1->result;
	is("$out|$state", '1|', "$what: T1's statement is admitted as a lock holder");
	counters_are(
		$node, 'k_lock',
		{
			active => 1,
			admitted => 3,
			admitted_after_wait => 1,
			admitted_lock_holder => 1
		},
		"$what: counted in admitted_lock_holder");
	$t1->query('ROLLBACK');
	($out, $err) = $t2->result;
	is($err, '', "$what: T2's LOCK TABLE is granted once T1 ends");
	($out, $err) = $t2->query('ROLLBACK');
	is($err, '', "$what: T2 rolls back");
	is($node->safe_psql('postgres',
			q{SELECT active || ':' || queued FROM dbgate.status WHERE budget = 'k_lock'}),
		'0:0', "$what: active and queued are 0 at the end");
	is(backends_of($node, 'k_lock'), '', "$what: dbgate.backends is empty");
	$_->quit for ($t1, $t2);
}

is($node->safe_psql('postgres', 'SELECT count(*) FROM dbgate.backends'),
	'0', 'no backend holds or waits for a slot at the end');
is($node->safe_psql('postgres', 'SELECT sum(active) + sum(queued) FROM dbgate.status'),
	'0', 'no slot is taken at the end');

$node->stop;
done_testing();
