# Point-in-time recovery restores the configuration as of the recovery
# target: a server restored from a base backup and the archived WAL to a
# restore point between two changes has the first and not the second; one
# restored to the end of the WAL has both.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use DbgateTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $primary = PostgreSQL::Test::Cluster->new('pitr_primary');
$primary->init(has_archiving => 1, allows_streaming => 1);
$primary->append_conf('postgresql.conf', "shared_preload_libraries = 'dbgate'\n");
$primary->start;
$primary->safe_psql(
	'postgres', q{
	CREATE EXTENSION dbgate;
	CREATE ROLE pitr_role LOGIN;
	SELECT dbgate.create_budget('p_base', 1);
});
$primary->backup('pb');

$primary->safe_psql(
	'postgres', q{
	SELECT dbgate.create_budget('p_first', 2);
	SELECT dbgate.assign_role('pitr_role', 'p_first');
	SELECT pg_create_restore_point('between');
	SELECT dbgate.create_budget('p_second', 3);
	SELECT dbgate.alter_budget('p_first', max_active => 9);
	SELECT dbgate.drop_budget('p_base');
});
my $conf_sql = q{SELECT string_agg(format('%s:%s:%s', budget, max_active, roles), ' ' ORDER BY budget) FROM dbgate.budgets};
my $final = $primary->safe_psql('postgres', $conf_sql);
is($final, 'p_first:9:{pitr_role} p_second:3:{}', 'the primary has both changes');

# archive the last segment
my $walfile = $primary->safe_psql('postgres',
	'SELECT pg_walfile_name(pg_current_wal_lsn())');
$primary->safe_psql('postgres', 'SELECT pg_switch_wal()');
ok( $primary->poll_query_until(
		'postgres',
		"SELECT last_archived_wal >= '$walfile' FROM pg_stat_archiver", 't'),
	'the WAL is archived');

sub restored
{
	my ($name, $target, $state_file) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init_from_backup($primary, 'pb', has_restoring => 1, standby => 0);
	if (defined $state_file)
	{
		open my $fh, '>:raw', $node->data_dir . '/dbgate.state' or die $!;
		print $fh $state_file;
		close $fh;
	}
	# (archive_mode off: the restored servers must not archive a new
	# timeline into the primary's archive, where the other would follow it)
	$node->append_conf('postgresql.conf',
		($target ? "recovery_target_name = '$target'\n" : '')
		  . "recovery_target_action = 'promote'\narchive_mode = off\n");
	$node->start;
	$node->poll_query_until('postgres', 'SELECT pg_is_in_recovery()', 'f')
	  or die "$name did not finish recovery";
	return $node;
}

my $between = restored('pitr_between', 'between');
is($between->safe_psql('postgres', $conf_sql),
	'p_base:1:{} p_first:2:{pitr_role}',
	'restored to the restore point: the first change, not the second');
$between->restart;
is($between->safe_psql('postgres', $conf_sql),
	'p_base:1:{} p_first:2:{pitr_role}',
	'and so after a restart of the restored server');
my ($st) = run_sql($between, "SELECT dbgate.create_budget('p_new', 1)");
is($st, '', 'the restored server accepts changes');

my $end = restored('pitr_end', undef);
is($end->safe_psql('postgres', $conf_sql),
	$final, 'restored to the end of the WAL: both changes');

# A backup whose state file already holds the later changes (copied while
# they committed): restored to the restore point, the file's configuration
# is kept with a WARNING, and changes made afterwards survive a crash.
my $newer = slurp_file($primary->data_dir . '/dbgate.state');
my $ahead = restored('pitr_ahead', 'between', $newer);
ok($ahead->log_contains(qr/WARNING:.*holds a configuration change logged after the end of recovery/),
	'a state file ahead of the recovery target is reported');
is($ahead->safe_psql('postgres', $conf_sql),
	$final, 'and its configuration is kept');
$ahead->safe_psql('postgres', "SELECT dbgate.create_budget('p_after', 4)");
$ahead->stop('immediate');
$ahead->start;
like($ahead->safe_psql('postgres', $conf_sql), qr/p_after:4/,
	'a change committed after that recovery survives a crash');
$ahead->stop;

$between->stop;
$end->stop;
$primary->stop;
done_testing();
