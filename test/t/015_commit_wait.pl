# A COMMIT (or PREPARE TRANSACTION, or an implicit transaction's single
# statement) that waits for a synchronous standby returns its slot when the
# commit starts, not when the standby has confirmed it: it holds no slot
# while it waits, the budget's other sessions run meanwhile, and the
# counters stay exact when the wait is canceled or the session terminated.
# The standby named in synchronous_standby_names never connects, so a
# session with synchronous_commit = on waits until it is canceled
# (PostgreSQL then warns that the transaction committed locally).  A commit
# that waits for no standby (synchronous_commit = local) keeps its slot
# through the local WAL flush, which commit_delay stretches to 100 ms here
# (it needs fsync on).  The queue timeout only makes a regression fail
# quickly.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DbgateTest;

my $node = dbgate_node(
	'commit_wait', conf => q{
synchronous_standby_names = 'dbgate_no_such_standby'
synchronous_commit = local
wal_level = replica
max_wal_senders = 2
max_prepared_transactions = 4
fsync = on
commit_siblings = 0
});
$node->safe_psql(
	'postgres', q{
	CREATE ROLE cw_user LOGIN;
	CREATE TABLE cw_rows (id int PRIMARY KEY, v int NOT NULL);
	INSERT INTO cw_rows VALUES (1, 0), (2, 0);
	GRANT SELECT, UPDATE ON cw_rows TO cw_user;
	SELECT dbgate.create_budget('cw_stmt', 1, 4, queue_timeout => '5s');
	SELECT dbgate.create_budget('cw_txn', 1, 4, queue_timeout => '5s',
	                            scope => 'transaction');
	CREATE PROCEDURE cw_proc() LANGUAGE plpgsql AS $$
	BEGIN
		UPDATE cw_rows SET v = v + 1 WHERE id = 1;
		COMMIT;
	END $$;
	GRANT EXECUTE ON PROCEDURE cw_proc() TO cw_user;
	-- what dbgate.backends shows for backend p while its COMMIT runs
	CREATE FUNCTION cw_watch(p int) RETURNS text LANGUAGE plpgsql AS $$
	DECLARE
		s text;
	BEGIN
		FOR i IN 1..10000 LOOP
			PERFORM pg_stat_clear_snapshot();
			SELECT coalesce(b.state, 'no slot') INTO s
			  FROM pg_stat_activity a
			  LEFT JOIN dbgate.backends b ON b.pid = a.pid
			 WHERE a.pid = p AND a.state = 'active' AND a.query ILIKE 'COMMIT%';
			-- (pg_stat_activity shows the COMMIT a moment before the commit
			-- starts: until then the slot is still held idle)
			IF FOUND AND s <> 'idle in transaction' THEN
				RETURN s;
			END IF;
			PERFORM pg_sleep(0.0005);
		END LOOP;
		RETURN 'commit not seen';
	END $$;
});

# watch(WATCHER, PID): start cw_watch(PID) in session WATCHER and return
# once it runs (it looks for PID's COMMIT for 5 s or more), so that the
# COMMIT cannot end (its flush takes 100 ms) before the watcher looks: on a
# busy machine a statement sent first may start later than one sent after
# it.  Called before the transaction begins: the wait for the watcher
# must not count as the session's idle time (the timeout of 30 ms below).
sub watch
{
	my ($w, $pid) = @_;
	$w->send("SELECT cw_watch($pid)");
	my $wpid = $w->pid;
	$node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE pid = $wpid
		    AND state = 'active' AND query LIKE 'SELECT cw_watch%'")
	  or die "the watcher did not start";
	return;
}

# wait_case(NAME, BUDGET, SQL, END): SQL makes the session wait for the
# standby at its commit; END ('cancel' or 'terminate') ends the wait.
sub wait_case
{
	my ($name, $budget, $sql, $end) = @_;
	$node->safe_psql('postgres', qq{
		SELECT dbgate.assign_role('cw_user', '$budget');
		SELECT dbgate.reset_stats('$budget');
	});
	my $before = $node->safe_psql('postgres', 'SELECT sum(v) FROM cw_rows');
	my $h = DbgateTest::Session->new($node, user => 'cw_user');
	my $pid = $h->pid;
	$h->query('SET synchronous_commit = on');
	$h->send($sql);
	poll_ok($node,
		"SELECT wait_event FROM pg_stat_activity WHERE pid = $pid",
		'SyncRep', "$name: the commit waits for the standby");
	is($node->safe_psql('postgres', "SELECT count(*) FROM dbgate.backends WHERE pid = $pid"),
		'0', "$name: the waiting commit holds no slot");
	counters_are($node, $budget, { admitted => 1 },
		"$name: the slot is free while the commit waits");

	# another session of the budget runs at once, without queueing
	my ($state, $out, $err) = run_sql($node,
		'SELECT v FROM cw_rows WHERE id = 2', user => 'cw_user');
	is($state, '', "$name: another session runs meanwhile");
	counters_are($node, $budget, { admitted => 2 },
		"$name: admitted at once, nothing queued");

	if ($end eq 'cancel')
	{
		$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
		my (undef, $herr) = $h->result;
		like($herr, qr/committed locally/,
			"$name: cancel ends the wait, the transaction committed locally");
		$h->quit;
	}
	else
	{
		$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
		$h->wait_exit;
		poll_ok($node,
			"SELECT count(*) FROM pg_stat_activity WHERE pid = $pid",
			'0', "$name: terminate ends the session");
	}
	is($node->safe_psql('postgres', 'SELECT sum(v) FROM cw_rows'),
		$before + 1, "$name: the update is committed");
	counters_are($node, $budget, { admitted => 2 },
		"$name: counters exact after the wait ended");
	is($node->safe_psql('postgres', "SELECT count(*) FROM dbgate.backends"),
		'0', "$name: no backend holds or waits for a slot");
	return;
}

wait_case('statement scope, COMMIT', 'cw_stmt',
	'BEGIN; UPDATE cw_rows SET v = v + 1 WHERE id = 1; COMMIT;', 'cancel');
wait_case('statement scope, single statement', 'cw_stmt',
	'UPDATE cw_rows SET v = v + 1 WHERE id = 1;', 'cancel');
wait_case('transaction scope, COMMIT', 'cw_txn',
	'BEGIN; SELECT 1; UPDATE cw_rows SET v = v + 1 WHERE id = 1; COMMIT;', 'terminate');
wait_case('statement scope, procedure that commits', 'cw_stmt',
	'CALL cw_proc();', 'cancel');

# PREPARE TRANSACTION waits for the standby as well (its record must be
# confirmed before the prepared transaction exists): no slot meanwhile
{
	$node->safe_psql('postgres', q{
		SELECT dbgate.assign_role('cw_user', 'cw_stmt');
		SELECT dbgate.reset_stats('cw_stmt');
	});
	my $h = DbgateTest::Session->new($node, user => 'cw_user');
	my $pid = $h->pid;
	$h->query('SET synchronous_commit = on');
	$h->send(q{BEGIN; UPDATE cw_rows SET v = v + 1 WHERE id = 2;
		PREPARE TRANSACTION 'cw_gid';});
	poll_ok($node,
		"SELECT wait_event FROM pg_stat_activity WHERE pid = $pid",
		'SyncRep', 'prepare: PREPARE TRANSACTION waits for the standby');
	counters_are($node, 'cw_stmt', { admitted => 1 },
		'prepare: the slot is free while it waits');
	$node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
	$h->result;
	$h->quit;
	$node->safe_psql('postgres', "COMMIT PREPARED 'cw_gid'");
	counters_are($node, 'cw_stmt', { admitted => 1 },
		'prepare: counters exact after COMMIT PREPARED');
}

# A commit that waits for no standby keeps its slot through the local WAL
# flush, and returns it once, when the commit is done
foreach my $budget ('cw_stmt', 'cw_txn')
{
	$node->safe_psql('postgres', qq{
		SELECT dbgate.assign_role('cw_user', '$budget');
		SELECT dbgate.reset_stats('$budget');
		ALTER ROLE cw_user SET commit_delay = 100000;
	});
	my $h = DbgateTest::Session->new($node, user => 'cw_user');
	my $pid = $h->pid;
	# the watcher is connected and looking before the commit starts: the
	# flush takes 100 ms, less than starting a client may take
	my $watcher = DbgateTest::Session->new($node);
	my ($sc) = $h->query('SHOW synchronous_commit');
	is($sc, 'local',
		"$budget, local commit: no standby is waited for");
	watch($watcher, $pid);
	$h->query('BEGIN');
	$h->query('UPDATE cw_rows SET v = v + 1 WHERE id = 1');
	$h->send('COMMIT');
	is(($watcher->result)[0], 'active',
		"$budget, local commit: the slot is held while the commit flushes");
	my (undef, $herr) = $h->result;
	is($herr, '', "$budget, local commit: COMMIT succeeds");
	counters_are($node, $budget, { admitted => 1 },
		"$budget, local commit: the slot is returned when the commit is done");

	# the idle timeout does not run while the commit flushes: the session
	# is committing, not idle
	$node->safe_psql('postgres', qq{
		SELECT dbgate.alter_budget('$budget',
		                           idle_in_transaction_timeout => '30ms')});
	watch($watcher, $pid);
	$h->query('BEGIN');
	$h->query('UPDATE cw_rows SET v = v + 1 WHERE id = 1');
	$h->send('COMMIT');
	is(($watcher->result)[0], 'active',
		"$budget, local commit with idle timeout: shown active while it flushes");
	(undef, $herr) = $h->result;
	is($herr, '', "$budget, local commit with idle timeout: COMMIT succeeds");
	my ($one, $err1) = $h->query('SELECT 1');
	is("$one|$err1", '1|',
		"$budget, local commit with idle timeout: the session lives on");
	is($node->safe_psql('postgres',
			"SELECT terminated_idle FROM dbgate.status WHERE budget = '$budget'"),
		'0', "$budget, local commit with idle timeout: nothing terminated");
	$watcher->quit;
	$h->quit;
	$node->safe_psql('postgres', qq{
		ALTER ROLE cw_user RESET commit_delay;
		SELECT dbgate.alter_budget('$budget',
		                           idle_in_transaction_timeout => '0')});
}

$node->stop;
done_testing();
