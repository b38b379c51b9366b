# A server that keeps only part of a configuration (dbgate.max_budgets
# lowered below the number of budgets, a standby with a smaller one) and
# leaves out a budget that a budget it keeps names as its runaway_budget:
# the budget kept loses its runaway_budget ('demote' becomes 'log'), as
# with drop_budget(..., force => true), and the WARNING of the fit names
# both.  The image that the next committed change writes (state file,
# IMAGE record) then loads: after a clean restart the budgets are there
# and nothing is set aside; after an immediate stop the IMAGE record is
# replayed without a PANIC.
#
# dbgate 1.3 as first written kept the reference: that change wrote an
# image naming a budget it lacks, which the decoder refused, so a clean
# restart set the state file aside as dbgate.state.corrupt and started
# with no budgets, and crash recovery stopped at the record with "PANIC:
# invalid dbgate configuration record" at every start.  Such images are
# now fitted too, with a WARNING of their own: a state file built byte by
# byte and an IMAGE record logged by test/modules/dbgate_walgen (built
# here as in 036_config_wal_formats).
#
#   1. lowered dbgate.max_budgets on one server: the fit, a change, a
#      clean restart, a change, an immediate stop and start;
#   2. a state file naming a runaway_budget it lacks loads;
#   3. an IMAGE record naming one is replayed, and the state file that
#      replay wrote loads;
#   4. a streaming standby with dbgate.max_budgets = 1, promoted: its
#      first changes, a clean restart, an immediate stop and start.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use DbgateState;
use DbgateTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# budget:max_active:runaway_after:runaway_action:runaway_budget of every budget
my $budgets_sql = q{SELECT coalesce(string_agg(format('%s:%s:%s:%s:%s', budget,
	max_active, runaway_after, runaway_action, coalesce(runaway_budget, '-')),
	' ' ORDER BY budget), '') FROM dbgate.budgets};

my $invalid_file = qr/dbgate state file "dbgate\.state" is invalid/;
my $panic = qr/PANIC:  invalid dbgate configuration record/;

# the node's data directory has no dbgate.state.corrupt
sub nothing_set_aside
{
	my ($node, $offset, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	ok( !-e $node->data_dir . '/dbgate.state.corrupt'
		  && !$node->log_contains($invalid_file, $offset),
		"$what: the state file loads, nothing is set aside")
	  or diag(slurp_file($node->logfile, $offset));
	return;
}

# An immediate stop and a start: crash recovery replays what was logged
# since the last checkpoint.  Returns whether the server started.
sub crash_restart_ok
{
	my ($node, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	$node->stop('immediate');
	my $offset = -s $node->logfile;
	my $started = $node->start(fail_ok => 1);
	ok($started, "$what: the server starts after an immediate stop")
	  or diag(slurp_file($node->logfile, $offset));
	ok(!$node->log_contains($panic, $offset), "$what: no PANIC in recovery");
	nothing_set_aside($node, $offset, $what);
	return $started;
}

# ---------------------------------------------------------------------------
# 1. A lowered dbgate.max_budgets
my $node = dbgate_node('fitra');
$node->safe_psql(
	'postgres', q{
	SELECT dbgate.create_budget('lo_z_target', 1);
	SELECT dbgate.create_budget('lo_a_source', 3, runaway_after => '1s',
	                            runaway_action => 'demote',
	                            runaway_budget => 'lo_z_target');
});
is($node->safe_psql('postgres', $budgets_sql),
	'lo_a_source:3:00:00:01:demote:lo_z_target lo_z_target:1:00:00:00:log:-',
	'lo_a_source demotes its runaways to lo_z_target');

# config_script() order: lo_a_source first, lo_z_target left out
$node->append_conf('postgresql.conf', "dbgate.max_budgets = 1\n");
my $offset = -s $node->logfile;
$node->restart;
ok( $node->log_contains(
		qr/WARNING:  dbgate left out 1 of 2 budgets, 0 of 0 role assignments and 0 of 0 database assignments of state file "dbgate\.state"\n.*DETAIL:  This server has dbgate\.max_budgets = 1 and dbgate\.max_roles = 1024\. Budgets left out: "lo_z_target"\. Budgets kept whose runaway_budget is left out: "lo_a_source" \("lo_z_target", runaway_action 'demote' set to 'log'\)\./,
		$offset),
	'the WARNING of the fit names the budget kept and its runaway_budget left out')
  or diag(slurp_file($node->logfile, $offset));
my $fitted = 'lo_a_source:3:00:00:01:log:-';
is($node->safe_psql('postgres', $budgets_sql),
	$fitted, "lo_a_source keeps runaway_after, with 'log' and no runaway_budget");

# a change writes the fitted image; replayed after an immediate stop (a
# checkpoint first: the next timed one is minutes away, so recovery starts
# before the IMAGE record)
$node->safe_psql('postgres', 'CHECKPOINT');
$node->safe_psql('postgres',
	q{SELECT dbgate.alter_budget('lo_a_source', max_active => 4)});
$fitted = 'lo_a_source:4:00:00:01:log:-';
if (crash_restart_ok($node, 'a change, then an immediate stop'))
{
	is($node->safe_psql('postgres', $budgets_sql),
		$fitted, 'after the crash restart, the budget is there');
}

# a change, then a clean restart loads the state file it wrote
$node->safe_psql('postgres',
	q{SELECT dbgate.alter_budget('lo_a_source', max_active => 5)});
$fitted = 'lo_a_source:5:00:00:01:log:-';
$offset = -s $node->logfile;
$node->restart;
nothing_set_aside($node, $offset, 'a change, then a clean restart');
is($node->safe_psql('postgres', $budgets_sql),
	$fitted, 'after the clean restart, the budget is there');
ok(!$node->log_contains(qr/WARNING:  dbgate (left out|cleared)/, $offset),
	'and the state file fits: no WARNING');

# raised again: what was left out is gone (the change made the file)
$node->append_conf('postgresql.conf', "dbgate.max_budgets = 64\n");
$node->restart;
is($node->safe_psql('postgres', $budgets_sql),
	$fitted, 'raised dbgate.max_budgets: the state file holds what was kept');

# ---------------------------------------------------------------------------
# 2. A state file that names a runaway_budget it lacks (as a change after
# the fit wrote it before): fitted at load, with a WARNING
my $lacking = state_image(
	version => 4,
	budgets => [
		{
			name => 'lo_a_source',
			max_active => 6,
			runaway_after => 1000,
			runaway_action => 1,
			runaway_budget => 'lo_z_target'
		},
		{ name => 'lo_b_other', max_active => 2, runaway_budget => 'lo_y_gone' }
	]);
$node->stop;
my $state = $node->data_dir . '/dbgate.state';
open my $fh, '>:raw', $state or die "cannot write $state: $!";
print $fh $lacking;
close $fh;
$offset = -s $node->logfile;
$node->start;
nothing_set_aside($node, $offset, 'a state file naming a missing runaway_budget');
ok( $node->log_contains(
		qr/WARNING:  dbgate cleared the runaway_budget of 2 of 2 budgets of state file "dbgate\.state"\n.*DETAIL:  Budgets whose runaway_budget is not a budget of it: "lo_a_source" \("lo_z_target", runaway_action 'demote' set to 'log'\), "lo_b_other" \("lo_y_gone"\)\./,
		$offset),
	'its load says which runaway_budgets it cleared')
  or diag(slurp_file($node->logfile, $offset));
is($node->safe_psql('postgres', $budgets_sql),
	'lo_a_source:6:00:00:01:log:- lo_b_other:2:00:00:00:log:-',
	'its budgets are loaded without those runaway_budgets');

# ---------------------------------------------------------------------------
# 3. An IMAGE record that names a runaway_budget it lacks, replayed by
# crash recovery: fitted, with a WARNING, no PANIC
walgen_functions($node);
$node->safe_psql('postgres', 'CHECKPOINT');
my $record = state_image(
	version => 4,
	budgets => [
		{
			name => 'lo_r_source',
			max_active => 7,
			runaway_after => 2000,
			runaway_action => 1,
			runaway_budget => 'lo_r_gone'
		}
	]);
my $xid = walgen_log_image($node, $record);
$node->safe_psql('postgres', "SELECT walgen_confirm('$xid')");
$offset = -s $node->logfile;
if (crash_restart_ok($node, 'an IMAGE record naming a missing runaway_budget'))
{
	ok( $node->log_contains(
			qr/WARNING:  dbgate cleared the runaway_budget of 1 of 1 budgets of the configuration change replayed at [0-9A-F]+\/[0-9A-F]+\n.*DETAIL:  Budgets whose runaway_budget is not a budget of it: "lo_r_source" \("lo_r_gone", runaway_action 'demote' set to 'log'\)\./,
			$offset),
		'its replay says which runaway_budget it cleared')
	  or diag(slurp_file($node->logfile, $offset));
	is($node->safe_psql('postgres', $budgets_sql),
		'lo_r_source:7:00:00:02:log:-',
		'the record is installed without that runaway_budget');

	# replay wrote the record's image as its state file: it loads
	$offset = -s $node->logfile;
	$node->restart;
	nothing_set_aside($node, $offset, 'the state file that replay wrote');
	is($node->safe_psql('postgres', $budgets_sql),
		'lo_r_source:7:00:00:02:log:-', 'and holds the replayed budget');
}
$node->stop;

# ---------------------------------------------------------------------------
# 4. A streaming standby with dbgate.max_budgets = 1, promoted
my $primary = PostgreSQL::Test::Cluster->new('fitra_primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', "shared_preload_libraries = 'dbgate'\n");
$primary->start;
$primary->safe_psql('postgres', 'CREATE EXTENSION dbgate');
$primary->backup('b1');
my $standby = PostgreSQL::Test::Cluster->new('fitra_standby');
$standby->init_from_backup($primary, 'b1', has_streaming => 1);
$standby->append_conf('postgresql.conf', "dbgate.max_budgets = 1\n");
$standby->start;

$offset = -s $standby->logfile;
$primary->safe_psql(
	'postgres', q{
	BEGIN;
	SELECT dbgate.create_budget('lo_z_target', 1);
	SELECT dbgate.create_budget('lo_a_source', 3, runaway_after => '1s',
	                            runaway_action => 'demote',
	                            runaway_budget => 'lo_z_target');
	COMMIT;
});
$primary->wait_for_catchup($standby);
ok( $standby->log_contains(
		qr/WARNING:  dbgate left out 1 of 2 budgets, 0 of 0 role assignments and 0 of 0 database assignments of the configuration change replayed at [0-9A-F]+\/[0-9A-F]+\n.*DETAIL:  This server has dbgate\.max_budgets = 1 and dbgate\.max_roles = 1024\. Budgets left out: "lo_z_target"\. Budgets kept whose runaway_budget is left out: "lo_a_source" \("lo_z_target", runaway_action 'demote' set to 'log'\)\./,
		$offset),
	'standby: the WARNING of the replayed change names the runaway_budget left out')
  or diag(slurp_file($standby->logfile, $offset));
is($standby->safe_psql('postgres', $budgets_sql),
	'lo_a_source:3:00:00:01:log:-',
	"standby: lo_a_source with 'log' and no runaway_budget");
is($primary->safe_psql('postgres', $budgets_sql),
	'lo_a_source:3:00:00:01:demote:lo_z_target lo_z_target:1:00:00:00:log:-',
	'the primary keeps both');

$primary->stop;
$standby->promote;
ok($standby->poll_query_until('postgres', 'SELECT pg_is_in_recovery()', 'f'),
	'the standby is promoted');
$standby->safe_psql('postgres',
	q{SELECT dbgate.alter_budget('lo_a_source', max_active => 4)});
$offset = -s $standby->logfile;
$standby->restart;
nothing_set_aside($standby, $offset, 'promoted: a change, then a clean restart');
is($standby->safe_psql('postgres', $budgets_sql),
	'lo_a_source:4:00:00:01:log:-',
	'promoted: after the clean restart, the budget is there');

$standby->safe_psql('postgres', 'CHECKPOINT');
$standby->safe_psql('postgres',
	q{SELECT dbgate.alter_budget('lo_a_source', max_active => 5)});
if (crash_restart_ok($standby, 'promoted: a change, then an immediate stop'))
{
	is($standby->safe_psql('postgres', $budgets_sql),
		'lo_a_source:5:00:00:01:log:-',
		'promoted: after the crash restart, the budget is there');
}

$standby->stop;
done_testing();
