# The formats of dbgate's WAL records on a streaming standby:
#   - the primary logs format 2 while no budget uses a 1.2 field, format 3
#     once one does (a hierarchy, a rate, ...), format 4 while a 1.3 field
#     (reserved, key_by and the key fields, 'demote') is in use, and format 2 again when none does any more;
#     the standby replays each to the same dbgate.budgets;
#   - a record of format 2 as dbgate 1.1 logged it is replayed, the 1.2
#     fields at their defaults (a 1.2 standby of a 1.1 primary);
#   - reset_stats() and config_script() work on the standby;
#   - a record of a newer format (logged here by a newer dbgate, as far as
#     the standby can tell) stops the standby with a message that says to
#     upgrade dbgate on it: the startup process ends with FATAL and the
#     postmaster shuts down once, without a restart loop; started again,
#     it stops again the same way.
# The records of other versions are logged by test/modules/dbgate_walgen,
# a test-only module that this test builds with PGXS and loads from where
# it built it (walgen_functions() of DbgateTest).
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use DbgateState;
use DbgateTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $primary = dbgate_node('wf_primary', streaming => 1);
$primary->safe_psql(
	'postgres', q{
	CREATE EXTENSION pg_walinspect;
	CREATE ROLE wf_alice LOGIN;
});
# the test module, built in this test's own directory
walgen_functions($primary);
my $alice = $primary->safe_psql('postgres',
	"SELECT oid FROM pg_roles WHERE rolname = 'wf_alice'");

my $standby = dbgate_standby($primary, 'wf_standby', 'b1');

my $all = q{SELECT coalesce(string_agg(b::text, ' ' ORDER BY budget), '')
	FROM dbgate.budgets b};

# The format of the last IMAGE record the primary logged (from its
# description, see dbgate_desc in src/wal.c).
my $lsn0 = $primary->safe_psql('postgres', 'SELECT pg_current_wal_flush_lsn()');

sub last_format
{
	my $desc = $primary->safe_psql(
		'postgres', qq{
		SELECT description FROM pg_get_wal_records_info('$lsn0', pg_current_wal_flush_lsn())
		 WHERE resource_manager = 'dbgate' AND record_type = 'IMAGE'
		 ORDER BY start_lsn DESC LIMIT 1});
	return $desc =~ /^format (\d+),/ ? $1 : "none ($desc)";
}

# The standby replays the primary's configuration.
sub replayed_ok
{
	my ($name) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $want = $primary->safe_psql('postgres', $all);
	ok($standby->poll_query_until('postgres', $all, $want),
		"$name: the standby has the primary's configuration");
}

# ---------------------------------------------------------------------------
# 1. The encoder's choice
$primary->safe_psql(
	'postgres', q{
	SELECT dbgate.create_budget('wf_flat', 2, 3, scope => 'transaction');
	SELECT dbgate.assign_role('wf_alice', 'wf_flat');
});
is(last_format(), 2, 'no 1.2 field used: the record has format 2');
replayed_ok('format 2');

$primary->safe_psql(
	'postgres', q{
	SELECT dbgate.create_budget('wf_top', 8, max_rate => 0.1, rate_burst => 3);
	SELECT dbgate.create_budget('wf_mid', 4, parent => 'wf_top', weight => 9,
	                            queue_order => 'lifo', overtake_limit => '20 ms');
	SELECT dbgate.create_budget('wf_leaf', 2, parent => 'wf_mid',
	                            max_memory_mb => 512, min_cost => 0.3);
});
is(last_format(), 3, 'a hierarchy and 1.2 fields: the record has format 3');
replayed_ok('format 3');
is( $standby->safe_psql(
		'postgres',
		q{SELECT string_agg(format('%s<%s:%s:%s:%s:%s:%s:%s:%s', budget, parent, weight,
		    queue_order, overtake_limit, max_rate, rate_burst, max_memory_mb, min_cost),
		    ' ' ORDER BY budget) FROM dbgate.budgets WHERE budget LIKE 'wf_%'}
	),
	'wf_flat<:1:fifo:00:00:00.1:0:1:0:0 '
	  . 'wf_leaf<wf_mid:1:fifo:00:00:00.1:0:1:512:0.3 '
	  . 'wf_mid<wf_top:9:lifo:00:00:00.02:0:1:0:0 '
	  . 'wf_top<:1:fifo:00:00:00.1:0.1:3:0:0',
	'the standby has every 1.2 field exactly');

$primary->safe_psql(
	'postgres', q{
	SELECT dbgate.drop_budget('wf_top', force => true);
	SELECT dbgate.drop_budget('wf_mid', force => true);
	SELECT dbgate.alter_budget('wf_leaf', max_memory_mb => 0, min_cost => 0);
});
is(last_format(), 2, 'every 1.2 field back at its default: format 2 again');
replayed_ok('format 2 again');

$primary->safe_psql(
	'postgres', q{
	SELECT dbgate.create_budget('wf_p4', 4);
	SELECT dbgate.create_budget('wf_c4', 3, parent => 'wf_p4', reserved => 3);
	SELECT dbgate.create_budget('wf_d4', 1, parent => 'wf_p4', reserved => 1);
	SELECT dbgate.alter_budget('wf_p4', adapt => 'on', adapt_min => 2);
});
is(last_format(), 4, 'a reservation (1.3): the record has format 4');
replayed_ok('format 4');
is( $standby->safe_psql(
		'postgres',
		q{SELECT string_agg(format('%s<%s:%s:%s:%s', budget, parent, reserved, adapt, adapt_min),
		  ' ' ORDER BY budget) FROM dbgate.budgets WHERE budget LIKE 'wf_%4'}
	),
	'wf_c4<wf_p4:3:off:1 wf_d4<wf_p4:1:off:1 wf_p4<:0:on:2',
	'the standby has the reservations exactly');
$primary->safe_psql('postgres', q{SELECT dbgate.alter_budget(b, reserved => 0) FROM unnest(ARRAY['wf_c4', 'wf_d4']) b;
	SELECT dbgate.alter_budget('wf_p4', adapt => 'off', adapt_min => 1)});
is(last_format(), 3, 'no reservation left, a hierarchy: format 3');
replayed_ok('format 3 after 4');
$primary->safe_psql('postgres', q{SELECT dbgate.drop_budget('wf_p4', force => true)});
is(last_format(), 2, 'no 1.2 or 1.3 field: format 2');
$primary->safe_psql('postgres', q{SELECT dbgate.drop_budget(b) FROM unnest(ARRAY['wf_c4', 'wf_d4']) b});
replayed_ok('format 2 after 4');

$primary->safe_psql('postgres',
	q{SELECT dbgate.create_budget('wf_r4', 2, runaway_after => '1 s', runaway_action => 'demote',
	                              runaway_budget => 'wf_flat')});
is(last_format(), 4, "runaway_action 'demote' (1.3): the record has format 4");
replayed_ok("format 4 with 'demote'");
is( $standby->safe_psql(
		'postgres',
		q{SELECT format('%s:%s:%s', runaway_after, runaway_action, runaway_budget)
		  FROM dbgate.budgets WHERE budget = 'wf_r4'}
	),
	'00:00:01:demote:wf_flat',
	"the standby has 'demote' and its runaway_budget");
$primary->safe_psql('postgres', q{SELECT dbgate.drop_budget('wf_r4')});
is(last_format(), 2, "no 'demote' left: format 2");
replayed_ok("format 2 after 'demote'");

$primary->safe_psql('postgres',
	q{SELECT dbgate.create_budget('wf_k4', 4, key_by => 'setting:app.tenant', key_max_active => 2,
	                              key_max_queued => 5, key_max_rate => 2.5, key_rate_burst => 3)});
is(last_format(), 4, 'key_by (1.3): the record has format 4');
replayed_ok('format 4 with key_by');
is( $standby->safe_psql(
		'postgres',
		q{SELECT format('%s:%s:%s:%s:%s', key_by, key_max_active, key_max_queued, key_max_rate,
		  key_rate_burst) FROM dbgate.budgets WHERE budget = 'wf_k4'}
	),
	'setting:app.tenant:2:5:2.5:3',
	'the standby has key_by and the key fields');
$primary->safe_psql('postgres',
	q{SELECT dbgate.alter_budget('wf_k4', key_by => '', key_max_active => 0, key_max_queued => 0,
	                             key_max_rate => 0, key_rate_burst => 1)});
is(last_format(), 2, 'no key field left: format 2');
replayed_ok('format 2 after key_by');
$primary->safe_psql('postgres', q{SELECT dbgate.drop_budget('wf_k4')});

# ---------------------------------------------------------------------------
# 2. A record of format 2 as dbgate 1.1 logged it
my $v11 = state_image(
	version => 2,
	budgets => [
		{
			name => 'wf_v11',
			max_active => 5,
			max_queued => 6,
			queue_timeout => 7000,
			fair => 0,
			scope => 1,
			parallel_workers => 2,
			utility => 1
		}
	],
	roles => [ [ $alice, 'wf_v11' ] ]);
my $xid = walgen_log_image($primary, $v11);
$primary->safe_psql('postgres', "SELECT walgen_confirm('$xid')");
my $v11_row =
    '(wf_v11,5,6,00:00:07,00:00:00,00:00:00,f,{wf_alice},transaction,00:00:00,2,t,t,{},'
  . 'fifo,00:00:00.1,,1,0,1,0,0,0,,0,0,0,1,00:00:00,log,,00:00:00,off,1)';
ok($standby->poll_query_until('postgres', $all, $v11_row),
	'a format-2 record of dbgate 1.1 is replayed, the 1.2 fields at their defaults');

# On a standby, reset_stats() and config_script() work (they write
# nothing), and the mutating functions fail as in 030_config_standby
my ($st, $out, $err) = run_sql($standby,
	"SELECT dbgate.reset_stats(); SELECT dbgate.reset_stats('wf_v11');");
is($st, '', 'reset_stats() works on the standby') or diag($err);
($st, $out, $err) = run_sql($standby, 'SELECT dbgate.config_script()');
like($out, qr/create_budget\('wf_v11', max_active => 5, max_queued => 6, queue_timeout => '7000 ms', fair => false, scope => 'transaction', parallel_workers => 2, utility => true\);\nSELECT dbgate.assign_role\('wf_alice', 'wf_v11'\);/,
	'config_script() works on the standby (the 1.2 fields at their defaults not named)');

# ---------------------------------------------------------------------------
# 3. A record of a newer format stops the standby
my $standby_pid = $standby->{_pid};
my $offset = -s $standby->logfile;
my $newer = state_image(version => 5) . "\0" x 64;
walgen_log_image($primary, $newer);

my $fatal =
  qr/FATAL:  dbgate configuration record at [0-9A-F]+\/[0-9A-F]+ has format version 5, which this version of dbgate cannot replay/;
$standby->wait_for_log(qr/database system is shut down/, $offset);
my $log = slurp_file($standby->logfile, $offset);
like($log, $fatal, 'the standby stops at the record with FATAL');
like($log,
	qr/HINT:  Upgrade dbgate on this server to the version of the primary, then start the server again\./,
	'and says to upgrade dbgate on this server');
like(
	$log,
	qr/startup process \(PID \d+\) exited with exit code 1.*shutting down due to startup process failure/s,
	'the postmaster shuts down because the startup process failed');
my $tries = 0;
$tries++ while kill(0, $standby_pid) && $tries < 100 && sleep(1);
ok(!kill(0, $standby_pid), 'the standby postmaster has exited');
my @fatals = $log =~ /$fatal/g;
is(scalar(@fatals), 1, 'recovery was tried once: no restart loop');
$standby->{_pid} = undef;
is(state_version(slurp_file($standby->data_dir . '/dbgate.state')),
	2, 'the standby state file still holds the last image it installed');

# Started again, it stops again the same way.  It may accept connections
# for a moment before it replays the record, so pg_ctl may report a start,
# and the postmaster may be gone before anyone reads its pid file: pg_ctl
# is run here directly, as $node->start runs it, without start()'s reading
# of the pid file (which gives up the whole test when the file is gone).
$offset = -s $standby->logfile;
{
	local %ENV = $standby->_get_env(PGAPPNAME => undef);
	PostgreSQL::Test::Utils::system_log('pg_ctl', '-w', '-D', $standby->data_dir,
		'-l', $standby->logfile, '-o', '--cluster-name=' . $standby->name,
		'start');
}
$standby->wait_for_log(qr/database system is shut down/, $offset);
like(slurp_file($standby->logfile, $offset),
	$fatal, 'started again, it stops at the same record with the same message');
my $pidfile = $standby->data_dir . '/postmaster.pid';
$tries = 0;
$tries++ while -e $pidfile && $tries < 100 && sleep(1);
ok(!-e $pidfile, 'and its postmaster exits again (no postmaster.pid left)');
$standby->{_pid} = undef;

$primary->stop;
done_testing();
