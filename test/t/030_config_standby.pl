# Configuration changes travel with the WAL: a streaming standby and a
# cascading standby apply every committed change of the primary as they
# replay it, never one that was rolled back or aborted (also not one whose
# transaction failed after its configuration record was logged); the
# mutating functions fail on a standby with SQLSTATE 25006 and change
# nothing; a standby gates its own sessions with its own counters; a
# promoted standby keeps the configuration and accepts changes, and its
# cascading standby follows it.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use DbgateTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $primary = PostgreSQL::Test::Cluster->new('cfg_primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', "shared_preload_libraries = 'dbgate'\n");
$primary->start;
$primary->safe_psql(
	'postgres', q{
	CREATE EXTENSION dbgate;
	CREATE EXTENSION pg_walinspect;
	-- dbgate's IMAGE records flushed since lsn (see 3. below)
	CREATE FUNCTION dbgate_images_since(lsn pg_lsn) RETURNS bigint
	LANGUAGE plpgsql AS $$
	BEGIN
		RETURN (SELECT count(*) FROM pg_get_wal_records_info(lsn, pg_current_wal_flush_lsn())
				 WHERE resource_manager = 'dbgate' AND record_type = 'IMAGE');
	EXCEPTION WHEN OTHERS THEN
		RETURN 0;
	END $$;
	CREATE ROLE s_alice LOGIN;
	CREATE ROLE s_bob LOGIN;
	CREATE DATABASE s_db;
	CREATE TABLE t (k int);
	SELECT dbgate.create_budget('s_before', 2);
	SELECT dbgate.assign_role('s_bob', 's_before');
});

$primary->backup('b1');
my $standby = PostgreSQL::Test::Cluster->new('cfg_standby');
$standby->init_from_backup($primary, 'b1', has_streaming => 1);
$standby->start;
$standby->backup('b2');
my $cascade = PostgreSQL::Test::Cluster->new('cfg_cascade');
$cascade->init_from_backup($standby, 'b2', has_streaming => 1);
$cascade->start;

my $conf_sql = q{SELECT coalesce(string_agg(format('%s:%s:%s:%s:%s:%s:%s',
	budget, max_active, max_queued, scope, enforce, roles, databases), ' ' ORDER BY budget), '')
	FROM dbgate.budgets};

# The primary's configuration reaches both standbys.
sub replayed_ok
{
	my ($name, %p) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	my $src = $p{from} // $primary;
	my $want = $src->safe_psql('postgres', $conf_sql);
	for my $node (@{ $p{to} // [ $standby, $cascade ] })
	{
		ok($node->poll_query_until('postgres', $conf_sql, $want),
			"$name: " . $node->name . ' has the configuration');
	}
	return $want;
}

is($standby->safe_psql('postgres', $conf_sql),
	's_before:2:0:statement:t:{s_bob}:{}',
	'the standby starts with the configuration of the base backup');
replayed_ok('base backup');

# 1. every kind of change, one transaction each and several in one
$primary->safe_psql('postgres',
	"SELECT dbgate.create_budget('s_one', 3, 4, scope => 'transaction')");
replayed_ok('create_budget');
$primary->safe_psql('postgres',
	"SELECT dbgate.alter_budget('s_one', max_active => 5, enforce => false)");
replayed_ok('alter_budget');
$primary->safe_psql(
	'postgres', q{
	BEGIN;
	SELECT dbgate.assign_role('s_alice', 's_one');
	SELECT dbgate.assign_database('s_db', 's_one');
	SELECT dbgate.create_budget('s_two', 1);
	SELECT dbgate.unassign_role('s_bob');
	COMMIT;
});
my $conf = replayed_ok('assignments and a create in one transaction');
like($conf, qr/s_one:5:4:transaction:f:\{s_alice\}:\{s_db\}/,
	'the standby has the assignments');
$primary->safe_psql('postgres', "SELECT dbgate.drop_budget('s_before')");
replayed_ok('drop_budget');

# 2. a rolled-back change never appears
$primary->safe_psql(
	'postgres', q{
	BEGIN;
	SELECT dbgate.create_budget('s_rolled_back', 1);
	SELECT dbgate.alter_budget('s_one', max_active => 99);
	ROLLBACK;
});

# 3. a transaction that fails at COMMIT after its configuration record was
# logged: a serialization failure, which PostgreSQL raises after the
# pre-commit callbacks
my $lsn0 = $primary->lsn('flush');
my $s1 = DbgateTest::Session->new($primary);
my $s2 = DbgateTest::Session->new($primary);
$s1->query('BEGIN ISOLATION LEVEL SERIALIZABLE; SELECT count(*) FROM t WHERE k = 1');
$s2->query('BEGIN ISOLATION LEVEL SERIALIZABLE; SELECT count(*) FROM t WHERE k = 2');
$s1->query('INSERT INTO t VALUES (2)');
$s2->query(
	"INSERT INTO t VALUES (1); SELECT dbgate.create_budget('s_ghost', 1); SELECT dbgate.alter_budget('s_one', max_active => 77)"
);
# (pg_get_wal_records_info() fails with "could not find a valid record"
# while no whole record after its start is flushed: on 17 and 18 the WAL
# writer may not have flushed the INSERTs yet, or only part of a record.
# Such a moment counts as no record yet, dbgate_images_since() above:
# the poll below asks again.)
my $images_sql = qq{SELECT dbgate_images_since('$lsn0')};
my $images = $primary->safe_psql('postgres', $images_sql);
my (undef, $err) = $s1->query('COMMIT');
is($err, '', 'the first serializable transaction commits');
my (undef, $err2, $state) = $s2->query('COMMIT');
is($state, '40001', 'the second fails at COMMIT with a serialization failure');
# (the abort record is not flushed at once: the WAL writer does it)
ok($primary->poll_query_until('postgres', $images_sql, $images + 1),
	'its configuration record had been logged');
$s1->quit;
$s2->quit;

# a later committed change: once it is on the standbys, so would be the
# others, had they been applied
$primary->safe_psql('postgres', "SELECT dbgate.create_budget('s_marker', 1)");
$conf = replayed_ok('a change after the rolled-back and the aborted one');
unlike($conf, qr/s_rolled_back|s_ghost|:99:|:77:/,
	'neither the rolled-back nor the aborted change appears anywhere');

# 4. on a standby the mutating functions fail like any write, change nothing
my %calls = (
	create_budget => q{SELECT dbgate.create_budget('s_x', 1)},
	alter_budget => q{SELECT dbgate.alter_budget('s_one', max_active => 2)},
	drop_budget => q{SELECT dbgate.drop_budget('s_one', true)},
	assign_role => q{SELECT dbgate.assign_role('s_bob', 's_one')},
	unassign_role => q{SELECT dbgate.unassign_role('s_alice')},
	assign_database => q{SELECT dbgate.assign_database('postgres', 's_one')},
	unassign_database => q{SELECT dbgate.unassign_database('s_db')},);
for my $f (sort keys %calls)
{
	my ($st, undef, $e) = run_sql($standby, $calls{$f});
	is($st, '25006', "$f on the standby: SQLSTATE 25006");
	like($e, qr/cannot execute $f\(\) during recovery/, "$f on the standby: message");
}
is($standby->safe_psql('postgres', $conf_sql),
	$conf, 'the failed calls changed nothing on the standby');

# 5. the standby gates its own sessions, with its own counters
$primary->safe_psql('postgres', "SELECT dbgate.create_budget('s_gate', 1)");
$primary->safe_psql('postgres', "SELECT dbgate.assign_role('s_bob', 's_gate')");
replayed_ok('a budget for the standby to enforce');
my ($gst) = run_sql($standby, 'SELECT 1', user => 's_bob');
is($gst, '', 'the assigned role runs on the standby');
is($standby->safe_psql('postgres',
		"SELECT admitted FROM dbgate.status WHERE budget = 's_gate'"),
	'1', 'and is counted in the standby\'s budget');
is($primary->safe_psql('postgres',
		"SELECT admitted FROM dbgate.status WHERE budget = 's_gate'"),
	'0', 'not in the primary\'s');
my $holder = DbgateTest::Session->new($standby, user => 's_bob');
# (a statement that runs until it is canceled below)
$holder->send('SELECT pg_sleep(600)');
ok($standby->poll_query_until('postgres',
		"SELECT active FROM dbgate.status WHERE budget = 's_gate'", '1'),
	'a statement holds the standby\'s only slot');
my ($full) = run_sql($standby, 'SELECT 1', user => 's_bob');
is($full, '53300', 'the next one is refused on the standby (B = 1, Q = 0)');
$standby->safe_psql('postgres',
	"SELECT pg_cancel_backend(" . $holder->pid . ")");
$holder->quit;

# 6. a standby restarted (from its restart point) keeps and resumes
$standby->restart;
$primary->safe_psql('postgres', "SELECT dbgate.alter_budget('s_two', max_queued => 3)");
replayed_ok('after a restart of the standby');

# 7. promotion keeps the configuration and accepts changes; the cascading
# standby follows the new primary
$standby->promote;
ok($standby->poll_query_until('postgres', 'SELECT pg_is_in_recovery()', 'f'),
	'the standby is promoted');
is($standby->safe_psql('postgres', $conf_sql),
	$primary->safe_psql('postgres', $conf_sql),
	'the promoted standby has the configuration it had replayed');
my ($pst) = run_sql($standby,
	"SELECT dbgate.create_budget('s_after_promotion', 2); SELECT dbgate.drop_budget('s_marker')");
is($pst, '', 'the promoted standby accepts changes');
replayed_ok('changes on the promoted standby', from => $standby, to => [$cascade]);
$standby->restart;
like($standby->safe_psql('postgres', $conf_sql), qr/s_after_promotion/,
	'a change made after promotion survives a restart');

$cascade->stop;
$standby->stop;
$primary->stop;
done_testing();
