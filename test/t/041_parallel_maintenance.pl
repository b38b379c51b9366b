# A budget's parallel_workers caps parallel maintenance too: CREATE INDEX,
# REINDEX and VACUUM size their workers by max_parallel_maintenance_workers,
# which a session may raise.  With parallel_workers = 0 no worker is
# launched, with 1 at most one; an ungated role and a budget in shadow mode
# get what they ask for; SHOW afterwards gives the session's own value.
#
# Observed two ways: VACUUM VERBOSE reports "launched N parallel vacuum
# workers ... (planned: M)"; for an index build (which reports nothing) the
# postmaster's log (log_min_messages = debug1) names every worker it
# starts, "parallel worker for PID <the builder>".  The postmaster writes
# that line before it starts the worker, and the build waits for every
# worker it launched, so once the build has returned the log holds all of
# them, however fast or slow the workers were.
use strict;
use warnings FATAL => 'all';

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use DbgateTest;

my $node = dbgate_node(
	'parallel_maintenance',
	conf => "max_worker_processes = 16\n"
	  . "max_parallel_workers = 16\n"
	  . "autovacuum = off\n"
	  . "log_min_messages = debug1\n");

$node->safe_psql(
	'postgres', q{
	CREATE ROLE pm_owner NOLOGIN;
	GRANT CREATE ON SCHEMA public TO pm_owner;
	CREATE ROLE pm_free LOGIN IN ROLE pm_owner;
	CREATE ROLE pm_zero LOGIN IN ROLE pm_owner;
	CREATE ROLE pm_one LOGIN IN ROLE pm_owner;
	CREATE ROLE pm_shadow LOGIN IN ROLE pm_owner;
	SELECT dbgate.create_budget('pm0', 4, parallel_workers => 0);
	SELECT dbgate.create_budget('pm1', 4, parallel_workers => 1);
	SELECT dbgate.create_budget('pm_sh', 1, parallel_workers => 0,
								enforce => false);
	SELECT dbgate.assign_role('pm_zero', 'pm0');
	SELECT dbgate.assign_role('pm_one', 'pm1');
	SELECT dbgate.assign_role('pm_shadow', 'pm_sh');

	-- about 110 pages; four workers whatever the size
	CREATE TABLE pm_build (id int, pad text) WITH (parallel_workers = 4);
	INSERT INTO pm_build SELECT i, repeat('x', 400) FROM generate_series(1, 2000) i;
	ALTER TABLE pm_build OWNER TO pm_owner;

	-- five indexes: up to four parallel vacuum workers
	CREATE TABLE pm_vac (a int, b int, c int, d int, e int);
	INSERT INTO pm_vac SELECT i, i, i, i, i FROM generate_series(1, 20000) i;
	CREATE INDEX ON pm_vac (a);
	CREATE INDEX ON pm_vac (b);
	CREATE INDEX ON pm_vac (c);
	CREATE INDEX ON pm_vac (d);
	CREATE INDEX ON pm_vac (e);
	ALTER TABLE pm_vac OWNER TO pm_owner;
});

# what every session asks for
my $session_settings = q{
	SET max_parallel_maintenance_workers = 4;
	SET min_parallel_table_scan_size = 0;
	SET min_parallel_index_scan_size = 0;
};

# build(ROLE, SQL) -> the parallel workers that the postmaster started for
# the build, and SHOW max_parallel_maintenance_workers after it
sub build
{
	my ($role, $sql) = @_;
	my $b = DbgateTest::Session->new($node, user => $role);
	my $bpid = $b->pid;
	$b->query($session_settings);
	my $offset = -s $node->logfile;
	my (undef, $berr) = $b->query($sql);
	die "build failed: $berr" if $berr =~ /ERROR/;
	my ($show) = $b->query('SHOW max_parallel_maintenance_workers');
	$b->quit;
	my $log = slurp_file($node->logfile, $offset);
	my $n = () = $log =~
	  /starting background worker process "parallel worker for PID $bpid"/g;
	return ($n, $show);
}

my ($max, $show);

($max, $show) = build('pm_free', 'CREATE INDEX pm_i ON pm_build (id)');
cmp_ok($max, '>=', 2, "ungated CREATE INDEX: parallel workers ($max started)");
$node->safe_psql('postgres', 'DROP INDEX pm_i');

($max, $show) = build('pm_zero', 'CREATE INDEX pm_i ON pm_build (id)');
is($max, 0, 'parallel_workers = 0: CREATE INDEX launches no parallel worker');
is($show, '4', 'parallel_workers = 0: SHOW gives the session\'s value afterwards');

($max, $show) = build('pm_zero', 'REINDEX INDEX pm_i');
is($max, 0, 'parallel_workers = 0: REINDEX launches no parallel worker');
$node->safe_psql('postgres', 'DROP INDEX pm_i');

($max, $show) = build('pm_one', 'CREATE INDEX pm_i ON pm_build (id)');
is($max, 1, 'parallel_workers = 1: CREATE INDEX launches one parallel worker');
is($show, '4', 'parallel_workers = 1: SHOW gives the session\'s value afterwards');
$node->safe_psql('postgres', 'DROP INDEX pm_i');

($max, $show) = build('pm_shadow', 'CREATE INDEX pm_i ON pm_build (id)');
cmp_ok($max, '>=', 2, "shadow mode caps nothing: CREATE INDEX ($max started)");
$node->safe_psql('postgres', 'DROP INDEX pm_i');

# vacuum_workers(ROLE) -> (launched, planned) of VACUUM (PARALLEL 4), the
# largest of what VERBOSE reports ('' when no parallel vacuum ran)
my $deleted = 0;
sub vacuum_workers
{
	my ($role) = @_;
	# dead rows, so that the indexes are vacuumed
	$node->safe_psql('postgres',
		"DELETE FROM pm_vac WHERE a % 10 = $deleted");
	$deleted++;
	my ($state, $out, $err) = run_sql($node,
		$session_settings
		  . 'VACUUM (PARALLEL 4, INDEX_CLEANUP ON, VERBOSE) pm_vac;'
		  . 'SHOW max_parallel_maintenance_workers;',
		user => $role);
	die "VACUUM failed: $err" if $state ne '';
	my ($launched, $planned) = ('', '');
	while ($err =~ /launched (\d+) parallel vacuum workers? for index \w+ \(planned: (\d+)\)/g)
	{
		$launched = $1 if $launched eq '' || $1 > $launched;
		$planned = $2 if $planned eq '' || $2 > $planned;
	}
	return ($launched, $planned, $out);
}

my ($launched, $planned, $out);
($launched, $planned) = vacuum_workers('pm_free');
is($planned, '4', 'ungated VACUUM (PARALLEL 4): four workers planned');

($launched, $planned, $out) = vacuum_workers('pm_zero');
is("$launched/$planned", '/',
	'parallel_workers = 0: VACUUM (PARALLEL 4) runs no parallel vacuum');
is($out, '4', 'parallel_workers = 0: SHOW gives the session\'s value after VACUUM');

($launched, $planned) = vacuum_workers('pm_one');
is("$launched/$planned", '1/1',
	'parallel_workers = 1: VACUUM (PARALLEL 4) launches one worker');

($launched, $planned) = vacuum_workers('pm_shadow');
is($planned, '4', 'shadow mode caps nothing: VACUUM (PARALLEL 4) plans four');

$node->stop;
done_testing();
