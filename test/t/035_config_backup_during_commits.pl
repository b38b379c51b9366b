# A standby made from a base backup that was taken while configuration
# changes were being committed (by several sessions at once) ends with the
# primary's configuration, and so does a standby that is stopped and started
# again while those changes are replayed.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use DbgateTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $primary = PostgreSQL::Test::Cluster->new('bk_primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf',
	"shared_preload_libraries = 'dbgate'\ndbgate.max_budgets = 512\n");
$primary->start;
$primary->safe_psql('postgres', 'CREATE EXTENSION dbgate');

my $conf_sql = q{SELECT coalesce(string_agg(format('%s:%s:%s', budget, max_active,
	max_queued), ' ' ORDER BY budget), '') FROM dbgate.budgets};

# Three sessions commit changes in a loop: each creates its own budgets,
# alters them and drops every other one.
my @writers;
for my $w (1 .. 3)
{
	my $s = $primary->background_psql('postgres', on_error_stop => 0);
	$s->query_until(
		qr/started/, qq{
\\echo started
DO \$\$
BEGIN
  FOR i IN 1..150 LOOP
    PERFORM dbgate.create_budget('bk_${w}_' || i, 1 + i % 7, i % 5);
    COMMIT;
    PERFORM dbgate.alter_budget('bk_${w}_' || i, max_active => 2 + i % 3);
    COMMIT;
    IF i % 2 = 0 THEN
      PERFORM dbgate.drop_budget('bk_${w}_' || i);
      COMMIT;
    END IF;
  END LOOP;
END
\$\$;
\\echo done_$w
});
	push @writers, $s;
}

# wait until the writers are under way, then take the backup meanwhile
$primary->poll_query_until('postgres',
	q{SELECT count(*) >= 20 FROM dbgate.budgets});
$primary->backup('bk');
my $during = $primary->safe_psql('postgres', 'SELECT count(*) FROM dbgate.budgets');
note("budgets when the backup ended: $during");

my $standby = PostgreSQL::Test::Cluster->new('bk_standby');
$standby->init_from_backup($primary, 'bk', has_streaming => 1);
$standby->start;

# restart the standby while the writers go on (replay is in progress)
$standby->poll_query_until('postgres', q{SELECT count(*) > 0 FROM dbgate.budgets});
$standby->stop('fast');
$standby->start;

for my $w (1 .. 3)
{
	$writers[$w - 1]->query_until(qr/done_$w/, "\\echo done_$w\n");
	$writers[$w - 1]->quit;
}
my $want = $primary->safe_psql('postgres', $conf_sql);
is($primary->safe_psql('postgres', 'SELECT count(*) FROM dbgate.budgets'),
	'225', 'the primary has every budget the writers kept');
ok($standby->poll_query_until('postgres', $conf_sql, $want),
	'the standby from a backup taken during commits ends with the primary\'s configuration');

# a second restart after everything was replayed changes nothing
$standby->restart;
is($standby->safe_psql('postgres', $conf_sql), $want,
	'after another restart the standby still has the primary\'s configuration');

$standby->stop;
$primary->stop;
done_testing();
