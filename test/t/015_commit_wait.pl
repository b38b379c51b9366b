# A COMMIT (or PREPARE TRANSACTION, or an implicit transaction's single
# statement) that waits for a synchronous standby returns its slot when the
# commit starts, not when the standby has confirmed it: it holds no slot
# while it waits, the budget's other sessions run meanwhile, and the
# counters stay exact when the wait is canceled or the session terminated.
# The standby named in synchronous_standby_names never connects, so a
# session with synchronous_commit = on waits until it is canceled
# (PostgreSQL then warns that the transaction committed locally).  A commit
# that waits for no standby (synchronous_commit = local) keeps its slot
# until it is done: the test holds such a commit after its start (its
# NOTIFY waits at commit for the lock that serializes NOTIFY commits, which
# a superuser's commit holds while it waits for the standby), sees the slot
# held and a statement of the budget queued meanwhile, then lets it go; the
# queued statement sees the commit.  The queue timeout only makes a
# regression of the commits that wait for the standby fail quickly; the
# local commits run without one.
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
});
$node->safe_psql(
	'postgres', q{
	CREATE ROLE cw_user LOGIN;
	CREATE TABLE cw_rows (id int PRIMARY KEY, v int NOT NULL);
	INSERT INTO cw_rows VALUES (1, 0), (2, 0);
	CREATE TABLE cw_hold (n int);
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
});

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

# A commit that waits for no standby keeps its slot until it is done, and
# returns it once.  H's transaction (one message, so that H is never idle
# in it: see the idle timeout below) updates a row, sends a NOTIFY and
# commits; the commit starts (the slot goes to the commit) and then waits
# for the lock that PostgreSQL takes for a commit with NOTIFY, which the
# holder of the lock keeps: a superuser whose NOTIFY's commit waits for the
# standby that never comes.  While H's commit waits, the slot is held and
# W, a statement of the budget, is queued; the holder's wait is canceled,
# H's commit ends, and W, admitted then, sees H's update.

# hold_notify(): a superuser session whose commit holds the NOTIFY lock
# (it writes a row: a commit that wrote no WAL before its commit record
# does not wait for the standby)
sub hold_notify
{
	my $x = DbgateTest::Session->new($node);
	$x->query('SET synchronous_commit = on');
	$x->send('BEGIN; INSERT INTO cw_hold VALUES (1); NOTIFY cw_hold; COMMIT;');
	poll_ok($node,
		'SELECT wait_event FROM pg_stat_activity WHERE pid = ' . $x->pid,
		'SyncRep', 'the holder of the NOTIFY lock waits for the standby');
	return $x;
}

# Which lock pid waits for ('' when none): the NOTIFY lock is the object
# lock on database 0 of pg_database.
sub waits_for
{
	my ($pid) = @_;
	return $node->safe_psql('postgres',
		"SELECT coalesce(string_agg(locktype || ':' || classid::regclass || ':' || objid, ','), '')
		   FROM pg_locks WHERE NOT granted AND pid = $pid");
}

foreach my $budget ('cw_stmt', 'cw_txn')
{
	foreach my $idle ('0', '30ms')
	{
		my $what = "$budget, local commit"
		  . ($idle eq '0' ? '' : " with idle timeout $idle");
		$node->safe_psql('postgres', qq{
			SELECT dbgate.assign_role('cw_user', '$budget');
			SELECT dbgate.reset_stats('$budget');
			SELECT dbgate.alter_budget('$budget', queue_timeout => '0',
			                           idle_in_transaction_timeout => '$idle');
		});
		my $h = DbgateTest::Session->new($node, user => 'cw_user');
		my $w = DbgateTest::Session->new($node, user => 'cw_user');
		my $pid = $h->pid;
		my ($sc) = $h->query('SHOW synchronous_commit');
		is($sc, 'local', "$what: no standby is waited for");
		my $v = $node->safe_psql('postgres', 'SELECT v FROM cw_rows WHERE id = 1');
		my $x = hold_notify();

		$h->send('BEGIN\; UPDATE cw_rows SET v = v + 1 WHERE id = 1\; NOTIFY cw_h\; COMMIT');
		poll_ok($node, "SELECT state FROM pg_stat_activity WHERE pid = $pid
			AND EXISTS (SELECT FROM pg_locks WHERE pid = $pid AND NOT granted)",
			'active', "$what: the commit has started and waits");
		is(waits_for($pid), 'object:pg_database:0',
			"$what: for the NOTIFY lock");
		is($node->safe_psql('postgres', "SELECT state FROM dbgate.backends WHERE pid = $pid"),
			'active', "$what: the slot is held while the commit runs");
		$w->send('SELECT v FROM cw_rows WHERE id = 1');
		poll_ok($node, 'SELECT state FROM dbgate.backends WHERE pid = ' . $w->pid,
			'queued', "$what: another statement of the budget queues meanwhile");
		if ($idle ne '0')
		{
			# the idle timeout does not run while the commit waits: the
			# session is committing, not idle
			poll_ok($node, qq{SELECT clock_timestamp() - waitstart > interval '$idle'
				FROM pg_locks WHERE NOT granted AND pid = $pid},
				't', "$what: the commit has waited longer than the idle timeout");
			is($node->safe_psql('postgres',
					"SELECT count(*) FROM pg_stat_activity WHERE pid = $pid"),
				'1', "$what: the session is still there");
		}
		counters_are($node, $budget, { active => 1, queued => 1, admitted => 1 },
			"$what: one slot taken, by the commit");

		$node->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $x->pid . ')');
		my (undef, $xerr) = $x->result;
		like($xerr, qr/committed locally/, "$what: the holder of the NOTIFY lock lets go");
		my (undef, $herr) = $h->result;
		is($herr, '', "$what: COMMIT succeeds");
		my ($wout, $werr) = $w->result;
		is("$wout|$werr", ($v + 1) . '|',
			"$what: the queued statement ran after the commit was done (it sees the update)");
		counters_are($node, $budget, { admitted => 2, admitted_after_wait => 1 },
			"$what: the slot is returned once, when the commit is done");
		my ($one, $err1) = $h->query('SELECT 1');
		is("$one|$err1", '1|', "$what: the session lives on");
		is($node->safe_psql('postgres',
				"SELECT terminated_idle FROM dbgate.status WHERE budget = '$budget'"),
			'0', "$what: nothing terminated");
		$_->quit for ($x, $w, $h);
	}
	$node->safe_psql('postgres', qq{
		SELECT dbgate.alter_budget('$budget', queue_timeout => '5s',
		                           idle_in_transaction_timeout => '0')});
}

$node->stop;
done_testing();
