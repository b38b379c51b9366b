# Key limits (1.3) are configuration: durable, replicated, bounded.
#   - dbgate.max_key_limits bounds the set_key_limit entries of all budgets
#     together: one more fails with 53400 and changes nothing; replacing
#     an entry that exists still works;
#   - they survive a clean restart and a crash restart (the state file);
#   - a standby with a smaller dbgate.max_key_limits keeps those that fit
#     (by budget name and key) with a WARNING, both from the state file of
#     its base backup and from a replayed change, and follows the
#     primary's changes within that bound;
#   - dropping the budget on the primary removes them on the standby too.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::RealBin/../perl";
use DbgateTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $primary = dbgate_node('kl_primary', streaming => 1,
	conf => "dbgate.max_key_limits = 4\n");
$primary->safe_psql(
	'postgres', q{
	SET client_min_messages = error;
	SELECT dbgate.create_budget('kl', 4, key_by => 'setting:app.tenant');
	SELECT dbgate.create_budget('kl_b', 2, key_by => 'user');
	SELECT dbgate.set_key_limit('kl', 't1', 1);
	SELECT dbgate.set_key_limit('kl', 't2', max_queued => 2);
	SELECT dbgate.set_key_limit('kl', 't3', max_rate => 5, rate_burst => 2);
	SELECT dbgate.set_key_limit('kl_b', 'alice', 2);
});
my $limits_sql = q{SELECT coalesce(string_agg(format('%s/%s:%s:%s:%s:%s', budget, key, max_active,
	max_queued, max_rate, rate_burst), ' ' ORDER BY budget, key), '') FROM dbgate.key_limits};
my $all4 = 'kl/t1:1::: kl/t2::2:: kl/t3:::5:2 kl_b/alice:2:::';
is($primary->safe_psql('postgres', $limits_sql), $all4, 'four key limits');

my ($state, $out, $err) = run_sql($primary,
	q{SELECT dbgate.set_key_limit('kl', 't4', 1)});
is($state, '53400', 'a fifth one: 53400');
like($err, qr/too many key limits/, 'saying so');
is($primary->safe_psql('postgres', $limits_sql), $all4, 'and nothing changed');
($state, $out, $err) = run_sql($primary,
	q{SELECT dbgate.set_key_limit('kl', 't1', 2); SELECT dbgate.set_key_limit('kl', 't1', 1)});
is($state, '', 'replacing one that exists works at the bound') or diag($err);

$primary->restart;
is($primary->safe_psql('postgres', $limits_sql), $all4, 'they survive a restart');
$primary->stop('immediate');
$primary->start;
is($primary->safe_psql('postgres', $limits_sql), $all4, 'and a crash restart');

# a standby with room for two: the state file of the base backup
$primary->safe_psql('postgres', 'CHECKPOINT');
$primary->backup('b1');
my $standby = PostgreSQL::Test::Cluster->new('kl_standby');
$standby->init_from_backup($primary, 'b1', has_streaming => 1);
$standby->append_conf('postgresql.conf', "dbgate.max_key_limits = 2\n");
$standby->start;
$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres', $limits_sql), 'kl/t1:1::: kl/t2::2::',
	'the standby keeps the two that fit, by budget and key');
ok($standby->log_contains(qr/WARNING:  dbgate left out 2 of 4 key limits of/),
	'with a WARNING');

# a replayed change: the primary's image has four again
my $offset = -s $standby->logfile;
$primary->safe_psql('postgres', q{SET client_min_messages = error;
	SELECT dbgate.reset_key_limit('kl', 't1');
	SELECT dbgate.set_key_limit('kl', 't0', 3);});
$primary->wait_for_catchup($standby);
is($primary->safe_psql('postgres', $limits_sql),
	'kl/t0:3::: kl/t2::2:: kl/t3:::5:2 kl_b/alice:2:::', 'the primary changed one');
is($standby->safe_psql('postgres', $limits_sql), 'kl/t0:3::: kl/t2::2::',
	'the standby replays it and keeps the two that fit');
ok($standby->log_contains(qr/WARNING:  dbgate left out 2 of 4 key limits of the configuration change replayed at/, $offset),
	'with a WARNING for the replayed change');
($state, $out, $err) = run_sql($standby, q{SELECT dbgate.set_key_limit('kl', 't9', 1)});
is($state, '25006', 'set_key_limit on the standby: 25006');

# fewer than the standby's bound: all of them
$primary->safe_psql('postgres', q{SELECT dbgate.drop_budget('kl')});
$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres', $limits_sql), 'kl_b/alice:2:::',
	'dropping a budget removes its key limits on the standby too');

$standby->stop;
$primary->stop;
done_testing();
