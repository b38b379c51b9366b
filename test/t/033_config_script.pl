# dbgate.config_script() returns SQL that recreates every budget and
# assignment: run on a fresh cluster that has the same roles and
# databases, it gives the same dbgate.budgets, every field of 1.2 and a
# hierarchy included (parents are created before their children, whatever
# their names).  Each create_budget call names only max_active and the
# fields that are not at their defaults, so that the script of a library
# of 1.2 serving the SQL objects of 1.1 or 1.0 runs on a fresh cluster
# with those objects and recreates the configuration exactly; a script
# that names a 1.2 field does not run there, and changes nothing.  The
# fields that name another budget or depend on it (1.3: runaway_action
# 'demote' with its runaway_budget, quarantine) are set by alter_budget
# once every budget exists.  (1.3) key_by and the key fields are named
# like the others; the key limits follow with set_key_limit.
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
	SELECT dbgate.create_budget('cs_r_slow', 1);
	SELECT dbgate.create_budget('cs_r_demote', 2, runaway_after => '250 ms',
	                            runaway_action => 'demote', runaway_budget => 'cs_r_slow',
	                            quarantine => '1 min');
	SELECT dbgate.create_budget('cs_k_keys', 4, key_by => 'setting:app.tenant',
	                            key_max_active => 2, key_max_queued => 4,
	                            key_max_rate => 12.5, key_rate_burst => 3);
	SELECT dbgate.create_budget('cs_k_user', 1, key_by => 'user');
	SELECT dbgate.set_key_limit('cs_k_keys', 'tenant ''7''', max_active => 1, max_rate => 0.5);
	SELECT dbgate.set_key_limit('cs_k_keys', '', max_queued => 0);
	SELECT dbgate.set_key_limit('cs_k_user', 'cs_alice');
});
my $script = $src->safe_psql('postgres', 'SELECT dbgate.config_script()');
like($script, qr/^BEGIN;\n.*COMMIT;$/s, 'the script is one transaction');

like($script,
	qr/'cs_z_root'.*\n.*'cs_b_sibling'.*\n.*'cs_m_mid'.*\n.*'cs_a_leaf'.*\n.*'cs_0_deep'/,
	'parents come before their children, each level by name');
like($script, qr/'cs_0_deep', .*max_rate => 333\.3333333333333\);/,
	'a rate is written exactly');
like($script, qr/^SELECT dbgate\.create_budget\('cs "two"', max_active => 1\);$/m,
	'a budget at its defaults names max_active alone');
like($script,
	qr/^SELECT dbgate\.create_budget\('cs_m_mid', max_active => 5, queue_order => 'lifo', overtake_limit => '20 ms', parent => 'cs_z_root', weight => 4\);$/m,
	'the 1.2 fields in use are named, in argument order, the others not');
like($script,
	qr/^SELECT dbgate\.create_budget\('cs_one', max_active => 3, max_queued => 4, queue_timeout => '1500 ms', statement_timeout => '60000 ms', lock_timeout => '250 ms', fair => false, scope => 'transaction', idle_in_transaction_timeout => '30000 ms', parallel_workers => 2, utility => true, enforce => false\);$/m,
	'every field not at its default is named');

like($script,
	qr/^SELECT dbgate\.create_budget\('cs_r_demote', max_active => 2, runaway_after => '250 ms'\);$/m,
	"a 'demote' budget is created without its runaway fields");
like($script,
	qr/'cs_r_slow'.*\n(?:.*\n)*SELECT dbgate\.alter_budget\('cs_r_demote', runaway_action => 'demote', runaway_budget => 'cs_r_slow', quarantine => '60000 ms'\);$/m,
	'and gets them in one alter_budget after every budget exists');
like($script,
	qr/^SELECT dbgate\.create_budget\('cs_k_keys', max_active => 4, key_by => 'setting:app\.tenant', key_max_active => 2, key_max_queued => 4, key_max_rate => 12\.5, key_rate_burst => 3\);$/m,
	'key_by and the key fields are named where they are set (1.3)');
like($script, qr/^SELECT dbgate\.create_budget\('cs_k_user', max_active => 1, key_by => 'user'\);$/m,
	'and only those');
like($script,
	qr/^SELECT dbgate\.set_key_limit\('cs_k_keys', '', max_queued => 0\);\nSELECT dbgate\.set_key_limit\('cs_k_keys', 'tenant ''7''', max_active => 1, max_rate => 0\.5\);\nSELECT dbgate\.set_key_limit\('cs_k_user', 'cs_alice'\);$/m,
	'the key limits follow the budgets, naming the values set');

my $dst = dbgate_node('script_dst');
$dst->safe_psql('postgres', $objects);
my ($state, undef, $err) = run_sql($dst, $script);
is($state, '', 'the script runs on a fresh cluster') or diag($err);

my $all = q{SELECT string_agg(b::text, ' ' ORDER BY budget) FROM dbgate.budgets b};
is($dst->safe_psql('postgres', $all),
	$src->safe_psql('postgres', $all),
	'dbgate.budgets is the same on both clusters');
my $kl = q{SELECT string_agg(k::text, ' ' ORDER BY budget, key) FROM dbgate.key_limits k};
is($dst->safe_psql('postgres', $kl), $src->safe_psql('postgres', $kl),
	'and so is dbgate.key_limits');
is($dst->safe_psql('postgres', 'SELECT dbgate.config_script()'),
	$script, 'and so is the script');

# ---------------------------------------------------------------------------
# The SQL objects of 1.1 and of 1.0 (CREATE EXTENSION ... VERSION) served
# by this library.  The configuration is made through them (so it uses no
# 1.2 field); 1.0 has no config_script(), so there the script comes from
# another database of the cluster.  Each cluster also has a database with
# the SQL objects of 1.2, where dbgate.budgets shows every field.
my $old_objects = q{
	CREATE ROLE co_alice LOGIN;
	CREATE ROLE "co Mixed";
	CREATE DATABASE co_db;
	CREATE DATABASE co_full;
};
my %old_config = (
	'1.0' => q{
		SELECT dbgate.create_budget('co_one', 3, 4, '1.5 s', '1 min', '250 ms', false);
		SELECT dbgate.create_budget('co_two', 1);
		SELECT dbgate.create_budget('co_three', 7, max_queued => 2, lock_timeout => '1 s');
		SELECT dbgate.assign_role('co_alice', 'co_one');
		SELECT dbgate.assign_role('"co Mixed"', 'co_three');
	},
	'1.1' => q{
		SELECT dbgate.create_budget('co_one', 3, 4, '1.5 s', '1 min', '250 ms', false,
		                            'transaction', '30 s', 2, true, false);
		SELECT dbgate.create_budget('co_two', 1);
		SELECT dbgate.create_budget('co_three', 7, max_queued => 2, parallel_workers => 0,
		                            idle_in_transaction_timeout => '1 day');
		SELECT dbgate.assign_role('co_alice', 'co_one');
		SELECT dbgate.assign_role('"co Mixed"', 'co_three');
		SELECT dbgate.assign_database('co_db', 'co_two');
	});
my $old_dst;
foreach my $v ('1.0', '1.1')
{
	(my $tag = $v) =~ s/\.//;
	my @nodes;
	foreach my $name ("script_src_$tag", "script_dst_$tag")
	{
		my $n = dbgate_node($name, extension => 0);
		$n->safe_psql('postgres', "CREATE EXTENSION dbgate VERSION '$v'");
		$n->safe_psql('postgres', $old_objects);
		$n->safe_psql('co_full', 'CREATE EXTENSION dbgate');
		push @nodes, $n;
	}
	my ($s, $d) = @nodes;
	$s->safe_psql('postgres', $old_config{$v});
	my $old_script = $s->safe_psql($v eq '1.0' ? 'co_full' : 'postgres',
		'SELECT dbgate.config_script()');
	unlike($old_script, qr/queue_order|overtake_limit|parent|weight|rate|max_memory_mb|min_cost/,
		"$v: the script names no 1.2 field");

	($state, undef, $err) = run_sql($d, $old_script);
	is($state, '', "$v: the script runs on a fresh cluster with the SQL objects of $v")
	  or diag($err);
	foreach my $db ('postgres', 'co_full')
	{
		is($d->safe_psql($db, $all), $s->safe_psql($db, $all),
			"$v: dbgate.budgets is the same on both clusters ($db)");
	}
	is($d->safe_psql('co_full', 'SELECT dbgate.config_script()'),
		$old_script, "$v: and so is the script");
	$s->stop;
	$old_dst = $d if $v eq '1.1';
	$d->stop if $v ne '1.1';
}

# The script of the 1.2 configuration names 1.2 fields: on the SQL objects
# of 1.1 it fails, as one transaction.
my $before = $old_dst->safe_psql('postgres', $all);
($state, undef, $err) = run_sql($old_dst, $script);
is($state, '42883', 'a script naming 1.2 fields does not run on the SQL objects of 1.1');
is($old_dst->safe_psql('postgres', $all), $before, 'and changes nothing');

$old_dst->stop;
$src->stop;
$dst->stop;
done_testing();
