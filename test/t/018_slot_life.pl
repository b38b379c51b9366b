# Places in the life of a slot that 1.1 got wrong:
#   - a budget switched to shadow mode lets its waiters go at once (it
#     promises never to queue);
#   - a portal bound by the extended protocol and not executed holds its
#     slot with nothing running: dbgate.backends says 'idle in
#     transaction' (seen under a timeout of an hour, so that the state
#     lasts until the test has looked), and the budget's
#     idle_in_transaction_timeout ends the session (a second session bound
#     under a timeout of 2 s, which the budget has when it binds: a slot
#     keeps the limits of its admission);
#   - a session ended by the budget's idle timeout is counted in
#     terminated_idle also when the server does not log the FATAL
#     (log_min_messages = panic);
#   - where a synchronous standby is configured, a commit that waits for it
#     holds no slot (one whose transaction ID comes only from NOTIFY at
#     commit writes no WAL before its commit record and does not wait).
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DbgateTest;

# A synchronous standby that never comes; only the sessions that ask for
# it (synchronous_commit = on) wait for it.
my $node = dbgate_node(
	'slotlife', conf => q{
wal_level = replica
max_wal_senders = 2
synchronous_standby_names = 'nosuch'
synchronous_commit = local
});
$node->safe_psql(
	'postgres', q{
	CREATE ROLE sl_user LOGIN;
	CREATE TABLE sl_t (a int);
	GRANT INSERT ON sl_t TO sl_user;
});
my $locker = DbgateTest::Session->new($node);

sub use_budget
{
	my ($budget) = @_;
	$node->safe_psql('postgres', "SELECT dbgate.assign_role('sl_user', '$budget')");
	return;
}

# ---------------------------------------------------------------------------
# Shadow mode lets the waiters go.
$node->safe_psql('postgres',
	"SELECT dbgate.create_budget('sl_shadow', max_active => 1, max_queued => 2)");
use_budget('sl_shadow');
$locker->query('SELECT pg_advisory_lock(1)');
my $holder = DbgateTest::Session->new($node, user => 'sl_user');
$holder->send('SELECT pg_advisory_xact_lock_shared(1)');
poll_ok($node, "SELECT state FROM dbgate.backends WHERE pid = " . $holder->pid,
	'active', 'shadow: the holder has the slot');
my $waiter = DbgateTest::Session->new($node, user => 'sl_user');
$waiter->send('SELECT 42');
poll_ok($node, "SELECT state FROM dbgate.backends WHERE pid = " . $waiter->pid,
	'queued', 'shadow: a second statement queues');
$node->safe_psql('postgres',
	"SELECT dbgate.alter_budget('sl_shadow', enforce => false)");
my ($out, $err, $state) = $waiter->result;
is($out, '42', 'shadow: the waiter runs once the budget is in shadow mode');
counters_are($node, 'sl_shadow',
	{ active => 1, admitted => 2, admitted_after_wait => 1 },
	'shadow: admitted after its wait while the holder still runs');
$locker->query('SELECT pg_advisory_unlock(1)');
$holder->result;
$waiter->quit;
$holder->quit;

# ---------------------------------------------------------------------------
# A bound portal that is not executed.  The client waits (pgwire's
# 'waitfor') until the test has looked at the server.
my $go = PostgreSQL::Test::Utils::tempdir();
$node->safe_psql('postgres',
	"SELECT dbgate.create_budget('sl_bound', max_active => 2, "
	  . "idle_in_transaction_timeout => '1h')");
use_budget('sl_bound');
my $w = wire_start($node, 'sl_user',
	join("\n", 'query BEGIN', 'parse s SELECT 1', 'bind p s', 'sync',
		"waitfor $go/seen", 'query SELECT 2', 'quit'));
poll_ok($node,
	"SELECT b.state FROM dbgate.backends b JOIN pg_stat_activity a USING (pid)
	  WHERE a.application_name = 'pgwire'",
	'idle in transaction', 'bound: the slot is held, shown idle in transaction');
is($node->safe_psql('postgres',
		"SELECT active || ':' || idle_in_transaction FROM dbgate.status WHERE budget = 'sl_bound'"),
	'1:1', 'bound: counted in active and idle_in_transaction');
PostgreSQL::Test::Utils::append_to_file("$go/seen", '');
my $lines = wire_finish($w);
ok((grep { /^ROW 2$/ } @$lines), 'bound: the session goes on when its client does')
  or diag(join("\n", @$lines));
poll_ok($node,
	"SELECT active || ':' || idle_in_transaction FROM dbgate.status WHERE budget = 'sl_bound'",
	'0:0', 'bound: the slot is returned when the session ends');
poll_ok($node,
	"SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgwire'",
	'0', 'bound: the session is gone');

# the same under a timeout of 2 s: the timeout ends the session (seen in
# the server log: the session may be gone before a poll sees it)
$node->safe_psql('postgres',
	"SELECT dbgate.alter_budget('sl_bound', idle_in_transaction_timeout => '2s')");
my $offset = -s $node->logfile;
$w = wire_start($node, 'sl_user',
	join("\n", 'query BEGIN', 'parse s SELECT 1', 'bind p s', 'sync',
		"waitfor $go/gone", 'query SELECT 2', 'quit'));
$node->wait_for_log(
	qr/pgwire FATAL:  terminating connection due to idle-in-transaction timeout/,
	$offset);
poll_ok($node,
	"SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgwire'",
	'0', 'bound: the idle timeout ended the session');
PostgreSQL::Test::Utils::append_to_file("$go/gone", '');
$lines = wire_finish($w);
ok((grep { /^FATAL 25P03 / } @$lines), 'bound: with PostgreSQL\'s idle-in-transaction FATAL')
  or diag(join("\n", @$lines));
is($node->safe_psql('postgres',
		"SELECT active || ':' || terminated_idle FROM dbgate.status WHERE budget = 'sl_bound'"),
	'0:1', 'bound: the slot is back, the session counted in terminated_idle');

# ---------------------------------------------------------------------------
# terminated_idle without the FATAL in the log.
$node->safe_psql('postgres', q{
	ALTER ROLE sl_user SET log_min_messages = panic;
	SELECT dbgate.create_budget('sl_quiet', max_active => 2, scope => 'transaction',
	                            idle_in_transaction_timeout => '300ms');
});
use_budget('sl_quiet');
my $quiet = DbgateTest::Session->new($node, user => 'sl_user');
$quiet->query('BEGIN; INSERT INTO sl_t VALUES (1)');
poll_ok($node, "SELECT count(*) FROM pg_stat_activity WHERE pid = " . $quiet->pid,
	'0', 'quiet: the session was ended by the idle timeout');
$quiet->wait_exit;
poll_ok($node,
	"SELECT active || ':' || terminated_idle FROM dbgate.status WHERE budget = 'sl_quiet'",
	'0:1', 'quiet: counted in terminated_idle although nothing was logged');
$node->safe_psql('postgres', 'ALTER ROLE sl_user RESET log_min_messages');

# ---------------------------------------------------------------------------
# Where a synchronous standby is configured: a transaction that gets its
# transaction ID only at commit (from NOTIFY) has written no WAL before its
# commit record, so PostgreSQL neither flushes it synchronously nor waits
# for the standby; a transaction that wrote waits, without its slot.
$node->safe_psql('postgres', q{
	ALTER ROLE sl_user SET synchronous_commit = on;
	SELECT dbgate.create_budget('sl_sync', max_active => 1, max_queued => 1,
	                            scope => 'transaction');
});
use_budget('sl_sync');
my $notifier = DbgateTest::Session->new($node, user => 'sl_user');
$notifier->query('BEGIN; SELECT 1');
is($node->safe_psql('postgres',
		"SELECT active FROM dbgate.status WHERE budget = 'sl_sync'"),
	'1', 'sync: the read-only transaction keeps its slot (scope transaction)');
($out, $err, $state) = $notifier->query('NOTIFY sl_channel; COMMIT');
is($state, '', 'sync: NOTIFY alone: the commit does not wait for the standby');
counters_are($node, 'sl_sync', { admitted => 1 }, 'sync: NOTIFY alone: the slot is back');
$notifier->query('BEGIN; INSERT INTO sl_t VALUES (2); NOTIFY sl_channel');
$notifier->send('COMMIT');
poll_ok($node,
	"SELECT wait_event FROM pg_stat_activity WHERE pid = " . $notifier->pid,
	'SyncRep', 'sync: a writing transaction\'s commit waits for the standby');
is($node->safe_psql('postgres',
		"SELECT active FROM dbgate.status WHERE budget = 'sl_sync'"),
	'0', 'sync: the waiting commit holds no slot');
($state, $out, $err) = run_sql($node, 'SELECT 7', user => 'sl_user');
is($state, '', 'sync: another session of the budget runs meanwhile');
$node->safe_psql('postgres', "SELECT pg_cancel_backend(" . $notifier->pid . ")");
$notifier->result;
counters_are($node, 'sl_sync', { admitted => 3 }, 'sync: every slot back, counters exact');

$notifier->quit;
$quiet->quit;
$locker->quit;
$node->stop;
done_testing();
