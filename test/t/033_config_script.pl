# dbgate.config_script() returns SQL that recreates every budget and
# assignment: run on a fresh cluster that has the same roles and
# databases, it gives the same dbgate.budgets, every field of 1.2 and a
# hierarchy included (parents are created before their children, whatever
# their names).
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use DbgateTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $objects = q{
	CREATE ROLE cs_alice LOGIN;
	CREATE ROLE "cs Mixed Case";
	CREATE ROLE "cs'quote";
	CREATE DATABASE cs_db;
	CREATE DATABASE "cs Other";
};
my $src = dbgate_node('script_src');
$src->safe_psql('postgres', $objects);
$src->safe_psql(
	'postgres', q{
	SELECT dbgate.create_budget('cs_one', 3, 4, '1.5 s', '1 min', '250 ms', false,
	                            'transaction', '30 s', 2, true, false);
	SELECT dbgate.create_budget('cs "two"', 1);
	SELECT dbgate.create_budget('cs_three', 7, idle_in_transaction_timeout => '1 day');
	SELECT dbgate.assign_role('cs_alice', 'cs_one');
	SELECT dbgate.assign_role('"cs Mixed Case"', 'cs "two"');
	SELECT dbgate.assign_role('"cs''quote"', 'cs_one');
	SELECT dbgate.assign_database('cs_db', 'cs_three');
	SELECT dbgate.assign_database('cs Other', 'cs "two"');
	SELECT dbgate.create_budget('cs_z_root', 10, max_rate => 0.1, rate_burst => 3,
	                            enforce => false);
	SELECT dbgate.create_budget('cs_m_mid', 5, parent => 'cs_z_root', weight => 4,
	                            queue_order => 'lifo', overtake_limit => '20 ms');
	SELECT dbgate.create_budget('cs_a_leaf', 2, parent => 'cs_m_mid',
	                            max_memory_mb => 128, min_cost => 123.456);
	SELECT dbgate.create_budget('cs_0_deep', 1, parent => 'cs_a_leaf',
	                            max_rate => 333.3333333333333, queue_order => 'lifo',
	                            overtake_limit => '0', queue_timeout => '5 s');
	SELECT dbgate.create_budget('cs_b_sibling', 1, parent => 'cs_z_root', weight => 10000);
	SELECT dbgate.assign_role('cs_alice', 'cs_0_deep');
});
my $script = $src->safe_psql('postgres', 'SELECT dbgate.config_script()');
like($script, qr/^BEGIN;\n.*COMMIT;$/s, 'the script is one transaction');

like($script,
	qr/'cs_z_root'.*\n.*'cs_b_sibling'.*\n.*'cs_m_mid'.*\n.*'cs_a_leaf'.*\n.*'cs_0_deep'/,
	'parents come before their children, each level by name');
like($script, qr/'cs_0_deep', .*max_rate => 333\.3333333333333,/,
	'a rate is written exactly');

my $dst = dbgate_node('script_dst');
$dst->safe_psql('postgres', $objects);
my ($state, undef, $err) = run_sql($dst, $script);
is($state, '', 'the script runs on a fresh cluster') or diag($err);

my $all = q{SELECT string_agg(b::text, ' ' ORDER BY budget) FROM dbgate.budgets b};
is($dst->safe_psql('postgres', $all),
	$src->safe_psql('postgres', $all),
	'dbgate.budgets is the same on both clusters');
is($dst->safe_psql('postgres', 'SELECT dbgate.config_script()'),
	$script, 'and so is the script');

$src->stop;
$dst->stop;
done_testing();
