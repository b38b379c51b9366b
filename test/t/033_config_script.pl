# dbgate.config_script() returns SQL that recreates every budget and
# assignment: run on a fresh cluster that has the same roles and
# databases, it gives the same dbgate.budgets.
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
});
my $script = $src->safe_psql('postgres', 'SELECT dbgate.config_script()');
like($script, qr/^BEGIN;\n.*COMMIT;$/s, 'the script is one transaction');

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
