# DbgateWindow - the window between a configuration transaction's commit
# record and the CONFIRM record that follows it, for the TAP tests of a
# crash there and of standbys that restart inside it (034, 037, 046).
#
#   my $s = window_open($primary, $sql, 'the commit waits for ...');
#   ...                                   # standbys replay the commit record
#   my $offset = window_crash($primary, $s, 'the primary is back ...');
#   confirm_logged_ok($primary, $offset, 'the missing CONFIRM record ...');
#   stops_at_target_ok($standby, $ckpt, 'the standby shut down ...');
#   takes_back_ok($standby, 'the standby takes the change back ...');
#   window_close($primary);
#
# A commit that waits for a synchronous standby that never answers sits
# in the window (its commit record is flushed, its commit callbacks have
# not run); killing its backend crashes the server.  Crash recovery
# installs the change, the end-of-recovery checkpoint follows, and a
# background worker logs the missing CONFIRM record after it.

package DbgateWindow;

use strict;
use warnings FATAL => 'all';

use Exporter 'import';
use DbgateTest;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

our @EXPORT = qw(window_open window_crash confirm_logged_ok window_close
  stops_at_target_ok takes_back_ok);

# window_open(PRIMARY, SQL, NAME) -> the DbgateTest::Session that sent SQL
# (a configuration change) with synchronous_standby_names = 'nobody'; one
# assertion NAME that its commit waits for that standby (wait event
# SyncRep), which it does until window_crash().
sub window_open
{
	my ($primary, $sql, $name) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	$primary->safe_psql('postgres',
		"ALTER SYSTEM SET synchronous_standby_names = 'nobody'; SELECT pg_reload_conf()");
	my $s = DbgateTest::Session->new($primary);
	$s->send($sql);
	ok( $primary->poll_query_until(
			'postgres',
			'SELECT count(*) FROM pg_stat_activity WHERE pid = ' . $s->pid
			  . " AND wait_event = 'SyncRep'",
			'1'),
		$name);
	return $s;
}

# window_crash(PRIMARY, SESSION, NAME) -> the offset of PRIMARY's log
# before the crash: kills the backend of SESSION (window_open()), waits
# for the crash restart to end (the server ready again), one assertion
# NAME that a query runs, then waits for SESSION's psql to exit.
sub window_crash
{
	my ($primary, $s, $name) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $offset = -s $primary->logfile;
	kill 'KILL', $s->pid or die "kill: $!";
	$primary->wait_for_log(qr/all server processes terminated; reinitializing/,
		$offset);
	# then ready: a psql that finds the server still refusing connections
	# may exit before poll_query_until() wrote its query, and IPC::Run
	# dies of the broken pipe
	$primary->wait_for_log(qr/database system is ready to accept connections/,
		$offset);
	ok($primary->poll_query_until('postgres', 'SELECT 1', '1'), $name);
	$s->wait_exit;
	return $offset;
}

# confirm_logged_ok(PRIMARY, OFFSET, NAME): one assertion NAME that
# PRIMARY's log after OFFSET says that dbgate logged the CONFIRM record
# (waits for it, up to the default timeout).
sub confirm_logged_ok
{
	my ($primary, $offset, $name) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	return ok(
		$primary->wait_for_log(
			qr/dbgate logged the confirmation of the configuration change of transaction \d+/,
			$offset),
		$name);
}

# window_close(PRIMARY): synchronous_standby_names back to its default
sub window_close
{
	my ($primary) = @_;
	$primary->safe_psql('postgres',
		'ALTER SYSTEM RESET synchronous_standby_names; SELECT pg_reload_conf()');
	return;
}

# stops_at_target_ok(STANDBY, LSN, NAME): starts the stopped STANDBY with
# recovery_target_lsn LSN and recovery_target_action 'shutdown' (a
# shutdown restartpoint there), waits for it to stop (up to the default
# timeout); one assertion NAME that it did.
sub stops_at_target_ok
{
	my ($standby, $lsn, $name) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	$standby->append_conf('postgresql.conf',
		"recovery_target_lsn = '$lsn'\nrecovery_target_action = 'shutdown'\n");
	run_log([ 'pg_ctl', '-D', $standby->data_dir, '-l', $standby->logfile,
		'start' ]);
	my $pidfile = $standby->data_dir . '/postmaster.pid';
	foreach my $i (0 .. 10 * $PostgreSQL::Test::Utils::timeout_default)
	{
		last if !-f $pidfile;
		usleep(100_000);
	}
	return ok(!-f $pidfile, $name);
}

# takes_back_ok(NODE, NAME, streaming_from => PRIMARY): starts the
# stopped standby NODE without a recovery target (the one that
# stops_at_target_ok() or a base backup set is taken away; NODE streams
# from PRIMARY when given); one assertion NAME that its log says that
# dbgate took back, at the start, the configuration change kept in
# dbgate.stash (waits for it, up to the default timeout).
sub takes_back_ok
{
	my ($node, $name, %p) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	$node->append_conf('postgresql.conf',
		"recovery_target_lsn = ''\nrecovery_target_action = 'pause'\n");
	$node->enable_streaming($p{streaming_from}) if $p{streaming_from};
	my $offset = -s $node->logfile;
	$node->start;
	return ok(
		$node->wait_for_log(
			qr/dbgate took back the configuration change of transaction \d+ logged at/,
			$offset),
		$name);
}

1;
