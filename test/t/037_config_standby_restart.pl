# A standby that restarts while a configuration change it replayed is
# still waiting for its CONFIRM record.
#
# The primary crashes between a change's commit record and its CONFIRM
# record (a commit waiting for a synchronous standby that never answers
# sits there).  Crash recovery installs the change, the end-of-recovery
# checkpoint follows, and a background worker logs the CONFIRM record
# after that checkpoint.  A standby that replayed the IMAGE record keeps
# the change aside until the CONFIRM comes; if it makes a restartpoint at
# the end-of-recovery checkpoint and restarts before the CONFIRM, replay
# starts after the IMAGE record, and only what it kept in dbgate.stash
# lets the late CONFIRM install the change:
#  1. a standby stopped by recovery_target_action = 'shutdown' right after
#     the end-of-recovery checkpoint (a shutdown restartpoint there), then
#     started again, applies the change when the CONFIRM comes;
#  2. a base backup of a standby paused at that point (after a
#     restartpoint there) carries the kept change: a server made from it
#     applies the change when the CONFIRM comes;
#  3. a change whose transaction failed at COMMIT, kept across a restart of
#     the standby, is dropped when the next change comes, never installed;
#  4. an invalid dbgate.stash is reported with a WARNING and ignored.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use DbgateTest;
use DbgateWindow;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $conf_sql =
  q{SELECT string_agg(budget, ' ' ORDER BY budget) FROM dbgate.budgets};

my $primary = dbgate_node('restart_primary', streaming => 1,
	conf => "restart_after_crash = on\n");
$primary->safe_psql('postgres', "SELECT dbgate.create_budget('r_before', 1)");

my $standby = dbgate_standby($primary, 'restart_standby', 'rb');
my $standby2 = dbgate_standby($primary, 'restart_standby2', 'rb');
$primary->wait_for_catchup($standby);
$primary->wait_for_catchup($standby2);

# the latest checkpoint (or restartpoint) in a stopped server's control file
sub control_checkpoint
{
	my ($node) = @_;
	my ($out) = run_command([ 'pg_controldata', $node->data_dir ]);
	return $out =~ /^Latest checkpoint location:\s+(\S+)$/m ? $1 : '';
}

# poll_file_gone(PATH): true once PATH does not exist (within the timeout)
sub poll_file_gone
{
	my ($path) = @_;
	foreach my $i (0 .. 10 * $PostgreSQL::Test::Utils::timeout_default)
	{
		return 1 if !-e $path;
		usleep(100_000);
	}
	return 0;
}

# ---------------------------------------------------------------------------
# The crash between the commit record and the CONFIRM record
my $s = window_open($primary, "SELECT dbgate.create_budget('r_in_window', 2)",
	'the commit waits for the synchronous standby');
my $flushed = $primary->lsn('flush');
$primary->wait_for_catchup($standby, 'replay', $flushed);
$primary->wait_for_catchup($standby2, 'replay', $flushed);
is($standby->safe_psql('postgres', $conf_sql),
	'r_before', 'the standbys have replayed the commit, not applied the change');
# stopped before the primary writes anything new
$standby->stop;
$standby2->stop;

my $offset = window_crash($primary, $s, 'the primary is back after the crash');
is($primary->safe_psql('postgres', $conf_sql),
	'r_before r_in_window', 'crash recovery installed the committed change');
confirm_logged_ok($primary, $offset,
	'the missing CONFIRM record is logged after recovery');
# the end-of-recovery checkpoint, which the CONFIRM record follows
my ($ckpt, $is_shutdown) = split /\|/,
  $primary->safe_psql('postgres',
	'SELECT checkpoint_lsn, checkpoint_lsn = redo_lsn FROM pg_control_checkpoint()');
is($is_shutdown, 't', 'the latest checkpoint is the end-of-recovery one');
my $after = $primary->lsn('insert');

# ---------------------------------------------------------------------------
# 1. a restartpoint at the end-of-recovery checkpoint, then a restart
stops_at_target_ok($standby, $ckpt, 'the standby shut down at the recovery target');
is(control_checkpoint($standby), $ckpt,
	'its restartpoint is the end-of-recovery checkpoint');
ok(-f $standby->data_dir . '/dbgate.stash',
	'it keeps the change that waits for its CONFIRM in dbgate.stash');

takes_back_ok($standby,
	'at its start the standby takes the change back from dbgate.stash');
$primary->wait_for_catchup($standby, 'replay', $after);
is($standby->safe_psql('postgres', $conf_sql),
	'r_before r_in_window',
	'after its restart the standby applies the change at the late CONFIRM');
# the file stays until the next change or the next start (a base backup
# taken meanwhile may have copied the state file before the change was
# installed); at the next start replay finds the change installed
$standby->restart;
ok(poll_file_gone($standby->data_dir . '/dbgate.stash'),
	'dbgate.stash is removed at the next start, the change being installed');
is($standby->safe_psql('postgres', $conf_sql),
	'r_before r_in_window', 'the change is still there after that restart');

# ---------------------------------------------------------------------------
# 2. a base backup of a standby paused after a restartpoint there
$standby2->append_conf('postgresql.conf',
	"recovery_target_lsn = '$ckpt'\nrecovery_target_action = 'pause'\n");
$standby2->start;
ok( $standby2->poll_query_until(
		'postgres', "SELECT pg_get_wal_replay_pause_state() = 'paused'"),
	'the second standby pauses at the recovery target');
$standby2->safe_psql('postgres', 'CHECKPOINT');
is( $standby2->safe_psql('postgres',
		'SELECT checkpoint_lsn FROM pg_control_checkpoint()'),
	$ckpt, 'its restartpoint is the end-of-recovery checkpoint');
is($standby2->safe_psql('postgres', $conf_sql),
	'r_before', 'it has not applied the change');
$standby2->backup('paused');
my $copy = PostgreSQL::Test::Cluster->new('restart_copy');
$copy->init_from_backup($standby2, 'paused');
ok(-f $copy->data_dir . '/dbgate.stash',
	'the base backup has the change that waits for its CONFIRM');
takes_back_ok($copy, 'the server made from the backup takes the change back',
	streaming_from => $primary);
$primary->wait_for_catchup($copy, 'replay', $after);
is($copy->safe_psql('postgres', $conf_sql),
	'r_before r_in_window',
	'a server made from the backup applies the change at the late CONFIRM');
$copy->stop;
$standby2->stop;

window_close($primary);

# ---------------------------------------------------------------------------
# 3. a change that failed at COMMIT after its IMAGE record (a serialization
# failure), kept by the standby across a restartpoint and a restart
$primary->safe_psql('postgres', 'CREATE TABLE rs (k int)');
my $s1 = DbgateTest::Session->new($primary);
my $s2 = DbgateTest::Session->new($primary);
$s1->query('BEGIN ISOLATION LEVEL SERIALIZABLE; SELECT count(*) FROM rs WHERE k = 1');
$s2->query('BEGIN ISOLATION LEVEL SERIALIZABLE; SELECT count(*) FROM rs WHERE k = 2');
$s1->query('INSERT INTO rs VALUES (2)');
$s2->query("INSERT INTO rs VALUES (1); SELECT dbgate.create_budget('r_ghost', 1)");
$s1->query('COMMIT');
my (undef, undef, $state) = $s2->query('COMMIT');
is($state, '40001', 'a configuration change fails at COMMIT');
$s1->quit;
$s2->quit;
$primary->safe_psql('postgres', 'CHECKPOINT');
$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));
$standby->safe_psql('postgres', 'CHECKPOINT');
ok(-f $standby->data_dir . '/dbgate.stash',
	'the standby keeps the failed change aside (it cannot know yet)');
$standby->restart;
$primary->safe_psql('postgres', "SELECT dbgate.create_budget('r_next', 3)");
$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));
is($standby->safe_psql('postgres', $conf_sql),
	'r_before r_in_window r_next',
	'after its restart the standby drops the failed change at the next one');
$standby->restart;
is($standby->safe_psql('postgres', $conf_sql),
	'r_before r_in_window r_next', 'and after another restart');

# ---------------------------------------------------------------------------
# 4. an invalid dbgate.stash is reported, removed and ignored
$standby->stop;
open(my $fh, '>:raw', $standby->data_dir . '/dbgate.stash') or die $!;
print $fh 'not a dbgate file';
close($fh);
my $soffset = -s $standby->logfile;
$standby->start;
$primary->safe_psql('postgres', "SELECT dbgate.create_budget('r_last', 4)");
ok( $standby->wait_for_log(
		qr/WARNING:  dbgate file "dbgate.stash" is invalid, ignoring it/,
		$soffset),
	'an invalid dbgate.stash is reported');
$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));
is($standby->safe_psql('postgres', $conf_sql),
	'r_before r_in_window r_last r_next',
	'and the standby goes on applying changes');
ok(!-f $standby->data_dir . '/dbgate.stash'
	  || slurp_file($standby->data_dir . '/dbgate.stash') ne 'not a dbgate file',
	'the invalid file is gone');

$standby->stop;
$primary->stop;
done_testing();
