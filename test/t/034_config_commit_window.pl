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
use DbgateWindow;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $primary = dbgate_node('window_primary', streaming => 1,
	conf => "restart_after_crash = on\n");
$primary->safe_psql('postgres', "SELECT dbgate.create_budget('w_before', 1)");
my $standby = dbgate_standby($primary, 'window_standby', 'wb');
$primary->wait_for_catchup($standby);

my $conf_sql = q{SELECT string_agg(budget, ' ' ORDER BY budget) FROM dbgate.budgets};

# a synchronous standby that does not exist: commits wait after their
# commit record is flushed
my $s = window_open($primary, "SELECT dbgate.create_budget('w_in_window', 2)",
	'the commit waits for the synchronous standby');
# the standby has the commit record (streamed), not the CONFIRM record
$primary->wait_for_catchup($standby, 'replay', $primary->lsn('flush'));
is($standby->safe_psql('postgres', $conf_sql),
	'w_before', 'the standby has replayed the commit but not applied the change yet');

my $offset = window_crash($primary, $s, 'the primary is back after the crash');
is($primary->safe_psql('postgres', $conf_sql),
	'w_before w_in_window', 'crash recovery installed the committed change');
confirm_logged_ok($primary, $offset,
	'the missing CONFIRM record is logged after recovery');
ok($standby->poll_query_until('postgres', $conf_sql, 'w_before w_in_window'),
	'the standby applies the change');

window_close($primary);
$standby->stop;
$primary->stop;
done_testing();
