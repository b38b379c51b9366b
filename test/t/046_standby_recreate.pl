# A budget dropped and created again in one transaction is a new budget on
# the primary -- its counters start from zero and its token bucket is full
# -- and now on a standby too, which used to match it by name with the
# budget it replaced and keep that one's counters and bucket.  A budget
# changed in the same transaction but not dropped keeps its counters on
# both.  The transaction logs the configuration without the re-created
# budget first.  A standby restarted while such a change waits for its
# CONFIRM (a crash of the primary between the commit record and it, as in
# 037) keeps the mark in dbgate.stash and still installs a new budget; a
# promoted standby keeps the configuration.
#
# A token taken from rc_rate comes back 100 s later (max_rate 0.01, the
# lowest rate).  A check that finds the bucket empty is made only when the
# test saw less than that pass since the token was taken; on a machine
# slow enough to take longer it is skipped, as it could not tell an empty
# bucket from a refilled one.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use DbgateTest;
use DbgateWindow;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(clock_gettime CLOCK_MONOTONIC);

my $primary = dbgate_node('rc_primary', streaming => 1,
	conf => "restart_after_crash = on\n");
$primary->safe_psql(
	'postgres', q{
	CREATE EXTENSION pg_walinspect;
	CREATE ROLE rc_rate LOGIN;
	CREATE ROLE rc_other LOGIN;
	-- one statement per 100 s (see above)
	SELECT dbgate.create_budget('rc_rate', 5, 0, max_rate => 0.01, rate_burst => 1);
	SELECT dbgate.create_budget('rc_other', 5);
	SELECT dbgate.assign_role('rc_rate', 'rc_rate');
	SELECT dbgate.assign_role('rc_other', 'rc_other');
});
my $standby = dbgate_standby($primary, 'rc_standby', 'b1');

# admitted:rejected_full of a budget
sub counts
{
	my ($node, $budget) = @_;
	return $node->safe_psql('postgres',
		"SELECT admitted || ':' || rejected_full FROM dbgate.status WHERE budget = '$budget'");
}

my $token_interval = 100;

# seconds since SINCE (a clock_gettime(CLOCK_MONOTONIC) reading)
sub since { return clock_gettime(CLOCK_MONOTONIC) - $_[0]; }

# The rate budget's token used, and a statement refused for lack of the
# next one (no queue); a statement of the other budget.
sub use_token
{
	my ($node, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $taken = clock_gettime(CLOCK_MONOTONIC);
	my ($st, $out) = run_sql($node, 'SELECT 1', user => 'rc_rate');
	is($out, '1', "$what: the first statement of rc_rate takes the token");
	my ($st2) = run_sql($node, 'SELECT 2', user => 'rc_rate');
	my $elapsed = since($taken);
	($st, $out) = run_sql($node, 'SELECT 3', user => 'rc_other');
	is($out, '3', "$what: a statement of rc_other");
  SKIP:
	{
		skip "$elapsed s since the token was taken: it may be back", 2
		  if $elapsed >= $token_interval;
		is($st2, '53300', "$what: the second finds none");
		is(counts($node, 'rc_rate') . ' ' . counts($node, 'rc_other'), '1:1 1:0',
			"$what: counted");
	}
	return;
}
use_token($primary, 'primary');
use_token($standby, 'standby');
my $reset_sql = q{SELECT stats_reset FROM dbgate.status WHERE budget = 'rc_rate'};
my $primary_reset = $primary->safe_psql('postgres', $reset_sql);
my $standby_reset = $standby->safe_psql('postgres', $reset_sql);

# Drop and create again in one transaction; change the other one.
my $start_lsn = $primary->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
$primary->safe_psql(
	'postgres', q{
	BEGIN;
	SELECT dbgate.drop_budget('rc_rate', force => true);
	SELECT dbgate.create_budget('rc_rate', 5, 0, max_rate => 0.01, rate_burst => 1);
	SELECT dbgate.assign_role('rc_rate', 'rc_rate');
	SELECT dbgate.alter_budget('rc_other', max_active => 6);
	COMMIT;
});
$primary->wait_for_catchup($standby);
is($primary->safe_psql('postgres',
		"SELECT string_agg(record_type, ' ' ORDER BY start_lsn)
		   FROM pg_get_wal_records_info('$start_lsn', pg_current_wal_flush_lsn())
		  WHERE resource_manager = 'dbgate'"),
	'IMAGE IMAGE CONFIRM',
	'the transaction logged the configuration without rc_rate, then with it');

# What the primary does: a new budget.
sub renewed_ok
{
	my ($node, $what, $reset_before) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	is(counts($node, 'rc_rate'), '0:0', "$what: the re-created budget counts from zero");
	isnt($node->safe_psql('postgres', $reset_sql), $reset_before,
		"$what: its stats_reset is new");
	is(counts($node, 'rc_other'), '1:0', "$what: the one only changed keeps its counters");
	my $taken = clock_gettime(CLOCK_MONOTONIC);
	my ($st, $out, $err) = run_sql($node, 'SELECT 4', user => 'rc_rate');
	is($out, '4', "$what: a statement of the re-created budget finds a full token bucket")
	  or diag($err);
	is(counts($node, 'rc_rate'), '1:0', "$what: and is admitted");
	return $taken;
}
renewed_ok($primary, 'primary', $primary_reset);
my $standby_taken = renewed_ok($standby, 'standby', $standby_reset);

# A plain change keeps the budget on both.
$primary->safe_psql('postgres',
	q{SELECT dbgate.alter_budget('rc_rate', max_active => 6)});
$primary->wait_for_catchup($standby);
is(counts($primary, 'rc_rate') . ' ' . counts($standby, 'rc_rate'), '1:0 1:0',
	'an alter_budget keeps the counters on the primary and on the standby');
my ($st) = run_sql($standby, 'SELECT 5', user => 'rc_rate');
my $elapsed = since($standby_taken);
SKIP:
{
	skip "$elapsed s since the standby's token was taken: it may be back", 1
	  if $elapsed >= $token_interval;
	is($st, '53300', 'and the standby keeps its token bucket (empty)');
}

# After a restart (counters from zero), once more.
$standby->restart;
is($standby->safe_psql('postgres',
		q{SELECT max_active FROM dbgate.budgets WHERE budget = 'rc_rate'}),
	'6', 'after a restart the standby has the configuration');
($st) = run_sql($standby, 'SELECT 6', user => 'rc_other');
is(counts($standby, 'rc_other'), '1:0', 'after the restart, rc_other counts a statement');
$primary->safe_psql(
	'postgres', q{
	BEGIN;
	SELECT dbgate.drop_budget('rc_other', force => true);
	SELECT dbgate.create_budget('rc_other', 7);
	SELECT dbgate.assign_role('rc_other', 'rc_other');
	COMMIT;
});
$primary->wait_for_catchup($standby);
is(counts($standby, 'rc_other'), '0:0',
	'rc_other dropped and created again: a new budget on the standby');
($st) = run_sql($standby, 'SELECT 7', user => 'rc_other');
is(counts($standby, 'rc_other'), '1:0', 'which counts from there');
# The same across a restart of the standby while the change waits for its
# CONFIRM (as in 037): the primary crashes between the commit record and
# the CONFIRM record; the standby, restarted with a restartpoint after
# both IMAGE records, takes the change back from dbgate.stash with the
# mark of the re-created budget, and installs it at the late CONFIRM as a
# new budget.  At the start every budget loaded from the state file has
# the same stats_reset; the re-created one gets a later one.  Then the
# standby is promoted.
my $s = window_open(
	$primary, q{BEGIN;
	SELECT dbgate.drop_budget('rc_rate', force => true);
	SELECT dbgate.create_budget('rc_rate', 5, 0, max_rate => 0.01, rate_burst => 1);
	SELECT dbgate.assign_role('rc_rate', 'rc_rate');
	COMMIT}, 'window: the commit waits for the synchronous standby');
my $flushed = $primary->lsn('flush');
$primary->wait_for_catchup($standby, 'replay', $flushed);
$standby->stop;
my $offset = window_crash($primary, $s, 'window: the primary is back after the crash');
confirm_logged_ok($primary, $offset,
	'window: the missing CONFIRM record is logged after recovery');
my $ckpt = $primary->safe_psql('postgres',
	'SELECT checkpoint_lsn FROM pg_control_checkpoint()');
my $after = $primary->lsn('insert');
stops_at_target_ok($standby, $ckpt,
	'window: the standby shut down at the end-of-recovery checkpoint');
like(slurp_file($standby->data_dir . '/dbgate.stash'), qr/rc_rate\0/,
	'window: dbgate.stash names the re-created budget');
takes_back_ok($standby, 'window: the standby takes the change back from dbgate.stash');
$primary->wait_for_catchup($standby, 'replay', $after);
is($standby->safe_psql('postgres',
		q{SELECT (SELECT stats_reset FROM dbgate.status WHERE budget = 'rc_rate')
		       > (SELECT stats_reset FROM dbgate.status WHERE budget = 'rc_other')}),
	't', 'window: at the late CONFIRM the re-created budget is a new one');
window_close($primary);

$standby->promote;
ok($standby->poll_query_until('postgres', 'SELECT pg_is_in_recovery()', 'f'),
	'the standby is promoted');
is($standby->safe_psql('postgres',
		q{SELECT string_agg(budget || ':' || max_active, ' ' ORDER BY budget) FROM dbgate.budgets}),
	'rc_other:7 rc_rate:5', 'the promoted standby has the configuration');
($st) = run_sql($standby, 'SELECT 8', user => 'rc_other');
is(counts($standby, 'rc_other'), '1:0', 'and gates with it');

$standby->stop;
$primary->stop;
done_testing();
