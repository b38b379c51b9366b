# A crash between a configuration transaction's commit record and the
# CONFIRM record that follows it.  A commit that waits for a synchronous
# standby that never answers sits exactly there (its commit record is
# flushed, its commit callbacks have not run); killing its backend crashes
# the server.  The change is committed: crash recovery installs it, and
# the server then logs the missing CONFIRM record, so a standby streaming
# from it applies the change too.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use DbgateTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $primary = PostgreSQL::Test::Cluster->new('window_primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf',
	"shared_preload_libraries = 'dbgate'\nrestart_after_crash = on\n");
$primary->start;
$primary->safe_psql('postgres',
	"CREATE EXTENSION dbgate; SELECT dbgate.create_budget('w_before', 1)");
$primary->backup('wb');
my $standby = PostgreSQL::Test::Cluster->new('window_standby');
$standby->init_from_backup($primary, 'wb', has_streaming => 1);
$standby->start;
$primary->wait_for_catchup($standby);

my $conf_sql = q{SELECT string_agg(budget, ' ' ORDER BY budget) FROM dbgate.budgets};

# a synchronous standby that does not exist: commits wait after their
# commit record is flushed
$primary->safe_psql('postgres',
	"ALTER SYSTEM SET synchronous_standby_names = 'nobody'; SELECT pg_reload_conf()");
my $s = DbgateTest::Session->new($primary);
$s->send("SELECT dbgate.create_budget('w_in_window', 2)");
ok( $primary->poll_query_until(
		'postgres',
		'SELECT count(*) FROM pg_stat_activity WHERE pid = ' . $s->pid
		  . " AND wait_event = 'SyncRep'",
		'1'),
	'the commit waits for the synchronous standby');
# the standby has the commit record (streamed), not the CONFIRM record
$primary->wait_for_catchup($standby, 'replay', $primary->lsn('flush'));
is($standby->safe_psql('postgres', $conf_sql),
	'w_before', 'the standby has replayed the commit but not applied the change yet');

my $offset = -s $primary->logfile;
kill 'KILL', $s->pid or die "kill: $!";
$primary->wait_for_log(qr/all server processes terminated; reinitializing/, $offset);
# then ready: a psql that finds the server still refusing connections
# may exit before poll_query_until() wrote its query, and IPC::Run
# dies of the broken pipe
$primary->wait_for_log(qr/database system is ready to accept connections/,
	$offset);
ok($primary->poll_query_until('postgres', 'SELECT 1', '1'),
	'the primary is back after the crash');
$s->wait_exit;
is($primary->safe_psql('postgres', $conf_sql),
	'w_before w_in_window', 'crash recovery installed the committed change');
ok( $primary->wait_for_log(
		qr/dbgate logged the confirmation of the configuration change of transaction \d+/,
		$offset),
	'the missing CONFIRM record is logged after recovery');
ok($standby->poll_query_until('postgres', $conf_sql, 'w_before w_in_window'),
	'the standby applies the change');

$primary->safe_psql('postgres',
	'ALTER SYSTEM RESET synchronous_standby_names; SELECT pg_reload_conf()');
$standby->stop;
$primary->stop;
done_testing();
