# The way down from 1.3 to 1.2 (docs/downgrading.md, "From 1.3 to 1.2"),
# followed step by step with the statements the document gives, on a
# primary and a streaming standby whose budgets use every 1.3 field, 1.2
# and 1.1 fields beside them, role and database assignments and
# quarantine entries on both servers.
#
#   1. 1.3 writes format 4 while any one 1.3 field is away from its
#      default (each of reserved, runaway_after, runaway_action,
#      runaway_budget, adapt, adapt_min, key_by and key_max_queued alone;
#      quarantine needs runaway_after), and format 3 again once it is back;
#   2. the steps: every 1.3 field back to its default in one statement,
#      the check that no budget uses one and the state file's header
#      read from SQL (primary and standby), the quarantine emptied on
#      each server, config_script() kept, the SQL objects made again at
#      1.2 in each database with the grants, a CHECKPOINT that the
#      standby replays, a clean stop of each server;
#   3. what a 1.2 library then reads, checked as 1.2 checks it (no 1.2
#      library is built here; the 1.2 library itself was run against such
#      a data directory by hand): each server's state file is of format 3
#      with a valid CRC, its budget records are byte for byte the format-3
#      records of the budgets' 1.0 to 1.2 fields (DbgateState builds them
#      from the table of fields), its role and database assignments are
#      the ones made; no dbgate.quarantine file is left; replay at the
#      next start begins after the last IMAGE record (the control file's
#      redo location is past the position the state file names), so no
#      format-4 record is met; each database's SQL objects are at 1.2;
#   4. started again (dbgate.max_quarantine taken out of postgresql.conf,
#      as step 6 says), both servers load the file with every budget and
#      assignment, the 1.2 view shows the 1.2 fields as they were, the
#      standby replays a change made through the 1.2 objects and stays at
#      format 3; the kept config_script() runs on a fresh cluster's 1.2
#      objects and gives the same budgets.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use DbgateState;
use DbgateTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# ---------------------------------------------------------------------------
# The statements of docs/downgrading.md, "From 1.3 to 1.2", as written there
my $step1_reset = q{SELECT dbgate.alter_budget(budget, reserved => 0, key_by => '',
                           key_max_active => 0, key_max_queued => 0,
                           key_max_rate => 0, key_rate_burst => 1,
                           runaway_after => '0',
                           runaway_action => 'log', runaway_budget => '',
                           quarantine => '0', adapt => 'off', adapt_min => 1)
  FROM dbgate.budgets;};
my $step1_check = q{SELECT budget FROM dbgate.budgets
 WHERE reserved <> 0 OR key_by IS NOT NULL OR key_max_active <> 0
    OR key_max_queued <> 0 OR key_max_rate <> 0 OR key_rate_burst <> 1
    OR runaway_after <> '0' OR runaway_action <> 'log'
    OR runaway_budget IS NOT NULL OR quarantine <> '0'
    OR adapt <> 'off' OR adapt_min <> 1;};
my $step1_header = q{SELECT pg_read_binary_file('dbgate.state', 4, 4)};
my $step2_remove = q{SELECT dbgate.quarantine_remove();};
my $step2_check = q{SELECT count(*) FROM dbgate.quarantine};
my $step3_script = q{SELECT dbgate.config_script()};
my $step4_recreate =
  q{DROP EXTENSION dbgate; CREATE EXTENSION dbgate VERSION '1.2';};
# a grant of the kind step 4 makes again (the schema and its objects are
# the extension's, and go with it)
my $grant = q{GRANT USAGE ON SCHEMA dbgate TO dg_mon;
	GRANT EXECUTE ON FUNCTION dbgate.budget_config() TO dg_mon;
	GRANT SELECT ON dbgate.budgets TO dg_mon;};

# what pg_read_binary_file() shows of a format version in this machine's
# byte order (the file is in native byte order)
sub header_of
{
	my ($version) = @_;
	return '\\x' . unpack('H*', pack('L', $version));
}

# the format version of a server's state file
sub file_format
{
	my ($node) = @_;
	return state_version(slurp_file($node->data_dir . '/dbgate.state'));
}

# ---------------------------------------------------------------------------
# A primary and a standby of 1.3, every 1.3 field in use
my $primary = PostgreSQL::Test::Cluster->new('down_primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf',
	"shared_preload_libraries = 'dbgate'\ndbgate.max_quarantine = 100\n");
$primary->start;

# the budgets' 1.0 to 1.2 fields, as stored (durations in ms, enumerations
# and booleans as integers: DbgateState), which the way down must keep
my %budgets = (
	dg_top => {
		max_active => 8,
		max_queued => 4,
		queue_timeout => 2000,
		weight => 3,
		max_rate => 50,
		rate_burst => 5
	},
	dg_res => {
		max_active => 4,
		max_queued => 2,
		scope => 1,
		idle_in_transaction_timeout => 60000,
		queue_order => 1,
		overtake_limit => 250,
		parent => 'dg_top'
	},
	dg_run => {
		max_active => 3,
		statement_timeout => 30000,
		lock_timeout => 5000,
		parent => 'dg_top',
		weight => 2
	},
	dg_slow => {
		max_active => 1,
		fair => 0,
		utility => 1,
		max_memory_mb => 256,
		min_cost => 1000.5
	},
	dg_cancel => { max_active => 2, parallel_workers => 2, enforce => 0 },
	dg_adapt => { max_active => 6 },);
$budgets{$_}{name} = $_ for keys %budgets;

$primary->safe_psql(
	'postgres', q{
	CREATE EXTENSION dbgate;
	CREATE DATABASE dg_other;
	CREATE ROLE dg_alice LOGIN;
	CREATE ROLE dg_bob LOGIN;
	CREATE ROLE dg_mon LOGIN;
	BEGIN;
	SELECT dbgate.create_budget('dg_top', 8, max_queued => 4, queue_timeout => '2s',
	                            weight => 3, max_rate => 50, rate_burst => 5);
	SELECT dbgate.create_budget('dg_res', 4, max_queued => 2, scope => 'transaction',
	                            idle_in_transaction_timeout => '1min', queue_order => 'lifo',
	                            overtake_limit => '250ms', parent => 'dg_top');
	SELECT dbgate.create_budget('dg_run', 3, statement_timeout => '30s', lock_timeout => '5s',
	                            parent => 'dg_top', weight => 2);
	SELECT dbgate.create_budget('dg_slow', 1, fair => false, utility => true,
	                            max_memory_mb => 256, min_cost => 1000.5);
	SELECT dbgate.create_budget('dg_cancel', 2, parallel_workers => 2, enforce => false);
	SELECT dbgate.create_budget('dg_adapt', 6);
	SELECT dbgate.assign_role('dg_alice', 'dg_run');
	SELECT dbgate.assign_role('dg_bob', 'dg_adapt');
	SELECT dbgate.assign_database('dg_other', 'dg_slow');
	COMMIT;
});
$primary->safe_psql('dg_other', 'CREATE EXTENSION dbgate');
$primary->safe_psql('postgres', $grant);
my ($alice, $bob, $other) = split /\|/,
  $primary->safe_psql(
	'postgres', q{SELECT (SELECT oid FROM pg_roles WHERE rolname = 'dg_alice'),
	                     (SELECT oid FROM pg_roles WHERE rolname = 'dg_bob'),
	                     (SELECT oid FROM pg_database WHERE datname = 'dg_other')});

$primary->backup('down');
my $standby = PostgreSQL::Test::Cluster->new('down_standby');
$standby->init_from_backup($primary, 'down', has_streaming => 1);
$standby->start;

is(file_format($primary), 3, 'with 1.2 fields in use and no 1.3 one, the state file is of format 3');

# ---------------------------------------------------------------------------
# 1. Any one 1.3 field makes format 4
my @alone = (
	[ 'reserved', "'dg_res', reserved => 2", "'dg_res', reserved => 0" ],
	[ 'runaway_after', "'dg_cancel', runaway_after => '30s'", "'dg_cancel', runaway_after => '0'" ],
	[ 'runaway_action', "'dg_cancel', runaway_action => 'cancel'", "'dg_cancel', runaway_action => 'log'" ],
	[ 'runaway_budget', "'dg_run', runaway_budget => 'dg_slow'", "'dg_run', runaway_budget => ''" ],
	[ 'adapt', "'dg_adapt', adapt => 'shadow'", "'dg_adapt', adapt => 'off'" ],
	[ 'adapt_min', "'dg_adapt', adapt_min => 2", "'dg_adapt', adapt_min => 1" ],
	[ 'key_by', "'dg_adapt', key_by => 'user'", "'dg_adapt', key_by => ''" ],
	[ 'key_max_queued', "'dg_adapt', key_max_queued => 3", "'dg_adapt', key_max_queued => 0" ],);
foreach my $case (@alone)
{
	my ($field, $set, $reset) = @$case;
	$primary->safe_psql('postgres', "SELECT dbgate.alter_budget($set)");
	is(file_format($primary), 4, "$field alone away from its default: format 4");
	$primary->safe_psql('postgres', "SELECT dbgate.alter_budget($reset)");
	is(file_format($primary), 3, "$field back at its default: format 3");
}
my ($state) = run_sql($primary,
	q{SELECT dbgate.alter_budget('dg_run', quarantine => '1min')});
is($state, '22023', 'quarantine is never alone: it needs runaway_after');

# every 1.3 field in use, and quarantine entries on both servers
$primary->safe_psql(
	'postgres', q{
	BEGIN;
	SELECT dbgate.alter_budget('dg_res', reserved => 2);
	SELECT dbgate.alter_budget('dg_run', runaway_after => '1h', runaway_action => 'demote',
	                           runaway_budget => 'dg_slow', quarantine => '10min');
	SELECT dbgate.alter_budget('dg_cancel', runaway_after => '30s', runaway_action => 'cancel');
	SELECT dbgate.alter_budget('dg_adapt', adapt => 'on', adapt_min => 2);
	SELECT dbgate.alter_budget('dg_cancel', key_by => 'setting:app.tenant', key_max_active => 1);
	SELECT dbgate.set_key_limit('dg_cancel', 't1', 1);
	COMMIT;
	SELECT dbgate.quarantine_add('dg_run', 4242, '1h');
	SELECT dbgate.quarantine_add('dg_cancel', 4243, '1h');
});
$primary->wait_for_catchup($standby);
$standby->safe_psql('postgres', q{SELECT dbgate.quarantine_add('dg_cancel', 77, '1h')});
my $fields13 = q{SELECT string_agg(format('%s:%s:%s:%s:%s:%s:%s:%s', budget, reserved,
	runaway_after, runaway_action, runaway_budget, quarantine, adapt, adapt_min), ' ' ORDER BY budget)
	FROM dbgate.budgets};
my $with13 = 'dg_adapt:0:00:00:00:log::00:00:00:on:2 '
  . 'dg_cancel:0:00:00:30:cancel::00:00:00:off:1 '
  . 'dg_res:2:00:00:00:log::00:00:00:off:1 '
  . 'dg_run:0:01:00:00:demote:dg_slow:00:10:00:off:1 '
  . 'dg_slow:0:00:00:00:log::00:00:00:off:1 '
  . 'dg_top:0:00:00:00:log::00:00:00:off:1';
is($primary->safe_psql('postgres', $fields13), $with13, 'every 1.3 field is in use');
is($standby->safe_psql('postgres', $fields13), $with13, 'the standby has replayed them');
is(file_format($primary), 4, 'the primary\'s state file is of format 4');
is(file_format($standby), 4, 'the standby\'s state file is of format 4');
is($primary->safe_psql('postgres', $step2_check), '2', 'the primary has two quarantine entries');
is($standby->safe_psql('postgres', $step2_check), '1', 'the standby has one of its own');

# the 1.2 columns of dbgate.budgets, in the order of the 1.2 view
my $cols12 = 'budget, max_active, max_queued, queue_timeout, statement_timeout, '
  . 'lock_timeout, fair, roles, scope, idle_in_transaction_timeout, parallel_workers, '
  . 'utility, enforce, databases, queue_order, overtake_limit, parent, weight, '
  . 'max_rate, rate_burst, max_memory_mb, min_cost';
my $view12 = $primary->safe_psql('postgres', "SELECT $cols12 FROM dbgate.budgets");
like($view12, qr/^dg_adapt\|6\|/, 'the 1.2 fields before the way down');

# ---------------------------------------------------------------------------
# 2. The steps
# step 1: the 1.3 fields back to their defaults, and the checks
$primary->safe_psql('postgres', $step1_reset);
is($primary->safe_psql('postgres', $step1_check), '', 'step 1: no budget uses a 1.3 field');
is($primary->safe_psql('postgres', $step1_header),
	header_of(3), 'step 1: the state file\'s header says format 3');
$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres', $step1_check), '',
	'step 1: the standby has replayed the change');
is($standby->safe_psql('postgres', $step1_header),
	header_of(3), 'step 1: the standby\'s state file\'s header says format 3');

# step 2: the quarantine emptied on each server
is($primary->safe_psql('postgres', $step2_remove), '2', 'step 2: the primary\'s entries ended');
is($primary->safe_psql('postgres', $step2_check), '0', 'step 2: the primary\'s quarantine is empty');
is($standby->safe_psql('postgres', $step2_remove), '1', 'step 2: the standby\'s entry ended');
is($standby->safe_psql('postgres', $step2_check), '0', 'step 2: the standby\'s quarantine is empty');

# step 3: the script kept
my $script = $primary->safe_psql('postgres', $step3_script);
unlike($script, qr/\b(?:reserved|runaway_after|runaway_action|runaway_budget|quarantine|adapt|adapt_min) =>/,
	'step 3: the script names no 1.3 field');
my (undef, $seen) = run_sql($primary, 'SELECT count(*) FROM dbgate.budgets', user => 'dg_mon');
is($seen, '6', 'before step 4 the role granted reads dbgate.budgets');

# step 4: the SQL objects at 1.2 in each database, and the grants again
foreach my $db ('postgres', 'dg_other')
{
	$primary->safe_psql($db, $step4_recreate);
	is($primary->safe_psql($db, "SELECT extversion FROM pg_extension WHERE extname = 'dbgate'"),
		'1.2', "step 4: the SQL objects of $db are at 1.2");
}
($state) = run_sql($primary, 'SELECT count(*) FROM dbgate.budgets', user => 'dg_mon');
is($state, '42501', 'step 4: the grant went with the 1.3 objects');
$primary->safe_psql('postgres', $grant);
(undef, $seen) = run_sql($primary, 'SELECT count(*) FROM dbgate.budgets', user => 'dg_mon');
is($seen, '6', 'step 4: the grant made again lets the role read dbgate.budgets');
is($primary->safe_psql('postgres', 'SELECT * FROM dbgate.budgets'),
	$view12, 'step 4: the 1.2 view shows the 1.2 fields as they were');

# step 5: a CHECKPOINT that the standby replays, a clean stop of each server
$primary->safe_psql('postgres', 'CHECKPOINT');
$primary->wait_for_catchup($standby, 'replay', $primary->lsn('insert'));
$standby->stop;
$primary->stop;

# ---------------------------------------------------------------------------
# 3. What 1.2 reads

# the format-3 record of budget b, as DbgateState builds it
my $empty = length(state_image(version => 3));
my $recsize = length(state_image(version => 3, budgets => [ { name => 'x' } ])) - $empty;

sub record_of
{
	my ($b) = @_;
	return unpack('H*', substr(state_image(version => 3, budgets => [$b]), 32, $recsize));
}
my %want_records = map { $_ => record_of($budgets{$_}) } keys %budgets;
my $want_roles = join(' ', sort ("$alice:dg_run", "$bob:dg_adapt"));
my $want_dbs = "$other:dg_slow";

sub lsn_number
{
	my ($lsn) = @_;
	my ($hi, $lo) = split m{/}, $lsn;
	return hex($hi) * 2**32 + hex($lo);
}

foreach my $node ($primary, $standby)
{
	my $name = $node->name;
	my $bytes = slurp_file($node->data_dir . '/dbgate.state');
	my ($magic, $version, $nb, $nr, $nd, $flags, $lsn) = unpack('L6 Q', $bytes);
	is($version, 3, "$name: the state file is of format 3");
	is($magic, 0x44424754, "$name: with the magic of a state file");
	is(unpack('L', substr($bytes, -4)),
		crc32c(substr($bytes, 0, -4)), "$name: and a valid CRC");
	is(length($bytes), $empty + $nb * $recsize + ($nr + $nd) * 68,
		"$name: its size is that of $nb budgets, $nr roles and $nd databases in format 3");

	my %records;
	my $p = 32;
	for (1 .. $nb)
	{
		my $rec = substr($bytes, $p, $recsize);
		$records{ unpack('Z64', $rec) } = unpack('H*', $rec);
		$p += $recsize;
	}
	is_deeply(\%records, \%want_records,
		"$name: the budget records are the format-3 records of the 1.0 to 1.2 fields");
	my @roles;
	for (1 .. $nr)
	{
		push @roles, join(':', unpack('L Z64', substr($bytes, $p, 68)));
		$p += 68;
	}
	is(join(' ', sort @roles), $want_roles, "$name: the role assignments");
	my @dbs;
	for (1 .. $nd)
	{
		push @dbs, join(':', unpack('L Z64', substr($bytes, $p, 68)));
		$p += 68;
	}
	is(join(' ', @dbs), $want_dbs, "$name: the database assignment");

	ok(!-e $node->data_dir . '/dbgate.quarantine', "$name: no dbgate.quarantine file is left");

	my ($control) = run_command([ 'pg_controldata', $node->data_dir ]);
	like($control, qr/^Database cluster state:\s+shut down/m, "$name: stopped cleanly");
	my $redo = $control =~ /^Latest checkpoint's REDO location:\s+(\S+)$/m ? $1 : '0/0';
	ok( lsn_number($redo) > $lsn,
		"$name: replay starts at $redo, after the last IMAGE record (state file at "
		  . sprintf('%X/%X', $lsn >> 32, $lsn & 0xFFFFFFFF) . ')');
}

# ---------------------------------------------------------------------------
# 4. Started again: step 6 takes dbgate.max_quarantine out of postgresql.conf
foreach my $node ($primary, $standby)
{
	my $conf = $node->data_dir . '/postgresql.conf';
	my $text = slurp_file($conf);
	$text =~ s/^dbgate\.max_quarantine\b.*\n//mg;
	open my $fh, '>', $conf or die "cannot write $conf: $!";
	print $fh $text;
	close $fh;
}
my $poffset = -s $primary->logfile;
my $soffset = -s $standby->logfile;
$primary->start;
$standby->start;
my $loaded = qr/dbgate loaded 6 budgets, 2 role assignments and 1 database assignments from "dbgate.state"/;
ok($primary->log_contains($loaded, $poffset), 'the primary loads every budget and assignment');
ok($standby->log_contains($loaded, $soffset), 'the standby loads every budget and assignment');
is($primary->safe_psql('postgres', 'SELECT * FROM dbgate.budgets'),
	$view12, 'the primary\'s budgets have their 1.2 fields');
ok($standby->poll_query_until('postgres', 'SELECT * FROM dbgate.budgets', $view12),
	'the standby\'s budgets have their 1.2 fields');

# the script kept in step 3 runs on a fresh cluster's 1.2 objects
my $fresh = dbgate_node('down_fresh', extension => 0);
$fresh->safe_psql(
	'postgres', q{
	CREATE DATABASE dg_other;
	CREATE ROLE dg_alice LOGIN;
	CREATE ROLE dg_bob LOGIN;
	CREATE EXTENSION dbgate VERSION '1.2';
});
my ($sstate, undef, $serr) = run_sql($fresh, $script);
is($sstate, '', 'the kept script runs on 1.2\'s SQL objects') or diag $serr;
is($fresh->safe_psql('postgres', 'SELECT * FROM dbgate.budgets'),
	$view12, 'and makes the same budgets');
$fresh->stop;

# a change through the 1.2 objects: replayed, still format 3
$primary->safe_psql('postgres', q{SELECT dbgate.alter_budget('dg_top', max_queued => 5)});
$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres', q{SELECT max_queued FROM dbgate.budgets WHERE budget = 'dg_top'}),
	'5', 'the standby replays a change made through the 1.2 objects');
is(file_format($primary), 3, 'the primary\'s state file stays of format 3');
is(file_format($standby), 3, 'the standby\'s state file stays of format 3');

$standby->stop;
$primary->stop;
done_testing();
